// Epoll: an owned epoll instance.
//
// Thin RAII over epoll_create1/epoll_ctl/epoll_wait. Every failure names the syscall, the
// fd it was about and errno: `epoll_ctl(ADD, 7): Bad file descriptor`. The caller decides
// what a readiness event means; nothing here does I/O on the watched fds.
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <span>

#include "sys/fd.hpp"

namespace warden {

class Epoll {
  public:
    // epoll_create1(EPOLL_CLOEXEC).
    static Result<Epoll> create();

    // `data` comes back in epoll_event.data.u64 of each event for `fd`.
    Status add(int fd, uint32_t events, uint64_t data);
    Status modify(int fd, uint32_t events, uint64_t data);
    // Removing an fd that is not registered is not an error (ENOENT is ignored), so teardown
    // paths can remove unconditionally.
    Status remove(int fd);

    // Waits up to timeout_ms (-1 = forever) and returns how many events were stored in `out`.
    // EINTR is reported as 0 events, not an error.
    Result<int> wait(std::span<epoll_event> out, int timeout_ms);

    int fd() const { return fd_.get(); }

  private:
    explicit Epoll(Fd fd) : fd_(std::move(fd)) {}
    Fd fd_;
};

}  // namespace warden
