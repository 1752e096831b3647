#include "sys/fd_passing.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace warden {

namespace {
constexpr size_t kMaxFds = 8;
}  // namespace

Result<SocketPair> make_socket_pair() {
    int sv[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
        return Error::sys("socketpair", "AF_UNIX", errno);
    return SocketPair{Fd(sv[0]), Fd(sv[1])};
}

Status send_fds(int sock, std::span<const int> fds) {
    if (fds.size() > kMaxFds) return Error::msg("send_fds: more than 8 descriptors");
    char byte = 'F';
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
    std::memset(control, 0, sizeof control);
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    for (;;) {
        if (::sendmsg(sock, &msg, MSG_NOSIGNAL) == 1) return {};
        if (errno != EINTR) return Error::sys("sendmsg", "SCM_RIGHTS", errno);
    }
}

Result<std::vector<Fd>> recv_fds(int sock, size_t count) {
    if (count > kMaxFds) return Error::msg("recv_fds: more than 8 descriptors");
    char byte = 0;
    iovec iov{&byte, 1};
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n;
    do {
        n = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    if (n < 0) return Error::sys("recvmsg", "SCM_RIGHTS", errno);
    if (n == 0) return Error{"recvmsg(SCM_RIGHTS): the sender closed the socket", EPIPE};
    std::vector<Fd> out;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            out.emplace_back(fd);
        }
    }
    if (msg.msg_flags & MSG_CTRUNC)
        return Error::msg("recvmsg(SCM_RIGHTS): control data truncated");
    if (out.size() != count)
        return Error::msg("recvmsg(SCM_RIGHTS): expected " + std::to_string(count) +
                          " descriptors, got " + std::to_string(out.size()));
    return out;
}

}  // namespace warden
