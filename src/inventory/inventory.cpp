// Inventory: from one scan to server trees with evidence, state and capabilities.
//
// Inventory::scan reads as its steps; the order matters and each only adds what the one before
// could not know:
//
//   read_processes      /proc (stat, uid, cmdline, the session marker, fd links) of every
//                       process, in one pass; pipe peers by inode
//   load_journal        journal sessions (start records, client_lost); the stdio servers
//                       client configs declare are the caller's (ScanOptions::declared)
//   find_candidates     every process with evidence: exact journal identity, the session
//                       marker, a declared command, or (pipes on stdin+stdout AND an
//                       MCP-looking argv)
//   build_trees         climb from each candidate through the wrappers that launched it (same
//                       stdin, wrapper argv or itself a candidate, or the same marker), stopping
//                       at mcpwarden's relay/keeper, which become the tree's supervisors; the
//                       server, the members and their roles
//   read_details        the second look, only at what the trees need: exe, cwd, env names,
//                       netns of members, pipe modes of the holders of each front's stdio,
//                       socket tables; then each tree's client ends and journal session
//   attach_capabilities ports, connections, unix peers, credential names per member
//   classify_trees      who holds the other end of the front's stdin or stdout, what the
//                       journal says about the session; os-orphan as a clue. Reads nothing.
//   find_remnants       what a dead server left that nothing names, by its process group
//
// A name alone never makes a tree; a ppid alone never makes a state.
#include "inventory/inventory.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "fault/faults.hpp"
#include "inventory/unix_peers.hpp"
#include "journal/query.hpp"
#include "journal/redact.hpp"
#include "proc/pipe_peers.hpp"
#include "sys/fd.hpp"

namespace warden::inventory {

namespace {

std::string lower(std::string_view s) {
    std::string o(s);
    for (char& c : o)
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return o;
}

std::string_view basename(std::string_view p) {
    size_t s = p.rfind('/');
    return s == std::string_view::npos ? p : p.substr(s + 1);
}

bool starts_with(std::string_view s, std::string_view p) {
    return s.substr(0, p.size()) == p;
}
bool ends_with(std::string_view s, std::string_view p) {
    return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

// "@scope/pkg@1.2.3" -> "pkg"; "mcp-server-git==0.6" -> "mcp-server-git".
std::string package_name(std::string_view a) {
    std::string_view b = basename(a);
    size_t at = b.find('@', 1);
    if (at != std::string_view::npos) b = b.substr(0, at);
    size_t eq = b.find("==");
    if (eq != std::string_view::npos) b = b.substr(0, eq);
    for (std::string_view ext : {".js", ".mjs", ".cjs", ".py", ".ts"})
        if (ends_with(b, ext)) b.remove_suffix(ext.size());
    return lower(b);
}

// An argument that names an MCP server by the conventions of the ecosystem.
bool mcp_name(std::string_view arg) {
    if (arg.find("@modelcontextprotocol/") != std::string_view::npos) return true;
    std::string n = package_name(arg);
    if (n.empty()) return false;
    return starts_with(n, "mcp-server-") || starts_with(n, "mcp_server_") ||
           starts_with(n, "server-mcp") || ends_with(n, "-mcp") || ends_with(n, "_mcp") ||
           ends_with(n, "-mcp-server") || ends_with(n, "_mcp_server") || n == "mcp-server";
}

// Runner that fetches and starts a package: npx, uvx, bunx, pipx run, npm exec, uv tool run,
// pnpm dlx, yarn dlx, bun x. Returns the runner's display name or "".
std::string runner(const std::vector<std::string>& argv) {
    if (argv.empty()) return {};
    std::string_view a0 = basename(argv[0]);
    std::string_view a1 = argv.size() > 1 ? std::string_view(argv[1]) : std::string_view();
    std::string_view a2 = argv.size() > 2 ? std::string_view(argv[2]) : std::string_view();
    if (a0 == "npx" || a0 == "uvx" || a0 == "bunx" || a0 == "pnpx") return std::string(a0);
    if ((a0 == "node" || a0 == "nodejs") && (ends_with(a1, "npx-cli.js") || ends_with(a1, "/npx")))
        return "npx";
    if ((a0 == "node" || a0 == "nodejs") && ends_with(a1, "npm-cli.js") && a2 == "exec")
        return "npm exec";
    if (a0 == "npm" && a1 == "exec") return "npm exec";
    if (a0 == "pipx" && a1 == "run") return "pipx run";
    if (a0 == "uv" && (a1 == "run" || (a1 == "tool" && a2 == "run"))) return "uv run";
    if ((a0 == "pnpm" || a0 == "yarn") && a1 == "dlx") return std::string(a0) + " dlx";
    if (a0 == "bun" && (a1 == "x" || a1 == "run")) return "bun " + std::string(a1);
    return {};
}

bool is_shell(std::string_view a0) {
    return a0 == "sh" || a0 == "bash" || a0 == "dash" || a0 == "zsh" || a0 == "ash" || a0 == "ksh";
}

// A process that launches another and otherwise does nothing of its own: `sh -c …`, `env …`,
// a package runner.
bool is_wrapper(const std::vector<std::string>& argv) {
    if (argv.empty()) return false;
    std::string_view a0 = basename(argv[0]);
    if (is_shell(a0)) return std::find(argv.begin(), argv.end(), "-c") != argv.end();
    if (a0 == "env" || a0 == "nohup" || a0 == "setsid" || a0 == "timeout" || a0 == "nice")
        return true;
    return !runner(argv).empty();
}

bool is_supervisor(const Process& p) {
    auto argv = p.argv();
    if (argv.size() < 2 || argv[1] != "run") return false;
    return basename(argv[0]) == "mcpwarden" || basename(p.exe) == "mcpwarden";
}

// Where `p` went when its parent died: PID 1, or a subreaper (systemd --user, tini, …) older
// than it. nullopt for a process whose parent is anything else.
std::optional<OsOrphan> reparented(const Process& p, const ProcessTable& table) {
    if (p.ppid == 1) return OsOrphan{1, "reparented to PID 1"};
    const Process* parent = table.find(p.ppid);
    if (!parent || !started_before(parent->id, p.id)) return std::nullopt;
    if (parent->comm == "systemd" || parent->comm == "init" || parent->comm == "tini" ||
        parent->comm == "dumb-init")
        return OsOrphan{parent->id.pid, fmt::format("reparented to subreaper {} ({})",
                                                    parent->id.pid, escape_bytes(parent->comm))};
    return std::nullopt;
}

const FdInfo* fd_of(const Process& p, int fd) {
    for (const auto& f : p.fds)
        if (f.fd == fd) return &f;
    return nullptr;
}

bool stream_fd(const FdInfo* f) {
    return f && (f->kind == FdInfo::Kind::Pipe || f->kind == FdInfo::Kind::Socket);
}

bool same_stdin(const Process& a, const Process& b) {
    const FdInfo* x = fd_of(a, 0);
    const FdInfo* y = fd_of(b, 0);
    return stream_fd(x) && stream_fd(y) && x->inode == y->inode && x->kind == y->kind;
}

std::string join_argv(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v) {
        if (!s.empty()) s.push_back(' ');
        s += escape_bytes(a);
    }
    return s;
}

std::string join_words(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& a : v)
        s += (s.empty() ? "" : " ") + a;
    return s;
}

std::string fmt_time(int64_t ns) {
    if (ns <= 0) return "unknown";
    time_t secs = static_cast<time_t>(ns / 1000000000);
    tm utc{};
    ::gmtime_r(&secs, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
    return fmt::format("{}.{:03}Z", buf, (ns / 1000000) % 1000);
}

struct Candidate {
    std::vector<Evidence> evidence;
    std::string name;     // declared name, when a config matched
    std::string session;  // from the marker or the journal
};

struct JournalSession {
    journal::SessionRow row;
    nlohmann::json start;  // session.start data
    bool client_lost = false;
    std::string client_lost_cause;
};

}  // namespace

const char* evidence_name(EvidenceKind k) {
    switch (k) {
        case EvidenceKind::journal_session:
            return "journal";
        case EvidenceKind::session_marker:
            return "marker";
        case EvidenceKind::client_config:
            return "config";
        case EvidenceKind::heuristic:
            return "heuristic";
        case EvidenceKind::dead_job:
            return "dead-job";
        case EvidenceKind::remnant:
            return "remnant";
    }
    return "heuristic";
}

const char* role_name(Role r) {
    switch (r) {
        case Role::wrapper:
            return "wrapper";
        case Role::server:
            return "server";
        case Role::helper:
            return "helper";
    }
    return "helper";
}

// A credential's name says it holds a secret: one of its words (split at '_', '-', '.') is
// token, secret, password, key, credential, auth, … or ends so ("PGPASSWORD",
// "ACCESSTOKEN"). A vendor prefix says nothing (ANTHROPIC_BASE_URL, AWS_REGION), and a name
// about certificates (AWS_CA_BUNDLE, SSL_CERT_FILE) or that ends in where something is
// (…_URL, …_PATH, …_FILE, …_DIR, …_HOST, …_ENDPOINT) names no secret of its own: flagging
// those sent users rotating nothing.
bool credential_like(std::string_view env_name) {
    std::vector<std::string> words;
    std::string cur;
    for (char c : lower(env_name)) {
        if (c == '_' || c == '-' || c == '.') {
            if (!cur.empty()) words.push_back(std::move(cur));
            cur.clear();
        } else {
            cur.push_back(c);
        }
    }
    if (!cur.empty()) words.push_back(std::move(cur));
    if (words.empty()) return false;
    auto any_of = [](std::string_view w, std::initializer_list<std::string_view> set) {
        return std::find(set.begin(), set.end(), w) != set.end();
    };
    for (const auto& w : words)
        if (any_of(w, {"ca", "cacert", "cacerts", "cafile", "capath", "cainfo", "bundle", "cert",
                       "certs", "certificate", "certificates"}))
            return false;
    if (any_of(words.back(), {"url", "uri", "urls", "endpoint", "host", "hostname", "port", "path",
                              "file", "dir", "addr", "address", "region", "config"}) &&
        words.size() > 1 && !any_of(words[words.size() - 2], {"auth"}))
        return false;
    for (const auto& w : words) {
        if (any_of(w, {"token",  "tokens",     "secret",     "secrets",     "password",
                       "passwd", "passphrase", "credential", "credentials", "creds",
                       "auth",   "oauth",      "apikey",     "key",         "keys",
                       "pat",    "cookie",     "jwt",        "bearer",      "privatekey"}))
            return true;
        for (std::string_view end : {"token", "password", "passwd", "secret", "apikey"})
            if (w.size() > end.size() && ends_with(w, end)) return true;
    }
    return false;
}

bool valid_session_id(std::string_view id) {
    if (id.empty() || id.size() > 64) return false;
    return std::all_of(id.begin(), id.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '.' || c == '_' || c == '-';
    });
}

