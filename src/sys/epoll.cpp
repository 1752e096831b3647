#include "sys/epoll.hpp"

#include <cerrno>
#include <string>

namespace warden {

Result<Epoll> Epoll::create() {
    int fd = ::epoll_create1(EPOLL_CLOEXEC);
    if (fd < 0) return Error::sys("epoll_create1", "", errno);
    return Epoll(Fd(fd));
}

static Status ctl(int epfd, int op, const char* opname, int fd, uint32_t events, uint64_t data) {
    epoll_event ev{};
    ev.events = events;
    ev.data.u64 = data;
    if (::epoll_ctl(epfd, op, fd, &ev) < 0) {
        if (op == EPOLL_CTL_DEL && errno == ENOENT) return {};
        return Error::sys("epoll_ctl", std::string(opname) + ", " + std::to_string(fd), errno);
    }
    return {};
}

Status Epoll::add(int fd, uint32_t events, uint64_t data) {
    return ctl(fd_.get(), EPOLL_CTL_ADD, "ADD", fd, events, data);
}

Status Epoll::modify(int fd, uint32_t events, uint64_t data) {
    return ctl(fd_.get(), EPOLL_CTL_MOD, "MOD", fd, events, data);
}

Status Epoll::remove(int fd) {
    return ctl(fd_.get(), EPOLL_CTL_DEL, "DEL", fd, 0, 0);
}

Result<int> Epoll::wait(std::span<epoll_event> out, int timeout_ms) {
    int n = ::epoll_wait(fd_.get(), out.data(), static_cast<int>(out.size()), timeout_ms);
    if (n < 0) {
        if (errno == EINTR) return 0;
        return Error::sys("epoll_wait", std::to_string(fd_.get()), errno);
    }
    return n;
}

}  // namespace warden
