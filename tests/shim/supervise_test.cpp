// `mcpwarden run` as a supervisor (docs/LOGS.md): the server's stderr kept in its log, a crash
// explained to the client and recovered by --restart on-failure, a crash loop held back by the
// start limit. The built binary between this test (the client) and a Python server that dies
// with a traceback on request (tests/shim/crashing_server.py).
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"
#include "shim/server_log.hpp"

namespace warden::testing {
namespace {

const std::string kServer = std::string(kSourceDir) + "/tests/shim/crashing_server.py";

struct Supervised {
    TempDir dir;
    std::string db = dir.file("journal.db");
    std::unique_ptr<TestChild> c;

    ~Supervised() {
        if (!c || c->exited()) return;
        c->close_stdin();
        EXPECT_TRUE(c->wait_exit(10s)) << "the session did not end on stdin EOF";
    }
    // The log directory of this server identity.
    std::string log_dir() const {
        char cwd[4096];
        return shim::logs_root(db) + "/" +
               shim::log_key("crashy", {"python3", kServer}, ::getcwd(cwd, sizeof cwd));
    }
    std::string log_text() const {
        std::ifstream in(log_dir() + "/stderr.log");
        std::stringstream ss;
        ss << in.rdbuf();
        return ss.str();
    }
};

// `capture_stderr`: the test reads the session's stderr (else it goes to the test's own): a
// test that captures it and floods must read it, as a client does.
// `server_args`: after the server's script (crashing_server.py's --hold-while).
std::unique_ptr<Supervised> supervise(std::vector<std::string> flags, std::string fault = "",
                                      bool capture_stderr = true,
                                      std::vector<std::string> server_args = {}) {
    auto s = std::make_unique<Supervised>();
    std::vector<std::string> argv{kCli,    "run",          "--name", "crashy",    "--eof-grace",
                                  "200ms", "--term-grace", "300ms",  "--journal", s->db};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.insert(argv.end(), {"--", "python3", kServer});
    argv.insert(argv.end(), server_args.begin(), server_args.end());
    ChildOptions co;
    co.capture_stderr = capture_stderr;
    if (!fault.empty()) co.env.push_back({"MCPWARDEN_FAULT", fault});
    s->c = std::make_unique<TestChild>(argv, co);
    return s;
}

void handshake(TestChild& c) {
    ASSERT_TRUE(c.write_line(rpc_initialize(1)));
    ASSERT_TRUE(read_response(c, 1, 10s));
    ASSERT_TRUE(c.write_line(rpc_initialized()));
}

std::string call(TestChild& c, int id, const std::string& tool) {
    if (!c.write_line(rpc_tools_call(id, tool))) return "<not sent>";
    auto r = read_response(c, id, 15s);
    if (!r) return "<no answer>";
    if (r->contains("error")) return "error: " + (*r)["error"].value("message", "");
    return result_text(*r);
}

// `mcpwarden status` for the session's journal: its text, or (json) its only session.
std::string status_text(const Supervised& s) {
    return run_cli(s.dir, {"status", "--journal", s.db}, 30s).out;
}
nlohmann::json status_of(const Supervised& s) {
    CliRun r = run_cli(s.dir, {"status", "--json", "--journal", s.db}, 30s);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    if (!j.is_object() || !j["sessions"].is_array() || j["sessions"].size() != 1)
        return nlohmann::json{{"unexpected", r.out + r.err}};
    return j["sessions"][0];
}

std::vector<nlohmann::json> records_of(const std::string& db, const std::string& kind) {
    std::vector<nlohmann::json> out;
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind == kind) {
            auto body = nlohmann::json::parse(r.body, nullptr, false);
            out.push_back(body.is_object() ? body["data"] : nlohmann::json());
        }
        return true;
    });
    EXPECT_TRUE(st.ok()) << st.error().message;
    return out;
}

