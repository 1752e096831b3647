#include "clients/atomic_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "clients_test_util.hpp"

namespace warden::clients {
namespace {

using testing::mode_of;
using testing::names_in;
using testing::slurp;
using testing::spit;
using warden::testing::TempDir;

TEST(AtomicFile, ReplacesKeepingModeAndWritesAPrivateBackupOnce) {
    TempDir dir;
    std::string f = dir.file("proj/mcp.json"), backup = dir.file("state/mcp.json");
    spit(f, "one");
    std::filesystem::create_directories(dir.file("state"));
    ASSERT_EQ(::chmod(f.c_str(), 0644), 0);

    auto r = replace_file(f, "one", "two", backup);
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->backup_written);
    EXPECT_EQ(slurp(f), "two");
    EXPECT_EQ(slurp(backup), "one");
    EXPECT_EQ(mode_of(f), 0644u);
    EXPECT_EQ(mode_of(backup), 0600u);  // API keys: whatever the original's mode

    auto again = replace_file(f, "two", "three", backup);
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_FALSE(again->backup_written);
    EXPECT_EQ(slurp(f), "three");
    EXPECT_EQ(slurp(backup), "one");  // the backup keeps the state before the first edit
    EXPECT_EQ(names_in(dir.file("proj")), std::vector<std::string>{"mcp.json"});
}

TEST(AtomicFile, WritesThroughASymlink) {
    TempDir dir;
    std::string target = dir.file("dotfiles/mcp.json"), link = dir.file("mcp.json");
    spit(target, "one");
    ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
    auto r = replace_file(link, "one", "two", dir.file("backup"));
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(std::filesystem::is_symlink(link));
    EXPECT_EQ(slurp(target), "two");
    EXPECT_EQ(r->path, std::filesystem::canonical(target).string());
    EXPECT_EQ(slurp(dir.file("backup")), "one");
}

TEST(AtomicFile, AFileChangedUnderneathIsNotOverwritten) {
    TempDir dir;
    std::string f = dir.file("claude.json");
    spit(f, "theirs");
    auto r = replace_file(f, "what we read", "ours", dir.file("claude.json.backup"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, EAGAIN);
    EXPECT_EQ(slurp(f), "theirs");
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"claude.json"});  // no temp left
}

TEST(AtomicFile, MissingFileIsAnErrorNamingIt) {
    TempDir dir;
    auto r = replace_file(dir.file("nope.json"), "", "x", dir.file("backup"));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "realpath(" + dir.file("nope.json") + "): No such file or directory");
}

}  // namespace
}  // namespace warden::clients