bool ServerTree::proven() const {
    return std::any_of(evidence.begin(), evidence.end(), [&](const Evidence& e) {
        return e.kind == EvidenceKind::journal_session || e.kind == EvidenceKind::session_marker ||
               ((e.kind == EvidenceKind::client_config || e.kind == EvidenceKind::dead_job) &&
                state == State::LogicalOrphan);
    });
}

std::string ServerTree::suspect_reason() const {
    if (proven()) return {};
    bool config = std::any_of(evidence.begin(), evidence.end(), [](const Evidence& e) {
        return e.kind == EvidenceKind::client_config;
    });
    if (config)
        return fmt::format(
            "suspect: a client config declares it, but its state is {}: a declared "
            "command proves nothing while its stdio is not dead",
            state_name(state));
    std::string why = evidence.empty() ? std::string("no evidence") : evidence.front().detail;
    if (!evidence.empty() && evidence.front().kind == EvidenceKind::remnant)
        return "suspect: only its process group ties it to a server (" + why +
               "), and something of that group or of its own tree is alive";
    return "suspect: only a name heuristic (" + why +
           "): no journal session, session marker or client config names it";
}

bool ServerTree::has_strong_evidence() const {
    return std::any_of(evidence.begin(), evidence.end(),
                       [](const Evidence& e) { return e.strong(); });
}

const Member* ServerTree::member(pid_t pid) const {
    for (const auto& m : members)
        if (m.proc->id.pid == pid) return &m;
    return nullptr;
}

std::vector<ProcessId> ServerTree::leaves_first() const {
    std::vector<const Member*> ms;
    for (const auto& m : members)
        ms.push_back(&m);
    std::stable_sort(ms.begin(), ms.end(),
                     [](const Member* a, const Member* b) { return a->depth > b->depth; });
    std::vector<ProcessId> out;
    for (const Member* m : ms)
        out.push_back(m->proc->id);
    return out;
}

// ---- Impl --------------------------------------------------------------------------------

// What classify() decides on, read by read_details() so that classify() reads nothing: the
// process the client talks to (the root, or the relay of a supervised tree) and the live
// processes outside the tree holding the other end of its stdin (writers) and its stdout
// (readers), the launcher first.
struct ClientEnds {
    const Process* front = nullptr;
    std::vector<const Process*> writers, readers;
};

struct Inventory::Impl {
    explicit Impl(const ScanOptions& o) : opt(o) {}
    ScanOptions opt;
    int64_t observed_at_ns = 0;
    uid_t me = 0;  // the user scanning

    // ---- The scan, in order (Inventory::scan) ----
    Status read_processes();
    void load_journal();
    std::map<pid_t, Candidate> find_candidates() const;
    void build_trees(const std::map<pid_t, Candidate>& candidates);
    void read_details();
    void attach_capabilities();
    void classify_trees();
    void find_remnants();
    std::string live_in_tree(const Process& top);

    // ---- What the steps read and build ----
    // Two passes. read_processes() reads what finding and classifying needs of every process
    // (stat, the uid, cmdline, the MCPWARDEN_SESSION marker, fd links); what only capabilities
    // need (exe, cwd, env names, netns) is read later, identity-checked, for the processes
    // that need it (`mcpwarden run` candidates for supervisors, members, inspect's target):
    // `details_read` holds those. Which end of a pipe an fd holds is read only for the
    // holders of a pipe whose writers are asked for (a server's stdin): `modes_read`.
    // A process gone (or its pid recycled) by then keeps these empty: no capability, and
    // not a writer of any pipe.
    ProcessTable table;
    std::unique_ptr<PipePeers> pipes;
    std::unordered_set<pid_t> details_read;
    std::unordered_set<pid_t> modes_read;
    std::unordered_set<uint64_t> pipes_refreshed;
    // What only a member's capabilities or a socket on a stdin need is read on first use,
    // not by every scan: the /proc/net tables of every namespace, the sock_diag dump of unix
    // peers, and the socket inode -> holders index. A machine without MCP servers (or whose
    // servers hold no sockets) never pays for them. Loaded once; the Inventory is not shared
    // between threads.
    std::unique_ptr<SocketTables> socket_tables;
    using Peers = std::unordered_map<uint64_t, uint64_t>;  // inode -> peer inode (own netns)
    using Holders = std::unordered_map<uint64_t, std::vector<std::pair<const Process*, int>>>;
    std::optional<Peers> unix_peers_loaded;
    std::optional<Holders> socket_holders_loaded;
    std::vector<std::string> warnings;
    std::string journal_path;
    std::map<std::string, JournalSession> sessions;  // by id, when read
    std::optional<uid_t> journal_owner;              // owner of the journal read (sessions' owner)
    std::vector<ServerTree> trees;
    std::vector<ClientEnds> client_ends;           // per tree, by read_details()
    std::unordered_map<pid_t, size_t> tree_index;  // member or supervisor pid -> tree

    // build_trees(), in its steps.
    struct Launch;  // the candidates that one root launched, climbed to
    std::map<pid_t, Launch> climb_to_roots(const std::map<pid_t, Candidate>& candidates) const;
    std::vector<pid_t> outermost_first(const std::map<pid_t, Launch>& launches) const;
    void plant_tree(pid_t root, Launch& launch, const std::map<pid_t, Launch>& launches);
    const Process* launch_server(const Launch& launch) const;

    // Decisions on what was read: no I/O.
    void classify(ServerTree& t, const ClientEnds& ends) const;
    std::unordered_set<pid_t> inside_of(const ServerTree& t) const;
    const Process* facing_client(const ServerTree& t) const;

    // On demand (the steps above, and the public queries on any process of the scan): each
    // reads /proc at most once per process, pipe or table.
    // `inside`: processes whose end of the pipe does not matter (the tree's own members):
    // their pipe modes are not read for this.
    std::vector<const Process*> stdin_writers(const Process& p,
                                              const std::unordered_set<pid_t>* inside = nullptr);
    std::vector<const Process*> stdout_readers(const Process& p,
                                               const std::unordered_set<pid_t>* inside = nullptr);
    // The live holders of the other end of p's fd 0 (writers) or fd 1 (readers).
    std::vector<const Process*> stdio_peers(const Process& p, int fd,
                                            const std::unordered_set<pid_t>* inside);
    ClientEnds find_client_ends(const ServerTree& t);
    std::optional<std::string> trusted_marker(const Process& p) const;
    Capabilities capabilities(const Process& p);
    std::optional<SessionInfo> session_info(const std::string& id) const;
    const SocketEntry* socket(const Process& p, uint64_t inode);
    const Process& read_details_of(const Process& p);
    void read_pipe_modes(uint64_t inode, const std::unordered_set<pid_t>* inside = nullptr);
    const Peers& unix_peer();
    const Holders& socket_holders();
};

const SocketEntry* Inventory::Impl::socket(const Process& p, uint64_t inode) {
    if (!socket_tables) socket_tables = std::make_unique<SocketTables>(SocketTables::load(table));
    socket_tables->cover(p);
    return socket_tables->lookup(p, inode);
}

const Process& Inventory::Impl::read_details_of(const Process& p) {
    const Process* tp = table.find(p.id);
    if (!tp) return p;
    if (details_read.insert(tp->id.pid).second)
        table.read_details(tp->id.pid, kExe | kCwd | kEnvNames | kNetNs);
    return *tp;
}

// For a supervised tree the client talks to the relay: the relay's stdin is the one to
// follow. Else the root's.
const Process* Inventory::Impl::facing_client(const ServerTree& t) const {
    const Process* front = table.find(t.root);
    if (!front) return nullptr;
    for (const auto& s : t.supervisors)
        if (const Process* sp = table.find(s); sp && sp->ppid != 0) {
            const Process* parent = table.find(sp->ppid);
            if (!parent || !is_supervisor(*parent)) front = sp;  // the outermost: the relay
        }
    return front;
}

// The second look, all at once once the trees stand: details for every member, pipe modes
// for the holders outside the tree of its front's stdin and stdout pipes, the candidates for
// its client (one identity-checked read of each process, on two threads when there are
// enough), while another thread reads our namespace's socket tables and the unix peer dump
// that the members' capabilities will look up. Then, per tree, what classify() decides on:
// its client ends and what the journal says of its session.
void Inventory::Impl::read_details() {
    constexpr unsigned kDetails = kExe | kCwd | kEnvNames | kNetNs;
    std::unordered_map<pid_t, unsigned> want;
    std::vector<uint64_t> inodes;
    bool sockets = false;
    for (const auto& t : trees) {
        for (const auto& m : t.members) {
            if (!details_read.count(m.proc->id.pid)) want[m.proc->id.pid] |= kDetails;
            for (const auto& f : m.proc->fds)
                sockets |= f.kind == FdInfo::Kind::Socket;
        }
        const Process* front = facing_client(t);
        if (!front) continue;
        auto inside = inside_of(t);
        // Both pipes of the front: its client writes the one and reads the other.
        for (int fd : {0, 1}) {
            const FdInfo* f = fd_of(*front, fd);
            if (!f || f->kind != FdInfo::Kind::Pipe || pipes_refreshed.count(f->inode)) continue;
            // The tree's own ends do not count (classify leaves its members out): only the
            // holders outside it can be its client.
            inodes.push_back(f->inode);
            for (const PipeEnd& e : pipes->holders(f->inode))
                if (!inside.count(e.process->id.pid) && !modes_read.count(e.process->id.pid))
                    want[e.process->id.pid] |= kPipeModes;
        }
    }
    std::optional<SocketTables> own;
    std::optional<Result<Peers>> peers;
    {
        std::jthread loader;
        auto load = [&] {
            own.emplace(SocketTables::own_namespace());
            if (opt.unix_peers) peers.emplace(unix_socket_peers());
        };
        if (sockets && !socket_tables) {
            try {
                loader = std::jthread(load);
            } catch (const std::system_error&) {
                load();
            }
        }
        std::vector<std::pair<pid_t, unsigned>> which(want.begin(), want.end());
        table.read_details(which);
    }
    for (const auto& [pid, what] : want) {
        if (what & kDetails) details_read.insert(pid);
        if (what & kPipeModes) modes_read.insert(pid);
    }
    for (uint64_t inode : inodes)
        pipes->refresh(inode);
    if (own) socket_tables = std::make_unique<SocketTables>(std::move(*own));
    if (peers && !unix_peers_loaded) {
        unix_peers_loaded.emplace();
        if (*peers)
            *unix_peers_loaded = std::move(**peers);
        else
            warnings.push_back("unix socket peers: " + peers->error().message);
    }
    for (ServerTree& t : trees) {
        if (!t.session.empty()) t.journal = session_info(t.session);
        client_ends.push_back(find_client_ends(t));
    }
}

