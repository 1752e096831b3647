// Landlock mechanics: the ABI probe, a ruleset with a path rule, restrict_self in a real child
// (the same child without it is the negative control).
#include "sys/landlock.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"

namespace warden::testing {
namespace {

// Forks; the child restricts itself to `ruleset` (if valid) and opens `path`; the errno
// it met (0 when the open succeeded; 255 when restricting failed).
int landlocked_open_errno(int ruleset, const std::string& path) {
    pid_t pid = ::fork();
    if (pid == 0) {
        if (ruleset >= 0) {
            ::prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL);
            if (landlock::restrict_self(ruleset, 0) != 0) ::_exit(255);
        }
        int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        ::_exit(fd >= 0 ? 0 : errno);
    }
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(Landlock, RulesetAllowsOnlyWhatItNames) {
    auto abi = landlock::abi_version();
    if (!abi) GTEST_SKIP() << abi.error().message;
    EXPECT_GE(*abi, 1);
    EXPECT_NE(landlock::fs_rights(*abi) & landlock::kReadFile, 0u);
    EXPECT_EQ(landlock::fs_rights(1) & landlock::kRefer, 0u) << "ABI 1 has no REFER";
    TempDir allowed, denied;
    std::ofstream(allowed.file("f")) << "x";
    std::ofstream(denied.file("f")) << "x";
    auto rs = landlock::Ruleset::create(landlock::fs_rights(*abi), 0, 0);
    ASSERT_TRUE(rs.ok()) << rs.error().message;
    ASSERT_TRUE(rs->allow_path(allowed.path(), landlock::kReadFile | landlock::kReadDir).ok());
    EXPECT_EQ(landlocked_open_errno(rs->fd(), allowed.file("f")), 0);
    EXPECT_EQ(landlocked_open_errno(rs->fd(), denied.file("f")), EACCES);
    // Negative control: the same child, not restricted.
    EXPECT_EQ(landlocked_open_errno(-1, denied.file("f")), 0);
    // A missing path is an error that names it.
    auto bad = rs->allow_path(denied.file("missing"), landlock::kReadFile);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.error().message.find("missing"), std::string::npos) << bad.error().message;
}

// close_held closes what it holds, a run of consecutive numbers at once, and nothing else:
// a descriptor opened between two held ones (another thread's) stays open.
TEST(Landlock, CloseHeldClosesOnlyTheHeldDescriptors) {
    auto is_open = [](int fd) { return ::fcntl(fd, F_GETFD) != -1; };
    std::vector<Fd> held;
    std::vector<int> numbers;
    for (int i = 0; i < 6; ++i) {
        held.emplace_back(::open("/", O_PATH | O_CLOEXEC));
        numbers.push_back(held.back().get());
    }
    Fd other(::open("/", O_PATH | O_CLOEXEC));  // not held: must survive
    for (int i = 0; i < 3; ++i) {
        held.emplace_back(::open("/", O_PATH | O_CLOEXEC));
        numbers.push_back(held.back().get());
    }
    ASSERT_TRUE(other.valid());
    landlock::close_held(held);
    EXPECT_TRUE(held.empty());
    for (int n : numbers)
        EXPECT_FALSE(is_open(n)) << n;
    EXPECT_TRUE(is_open(other.get()));
}

}  // namespace
}  // namespace warden::testing
