// The trees: every process with evidence (a candidate), climbed from through the wrappers
// that launched it to the root of its launch, and one tree per launch with its server, its
// name and its members' roles (the essay on roles opens plant_tree below).
#include <algorithm>
#include <functional>
#include <set>

#include <fmt/format.h>

#include "inventory/argv.hpp"
#include "inventory/inventory_impl.hpp"

namespace warden::inventory {

namespace {

bool same_stdin(const Process& a, const Process& b) {
    const FdInfo* x = fd_of(a, 0);
    const FdInfo* y = fd_of(b, 0);
    return stream_fd(x) && stream_fd(y) && x->inode == y->inode && x->kind == y->kind;
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

}  // namespace warden::inventory
