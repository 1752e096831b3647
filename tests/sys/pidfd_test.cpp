#include "sys/pidfd.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <cstring>

#include <gtest/gtest.h>

namespace warden {
namespace {

TEST(Pidfd, OpenOfAMissingPidNamesTheSyscallAndPid) {
    // PID numbers above pid_max never exist.
    auto r = Pidfd::open(4194304 + 7);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "pidfd_open(4194311): No such process");
}

TEST(Pidfd, ReadableOnlyOnceTheProcessTerminated) {
    ASSERT_TRUE(pidfd_supported());
    pid_t c = ::fork();
    if (c == 0) {
        ::pause();
        ::_exit(0);
    }
    auto fd = Pidfd::open(c);
    ASSERT_TRUE(fd) << fd.error().message;
    EXPECT_FALSE(fd->is_exited());
    ASSERT_TRUE(fd->send_signal(SIGKILL));
    auto done = fd->wait_exit(5000);
    ASSERT_TRUE(done);
    EXPECT_TRUE(*done);
    EXPECT_TRUE(fd->is_exited());  // a zombie counts as terminated
    ::waitpid(c, nullptr, 0);
    auto again = fd->send_signal(SIGKILL);  // reaped: ESRCH, never a recycled pid
    ASSERT_FALSE(again);
    EXPECT_EQ(again.error().code, ESRCH);
}

}  // namespace
}  // namespace warden