// The client end is either pipe: who writes the front's stdin or reads its stdout (for a
// socketpair, who holds the peer). The tree's own members are never its client.
ClientEnds Inventory::Impl::find_client_ends(const ServerTree& t) {
    ClientEnds e;
    e.front = facing_client(t);
    if (!e.front) return e;
    const std::unordered_set<pid_t> inside = inside_of(t);
    for (const Process* w : stdin_writers(*e.front, &inside))
        if (!inside.count(w->id.pid)) e.writers.push_back(w);
    for (const Process* r : stdout_readers(*e.front, &inside))
        if (!inside.count(r->id.pid)) e.readers.push_back(r);
    // The launcher (the front's parent) first when it is among them.
    std::stable_partition(e.writers.begin(), e.writers.end(),
                          [&](const Process* w) { return w->id.pid == e.front->ppid; });
    return e;
}

void Inventory::Impl::read_pipe_modes(uint64_t inode, const std::unordered_set<pid_t>* inside) {
    if (pipes_refreshed.count(inode)) return;
    bool read = false;
    for (const PipeEnd& e : pipes->holders(inode)) {
        if (inside && inside->count(e.process->id.pid)) continue;
        if (modes_read.insert(e.process->id.pid).second) {
            table.read_details(e.process->id.pid, kPipeModes);
            read = true;
        }
    }
    // Every holder's mode known only when none was left out.
    if (!inside) pipes_refreshed.insert(inode);
    if (read || !inside) pipes->refresh(inode);
}

std::unordered_set<pid_t> Inventory::Impl::inside_of(const ServerTree& t) const {
    std::unordered_set<pid_t> inside;
    for (const auto& m : t.members)
        inside.insert(m.proc->id.pid);
    for (const auto& s : t.supervisors)
        inside.insert(s.pid);
    return inside;
}

const Inventory::Impl::Peers& Inventory::Impl::unix_peer() {
    if (!unix_peers_loaded) {
        unix_peers_loaded.emplace();
        if (opt.unix_peers) {
            auto peers = unix_socket_peers();
            if (peers)
                *unix_peers_loaded = std::move(*peers);
            else
                warnings.push_back("unix socket peers: " + peers.error().message);
        }
    }
    return *unix_peers_loaded;
}

const Inventory::Impl::Holders& Inventory::Impl::socket_holders() {
    if (!socket_holders_loaded) {
        socket_holders_loaded.emplace();
        for (const Process& p : table.all())
            for (const auto& f : p.fds)
                if (f.kind == FdInfo::Kind::Socket)
                    (*socket_holders_loaded)[f.inode].push_back({&p, f.fd});
    }
    return *socket_holders_loaded;
}

namespace {

// Whether /proc/PID/cgroup puts the process in the session's cgroup (`…/mcpwarden-ID` or
// below it). Only another user's marked processes are looked up this way: they are few.
bool in_session_cgroup(pid_t pid, std::string_view id) {
    auto text = read_file("/proc/" + std::to_string(pid) + "/cgroup");
    if (!text) return false;
    const std::string dir = "/mcpwarden-" + std::string(id);
    for (std::string_view rest = *text; !rest.empty();) {
        size_t end = rest.find('\n');
        std::string_view line = rest.substr(0, end);
        rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
        if (!starts_with(line, "0::")) continue;
        size_t at = line.find(dir);
        while (at != std::string_view::npos) {
            size_t after = at + dir.size();
            if (after == line.size() || line[after] == '/') return true;
            at = line.find(dir, after);
        }
    }
    return false;
}

}  // namespace

std::optional<std::string> Inventory::Impl::trusted_marker(const Process& p) const {
    if (!p.session_marker || !valid_session_id(*p.session_marker)) return std::nullopt;
    const std::string& id = *p.session_marker;
    uid_t owner = sessions.count(id) && journal_owner ? *journal_owner : me;
    if (p.uid == owner || in_session_cgroup(p.id.pid, id)) return id;
    return std::nullopt;
}

void Inventory::Impl::load_journal() {
    if (!opt.use_journal) return;
    auto path = journal::resolve_path(opt.journal_path);
    if (!path) {
        warnings.push_back("journal: " + path.error().message);
        return;
    }
    if (::access(path->c_str(), R_OK) != 0) return;  // no journal yet: no sessions
    journal_path = *path;
    // Its sessions are its owner's: a marker of one of them counts on that user's processes.
    if (struct stat st{}; ::stat(path->c_str(), &st) == 0) journal_owner = st.st_uid;
    auto rows = journal::list_sessions(*path, {});
    if (!rows) {
        warnings.push_back("journal: " + rows.error().message);
        journal_path.clear();
        return;
    }
    // Only sessions that may still have processes need their records: not ended, this boot.
    for (auto& r : *rows) {
        JournalSession js;
        js.row = r;
        bool maybe_alive = r.writer_boot_id == boot_id() && r.state != "ended";
        if (maybe_alive) {
            auto recs = journal::session_records(*path, r.session);
            if (recs) {
                for (const auto& rec : *recs) {
                    if (rec.kind != "session.start" && rec.kind != "session.client_lost") continue;
                    auto body = nlohmann::json::parse(rec.body, nullptr, false);
                    if (body.is_discarded() || !body.contains("data")) continue;
                    if (rec.kind == "session.start") {
                        js.start = body["data"];
                    } else {
                        js.client_lost = true;
                        js.client_lost_cause = body["data"].value("cause", "");
                    }
                }
            }
        }
        sessions[r.session] = std::move(js);
    }
}

