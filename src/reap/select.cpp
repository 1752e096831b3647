// plan(): one scan of the machine → the target trees of a selection, each checked against
// the safety rules before anything is shown to the user, let alone signalled.
//
// Orphans are found by pipe evidence, never by name or PPID: a stdio server reads its
// requests from a pipe whose write end its client holds; when no live process outside the
// server's own tree holds that write end any more, nobody can talk to it again (a logical
// orphan, incident-practice.md). The same evidence, the other way round, is the "live" rule
// that protects every selection: a tree in which any member's stdin still has a live writer
// outside the tree is refused, whatever selected it.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <set>

#include <fmt/format.h>

#include "proc/pipe_peers.hpp"
#include "proc/process_table.hpp"
#include "proc/sockets.hpp"
#include "reap/reap.hpp"
#include "sys/cgroup.hpp"

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

constexpr const char* kNoSelector = "nothing selected: give --orphans, --session ID or --pid N";
constexpr const char* kMatchAlone =
    "--match only narrows a selection: give --orphans, --session ID or --pid N as well";

bool valid_session_id(const std::string& id) {
    if (id.empty() || id.size() > 64) return false;
    return std::all_of(id.begin(), id.end(), [](unsigned char c) {
        return std::isalnum(c) || c == '.' || c == '_' || c == '-';
    });
}

const FdInfo* fd_of(const Process& p, int fd) {
    for (const FdInfo& f : p.fds)
        if (f.fd == fd) return &f;
    return nullptr;
}

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

bool credential_name(const std::string& name) {
    std::string n = lower(name);
    for (const char* w : {"token", "secret", "password", "passwd", "credential", "api_key",
                          "apikey", "_key", "_auth", "ssh_auth_sock"})
        if (n.find(w) != std::string::npos) return true;
    return false;
}

// Everything plan() needs from one scan.
class Scan {
  public:
    explicit Scan(const Selection& sel)
        : table_(ProcessTable::scan(kBasic | kFds | kEnvNames)), peers_(table_), sel_(sel) {
        self_ = ::getpid();
        euid_ = ::geteuid();
        protected_ = {0, 1, 2, self_};
        pid_t p = ::getppid();
        for (int guard = 0; p > 1 && guard < 4096; ++guard) {
            protected_.insert(p);
            const Process* proc = table_.find(p);
            if (!proc) break;
            p = proc->ppid;
        }
        if (!sel.match.empty()) match_.emplace(sel.match, std::regex::ECMAScript);
    }

