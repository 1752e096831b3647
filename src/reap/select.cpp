// plan(): one inventory scan → the target trees of a selection, each checked against the
// safety rules before anything is shown to the user, let alone signalled.
//
// The scan is inventory's (src/inventory), the very one `mcpwarden ps` shows, so the two
// commands cannot disagree about a tree. --orphans takes ps's verdict per server tree:
//
//   logical-orphan               selected: nobody can send it a request again (no live
//                                process outside the tree holds its stdin's write end, or
//                                the journal says its client went away)
//   os-orphan clue, unknown      selected only with strong evidence (journal, marker,
//                                config): there is no client end to follow, so the
//                                evidence must name it as an MCP server by identity
//   os-orphan clue, live/wedged  refused: reparenting is a clue, never the verdict
//   live, wedged, unknown        not an orphan: not considered
//
// Whatever selected a tree, the target is its root and everything below it (what the
// teardown walks), and the same rules protect it, for the whole of it: never a member of a
// tree that ps calls live or wedged unless its client goes too (inside the target, and
// either named by the user or proven a logical orphan itself), never a member whose stdin
// has a live writer or whose stdout has a live reader outside the target (its tree's
// mcpwarden supervisors count as inside: they relay, they are not the client), never PID 1,
// ourselves or an ancestor, never another user's tree without root and --all-users. Never
// by name, never by PPID alone.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include <fmt/format.h>

#include "clients/discover.hpp"
#include "inventory/inventory.hpp"
#include "proc/process_table.hpp"
#include "reap/reap.hpp"
#include "sys/cgroup.hpp"
#include "sys/pattern.hpp"

namespace warden::reap {

const Member* TargetTree::member(pid_t pid) const {
    for (const Member& m : members)
        if (m.id.pid == pid) return &m;
    return nullptr;
}

uint64_t TargetTree::rss_kb() const {
    uint64_t n = 0;
    for (const Member& m : members)
        n += m.rss_kb;
    return n;
}

namespace {

using inventory::ServerTree;
using inventory::State;

constexpr const char* kNoSelector = "nothing selected: give --orphans, --session ID or --pid N";
constexpr const char* kMatchAlone =
    "--match only narrows a selection: give --orphans, --session ID or --pid N as well";

using inventory::valid_session_id;

bool live_state(State s) {
    return s == State::Live || s == State::Wedged;
}

std::string evidence_line(const ServerTree& t) {
    std::string out = "evidence:";
    for (const inventory::Evidence& e : t.evidence)
        out += fmt::format(" {} (pid {}: {}){}", inventory::evidence_name(e.kind), e.pid, e.detail,
                           &e == &t.evidence.back() ? "" : ",");
    return out;
}

// What --orphans makes of ps's verdict on one tree (the table at the top of this file).
struct OrphanVerdict {
    bool orphan = false;      // ps --orphans lists it
    std::string selected_as;  // "logical-orphan" | "os-orphan" when reap may take it
    std::string refused;      // else, for an orphan, why not
};

// Everything plan() needs from one inventory scan.
class Scan {
  public:
    Scan(const Selection& sel, inventory::Inventory inv) : inv_(std::move(inv)), sel_(sel) {
        self_ = ::getpid();
        euid_ = ::geteuid();
        protected_ = {0, 1, 2, self_};
        pid_t p = ::getppid();
        for (int guard = 0; p > 1 && guard < 4096; ++guard) {
            protected_.insert(p);
            const Process* proc = table().find(p);
            if (!proc) break;
            p = proc->ppid;
        }
        // validate() compiled it already: a pattern that fails here narrows to nothing.
        if (!sel.match.empty()) match_.emplace(Pattern::compile(sel.match));
    }

    const ProcessTable& table() const { return inv_.table(); }
    const inventory::Inventory& inventory() const { return inv_; }

    bool user_allowed(uid_t uid) const {
        if (sel_.user) return uid == *sel_.user;
        return sel_.all_users || uid == euid_;
    }

