#include "sys/signalfd.hpp"

#include <pthread.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace warden {
namespace {

bool blocked(int sig) {
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, nullptr, &cur);
    return sigismember(&cur, sig) == 1;
}

TEST(SignalFd, DeliversASignalAsARecord) {
    auto sfd = SignalFd::create({SIGUSR1, SIGUSR2});
    ASSERT_TRUE(sfd.ok()) << sfd.error().message;
    auto none = sfd->read();
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->has_value());
    ASSERT_EQ(::kill(::getpid(), SIGUSR2), 0);
    auto got = sfd->read();
    ASSERT_TRUE(got.ok());
    ASSERT_TRUE(got->has_value());
    EXPECT_EQ((*got)->ssi_signo, static_cast<uint32_t>(SIGUSR2));
    EXPECT_EQ((*got)->ssi_pid, static_cast<uint32_t>(::getpid()));
}

TEST(SignalFd, RestoresTheMaskOnDestruction) {
    ASSERT_FALSE(blocked(SIGUSR1));
    {
        auto sfd = SignalFd::create({SIGUSR1});
        ASSERT_TRUE(sfd.ok());
        EXPECT_TRUE(blocked(SIGUSR1));
        auto moved = std::move(*sfd);
        EXPECT_TRUE(blocked(SIGUSR1));  // the moved-from object does not restore
    }
    EXPECT_FALSE(blocked(SIGUSR1));
}

}  // namespace
}  // namespace warden