    const ProcessTable& table() const { return table_; }

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
            auto d = table_.descendants(r->id);
            std::reverse(d.begin(), d.end());  // parents before children
            for (const Process* p : d)
                if (!p->zombie() && seen.insert(p->id.pid).second) out.push_back(p);
        }
        return out;
    }

    // Live processes outside `tree` that hold the write end of p's stdin pipe.
    std::vector<const Process*> outside_writers(const Process& p,
                                                const std::set<pid_t>& tree) const {
        std::vector<const Process*> out;
        for (const Process* w : peers_.writers_of_stdin(p))
            if (!tree.count(w->id.pid) && !w->zombie()) out.push_back(w);
        return out;
    }

    // Why this tree must not be touched, or "" when it may.
    std::string refusal(const std::vector<const Process*>& procs) const {
        std::set<pid_t> tree;
        for (const Process* p : procs)
            tree.insert(p->id.pid);
        for (const Process* p : procs) {
            if (p->id.pid == 1) return "PID 1";
            if (p->id.pid == self_) return "mcpwarden reap itself";
            if (protected_.count(p->id.pid))
                return fmt::format("{} ({}) is an ancestor of mcpwarden reap", p->id.pid,
                                   p->display_command());
        }
        for (const Process* p : procs)
            if (auto w = outside_writers(*p, tree); !w.empty())
                return fmt::format("live: {} ({}) holds the write end of the stdin of {} ({})",
                                   w.front()->id.pid, w.front()->display_command(), p->id.pid,
                                   p->display_command());
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
            bool any = std::any_of(procs.begin(), procs.end(), [&](const Process* p) {
                return std::regex_search(p->display_command(), *match_);
            });
            if (!any) return true;
        }
        return false;
    }

    // A stdio server candidate: stdin the read end of a pipe, stdout a pipe or socket.
    static bool stdio_on_pipes(const Process& p) {
        const FdInfo* in = fd_of(p, 0);
        const FdInfo* out = fd_of(p, 1);
        return in && in->kind == FdInfo::Kind::Pipe && out &&
               (out->kind == FdInfo::Kind::Pipe || out->kind == FdInfo::Kind::Socket);
    }

    // Some sign that it is an MCP server at all (until inventory's evidence replaces this):
    // the session marker, or "mcp" / "modelcontextprotocol" in its command line.
    static bool looks_like_mcp(const Process& p) {
        if (p.session_marker) return true;
        std::string c = lower(p.display_command());
        return c.find("mcp") != std::string::npos;
    }

    // mcpwarden's own processes (relay, keeper, CLI) are supervisors, never servers.
    static bool ours(const Process& p) { return p.comm == "mcpwarden"; }

    Plan plan_orphans() const;
    void add_session(const std::string& id, const PlanOptions& opts, Plan& plan) const;
    void add_pid(pid_t pid, Plan& plan) const;
    void add_tree(std::vector<const Process*> procs, std::string selected_as,
                  std::vector<std::string> reasons, bool quiet_refusal, Plan& plan) const;

  private:
    ProcessTable table_;
    PipePeers peers_;
    const Selection& sel_;
    std::optional<std::regex> match_;
    std::set<pid_t> protected_;
    pid_t self_ = 0;
    uid_t euid_ = 0;
};

