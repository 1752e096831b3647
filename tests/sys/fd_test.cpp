#include "sys/fd.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace warden {
namespace {

TEST(Fd, ErrorNamesSyscallTargetAndErrno) {
    auto r = open_file("/nonexistent/mcpwarden", O_RDONLY);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message, "open(/nonexistent/mcpwarden): No such file or directory");
    EXPECT_EQ(r.error().code, ENOENT);
}

TEST(Fd, ClosesOnDestruction) {
    int raw;
    {
        auto fd = open_file("/proc/self/stat", O_RDONLY);
        ASSERT_TRUE(fd.ok());
        raw = fd->get();
        EXPECT_GE(::fcntl(raw, F_GETFD), 0);
    }
    EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
    EXPECT_EQ(errno, EBADF);
}

TEST(Fd, ReadFileReadsProc) {
    auto s = read_file("/proc/self/stat");
    ASSERT_TRUE(s.ok()) << s.error().message;
    EXPECT_EQ(s->substr(0, std::to_string(::getpid()).size()), std::to_string(::getpid()));
}

}  // namespace
}  // namespace warden
