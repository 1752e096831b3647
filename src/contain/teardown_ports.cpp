// The ports a member listens on, found before the first SIGTERM so that the verification can
// prove each free again after the last exit.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <algorithm>
#include <tuple>

#include "contain/teardown_state.hpp"

namespace warden {

// The TCP/UDP ports a member listens on, found through its fd table: the "socket:[N]"
// entries of /proc/PID/fd. Deliberately minimal (no fdinfo, no unix table): it runs before
// the first SIGTERM, so every microsecond here delays the polite phase. Each socket is asked
// directly where the kernel lets us (pidfd_getfd: a few syscalls per socket, whatever the
// machine holds); else the inet tables of its network namespace are read, once per
// teardown (text of every socket on the box: 25 ms with a thousand listeners).
// `settled` (a plan made ahead, and the teardown after it): a socket examined for good gives
// its port, if any, without being asked again; those this examination settles are added, and
// those no longer in the fd table forgotten.
std::vector<PortCheck> Teardown::State::ports_of(const Target& t, const Candidate& c,
                                                 SettledSockets* settled) {
    std::vector<PortCheck> out;
    // The namespace init is a fork of the keeper that never execs and never opens a socket;
    // its fd table is the keeper's of the moment it was forked (a dozen entries to read).
    if (t.role == Role::NamespaceInit) return out;
    std::vector<std::pair<int, uint64_t>> socks;  // (fd number, inode)
    if (c.dir) {
        socks = c.sockets();  // through its directory: a recycled PID fails, shows nothing
    } else {
        const std::string dir = "/proc/" + std::to_string(t.id.pid);
        Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!d.valid()) return out;
        socks = sockets_of(d.get());
        if (socks.empty()) return out;
        // A recycled PID would show a stranger's fds: only keep them if it is still t.
        auto again = read_identity(t.id.pid);
        if (!again || again->starttime != t.id.starttime) return out;
    }
    if (settled) {
        std::erase_if(*settled, [&](const auto& entry) {
            return std::none_of(socks.begin(), socks.end(), [&](const auto& fd_inode) {
                return fd_inode.second == entry.first;
            });
        });
        std::erase_if(socks, [&](const auto& fd_inode) {
            auto known = settled->find(fd_inode.second);
            if (known == settled->end()) return false;
            if (known->second) out.push_back(*known->second);
            return true;
        });
    }
    if (socks.empty()) return out;
    if (!ports_through_pidfd(t, socks, out, settled)) ports_through_tables(t, socks, out, settled);
    return out;
}

void Teardown::State::ports_through_tables(const Target& t,
                                           const std::vector<std::pair<int, uint64_t>>& socks,
                                           std::vector<PortCheck>& out, SettledSockets* settled) {
    if (!inet_loaded) {
        inet_loaded = true;
        const std::string net = "/proc/" + std::to_string(t.id.pid) + "/net/";
        for (auto [file, proto, v6] : {std::tuple{"tcp", SocketEntry::Proto::Tcp, false},
                                       std::tuple{"tcp6", SocketEntry::Proto::Tcp, true},
                                       std::tuple{"udp", SocketEntry::Proto::Udp, false},
                                       std::tuple{"udp6", SocketEntry::Proto::Udp, true}})
            if (auto text = read_file(net + file); text) inet.add_inet(*text, proto, v6);
    }
    for (auto [fd, inode] : socks) {
        (void)fd;
        const SocketEntry* e = inet.lookup(inode);
        if (!e || !e->listening()) continue;
        out.push_back({e->proto_name(), e->local_addr, e->local_port});
        if (settled) settled->emplace(inode, out.back());
    }
}

// Through a duplicate of each socket, closed at once (held, it would keep the port bound).
// False when the kernel does not let us (no pidfd, pidfd_getfd missing, no ptrace rights):
// the caller then reads the tables. The inode is checked: the fd number may have moved on.
bool Teardown::State::ports_through_pidfd(const Target& t,
                                          const std::vector<std::pair<int, uint64_t>>& socks,
                                          std::vector<PortCheck>& out, SettledSockets* settled) {
    if (!t.pidfd || scope.faults.pidfd_getfd) return false;
    for (auto [fd, inode] : socks) {
        auto dup = t.pidfd.get_fd(fd);
        if (!dup) {
            if (dup.error().code == EBADF) continue;  // closed since the listing
            return false;
        }
        struct stat st {};
        int domain = 0, type = 0, listening = 0;
        socklen_t len = sizeof(int);
        if (::fstat(dup->get(), &st) != 0 || st.st_ino != inode) continue;
        if (::getsockopt(dup->get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) continue;
        if (domain != AF_INET && domain != AF_INET6) {
            if (settled) settled->emplace(inode, std::nullopt);
            continue;
        }
        len = sizeof(int);
        if (::getsockopt(dup->get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0) continue;
        sockaddr_storage local{}, peer{};
        socklen_t alen = sizeof local;
        if (::getsockname(dup->get(), reinterpret_cast<sockaddr*>(&local), &alen) != 0) continue;
        if (type == SOCK_STREAM) {
            len = sizeof(int);
            if (::getsockopt(dup->get(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 ||
                !listening)
                continue;
        } else if (type == SOCK_DGRAM) {
            // An unconnected, bound UDP socket is the "listener" /proc/net/udp would show.
            socklen_t plen = sizeof peer;
            if (::getpeername(dup->get(), reinterpret_cast<sockaddr*>(&peer), &plen) == 0) continue;
        } else {
            continue;
        }
        dup->reset();
        char addr[INET6_ADDRSTRLEN] = {};
        uint16_t port = 0;
        const bool v6 = domain == AF_INET6;
        if (v6) {
            const auto* a = reinterpret_cast<const sockaddr_in6*>(&local);
            ::inet_ntop(AF_INET6, &a->sin6_addr, addr, sizeof addr);
            port = ntohs(a->sin6_port);
        } else {
            const auto* a = reinterpret_cast<const sockaddr_in*>(&local);
            ::inet_ntop(AF_INET, &a->sin_addr, addr, sizeof addr);
            port = ntohs(a->sin_port);
        }
        if (port == 0) continue;
        std::string proto = type == SOCK_STREAM ? "tcp" : "udp";
        if (v6) proto += "6";
        out.push_back({proto, addr, port});
        if (settled) settled->emplace(inode, out.back());
    }
    return true;
}

void Teardown::State::remember_port(PortCheck pc) {
    bool dup = std::any_of(ports.begin(), ports.end(), [&](const PortCheck& o) {
        return o.proto == pc.proto && o.address == pc.address && o.port == pc.port;
    });
    if (!dup) ports.push_back(std::move(pc));
}

}  // namespace warden
