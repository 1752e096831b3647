// `mcpwarden clients`, `wrap`, `unwrap` through the built binary, HOME pointing at a
// scratch directory holding every client's fixture config.
#include <cstdlib>
#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "clients/discover.hpp"
#include "clients_test_util.hpp"
#include "common/json_doc.hpp"

namespace warden::clients {
namespace {

using testing::data;
using testing::Installed;
using testing::mode_of;
using testing::names_in;
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

    std::string state() const { return home() + "/.local/state/mcpwarden"; }
    // Where wrap keeps the original of the config at `path`.
    std::string backup_of(const std::string& path) const {
        std::string name;
        for (char c : std::filesystem::canonical(path).string())
            name += c == '/' ? std::string("%2F") : std::string(1, c);
        return state() + "/backups/" + name;
    }
    // A link named mcpwarden to the built binary, which a test can take away.
    std::string linked_mcpwarden() const {
        std::string link = elsewhere() + "/bin/mcpwarden";
        std::filesystem::create_directories(elsewhere() + "/bin");
        if (!std::filesystem::exists(link))
            std::filesystem::create_symlink(std::filesystem::canonical(warden::testing::kCli),
                                            link);
        return link;
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
    EXPECT_EQ(j["schema"], "mcpwarden.clients");
    EXPECT_EQ(
        warden::testing::undocumented_keys(j, {warden::testing::schema_doc("clients-json.md")}),
        std::vector<std::string>{});
}

TEST_F(Cli, WrapAllThenUnwrapAllRestoresEveryFile) {
    auto r = cli({"wrap", "--all", "--project"});
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
        EXPECT_EQ(slurp(backup_of(i.path)), data(i.fixture)) << i.path;
        EXPECT_NE(slurp(i.path), data(i.fixture)) << i.path;
    }
    auto listed = cli({"clients"});
    EXPECT_NE(listed.out.find("brave-search  wrapped  npx -y"), std::string::npos) << listed.out;

    auto again = cli({"wrap", "--all", "--project"});
    ASSERT_EQ(again.exit_code, 0);
    EXPECT_NE(again.out.find("brave-search: already wrapped"), std::string::npos) << again.out;

