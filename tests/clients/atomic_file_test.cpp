#include "clients/atomic_file.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "clients_test_util.hpp"

namespace warden::clients {
namespace {

using testing::slurp;
using testing::spit;
using warden::testing::TempDir;

std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

mode_t mode_of(const std::string& path) {
    struct stat st {};
    ::stat(path.c_str(), &st);
    return st.st_mode & 07777;
}

TEST(AtomicFile, ReplacesKeepingModeAndWritesTheBackupOnce) {
    TempDir dir;
    std::string f = dir.file("mcp.json");
    spit(f, "one");
    ASSERT_EQ(::chmod(f.c_str(), 0600), 0);

    auto r = replace_file(f, "one", "two");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(r->backup_written);
    EXPECT_EQ(r->backup, f + ".mcpwarden.bak");
    EXPECT_EQ(slurp(f), "two");
    EXPECT_EQ(slurp(r->backup), "one");
    EXPECT_EQ(mode_of(f), 0600u);
    EXPECT_EQ(mode_of(r->backup), 0600u);

    auto again = replace_file(f, "two", "three");
    ASSERT_TRUE(again.ok()) << again.error().message;
    EXPECT_FALSE(again->backup_written);
    EXPECT_EQ(slurp(f), "three");
    EXPECT_EQ(slurp(r->backup), "one");  // the backup keeps the state before the first edit
    EXPECT_EQ(names_in(dir.path()),
              (std::vector<std::string>{"mcp.json", "mcp.json.mcpwarden.bak"}));
}

TEST(AtomicFile, WritesThroughASymlink) {
    TempDir dir;
    std::string target = dir.file("dotfiles/mcp.json"), link = dir.file("mcp.json");
    spit(target, "one");
    ASSERT_EQ(::symlink(target.c_str(), link.c_str()), 0);
    auto r = replace_file(link, "one", "two");
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_TRUE(std::filesystem::is_symlink(link));
    EXPECT_EQ(slurp(target), "two");
    EXPECT_EQ(r->backup, std::filesystem::canonical(target).string() + ".mcpwarden.bak");
}

TEST(AtomicFile, AFileChangedUnderneathIsNotOverwritten) {
    TempDir dir;
    std::string f = dir.file("claude.json");
    spit(f, "theirs");
    auto r = replace_file(f, "what we read", "ours");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().code, EAGAIN);
    EXPECT_EQ(slurp(f), "theirs");
    EXPECT_EQ(names_in(dir.path()), std::vector<std::string>{"claude.json"});  // no temp left
}

TEST(AtomicFile, MissingFileIsAnErrorNamingIt) {
    TempDir dir;
    auto r = replace_file(dir.file("nope.json"), "", "x");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.error().message,
              "realpath(" + dir.file("nope.json") + "): No such file or directory");
}

}  // namespace
}  // namespace warden::clients
