// seccomp mechanics: a filter built and exported before the fork, installed in a real child
// with one prctl; the denied call fails with the chosen errno, and the same child without
// the filter makes it (the negative control).
#include "sys/seccomp.hpp"

#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace warden {
namespace {

// Forks; the child installs `prog` (when given) and calls ptrace(PTRACE_TRACEME); the errno
// it met (0: the call succeeded; 255: installing failed).
int traceme_errno(const SeccompProgram* prog) {
    pid_t pid = ::fork();
    if (pid == 0) {
        if (prog) {
            ::prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL);
            sock_fprog f = prog->fprog();
            if (install_seccomp(f) != 0) ::_exit(255);
        }
        ::_exit(::ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) == 0 ? 0 : errno);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Seccomp, DeniedCallFailsWithItsErrnoAndOthersRun) {
    auto b = SeccompBuilder::create();
    ASSERT_TRUE(b.ok()) << b.error().message;
    auto added = b->deny("ptrace", EPERM);
    ASSERT_TRUE(added.ok()) << added.error().message;
    EXPECT_TRUE(*added);
    auto unknown = b->deny("no_such_syscall", EPERM);
    ASSERT_TRUE(unknown.ok());
    EXPECT_FALSE(*unknown) << "a call this architecture lacks is skipped";
    auto prog = b->export_bpf();
    ASSERT_TRUE(prog.ok()) << prog.error().message;
    EXPECT_GT(prog->size(), 0u);
    EXPECT_EQ(traceme_errno(&*prog), EPERM);
    EXPECT_EQ(traceme_errno(nullptr), 0);  // negative control: no filter, the call succeeds
}

}  // namespace
}  // namespace warden
