#include "clients/discover.hpp"

#include <stdlib.h>

#include <filesystem>

#include <gtest/gtest.h>

#include "clients/config_file.hpp"
#include "clients_test_util.hpp"

namespace warden::clients {
namespace {

using testing::install_fixtures;
using testing::spit;
using warden::testing::TempDir;

DiscoverOptions options_for(const TempDir& dir, std::optional<std::string> project = "proj") {
    std::filesystem::create_directories(dir.file("home"));
    DiscoverOptions o;
    o.home = dir.file("home");
    o.config_home = o.home + "/.config";
    o.codex_home = o.home + "/.codex";
    if (project) {
        o.project_dir = dir.file(*project);
        std::filesystem::create_directories(*o.project_dir);
    }
    return o;
}

const ClientConfigs& client(const std::vector<ClientConfigs>& all, const std::string& id) {
    for (const auto& c : all)
        if (c.client.id == id) return c;
    static ClientConfigs none;
    return none;
}

TEST(Discover, EmptyHomeDetectsNothing) {
    TempDir dir;
    auto all = discover(options_for(dir));
    ASSERT_EQ(all.size(), known_clients().size());
    for (const auto& c : all) {
        EXPECT_FALSE(c.detected) << c.client.id;
        EXPECT_TRUE(c.files.empty()) << c.client.id;
    }
    EXPECT_TRUE(declared_servers(options_for(dir)).empty());
}

TEST(Discover, FindsEveryClientsFilesWithTheirScope) {
    TempDir dir;
    auto o = options_for(dir);
    auto installed = install_fixtures(o.home, *o.project_dir);
    auto all = discover(o);
    for (const auto& i : installed) {
        const auto& c = client(all, i.client);
        EXPECT_TRUE(c.detected) << i.client;
        auto it = std::find_if(c.files.begin(), c.files.end(),
                               [&](const ConfigFileRef& f) { return f.path == i.path; });
        ASSERT_NE(it, c.files.end()) << i.path;
        bool in_project = i.path.starts_with(*o.project_dir + "/");
        EXPECT_EQ(it->scope, in_project ? Scope::Project : Scope::User) << i.path;
        EXPECT_EQ(it->format, i.path.ends_with(".toml") ? Format::Toml : Format::Json);
        if (!in_project) {
            EXPECT_EQ(it->display, "~" + i.path.substr(o.home.size()));
        }
    }
    EXPECT_EQ(client(all, "claude-code").files.size(), 2u);
    EXPECT_EQ(client(all, "zed").files[0].layout, Layout::ContextServers);
    EXPECT_EQ(client(all, "vscode").files[0].layout, Layout::Servers);
    EXPECT_EQ(client(all, "claude-code").files[0].layout, Layout::ClaudeJson);
}

TEST(Discover, ClientDirectoryAloneMeansDetectedWithoutFiles) {
    TempDir dir;
    auto o = options_for(dir);
    std::filesystem::create_directories(o.home + "/.cursor");
    auto all = discover(o);
    EXPECT_TRUE(client(all, "cursor").detected);
    EXPECT_TRUE(client(all, "cursor").files.empty());
    EXPECT_FALSE(client(all, "zed").detected);
}

TEST(Discover, CodexHomeIsHonoured) {
    TempDir dir;
    auto o = options_for(dir);
    spit(o.home + "/.codex/config.toml", "[mcp_servers.a]\ncommand = \"a\"\n");
    spit(dir.file("codex-elsewhere/config.toml"), "[mcp_servers.b]\ncommand = \"b\"\n");
    o.codex_home = dir.file("codex-elsewhere");
    auto servers = declared_servers(o);
    ASSERT_EQ(servers.size(), 1u);
    EXPECT_EQ(servers[0].name, "b");
    EXPECT_EQ(servers[0].file, dir.file("codex-elsewhere/config.toml"));
}

TEST(Discover, FromEnvironmentReadsHomeXdgAndCodexHome) {
    TempDir dir;
    std::filesystem::create_directories(dir.file("p"));
    const char* saved_home = ::getenv("HOME");
    std::string home_before = saved_home ? saved_home : "";
    ::setenv("HOME", dir.file("h/").c_str(), 1);
    ::setenv("XDG_CONFIG_HOME", dir.file("xdg").c_str(), 1);
    ::setenv("CODEX_HOME", "relative/ignored", 1);
    auto o = DiscoverOptions::from_environment(dir.file("p/../p"));
    ::setenv("HOME", home_before.c_str(), 1);
    ::unsetenv("XDG_CONFIG_HOME");
    ::unsetenv("CODEX_HOME");
    ASSERT_TRUE(o.ok()) << o.error().message;
    EXPECT_EQ(o->home, dir.file("h"));
    EXPECT_EQ(o->config_home, dir.file("xdg"));
    EXPECT_EQ(o->codex_home, dir.file("h/.codex"));
    EXPECT_EQ(o->project_dir, std::filesystem::canonical(dir.file("p")).string());

    auto bad = DiscoverOptions::from_environment(dir.file("missing"));
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message,
              "realpath(" + dir.file("missing") + "): No such file or directory");
}

TEST(Discover, ProjectThatIsHomeListsSharedFilesOnceAsUser) {
    TempDir dir;
    auto o = options_for(dir, std::nullopt);
    o.project_dir = o.home;
    spit(o.home + "/.cursor/mcp.json", R"({"mcpServers":{"a":{"command":"a"}}})");
    auto all = discover(o);
    ASSERT_EQ(client(all, "cursor").files.size(), 1u);
    EXPECT_EQ(client(all, "cursor").files[0].scope, Scope::User);
    EXPECT_EQ(declared_servers(o).size(), 1u);
}

TEST(Discover, DeclaredServersForTheInventory) {
    TempDir dir;
    auto o = options_for(dir);
    install_fixtures(o.home, *o.project_dir);
    auto servers = declared_servers(o);
    auto find = [&](const std::string& client_id,
                    const std::string& name) -> const DeclaredServer* {
        for (const auto& s : servers)
            if (s.client == client_id && s.name == name) return &s;
        return nullptr;
    };
    // Claude Code: user, local (per project, inside ~/.claude.json) and project scope.
    const DeclaredServer* gh = find("claude-code", "github");
    ASSERT_TRUE(gh);
    EXPECT_EQ(gh->scope, Scope::User);
    EXPECT_EQ(gh->command, "npx");
    EXPECT_EQ(gh->args, (std::vector<std::string>{"-y", "@modelcontextprotocol/server-github"}));
    EXPECT_FALSE(gh->wrapped);
    EXPECT_EQ(gh->inner_command, "npx");
    const DeclaredServer* pg = find("claude-code", "postgres");
    ASSERT_TRUE(pg);
    EXPECT_EQ(pg->scope, Scope::Local);
    EXPECT_EQ(pg->project, "/home/dev/shop");
    EXPECT_EQ(pg->file, o.home + "/.claude.json");
    EXPECT_EQ(pg->args[1], "${DATABASE_URL:-postgres://localhost/shop}");  // never expanded
    const DeclaredServer* fs = find("claude-code", "filesystem");
    ASSERT_TRUE(fs);
    EXPECT_EQ(fs->scope, Scope::Project);
    EXPECT_EQ(fs->project, *o.project_dir);
    // Remote servers are not stdio servers; disabled ones are, flagged.
    EXPECT_FALSE(find("claude-code", "sentry"));
    EXPECT_FALSE(find("codex", "figma"));
    ASSERT_TRUE(find("codex", "shell"));
    EXPECT_TRUE(find("codex", "shell")->disabled);
    ASSERT_TRUE(find("windsurf", "puppeteer"));
    EXPECT_TRUE(find("windsurf", "puppeteer")->disabled);
    // Zed's older shape is read through command.path.
    ASSERT_TRUE(find("zed", "mcp-server-time"));
    EXPECT_EQ(find("zed", "mcp-server-time")->command, "uvx");
    EXPECT_FALSE(find("zed", "from-extension"));
    EXPECT_EQ(servers.size(), 23u);
}

TEST(Discover, WrappedServersShowTheServerInside) {
    TempDir dir;
    auto o = options_for(dir);
    spit(
        o.home + "/.cursor/mcp.json",
        R"({"mcpServers":{"a":{"command":"/x/mcpwarden","args":["run","--name","a","--","npx","-y","pkg"]}}})");
    auto servers = declared_servers(o);
    ASSERT_EQ(servers.size(), 1u);
    EXPECT_TRUE(servers[0].wrapped);
    EXPECT_EQ(servers[0].command, "/x/mcpwarden");
    EXPECT_EQ(servers[0].inner_command, "npx");
    EXPECT_EQ(servers[0].inner_args, (std::vector<std::string>{"-y", "pkg"}));
}

TEST(Discover, AMalformedFileIsLeftOutOthersStay) {
    TempDir dir;
    auto o = options_for(dir);
    spit(o.home + "/.cursor/mcp.json", "{\"mcpServers\": {");
    spit(o.home + "/.gemini/settings.json", R"({"mcpServers":{"g":{"command":"g"}}})");
    auto servers = declared_servers(o);
    ASSERT_EQ(servers.size(), 1u);
    EXPECT_EQ(servers[0].client, "gemini");
}

}  // namespace
}  // namespace warden::clients