namespace {

std::vector<std::string> json_argv(const nlohmann::json& j) {
    std::vector<std::string> v;
    if (!j.is_array()) return v;
    for (const auto& a : j)
        v.push_back(a.is_string() ? a.get<std::string>() : std::string("<bytes>"));
    return v;
}

// Shell words of a `sh -c` script, as far as a launcher's one-liner needs: blanks split,
// single and double quotes group, the first `;`, `&&`, `||`, `|` or `&` ends the command.
// "$0", "$1"… and "$@" take the arguments that follow the script.
std::vector<std::string> script_words(std::string_view script,
                                      const std::vector<std::string>& positional) {
    std::vector<std::string> words;
    std::string cur;
    bool have = false;
    char quote = 0;
    auto flush = [&] {
        if (!have) return;
        if (cur == "$@") {
            for (size_t i = 1; i < positional.size(); ++i)
                words.push_back(positional[i]);
        } else if (cur.size() == 2 && cur[0] == '$' && cur[1] >= '0' && cur[1] <= '9') {
            size_t i = static_cast<size_t>(cur[1] - '0');
            if (i < positional.size()) words.push_back(positional[i]);
        } else {
            words.push_back(cur);
        }
        cur.clear();
        have = false;
    };
    for (char c : script) {
        if (quote) {
            if (c == quote)
                quote = 0;
            else
                cur.push_back(c);
        } else if (c == '\'' || c == '"') {
            quote = c;
            have = true;
        } else if (c == ' ' || c == '\t' || c == '\n') {
            flush();
        } else if (c == ';' || c == '&' || c == '|') {
            break;
        } else {
            cur.push_back(c);
            have = true;
        }
    }
    flush();
    if (!words.empty() && words.front() == "exec") words.erase(words.begin());
    return words;
}

bool interpreter(std::string_view a0) {
    for (std::string_view i : {"python", "node", "nodejs", "bun", "deno", "ruby", "perl", "php"})
        if (a0 == i || (starts_with(a0, i) && a0.size() > i.size() &&
                        (std::isdigit(static_cast<unsigned char>(a0[i.size()])) != 0)))
            return true;
    return false;
}

// The command a launch ends up running, as words to compare with a declared one: wrappers
// peeled (`sh -c '…'`, `bash -lc '…'`, `env A=B …`), package runners reduced to the
// package (`npx -y @scope/server@1.2`, `npm exec …` — what npm renames the npx process to —,
// `uvx`, `uv tool run`, `pipx run`, `bunx`, `pnpm dlx` all give "pkg:server"), an
// interpreter reduced to its script's or module's name (`python3 /srv/server.py` and
// `python3 server.py` both give "server.py"), a program to its basename. The same function
// reads the process's argv and the config's command + args, so both sides meet.
std::vector<std::string> normalized_command(std::vector<std::string> argv) {
    for (int round = 0; round < 8 && !argv.empty(); ++round) {
        // npm's process title ("npm exec ./pkg", the rest of argv NUL padding) is one string.
        if (argv.front().find(' ') != std::string::npos &&
            std::all_of(argv.begin() + 1, argv.end(), [](const auto& a) { return a.empty(); }))
            argv = script_words(argv.front(), {});
        while (argv.size() > 1 && argv.back().empty())
            argv.pop_back();
        if (argv.empty()) break;
        std::string_view a0 = basename(argv[0]);
        if (is_shell(a0)) {
            // -c, or a flag group with c in it (-lc, -ec): the script is the next argument.
            size_t c = 1;
            while (c < argv.size() && starts_with(argv[c], "-") && !starts_with(argv[c], "--") &&
                   argv[c].find('c') == std::string::npos)
                ++c;
            if (c + 1 >= argv.size() || !starts_with(argv[c], "-")) break;
            std::vector<std::string> positional(argv.begin() + static_cast<long>(c) + 2,
                                                argv.end());
            argv = script_words(argv[c + 1], positional);
            continue;
        }
        if (a0 == "env" || a0 == "nohup" || a0 == "setsid") {
            size_t i = 1;
            while (i < argv.size() &&
                   (argv[i].find('=') != std::string::npos || starts_with(argv[i], "-")))
                ++i;
            argv.erase(argv.begin(), argv.begin() + static_cast<long>(i));
            continue;
        }
        if (std::string r = runner(argv); !r.empty()) {
            // Past the runner's own words and flags to the package.
            size_t i = 1;
            if (r == "npm exec" || r == "pipx run" || r == "uv run" || r == "pnpm dlx" ||
                r == "yarn dlx" || r == "bun x" || r == "bun run")
                i = 2;
            if ((a0 == "node" || a0 == "nodejs")) i = r == "npm exec" ? 3 : 2;
            if (r == "uv run" && argv.size() > 2 && argv[1] == "tool") i = 3;
            while (i < argv.size() && starts_with(argv[i], "-") && argv[i] != "--")
                ++i;
            if (i < argv.size() && argv[i] == "--") ++i;
            if (i >= argv.size()) break;
            std::vector<std::string> out{"pkg:" + package_name(argv[i])};
            out.insert(out.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
            return out;
        }
        if (interpreter(a0)) {
            size_t i = 1;
            while (i < argv.size() && starts_with(argv[i], "-") && argv[i] != "-m")
                ++i;
            if (i < argv.size() && argv[i] == "-m") ++i;
            if (i >= argv.size()) break;
            std::vector<std::string> out{std::string(basename(argv[i]))};
            out.insert(out.end(), argv.begin() + static_cast<long>(i) + 1, argv.end());
            return out;
        }
        argv[0] = std::string(a0);
        return argv;
    }
    if (!argv.empty()) argv[0] = std::string(basename(argv[0]));
    return argv;
}

std::vector<std::string> normalized_declared(const std::string& command,
                                             const std::vector<std::string>& args) {
    if (command.empty()) return {};
    std::vector<std::string> argv{command};
    argv.insert(argv.end(), args.begin(), args.end());
    return normalized_command(std::move(argv));
}

}  // namespace

std::map<pid_t, Candidate> Inventory::Impl::find_candidates() const {
    std::map<pid_t, Candidate> out;
    // Exact identities from the journal: the server and keeper named by session.start.
    std::unordered_map<pid_t, std::pair<uint64_t, std::string>> journal_ids;
    for (const auto& [id, js] : sessions) {
        if (js.start.is_null()) continue;
        ProcessId server = journal::identity_of(js.start.value("server", nlohmann::json()));
        if (server.pid) journal_ids[server.pid] = {server.starttime, id};
    }
    // Each declared command normalised once (and the inner command of a wrapped entry).
    std::vector<std::pair<const clients::DeclaredServer*, std::vector<std::string>>>
        declared_commands;
    static const std::vector<clients::DeclaredServer> kNone;
    for (const auto& d : opt.declared ? *opt.declared : kNone) {
        if (auto w = normalized_declared(d.command, d.args); !w.empty())
            declared_commands.push_back({&d, std::move(w)});
        if (d.wrapped)
            if (auto w = normalized_declared(d.inner_command, d.inner_args); !w.empty())
                declared_commands.push_back({&d, std::move(w)});
    }
    for (const Process& p : table.all()) {
        if (!opt.all_users && p.uid != me) continue;
        if (p.zombie() || is_supervisor(p)) continue;
        Candidate c;
        if (auto it = journal_ids.find(p.id.pid);
            it != journal_ids.end() && it->second.first == p.id.starttime) {
            c.evidence.push_back({EvidenceKind::journal_session, p.id.pid,
                                  "journal session " + it->second.second + " names pid " +
                                      std::to_string(p.id.pid) + " (same starttime)"});
            c.session = it->second.second;
        }
        if (auto marker = trusted_marker(p)) {
            c.evidence.push_back(
                {EvidenceKind::session_marker, p.id.pid, "MCPWARDEN_SESSION=" + *marker});
            if (c.session.empty()) c.session = *marker;
        }
        auto argv = p.argv();
        if (argv.empty()) continue;
        // A process and a declared command match when they normalise to the same words.
        std::vector<std::string> command;
        if (!declared_commands.empty()) command = normalized_command(argv);
        for (const auto& [d, words] : declared_commands) {
            if (words != command) continue;
            c.evidence.push_back({EvidenceKind::client_config, p.id.pid,
                                  fmt::format("{} {} [{}] (declared: {})", d->client, d->file,
                                              d->name, escape_bytes(join_words(words)))});
            c.name = d->name;
            break;
        }
        if (stream_fd(fd_of(p, 0)) && stream_fd(fd_of(p, 1))) {
            std::string why;
            for (size_t i = 0; i < argv.size() && i < 8 && why.empty(); ++i)
                if (mcp_name(argv[i])) why = "argv '" + escape_bytes(argv[i]) + "'";
            if (why.empty()) {
                std::string r = runner(argv);
                if (!r.empty()) why = "runner '" + r + "'";
            }
            if (!why.empty())
                c.evidence.push_back(
                    {EvidenceKind::heuristic, p.id.pid, "stdin+stdout are pipes, " + why});
        }
        if (!c.evidence.empty()) out.emplace(p.id.pid, std::move(c));
    }
    return out;
}

// The candidates one root launched: the path from the root down to each, their evidence
// merged, and the supervisors (`mcpwarden run`) the climb stopped at.
struct Inventory::Impl::Launch {
    std::vector<std::vector<const Process*>> paths;
    Candidate data;
    std::vector<ProcessId> supervisors;
};

void Inventory::Impl::build_trees(const std::map<pid_t, Candidate>& candidates) {
    std::map<pid_t, Launch> launches = climb_to_roots(candidates);
    for (pid_t root : outermost_first(launches))
        plant_tree(root, launches.at(root), launches);
    // One evidence item per (kind, pid, detail), strongest kind first.
    for (ServerTree& t : trees) {
        std::vector<Evidence> distinct;
        for (Evidence& e : t.evidence)
            if (std::none_of(distinct.begin(), distinct.end(), [&](const Evidence& u) {
                    return u.kind == e.kind && u.pid == e.pid && u.detail == e.detail;
                }))
                distinct.push_back(std::move(e));
        std::stable_sort(distinct.begin(), distinct.end(),
                         [](const Evidence& x, const Evidence& y) {
                             return static_cast<int>(x.kind) < static_cast<int>(y.kind);
                         });
        t.evidence = std::move(distinct);
    }
}

// From each candidate up through the wrappers that launched it (same stdin and a wrapper argv
// or itself a candidate, or the same trusted marker), stopping at mcpwarden's relay/keeper,
// which become the tree's supervisors. Candidates that reach the same top share one launch.
std::map<pid_t, Inventory::Impl::Launch> Inventory::Impl::climb_to_roots(
    const std::map<pid_t, Candidate>& candidates) const {
    std::map<pid_t, Launch> launches;
    for (const auto& [pid, cand] : candidates) {
        const Process* cur = table.find(pid);
        if (!cur) continue;
        std::vector<const Process*> path{cur};
        std::vector<ProcessId> sup;
        for (int guard = 0; guard < 64; ++guard) {
            const Process* parent = cur->ppid > 1 ? table.find(cur->ppid) : nullptr;
            // A parent younger than its child holds a recycled pid (same tick: no order).
            if (!parent || started_before(cur->id, parent->id)) break;
            if (is_supervisor(*parent)) {
                sup.push_back(parent->id);
                const Process* relay = table.find(parent->ppid);
                if (relay && is_supervisor(*relay)) sup.push_back(relay->id);
                break;
            }
            auto marker = trusted_marker(*cur);
            bool same_marker = marker && trusted_marker(*parent) == marker;
            bool launched = same_stdin(*parent, *cur) &&
                            (is_wrapper(parent->argv()) || candidates.count(parent->id.pid));
            if (!same_marker && !launched) break;
            cur = parent;
            path.insert(path.begin(), cur);
        }
        Launch& l = launches[cur->id.pid];
        l.paths.push_back(path);
        for (const auto& e : cand.evidence)
            l.data.evidence.push_back(e);
        if (l.data.name.empty()) l.data.name = cand.name;
        if (l.data.session.empty()) l.data.session = cand.session;
        for (auto& s : sup)
            if (std::find(l.supervisors.begin(), l.supervisors.end(), s) == l.supervisors.end())
                l.supervisors.push_back(s);
    }
    return launches;
}

// Ancestor roots first, so a launch whose root lies inside an earlier tree merges into it.
std::vector<pid_t> Inventory::Impl::outermost_first(const std::map<pid_t, Launch>& launches) const {
    std::vector<pid_t> roots;
    for (const auto& [pid, l] : launches)
        roots.push_back(pid);
    auto depth_of = [&](pid_t pid) {
        int d = 0;
        for (const Process* p = table.find(pid); p && p->ppid > 1 && d < 4096; ++d)
            p = table.find(p->ppid);
        return d;
    };
    std::stable_sort(roots.begin(), roots.end(),
                     [&](pid_t a, pid_t b) { return depth_of(a) < depth_of(b); });
    return roots;
}

// The server of a launch (plant_tree says how it is chosen); nullptr when it has no path.
const Process* Inventory::Impl::launch_server(const Launch& launch) const {
    std::set<pid_t> passed;  // processes some path goes below
    for (const auto& path : launch.paths)
        for (size_t i = 0; i + 1 < path.size(); ++i)
            passed.insert(path[i]->id.pid);
    const Process* server = nullptr;
    size_t best = SIZE_MAX;
    for (const auto& path : launch.paths)
        for (size_t i = 0; i < path.size() && i < best; ++i) {
            const Process* p = path[i];
            // A wrapper that is a candidate with nothing of the launch below it.
            bool lone = i + 1 == path.size() && !passed.count(p->id.pid);
            if (is_wrapper(p->argv()) && !lone) continue;
            best = i;
            server = p;
        }
    return server;
}

// One tree from a launch: the server, its name, and the members (root first, depth-first)
// with their roles. A launch whose root is already a member of a tree only adds its evidence
// there.
//
// Roles follow the tree's shape, never the clock: the server is the shallowest process on a
// candidate path that is not a wrapper; its ancestors in the tree are its wrappers, and
// everything else is a helper. A candidate that is a wrapper itself (`sh -c 'python3
// server.py'` matching a declared `sh -c …`) is the server only when nothing below it is a
// candidate's path: otherwise the wrapper that launched the server would be called the
// server. Start times cannot tell a wrapper from its server either: the `sh` and the
// `python3` it forks routinely share a clock tick, which made identical trees come out
// labelled differently.
void Inventory::Impl::plant_tree(pid_t root_pid, Launch& launch,
                                 const std::map<pid_t, Launch>& launches) {
    if (auto it = tree_index.find(root_pid); it != tree_index.end()) {
        ServerTree& t = trees[it->second];
        for (auto& e : launch.data.evidence)
            t.evidence.push_back(e);
        if (t.session.empty()) t.session = launch.data.session;
        return;
    }
    const Process* root = table.find(root_pid);
    ServerTree t;
    t.root = root->id;
    t.evidence = std::move(launch.data.evidence);
    t.session = launch.data.session;
    t.supervisors = launch.supervisors;
    const Process* server = launch_server(launch);
    if (!server) server = root;
    t.server = server->id;
    // Its wrappers: the server's ancestors up to the root.
    std::vector<const Process*> wrappers;
    for (const Process* p = server; p != root && p->ppid > 1 && wrappers.size() < 64;) {
        p = table.find(p->ppid);
        if (!p) break;
        wrappers.push_back(p);
    }
    t.name = launch.data.name;
    // The package a runner was asked for names the tree when the server's own argv does not
    // (`npx -y @scope/server-x` runs `node …/dist/index.js`): the server's argv first, then
    // its wrappers', nearest first.
    std::vector<const Process*> lineage{server};
    lineage.insert(lineage.end(), wrappers.begin(), wrappers.end());
    for (const Process* p : lineage) {
        for (const auto& a : p->argv())
            if (mcp_name(a)) {
                t.name = package_name(a);
                break;
            }
        if (!t.name.empty()) break;
    }
    if (t.name.empty()) {
        auto argv = server->argv();
        if (!argv.empty()) t.name = std::string(basename(argv[0]));
    }
    // Another launch's root below this one was launched by a non-wrapper with its own
    // stdin: a server of its own (this process is likely its client), not a helper here.
    std::function<void(const Process*, int)> walk = [&](const Process* p, int depth) {
        if (tree_index.count(p->id.pid) || depth > 256) return;
        if (depth > 0 && launches.count(p->id.pid)) return;
        Member m;
        m.proc = p;
        m.depth = depth;
        bool wrapper = std::find(wrappers.begin(), wrappers.end(), p) != wrappers.end();
        m.role = p == server ? Role::server : wrapper ? Role::wrapper : Role::helper;
        tree_index[p->id.pid] = trees.size();
        t.members.push_back(std::move(m));
        for (const Process* c : table.children(p->id.pid))
            walk(c, depth + 1);
    };
    walk(root, 0);
    for (const auto& s : t.supervisors)
        tree_index.emplace(s.pid, trees.size());
    trees.push_back(std::move(t));
}

void Inventory::Impl::attach_capabilities() {
    for (ServerTree& t : trees)
        for (Member& m : t.members)
            m.caps = capabilities(*m.proc);
}

void Inventory::Impl::classify_trees() {
    for (size_t i = 0; i < trees.size(); ++i) {
        ServerTree& t = trees[i];
        classify(t, client_ends[i]);
        if ((t.state == State::LogicalOrphan || t.os_orphan) && !t.proven())
            t.state_reasons.push_back(t.suspect_reason());
    }
}

// Remnants: what a dead server left that nothing names. A helper started with stdin /dev/null
// carries no evidence of its own; once its server died it is re-parented, and outside
// `mcpwarden run` (no marker, no session cgroup) only one thing still ties it to where it came
// from: its process group, which it shares with the client that launched the server and the
// client's other servers. So a process outside every tree is a remnant when
//
//   - nothing can talk to it: stdin /dev/null or closed, and no live process outside it
//     reads its stdout;
//   - it was left: re-parented to PID 1 or a subreaper;
//   - its process group holds a server tree that started before it (it cannot be a helper
//     of a server born after it). Before, not in the same clock tick: equal start times are
//     never an order (started_before), and a job's subshell is forked in the very tick of
//     the `npx` it then forks, which is no server it outlived but the one it runs.
//
// Every daemon has the first two; the third is what makes it a server's. It proves the
// remnant (`dead-job`) only when the whole job is dead and so is everything a teardown of
// the remnant would signal:
//
//   - the group's leader is gone (or is a member of an orphaned tree) and every other live
//     process of the group is a proven orphaned server tree or another remnant's;
//   - the remnant's own tree — it and every descendant, whatever their group — is proven not
//     live by the same rules (live_in_tree): each member of a server tree in it is of a
//     proven orphaned one, and no live process outside it writes the stdin or reads the
//     stdout of any of the rest. A subshell whose `npx` still has a `cat` reading it is the
//     job, alive, however dead the subshell's own stdio looks.
//
// A group or a tree with anything else alive (a live client, its live servers, a shell, a
// live reader below) makes it a suspect (`remnant`): shown, never reaped without
// --include-suspects, and reap refuses a tree with a live member even then.
void Inventory::Impl::find_remnants() {
    std::unordered_map<pid_t, std::vector<size_t>> trees_in_group;
    for (size_t i = 0; i < trees.size(); ++i)
        for (const Member& m : trees[i].members)
            if (m.proc->pgid > 1) {
                auto& v = trees_in_group[m.proc->pgid];
                if (v.empty() || v.back() != i) v.push_back(i);
            }
    if (trees_in_group.empty()) return;
    auto no_client_end = [&](const Process& p) {
        const FdInfo* in = fd_of(p, 0);
        if (in && in->target != "/dev/null") return false;
        const FdInfo* out = fd_of(p, 1);
        if (out && out->kind == FdInfo::Kind::Socket) return false;
        if (!out || out->kind != FdInfo::Kind::Pipe) return true;
        const std::unordered_set<pid_t> self{p.id.pid};
        return stdout_readers(p, &self).empty();
    };
    const Faults faults = Faults::from_env();
    std::unordered_map<pid_t, std::vector<const Process*>> remnants;  // by process group
    for (const Process& p : table.all()) {
        if (tree_index.count(p.id.pid) || p.zombie() || is_supervisor(p) || p.id.pid == 1) continue;
        if (!opt.all_users && p.uid != me) continue;
        auto group = trees_in_group.find(p.pgid);
        if (group == trees_in_group.end()) continue;
        bool born_after = std::any_of(group->second.begin(), group->second.end(), [&](size_t i) {
            return started_before(trees[i].root, p.id) ||
                   (faults.equal_ticks_ordered && trees[i].root.starttime == p.id.starttime);
        });
        if (born_after && reparented(p, table) && no_client_end(p)) remnants[p.pgid].push_back(&p);
    }
    for (auto& [pgid, procs] : remnants) {
        const std::vector<size_t>& group_trees = trees_in_group[pgid];
        // Each remnant's whole tree, and why something of it is live ("": nothing is).
        std::unordered_set<pid_t> left;  // the trees proven not live
        std::unordered_map<pid_t, std::string> live_below;
        for (const Process* p : procs) {
            std::string why = faults.remnant_tree_unchecked ? std::string() : live_in_tree(*p);
            if (why.empty()) {
                left.insert(p->id.pid);
                for (const Process* d : table.descendants(p->id))
                    left.insert(d->id.pid);
            }
            live_below[p->id.pid] = std::move(why);
        }
        // The whole job dead: its live processes are proven orphans, remnants, or below them.
        std::string alive;
        for (const Process& q : table.all()) {
            if (q.pgid != pgid || q.zombie() || left.count(q.id.pid) || left.count(q.ppid))
                continue;
            auto it = tree_index.find(q.id.pid);
            const ServerTree* t = it == tree_index.end() ? nullptr : &trees[it->second];
            if (t && t->state == State::LogicalOrphan && t->proven()) continue;
            alive = fmt::format("{} ({})", q.id.pid, q.display_command());
            break;
        }
        std::string names;
        for (size_t i : group_trees)
            names += fmt::format("{}{} ({})", names.empty() ? "" : ", ", trees[i].root.pid,
                                 trees[i].name);
        for (const Process* p : procs) {
            ServerTree t;
            t.root = t.server = p->id;
            auto argv = p->argv();
            t.name = argv.empty() ? p->comm : std::string(basename(argv[0]));
            t.os_orphan = reparented(*p, table);
            std::string why = fmt::format(
                "stdin {}, {}, in process group {} with server tree(s) {}",
                fd_of(*p, 0) ? "/dev/null" : "closed", t.os_orphan->reason, pgid, names);
            const std::string& below = live_below[p->id.pid];
            if (!below.empty())
                t.evidence.push_back(
                    {EvidenceKind::remnant, p->id.pid, why + "; but in its own tree " + below});
            else if (alive.empty())
                t.evidence.push_back({EvidenceKind::dead_job, p->id.pid,
                                      why + "; nothing else of that group is alive"});
            else
                t.evidence.push_back({EvidenceKind::remnant, p->id.pid,
                                      why + "; " + alive + " of that group is alive"});
            std::function<void(const Process*, int)> walk = [&](const Process* q, int depth) {
                if (tree_index.count(q->id.pid) || depth > 256) return;
                tree_index[q->id.pid] = trees.size();
                t.members.push_back({q, Role::helper, depth, capabilities(*q)});
                for (const Process* c : table.children(q->id.pid))
                    walk(c, depth + 1);
            };
            walk(p, 0);
            t.state = State::LogicalOrphan;
            t.state_reasons.push_back(
                fmt::format("its server is gone: stdin {} and {}; no live process reads its stdout",
                            fd_of(*p, 0) ? "/dev/null" : "closed", t.os_orphan->reason));
            if (!t.proven()) t.state_reasons.push_back(t.suspect_reason());
            trees.push_back(std::move(t));
        }
    }
}

// Why something of `top`'s whole tree (it and every descendant: what a teardown of it would
// signal) is live by this inventory's rules, or "" when nothing is. A member of a server tree
// must be of a proven logical orphan, as the rest of a dead job must; any other process must
// have no live holder outside the tree of the write end of its stdin or the read end of its
// stdout (a process inside the tree talking to another inside it is no client).
std::string Inventory::Impl::live_in_tree(const Process& top) {
    std::vector<const Process*> tree{&top};
    for (const Process* d : table.descendants(top.id))
        if (!d->zombie()) tree.push_back(d);
    std::unordered_set<pid_t> inside;
    for (const Process* q : tree)
        inside.insert(q->id.pid);
    for (const Process* q : tree) {
        if (auto it = tree_index.find(q->id.pid); it != tree_index.end()) {
            const ServerTree& t = trees[it->second];
            if (t.state == State::LogicalOrphan && t.proven()) continue;
            std::string what =
                t.state != State::LogicalOrphan
                    ? fmt::format("{}{}", state_name(t.state),
                                  t.state_reasons.empty() ? "" : ": " + t.state_reasons.front())
                    : "an orphan not proven (" + t.suspect_reason() + ")";
            return fmt::format("{} ({}) is of server tree {} ({}), which is {}", q->id.pid,
                               q->display_command(), t.root.pid, escape_bytes(t.name), what);
        }
        for (int fd : {0, 1})
            for (const Process* w : stdio_peers(*q, fd, &inside))
                if (!w->zombie() && !inside.count(w->id.pid))
                    return fmt::format("{} ({}) holds the {} end of the {} of {} ({})", w->id.pid,
                                       w->display_command(), fd == 0 ? "write" : "read",
                                       fd == 0 ? "stdin" : "stdout", q->id.pid,
                                       q->display_command());
    }
    return {};
}

std::optional<SessionInfo> Inventory::Impl::session_info(const std::string& id) const {
    auto it = sessions.find(id);
    if (it == sessions.end()) return std::nullopt;
    const JournalSession& js = it->second;
    SessionInfo s;
    s.id = id;
    s.journal_state = js.row.state;
    s.client_lost = js.client_lost || js.row.state == "client_lost";
    s.client_lost_cause = js.client_lost_cause;
    s.started_ns = js.row.started_ns;
    s.in_flight = js.row.in_flight;
    s.last_traffic_ns = js.row.started_ns;
    if (!journal_path.empty()) {
        journal::Filter f;
        f.session = id;
        if (auto acts = journal::list_activity(journal_path, f)) {
            for (const auto& a : *acts) {
                s.last_traffic_ns = std::max(s.last_traffic_ns, a.started_ns);
                if (a.ended_ns) s.last_traffic_ns = std::max(s.last_traffic_ns, *a.ended_ns);
            }
        }
    }
    if (js.start.is_object()) {
        ProcessId c = journal::identity_of(js.start.value("client", nlohmann::json()));
        if (c.pid > 0) {
            ClientRef ref;
            ref.id = c;
            ref.alive = is_alive(c);
            ref.command = join_argv(json_argv(js.start.value("client_argv", nlohmann::json())));
            ref.how = "journal session.start";
            s.client = ref;
        }
        // The relay writes session.start (the keeper, when it says so in recorded_by).
        for (const char* role : {"writer", "keeper"}) {
            ProcessId sup = journal::identity_of(js.start.value(role, nlohmann::json()));
            if (sup.pid <= 0 || sup.starttime == 0) continue;
            if (std::any_of(s.supervisors.begin(), s.supervisors.end(),
                            [&](const ClientRef& r) { return r.id == sup; }))
                continue;
            ClientRef ref;
            ref.id = sup;
            ref.alive = is_alive(sup);
            ref.how = std::string(role) == "keeper" ? "keeper" : "relay";
            s.supervisors.push_back(std::move(ref));
        }
    }
    return s;
}

std::vector<const Process*> Inventory::Impl::stdin_writers(
    const Process& p, const std::unordered_set<pid_t>* inside) {
    return stdio_peers(p, 0, inside);
}

std::vector<const Process*> Inventory::Impl::stdout_readers(
    const Process& p, const std::unordered_set<pid_t>* inside) {
    return stdio_peers(p, 1, inside);
}

std::vector<const Process*> Inventory::Impl::stdio_peers(const Process& p, int fd,
                                                         const std::unordered_set<pid_t>* inside) {
    const FdInfo* f = fd_of(p, fd);
    std::vector<const Process*> out;
    if (!f) return out;
    if (f->kind == FdInfo::Kind::Pipe) {
        read_pipe_modes(f->inode, inside);
        return fd == 0 ? pipes->writers_of_stdin(p) : pipes->readers_of_stdout(p);
    }
    if (f->kind == FdInfo::Kind::Socket) {
        // A socketpair (libuv clients): the holders of the peer socket.
        const Peers& peers = unix_peer();
        auto peer = peers.find(f->inode);
        if (peer == peers.end()) return out;
        const Holders& holders = socket_holders();
        auto h = holders.find(peer->second);
        if (h == holders.end()) return out;
        for (const auto& [proc, holder_fd] : h->second)
            if (proc != &p && !proc->zombie() &&
                std::find(out.begin(), out.end(), proc) == out.end())
                out.push_back(proc);
    }
    return out;
}

// The state and its reasons, from what read_details() found: the journal first, then the
// pipes. Reads nothing.
void Inventory::Impl::classify(ServerTree& t, const ClientEnds& ends) const {
    const Process* root = table.find(t.root);
    if (!root || !ends.front) return;
    const Process* front = ends.front;
    // A server whose stdin writer is gone but whose output a live process still reads
    // (`… | cat >log`) is somebody's, not an orphan.
    const std::vector<const Process*>& writers = ends.writers;
    const std::vector<const Process*>& readers = ends.readers;

    const FdInfo* in = fd_of(*front, 0);
    const FdInfo* out = fd_of(*front, 1);
    std::string in_desc = in ? in->target : std::string("closed");
    std::string out_desc = out ? out->target : std::string("closed");

    // os-orphan: a clue beside the state. A subreaper that writes the root's stdin launched it.
    if (auto o = reparented(*root, table)) {
        bool launcher_known = !writers.empty() && writers.front()->id.pid == o->parent;
        if (o->parent == 1 || (!launcher_known && t.supervisors.empty())) t.os_orphan = o;
    }

    const SessionInfo* js = t.journal ? &*t.journal : nullptr;
    if (js && js->client) t.client = js->client;
    if (!writers.empty() || !readers.empty()) {
        bool writes = !writers.empty();
        const Process* w = writes ? writers.front() : readers.front();
        ClientRef c;
        c.id = w->id;
        c.command = w->display_command();
        c.alive = true;
        c.how = writes ? fmt::format("holds the write end of {} (stdin of pid {})", in_desc,
                                     front->id.pid)
                       : fmt::format("holds the read end of {} (stdout of pid {})", out_desc,
                                     front->id.pid);
        t.client = c;
    }

    // A session lives as long as its relay or its keeper, whose identities session.start
    // recorded; not as long as its client. With both gone nothing supervises what is left:
    // it is an orphan at once, whatever the client or the pipes say (a client that lives on
    // may still hold a pipe to the dead relay; nobody relays it anything).
    if (js && !js->supervisors.empty() && !js->supervisor_alive()) {
        t.state = State::LogicalOrphan;
        std::string who;
        for (const auto& s : js->supervisors)
            who += fmt::format("{}{} {}", who.empty() ? "" : " and ", s.how, s.id.pid);
        t.state_reasons.push_back(fmt::format("journal: session {} is over: its {} {} gone", js->id,
                                              who, js->supervisors.size() > 1 ? "are" : "is"));
        return;
    }
    // The journal first: it knows what the pipes cannot (the client died, the session ended).
    if (js) {
        if (js->client_lost) {
            t.state = State::LogicalOrphan;
            t.state_reasons.push_back("journal: session " + js->id + " lost its client" +
                                      (js->client_lost_cause.empty()
                                           ? std::string()
                                           : " (" + js->client_lost_cause + ")"));
        } else if (js->journal_state == "ended" || js->journal_state == "orphaned") {
            t.state = State::LogicalOrphan;
            t.state_reasons.push_back("journal: session " + js->id + " is " + js->journal_state +
                                      " but its processes remain");
        } else if (js->client && !js->client->alive) {
            t.state = State::LogicalOrphan;
            t.state_reasons.push_back(fmt::format("journal: client pid {} of session {} is gone",
                                                  js->client->id.pid, js->id));
        }
        if (t.state == State::LogicalOrphan) return;
    }
    if (stream_fd(in) || stream_fd(out)) {
        if (!writers.empty() || !readers.empty()) {
            t.state = State::Live;
            t.state_reasons.push_back(
                fmt::format("pid {} ({}) {}", t.client->id.pid, t.client->command, t.client->how));
        } else {
            t.state = State::LogicalOrphan;
            t.state_reasons.push_back(
                fmt::format("no live process outside the tree holds the write end of {} (stdin "
                            "of pid {}) or the read end of {} (stdout)",
                            in_desc, front->id.pid, out_desc));
        }
    } else if (js && js->supervisor_alive()) {
        t.state = State::Live;
        for (const auto& s : js->supervisors)
            if (s.alive) {
                t.state_reasons.push_back(
                    fmt::format("journal: the {} (pid {}) of session {} is "
                                "alive",
                                s.how, s.id.pid, js->id));
                break;
            }
    } else {
        t.state = State::Unknown;
        t.state_reasons.push_back("stdin is " + in_desc + ", not a pipe: no client end to follow");
    }
    if (t.state == State::Live && js && js->last_traffic_ns > 0) {
        int64_t idle = observed_at_ns - js->last_traffic_ns;
        // In seconds, as given: a threshold of centuries must not overflow into a negative.
        int64_t limit =
            std::min<int64_t>(opt.wedged_after.count(), INT64_MAX / 1000000000) * 1000000000;
        if (idle > limit) {
            t.state = State::Wedged;
            t.state_reasons.push_back(fmt::format(
                "journal: no traffic for {} s (threshold {} s), {} request(s) without answer",
                idle / 1000000000, opt.wedged_after.count(), js->in_flight));
        }
    }
}

Capabilities Inventory::Impl::capabilities(const Process& p) {
    Capabilities c;
    const Process& full = read_details_of(p);
    c.cwd = full.cwd;
    c.exe = full.exe;
    c.rss_kb = p.rss_kb;
    c.elapsed_seconds = p.elapsed_seconds();
    for (const Process* ch : table.children(p.id.pid))
        c.children.push_back(ch->id);
    for (const auto& n : full.env_names)
        if (credential_like(n)) c.credential_env.push_back(n);
    for (const auto& f : full.fds) {
        if (f.kind != FdInfo::Kind::Socket) continue;
        const SocketEntry* s = socket(full, f.inode);
        if (!s) continue;
        if (s->proto == SocketEntry::Proto::Unix) {
            UnixSocket u;
            u.fd = f.fd;
            u.inode = f.inode;
            u.path = escape_bytes(s->path);
            const Peers& peers = unix_peer();
            const Holders& holders = socket_holders();
            if (auto peer = peers.find(f.inode); peer != peers.end()) {
                if (auto h = holders.find(peer->second); h != holders.end())
                    for (const auto& [proc, fd] : h->second)
                        if (proc != &full) {
                            u.peer_pid = proc->id.pid;
                            u.peer_command = proc->display_command();
                            break;
                        }
            }
            c.unix_sockets.push_back(std::move(u));
        } else if (s->listening()) {
            ListeningPort l;
            l.udp = s->proto == SocketEntry::Proto::Udp;
            l.ipv6 = s->ipv6;
            l.addr = s->local_addr;
            l.port = s->local_port;
            l.inode = f.inode;
            l.fd = f.fd;
            c.listening.push_back(l);
        } else if (s->connected()) {
            c.connections.push_back({s->proto_name(), s->local_addr, s->remote_addr, s->local_port,
                                     s->remote_port, s->state_name()});
        }
    }
    return c;
}

// ---- Inventory ----------------------------------------------------------------------------

Inventory::Inventory(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Inventory::Inventory(Inventory&&) noexcept = default;
Inventory& Inventory::operator=(Inventory&&) noexcept = default;
Inventory::~Inventory() = default;

// The scan reads as its steps; each only adds what the one before could not know.
Result<Inventory> Inventory::scan(const ScanOptions& options) {
    auto impl = std::make_unique<Impl>(options);
    if (auto st = impl->read_processes(); !st) return st.error();
    impl->load_journal();
    if (!options.declared)
        impl->warnings.push_back("client configs: " + options.declared.error().message);
    impl->build_trees(impl->find_candidates());
    impl->read_details();
    impl->attach_capabilities();
    impl->classify_trees();
    impl->find_remnants();
    return Inventory(std::move(impl));
}

// The first pass over /proc (what finding and classifying need of every process), the exe of
// each `X run …` process (is_supervisor() looks at it), and the pipe index.
Status Inventory::Impl::read_processes() {
    observed_at_ns = journal::now_ns();
    me = ::getuid();
    table = ProcessTable::scan(kUid | kCmdline | kEnvMarker | kFdLinks);
    if (table.all().empty()) return Error::msg("cannot scan /proc: no process readable");
    for (const Process& p : table.all()) {
        std::string_view c = p.cmdline;
        size_t end0 = c.find('\0');
        if (end0 == std::string_view::npos) continue;
        std::string_view arg1 = c.substr(end0 + 1);
        if (arg1.substr(0, arg1.find('\0')) == "run") (void)read_details_of(p);
    }
    pipes = std::make_unique<PipePeers>(table);
    return {};
}

const ProcessTable& Inventory::table() const {
    return impl_->table;
}
const std::vector<ServerTree>& Inventory::servers() const {
    return impl_->trees;
}
const ServerTree* Inventory::tree_of(pid_t pid) const {
    auto it = impl_->tree_index.find(pid);
    return it == impl_->tree_index.end() ? nullptr : &impl_->trees[it->second];
}
Capabilities Inventory::capabilities(const Process& p) const {
    return impl_->capabilities(p);
}
std::vector<const Process*> Inventory::stdin_writers(const Process& p) const {
    return impl_->stdin_writers(p);
}
std::vector<const Process*> Inventory::stdout_readers(const Process& p) const {
    return impl_->stdout_readers(p);
}
std::optional<std::string> Inventory::trusted_marker(const Process& p) const {
    return impl_->trusted_marker(p);
}
const std::vector<std::string>& Inventory::warnings() const {
    return impl_->warnings;
}
int64_t Inventory::observed_at_ns() const {
    return impl_->observed_at_ns;
}
const std::string& Inventory::journal_path() const {
    return impl_->journal_path;
}

// ---- JSON -----------------------------------------------------------------------------------

nlohmann::json capabilities_json(const Capabilities& c) {
    nlohmann::json listening = nlohmann::json::array();
    for (const auto& l : c.listening)
        listening.push_back({{"proto", std::string(l.udp ? "udp" : "tcp") + (l.ipv6 ? "6" : "")},
                             {"addr", l.addr},
                             {"port", l.port},
                             {"fd", l.fd},
                             {"inode", l.inode}});
    nlohmann::json conns = nlohmann::json::array();
    for (const auto& x : c.connections)
        conns.push_back({{"proto", x.proto},
                         {"local_addr", x.local_addr},
                         {"local_port", x.local_port},
                         {"remote_addr", x.remote_addr},
                         {"remote_port", x.remote_port},
                         {"state", x.state}});
    nlohmann::json unix_socks = nlohmann::json::array();
    for (const auto& u : c.unix_sockets) {
        nlohmann::json j = {{"fd", u.fd}, {"inode", u.inode}, {"path", u.path}};
        if (u.peer_pid) {
            j["peer_pid"] = u.peer_pid;
            j["peer_command"] = u.peer_command;
        }
        unix_socks.push_back(std::move(j));
    }
    nlohmann::json kids = nlohmann::json::array();
    for (const auto& k : c.children)
        kids.push_back({{"pid", k.pid}, {"starttime", k.starttime}});
    return {{"listening", std::move(listening)},
            {"connections", std::move(conns)},
            {"unix_sockets", std::move(unix_socks)},
            {"credential_env", c.credential_env},
            {"cwd", escape_bytes(c.cwd)},
            {"exe", escape_bytes(c.exe)},
            {"rss_kb", c.rss_kb},
            {"elapsed_seconds", std::round(c.elapsed_seconds * 100) / 100},
            {"children", std::move(kids)}};
}

namespace {
nlohmann::json client_json(const ClientRef& c) {
    return {{"pid", c.id.pid},
            {"starttime", c.id.starttime},
            {"command", c.command},
            {"alive", c.alive},
            {"how", c.how}};
}
nlohmann::json evidence_json(const std::vector<Evidence>& ev) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : ev)
        a.push_back({{"kind", evidence_name(e.kind)},
                     {"pid", e.pid},
                     {"detail", e.detail},
                     {"strong", e.strong()}});
    return a;
}
}  // namespace

