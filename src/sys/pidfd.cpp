#include "sys/pidfd.hpp"

#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <csignal>
#include <string>

namespace warden {

Result<Pidfd> Pidfd::open(pid_t pid) {
    // No glibc wrapper on bookworm; the fd is close-on-exec by definition.
    long fd = ::syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0) return Error::sys("pidfd_open", std::to_string(pid), errno);
    return Pidfd(Fd(static_cast<int>(fd)), pid);
}

Status Pidfd::send_signal(int sig) const {
    if (::syscall(SYS_pidfd_send_signal, fd_.get(), sig, nullptr, 0) < 0)
        return Error::sys("pidfd_send_signal", std::to_string(pid_), errno);
    return {};
}

bool Pidfd::is_exited() const {
    pollfd p{fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
}

Result<bool> Pidfd::wait_exit(int timeout_ms) const {
    pollfd p{fd_.get(), POLLIN, 0};
    for (;;) {
        int r = ::poll(&p, 1, timeout_ms);
        if (r > 0) return true;
        if (r == 0) return false;
        if (errno != EINTR) return Error::sys("poll", "pidfd " + std::to_string(pid_), errno);
    }
}

Result<Fd> Pidfd::get_fd(int target_fd) const {
    long fd = ::syscall(SYS_pidfd_getfd, fd_.get(), target_fd, 0);
    if (fd < 0)
        return Error::sys("pidfd_getfd", std::to_string(pid_) + " fd " + std::to_string(target_fd),
                          errno);
    return Fd(static_cast<int>(fd));
}

bool pidfd_supported() {
    static const bool supported = [] {
        auto self = Pidfd::open(::getpid());
        // Signal 0 checks permission and existence without delivering anything.
        return self.ok() && self->send_signal(0).ok();
    }();
    return supported;
}

}  // namespace warden