    auto u = cli({"unwrap", "--all", "--project"});
    ASSERT_EQ(u.exit_code, 0) << u.out << u.err;
    EXPECT_NE(u.out.find("  backup removed\n"), std::string::npos) << u.out;
    for (const auto& i : installed_) {
        EXPECT_EQ(slurp(i.path), data(i.fixture)) << i.path;
        EXPECT_FALSE(std::filesystem::exists(backup_of(i.path))) << i.path;
    }
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
    auto r =
        cli({"wrap", "--client", "codex", "--server", "python", "--mcpwarden", linked_mcpwarden()});
    ASSERT_EQ(r.exit_code, 0) << r.err;
    for (const auto& s : declared()) {
        bool want = s.client == "codex" && s.name == "python";
        EXPECT_EQ(s.wrapped, want) << s.client << " " << s.name;
        if (want) {
            EXPECT_EQ(s.command, linked_mcpwarden());
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
        {{"wrap"}, "give --client NAME or --all (not both), or --file PATH"},
        {{"wrap", "--all", "--file", "x.json"}, "--file names the files itself"},
        {{"wrap", "--file", "/etc/hostname"},
         "/etc/hostname: not where any known client keeps its MCP servers"},
        {{"wrap", "--all", "--mcpwarden", "/nonexistent/mcpwarden"},
         "--mcpwarden /nonexistent/mcpwarden: No such file or directory"},
        {{"wrap", "--all", "--mcpwarden", "/bin/true"},
         "--mcpwarden /bin/true is not mcpwarden: `/bin/true --version` printed \"true (GNU "},
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
    EXPECT_FALSE(std::filesystem::exists(state() + "/wrapped.json"));
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
    EXPECT_FALSE(std::filesystem::exists(backup_of(bad)));
    size_t wrapped = 0;
    for (const auto& s : declared())
        wrapped += s.wrapped;
    EXPECT_EQ(wrapped, 17u);  // every other user file was still processed

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
    auto wrap = run_cli(
        {"wrap", "--client", "vscode", "--project", project(), "--mcpwarden", linked_mcpwarden()},
        home(), elsewhere());
    EXPECT_EQ(wrap.exit_code, 0) << wrap.err;
    EXPECT_NE(slurp(project() + "/.vscode/mcp.json"), data("vscode.json"));
}

// The incident: `wrap --all` in a git checkout rewrote the committed .mcp.json with this
// machine's path and left a .mcpwarden.bak (API keys) beside it. Now --all edits only the
// user's own files; --project is what brings the project's files in (the control: the same
// files change only with it), with a warning for the one git tracks and none for the one it
// does not; no file appears in the project, and the backups sit 0600 in a 0700 state
// directory until unwrap removes them.
TEST_F(Cli, WrapLeavesProjectFilesAloneUnlessAskedAndWarnsWhenGitTracksThem) {
    std::string q = "'" + project() + "'";
    ASSERT_EQ(std::system(("git -C " + q + " init -q && git -C " + q + " add .mcp.json && git -C " +
                           q + " -c user.name=t -c user.email=t@t commit -qm init")
                              .c_str()),
              0);
    std::string mcp = project() + "/.mcp.json", vscode = project() + "/.vscode/mcp.json";
    auto mcp_before = stamp(mcp), vscode_before = stamp(vscode);
    auto files_before = names_in(project());

    auto all = cli({"wrap", "--all"});
    ASSERT_EQ(all.exit_code, 0) << all.err;
    EXPECT_TRUE(stamp(mcp) == mcp_before);
    EXPECT_TRUE(stamp(vscode) == vscode_before);
    EXPECT_EQ(all.out.find(".mcp.json"), std::string::npos) << all.out;
    EXPECT_NE(slurp(home() + "/.cursor/mcp.json"), data("cursor.json"));
    EXPECT_EQ(all.err.find("warning"), std::string::npos) << all.err;

    auto proj = cli({"wrap", "--all", "--project"});
    ASSERT_EQ(proj.exit_code, 0) << proj.err;
    EXPECT_NE(slurp(mcp), data("claude_code_project.json"));
    EXPECT_NE(slurp(vscode), data("vscode.json"));
    std::string canon = std::filesystem::canonical(project()).string();
    EXPECT_NE(proj.err.find("warning: " + canon + "/.mcp.json is tracked by git (repository " +
                            canon + "): it now holds this machine's path"),
              std::string::npos)
        << proj.err;
    EXPECT_EQ(proj.err.find(".vscode/mcp.json is"), std::string::npos) << proj.err;  // untracked
    EXPECT_EQ(names_in(project()), files_before);  // no backup, no temp file in the repository
    EXPECT_EQ(mode_of(state()), 0700u);
    EXPECT_EQ(mode_of(state() + "/backups"), 0700u);
    EXPECT_EQ(mode_of(backup_of(mcp)), 0600u);
    EXPECT_EQ(slurp(backup_of(mcp)), data("claude_code_project.json"));
    EXPECT_EQ(mode_of(state() + "/wrapped.json"), 0600u);

    auto u = cli({"unwrap", "--all", "--project"});
    ASSERT_EQ(u.exit_code, 0) << u.err;
    for (const auto& i : installed_)
        EXPECT_EQ(slurp(i.path), data(i.fixture)) << i.path;
    EXPECT_TRUE(std::filesystem::is_empty(state() + "/backups"));
    EXPECT_FALSE(std::filesystem::exists(state() + "/wrapped.json"));
}

// --file names one config (here a project's, from anywhere); a hand-written `mcpwarden run`
// entry survives unwrap (reported), and only --unrecorded, the control, strips it.
TEST_F(Cli, FileSelectsOneConfigAndUnwrapKeepsAHandWrappedEntry) {
    std::string mcp = project() + "/.mcp.json";
    std::string hand =
        "{\"mcpServers\": {\"srv\": {\"command\": \"mcpwarden\", \"args\": [\"run\", \"--\", "
        "\"python3\", \"-m\", \"srv\"]}, \"other\": {\"command\": \"node\", \"args\": "
        "[\"s.js\"]}}}\n";
    spit(mcp, hand);
    auto w = run_cli({"wrap", "--file", mcp}, home(), elsewhere());
    ASSERT_EQ(w.exit_code, 0) << w.err;
    EXPECT_NE(w.out.find("  srv: already wrapped\n  other: wrapped\n"), std::string::npos) << w.out;
    EXPECT_EQ(slurp(home() + "/.cursor/mcp.json"), data("cursor.json"));  // nothing else

    auto u = run_cli({"unwrap", "--file", mcp}, home(), elsewhere());
    ASSERT_EQ(u.exit_code, 0) << u.err;
    EXPECT_EQ(slurp(mcp), hand);
    EXPECT_NE(u.out.find("  srv: skipped (wrapped by hand, not by mcpwarden wrap: left alone "
                         "(--unrecorded unwraps it))\n"),
              std::string::npos)
        << u.out;

    auto blind = run_cli({"unwrap", "--file", mcp, "--unrecorded"}, home(), elsewhere());
    ASSERT_EQ(blind.exit_code, 0) << blind.err;
    EXPECT_NE(slurp(mcp).find("\"srv\": {\"command\": \"python3\""), std::string::npos)
        << slurp(mcp);
}

// wrap refuses a --mcpwarden that is not one (UsageErrorsExitTwo); `clients --check` finds a
// wrapped entry whose mcpwarden has gone since (the control: the same check passes while the
// binary is there).
TEST_F(Cli, ClientsCheckFindsWrappedEntriesWhoseMcpwardenIsGone) {
    std::string link = linked_mcpwarden();
    auto w = cli({"wrap", "--client", "cursor", "--mcpwarden", link});
    ASSERT_EQ(w.exit_code, 0) << w.err;
    auto ok = cli({"clients", "--check"});
    EXPECT_EQ(ok.exit_code, 0) << ok.err;
    EXPECT_NE(ok.out.find("check: 2 of 2 wrapped entries point at an executable mcpwarden\n"),
              std::string::npos)
        << ok.out;

    std::filesystem::remove(link);
    auto bad = cli({"clients", "--check"});
    EXPECT_EQ(bad.exit_code, 1);
    EXPECT_NE(bad.err.find("mcpwarden clients: ~/.cursor/mcp.json: brave-search: " + link +
                           ": No such file or directory\n"),
              std::string::npos)
        << bad.err;
    EXPECT_NE(bad.out.find("check: 0 of 2 wrapped entries"), std::string::npos) << bad.out;
    auto j = nlohmann::json::parse(cli({"clients", "--check", "--json"}).out);
    EXPECT_EQ(j["check"]["broken"], 2);
    // Wrapped entries (server_command, server_args), wrapper_problem and check.
    EXPECT_EQ(
        warden::testing::undocumented_keys(j, {warden::testing::schema_doc("clients-json.md")}),
        std::vector<std::string>{});
}

// `"command": "mcpwarden"`, RUN.md's first example, is what a client runs through its PATH:
// `clients --check` resolves the bare name through PATH and says which file it found; the
// control is the same entry with no mcpwarden on PATH, which is still a problem.
TEST_F(Cli, ClientsCheckResolvesABareMcpwardenThroughPath) {
    const std::string bin = std::filesystem::path(linked_mcpwarden()).parent_path().string();
    const std::string cfg = home() + "/.gemini/settings.json";
    std::string gemini = slurp(cfg);
    const size_t at = gemini.find("\"mcpServers\": {");
    ASSERT_NE(at, std::string::npos) << gemini;
    gemini.insert(at + 15,
                  "\n    \"bare\": {\"command\": \"mcpwarden\", \"args\": [\"run\", "
                  "\"--\", \"srv\"]},");
    spit(cfg, gemini);

    auto found =
        run_cli({"clients", "--check"}, home(), project(), {{"PATH", bin + ":/usr/bin:/bin"}});
    EXPECT_EQ(found.exit_code, 0) << found.out << found.err;
    EXPECT_NE(found.out.find("check: ~/.gemini/settings.json: bare: 'mcpwarden' resolves through "
                             "PATH to " +
                             bin + "/mcpwarden"),
              std::string::npos)
        << found.out;
    EXPECT_NE(found.out.find("check: 1 of 1 wrapped entries point at an executable mcpwarden\n"),
              std::string::npos)
        << found.out;
    auto j = nlohmann::json::parse(
        run_cli({"clients", "--check", "--json"}, home(), project(), {{"PATH", bin}}).out);
    EXPECT_EQ(j["check"]["broken"], 0) << j.dump(2);
    EXPECT_EQ(
        warden::testing::undocumented_keys(j, {warden::testing::schema_doc("clients-json.md")}),
        std::vector<std::string>{});

    auto missing = run_cli({"clients", "--check"}, home(), project(), {{"PATH", "/usr/bin:/bin"}});
    EXPECT_EQ(missing.exit_code, 1) << missing.out;
    EXPECT_NE(missing.err.find("mcpwarden clients: ~/.gemini/settings.json: bare: 'mcpwarden' is "
                               "not found in any directory of PATH (/usr/bin:/bin)\n"),
              std::string::npos)
        << missing.err;
}

// uninstall takes back every recorded entry, project files included, wherever it is run
// from; warns about the hand-wrapped entry it leaves; removes backups and record but keeps
// the journal and settings, which only --purge removes.
TEST_F(Cli, UninstallUnwrapsEverythingAndPurgeRemovesJournalAndSettings) {
    ASSERT_EQ(cli({"wrap", "--all", "--project"}).exit_code, 0);
    std::string hand = home() + "/.gemini/settings.json";
    std::string gemini = slurp(hand);
    size_t at = gemini.find("\"mcpServers\": {");
    ASSERT_NE(at, std::string::npos);
    gemini.insert(at + 15,
                  "\n    \"byhand\": {\"command\": \"mcpwarden\", \"args\": [\"run\", "
                  "\"--\", \"srv\"]},");
    spit(hand, gemini);
    spit(state() + "/journal.db", "not really a journal");
    spit(home() + "/.config/mcpwarden/config.toml", "# settings\n");

    auto dry = run_cli({"uninstall", "--dry-run"}, home(), elsewhere());
    ASSERT_EQ(dry.exit_code, 0) << dry.err;
    EXPECT_NE(dry.out.find("-      \"command\": \""), std::string::npos) << dry.out;
    EXPECT_NE(slurp(home() + "/.cursor/mcp.json"), data("cursor.json"));  // unchanged

    auto u = run_cli({"uninstall"}, home(), elsewhere());
    ASSERT_EQ(u.exit_code, 0) << u.err;
    for (const auto& i : installed_) {
        if (i.path == hand) continue;
        EXPECT_EQ(slurp(i.path), data(i.fixture)) << i.path;
    }
    EXPECT_NE(slurp(hand).find("\"byhand\": {\"command\": \"mcpwarden\""), std::string::npos);
    EXPECT_NE(u.err.find("warning: ~/.gemini/settings.json: byhand still runs mcpwarden"),
              std::string::npos)
        << u.err;
    EXPECT_FALSE(std::filesystem::exists(state() + "/backups"));
    EXPECT_FALSE(std::filesystem::exists(state() + "/wrapped.json"));
    EXPECT_TRUE(std::filesystem::exists(state() + "/journal.db"));
    EXPECT_TRUE(std::filesystem::exists(home() + "/.config/mcpwarden/config.toml"));

    auto p = run_cli({"uninstall", "--purge"}, home(), elsewhere());
    ASSERT_EQ(p.exit_code, 0) << p.err;
    EXPECT_NE(p.out.find("removed " + state() + "/journal.db\n"), std::string::npos) << p.out;
    EXPECT_FALSE(std::filesystem::exists(state()));
    EXPECT_FALSE(std::filesystem::exists(home() + "/.config/mcpwarden"));
}

}  // namespace
}  // namespace warden::clients
