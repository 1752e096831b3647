// TreeGuard: finds every process a test started, escapees included, and SIGKILLs them all
// on destruction, so a failing test leaves nothing behind.
//
// Membership: the root, its descendants by ppid (whatever their group or session), every
// process carrying kTagVar=<tag> in its environment (setsid/double-fork escapees already
// reparented to PID 1), and the descendants of those. Each member is recorded as
// (pid, starttime) and re-verified before every signal, so a recycled PID is never hit.
//
// A SIGKILL of a whole session at once (its run, its keeper and its server) leaves its
// session cgroup behind: the keeper that would remove it died with the rest. That leftover
// is the guard's doing, not the product's, so the guard removes the session cgroups of the
// members it killed (and only those) once they are empty.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace warden::testing {

class TreeGuard {
  public:
    // `root` may be 0 (tag only); `tag` may be empty (ppid walk only). When `reap_root` is
    // false the guard never waitpid()s the root (its owner, e.g. TestChild, reaps it).
    explicit TreeGuard(pid_t root = 0, std::string tag = {}, bool reap_root = true);
    ~TreeGuard();
    TreeGuard(TreeGuard&& o) noexcept;
    TreeGuard& operator=(TreeGuard&&) = delete;
    TreeGuard(const TreeGuard&) = delete;
    TreeGuard& operator=(const TreeGuard&) = delete;

    // Sets the root after construction (e.g. right after fork) and records it.
    void set_root(pid_t root, bool reap_root);
    // Records `pid` (with its current starttime) as a member.
    void add(pid_t pid);
    // Records an explicit identity (tests use it to fake a recycled pid).
    void add(pid_t pid, uint64_t starttime);
    // Re-walks /proc and records new members; returns how many are recorded and live.
    size_t refresh();
    // Recorded members that are still the same live process.
    std::vector<pid_t> live_members() const;
    // SIGKILLs every member until a refresh finds none alive (bounded by `timeout`), reaping
    // the root if it owns it (zombies are not alive), then removes the session cgroups the
    // killed members were in. Returns true when none is left.
    bool kill_all(std::chrono::milliseconds timeout = std::chrono::seconds(10));

    pid_t root() const { return root_; }
    const std::string& tag() const { return tag_; }

  private:
    struct Member {
        pid_t pid;
        uint64_t starttime;
    };
    void record(pid_t pid, uint64_t starttime);
    void reap_children();

    pid_t root_ = 0;
    uint64_t root_start_ = 0;
    std::string tag_;
    bool reap_root_ = true;
    std::vector<Member> members_;
};

}  // namespace warden::testing
