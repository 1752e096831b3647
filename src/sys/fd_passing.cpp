#include "sys/fd_passing.hpp"

#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

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
    auto sent = send_passing(sock, "F", fds);
    if (!sent) return sent.error();
    return {};
}

Result<size_t> send_passing(int sock, std::string_view bytes, std::span<const int> fds, int flags) {
    if (fds.size() > kMaxFds) return Error::msg("send_fds: more than 8 descriptors");
    iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
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
        if (ssize_t n = ::sendmsg(sock, &msg, flags | MSG_NOSIGNAL); n >= 0)
            return static_cast<size_t>(n);
        if (errno != EINTR) return Error::sys("sendmsg", "SCM_RIGHTS", errno);
    }
}

namespace {

// One recvmsg(2): the bytes into `buf`, every descriptor passed into `fds` (close-on-exec).
struct Received {
    size_t bytes = 0;
    std::vector<Fd> fds;
    bool truncated = false;  // descriptors beyond kMaxFds were lost
};
Result<Received> receive(int sock, char* buf, size_t size) {
    iovec iov{buf, size};
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
    Received r;
    r.bytes = static_cast<size_t>(n);
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < k; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            r.fds.emplace_back(fd);
        }
    }
    r.truncated = (msg.msg_flags & MSG_CTRUNC) != 0;
    return r;
}

}  // namespace

Result<size_t> recv_passing(int sock, char* buf, size_t size, Fd& passed) {
    auto r = receive(sock, buf, size);
    if (!r) return r.error();
    if (!r->fds.empty()) passed = std::move(r->fds.front());  // any other closes here
    return r->bytes;
}

Result<std::vector<Fd>> recv_fds(int sock, size_t count) {
    if (count > kMaxFds) return Error::msg("recv_fds: more than 8 descriptors");
    char byte = 0;
    auto r = receive(sock, &byte, 1);
    if (!r) return r.error();
    if (r->bytes == 0) return Error{"recvmsg(SCM_RIGHTS): the sender closed the socket", EPIPE};
    if (r->truncated) return Error::msg("recvmsg(SCM_RIGHTS): control data truncated");
    if (r->fds.size() != count)
        return Error::msg("recvmsg(SCM_RIGHTS): expected " + std::to_string(count) +
                          " descriptors, got " + std::to_string(r->fds.size()));
    return std::move(r->fds);
}

}  // namespace warden
