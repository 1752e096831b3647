// The settings file through the binary: `mcpwarden run` shaped by it (and on record saying
// so), `run` still starting the server on the built-in defaults when it is broken, and
// `mcpwarden config show` / `config check` as a user reads them.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

using nlohmann::json;

// A home of its own: the settings file in $XDG_CONFIG_HOME, the default journal in
// $XDG_STATE_HOME (as run_cli sets it).
struct SettingsHome {
    TempDir dir;
    std::string config = dir.file("cfg/mcpwarden/config.toml");
    std::string default_journal = dir.file("state/mcpwarden/journal.db");

    SettingsHome() {
        ::mkdir(dir.file("cfg").c_str(), 0700);
        ::mkdir(dir.file("cfg/mcpwarden").c_str(), 0700);
    }
    void write(const std::string& text) const { std::ofstream(config) << text; }
    std::vector<std::pair<std::string, std::string>> env() const {
        return {{"XDG_CONFIG_HOME", dir.file("cfg")}};
    }
};

CliRun run_mcpwarden(const SettingsHome& home, std::vector<std::string> args,
                     std::vector<std::pair<std::string, std::string>> env = {}) {
    auto all = home.env();
    all.insert(all.end(), env.begin(), env.end());
    return run_cli(home.dir, std::move(args), 30s, all);
}

// `mcpwarden run -- fixture` as a client: initialize answered (the server is up), then EOF.
// The exit code and stderr.
std::pair<int, std::string> serve_one_initialize(const SettingsHome& home) {
    ChildOptions o;
    o.capture_stderr = true;
    o.env = home.env();
    o.env.emplace_back("XDG_STATE_HOME", home.dir.file("state"));
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    TestChild c({kCli, "run", "--", kFixture}, o);
    if (!c.started()) return {-1, c.error()};
    EXPECT_TRUE(c.write_line(rpc_initialize(1)));
    EXPECT_TRUE(read_response(c, 1, 20s)) << "the server did not answer initialize";
    c.close_stdin();
    auto st = c.wait_exit(20s);
    std::string err = c.read_stderr(5s);
    return {st && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1, err};
}

// The data of every session.start in the journal at `db`, oldest first.
std::vector<json> session_starts(const std::string& db) {
    std::vector<json> out;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind == "session.start") out.push_back(json::parse(r.body)["data"]);
        return true;
    });
    EXPECT_TRUE(st.ok()) << db << ": " << st.error().message;
    return out;
}

TEST(ConfigCmd, RunFollowsTheSettingsFileAndRunsOnBuiltInsWhenItIsBroken) {
    SettingsHome home;
    const std::string journal = home.dir.file("from-settings.db");
    home.write(
        "[run]\n"
        "journal = \"" +
        journal +
        "\"\n"
        "\n"
        "[server.mcpwarden-fixture]\n"
        "eof-grace = \"150ms\"\n");
    auto [good, good_err] = serve_one_initialize(home);
    EXPECT_EQ(good, 0) << good_err;
    auto starts = session_starts(journal);  // the journal the file named
    ASSERT_EQ(starts.size(), 1u);
    EXPECT_EQ(starts[0]["settings"]["files"], json::array({home.config})) << starts[0].dump();
    EXPECT_FALSE(starts[0]["settings"].contains("error"));
    EXPECT_EQ(starts[0]["eof_grace_ms"], 150);  // its [server.NAME] section, by command name

    // One bad value: the server still starts, stderr and session.start say why, and nothing
    // of the file is used — not even its good journal line.
    home.write(
        "[run]\n"
        "journal = \"" +
        journal +
        "\"\n"
        "eof-grace = \"soon\"\n");
    auto [broken, err] = serve_one_initialize(home);
    EXPECT_EQ(broken, 0) << err;
    const std::string where =
        home.config + ":3:13: [run] eof-grace: cannot parse 'soon' as a duration";
    EXPECT_NE(err.find("settings ignored, running on the built-in defaults: " + where),
              std::string::npos)
        << err;
    EXPECT_EQ(session_starts(journal).size(), 1u) << "the broken file's journal line was used";
    auto fallback = session_starts(home.default_journal);
    ASSERT_EQ(fallback.size(), 1u);
    EXPECT_EQ(fallback[0]["eof_grace_ms"], 1000);
    EXPECT_EQ(fallback[0]["settings"]["error"].get<std::string>().rfind(where, 0), 0u)
        << fallback[0].dump();
}

