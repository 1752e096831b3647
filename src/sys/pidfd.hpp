// Pidfd: a file descriptor that names one process, not a recycled number.
//
// A pidfd is bound to one process for its whole life: signals sent through it reach that
// process or fail with ESRCH, never a newcomer that got the same PID; it becomes readable
// when the process has terminated (zombie or reaped), which makes it a zombie-aware,
// event-driven liveness check for any process, child or not. Linux >= 5.3.
#pragma once

#include <sys/types.h>

#include "sys/fd.hpp"

namespace warden {

class Pidfd {
  public:
    Pidfd() = default;
    Pidfd(Fd fd, pid_t pid) : fd_(std::move(fd)), pid_(pid) {}

    // pidfd_open(2). Error: "pidfd_open(4711): No such process".
    static Result<Pidfd> open(pid_t pid);

    int get() const { return fd_.get(); }
    pid_t pid() const { return pid_; }
    bool valid() const { return fd_.valid(); }
    explicit operator bool() const { return valid(); }
    void reset() { fd_.reset(); }

    // pidfd_send_signal(2). Error code ESRCH once the process has terminated.
    Status send_signal(int sig) const;
    // True once the process has terminated (zombie or reaped): poll readable, no wait.
    bool is_exited() const;
    // Waits up to timeout_ms (-1: forever) for termination; true if it terminated.
    Result<bool> wait_exit(int timeout_ms) const;
    // pidfd_getfd(2), Linux >= 5.6: a duplicate (close-on-exec) of the process's fd
    // `target_fd`. Needs ptrace-attach rights over it (same uid, and under Yama scope 1 an
    // ancestor). The caller holds an open file of another process: close it at once.
    Result<Fd> get_fd(int target_fd) const;

  private:
    Fd fd_;
    pid_t pid_ = 0;
};

// Whether this kernel has pidfd_open and pidfd_send_signal (probed once, on ourselves).
bool pidfd_supported();

}  // namespace warden
