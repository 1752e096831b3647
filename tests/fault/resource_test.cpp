// Resource faults through the built binary: `mcpwarden run` under a low fd limit, with an
// unusable journal directory, and in front of a server that floods stderr. Each case ends
// in a clear error or the documented policy (docs/RUN.md), and nothing of the tree is left
// running (the test tag every process inherits is the oracle).
#include <sys/stat.h>

#include <cstdio>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"

namespace warden::testing {
namespace {

const std::vector<std::string> kFast = {"--eof-grace", "200ms", "--term-grace", "300ms"};

std::vector<std::string> run_argv(std::vector<std::string> prefix, std::vector<std::string> flags,
                                  const std::vector<std::string>& cmd) {
    prefix.push_back(kCli);
    prefix.push_back("run");
    prefix.insert(prefix.end(), kFast.begin(), kFast.end());
    prefix.insert(prefix.end(), flags.begin(), flags.end());
    prefix.push_back("--");
    prefix.insert(prefix.end(), cmd.begin(), cmd.end());
    return prefix;
}

// Exits, and leaves no process carrying its tag.
void expect_gone(TestChild& c) {
    auto st = c.wait_exit(20s);
    ASSERT_TRUE(st) << "mcpwarden run did not exit";
    EXPECT_TRUE(wait_until([&] { return live_tagged(c.tag()).empty(); }, 10s))
        << live_tagged(c.tag()).size() << " tagged processes left";
}

TEST(Resource, LowFdLimitStillRelays) {
    TempDir dir;
    TestChild c(run_argv({"/usr/bin/prlimit", "--nofile=16", "--"}, {"--no-journal"},
                         fixture_argv({}, dir.file("port"))));
    ASSERT_TRUE(c.started()) << c.error();
    ASSERT_TRUE(c.write_line(rpc_initialize(1)));
    auto reply = c.read_line(10s);
    ASSERT_TRUE(reply);
    EXPECT_NE(reply->find("\"result\""), std::string::npos) << *reply;
    c.close_stdin();
    expect_gone(c);
}

TEST(Resource, TooFewFdsIsAClearError) {
    // At 6 descriptors the ASan runtime of the binary under test can run out first (in CI
    // runs, not alone) and dies with its own message; the release suite checks ours.
    if (kSanitized) GTEST_SKIP() << "the sanitizer runtime needs descriptors of its own";
    TempDir dir;
    TestChild c(run_argv({"/usr/bin/prlimit", "--nofile=6", "--"}, {"--no-journal"},
                         fixture_argv({}, dir.file("port"))),
                {.capture_stderr = true});
    ASSERT_TRUE(c.started()) << c.error();
    c.close_stdin();
    auto st = c.wait_exit(20s);
    ASSERT_TRUE(st);
    EXPECT_NE(describe_status(*st), "exited 0");
    EXPECT_NE(c.read_stderr(5s).find("Too many open files"), std::string::npos);
    EXPECT_TRUE(nothing_tagged_left(c.tag()));
    // LowFdLimitStillRelays is the control: the same command at 16 fds works.
}

TEST(Resource, UnusableJournalDirectoryDeniesCalls) {
    TempDir dir;
    std::string not_a_dir = dir.file("state");
    {
        std::FILE* f = std::fopen(not_a_dir.c_str(), "w");
        ASSERT_TRUE(f);
        std::fclose(f);
    }
    TestChild c(
        run_argv({}, {"--journal", not_a_dir + "/journal.db", "--on-journal-failure", "deny"},
                 fixture_argv({}, dir.file("port"))),
        {.capture_stderr = true});
    ASSERT_TRUE(c.started()) << c.error();
    ASSERT_TRUE(c.write_line(rpc_initialize(1)));
    ASSERT_TRUE(c.write_line(rpc_tools_call(2, "echo", {{"text", "hi"}})));
    for (int id = 1; id <= 2; ++id) {
        auto reply = c.read_line(10s);
        ASSERT_TRUE(reply);
        EXPECT_NE(reply->find("\"id\":" + std::to_string(id)), std::string::npos) << *reply;
        EXPECT_NE(reply->find("-32000"), std::string::npos) << *reply;
        EXPECT_NE(reply->find(not_a_dir), std::string::npos)
            << "error does not name the path: " << *reply;
    }
    c.close_stdin();
    expect_gone(c);
    EXPECT_NE(c.read_stderr(5s).find(not_a_dir), std::string::npos);
}

TEST(Resource, UnwritableStateDirectoryForNobody) {
    TempDir dir;
    std::string locked = dir.file("locked");
    ASSERT_EQ(::mkdir(locked.c_str(), 0), 0);
    // A home nobody can look into would be a settings file that cannot be read, and `run`
    // refuses to start on one (docs/SETTINGS.md, "A broken file"): nobody's home has none.
    ChildOptions o{.capture_stderr = true};
    o.env.push_back({"HOME", "/nonexistent"});
    o.unset_env.push_back("XDG_CONFIG_HOME");
    TestChild c(
        run_argv({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"},
                 {"--journal", locked + "/journal.db", "--on-journal-failure", "deny"}, {kFixture}),
        o);
    ASSERT_TRUE(c.started()) << c.error();
    ASSERT_TRUE(c.write_line(rpc_tools_call(1, "echo", {{"text", "hi"}})));
    auto reply = c.read_line(10s);
    ASSERT_TRUE(reply);
    EXPECT_NE(reply->find("-32000"), std::string::npos) << *reply;
    EXPECT_NE(reply->find(locked), std::string::npos) << *reply;
    c.close_stdin();
    expect_gone(c);
}

// A full disk, as the journal sees it: RLIMIT_FSIZE makes SQLite's writes fail (EFBIG).
// SIGXFSZ is ignored here (as a shell's `trap '' XFSZ` does) so the write error, not the
// signal, is what mcpwarden meets; under --on-journal-failure deny each request gets a
// JSON-RPC error with its id and code -32000 naming the journal, and nothing is forwarded.
// (The default, warn, serves them: tests/journal/availability_test.cpp.)
std::vector<std::string> under_fsize_limit(const std::vector<std::string>& argv) {
    std::string cmd = "trap '' XFSZ; exec /usr/bin/prlimit --fsize=4096 --";
    for (const auto& a : argv)
        cmd += " '" + a + "'";
    return {"/bin/sh", "-c", cmd};
}

TEST(Resource, JournalWriteFailureDeniesCalls) {
    TempDir dir;
    std::string db = dir.file("journal.db");
    auto argv = run_argv({}, {"--journal", db, "--on-journal-failure", "deny"},
                         fixture_argv({}, dir.file("port")));
    TestChild c(under_fsize_limit(argv), {.capture_stderr = true});
    ASSERT_TRUE(c.started()) << c.error();
    ASSERT_TRUE(c.write_line(rpc_initialize(1)));
    ASSERT_TRUE(c.write_line(rpc_tools_call(2, "echo", {{"text", "hi"}})));
    for (int id = 1; id <= 2; ++id) {
        auto reply = c.read_line(10s);
        ASSERT_TRUE(reply);
        EXPECT_NE(reply->find("\"id\":" + std::to_string(id)), std::string::npos) << *reply;
        EXPECT_NE(reply->find("-32000"), std::string::npos) << *reply;
        EXPECT_NE(reply->find(db), std::string::npos) << *reply;
        EXPECT_EQ(reply->find("\"result\""), std::string::npos) << "forwarded: " << *reply;
    }
    c.close_stdin();
    expect_gone(c);
}

// SIGXFSZ at its default (prlimit leaves it so): before the shim ignored it, the first
// journal write past the limit killed `mcpwarden run` itself (signal 25) and a fixture
// process was left running under PID 1. Now the write fails as EFBIG, the journal-failure
// policy applies, and nothing may survive the session.
TEST(Resource, FileSizeSignalLeavesNothingRunning) {
    TempDir dir;
    auto argv = run_argv({"/usr/bin/prlimit", "--fsize=4096", "--"},
                         {"--journal", dir.file("journal.db")}, fixture_argv({}, dir.file("port")));
    TestChild c(argv, {.capture_stderr = true});
    ASSERT_TRUE(c.started()) << c.error();
    ASSERT_TRUE(c.write_line(rpc_initialize(1)));
    (void)c.read_line(10s);
    c.close_stdin();
    expect_gone(c);
}

TEST(Resource, StderrFloodIsRelayedWhole) {
    constexpr int kLines = 300000;
    TestChild c(run_argv({}, {"--no-journal"},
                         {"/bin/sh", "-c",
                          "yes floodfloodflood | head -n " + std::to_string(kLines) +
                              " >&2; echo flood-end >&2"}),
                {.capture_stderr = true});
    ASSERT_TRUE(c.started()) << c.error();
    // Stdin stays open: the session lasts until the server exits on its own (closing it
    // would end the session after --eof-grace, mid-flood, by design).
    std::string err = c.read_stderr(60s);
    c.close_stdin();
    expect_gone(c);
    size_t floods = 0;
    for (size_t at = err.find("floodfloodflood\n"); at != std::string::npos;
         at = err.find("floodfloodflood\n", at + 1))
        ++floods;
    EXPECT_EQ(floods, size_t{kLines});
    EXPECT_NE(err.find("flood-end"), std::string::npos);
}

}  // namespace
}  // namespace warden::testing