TEST(ConfigCmd, ShowSaysWhereEachValueCameFromAndCheckFindsTheProblem) {
    SettingsHome home;
    home.write(
        "[run]\n"
        "term-grace = \"5s\"\n"
        "[reap]\n"
        "interval = \"10m\"\n");
    CliRun shown = run_mcpwarden(home, {"config", "show", "--json", "--name", "x"},
                                 {{"MCPWARDEN_EOF_GRACE", "300ms"}});
    ASSERT_EQ(shown.code, 0) << shown.err;
    json doc = json::parse(shown.out);
    EXPECT_EQ(doc["schema"], "mcpwarden.config");
    EXPECT_EQ(doc["schema_version"], 1);
    EXPECT_EQ(doc["files"]["user"], home.config);
    EXPECT_EQ(doc["read"], json::array({home.config}));
    EXPECT_EQ(doc["ignored"], false);
    std::map<std::string, json> by_key;
    for (const json& s : doc["settings"])
        by_key[s["section"].get<std::string>() + "." + s["key"].get<std::string>()] = s;
    EXPECT_EQ(by_key["run.term-grace"]["value"], "5s");
    EXPECT_EQ(by_key["run.term-grace"]["origin"], "user");
    EXPECT_EQ(by_key["run.term-grace"]["where"], home.config + ":2");
    EXPECT_EQ(by_key["run.eof-grace"]["origin"], "env");
    EXPECT_EQ(by_key["run.eof-grace"]["where"], "MCPWARDEN_EOF_GRACE");
    EXPECT_EQ(by_key["run.name"]["origin"], "flag");
    EXPECT_EQ(by_key["run.isolate"]["origin"], "built-in");
    EXPECT_EQ(by_key["run.isolate"]["value"], "auto");
    EXPECT_EQ(by_key["reap.interval"]["where"], home.config + ":4");
    EXPECT_EQ(by_key["reap.grace"]["value"], "2s");

    CliRun table = run_mcpwarden(home, {"config", "show"});
    ASSERT_EQ(table.code, 0) << table.err;
    EXPECT_NE(table.out.find("run.term-grace"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find(home.config + ":2"), std::string::npos) << table.out;

    CliRun ok = run_mcpwarden(home, {"config", "check"});
    EXPECT_EQ(ok.code, 0) << ok.err;
    EXPECT_NE(ok.out.find("ok: 1 settings file(s) read"), std::string::npos) << ok.out;
    const std::vector<std::string> reap = {"reap", "--orphans", "--dry-run", "--journal",
                                           home.dir.file("reap.db")};
    CliRun reaped = run_mcpwarden(home, reap);
    EXPECT_EQ(reaped.code, 0) << reaped.err;

    home.write(
        "[run]\n"
        "term-grace = 5s\n");  // not TOML: the value is not quoted
    CliRun bad = run_mcpwarden(home, {"config", "check"});
    EXPECT_EQ(bad.code, 1);
    EXPECT_EQ(bad.err.rfind(home.config + ":2:", 0), 0u) << bad.err;
    CliRun bad_json = run_mcpwarden(home, {"config", "check", "--json"});
    EXPECT_EQ(bad_json.code, 1);
    json check = json::parse(bad_json.out);
    EXPECT_EQ(check["ok"], false);
    ASSERT_EQ(check["problems"].size(), 1u);
    EXPECT_EQ(check["problems"][0]["line"], 2);
    // reap, unlike run, refuses a broken file: a revoke hook must not be skipped.
    CliRun refused = run_mcpwarden(home, reap);
    EXPECT_EQ(refused.code, 2);
    EXPECT_NE(refused.err.find("settings file broken: nothing done"), std::string::npos)
        << refused.err;
    // `config show` still works on a broken file and says the file is ignored.
    CliRun shown_broken = run_mcpwarden(home, {"config", "show", "--json"});
    ASSERT_EQ(shown_broken.code, 0) << shown_broken.err;
    EXPECT_EQ(json::parse(shown_broken.out)["ignored"], true);
}

}  // namespace
}  // namespace warden::testing
