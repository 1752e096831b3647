#include "inventory/unix_peers.hpp"

#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>
#include <vector>

#include "sys/fd.hpp"

namespace warden::inventory {

Result<std::unordered_map<uint64_t, uint64_t>> unix_socket_peers() {
    Fd sock(::socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
    if (!sock) return Error::sys("socket", "NETLINK_SOCK_DIAG", errno);

    struct {
        nlmsghdr nlh;
        unix_diag_req req;
    } msg{};
    msg.nlh.nlmsg_len = sizeof msg;
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    msg.req.sdiag_family = AF_UNIX;
    msg.req.udiag_states = ~0u;
    msg.req.udiag_show = UDIAG_SHOW_PEER;
    sockaddr_nl nladdr{};
    nladdr.nl_family = AF_NETLINK;
    if (::sendto(sock.get(), &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&nladdr),
                 sizeof nladdr) < 0)
        return Error::sys("sendto", "NETLINK_SOCK_DIAG unix dump", errno);

    std::unordered_map<uint64_t, uint64_t> peers;
    std::vector<char> buf(1 << 16);
    // Bounded: a dump ends with NLMSG_DONE; 100k datagrams is far beyond any real machine.
    for (int rounds = 0; rounds < 100000; ++rounds) {
        ssize_t n = ::recv(sock.get(), buf.data(), buf.size(), 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return Error::sys("recv", "NETLINK_SOCK_DIAG unix dump", errno);
        }
        auto len = static_cast<unsigned>(n);
        // NLMSG_NEXT and RTA_NEXT step through the buffer as char* and cast back to a header:
        // the kernel aligns every message and attribute to 4 bytes (NLMSG_ALIGNTO,
        // RTA_ALIGNTO) from the start of a buffer that operator new aligned to 16.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wcast-align"
        for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, len);
             h = NLMSG_NEXT(h, len)) {
            if (h->nlmsg_type == NLMSG_DONE) return peers;
            if (h->nlmsg_type == NLMSG_ERROR) {
                auto* e = static_cast<nlmsgerr*>(NLMSG_DATA(h));
                return Error::sys("sock_diag", "unix", -e->error);
            }
            auto* m = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
            int rta_len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
            for (auto* a = reinterpret_cast<rtattr*>(m + 1); RTA_OK(a, rta_len);
                 a = RTA_NEXT(a, rta_len)) {
                if (a->rta_type != UNIX_DIAG_PEER) continue;
                uint32_t peer = 0;
                std::memcpy(&peer, RTA_DATA(a), sizeof peer);
                if (peer) {
                    peers[m->udiag_ino] = peer;
                    peers.emplace(peer, m->udiag_ino);
                }
            }
        }
#pragma GCC diagnostic pop
    }
    return peers;
}

}  // namespace warden::inventory
