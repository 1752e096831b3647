// cgroup v2 files: find the hierarchy, create and remove a child group, and drive the
// files containment needs (cgroup.procs, cgroup.kill, cgroup.freeze, cgroup.events).
//
// The v2 hierarchy is found from /proc/self/mountinfo (hybrid systems mount it at
// /sys/fs/cgroup/unified, not /sys/fs/cgroup) and our own place in it from the `0::` line
// of /proc/self/cgroup. Waiting for "empty" uses poll(POLLPRI) on cgroup.events, which the
// kernel wakes on every change of `populated`/`frozen`: no sleep loop.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "sys/fd.hpp"

namespace warden {

// Mount point of the cgroup2 filesystem, e.g. "/sys/fs/cgroup/unified".
Result<std::string> cgroup2_mount();
// Our cgroup relative to that mount, from /proc/self/cgroup ("/" for the root).
Result<std::string> own_cgroup();

// One cgroup directory. Owning (created by us) groups are rmdir'ed on destruction, which
// only succeeds once they are empty; a non-owning handle never removes anything.
class Cgroup {
  public:
    Cgroup() = default;
    Cgroup(Cgroup&&) noexcept = default;
    Cgroup& operator=(Cgroup&&) noexcept;
    Cgroup(const Cgroup&) = delete;
    Cgroup& operator=(const Cgroup&) = delete;
    ~Cgroup();

    // mkdir(path) (EEXIST is an error: a session never shares a group) and opens it.
    static Result<Cgroup> create(const std::string& abs_path);
    // Opens an existing group without owning it.
    static Result<Cgroup> open(const std::string& abs_path);

    const std::string& path() const { return path_; }
    bool valid() const { return dir_.valid(); }
    // O_DIRECTORY fd for clone3(CLONE_INTO_CGROUP).
    int dir_fd() const { return dir_.get(); }
    // Whether this kernel offers cgroup.kill here (5.14+).
    bool has_kill() const;

    Status kill() const;                       // write "1" to cgroup.kill
    Status freeze(bool on) const;              // write "1"/"0" to cgroup.freeze
    Status add(pid_t pid) const;               // write pid to cgroup.procs
    Result<std::vector<pid_t>> procs() const;  // cgroup.procs
    // Whether `pid` is in this group or one below it (/proc/PID/cgroup's `0::` line).
    Result<bool> holds(pid_t pid) const;
    Result<bool> populated() const;  // cgroup.events "populated"
    // Waits until populated is 0, woken by POLLPRI on cgroup.events; true if empty in time.
    Result<bool> wait_empty(int timeout_ms) const;
    // Fd of cgroup.events to poll (POLLPRI) beside other fds; re-read with populated().
    Result<Fd> open_events() const;
    // rmdir now (must be empty); the destructor then has nothing left to do.
    Status remove();
    // rmdir once the last member is out. A teardown that saw every member die can still
    // get here before the last one has left the group (the kernel takes a task out of its
    // cgroup late in its exit, and under load that exit may not have been scheduled yet):
    // rmdir says EBUSY. So a busy group gets an event-driven wait, bounded by timeout_ms,
    // for "populated 0" and a second try. A group that stays busy holds live processes.
    Status remove_once_empty(int timeout_ms);

  private:
    std::string path_;
    Fd dir_;
    bool owned_ = false;
};

}  // namespace warden
