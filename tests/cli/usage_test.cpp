// A CLI that explains itself: the words it does not know, named with the command they
// resemble; a server's options given before `--`; a PID that is not a number; the stdout
// guard's failure as an exit code; and no temporary journal left behind by a drill that passed.
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/cli_run.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

bool has(const std::string& text, const std::string& what) {
    return text.find(what) != std::string::npos;
}

TEST(Usage, UnknownWordsAreNamedWithTheCommandTheyResemble) {
    TempDir dir;
    CliRun unknown = run_cli(dir, {"frobnicate"}, 30s);
    EXPECT_EQ(unknown.code, 2);
    EXPECT_TRUE(has(unknown.err, "mcpwarden: unknown command 'frobnicate'\n")) << unknown.err;
    EXPECT_TRUE(has(unknown.err, "commands: demo, run, status, ps,")) << unknown.err;
    EXPECT_FALSE(has(unknown.err, "did you mean")) << unknown.err;

    CliRun typo = run_cli(dir, {"rnu", "--", "x"}, 30s);
    EXPECT_EQ(typo.code, 2);
    EXPECT_TRUE(has(typo.err, "unknown command 'rnu'; did you mean 'mcpwarden run'?")) << typo.err;

    CliRun option = run_cli(dir, {"--bogus"}, 30s);
    EXPECT_EQ(option.code, 2);
    EXPECT_TRUE(has(option.err, "mcpwarden: unknown option '--bogus': the command comes first"))
        << option.err;

    CliRun server_flag = run_cli(dir, {"run", "node", "s.js", "--port", "3"}, 30s);
    EXPECT_EQ(server_flag.code, 2);
    EXPECT_TRUE(has(server_flag.err, "--port")) << server_flag.err;
    EXPECT_TRUE(has(server_flag.err,
                    "the server's command with its arguments after `--`: "
                    "mcpwarden run [OPTIONS] -- CMD [ARGS...]"))
        << server_flag.err;

    CliRun pid = run_cli(dir, {"inspect", "abc"}, 30s);
    EXPECT_EQ(pid.code, 2);
    EXPECT_TRUE(has(pid.err,
                    "mcpwarden: 'abc' is not a PID: a PID is the number the kernel "
                    "gives a running process"))
        << pid.err;
}

// The second word of a command with subcommands: an unknown one is named with the ones it
// could be (CLI11 alone says "A subcommand is required" to all of these); the control is a
// known subcommand, which parses.
TEST(Usage, UnknownSubcommandsAreNamedForEveryCommandThatHasThem) {
    TempDir dir;
    CliRun shw = run_cli(dir, {"config", "shw"}, 30s);
    EXPECT_EQ(shw.code, 2);
    EXPECT_EQ(shw.err,
              "mcpwarden config: unknown subcommand 'shw' (expected show, check; mcpwarden config "
              "--help); did you mean 'mcpwarden config show'?\n");
    CliRun journal = run_cli(dir, {"journal", "foo"}, 30s);
    EXPECT_EQ(journal.code, 2);
    EXPECT_TRUE(has(journal.err,
                    "mcpwarden journal: unknown subcommand 'foo' (expected sessions, activity, "
                    "show, reconcile, prune, export;"))
        << journal.err;
    CliRun audit = run_cli(dir, {"audit", "foo"}, 30s);
    EXPECT_EQ(audit.code, 2);
    EXPECT_TRUE(
        has(audit.err, "mcpwarden audit: unknown subcommand 'foo' (expected verify, anchor;"))
        << audit.err;
    CliRun bench = run_cli(dir, {"bench", "--json"}, 30s);
    EXPECT_EQ(bench.code, 2);
    EXPECT_TRUE(has(bench.err,
                    "mcpwarden bench: unknown option '--json': the subcommand comes "
                    "first"))
        << bench.err;
    CliRun none = run_cli(dir, {"config"}, 30s);
    EXPECT_EQ(none.code, 2);
    EXPECT_TRUE(has(none.err, "mcpwarden config: a subcommand is required (expected show, check;"))
        << none.err;
    EXPECT_FALSE(has(shw.err + journal.err + audit.err + none.err, "A subcommand is required"));

    CliRun check = run_cli(dir, {"config", "check"}, 30s);
    EXPECT_NE(check.code, 2) << check.err;
    CliRun help = run_cli(dir, {"journal", "--help"}, 30s);
    EXPECT_EQ(help.code, 0) << help.err;
}