nlohmann::json tree_json(const ServerTree& t) {
    nlohmann::json members = nlohmann::json::array();
    for (const auto& m : t.members)
        members.push_back({{"pid", m.proc->id.pid},
                           {"starttime", m.proc->id.starttime},
                           {"role", role_name(m.role)},
                           {"depth", m.depth},
                           {"command", m.proc->display_command()},
                           {"capabilities", capabilities_json(m.caps)}});
    nlohmann::json sup = nlohmann::json::array();
    for (const auto& s : t.supervisors)
        sup.push_back({{"pid", s.pid}, {"starttime", s.starttime}});
    nlohmann::json j = {
        {"name", escape_bytes(t.name)},
        {"root", {{"pid", t.root.pid}, {"starttime", t.root.starttime}}},
        {"server", {{"pid", t.server.pid}, {"starttime", t.server.starttime}}},
        {"state", state_name(t.state)},
        {"state_reasons", t.state_reasons},
        {"os_orphan", t.os_orphan ? nlohmann::json{{"parent", t.os_orphan->parent},
                                                   {"reason", t.os_orphan->reason}}
                                  : nlohmann::json(nullptr)},
        {"client", t.client ? client_json(*t.client) : nlohmann::json(nullptr)},
        {"session", t.session.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.session)},
        {"supervisors", std::move(sup)},
        {"evidence", evidence_json(t.evidence)},
        {"strong_evidence", t.has_strong_evidence()},
        {"proven", t.proven()},
        {"suspect", !t.proven() && (t.state == State::LogicalOrphan || t.os_orphan)
                        ? nlohmann::json(t.suspect_reason())
                        : nlohmann::json(nullptr)},
        {"members", std::move(members)},
    };
    if (t.journal)
        j["journal"] = {{"state", t.journal->journal_state},
                        {"client_lost", t.journal->client_lost},
                        {"started_ns", t.journal->started_ns},
                        {"last_traffic_ns", t.journal->last_traffic_ns},
                        {"in_flight", t.journal->in_flight}};
    return j;
}

