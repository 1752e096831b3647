// A child confined by a plan, for the tests of what the plan allows: it applies the plan and
// makes its attempts, each reporting the errno it met (0: it succeeded) back through a pipe.
#pragma once

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <vector>

#include "sandbox/sandbox.hpp"

namespace warden::testing {

// Forks; the child applies `plan`, then calls `attempts(report)`, which makes `count`
// attempts and calls report(errno) for each. The errnos in order, or {} when the plan could
// not be applied or the child did not report them all.
template <class Attempts>
std::vector<int> errnos_in_child(const sandbox::Plan& plan, size_t count, Attempts attempts) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return {};
    pid_t pid = ::fork();
    if (pid == 0) {
        ::close(fds[0]);
        if (plan.apply_in_child() != 0) ::_exit(1);
        attempts([&](int e) {
            if (::write(fds[1], &e, sizeof e) != sizeof e) ::_exit(1);
        });
        ::_exit(0);
    }
    ::close(fds[1]);
    std::vector<int> out(count);
    size_t got = 0;
    char* buf = reinterpret_cast<char*>(out.data());
    for (ssize_t n; got < out.size() * sizeof(int) &&
                    (n = ::read(fds[0], buf + got, out.size() * sizeof(int) - got)) > 0;)
        got += static_cast<size_t>(n);
    ::close(fds[0]);
    int st = 0;
    ::waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || got != out.size() * sizeof(int)) return {};
    return out;
}

}  // namespace warden::testing