// The traceback's last line reaches the client in the error answering the call the server
// died in; the next call is answered by a new server (another pid), the handshake replayed to
// it; the journal has the crash and the restart with its cause and cold start; `logs` shows
// both runs, and the log file is the user's alone.
TEST(Supervise, ACrashMidCallIsExplainedAndTheNextCallIsServedByANewServer) {
    auto s = supervise({"--restart", "on-failure"});
    TestChild& c = *s->c;
    handshake(c);
    const std::string first = call(c, 2, "pid");
    // `logs -f`, started before the crash, follows into the next server's lines.
    ChildOptions lo;
    lo.env = {{"HOME", s->dir.path()}, {"XDG_STATE_HOME", s->dir.file("state")}};
    TestChild follow({kCli, "logs", "crashy", "-f", "--journal", s->db}, lo);
    ASSERT_TRUE(follow.read_line_containing("crashing_server started, pid " + first, 10s));
    const std::string crash = call(c, 3, "crash");
    EXPECT_NE(crash.find("error: mcpwarden: the server exited with status 1"), std::string::npos)
        << crash;
    EXPECT_NE(crash.find("ValueError: OAuth keys file not found: /nonexistent/gcp-oauth.keys.json"),
              std::string::npos)
        << crash;
    const std::string second = call(c, 4, "pid");
    EXPECT_NE(second, first);
    EXPECT_EQ(second.find_first_not_of("0123456789"), std::string::npos) << second;
    EXPECT_TRUE(follow.read_line_containing("crashing_server started, pid " + second, 10s));
    follow.signal(SIGTERM);
    EXPECT_TRUE(follow.wait_exit(5s));

    // Posted (committed off the relay's path): on record soon after the answers.
    EXPECT_TRUE(wait_until([&] { return records_of(s->db, "session.restart").size() == 1; }, 10s));
    auto crashes = records_of(s->db, "session.crash");
    ASSERT_EQ(crashes.size(), 1u);
    EXPECT_EQ(crashes[0]["cause"], "exit");
    EXPECT_EQ(crashes[0]["restart"], "on-failure");
    EXPECT_EQ(crashes[0]["answered"].dump(), R"([{"n":3}])");  // a typed id (docs/JOURNAL.md)
    auto restarts = records_of(s->db, "session.restart");
    ASSERT_EQ(restarts.size(), 1u);
    EXPECT_EQ(restarts[0]["cause"], "exit");
    EXPECT_EQ(restarts[0]["evidence"]["exit_status"], 1);
    EXPECT_GT(restarts[0]["cold_start_us"].get<int64_t>(), 0);

    c.close_stdin();
    ASSERT_TRUE(c.wait_exit(10s));
    CliRun logs = run_cli(s->dir, {"logs", "crashy", "--journal", s->db});
    EXPECT_EQ(logs.code, 0) << logs.err;
    EXPECT_NE(logs.out.find("crashing_server started, pid " + first), std::string::npos)
        << logs.out;
    EXPECT_NE(logs.out.find("crashing_server started, pid " + second), std::string::npos)
        << logs.out;
    EXPECT_NE(logs.out.find("ValueError: OAuth keys file not found"), std::string::npos);
    EXPECT_NE(logs.out.find("[mcpwarden] restarted (pid " + second + ")"), std::string::npos);
    struct stat st {};
    ASSERT_EQ(::stat((s->log_dir() + "/stderr.log").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
}

// Negative control: without the guard the call the server died in is never answered: the
// client sees its stdout close.
TEST(Supervise, WithoutTheGuardTheCallTheServerDiedInIsNeverAnswered) {
    auto s = supervise({}, "crash_unexplained");
    TestChild& c = *s->c;
    handshake(c);
    EXPECT_EQ(call(c, 2, "crash"), "<no answer>");
}

// --restart no (the default): the call is still answered with why, and the session ends with
// the server's status.
TEST(Supervise, WithoutRestartTheCrashIsExplainedAndTheSessionEnds) {
    auto s = supervise({});
    TestChild& c = *s->c;
    handshake(c);
    const std::string crash = call(c, 2, "crash");
    EXPECT_NE(crash.find("ValueError: OAuth keys file not found"), std::string::npos) << crash;
    auto st = c.wait_exit(10s);
    ASSERT_TRUE(st);
    EXPECT_TRUE(WIFEXITED(*st) && WEXITSTATUS(*st) == 1);
    auto crashes = records_of(s->db, "session.crash");
    ASSERT_EQ(crashes.size(), 1u);
    EXPECT_EQ(crashes[0]["restart"], "no");
}

// A death by signal is named as one, with the line the server wrote before it; restarted.
TEST(Supervise, ADeathBySignalIsNamedAndRestarted) {
    auto s = supervise({"--restart", "on-failure"});
    TestChild& c = *s->c;
    handshake(c);
    const std::string killed = call(c, 2, "kill");
    EXPECT_EQ(killed.rfind("error: mcpwarden: the server was killed by signal 9 (SIGKILL); its "
                           "last stderr lines: ",
                           0),
              0u)
        << killed;
    EXPECT_NE(killed.find("| about to be killed"), std::string::npos) << killed;
    const std::string pid = call(c, 3, "pid");
    EXPECT_EQ(pid.find_first_not_of("0123456789"), std::string::npos) << pid;
    // session.restart is posted (committed off the relay's path): on record soon after.
    std::vector<nlohmann::json> restarts;
    EXPECT_TRUE(wait_until(
        [&] { return (restarts = records_of(s->db, "session.restart")).size() == 1; }, 10s));
    ASSERT_EQ(restarts.size(), 1u);
    EXPECT_EQ(restarts[0]["cause"], "signal");
    EXPECT_EQ(restarts[0]["evidence"]["signal"], 9);
}

// Two starts allowed in a minute: the third crash is not followed by a start, and the next
// call is answered with the limit and how to get past it; the session stays up.
TEST(Supervise, ACrashLoopStopsAtTheStartLimitAndSaysSo) {
    auto s =
        supervise({"--restart", "on-failure", "--restart-burst", "2", "--restart-interval", "60s"});
    TestChild& c = *s->c;
    handshake(c);
    for (int i = 0; i < 3; ++i)
        EXPECT_NE(call(c, 10 + i, "crash").find("ValueError"), std::string::npos) << i;
    const std::string held = call(c, 20, "pid");
    EXPECT_NE(held.find("the server is not restarted: it failed 2 times within 60000 ms (the start "
                        "limit"),
              std::string::npos)
        << held;
    EXPECT_NE(held.find("restart the MCP server in the client"), std::string::npos) << held;
    EXPECT_FALSE(c.exited());
    EXPECT_TRUE(wait_until([&] { return records_of(s->db, "session.restart").size() == 3; }, 10s));
    auto starts = records_of(s->db, "session.start");
    ASSERT_EQ(starts.size(), 1u);
    EXPECT_EQ(starts[0]["restart"], (nlohmann::json{{"burst", 2}, {"interval_ms", 60000}}));
    auto restarts = records_of(s->db, "session.restart");
    ASSERT_EQ(restarts.size(), 3u);
    EXPECT_FALSE(restarts[0].contains("refused"));
    EXPECT_FALSE(restarts[1].contains("refused"));
    EXPECT_EQ(restarts[2]["refused"], "start limit");
    // The second start came after the backoff, on record for `status`.
    auto backoffs = records_of(s->db, "session.backoff");
    ASSERT_EQ(backoffs.size(), 1u);
    EXPECT_EQ(backoffs[0]["starts"], 2);
    EXPECT_EQ(backoffs[0]["backoff_ms"], 100);
    // `status` says the server is held, until when, and how to reset the limit.
    const nlohmann::json st = status_of(*s);
    EXPECT_EQ(st["state"], "held") << st.dump();
    EXPECT_GT(st["restart"]["due_ns"].get<int64_t>(),
              std::chrono::duration_cast<std::chrono::nanoseconds>(
                  std::chrono::system_clock::now().time_since_epoch())
                  .count())
        << st.dump();
    const std::string text = status_text(*s);
    EXPECT_NE(text.find("held: crashy ("), std::string::npos) << text;
    EXPECT_NE(text.find("the start limit (2 starts within 60000 ms) holds the server back until "),
              std::string::npos)
        << text;
    EXPECT_NE(text.find("to reset the limit now, restart the MCP server in the client"),
              std::string::npos)
        << text;
}

// While a restart is under way `status` says so, with what ended the server, and not
// "running" with the dead server's pid; once the new server answered, it is running, with the
// new server's pid. The new server is held at its start (--hold-while) for the look.
TEST(Supervise, StatusSaysRestartingUntilTheNewServerRuns) {
    TempDir hold_dir;
    const std::string hold = hold_dir.file("hold");
    auto s = supervise({"--restart", "on-failure"}, "", true, {"--hold-while", hold});
    TestChild& c = *s->c;
    handshake(c);
    const std::string first = call(c, 2, "pid");
    EXPECT_EQ(status_of(*s)["state"], "running");
    std::ofstream(hold) << "held";
    EXPECT_NE(call(c, 3, "crash").find("ValueError"), std::string::npos);
    nlohmann::json st;
    EXPECT_TRUE(wait_until(
        [&] {
            st = status_of(*s);
            return st["state"] == "restarting";
        },
        15s))
        << st.dump();
    EXPECT_EQ(st["server"]["pid"], 0) << st.dump();
    EXPECT_EQ(st["restart"]["cause"], "the server exited with status 1") << st.dump();
    const std::string text = status_text(*s);
    EXPECT_NE(text.find("restarting: crashy ("), std::string::npos) << text;
    EXPECT_NE(text.find("starting a new server after: the server exited with status 1"),
              std::string::npos)
        << text;
    EXPECT_EQ(text.find("running"), std::string::npos) << text;
    std::filesystem::remove(hold);
    const std::string second = call(c, 4, "pid");
    EXPECT_EQ(second.find_first_not_of("0123456789"), std::string::npos) << second;
    EXPECT_TRUE(wait_until(
        [&] {
            st = status_of(*s);
            return st["state"] == "running";
        },
        15s))
        << st.dump();
    EXPECT_EQ(std::to_string(st["server"]["pid"].get<int>()), second) << st.dump();
    EXPECT_FALSE(st.contains("restart")) << st.dump();
}

// Negative control: without the start limit the loop goes on.
TEST(Supervise, WithoutTheStartLimitACrashLoopGoesOn) {
    auto s =
        supervise({"--restart", "on-failure", "--restart-burst", "2", "--restart-interval", "60s"},
                  "restart_unlimited");
    TestChild& c = *s->c;
    handshake(c);
    for (int i = 0; i < 3; ++i)
        EXPECT_NE(call(c, 10 + i, "crash").find("ValueError"), std::string::npos) << i;
    const std::string pid = call(c, 20, "pid");
    EXPECT_EQ(pid.find_first_not_of("0123456789"), std::string::npos) << pid;
}

// Credential-shaped lines reach the client as the server wrote them (its stderr is passed on
// as before) but never the disk: the log has them redacted, and nothing of the private key.
TEST(Supervise, CredentialShapedStderrNeverReachesTheLogFile) {
    auto s = supervise({});
    TestChild& c = *s->c;
    handshake(c);
    EXPECT_EQ(call(c, 2, "leak"), "leaked");
    c.close_stdin();
    ASSERT_TRUE(c.wait_exit(10s));
    EXPECT_NE(c.read_stderr(2s).find("ghp_0123456789abcdefghijklmnopqrstuvwxyzAB"),
              std::string::npos);
    const std::string log = s->log_text();
    EXPECT_NE(log.find("after the key"), std::string::npos) << log;
    EXPECT_NE(log.find("Authorization: Bearer ***"), std::string::npos) << log;
    for (const char* secret : {"ghp_0123456789", "abcdefghijklmnop0123456789", "MIIEow"})
        EXPECT_EQ(log.find(secret), std::string::npos) << secret << " in\n" << log;
}

// Negative control: without the redaction the token is on disk.
TEST(Supervise, WithoutRedactionTheTokenIsOnDisk) {
    auto s = supervise({}, "log_unredacted");
    TestChild& c = *s->c;
    handshake(c);
    EXPECT_EQ(call(c, 2, "leak"), "leaked");
    c.close_stdin();
    ASSERT_TRUE(c.wait_exit(10s));
    EXPECT_NE(s->log_text().find("ghp_0123456789"), std::string::npos);
}

// `logs = false` in the server's section of the settings file keeps no file for it.
TEST(Supervise, LogsOffKeepsNoFile) {
    auto off = std::make_unique<Supervised>();
    std::filesystem::create_directories(off->dir.file("config/mcpwarden"));
    std::ofstream(off->dir.file("config/mcpwarden/config.toml"))
        << "[server.crashy]\nlogs = false\n";
    std::vector<std::string> argv{kCli,    "run", "--name",  "crashy", "--journal",
                                  off->db, "--",  "python3", kServer};
    ChildOptions co;
    co.env.push_back({"XDG_CONFIG_HOME", off->dir.file("config")});
    co.unset_env.push_back("MCPWARDEN_LOGS");
    off->c = std::make_unique<TestChild>(argv, co);
    handshake(*off->c);
    EXPECT_EQ(call(*off->c, 2, "leak"), "leaked");
    off->c->close_stdin();
    ASSERT_TRUE(off->c->wait_exit(10s));
    EXPECT_FALSE(std::filesystem::exists(off->log_dir()));
    auto starts = records_of(off->db, "session.start");
    ASSERT_EQ(starts.size(), 1u);
    EXPECT_NE(starts[0].dump().find("config.toml"), std::string::npos) << starts[0].dump();
}

// A session whose log cannot be written: its live file is a FIFO nobody reads, so the log's
// writer is stuck opening it. The session's stderr is the test's own (read by ctest).
std::unique_ptr<Supervised> supervise_with_stuck_log(const std::string& fault) {
    auto s = std::make_unique<Supervised>();
    std::filesystem::create_directories(s->log_dir());
    EXPECT_EQ(::mkfifo((s->log_dir() + "/stderr.log").c_str(), 0600), 0);
    std::vector<std::string> argv{kCli,  "run", "--name",  "crashy", "--journal",
                                  s->db, "--",  "python3", kServer};
    ChildOptions co;
    if (!fault.empty()) co.env.push_back({"MCPWARDEN_FAULT", fault});
    s->c = std::make_unique<TestChild>(argv, co);
    return s;
}

// Unsticks the log's writer (a reader for its FIFO) and reads what it writes until `done`.
bool unstick_log_until(const Supervised& s, const std::function<bool()>& done) {
    Fd reader(::open((s.log_dir() + "/stderr.log").c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC));
    char buf[65536];
    return wait_until(
        [&] {
            while (::read(reader.get(), buf, sizeof buf) > 0) {
            }
            return done();
        },
        30s);
}

// A flood of stderr against a stuck log is answered all the same: the relay drops what the
// log's queue cannot hold.
TEST(Supervise, AStderrFloodNeverWaitsForTheLog) {
    auto s = supervise_with_stuck_log("");
    TestChild& c = *s->c;
    handshake(c);
    ASSERT_TRUE(c.write_line(rpc_tools_call(2, "flood", {{"mib", 8}})));
    auto r = read_response(c, 2, 60s);
    EXPECT_TRUE(r) << "the flood was not answered: the relay waited for the log";
    if (r) {
        EXPECT_EQ(result_text(*r), "flooded");
    }
    c.close_stdin();
    EXPECT_TRUE(unstick_log_until(*s, [&] { return c.wait_exit(10ms).has_value(); }));
}

// Negative control: a relay that waits for the log's writer is held by it, and so is the
// server, whose stderr is no longer read: the flood is not answered while the log is stuck.
TEST(Supervise, ARelayThatWaitsForTheLogHoldsTheServer) {
    auto s = supervise_with_stuck_log("log_blocking");
    TestChild& c = *s->c;
    handshake(c);
    ASSERT_TRUE(c.write_line(rpc_tools_call(2, "flood", {{"mib", 8}})));
    EXPECT_FALSE(read_response(c, 2, 3s));
    EXPECT_TRUE(unstick_log_until(*s, [&] { return read_response(c, 2, 10ms).has_value(); }));
    c.close_stdin();
    EXPECT_TRUE(unstick_log_until(*s, [&] { return c.wait_exit(10ms).has_value(); }));
}

// The bound: a flood through a small log keeps at most log-files × log-size bytes on disk,
// and the newest lines.
TEST(Supervise, TheLogStaysWithinItsBound) {
    auto s = supervise({"--log-size", "64KiB", "--log-files", "3"}, "", false);
    TestChild& c = *s->c;
    handshake(c);
    ASSERT_TRUE(c.write_line(rpc_tools_call(2, "flood", {{"mib", 2}})));
    ASSERT_TRUE(read_response(c, 2, 60s));
    c.close_stdin();
    ASSERT_TRUE(c.wait_exit(10s));
    uintmax_t total = 0;
    int files = 0;
    for (auto& e : std::filesystem::directory_iterator(s->log_dir()))
        if (e.path().filename().string().rfind("stderr.log", 0) == 0) {
            total += e.file_size();
            ++files;
        }
    EXPECT_EQ(files, 3);
    EXPECT_LE(total, 3u * 64 * 1024);
    // The newest lines: the flood's last ones, or (when the writer fell behind and the queue
    // was full) what says how much was not kept.
    EXPECT_NE(s->log_text().find(std::string(1023, 'x')), std::string::npos);
}

}  // namespace
}  // namespace warden::testing
