// The details: the second look at what the trees need (read_details, all at once), and
// what the steps and the public queries read on demand, each at most once per process, pipe
// or table: pipe modes, socket tables, unix peers, the journal's sessions, a member's
// capabilities.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <system_error>
#include <thread>

#include "inventory/argv.hpp"
#include "inventory/inventory_impl.hpp"
#include "inventory/unix_peers.hpp"
#include "sys/fd.hpp"

namespace warden::inventory {

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

std::vector<std::string> json_argv(const nlohmann::json& j) {
    std::vector<std::string> v;
    if (!j.is_array()) return v;
    for (const auto& a : j)
        v.push_back(a.is_string() ? a.get<std::string>() : std::string("<bytes>"));
    return v;
}

}  // namespace

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

void Inventory::Impl::attach_capabilities() {
    for (ServerTree& t : trees)
        for (Member& m : t.members)
            m.caps = capabilities(*m.proc);
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

}  // namespace warden::inventory
