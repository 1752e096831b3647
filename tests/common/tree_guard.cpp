#include "common/tree_guard.hpp"

#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "common/procfs.hpp"
#include "common/util.hpp"

namespace warden::testing {

TreeGuard::TreeGuard(pid_t root, std::string tag, bool reap_root) : tag_(std::move(tag)) {
    if (root > 0) set_root(root, reap_root);
}

void TreeGuard::set_root(pid_t root, bool reap_root) {
    root_ = root;
    reap_root_ = reap_root;
    if (auto st = read_stat(root_)) {
        root_start_ = st->starttime;
        record(root_, root_start_);
    }
}

TreeGuard::TreeGuard(TreeGuard&& o) noexcept
    : root_(std::exchange(o.root_, 0)),
      root_start_(o.root_start_),
      tag_(std::move(o.tag_)),
      reap_root_(o.reap_root_),
      members_(std::move(o.members_)) {
    o.tag_.clear();
    o.members_.clear();
}

TreeGuard::~TreeGuard() {
    if (root_ > 0 || !tag_.empty() || !members_.empty()) kill_all();
}

void TreeGuard::record(pid_t pid, uint64_t starttime) {
    for (auto& m : members_) {
        if (m.pid != pid) continue;
        m.starttime = starttime;  // a recycled pid now belongs to the tree: track the new one
        return;
    }
    members_.push_back({pid, starttime});
}

void TreeGuard::add(pid_t pid, uint64_t starttime) {
    record(pid, starttime);
}

void TreeGuard::add(pid_t pid) {
    if (auto st = read_stat(pid)) record(pid, st->starttime);
}

size_t TreeGuard::refresh() {
    std::map<pid_t, ProcStat> all;
    for (pid_t p : list_pids())
        if (auto st = read_stat(p)) all.emplace(p, *st);

    // Seeds: verified members (the root among them), and everything tagged.
    std::vector<pid_t> todo;
    for (const auto& m : members_) {
        auto it = all.find(m.pid);
        if (it != all.end() && it->second.starttime == m.starttime) todo.push_back(m.pid);
    }
    if (!tag_.empty()) {
        for (const auto& [p, st] : all) {
            auto v = env_value(p, kTagVar);
            if (v && *v == tag_) {
                record(p, st.starttime);
                todo.push_back(p);
            }
        }
    }

    std::multimap<pid_t, pid_t> kids;
    for (const auto& [p, st] : all)
        kids.emplace(st.ppid, p);
    std::set<pid_t> seen(todo.begin(), todo.end());
    for (size_t guard = 0; !todo.empty() && guard < 1'000'000; ++guard) {
        pid_t cur = todo.back();
        todo.pop_back();
        const ProcStat& parent = all.at(cur);
        auto [b, e] = kids.equal_range(cur);
        for (auto it = b; it != e; ++it) {
            const ProcStat& child = all.at(it->second);
            if (child.pid == cur || child.starttime < parent.starttime) continue;  // PID reuse
            if (!seen.insert(child.pid).second) continue;
            record(child.pid, child.starttime);
            todo.push_back(child.pid);
        }
    }
    return live_members().size();
}

std::vector<pid_t> TreeGuard::live_members() const {
    std::vector<pid_t> out;
    for (const auto& m : members_)
        if (is_same_live_process(m.pid, m.starttime)) out.push_back(m.pid);
    return out;
}

void TreeGuard::reap_children() {
    // Only the root, and only when we own it: any other member that happens to be our child
    // may belong to someone else's wait (another TestChild). Zombies do not count as live.
    if (root_ > 0 && reap_root_) ::waitpid(root_, nullptr, WNOHANG);
}

bool TreeGuard::kill_all(std::chrono::milliseconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    std::set<std::string> session_groups;  // of the members killed
    for (int round = 0; round < 1000; ++round) {
        refresh();
        bool any = false;
        for (const auto& m : members_) {
            // Identity re-checked right before the signal: never a recycled pid.
            if (!is_same_live_process(m.pid, m.starttime)) continue;
            if (std::string g = cgroup_of(m.pid);
                g.find("/mcpwarden-") != std::string::npos && g.ends_with("/payload"))
                session_groups.insert(g);
            ::kill(m.pid, SIGKILL);
            any = true;
        }
        if (!any) break;
        // Wait (bounded) for those to die; then go round again for anything forked meanwhile.
        for (int i = 0; i < 200; ++i) {
            reap_children();
            if (live_members().empty()) break;
            std::this_thread::sleep_for(std::chrono::milliseconds(2));
        }
        if (std::chrono::steady_clock::now() >= deadline) break;
    }
    reap_children();
    bool clean = live_members().empty();
    for (const std::string& g : session_groups)
        (void)wait_until([&] { return remove_session_cgroup(g); }, std::chrono::seconds(1));
    members_.erase(std::remove_if(members_.begin(), members_.end(),
                                  [](const Member& m) { return !is_live(m.pid); }),
                   members_.end());
    return clean;
}

}  // namespace warden::testing