    // The processes of a tree grown from `roots`: the roots, then their descendants.
    std::vector<const Process*> grow(const std::vector<const Process*>& roots) const {
        std::vector<const Process*> out;
        std::set<pid_t> seen;
        for (const Process* r : roots)
            if (seen.insert(r->id.pid).second) out.push_back(r);
        for (const Process* r : roots) {
            auto d = table().descendants(r->id);
            std::reverse(d.begin(), d.end());  // parents before children
            for (const Process* p : d)
                if (!p->zombie() && seen.insert(p->id.pid).second) out.push_back(p);
        }
        return out;
    }

    // Why this tree must not be touched, or "" when it may. `named`: the user named its top
    // (--pid, --session) rather than asked for what is proven left over.
    std::string refusal(const std::vector<const Process*>& procs, bool named) const {
        for (const Process* p : procs) {
            if (p->id.pid == 1) return "PID 1";
            if (p->id.pid == self_) return "mcpwarden reap itself";
            if (protected_.count(p->id.pid))
                return fmt::format("{} ({}) is an ancestor of mcpwarden reap", p->id.pid,
                                   p->display_command());
        }
        if (std::string why = live_member(procs, named); !why.empty()) return why;
        const Process* root = procs.front();
        if (!user_allowed(root->uid))
            return fmt::format("uid {}: another user's process (only root, with --all-users)",
                               root->uid);
        return {};
    }

    bool narrowed_out(const std::vector<const Process*>& procs) const {
        const Process* root = procs.front();
        if (sel_.older_than &&
            root->elapsed_seconds() * 1000.0 < static_cast<double>(sel_.older_than->count()))
            return true;
        if (match_) {
            bool any = *match_ && std::any_of(procs.begin(), procs.end(), [&](const Process* p) {
                return (*match_)->search(p->display_command());
            });
            if (!any) return true;
        }
        return false;
    }

    OrphanVerdict orphan_verdict(const ServerTree& t) const;
    void add_orphans(Plan& plan) const;
    void add_session(const std::string& id, Plan& plan) const;
    void add_pid(pid_t pid, Plan& plan) const;
    // Adds the target (or its refusal); returns it, or nullptr when it was not added.
    TargetTree* add_tree(std::vector<const Process*> procs, std::string selected_as,
                         std::vector<std::string> reasons, bool quiet_refusal, Plan& plan,
                         std::string session = {}) const;

    // The cgroup2 mount session cgroups are looked for under ("": not looked for).
    void set_cgroup_mount(std::string mount) { cgroup_mount_ = std::move(mount); }

  private:
    // The session directory (`<mount>/…/mcpwarden-<session>`) that `pid` sits in (in its
    // payload leaf, or in the directory itself), from /proc/PID/cgroup; "" for any other.
    std::string session_cgroup_of(pid_t pid, const std::string& session) const {
        if (cgroup_mount_.empty() || !valid_session_id(session)) return {};
        auto text = read_file("/proc/" + std::to_string(pid) + "/cgroup");
        if (!text) return {};
        const std::string dir = "/mcpwarden-" + session;
        size_t at = 0;
        while (at < text->size()) {
            size_t end = text->find('\n', at);
            if (end == std::string::npos) end = text->size();
            std::string_view line(text->data() + at, end - at);
            at = end + 1;
            if (!line.starts_with("0::")) continue;
            std::string path(line.substr(3));
            if (path.ends_with(dir + "/payload")) path.resize(path.size() - 8);
            if (!path.ends_with(dir)) return {};
            return cgroup_mount_ + path;
        }
        return {};
    }