// `mcpwarden help COMMAND` prints what `mcpwarden COMMAND --help` prints; an unknown word is
// named, and `help` alone is the list of commands.
TEST(Usage, HelpCommandPrintsTheHelpOfACommand) {
    TempDir dir;
    for (std::vector<std::string> topic :
         {std::vector<std::string>{"run"}, {"config", "show"}, {"journal"}}) {
        std::vector<std::string> dashed = topic;
        dashed.push_back("--help");
        topic.insert(topic.begin(), "help");
        CliRun via_help = run_cli(dir, topic, 30s);
        CliRun via_flag = run_cli(dir, dashed, 30s);
        EXPECT_EQ(via_help.code, 0) << via_help.err;
        EXPECT_EQ(via_flag.code, 0) << via_flag.err;
        EXPECT_FALSE(via_help.out.empty());
        EXPECT_EQ(via_help.out, via_flag.out) << topic[1];
    }
    CliRun run_help = run_cli(dir, {"help", "run"}, 30s);
    EXPECT_TRUE(has(run_help.out, "mcpwarden run")) << run_help.out;
    EXPECT_TRUE(has(run_help.out, "--journal-retention")) << run_help.out;

    CliRun all = run_cli(dir, {"help"}, 30s);
    EXPECT_EQ(all.code, 0);
    EXPECT_EQ(all.out, run_cli(dir, {"--help"}, 30s).out);

    CliRun unknown = run_cli(dir, {"help", "frobnicate"}, 30s);
    EXPECT_EQ(unknown.code, 2);
    EXPECT_TRUE(
        has(unknown.err, "mcpwarden help: 'frobnicate' is no command (commands: demo, run,"))
        << unknown.err;
    CliRun sub = run_cli(dir, {"help", "config", "shw"}, 30s);
    EXPECT_EQ(sub.code, 2);
    EXPECT_TRUE(has(sub.err,
                    "mcpwarden help: 'shw' is no command of 'config' (expected: show, "
                    "check)"))
        << sub.err;
}

// `run --help` and the man page say when the journal's retention prunes: when a session
// starts (by its background worker, src/api/dead_sessions.cpp), not at its end.
TEST(Usage, RetentionIsSaidToPruneWhenASessionStarts) {
    TempDir dir;
    CliRun help = run_cli(dir, {"run", "--help"}, 30s);
    EXPECT_TRUE(has(help.out, "older than this when a session starts")) << help.out;
    EXPECT_FALSE(has(help.out, "at session end, e.g. 30d")) << help.out;
    std::ifstream man(std::string(WARDEN_SOURCE_DIR) + "/packaging/man/mcpwarden.1");
    std::stringstream text;
    text << man.rdbuf();
    EXPECT_TRUE(has(text.str(), "older than this when a session starts")) << "mcpwarden.1";
}

// --stdout-guard fail ends the session: `run` must not exit 0 (the server's status after
// EOF). It exits 124 and says why; the control is the same noise with divert.
TEST(Usage, StdoutGuardFailExitsNonZeroAndSaysWhy) {
    for (const char* guard : {"fail", "divert"}) {
        ChildOptions o;
        o.capture_stderr = true;
        o.unset_env = {"MCPWARDEN_SESSION"};
        // Options with values before `--`, and the server's own options after it.
        TestChild c({kCli, "run", "--no-journal", "--eof-grace", "200ms", "--term-grace", "300ms",
                     "--stdout-guard", guard, "--", kFixture, "--shape", "normal"},
                    o);
        ASSERT_TRUE(c.write_line(rpc_initialize(1)));
        ASSERT_TRUE(read_response(c, 1, 20s));
        ASSERT_TRUE(c.write_line(rpc_tools_call(2, "noise")));
        const bool answered = read_response(c, 2, 10s).has_value();
        c.close_stdin();
        auto st = c.wait_exit(20s);
        ASSERT_TRUE(st) << guard;
        const std::string err = c.read_stderr(5s);
        if (std::string(guard) == "fail") {
            EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 124) << describe_status(*st);
            EXPECT_TRUE(has(err,
                            "non-JSON line to stdout, which --stdout-guard=fail does not "
                            "allow: ending the session (exit 124)"))
                << err;
        } else {
            EXPECT_TRUE(answered);
            EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << describe_status(*st);
            EXPECT_TRUE(has(err, "diverted non-JSON stdout line")) << err;
        }
        EXPECT_TRUE(nothing_tagged_left(c.tag())) << guard;
    }
}

// The drill's temporary journal directories in `dir` (its TMPDIR).
size_t drill_journal_dirs(const TempDir& dir) {
    size_t n = 0;
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
        n += e.path().filename().string().rfind("mcpwarden-drill-", 0) == 0;
    return n;
}

TEST(Usage, ADrillThatPassedLeavesNoTemporaryJournalOneThatFailedKeepsIt) {
    TempDir passed;
    CliRun ok = run_cli(passed,
                        {"drill", "--crash-at", "idle", "--eof-grace", "200ms", "--term-grace",
                         "300ms", "--", kFixture},
                        90s);
    EXPECT_EQ(ok.code, 0) << ok.out << ok.err;
    EXPECT_TRUE(has(ok.err, "temporary journal removed")) << ok.err;
    EXPECT_EQ(drill_journal_dirs(passed), 0u) << ok.err;

    // The control: a drill that fails (its server cannot start) keeps the journal for a look.
    TempDir failed;
    CliRun bad = run_cli(failed, {"drill", "--", failed.file("no-such-server")}, 90s);
    EXPECT_EQ(bad.code, 1) << bad.out << bad.err;
    EXPECT_EQ(drill_journal_dirs(failed), 1u) << bad.err;
    EXPECT_TRUE(has(bad.err, "temporary journal kept: " + failed.path() + "/mcpwarden-drill-"))
        << bad.err;
}

}  // namespace
}  // namespace warden::testing