// ---- Incident record ------------------------------------------------------------------------

journal::Event revoke_event(std::string session, ProcessId target, std::string_view scope,
                            std::string_view operator_name, std::string_view reason) {
    journal::Json d{{"pid", static_cast<int64_t>(target.pid)},
                    {"starttime", target.starttime},
                    {"scope", std::string(scope)},
                    {"operator", std::string(operator_name)},
                    {"reason", SensitiveText(std::string(reason))}};
    return journal::Event{kRevokeKind, std::move(session), 0, std::move(d)};
}

namespace {

std::string signal_name(int sig) {
    const char* n = sigabbrev_np(sig);
    return n ? std::string("SIG") + n : std::to_string(sig);
}

// Reads what the journal holds about the target (its session's records, or every record
// naming its identity when it has no session) into the record.
void fill_from_journal(const std::string& path, IncidentRecord& r) {
    auto names_target = [&](const nlohmann::json& d) {
        return d.is_object() && d.value("pid", int64_t{0}) > 0 &&
               d.value("starttime", uint64_t{0}) != 0;
    };
    std::set<std::pair<int64_t, uint64_t>> tree_ids;
    tree_ids.insert({r.target.pid, r.target.starttime});
    tree_ids.insert({r.server.pid, r.server.starttime});
    struct Req {
        int64_t ts = 0;
        std::string method, tool, outcome = "no answer";
        bool answered = false;
    };
    std::map<int64_t, Req> reqs;  // by request seq
    int64_t last_ok = 0;
    std::string last_signal, last_exit;
    auto visit = [&](const journal::Record& rec) {
        auto body = nlohmann::json::parse(rec.body, nullptr, false);
        if (body.is_discarded()) return;
        const auto& d = body["data"];
        if (rec.kind == "activity.request") {
            Req q;
            q.ts = rec.ts;
            q.method = d.value("method", "");
            q.tool = d.value("tool", "");
            reqs[rec.seq] = q;
        } else if (rec.kind == "activity.response") {
            auto it = reqs.find(d.value("request_seq", int64_t{0}));
            std::string outcome = d.value("outcome", "");
            if (it != reqs.end()) {
                it->second.answered = true;
                it->second.outcome = outcome;
            }
            if (outcome == "ok") last_ok = std::max(last_ok, rec.ts);
        } else if (rec.kind == "activity.abandoned" || rec.kind == "activity.unresolved") {
            auto it = reqs.find(d.value("request_seq", int64_t{0}));
            if (it != reqs.end() && !it->second.answered)
                it->second.outcome = rec.kind == "activity.abandoned" ? "abandoned (no answer)"
                                                                      : "unresolved (no answer)";
        } else if (rec.kind == kRevokeKind) {
            if (!names_target(d) || rec.session == r.session ||
                tree_ids.count({d.value("pid", int64_t{0}), d.value("starttime", uint64_t{0})})) {
                r.revoked_ns = rec.ts;
                r.revoked_by = d.value("operator", "");
                r.authorization = fmt::format("revoked at {} by {} (scope: {})", fmt_time(rec.ts),
                                              r.revoked_by.empty() ? "unknown" : r.revoked_by,
                                              d.value("scope", "session"));
            }
        } else if (rec.kind == "process.signal" &&
                   tree_ids.count(
                       {d.value("pid", int64_t{0}), d.value("starttime", uint64_t{0})})) {
            last_signal = fmt::format(
                "{} to pid {} via {} at {}{}", signal_name(d.value("signal", 0)),
                d.value("pid", int64_t{0}), d.value("via", ""), fmt_time(rec.ts),
                d.value("errno", 0) ? " (failed: " + d.value("error", "") + ")" : std::string());
        } else if (rec.kind == "process.exit" &&
                   tree_ids.count(
                       {d.value("pid", int64_t{0}), d.value("starttime", uint64_t{0})})) {
            if (d.contains("term_signal"))
                last_exit = "killed by " + signal_name(d["term_signal"].get<int>());
            else if (d.contains("exit_status"))
                last_exit = "exited " + std::to_string(d["exit_status"].get<int>());
            last_exit += " (" + d.value("phase", "") + ")";
        }
    };
    if (!r.session.empty()) {
        auto recs = journal::session_records(path, r.session);
        if (recs)
            for (const auto& rec : *recs)
                visit(rec);
    } else {
        (void)journal::for_each_record(path, 0, [&](const journal::Record& rec) {
            if (rec.kind == kRevokeKind || starts_with(rec.kind, "process.")) visit(rec);
            return true;
        });
    }
    if (!reqs.empty()) {
        const Req& last = reqs.rbegin()->second;
        r.last_attempt_ns = last.ts;
        r.action_operation = last.method;
        r.action_target = last.tool;
        r.action_result = last.outcome;
        for (const auto& [seq, q] : reqs)
            if (!q.answered)
                r.follow_up.push_back(fmt::format(
                    "request seq {} ({} {}) sent at {} got no answer: check whether it acted", seq,
                    q.method, q.tool, fmt_time(q.ts)));
    }
    if (last_ok) r.last_success_ns = last_ok;
    if (!last_signal.empty() || !last_exit.empty())
        r.termination =
            last_signal + (last_signal.empty() || last_exit.empty() ? "" : " -> ") + last_exit;
}

}  // namespace

