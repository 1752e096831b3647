// mcpwarden/clients.hpp through the shared library, in a scratch HOME: a config that does
// not parse fails alone, with the file and place named, and stays byte-for-byte as it was;
// a good one is wrapped (backup made), listed as wrapped, and unwrapped back to its bytes.
#include <stdlib.h>

#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "clients/clients_test_util.hpp"
#include "common/testing.hpp"
#include "mcpwarden/mcpwarden.hpp"

namespace warden::testing {
namespace {

// HOME (and the XDG/Codex homes) pointed at a scratch directory for one test.
class ScratchHome {
  public:
    ScratchHome() {
        for (const char* v : {"HOME", "XDG_CONFIG_HOME", "CODEX_HOME", "XDG_STATE_HOME"})
            if (const char* old = ::getenv(v)) saved_.emplace_back(v, old);
        ::setenv("HOME", dir_.path().c_str(), 1);
        ::unsetenv("XDG_CONFIG_HOME");
        ::unsetenv("CODEX_HOME");
        ::unsetenv("XDG_STATE_HOME");
    }
    ~ScratchHome() {
        ::unsetenv("HOME");
        for (const auto& [k, v] : saved_)
            ::setenv(k.c_str(), v.c_str(), 1);
    }
    ScratchHome(const ScratchHome&) = delete;
    ScratchHome& operator=(const ScratchHome&) = delete;
    std::string file(const std::string& rel) const { return dir_.file(rel); }
    const std::string& path() const { return dir_.path(); }