    // Whether a live tree's client goes with the target: it is a member of it, and either
    // the user named the target (--pid, --session: the client and its servers, on purpose)
    // or ps proves the client's own tree a logical orphan. A client that is merely inside a
    // tree selected as left over proves nothing: the `cat` that reads a live `npx vite` sits
    // inside the subshell that runs them both, and is as alive as the server.
    bool client_goes_too(const ServerTree& t, const std::set<pid_t>& inside, bool named) const {
        if (!t.client || !inside.count(t.client->id.pid)) return false;
        if (named) return true;
        const ServerTree* of = inv_.tree_of(t.client->id.pid);
        return of && of->member(t.client->id.pid) && of->state == State::LogicalOrphan &&
               of->proven();
    }

    // "live: …" when a member is still somebody's server: ps calls its tree live or wedged
    // and its client does not go with the target (client_goes_too), or a live process
    // outside the target (and outside the supervisors of the member's tree) holds the write
    // end of its stdin or the read end of its stdout.
    std::string live_member(const std::vector<const Process*>& procs, bool named) const {
        std::set<pid_t> inside;
        for (const Process* p : procs)
            inside.insert(p->id.pid);
        for (const Process* p : procs) {
            const ServerTree* t = inv_.tree_of(p->id.pid);
            if (t && !t->member(p->id.pid)) t = nullptr;  // a supervisor, not a member
            if (t && live_state(t->state) && !client_goes_too(*t, inside, named))
                return fmt::format("live: mcpwarden ps shows {} ({}) as {}: {}", t->root.pid,
                                   p->display_command(), inventory::state_name(t->state),
                                   t->state_reasons.empty() ? "" : t->state_reasons.front());
            // Either end of its stdio: a live writer of its stdin, or a live reader of its
            // stdout (`server | cat >log`), outside the target, makes it somebody's.
            for (int fd : {0, 1}) {
                auto peers = fd == 0 ? inv_.stdin_writers(*p) : inv_.stdout_readers(*p);
                for (const Process* w : peers) {
                    if (w->zombie() || inside.count(w->id.pid)) continue;
                    if (t && std::any_of(t->supervisors.begin(), t->supervisors.end(),
                                         [&](const ProcessId& s) { return s == w->id; }))
                        continue;
                    return fmt::format("live: {} ({}) holds the {} end of the {} of {} ({})",
                                       w->id.pid, w->display_command(), fd == 0 ? "write" : "read",
                                       fd == 0 ? "stdin" : "stdout", p->id.pid,
                                       p->display_command());
                }
            }
        }
        return {};
    }

