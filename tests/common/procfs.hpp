// procfs.hpp (tests/common, library warden_testing): raw /proc reads for tests.
//
// Deliberately independent of src/proc, so the tests of that layer (and of the layers below
// it) have an oracle that does not share its code.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace warden::testing {

// The environment variable tests put on everything they spawn, so cleanup and the "zero
// remnants" oracle find setsid/double-fork escapees by identity, never by name.
inline constexpr const char* kTagVar = "WARDEN_TEST_TAG";

// Fields of /proc/PID/stat (comm may contain spaces and ')': parsed from the last ')').
struct ProcStat {
    pid_t pid = 0;
    std::string comm;
    char state = '?';
    pid_t ppid = 0;
    pid_t pgid = 0;
    pid_t sid = 0;
    int nice = 0;            // field 19
    uint64_t starttime = 0;  // field 22, clock ticks since boot
    uint64_t cpu_ticks = 0;  // fields 14 + 15: user and system time, clock ticks
};

std::optional<ProcStat> read_stat(pid_t pid);
// The nice value of `pid`'s thread named `name` (its comm), if it has one now.
std::optional<int> thread_nice(pid_t pid, std::string_view name);
// The CPU time (user + system, clock ticks) `pid`'s thread named `name` has used, if it has
// one now.
std::optional<uint64_t> thread_cpu_ticks(pid_t pid, std::string_view name);
// The CPUs `pid` (its main thread), or its thread named `name`, may run on, as
// /proc/PID/status lists them ("0-1"); "" if there is no such process or thread now.
std::string cpus_allowed(pid_t pid);
std::string thread_cpus_allowed(pid_t pid, std::string_view name);

// Zombies ('Z', 'X') keep their /proc entry; they are not alive.
bool is_zombie_state(char state);
// Present in /proc and not a zombie.
bool is_live(pid_t pid);
// Present, not a zombie, and still the process that had `starttime` (no PID reuse).
bool is_same_live_process(pid_t pid, uint64_t starttime);

// Every numeric entry of /proc.
std::vector<pid_t> list_pids();

// The value of `name` in /proc/PID/environ, if readable and present.
std::optional<std::string> env_value(pid_t pid, std::string_view name);

// A hex mask line of /proc/PID/status ("SigIgn", "SigBlk", "SigCgt", ...).
std::optional<uint64_t> status_mask(pid_t pid, std::string_view field);

// Direct children (by ppid) and all descendants (ppid links, whatever group or session),
// from one scan. Processes older than their "parent" are dropped (PID reuse).
std::vector<pid_t> children_of(pid_t pid);
std::vector<pid_t> descendants_of(pid_t pid);

// The unified-hierarchy cgroup of `pid` ("/…/mcpwarden-ID/payload"), or "".
std::string cgroup_of(pid_t pid);
// Removes a session's cgroup (payload, then the session directory), which nobody else does
// when the relay and the keeper both died (elsewhere a no-op: the session removed it). Only
// directories named for a session (`mcpwarden-`) are touched. False while the session
// directory is still there (a member not yet reaped keeps it busy).
bool remove_session_cgroup(const std::string& payload);
// Whether that session's directory is still there (on any cgroup2 mount).
bool session_cgroup_left(const std::string& payload);

// A cgroup v2 directory of the test's own, under the test's cgroup, for a command to run in
// so that what it creates in its own cgroup can be listed afterwards (session cgroups:
// `mcpwarden-<id>`). valid() is false where no cgroup can be made (no cgroup2, not
// writable). The destructor removes it and whatever empty directories are left below.
class ScratchCgroup {
  public:
    explicit ScratchCgroup(const std::string& name);
    ~ScratchCgroup();
    ScratchCgroup(const ScratchCgroup&) = delete;
    ScratchCgroup& operator=(const ScratchCgroup&) = delete;
    bool valid() const { return !path_.empty(); }
    const std::string& path() const { return path_; }
    // The directories below it now (relative names, depth first).
    std::vector<std::string> children() const;

  private:
    std::string path_;
};

// Live (non-zombie) processes whose environment carries kTagVar=tag.
std::vector<pid_t> live_tagged(const std::string& tag);
// Those of them that are `root` or descend from it by parent links: a session's relay and
// what it started for its server, not its run's background worker (mcpwarden-sweep,
// src/api/dead_sessions.cpp: the relay's child too, for as long as its work takes).
std::vector<pid_t> live_tagged_below(const std::string& tag, pid_t root);
// After `mcpwarden run` exited: true when no live process carries kTagVar=tag but a run's
// background worker (mcpwarden-sweep, src/api/dead_sessions.cpp) whose run was killed (the
// kernel's PDEATHSIG on its way), and that is gone too within 5 s. A run that returned leaves
// nothing, its worker included (docs/RUN.md, "When run returns").
bool nothing_tagged_left(const std::string& tag);

// The inodes of the TCP sockets in LISTEN state on `port` (from /proc/net/tcp{,6}).
std::vector<uint64_t> listening_inodes(uint16_t port);
// How many descriptors `pid` has open (the entries of /proc/PID/fd; -1: unreadable).
int open_descriptors(pid_t pid);

// Whether `pid` has an fd on socket inode `inode`.
bool holds_socket(pid_t pid, uint64_t inode);

}  // namespace warden::testing