nlohmann::json capabilities_of(const std::vector<const Process*>& procs) {
    nlohmann::json listening = nlohmann::json::array();
    nlohmann::json cred = nlohmann::json::array();
    int sockets = 0;
    uint64_t rss = 0;
    std::set<std::string> cred_names;
    for (const Process* p : procs) {
        rss += p->rss_kb;
        for (const FdInfo& f : p->fds)
            if (f.kind == FdInfo::Kind::Socket) ++sockets;
        for (const std::string& n : p->env_names)
            if (credential_name(n)) cred_names.insert(n);
        if (std::any_of(p->fds.begin(), p->fds.end(),
                        [](const FdInfo& f) { return f.kind == FdInfo::Kind::Socket; }))
            for (const ListeningPort& l : listening_ports(*p))
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

void Scan::add_tree(std::vector<const Process*> procs, std::string selected_as,
                    std::vector<std::string> reasons, bool quiet_refusal, Plan& plan) const {
    if (procs.empty() || narrowed_out(procs)) return;
    const Process* root = procs.front();
    if (std::string why = refusal(procs); !why.empty()) {
        // --orphans scans the machine: another user's trees are not news, only noise.
        if (!quiet_refusal || user_allowed(root->uid))
            plan.refused.push_back({root->id, root->display_command(), why});
        return;
    }
    TargetTree t;
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
        if (t.session.empty() && p->session_marker) t.session = *p->session_marker;
    }
    t.capabilities = capabilities_of(procs);
    plan.trees.push_back(std::move(t));
}

Plan Scan::plan_orphans() const {
    Plan plan;
    // Group candidates by their top: a wrapper (`sh -c`, `npx`) and the server it started
    // share the stdin pipe, so the top is the outermost process on the same pipe.
    std::map<pid_t, const Process*> tops;
    for (const Process& p : table_.all()) {
        if (p.zombie() || p.ppid == 2 || p.id.pid <= 2 || ours(p)) continue;
        if (!stdio_on_pipes(p)) continue;
        const Process* top = &p;
        const uint64_t pipe = fd_of(p, 0)->inode;
        for (int guard = 0; guard < 64; ++guard) {
            const Process* parent = table_.find(top->ppid);
            if (!parent || parent->zombie() || ours(*parent)) break;
            const FdInfo* in = fd_of(*parent, 0);
            if (!in || in->kind != FdInfo::Kind::Pipe || in->inode != pipe) break;
            top = parent;
        }
        tops.emplace(top->id.pid, top);
    }
    for (auto [pid, top] : tops) {
        auto procs = grow({top});
        if (!std::any_of(procs.begin(), procs.end(),
                         [](const Process* p) { return looks_like_mcp(*p); }))
            continue;
        std::set<pid_t> tree;
        for (const Process* p : procs)
            tree.insert(p->id.pid);
        if (!outside_writers(*top, tree).empty()) continue;  // live: its client is there
        std::vector<std::string> reasons{fmt::format(
            "no live process outside the tree holds the write end of its stdin (pipe:[{}])",
            fd_of(*top, 0)->inode)};
        if (top->ppid == 1) reasons.push_back("reparented to PID 1");
        add_tree(std::move(procs), "logical-orphan", std::move(reasons), true, plan);
    }
    return plan;
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

void Scan::add_session(const std::string& id, const PlanOptions& opts, Plan& plan) const {
    std::vector<const Process*> found;
    std::set<pid_t> seen;
    auto take = [&](const Process* p) {
        if (p && !p->zombie() && seen.insert(p->id.pid).second) found.push_back(p);
    };
    std::string cgroup_path;
    std::vector<std::string> reasons;
    if (opts.use_cgroup) {
        std::string mount = opts.cgroup_mount;
        if (mount.empty())
            if (auto m = cgroup2_mount(); m) mount = *m;
        if (!mount.empty())
            for (const std::string& dir : find_session_cgroups(mount, id)) {
                std::string leaf = dir + "/payload";
                struct stat st {};
                if (::stat(leaf.c_str(), &st) != 0) leaf = dir;
                for (const std::string& g : {leaf, dir}) {
                    auto cg = Cgroup::open(g);
                    if (!cg) continue;
                    auto procs = cg->procs();
                    if (!procs) continue;
                    for (pid_t pid : *procs)
                        take(table_.find(pid));
                }
                if (cgroup_path.empty()) cgroup_path = leaf;
                reasons.push_back("session cgroup " + leaf);
            }
    }
    size_t by_cgroup = found.size();
    for (const Process& p : table_.all())
        if (p.session_marker && *p.session_marker == id) take(&p);
    if (found.size() > by_cgroup)
        reasons.push_back(
            fmt::format("{} process(es) with MCPWARDEN_SESSION={}", found.size() - by_cgroup, id));
    if (found.empty()) return;
    // The tops: members whose parent is not itself found. Their trees grow from there.
    std::vector<const Process*> tops;
    for (const Process* p : found)
        if (!seen.count(p->ppid)) tops.push_back(p);
    std::sort(tops.begin(), tops.end(),
              [](const Process* a, const Process* b) { return a->id.pid < b->id.pid; });
    auto procs = grow(tops);
    size_t before = plan.trees.size();
    add_tree(std::move(procs), "session", std::move(reasons), false, plan);
    if (plan.trees.size() > before) {
        plan.trees.back().session = id;
        plan.trees.back().cgroup = cgroup_path;
    }
}

void Scan::add_pid(pid_t pid, Plan& plan) const {
    const Process* p = table_.find(pid);
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
    if (!sel.match.empty()) {
        try {
            std::regex r(sel.match, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
            return Error::msg(
                fmt::format("--match '{}': not a regular expression: {}", sel.match, e.what()));
        }
    }
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
    Scan scan(sel);
    if (scan.table().all().empty()) return Error::msg("cannot scan /proc: no process readable");
    Plan plan;
    if (sel.orphans) plan = scan.plan_orphans();
    for (const std::string& id : sel.sessions)
        scan.add_session(id, opts, plan);
    for (pid_t pid : sel.pids)
        scan.add_pid(pid, plan);
    merge_overlaps(plan);
    plan.scanned = scan.table().all().size();
    return plan;
}

}  // namespace warden::reap
