// Editing config files on disk: errors leave files untouched, --dry-run only diffs, writes
// keep a one-time private backup in the state directory, unwrap restores the bytes of what
// wrap recorded and nothing else.
#include "clients/config_file.hpp"

#include <sys/stat.h>

#include <filesystem>
#include <optional>

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
    std::optional<WrapRecord> record;
    Home() {
        options.home = dir.file("home");
        options.config_home = options.home + "/.config";
        options.codex_home = options.home + "/.codex";
        options.state_dir = options.home + "/.local/state/mcpwarden";
        std::filesystem::create_directories(options.home);
        auto r = WrapRecord::open(options.state_dir);
        EXPECT_TRUE(r.ok()) << r.error().message;
        if (r) record.emplace(std::move(*r));
    }
    EditRequest request(Action action, bool dry_run = false) {
        EditRequest r;
        r.action = action;
        r.wrap.mcpwarden = "/usr/bin/mcpwarden";
        r.dry_run = dry_run;
        r.record = &*record;
        return r;
    }
    ConfigFileRef file(const std::string& client_id) const {
        for (const auto& c : discover(options))
            if (c.client.id == client_id && !c.files.empty()) return c.files[0];
        ADD_FAILURE() << "no config file for " << client_id;
        return {};
    }
};

TEST(ConfigFile, MalformedFileIsReportedWithPositionAndLeftUntouched) {
    Home h;
    std::string path = h.options.home + "/.cursor/mcp.json";
    spit(path,
         "{\n  \"mcpServers\": {\n    \"a\": {\n      \"command\": \"x\"\n    }\n  }\n  \"other\": "
         "1\n}\n");
    auto before = stamp(path);
    auto edit = edit_file(h.file("cursor"), h.request(Action::Wrap));
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
    auto edit = edit_file(h.file("codex"), h.request(Action::Wrap));
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
    auto edit = edit_file(h.file("cursor"), h.request(Action::Wrap, true));
    ASSERT_TRUE(edit.ok()) << edit.error().message;
    EXPECT_FALSE(edit->written);
    EXPECT_EQ(edit->diff.substr(0, 2 * path.size() + 10), "--- " + path + "\n+++ " + path + "\n");
    EXPECT_NE(edit->diff.find("\n-      \"command\": \"npx\",\n"), std::string::npos) << edit->diff;
    EXPECT_NE(edit->diff.find("\n+      \"command\": \"/usr/bin/mcpwarden\",\n"),
              std::string::npos);
    EXPECT_TRUE(stamp(path) == before);
    EXPECT_FALSE(std::filesystem::exists(path + ".mcpwarden.bak"));
}

TEST(ConfigFile, WrapBacksUpPrivatelyAndUnwrapRestoresTheBytesAndDropsTheBackup) {
    Home h;
    std::string path = h.options.home + "/.claude.json";
    std::string original = data("claude_code_user.json");
    spit(path, original);
    ASSERT_EQ(::chmod(path.c_str(), 0644), 0);

    auto wrapped = edit_file(h.file("claude-code"), h.request(Action::Wrap));
    ASSERT_TRUE(wrapped.ok()) << wrapped.error().message;
    EXPECT_TRUE(wrapped->written);
    EXPECT_TRUE(wrapped->backup_written);
    std::string escaped;  // the path as one file name: every '/' as %2F
    for (char c : std::filesystem::canonical(path).string())
        escaped += c == '/' ? std::string("%2F") : std::string(1, c);
    std::string backup = h.options.state_dir + "/backups/" + escaped;
    EXPECT_EQ(wrapped->backup, backup);
    EXPECT_EQ(slurp(backup), original);
    EXPECT_EQ(stamp(backup).mode & 07777, 0600u);  // API keys: never wider than the owner
    EXPECT_FALSE(std::filesystem::exists(path + ".mcpwarden.bak"));
    EXPECT_NE(slurp(path), original);
    EXPECT_EQ(stamp(path).mode & 07777, 0644u);
    ASSERT_NE(h.record->find(path), nullptr);
    EXPECT_EQ(h.record->find(path)->entries.size(), 3u);  // every stdio entry of the file

    auto again = edit_file(h.file("claude-code"), h.request(Action::Wrap));
    ASSERT_TRUE(again.ok());
    EXPECT_FALSE(again->written);  // already wrapped: nothing to write
    EXPECT_TRUE(again->diff.empty());

    auto unwrapped = edit_file(h.file("claude-code"), h.request(Action::Unwrap));
    ASSERT_TRUE(unwrapped.ok()) << unwrapped.error().message;
    EXPECT_TRUE(unwrapped->written);
    EXPECT_TRUE(unwrapped->backup_removed);
    EXPECT_EQ(slurp(path), original);
    EXPECT_FALSE(std::filesystem::exists(backup));
    EXPECT_EQ(h.record->find(path), nullptr);
    EXPECT_FALSE(std::filesystem::exists(h.record->path()));  // an empty record is no file
}

