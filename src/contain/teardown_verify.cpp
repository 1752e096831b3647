// The verification from outside, after the last signal: every pidfd readable, the cgroup
// empty, waitpid ECHILD where we are the sole parent, each port the tree listened on bound
// again; then the counts of the report.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>

#include "contain/spawner.hpp"
#include "contain/teardown_state.hpp"

namespace warden {

// A TCP/UDP bind of the address the tree listened on. SO_REUSEADDR so that TIME_WAIT
// remnants of accepted connections do not count: a listener anywhere still makes it fail.
static bool bindable(const PortCheck& pc) {
    bool v6 = pc.proto.size() > 3;
    int type = pc.proto.rfind("udp", 0) == 0 ? SOCK_DGRAM : SOCK_STREAM;
    int s = ::socket(v6 ? AF_INET6 : AF_INET, type | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    Fd fd(s);
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(pc.port);
        if (::inet_pton(AF_INET6, pc.address.c_str(), &a.sin6_addr) != 1)
            a.sin6_addr = in6addr_loopback;
        return ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(pc.port);
    if (::inet_pton(AF_INET, pc.address.c_str(), &a.sin_addr) != 1)
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

void Teardown::State::verify_from_outside() {
    phase = Phase::Verify;
    reap_children();
    for (Target& t : targets)
        ended(t);
    for (size_t i : pending())
        report.survivors.push_back(targets[i].id);
    if (scope.cgroup) {
        // populated can lag the last exit by a moment; cgroup.events says when it is done.
        auto empty = scope.cgroup->wait_empty(static_cast<int>(opts.kill_wait.count()));
        report.cgroup_empty = empty.ok() && *empty;
        if (!report.cgroup_empty)
            if (auto procs = scope.cgroup->procs(); procs)
                for (pid_t p : *procs)
                    if (auto id = read_identity(p);
                        id && std::none_of(report.survivors.begin(), report.survivors.end(),
                                           [&](const ProcessId& s) { return s == *id; }))
                        report.survivors.push_back(*id);
    }
    if (scope.sole_parent) {
        int st = 0;
        pid_t w;
        while ((w = ::waitpid(-1, &st, WNOHANG)) > 0) {
        }
        report.reaped_all = (w < 0 && errno == ECHILD);
        if (w == 0) report.notes.push_back("waitpid(-1): a child of ours is still alive");
    }
    if (scope.child && !scope.child->exit_status()) {
        if (auto st = scope.child->try_reap(); st) report.root_status = *st;
    } else if (scope.child) {
        report.root_status = scope.child->exit_status();
    }
    // From outside: each port the tree listened on can be bound again. Exit closes a
    // process's sockets before it becomes a zombie, so this normally holds at once; the
    // bounded retry only covers a listener shared with a process still on its way out.
    for (PortCheck& pc : ports) {
        for (int i = 0; i < 40; ++i) {
            if (bindable(pc)) {
                pc.bindable = true;
                pc.released_ms = now_ms();
                break;
            }
            pollfd none{-1, 0, 0};
            ::poll(&none, 0, 5);
        }
    }
}

void Teardown::State::build_report() {
    TeardownReport& r = report;
    r.phases.total_ms = now_ms();
    r.phases.term_ms = 0;
    for (Target& t : targets) {
        t.pidfd.reset();
        // The namespace init is our machinery, not the server's: its SIGKILL is the design,
        // and counting it as "killed" would blur the signal the counts exist to show.
        if (t.role == Role::NamespaceInit) continue;
        switch (t.how) {
            case Outcome::ExitedInEof:
                ++r.exited_in_eof;
                break;
            case Outcome::ExitedAfterTerm:
                ++r.exited_in_grace;
                break;
            case Outcome::Killed:
                ++r.killed;
                break;
            case Outcome::AlreadyGone:
                ++r.already_gone;
                break;
            case Outcome::IdentityChanged:
                ++r.identity_changed;
                break;
            case Outcome::Pending:
                break;
        }
    }
    r.targets = std::move(targets);
    r.ports = std::move(ports);
}

}  // namespace warden
