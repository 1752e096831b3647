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

#include <unistd.h>

#include <algorithm>
#include <cctype>

#include <fmt/format.h>

#include "inventory/argv.hpp"
#include "inventory/inventory_impl.hpp"

namespace warden::inventory {

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

}  // namespace warden::inventory