Result<IncidentRecord> incident_record(const Inventory& inv, pid_t pid) {
    const Process* p = inv.table().find(pid);
    if (!p) return Error::msg(fmt::format("no process {} in the scan", pid));
    IncidentRecord r;
    r.observed_at_ns = inv.observed_at_ns();
    r.target = p->id;
    r.target_command = p->display_command();
    r.ppid = p->ppid;
    r.pgid = p->pgid;
    r.sid = p->sid;
    if (const Process* parent = inv.table().find(p->ppid))
        r.parent_command = parent->display_command();
    r.caps = inv.capabilities(*p);
    r.server = p->id;
    r.server_command = r.target_command;
    if (p->session_marker) r.session = escape_bytes(*p->session_marker);
    const ServerTree* t = inv.tree_of(pid);
    if (t) {
        r.server = t->server;
        if (const Process* s = inv.table().find(t->server)) r.server_command = s->display_command();
        r.client = t->client;
        if (!t->session.empty()) r.session = t->session;
        r.state = t->state;
        r.state_reasons = t->state_reasons;
        r.os_orphan = t->os_orphan;
        r.evidence = t->evidence;
    } else {
        r.state_reasons.push_back("not recognised as an MCP server (no evidence matched)");
        auto w = inv.stdin_writers(*p);
        if (!w.empty())
            r.client = ClientRef{w.front()->id, w.front()->display_command(), true,
                                 "holds the write end of its stdin"};
    }
    if (!inv.journal_path().empty()) fill_from_journal(inv.journal_path(), r);
    if (r.state == State::LogicalOrphan)
        r.follow_up.push_back(
            "logical orphan: preserve this record, revoke its authority, then "
            "`mcpwarden reap`");
    if (r.os_orphan) r.follow_up.push_back("os-orphan: " + r.os_orphan->reason + " (a clue only)");
    if (!r.caps.credential_env.empty())
        r.follow_up.push_back(fmt::format("holds {} credential-like variable(s): rotate if exposed",
                                          r.caps.credential_env.size()));
    if (!r.caps.connections.empty())
        r.follow_up.push_back(
            fmt::format("{} established connection(s): check for remote jobs that outlive it",
                        r.caps.connections.size()));
    if (r.follow_up.empty()) r.follow_up.push_back("none");
    return r;
}

