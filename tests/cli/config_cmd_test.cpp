// The settings file through the binary: `mcpwarden run` shaped by it (and on record saying
// so), `run` refusing to start when it is broken or when a sandbox option has no profile,
// and `mcpwarden config show` / `config check` as a user reads them.
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <filesystem>
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

TEST(ConfigCmd, RunFollowsTheSettingsFile) {
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
}

// A settings file that asks for a sandbox and has one typo: `run` does not start the server
// unconfined on the built-in defaults, it refuses (exit 2) and says where the problem is.
// The control is the same file with the typo fixed: the server starts, confined, on record.
TEST(ConfigCmd, RunRefusesABrokenSettingsFileInsteadOfRunningUnprotected) {
    SettingsHome home;
    const std::string sandboxed =
        "[run]\n"
        "sandbox = \"strict\"\n"
        "env-allow = [\"ASAN_OPTIONS\", \"UBSAN_OPTIONS\", \"LSAN_OPTIONS\"]\n";
    home.write(sandboxed + "term-grace = \"soon\"\n");
    const std::vector<std::string> run = {"run", "--", kFixture};
    CliRun broken = run_mcpwarden(home, run);
    EXPECT_EQ(broken.code, 2) << broken.err;
    EXPECT_NE(broken.err.find("mcpwarden run: " + home.config +
                              ":4:14: [run] term-grace: cannot parse 'soon' as a duration"),
              std::string::npos)
        << broken.err;
    EXPECT_NE(broken.err.find("mcpwarden run: not starting the server"), std::string::npos)
        << broken.err;
    EXPECT_FALSE(std::filesystem::exists(home.default_journal))
        << "a session was recorded: the server was started";
    EXPECT_TRUE(broken.left_after.empty()) << broken.left_after.size() << " processes left";

    // TOML that does not parse at all: the same.
    home.write(sandboxed + "[run\n");
    CliRun unparsed = run_mcpwarden(home, run);
    EXPECT_EQ(unparsed.code, 2) << unparsed.err;
    EXPECT_NE(unparsed.err.find("mcpwarden run: " + home.config + ":4:"), std::string::npos)
        << unparsed.err;
    EXPECT_FALSE(std::filesystem::exists(home.default_journal));

    home.write(sandboxed + "term-grace = \"500ms\"\n");
    CliRun fixed = run_mcpwarden(home, run);
    EXPECT_EQ(fixed.code, 0) << fixed.err;
    auto starts = session_starts(home.default_journal);
    ASSERT_EQ(starts.size(), 1u) << fixed.err;
    EXPECT_EQ(starts[0]["sandbox"]["profile"], "strict") << starts[0].dump();
    EXPECT_EQ(starts[0]["term_grace_ms"], 500) << starts[0].dump();
}

// --allow-*, --net, --env-allow and --require-sandbox without a sandbox profile confine
// nothing: a usage error that says where the option came from, never a silent no-op. The
// control: the same options with --sandbox parse and pass this check (`config show`).
TEST(ConfigCmd, SandboxOptionsWithoutAProfileAreAUsageError) {
    SettingsHome home;
    struct Case {
        std::vector<std::string> flags;
        std::vector<std::pair<std::string, std::string>> env;
        std::string says;
    };
    const std::vector<Case> cases = {
        {{"--require-sandbox"}, {}, "--require-sandbox needs a sandbox profile, and none is set"},
        {{"--allow-read", home.dir.path()}, {}, "--allow-read needs a sandbox profile"},
        {{"--allow-write", home.dir.path()}, {}, "--allow-write needs a sandbox profile"},
        {{"--net", "none"}, {}, "--net needs a sandbox profile"},
        {{"--allow-connect", "443"}, {}, "--allow-connect needs a sandbox profile"},
        {{"--env-allow", "TOKEN"}, {}, "--env-allow needs a sandbox profile"},
        {{"--sandbox", "off", "--require-sandbox"},
         {},
         "--require-sandbox needs a sandbox profile, and the sandbox is off (--sandbox)"},
        {{}, {{"MCPWARDEN_ENV_ALLOW", "TOKEN"}}, "MCPWARDEN_ENV_ALLOW needs a sandbox profile"},
    };
    for (const Case& c : cases) {
        std::vector<std::string> args = {"run"};
        args.insert(args.end(), c.flags.begin(), c.flags.end());
        args.insert(args.end(), {"--", kFixture});
        CliRun r = run_mcpwarden(home, args, c.env);
        EXPECT_EQ(r.code, 2) << ::testing::PrintToString(args) << r.err;
        EXPECT_EQ(r.err.rfind("mcpwarden run: " + c.says, 0), 0u) << r.err;
        EXPECT_FALSE(std::filesystem::exists(home.default_journal)) << r.err;

        if (c.flags.size() > 1 && c.flags[0] == "--sandbox") continue;
        // The control: the same with a profile is not refused so: a session starts (on
        // record; the server's own exit is its business), or, for --require-sandbox on a
        // kernel that cannot enforce all of it, run refuses with 125.
        args.insert(args.begin() + 1, {"--sandbox", "strict"});
        CliRun with = run_mcpwarden(home, args, c.env);
        EXPECT_EQ(with.err.find("needs a sandbox profile"), std::string::npos) << with.err;
        EXPECT_TRUE(with.code == 125 || (std::filesystem::exists(home.default_journal) &&
                                         session_starts(home.default_journal).size() == 1))
            << ::testing::PrintToString(args) << " exit " << with.code << ": " << with.err;
        std::filesystem::remove_all(home.dir.file("state"));
    }
    // The sandbox turned off on purpose leaves the lists unused, as asked: not refused.
    CliRun off =
        run_mcpwarden(home, {"run", "--sandbox", "off", "--env-allow", "TOKEN", "--", kFixture});
    EXPECT_EQ(off.err.find("needs a sandbox profile"), std::string::npos) << off.err;
    EXPECT_EQ(session_starts(home.default_journal).size(), 1u) << off.err;
    std::filesystem::remove_all(home.dir.file("state"));

    // From a settings file: the file and line named.
    home.write("[server.mcpwarden-fixture]\nallow-connect = [\"443\"]\n");
    CliRun from_file = run_mcpwarden(home, {"run", "--", kFixture});
    EXPECT_EQ(from_file.code, 2) << from_file.err;
    EXPECT_EQ(from_file.err.rfind("mcpwarden run: " + home.config +
                                      ":2: allow-connect needs a sandbox profile, and none is set",
                                  0),
              0u)
        << from_file.err;
    // The control: with a profile beside it, `config show` (the same merge) accepts it.
    home.write("[server.mcpwarden-fixture]\nsandbox = \"strict\"\nallow-connect = [\"443\"]\n");
    CliRun shown = run_mcpwarden(home, {"config", "show", "--", kFixture});
    EXPECT_EQ(shown.code, 0) << shown.err;
    EXPECT_NE(shown.out.find("run.allow-connect"), std::string::npos) << shown.out;
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
    // reap, as run, refuses a broken file: a revoke hook must not be skipped.
    CliRun refused = run_mcpwarden(home, reap);
    EXPECT_EQ(refused.code, 2);
    EXPECT_NE(refused.err.find("settings file broken: nothing done"), std::string::npos)
        << refused.err;
    // `config show` still works on a broken file and says `run` refuses it.
    CliRun shown_broken = run_mcpwarden(home, {"config", "show", "--json"});
    ASSERT_EQ(shown_broken.code, 0) << shown_broken.err;
    EXPECT_EQ(json::parse(shown_broken.out)["ignored"], true);
}

}  // namespace
}  // namespace warden::testing
