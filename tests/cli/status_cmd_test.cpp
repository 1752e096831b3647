// `mcpwarden status` with real sessions: two `mcpwarden run` started by this test (the
// test is their client), one with a call in flight; the table, --json, and --watch on a
// pseudo-terminal (in place) and on a pipe (frames one after another).
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

using nlohmann::json;

size_t occurrences(const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1))
        ++n;
    return n;
}

// `mcpwarden ARGS` with its stdout on a new pseudo-terminal; what it wrote there, until it
// exits (bounded by `timeout`; it is killed after that).
std::string on_a_terminal(std::vector<std::string> args, Millis timeout) {
    int master = -1, slave = -1;
    winsize ws{};
    ws.ws_col = 200;
    ws.ws_row = 50;
    if (::openpty(&master, &slave, nullptr, nullptr, &ws) != 0) return "openpty failed";
    args.insert(args.begin(), kCli);
    std::vector<char*> argv;
    for (std::string& a : args)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(slave, STDOUT_FILENO);
        ::close(master);
        ::close(slave);
        ::execv(kCli, argv.data());
        ::_exit(127);
    }
    ::close(slave);
    std::string out;
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (pid > 0 && std::chrono::steady_clock::now() < deadline) {
        pollfd p{master, POLLIN, 0};
        if (::poll(&p, 1, 100) <= 0) continue;
        char buf[4096];
        ssize_t n = ::read(master, buf, sizeof buf);
        if (n <= 0) break;  // EIO: the child closed its side (it exited)
        out.append(buf, static_cast<size_t>(n));
    }
    ::close(master);
    if (pid > 0) {
        int st = 0;
        if (::waitpid(pid, &st, WNOHANG) == 0) {
            ::kill(pid, SIGKILL);  // our own child, not yet reaped: the pid is still ours
            ::waitpid(pid, &st, 0);
        }
    }
    return out;
}

json status_of(const TempDir& dir, const std::string& db) {
    CliRun r = run_cli(dir, {"status", "--json", "--journal", db}, 30s);
    EXPECT_EQ(r.code, 0) << r.err;
    json j = json::parse(r.out, nullptr, false);
    return j.is_discarded() ? json::object() : j;
}

const json* session_named(const json& status, const std::string& name) {
    auto sessions = status.find("sessions");
    if (sessions == status.end() || !sessions->is_array()) return nullptr;
    for (const json& s : *sessions)
        if (s.value("name", "") == name) return &s;
    return nullptr;
}

TEST(StatusCmd, ShowsTheSessionsRunningNowAndRefreshesInPlaceOnATerminal) {
    TempDir dir;
    const std::string db = dir.file("journal.db");
    ChildOptions o;
    o.env = {{"XDG_CONFIG_HOME", dir.path()}};  // no settings file of the runner's
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    auto start = [&](const std::string& name) {
        return std::make_unique<TestChild>(
            std::vector<std::string>{kCli, "run", "--journal", db, "--name", name, "--eof-grace",
                                     "200ms", "--term-grace", "300ms", "--", kFixture},
            o);
    };
    auto alpha = start("alpha");
    auto beta = start("beta");
    for (TestChild* c : {alpha.get(), beta.get()}) {
        ASSERT_TRUE(c->write_line(rpc_initialize(1)));
        ASSERT_TRUE(read_response(*c, 1, 20s));
    }
    ASSERT_TRUE(alpha->write_line(rpc_tools_call(2, "echo", {{"text", "hi"}})));
    ASSERT_TRUE(read_response(*alpha, 2, 20s));
    ASSERT_TRUE(alpha->write_line(rpc_tools_call(3, "sleep", {{"seconds", 60}})));

    json status;
    ASSERT_TRUE(wait_until(
        [&] {
            status = status_of(dir, db);
            const json* a = session_named(status, "alpha");
            return a && (*a)["in_flight"] == 1 && session_named(status, "beta");
        },
        30s, 100ms))
        << status.dump(2);
    EXPECT_EQ(status["schema"], "mcpwarden.status");
    EXPECT_EQ(status["schema_version"], 1);
    const json& a = *session_named(status, "alpha");
    EXPECT_EQ(a["state"], "running");
    EXPECT_EQ(a["relay"]["pid"], alpha->pid());
    EXPECT_EQ(a["client"]["pid"], ::getpid());  // this test is the client
    EXPECT_EQ(a["calls"], 3);                   // initialize, echo, sleep
    EXPECT_EQ(a["last_call"], "tools/call sleep");
    EXPECT_TRUE(a["last_call_age_seconds"].is_number());
    EXPECT_GE(a["processes"].get<int>(), 1);
    EXPECT_GT(a["rss_kb"].get<uint64_t>(), 0u);
    EXPECT_FALSE(a["layers"].empty()) << a.dump();
    pid_t server = a["server"]["pid"].get<pid_t>();
    EXPECT_TRUE(is_same_live_process(server, a["server"]["starttime"].get<uint64_t>()));
    EXPECT_EQ(a["server_argv"][0], kFixture);
    EXPECT_EQ((*session_named(status, "beta"))["in_flight"], 0);

    CliRun table = run_cli(dir, {"status", "--journal", db}, 30s);
    ASSERT_EQ(table.code, 0) << table.err;
    EXPECT_NE(table.out.find("IN FLIGHT"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("tools/call sleep"), std::string::npos) << table.out;
    EXPECT_NE(table.out.find("beta"), std::string::npos) << table.out;

    // --watch on a terminal: each frame starts at the top of a cleared screen.
    std::string tty = on_a_terminal(
        {"status", "--journal", db, "--watch", "--interval", "100ms", "--count", "2"}, 30s);
    EXPECT_EQ(occurrences(tty, "\x1b[H\x1b[2J"), 2u) << tty;
    EXPECT_EQ(occurrences(tty, "alpha"), 2u) << tty;
    // The control: on a pipe the same frames follow each other, without escape codes.
    CliRun piped = run_cli(
        dir, {"status", "--journal", db, "--watch", "--interval", "100ms", "--count", "2"}, 30s);
    EXPECT_EQ(piped.code, 0) << piped.err;
    EXPECT_EQ(occurrences(piped.out, "\x1b["), 0u) << piped.out;
    EXPECT_EQ(occurrences(piped.out, "IN FLIGHT"), 2u) << piped.out;

    // A session that ended is history, not status.
    beta->close_stdin();
    ASSERT_TRUE(beta->wait_exit(20s));
    status = status_of(dir, db);
    EXPECT_EQ(status["sessions"].size(), 1u) << status.dump(2);
    EXPECT_EQ(session_named(status, "beta"), nullptr);
    alpha->close_stdin();
    ASSERT_TRUE(alpha->wait_exit(20s));
    CliRun none = run_cli(dir, {"status", "--journal", db}, 30s);
    EXPECT_EQ(none.out, "No sessions running.\n");
}

}  // namespace
}  // namespace warden::testing