nlohmann::json incident_json(const IncidentRecord& r) {
    auto opt_time = [](const std::optional<int64_t>& t) {
        return t ? nlohmann::json(fmt_time(*t)) : nlohmann::json(nullptr);
    };
    return {
        {"schema", "mcpwarden.inspect"},
        {"schema_version", 1},
        {"observed_at", fmt_time(r.observed_at_ns)},
        {"boot_id", boot_id()},
        {"target",
         {{"pid", r.target.pid}, {"starttime", r.target.starttime}, {"command", r.target_command}}},
        {"client", r.client ? client_json(*r.client) : nlohmann::json(nullptr)},
        {"server",
         {{"pid", r.server.pid}, {"starttime", r.server.starttime}, {"command", r.server_command}}},
        {"parent", {{"pid", r.ppid}, {"command", r.parent_command}}},
        {"pgid", r.pgid},
        {"sid", r.sid},
        {"session", r.session.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.session)},
        {"state", state_name(r.state)},
        {"state_reasons", r.state_reasons},
        {"os_orphan", r.os_orphan ? nlohmann::json(r.os_orphan->reason) : nlohmann::json(nullptr)},
        {"evidence", evidence_json(r.evidence)},
        {"authorization", r.authorization},
        {"revoked_at", opt_time(r.revoked_ns)},
        {"revoked_by",
         r.revoked_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.revoked_by)},
        {"last_success_at", opt_time(r.last_success_ns)},
        {"last_attempt_at", opt_time(r.last_attempt_ns)},
        {"action_target", r.action_target},
        {"action_operation", r.action_operation},
        {"action_result", r.action_result},
        {"termination", r.termination},
        {"capabilities", capabilities_json(r.caps)},
        {"follow_up", r.follow_up},
    };
}

std::string incident_text(const IncidentRecord& r) {
    auto or_unknown = [](const std::string& s) { return s.empty() ? std::string("unknown") : s; };
    auto opt_time = [](const std::optional<int64_t>& t) {
        return t ? fmt_time(*t) : std::string("none recorded");
    };
    std::string o;
    auto line = [&](std::string_view k, const std::string& v) {
        o += fmt::format("{:<22}{}\n", std::string(k) + ":", v);
    };
    line("observed at", fmt_time(r.observed_at_ns));
    line("client", r.client ? fmt::format("pid {} {}{} — {}", r.client->id.pid, r.client->command,
                                          r.client->alive ? "" : " (gone)", r.client->how)
                            : std::string("none holds its stdin"));
    line("server", fmt::format("pid {} {}", r.server.pid, r.server_command));
    if (r.target.pid != r.server.pid)
        line("inspected", fmt::format("pid {} {}", r.target.pid, r.target_command));
    line("parent", fmt::format("pid {} {}", r.ppid, or_unknown(r.parent_command)));
    line("process group", fmt::format("{} (session {})", r.pgid, r.sid));
    line("session id", r.session.empty() ? "none" : r.session);
    std::string st = state_name(r.state);
    if (r.os_orphan) st += " + os-orphan";
    line("state", st);
    for (const auto& why : r.state_reasons)
        line("  because", why);
    if (r.os_orphan) line("  os-orphan", r.os_orphan->reason);
    for (const auto& e : r.evidence)
        line(fmt::format("  evidence ({})", evidence_name(e.kind)),
             fmt::format("pid {}: {}", e.pid, e.detail));
    line("authorization", r.authorization);
    line("last success", opt_time(r.last_success_ns));
    line("last attempt", opt_time(r.last_attempt_ns));
    line("action",
         r.action_operation.empty()
             ? std::string("none recorded")
             : r.action_operation + (r.action_target.empty() ? "" : " " + r.action_target));
    line("result", or_unknown(r.action_result));
    line("revoked", r.revoked_ns ? fmt_time(*r.revoked_ns) + " by " + or_unknown(r.revoked_by)
                                 : std::string("not revoked"));
    line("termination", r.termination.empty() ? "not signalled" : r.termination);
    std::string ports;
    for (const auto& l : r.caps.listening)
        ports += fmt::format("{}{}:{} ", l.udp ? "udp " : "", l.addr, l.port);
    line("listening", ports.empty() ? "none" : ports);
    for (const auto& c : r.caps.connections)
        line("connection", fmt::format("{} {}:{} -> {}:{} {}", c.proto, c.local_addr, c.local_port,
                                       c.remote_addr, c.remote_port, c.state));
    for (const auto& u : r.caps.unix_sockets)
        if (!u.path.empty() || u.peer_pid)
            line("unix socket",
                 fmt::format(
                     "fd {} {}{}", u.fd, u.path.empty() ? "(unnamed)" : u.path,
                     u.peer_pid ? fmt::format(" peer pid {} {}", u.peer_pid, u.peer_command) : ""));
    std::string creds;
    for (const auto& n : r.caps.credential_env)
        creds += n + " ";
    line("credential env", creds.empty() ? "none" : creds + "(names only)");
    line("cwd", or_unknown(escape_bytes(r.caps.cwd)));
    line("exe", or_unknown(escape_bytes(r.caps.exe)));
    line("rss", fmt::format("{} KiB", r.caps.rss_kb));
    line("elapsed", fmt::format("{:.0f} s", r.caps.elapsed_seconds));
    std::string kids;
    for (const auto& k : r.caps.children)
        kids += std::to_string(k.pid) + " ";
    line("children", kids.empty() ? "none" : kids);
    for (const auto& f : r.follow_up)
        line("follow-up", f);
    return o;
}

Result<journal::Event> snapshot_event(const Inventory& inv, pid_t pid, std::string_view reason) {
    const Process* p = inv.table().find(pid);
    if (!p) return Error::msg(fmt::format("no process {} in the scan", pid));
    std::vector<ProcessId> kids;
    for (const Process* c : inv.table().children(pid))
        kids.push_back(c->id);
    std::string session;
    if (const ServerTree* t = inv.tree_of(pid)) session = t->session;
    if (session.empty() && p->session_marker) session = *p->session_marker;
    // The scan reads exe and cwd only where needed; the snapshot records them.
    Process snap = *p;
    if (snap.exe.empty() && snap.cwd.empty()) (void)read_details(snap, kExe | kCwd);
    return journal::process_snapshot(session, snap, reason, kids);
}

}  // namespace warden::inventory