    inventory::Inventory inv_;
    const Selection& sel_;
    std::optional<Result<Pattern>> match_;
    std::string cgroup_mount_;
    std::set<pid_t> protected_;
    pid_t self_ = 0;
    uid_t euid_ = 0;
};

// ports, sockets, credential-looking env names (inventory's rule) and rss of the members.
nlohmann::json capabilities_of(const inventory::Inventory& inv,
                               const std::vector<const Process*>& procs) {
    nlohmann::json listening = nlohmann::json::array();
    nlohmann::json cred = nlohmann::json::array();
    int sockets = 0;
    uint64_t rss = 0;
    std::set<std::string> cred_names;
    for (const Process* p : procs) {
        Capabilities c = inv.capabilities(*p);
        rss += p->rss_kb;
        sockets +=
            static_cast<int>(std::count_if(p->fds.begin(), p->fds.end(), [](const FdInfo& f) {
                return f.kind == FdInfo::Kind::Socket;
            }));
        cred_names.insert(c.credential_env.begin(), c.credential_env.end());
        for (const ListeningPort& l : c.listening)
            listening.push_back(
                {{"pid", p->id.pid},
                 {"proto", std::string(l.udp ? "udp" : "tcp") + (l.ipv6 ? "6" : "")},
                 {"addr", l.addr},
                 {"port", l.port}});
    }
    for (const auto& n : cred_names)
        cred.push_back(n);
    return {
        {"listening", listening}, {"sockets", sockets}, {"credential_env", cred}, {"rss_kb", rss}};
}

TargetTree* Scan::add_tree(std::vector<const Process*> procs, std::string selected_as,
                           std::vector<std::string> reasons, bool quiet_refusal, Plan& plan,
                           std::string session) const {
    if (procs.empty() || narrowed_out(procs)) return nullptr;
    const Process* root = procs.front();
    const bool named = selected_as == "pid" || selected_as == "session";
    if (std::string why = refusal(procs, named); !why.empty()) {
        // --orphans scans the machine: another user's trees are not news, only noise.
        if (!quiet_refusal || user_allowed(root->uid))
            plan.refused.push_back({root->id, root->display_command(), why});
        return nullptr;
    }
    TargetTree t;
    t.session = std::move(session);
    t.selected_as = std::move(selected_as);
    t.reasons = std::move(reasons);
    t.uid = root->uid;
    t.age_seconds = root->elapsed_seconds();
    std::set<pid_t> in;
    for (const Process* p : procs)
        in.insert(p->id.pid);
    for (const Process* p : procs) {
        if (!in.count(p->ppid) || p == root) t.roots.push_back(p->id);
        t.members.push_back({p->id, p->ppid, p->uid, p->display_command(), p->rss_kb});
        if (t.session.empty())
            if (const ServerTree* st = inv_.tree_of(p->id.pid); st && st->member(p->id.pid))
                t.session = st->session;
        if (t.session.empty())
            if (auto marker = inv_.trusted_marker(*p)) t.session = *marker;
    }
    // The sweep may follow the marker only if nothing outside the tree carries it now.
    if (!t.session.empty() &&
        std::none_of(table().all().begin(), table().all().end(), [&](const Process& p) {
            return !p.zombie() && inv_.trusted_marker(p) == t.session && !in.count(p.id.pid);
        }))
        t.marker = t.session;
    t.capabilities = capabilities_of(inv_, procs);
    for (const Process* p : procs) {
        if (const ServerTree* st = inv_.tree_of(p->id.pid))
            for (const ProcessId& s : st->supervisors)
                if (std::find(t.supervisors.begin(), t.supervisors.end(), s) == t.supervisors.end())
                    t.supervisors.push_back(s);
        if (std::string dir = session_cgroup_of(p->id.pid, t.session);
            !dir.empty() &&
            std::find(t.cgroup_dirs.begin(), t.cgroup_dirs.end(), dir) == t.cgroup_dirs.end())
            t.cgroup_dirs.push_back(std::move(dir));
    }
    plan.trees.push_back(std::move(t));
    return &plan.trees.back();
}

OrphanVerdict Scan::orphan_verdict(const ServerTree& t) const {
    OrphanVerdict v;
    v.orphan = t.state == State::LogicalOrphan || t.os_orphan.has_value();
    if (!v.orphan) return v;
    if (live_state(t.state)) {
        v.refused = fmt::format("live: mcpwarden ps shows it as {} ({}); {} is a clue only",
                                inventory::state_name(t.state),
                                t.state_reasons.empty() ? "" : t.state_reasons.front(),
                                t.os_orphan->reason);
        return v;
    }
    // A session is one server: if ps shows another tree of it live, this part is not left over.
    for (const ServerTree& other : inv_.servers())
        if (&other != &t && !t.session.empty() && other.session == t.session &&
            live_state(other.state)) {
            v.refused =
                fmt::format("live: session {} also has {} ({}), which ps shows as {}", t.session,
                            other.root.pid, other.name, inventory::state_name(other.state));
            return v;
        }
    // Proof first: a destructive selection needs the journal, a trusted marker, or a config
    // match on dead stdio. What only looks like an MCP server is a suspect: listed, and
    // selected only when the user asked for suspects by name.
    if (t.proven()) {
        v.selected_as = t.state == State::LogicalOrphan ? "logical-orphan" : "os-orphan";
    } else if (sel_.include_suspects) {
        v.selected_as = "suspect";
    } else {
        v.refused = fmt::format("{} (--include-suspects selects it, --pid {} names it)",
                                t.suspect_reason(), t.root.pid);
    }
    return v;
}

void Scan::add_orphans(Plan& plan) const {
    for (const ServerTree& t : inv_.servers()) {
        OrphanVerdict v = orphan_verdict(t);
        if (!v.orphan) continue;
        const Process* root = table().find(t.root);
        if (!root || root->zombie()) continue;
        auto procs = grow({root});
        if (!v.refused.empty()) {
            if (!narrowed_out(procs) && user_allowed(root->uid))
                plan.refused.push_back({root->id, root->display_command(), v.refused});
            continue;
        }
        std::vector<std::string> reasons = t.state_reasons;
        if (t.os_orphan) reasons.push_back("os-orphan: " + t.os_orphan->reason);
        reasons.push_back(evidence_line(t));
        if (v.selected_as == "suspect")
            reasons.push_back("selected by --include-suspects: " + t.suspect_reason());
        add_tree(std::move(procs), v.selected_as, std::move(reasons), true, plan);
    }
}

// Directories named `mcpwarden-<id>` under the cgroup2 mount (bounded walk).
std::vector<std::string> find_session_cgroups(const std::string& mount, const std::string& id) {
    std::vector<std::string> found;
    const std::string want = "mcpwarden-" + id;
    std::vector<std::pair<std::string, int>> stack{{mount, 0}};
    size_t visited = 0;
    while (!stack.empty() && visited < 20000) {
        auto [dir, depth] = stack.back();
        stack.pop_back();
        ++visited;
        DIR* d = ::opendir(dir.c_str());
        if (!d) continue;
        while (dirent* e = ::readdir(d)) {
            if (e->d_type != DT_DIR || e->d_name[0] == '.') continue;
            std::string path = dir + "/" + e->d_name;
            if (want == e->d_name)
                found.push_back(path);
            else if (depth < 12)
                stack.push_back({path, depth + 1});
        }
        ::closedir(d);
    }
    return found;
}

void Scan::add_session(const std::string& id, Plan& plan) const {
    std::vector<const Process*> found;
    std::set<pid_t> seen;
    auto take = [&](const Process* p) {
        if (p && !p->zombie() && seen.insert(p->id.pid).second) found.push_back(p);
    };
    std::string cgroup_path;
    std::vector<std::string> reasons, session_dirs;
    if (!cgroup_mount_.empty()) {
        for (const std::string& dir : find_session_cgroups(cgroup_mount_, id)) {
            std::string leaf = dir + "/payload";
            struct stat st {};
            if (::stat(leaf.c_str(), &st) != 0) leaf = dir;
            for (const std::string& g : {leaf, dir}) {
                auto cg = Cgroup::open(g);
                if (!cg) continue;
                auto procs = cg->procs();
                if (!procs) continue;
                for (pid_t pid : *procs)
                    take(table().find(pid));
            }
            if (cgroup_path.empty()) cgroup_path = leaf;
            session_dirs.push_back(dir);
            reasons.push_back("session cgroup " + leaf);
        }
    }
    size_t by_cgroup = found.size();
    // Only markers that count: another user's process carrying this id joins nothing.
    for (const Process& p : table().all())
        if (p.session_marker && *p.session_marker == id && inv_.trusted_marker(p)) take(&p);
    if (found.size() > by_cgroup)
        reasons.push_back(
            fmt::format("{} process(es) with MCPWARDEN_SESSION={}", found.size() - by_cgroup, id));
    if (found.empty()) {
        // Nothing of the session is alive, but its directories are still there: nobody
        // else will remove them once the relay and the keeper are gone.
        if (!session_dirs.empty()) plan.empty_cgroups.push_back({id, std::move(session_dirs)});
        return;
    }
    // The tops: members whose parent is not itself found. Their trees grow from there.
    std::vector<const Process*> tops;
    for (const Process* p : found)
        if (!seen.count(p->ppid)) tops.push_back(p);
    std::sort(tops.begin(), tops.end(),
              [](const Process* a, const Process* b) { return a->id.pid < b->id.pid; });
    if (TargetTree* t = add_tree(grow(tops), "session", std::move(reasons), false, plan, id)) {
        t->cgroup = cgroup_path;
        for (std::string& d : session_dirs)
            if (std::find(t->cgroup_dirs.begin(), t->cgroup_dirs.end(), d) == t->cgroup_dirs.end())
                t->cgroup_dirs.push_back(std::move(d));
    }
}

void Scan::add_pid(pid_t pid, Plan& plan) const {
    const Process* p = table().find(pid);
    if (!p || p->zombie()) return;
    add_tree(grow({p}), "pid", {fmt::format("--pid {}: the process and its whole tree", pid)},
             false, plan);
}

// Drops trees whose root is a member of another (bigger) tree of the plan.
void merge_overlaps(Plan& plan) {
    std::stable_sort(plan.trees.begin(), plan.trees.end(),
                     [](const TargetTree& a, const TargetTree& b) {
                         return a.members.size() > b.members.size();
                     });
    std::vector<TargetTree> kept;
    for (TargetTree& t : plan.trees) {
        bool inside = std::any_of(kept.begin(), kept.end(), [&](const TargetTree& k) {
            const Member* m = k.member(t.root().pid);
            return m && m->id == t.root();
        });
        if (!inside) kept.push_back(std::move(t));
    }
    std::sort(kept.begin(), kept.end(),
              [](const TargetTree& a, const TargetTree& b) { return a.root().pid < b.root().pid; });
    plan.trees = std::move(kept);
}

}  // namespace

Status validate(const Selection& sel) {
    bool selector = sel.orphans || !sel.sessions.empty() || !sel.pids.empty();
    if (!selector && !sel.match.empty()) return Error::msg(kMatchAlone);
    if (!selector) return Error::msg(kNoSelector);
    if (!sel.match.empty())
        if (auto p = Pattern::compile(sel.match); !p)
            return Error::msg("--match " + p.error().message);
    for (const std::string& id : sel.sessions)
        if (!valid_session_id(id))
            return Error::msg(fmt::format(
                "--session '{}': a session id is 1 to 64 characters of [A-Za-z0-9._-]", id));
    for (pid_t pid : sel.pids)
        if (pid <= 1) return Error::msg(fmt::format("--pid {}: never PID 0 or 1", pid));
    const uid_t euid = ::geteuid();
    if (sel.all_users && euid != 0)
        return Error::msg("--all-users: only root may reap another user's processes");
    if (sel.user && *sel.user != euid && !(euid == 0 && sel.all_users))
        return Error::msg(
            fmt::format("--user {}: only root may reap another user's processes (with --all-users)",
                        *sel.user));
    return {};
}

Result<Plan> plan(const Selection& sel, const PlanOptions& opts) {
    if (auto st = validate(sel); !st) return st.error();
    inventory::ScanOptions so;
    so.all_users = sel.all_users || (sel.user && *sel.user != ::getuid());
    so.journal_path = opts.journal_path;
    if (opts.use_client_configs) so.declared = clients::declared_servers_here(std::nullopt);
    auto inv = inventory::Inventory::scan(so);
    if (!inv) return inv.error();
    Scan scan(sel, std::move(*inv));
    if (opts.use_cgroup) {
        std::string mount = opts.cgroup_mount;
        if (mount.empty())
            if (auto m = cgroup2_mount(); m) mount = *m;
        scan.set_cgroup_mount(std::move(mount));
    }
    Plan plan;
    plan.warnings = scan.inventory().warnings();
    if (sel.orphans) scan.add_orphans(plan);
    for (const std::string& id : sel.sessions)
        scan.add_session(id, plan);
    for (pid_t pid : sel.pids)
        scan.add_pid(pid, plan);
    merge_overlaps(plan);
    plan.scanned = scan.table().all().size();
    return plan;
}

}  // namespace warden::reap
