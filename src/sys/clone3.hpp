// clone3(2) as fork(): a child born with a pidfd, inside a cgroup, optionally in a new PID
// namespace, with fork() as the fallback when the kernel (or a test seam) refuses clone3.
//
// The child side returns pid 0 exactly like fork(). After a raw clone3 the child of a
// multi-threaded parent has no working malloc or stdio locks: it must only call
// async-signal-safe functions (dup2, setpgid, prctl, write, execve, _exit) — prepare
// everything before calling.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "sys/fd.hpp"

namespace warden {

// Newer than most headers; defined here so a kernel that knows it can be asked.
// CLONE_PIDFD_AUTOKILL: closing the last clone pidfd SIGKILLs the child (Linux 7.1).
inline constexpr uint64_t kClonePidfdAutokill = 1ULL << 36;
inline constexpr uint64_t kCloneIntoCgroup = 0x200000000ULL;

struct CloneRequest {
    bool want_pidfd = true;    // CLONE_PIDFD
    int cgroup_fd = -1;        // CLONE_INTO_CGROUP when >= 0 (an O_DIRECTORY fd of the cgroup)
    bool autokill = false;     // CLONE_PIDFD_AUTOKILL (needs want_pidfd)
    bool new_pid_ns = false;   // CLONE_NEWPID: the child is PID 1 of a new namespace
    bool new_user_ns = false;  // CLONE_NEWUSER together with new_pid_ns when not privileged
    bool allow_clone3 = true;  // false: go straight to the fork() fallback (fault seam)
};

struct CloneResult {
    pid_t pid = -1;  // 0 in the child
    Fd pidfd;        // parent only; invalid if no pidfd could be had
    bool via_clone3 = false;
    bool into_cgroup = false;  // the child was born inside cgroup_fd
    bool autokill = false;
};

// clone3 with the requested flags; on ENOSYS/EINVAL/E2BIG/EPERM from clone3 (or
// allow_clone3=false) falls back to fork() (or unshare-free clone for namespaces, which
// then fail) and reports what it got. Error only when no child could be created at all.
Result<CloneResult> clone_child(const CloneRequest& req);

// Probes (each spawns and reaps a trivial child once, cached): clone3 itself, and whether
// CLONE_PIDFD_AUTOKILL is known to this kernel (EINVAL → no).
bool clone3_supported();
bool clone_autokill_supported();

}  // namespace warden
