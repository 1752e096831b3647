#include "drill/tagged.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdlib>
#include <cstring>

#include "proc/process_table.hpp"
#include "sys/exec_path.hpp"
#include "sys/fd.hpp"
#include "sys/pidfd.hpp"

namespace warden::drill {

bool kill_pending(pid_t pid) {
    auto s = read_file("/proc/" + std::to_string(pid) + "/status");
    if (!s) return false;
    for (const char* field : {"ShdPnd:", "SigPnd:"}) {
        auto at = s->find(field);
        if (at == std::string::npos) continue;
        uint64_t mask = std::strtoull(s->c_str() + at + std::strlen(field), nullptr, 16);
        if (mask & (1ULL << (SIGKILL - 1))) return true;
    }
    return false;
}

std::vector<ProcessId> live_tagged(const std::string& tag, bool doomed_too) {
    std::vector<ProcessId> out;
    if (tag.empty()) return out;
    const uid_t me = ::getuid();
    ProcessTable t = ProcessTable::scan(kEnvNames | kStatus);
    for (const Process& p : t.all())
        if (!p.zombie() && p.uid == me && p.session_marker && *p.session_marker == tag &&
            (doomed_too || !kill_pending(p.id.pid)))
            out.push_back(p.id);
    return out;
}

int kill_tagged(const std::string& tag) {
    int killed = 0;
    for (int round = 0; round < 50; ++round) {
        auto left = live_tagged(tag);
        if (left.empty()) return killed;
        std::vector<Pidfd> fds;
        for (const ProcessId& id : left) {
            auto fd = Pidfd::open(id.pid);
            if (!fd) continue;
            auto again = read_identity(id.pid);
            if (!again || again->starttime != id.starttime) continue;
            if (fd->send_signal(SIGKILL)) ++killed;
            fds.push_back(std::move(*fd));
        }
        for (const Pidfd& fd : fds)
            (void)fd.wait_exit(1000);
    }
    return killed;
}

bool port_bindable(uint16_t port, std::string_view addr) {
    const bool v6 = addr.find(':') != std::string_view::npos;
    Fd s(::socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!s) return false;
    int one = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(port);
        if (::inet_pton(AF_INET6, std::string(addr).c_str(), &a.sin6_addr) != 1)
            a.sin6_addr = in6addr_loopback;
        return ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    if (::inet_pton(AF_INET, std::string(addr).c_str(), &a.sin_addr) != 1)
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::bind(s.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

std::string self_exe() {
    auto self = self_executable();
    return self ? *self : "mcpwarden";
}

std::string sibling_binary(std::string_view name) {
    std::string self = self_exe();
    auto slash = self.rfind('/');
    if (slash == std::string::npos) return std::string(name);
    std::string dir = self.substr(0, slash + 1);
    std::string beside = dir + std::string(name);
    // Installed: bin/mcpwarden with its helpers in libexec/mcpwarden/ (cmake/packaging.cmake).
    std::string libexec = dir + "../libexec/mcpwarden/" + std::string(name);
    if (::access(beside.c_str(), X_OK) != 0 && ::access(libexec.c_str(), X_OK) == 0) return libexec;
    return beside;
}

}  // namespace warden::drill
