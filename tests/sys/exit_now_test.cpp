// exit_now(): the exit status is the code given, a pipe the process held reads EOF by the time
// its parent reaps it, and the process sharing its address space is gone right after.
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/testing.hpp"
#include "sys/exit_now.hpp"

namespace warden::testing {
namespace {

// Children of this process named `comm` (the test is a subreaper: the sharer comes back here).
int children_named(const std::string& comm) {
    int n = 0;
    for (pid_t kid : children_of(::getpid()))
        if (auto s = read_stat(kid); s && s->comm == comm && s->state != 'Z') ++n;
    return n;
}

TEST(ExitNow, ExitsWithTheCodeClosesItsPipesAndLeavesNothing) {
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), 0);
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::close(p[0]);
        exit_now(7);
    }
    ::close(p[1]);
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 7) << st;
    char c;
    EXPECT_EQ(::read(p[0], &c, 1), 0) << "the pipe's write end is still open somewhere";
    ::close(p[0]);
    // The sharer (if this build has one) dies with its parent's death, and is ours to reap.
    EXPECT_TRUE(wait_until([&] { return children_named("mcpwarden-exit") == 0; }, 2000ms));
    while (::waitpid(-1, &st, WNOHANG) > 0) {
    }
    ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0), 0);
}

}  // namespace
}  // namespace warden::testing