  private:
    TempDir dir_;
    std::vector<std::pair<std::string, std::string>> saved_;
};

const std::string kBadCursor =
    "{\n  \"mcpServers\": {\n    \"a\": {\n      \"command\": \"x\"\n    }\n  }\n  \"b\": 1\n}\n";

api::EditClientsOptions edit_cursor(const ScratchHome& home, bool unwrap = false) {
    api::EditClientsOptions o;
    o.unwrap = unwrap;
    o.clients = {"cursor", "gemini"};
    o.project_dir = home.path();
    o.mcpwarden = std::filesystem::canonical(kCli).string();
    return o;
}

TEST(ApiClients, WrapOfABadConfigNamesTheFileAndWhyAndLeavesItAlone) {
    ScratchHome home;
    const std::string bad = home.file(".cursor/mcp.json");
    clients::testing::spit(bad, kBadCursor);
    const std::string good = home.file(".gemini/settings.json");
    clients::testing::spit(good, clients::testing::data("gemini.json"));
    auto bad_before = clients::testing::stamp(bad);

    auto r = api::edit_client_configs(edit_cursor(home));
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_FALSE(r->ok());
    ASSERT_EQ(r->files.size(), 2u);
    const api::ClientFileEdit& f = r->files[0];
    EXPECT_EQ(f.client, "cursor");
    EXPECT_EQ(f.error, "~/.cursor/mcp.json:7:3: expected ',' or '}'");
    EXPECT_FALSE(f.written);
    EXPECT_TRUE(clients::testing::stamp(bad) == bad_before);
    EXPECT_FALSE(std::filesystem::exists(bad + ".mcpwarden.bak"));

    // The control: the good file beside it was wrapped, with a backup.
    const api::ClientFileEdit& g = r->files[1];
    EXPECT_EQ(g.client, "gemini");
    EXPECT_TRUE(g.error.empty()) << g.error;
    EXPECT_TRUE(g.written);
    ASSERT_FALSE(g.entries.empty());
    for (const auto& e : g.entries)
        if (e.outcome != "remote") {
            EXPECT_EQ(e.outcome, "changed") << e.name << ": " << e.reason;
        }
    EXPECT_TRUE(g.backup_written);
    EXPECT_EQ(g.backup_display.rfind("~/.local/state/mcpwarden/backups/%2F", 0), 0u)
        << g.backup_display;
    EXPECT_FALSE(std::filesystem::exists(good + ".mcpwarden.bak"));
    EXPECT_EQ(r->matched, g.entries.size());

    // Listing reads the same: the bad file with its error, the good one's servers wrapped.
    auto listed = api::discover_clients({.project_dir = home.path()});
    ASSERT_TRUE(listed) << listed.error().message;
    size_t wrapped = 0, errors = 0;
    for (const auto& c : *listed)
        for (const auto& file : c.files) {
            errors += !file.error.empty();
            for (const auto& s : file.servers) {
                if (s.remote) continue;
                EXPECT_TRUE(s.wrapped) << s.name;
                EXPECT_EQ(s.command, std::filesystem::canonical(kCli).string());
                EXPECT_TRUE(s.server_command.has_value()) << s.name;
                wrapped += s.wrapped;
            }
        }
    EXPECT_EQ(errors, 1u);
    EXPECT_GT(wrapped, 0u);
}

TEST(ApiClients, UnwrapGivesBackTheOriginalBytes) {
    ScratchHome home;
    const std::string good = home.file(".gemini/settings.json");
    const std::string original = clients::testing::data("gemini.json");
    clients::testing::spit(good, original);

    auto dry = edit_cursor(home);
    dry.dry_run = true;
    auto d = api::edit_client_configs(dry);
    ASSERT_TRUE(d) << d.error().message;
    ASSERT_EQ(d->files.size(), 1u);
    EXPECT_FALSE(d->files[0].written);
    EXPECT_NE(d->files[0].diff.find("+"), std::string::npos);
    EXPECT_EQ(clients::testing::slurp(good), original);  // a dry run writes nothing

    ASSERT_TRUE(api::edit_client_configs(edit_cursor(home)));
    EXPECT_NE(clients::testing::slurp(good), original);
    auto u = api::edit_client_configs(edit_cursor(home, /*unwrap=*/true));
    ASSERT_TRUE(u) << u.error().message;
    EXPECT_TRUE(u->ok());
    EXPECT_EQ(clients::testing::slurp(good), original);
    ASSERT_EQ(u->files.size(), 1u);
    EXPECT_TRUE(u->files[0].backup_removed);
    EXPECT_TRUE(std::filesystem::is_empty(home.file(".local/state/mcpwarden/backups")));
}

TEST(ApiClients, BadRequestsSayWhy) {
    ScratchHome home;
    api::EditClientsOptions o = edit_cursor(home);
    o.clients = {"emacs"};
    auto r = api::edit_client_configs(o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message.rfind("unknown client 'emacs' (known: claude-code, ", 0), 0u)
        << r.error().message;
    o = edit_cursor(home);
    o.mcpwarden = "bin/mcpwarden";
    r = api::edit_client_configs(o);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("bin/mcpwarden"), std::string::npos);
    o = edit_cursor(home);
    o.mcpwarden = "/bin/true";  // executable, but not mcpwarden
    r = api::edit_client_configs(o);
    ASSERT_FALSE(r);
    EXPECT_EQ(
        r.error().message.rfind(
            "--mcpwarden /bin/true is not mcpwarden: `/bin/true --version` printed \"true ", 0),
        0u)
        << r.error().message;
    EXPECT_EQ(api::mcpwarden_problem("/nonexistent/mcpwarden"),
              "/nonexistent/mcpwarden: No such file or directory");
    EXPECT_EQ(api::mcpwarden_problem(std::filesystem::canonical(kCli).string()), "");
    o = edit_cursor(home);
    o.project_dir = "/nonexistent/dir";
    r = api::edit_client_configs(o);
    ASSERT_FALSE(r);
    EXPECT_NE(r.error().message.find("/nonexistent/dir"), std::string::npos);

    auto known = api::known_clients();
    ASSERT_FALSE(known.empty());
    EXPECT_EQ(known.front().id, "claude-code");

    // What `wrap` writes without --mcpwarden: the running executable, by absolute path.
    auto self = api::self_executable();
    ASSERT_TRUE(self) << self.error().message;
    EXPECT_EQ(std::filesystem::path(*self).filename(), "test_api");
    EXPECT_TRUE(std::filesystem::path(*self).is_absolute());
}

}  // namespace
}  // namespace warden::testing
