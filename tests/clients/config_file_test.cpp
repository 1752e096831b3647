// Editing config files on disk: errors leave files untouched, --dry-run only diffs, writes
// keep a one-time backup, unwrap restores the bytes.
#include "clients/config_file.hpp"

#include <sys/stat.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "clients_test_util.hpp"

namespace warden::clients {
namespace {

using testing::data;
using testing::slurp;
using testing::spit;
using testing::stamp;
using warden::testing::TempDir;

struct Home {
    TempDir dir;
    DiscoverOptions options;
    Home() {
        options.home = dir.file("home");
        options.config_home = options.home + "/.config";
        options.codex_home = options.home + "/.codex";
        std::filesystem::create_directories(options.home);
    }
    ConfigFileRef file(const std::string& client_id) const {
        for (const auto& c : discover(options))
            if (c.client.id == client_id && !c.files.empty()) return c.files[0];
        ADD_FAILURE() << "no config file for " << client_id;
        return {};
    }
};

EditRequest request(Action action, bool dry_run = false) {
    return {action, {"/usr/bin/mcpwarden", std::nullopt}, dry_run};
}

TEST(ConfigFile, MalformedFileIsReportedWithPositionAndLeftUntouched) {
    Home h;
    std::string path = h.options.home + "/.cursor/mcp.json";
    spit(path,
         "{\n  \"mcpServers\": {\n    \"a\": {\n      \"command\": \"x\"\n    }\n  }\n  \"other\": "
         "1\n}\n");
    auto before = stamp(path);
    auto edit = edit_file(h.file("cursor"), request(Action::Wrap));
    ASSERT_FALSE(edit.ok());
    EXPECT_EQ(edit.error().message, "~/.cursor/mcp.json:7:3: expected ',' or '}'");
    EXPECT_TRUE(stamp(path) == before);
    EXPECT_FALSE(std::filesystem::exists(path + ".mcpwarden.bak"));

    auto listed = list_file(h.file("cursor"));
    ASSERT_FALSE(listed.ok());
    EXPECT_EQ(listed.error().message, "~/.cursor/mcp.json:7:3: expected ',' or '}'");
}

TEST(ConfigFile, MalformedTomlIsReportedWithPosition) {
    Home h;
    std::string path = h.options.home + "/.codex/config.toml";
    spit(path, "model = \"o3\"\n[mcp_servers.a]\ncommand = npx\n");
    auto before = stamp(path);
    auto edit = edit_file(h.file("codex"), request(Action::Wrap));
    ASSERT_FALSE(edit.ok());
    EXPECT_EQ(edit.error().message,
              "~/.codex/config.toml:3:12: Error while parsing floating-point: expected 'nan', saw "
              "'np'");
    EXPECT_TRUE(stamp(path) == before);
}

TEST(ConfigFile, DryRunPrintsADiffAndChangesNothing) {
    Home h;
    std::string path = h.options.home + "/.cursor/mcp.json";
    spit(path, data("cursor.json"));
    auto before = stamp(path);
    auto edit = edit_file(h.file("cursor"), request(Action::Wrap, true));
    ASSERT_TRUE(edit.ok()) << edit.error().message;
    EXPECT_FALSE(edit->written);
    EXPECT_EQ(edit->diff.substr(0, 2 * path.size() + 10), "--- " + path + "\n+++ " + path + "\n");
    EXPECT_NE(edit->diff.find("\n-      \"command\": \"npx\",\n"), std::string::npos) << edit->diff;
    EXPECT_NE(edit->diff.find("\n+      \"command\": \"/usr/bin/mcpwarden\",\n"),
              std::string::npos);
    EXPECT_TRUE(stamp(path) == before);
    EXPECT_FALSE(std::filesystem::exists(path + ".mcpwarden.bak"));
}

TEST(ConfigFile, WrapWritesOnceBackedUpAndUnwrapRestoresTheBytes) {
    Home h;
    std::string path = h.options.home + "/.claude.json";
    std::string original = data("claude_code_user.json");
    spit(path, original);
    ASSERT_EQ(::chmod(path.c_str(), 0600), 0);

    auto wrapped = edit_file(h.file("claude-code"), request(Action::Wrap));
    ASSERT_TRUE(wrapped.ok()) << wrapped.error().message;
    EXPECT_TRUE(wrapped->written);
    EXPECT_TRUE(wrapped->backup_written);
    EXPECT_EQ(wrapped->backup, path + ".mcpwarden.bak");
    EXPECT_EQ(slurp(wrapped->backup), original);
    EXPECT_NE(slurp(path), original);
    EXPECT_EQ(stamp(path).mode & 07777, 0600u);

    auto again = edit_file(h.file("claude-code"), request(Action::Wrap));
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->written);  // already wrapped: nothing to write
    EXPECT_TRUE(again->diff.empty());

    auto unwrapped = edit_file(h.file("claude-code"), request(Action::Unwrap));
    ASSERT_TRUE(unwrapped.ok()) << unwrapped.error().message;
    EXPECT_TRUE(unwrapped->written);
    EXPECT_FALSE(unwrapped->backup_written);
    EXPECT_EQ(slurp(path), original);

    // Someone edits the file; a new wrap keeps the first backup.
    spit(path, original + "\n");
    auto rewrapped = edit_file(h.file("claude-code"), request(Action::Wrap));
    ASSERT_TRUE(rewrapped.ok());
    EXPECT_FALSE(rewrapped->backup_written);
    EXPECT_EQ(slurp(path + ".mcpwarden.bak"), original);
}

TEST(ConfigFile, ReportsEachServer) {
    Home h;
    spit(h.options.home + "/.codeium/windsurf/mcp_config.json", data("windsurf.json"));
    auto edit = edit_file(h.file("windsurf"), request(Action::Wrap, true));
    ASSERT_TRUE(edit.ok());
    ASSERT_EQ(edit->entries.size(), 3u);
    EXPECT_EQ(edit->entries[0].name, "git");
    EXPECT_EQ(edit->entries[0].outcome, Outcome::Changed);
    EXPECT_EQ(edit->entries[1].name, "puppeteer");  // disabled, still wrapped
    EXPECT_EQ(edit->entries[1].outcome, Outcome::Changed);
    EXPECT_EQ(edit->entries[2].name, "figma");
    EXPECT_EQ(edit->entries[2].outcome, Outcome::Remote);
}

}  // namespace
}  // namespace warden::clients
