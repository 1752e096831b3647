#include "sys/clone3.hpp"

#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>

namespace warden {
namespace {

// struct clone_args as of Linux 5.7 (CLONE_ARGS_SIZE_VER2, with `cgroup`), spelled out so
// older headers do not matter.
struct CloneArgs {
    uint64_t flags = 0;
    uint64_t pidfd = 0;
    uint64_t child_tid = 0;
    uint64_t parent_tid = 0;
    uint64_t exit_signal = 0;
    uint64_t stack = 0;
    uint64_t stack_size = 0;
    uint64_t tls = 0;
    uint64_t set_tid = 0;
    uint64_t set_tid_size = 0;
    uint64_t cgroup = 0;
};
static_assert(sizeof(CloneArgs) == 88);

constexpr uint64_t kClonePidfd = 0x00001000;

// Fork-like clone3 (no stack: the child continues on a copy of ours). Returns the pid, 0 in
// the child, or -errno.
long raw_clone3(uint64_t flags, int cgroup_fd, int* pidfd) {
    CloneArgs a;
    a.flags = flags;
    a.exit_signal = SIGCHLD;
    if (flags & kClonePidfd) a.pidfd = reinterpret_cast<uint64_t>(pidfd);
    if (flags & kCloneIntoCgroup) a.cgroup = static_cast<uint64_t>(cgroup_fd);
    long r = ::syscall(SYS_clone3, &a, sizeof a);
    return r < 0 ? -errno : r;
}

// Reaps a probe child; the probe children _exit at once.
void reap(pid_t pid) {
    while (::waitpid(pid, nullptr, 0) < 0 && errno == EINTR) {
    }
}

bool probe(uint64_t flags) {
    int pidfd = -1;
    long r = raw_clone3(flags, -1, &pidfd);
    if (r == 0) ::_exit(0);
    if (r < 0) return false;
    if (pidfd >= 0) ::close(pidfd);  // with AUTOKILL this kills it, which is fine: it is ours
    reap(static_cast<pid_t>(r));
    return true;
}

}  // namespace

bool clone3_supported() {
    // Without a child: an args size below CLONE_ARGS_SIZE_VER0 is refused with EINVAL by a
    // kernel that has clone3 (5.3+, so CLONE_PIDFD too), ENOSYS where it has not or a seccomp
    // filter hides it, EPERM where a filter forbids it. Forking a probe child cost `run` 1-5
    // ms of start-up (a copy of our page tables, a wait). clone_child() still falls back to
    // fork() if a real clone3 fails anyway.
    static const bool ok = [] {
        errno = 0;
        long r = ::syscall(SYS_clone3, nullptr, size_t{0});
        return r < 0 && errno == EINVAL;
    }();
    return ok;
}

bool clone_autokill_supported() {
    static const bool ok = clone3_supported() && probe(kClonePidfd | kClonePidfdAutokill);
    return ok;
}

Result<CloneResult> clone_child(const CloneRequest& req) {
    uint64_t ns = 0;
    if (req.new_pid_ns) ns |= CLONE_NEWPID;
    if (req.new_pid_ns && req.new_user_ns) ns |= CLONE_NEWUSER;

    if (req.allow_clone3 && clone3_supported()) {
        bool cg = req.cgroup_fd >= 0;
        bool autokill = req.autokill && req.want_pidfd && clone_autokill_supported();
        // Ask for everything, then give up one wish at a time: a cgroup we may not enter
        // (EPERM/EACCES/EBUSY) still leaves a useful child with a pidfd.
        for (int attempt = 0; attempt < 3; ++attempt) {
            uint64_t flags = ns;
            if (req.want_pidfd) flags |= kClonePidfd;
            if (cg) flags |= kCloneIntoCgroup;
            if (autokill) flags |= kClonePidfdAutokill;
            int pidfd = -1;
            long r = raw_clone3(flags, req.cgroup_fd, &pidfd);
            if (r >= 0) {
                CloneResult out;
                out.pid = static_cast<pid_t>(r);
                if (r > 0 && pidfd >= 0) out.pidfd = Fd(pidfd);
                out.via_clone3 = true;
                out.into_cgroup = cg;
                out.autokill = autokill;
                return out;
            }
            int err = static_cast<int>(-r);
            if (autokill && err == EINVAL) {
                autokill = false;
                continue;
            }
            if (cg && err != ENOSYS && err != E2BIG && err != ENOMEM && err != EAGAIN) {
                cg = false;
                continue;
            }
            if (ns != 0 && err != ENOSYS) return Error::sys("clone3", "CLONE_NEWPID", err);
            break;  // fall back to fork/clone below
        }
    }

    CloneResult out;
    if (ns != 0) {
        // Legacy clone(2) used like fork (stack 0) for the namespace flags.
        long r = ::syscall(SYS_clone, static_cast<unsigned long>(ns) | SIGCHLD, 0UL, nullptr,
                           nullptr, 0UL);
        if (r < 0) return Error::sys("clone", "CLONE_NEWPID", errno);
        out.pid = static_cast<pid_t>(r);
        return out;
    }
    pid_t p = ::fork();
    if (p < 0) return Error::sys("fork", "", errno);
    out.pid = p;
    return out;
}

}  // namespace warden
