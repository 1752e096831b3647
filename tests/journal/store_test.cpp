// Where the journal may live: symlinks refused, unwritable directories and network
// filesystems named in the error, and the path precedence.
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>

#include <gtest/gtest.h>

#include "journal/journal.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

TEST(Store, SymlinkedDatabasePathIsRefused) {
    TempDir dir;
    std::string real = dir.path + "/real.db";
    { ASSERT_TRUE(Journal::open({.path = real}).ok()); }
    std::string link = dir.path + "/journal.db";
    ASSERT_EQ(::symlink(real.c_str(), link.c_str()), 0);
    auto j = Journal::open({.path = link});
    ASSERT_FALSE(j.ok());
    EXPECT_EQ(j.error().message,
              "journal " + link +
                  ": is a symbolic link; refusing to follow it (point --journal at the real file)");
    // A dangling symlink must not be followed to create a file either.
    std::string dangling = dir.path + "/dangling.db";
    ASSERT_EQ(::symlink((dir.path + "/elsewhere.db").c_str(), dangling.c_str()), 0);
    EXPECT_FALSE(Journal::open({.path = dangling}).ok());
    EXPECT_NE(::access((dir.path + "/elsewhere.db").c_str(), F_OK), 0);
}

TEST(Store, UnwritableDirectoryIsAClearError) {
    TempDir dir;
    ASSERT_EQ(::chmod(dir.path.c_str(), 0755), 0);
    std::string ro = dir.path + "/ro";
    ASSERT_EQ(::mkdir(ro.c_str(), 0555), 0);
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        // root ignores mode bits: drop to nobody so the directory really is unwritable.
        if (::geteuid() == 0 && (::setgid(65534) != 0 || ::setuid(65534) != 0)) ::_exit(3);
        auto j = Journal::open({.path = ro + "/journal.db"});
        std::string msg = j ? "opened" : j.error().message;
        (void)!::write(p[1], msg.data(), msg.size());
        ::_exit(0);
    }
    ::close(p[1]);
    char buf[512];
    ssize_t n = ::read(p[0], buf, sizeof buf);
    ::close(p[0]);
    int status = 0;
    ::waitpid(pid, &status, 0);
    ASSERT_GT(n, 0);
    std::string msg(buf, static_cast<size_t>(n));
    EXPECT_EQ(msg, "cannot create journal " + ro + "/journal.db: Permission denied");
}

TEST(Store, NetworkFilesystemsAreNamed) {
    EXPECT_STREQ(network_filesystem_name(0x6969), "nfs");
    EXPECT_STREQ(network_filesystem_name(0xFF534D42), "cifs");
    EXPECT_STREQ(network_filesystem_name(0xFE534D42), "smb2");
    EXPECT_EQ(network_filesystem_name(0xEF53), nullptr);      // ext4
    EXPECT_EQ(network_filesystem_name(0x01021994), nullptr);  // tmpfs
}

TEST(Store, PathPrecedenceIsFlagThenEnvThenXdg) {
    ::setenv("MCPWARDEN_JOURNAL", "/env/j.db", 1);
    ::setenv("XDG_STATE_HOME", "/xdg", 1);
    EXPECT_EQ(*resolve_path("/flag/j.db"), "/flag/j.db");
    EXPECT_EQ(*resolve_path(), "/env/j.db");
    ::unsetenv("MCPWARDEN_JOURNAL");
    EXPECT_EQ(*resolve_path(), "/xdg/mcpwarden/journal.db");
    ::unsetenv("XDG_STATE_HOME");
    ::setenv("HOME", "/home/u", 1);
    EXPECT_EQ(*resolve_path(), "/home/u/.local/state/mcpwarden/journal.db");
    auto p = Paths::for_db("/xdg/mcpwarden/journal.db");
    EXPECT_EQ(p.lock, "/xdg/mcpwarden/journal.lock");
    EXPECT_EQ(p.key, "/xdg/mcpwarden/journal.key");
    EXPECT_EQ(p.checkpoints, "/xdg/mcpwarden/checkpoints");
    EXPECT_EQ(Paths::for_db("/a/other.db").checkpoints, "/a/other.checkpoints");
}

}  // namespace
}  // namespace warden::journal
