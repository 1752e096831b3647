// `mcpwarden clients`, `wrap`, `unwrap` through the built binary, HOME pointing at a
// scratch directory holding every client's fixture config.
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "clients/discover.hpp"
#include "clients_test_util.hpp"

namespace warden::clients {
namespace {

using testing::data;
using testing::Installed;
using testing::run_cli;
using testing::slurp;
using testing::spit;
using testing::stamp;
using warden::testing::TempDir;

class Cli : public ::testing::Test {
  protected:
    void SetUp() override {
        std::filesystem::create_directories(home());
        std::filesystem::create_directories(project());
        std::filesystem::create_directories(elsewhere());
        installed_ = testing::install_fixtures(home(), project());
    }
    std::string home() const { return dir_.file("home"); }
    std::string project() const { return dir_.file("proj"); }
    std::string elsewhere() const { return dir_.file("elsewhere"); }
    testing::CliResult cli(std::vector<std::string> args) {
        return run_cli(args, home(), project());
    }
    std::vector<DeclaredServer> declared() const {
        DiscoverOptions o;
        o.home = home();
        o.config_home = home() + "/.config";
        o.codex_home = home() + "/.codex";
        o.project_dir = std::filesystem::canonical(project()).string();
        return declared_servers(o);
    }

    TempDir dir_;
    std::vector<Installed> installed_;
};

TEST_F(Cli, ClientsListsClientsFilesAndServers) {
    auto r = cli({"clients"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const char* want :
         {"Claude Code (claude-code)\n", "  ~/.claude.json [user]\n",
          "  ~/.claude.json [local: /home/dev/shop]\n", "Cursor (cursor)\n",
          "  ~/.cursor/mcp.json [user]\n", "/.vscode/mcp.json [project]\n", "Zed (zed)\n",
          "Codex (codex)\n", "Gemini CLI (gemini)\n", "Cline (cline)\n", "Windsurf (windsurf)\n",
          "Claude Desktop (claude-desktop)\n"})
        EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
    EXPECT_NE(
        r.out.find("brave-search  not wrapped  npx -y @modelcontextprotocol/server-brave-search"),
        std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("linear        remote"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("shell   not wrapped, disabled  /opt/mcp/bin/shell-server"),
              std::string::npos)
        << r.out;
}

TEST_F(Cli, ClientsJson) {
    auto r = cli({"clients", "--json"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto j = nlohmann::json::parse(r.out);
    ASSERT_TRUE(j["clients"].is_array());
    nlohmann::json cursor;
    for (auto& c : j["clients"])
        if (c["id"] == "cursor") cursor = c;
    ASSERT_TRUE(cursor.is_object()) << r.out;
    EXPECT_EQ(cursor["detected"], true);
    ASSERT_EQ(cursor["files"].size(), 1u);
    auto& f = cursor["files"][0];
    EXPECT_EQ(f["path"], home() + "/.cursor/mcp.json");
    EXPECT_EQ(f["scope"], "user");
    ASSERT_EQ(f["servers"].size(), 3u);
    EXPECT_EQ(f["servers"][0]["name"], "brave-search");
    EXPECT_EQ(f["servers"][0]["transport"], "stdio");
    EXPECT_EQ(f["servers"][0]["wrapped"], false);
    EXPECT_EQ(f["servers"][0]["command"], "npx");
    EXPECT_EQ(f["servers"][1]["transport"], "remote");
}

TEST_F(Cli, WrapAllThenUnwrapAllRestoresEveryFile) {
    auto r = cli({"wrap", "--all"});
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
    std::string self = std::filesystem::canonical(warden::testing::kCli).string();
    auto servers = declared();
    ASSERT_EQ(servers.size(), 23u);
    for (const auto& s : servers) {
        EXPECT_TRUE(s.wrapped) << s.client << " " << s.name;
        EXPECT_EQ(s.command, self) << s.name;
        EXPECT_EQ(std::vector<std::string>(s.args.begin(), s.args.begin() + 4),
                  (std::vector<std::string>{"run", "--name", s.name, "--"}));
    }
    for (const auto& i : installed_) {
        EXPECT_EQ(slurp(i.path + ".mcpwarden.bak"), data(i.fixture)) << i.path;
        EXPECT_NE(slurp(i.path), data(i.fixture)) << i.path;
    }
    auto listed = cli({"clients"});
    EXPECT_NE(listed.out.find("brave-search  wrapped  npx -y"), std::string::npos) << listed.out;

    auto again = cli({"wrap", "--all"});
    ASSERT_EQ(again.exit_code, 0);
    EXPECT_NE(again.out.find("brave-search: already wrapped"), std::string::npos) << again.out;

    auto u = cli({"unwrap", "--all"});
    ASSERT_EQ(u.exit_code, 0) << u.out << u.err;
    for (const auto& i : installed_)
        EXPECT_EQ(slurp(i.path), data(i.fixture)) << i.path;
}

TEST_F(Cli, DryRunPrintsTheDiffAndTouchesNothing) {
    std::string path = home() + "/.cursor/mcp.json";
    auto before = stamp(path);
    auto r = cli({"wrap", "--client", "cursor", "--dry-run"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out.substr(0, 4 + path.size() + 1), "--- " + path + "\n") << r.out;
    EXPECT_NE(r.out.find("\n-      \"command\": \"npx\",\n"), std::string::npos) << r.out;
    EXPECT_NE(r.err.find("brave-search: would wrap"), std::string::npos) << r.err;
    EXPECT_TRUE(stamp(path) == before);
    EXPECT_FALSE(std::filesystem::exists(path + ".mcpwarden.bak"));
}

TEST_F(Cli, OnlyTheSelectedClientAndServerChange) {
    auto r = cli({"wrap", "--client", "codex", "--server", "python", "--mcpwarden",
                  "/opt/mcpwarden/bin/mcpwarden"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const auto& s : declared()) {
        bool want = s.client == "codex" && s.name == "python";
        EXPECT_EQ(s.wrapped, want) << s.client << " " << s.name;
        if (want) {
            EXPECT_EQ(s.command, "/opt/mcpwarden/bin/mcpwarden");
        }
    }
    auto none = cli({"wrap", "--client", "codex", "--server", "nope"});
    EXPECT_EQ(none.exit_code, 1);
    EXPECT_NE(none.err.find("no server named 'nope'"), std::string::npos) << none.err;
}

TEST_F(Cli, UsageErrorsExitTwo) {
    auto cursor = stamp(home() + "/.cursor/mcp.json");
    struct {
        std::vector<std::string> args;
        const char* message;
    } cases[] = {
        {{"wrap"}, "give --client NAME or --all"},
        {{"unwrap", "--all", "--client", "cursor"}, "give --client NAME or --all"},
        {{"wrap", "--client", "emacs"}, "unknown client 'emacs' (known: claude-code, "},
        {{"wrap", "--all", "--mcpwarden", "bin/mcpwarden"}, "--mcpwarden must be an absolute path"},
        {{"wrap", "--all", "--project", "/nonexistent/dir"}, "realpath(/nonexistent/dir)"},
    };
    for (const auto& c : cases) {
        auto r = cli(c.args);
        EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << c.message;
        EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    }
    EXPECT_TRUE(stamp(home() + "/.cursor/mcp.json") == cursor);
}

TEST_F(Cli, AFileThatDoesNotParseFailsAloneAndStaysUntouched) {
    std::string bad = home() + "/.cursor/mcp.json";
    spit(bad,
         "{\n  \"mcpServers\": {\n    \"a\": {\n      \"command\": \"x\"\n    }\n  }\n  \"b\": "
         "1\n}\n");
    auto before = stamp(bad);
    auto r = cli({"wrap", "--all"});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find("mcpwarden wrap: ~/.cursor/mcp.json:7:3: expected ',' or '}'\n"),
              std::string::npos)
        << r.err;
    EXPECT_TRUE(stamp(bad) == before);
    EXPECT_FALSE(std::filesystem::exists(bad + ".mcpwarden.bak"));
    size_t wrapped = 0;
    for (const auto& s : declared())
        wrapped += s.wrapped;
    EXPECT_EQ(wrapped, 21u);  // every other file was still processed

    auto listed = cli({"clients"});
    EXPECT_EQ(listed.exit_code, 1);
    EXPECT_NE(listed.out.find("error: ~/.cursor/mcp.json:7:3: expected ',' or '}'"),
              std::string::npos)
        << listed.out;
}

TEST_F(Cli, ProjectDirectoryOption) {
    // Run from elsewhere: the project files are only found through --project.
    auto without = run_cli({"clients", "--json"}, home(), elsewhere());
    EXPECT_EQ(without.out.find("/proj/.mcp.json"), std::string::npos);
    auto with = run_cli({"clients", "--json", "--project", project()}, home(), elsewhere());
    EXPECT_NE(with.out.find("/proj/.mcp.json"), std::string::npos) << with.out;
    auto wrap =
        run_cli({"wrap", "--client", "vscode", "--project", project()}, home(), elsewhere());
    EXPECT_EQ(wrap.exit_code, 0) << wrap.err;
    EXPECT_NE(slurp(project() + "/.vscode/mcp.json"), data("vscode.json"));
}

}  // namespace
}  // namespace warden::clients