// The user's own `mcpwarden run` entry is not wrap's: unwrap leaves it, byte for byte, while
// it takes back the entry wrap did wrap. `"args": []` placed before `command` (where wrap
// adds a missing one) comes back too: the record knows wrap did not add it. The negative
// control is the same unwrap without a record (--unrecorded), which strips both.
TEST(ConfigFile, UnwrapTakesBackOnlyWhatWrapRecorded) {
    Home h;
    std::string path = h.options.home + "/.cursor/mcp.json";
    const std::string original =
        "{\n  \"mcpServers\": {\n"
        "    \"mine\": {\"command\": \"mcpwarden\", \"args\": [\"run\", \"--\", \"python3\", "
        "\"-m\", \"srv\"]},\n"
        "    \"empty\": {\"args\": [], \"command\": \"srv\"},\n"
        "    \"plain\": {\"command\": \"npx\", \"args\": [\"-y\", \"x\"]}\n"
        "  }\n}\n";
    spit(path, original);
    auto wrapped = edit_file(h.file("cursor"), h.request(Action::Wrap));
    ASSERT_TRUE(wrapped.ok()) << wrapped.error().message;
    ASSERT_EQ(wrapped->entries.size(), 3u);
    EXPECT_EQ(wrapped->entries[0].outcome, Outcome::Already);  // hand-wrapped: not recorded
    EXPECT_EQ(h.record->find(path)->entries.size(), 2u);

    auto unwrapped = edit_file(h.file("cursor"), h.request(Action::Unwrap));
    ASSERT_TRUE(unwrapped.ok()) << unwrapped.error().message;
    EXPECT_EQ(slurp(path), original);  // byte for byte, the hand-wrapped entry and `[]` too
    EXPECT_EQ(unwrapped->entries[0].outcome, Outcome::Skipped);
    EXPECT_EQ(unwrapped->entries[0].reason,
              "wrapped by hand, not by mcpwarden wrap: left alone (--unrecorded unwraps it)");
    EXPECT_TRUE(unwrapped->backup_removed);

    // Without the record, the entry written by hand is stripped (--unrecorded), and the
    // `[]` is lost (the text edit alone cannot tell it from an args member wrap added).
    ASSERT_TRUE(edit_file(h.file("cursor"), h.request(Action::Wrap)).ok());
    std::string wrapped_text = slurp(path);
    auto blind = h.request(Action::Unwrap);
    blind.wrap.unrecorded = true;
    ASSERT_TRUE(edit_file(h.file("cursor"), blind).ok());
    auto after = slurp(path);
    EXPECT_NE(after.find("\"mine\": {\"command\": \"python3\", \"args\": [\"-m\""),
              std::string::npos)
        << after;
    auto no_record = rewrite_text(wrapped_text, Format::Json, Layout::McpServers, Scope::User,
                                  Action::Unwrap, {"/usr/bin/mcpwarden", std::nullopt});
    ASSERT_TRUE(no_record.ok());
    EXPECT_NE(no_record->text.find("\"empty\": {\"command\": \"srv\"}"), std::string::npos)
        << no_record->text;
}

// An entry changed by hand after wrap (here: --isolate added) is no longer what wrap wrote:
// unwrap leaves it and says so, and keeps the backup while the record still lists it.
TEST(ConfigFile, UnwrapLeavesAnEntryChangedSinceWrap) {
    Home h;
    std::string path = h.options.home + "/.cursor/mcp.json";
    spit(path, data("cursor.json"));
    auto wrapped = edit_file(h.file("cursor"), h.request(Action::Wrap));
    ASSERT_TRUE(wrapped.ok()) << wrapped.error().message;
    std::string text = slurp(path);
    size_t at = text.find("\"run\", \"--name\", \"memory\"");
    ASSERT_NE(at, std::string::npos) << text;
    text.insert(at + 7, "\"--isolate=pidns\", ");
    spit(path, text);

    auto unwrapped = edit_file(h.file("cursor"), h.request(Action::Unwrap));
    ASSERT_TRUE(unwrapped.ok()) << unwrapped.error().message;
    ASSERT_EQ(unwrapped->entries.size(), 3u);
    EXPECT_EQ(unwrapped->entries[0].outcome, Outcome::Changed);
    EXPECT_EQ(unwrapped->entries[2].outcome, Outcome::Skipped);
    EXPECT_EQ(unwrapped->entries[2].reason,
              "changed since mcpwarden wrap wrote it: left alone (--unrecorded unwraps it)");
    EXPECT_FALSE(unwrapped->backup_removed);
    EXPECT_TRUE(std::filesystem::exists(wrapped->backup));
    EXPECT_NE(slurp(path).find("--isolate=pidns"), std::string::npos);
}

TEST(ConfigFile, ReportsEachServer) {
    Home h;
    spit(h.options.home + "/.codeium/windsurf/mcp_config.json", data("windsurf.json"));
    auto edit = edit_file(h.file("windsurf"), h.request(Action::Wrap, true));
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
