// Limits and health with real processes (docs/RUN.md, "Limits" and "Wedged"): a server that
// allocates past --memory-max, a bounded fork bomb under --tasks-max 32, a refusal to start
// where no controller can hold a limit, a stopped server, a spinning one, a slow one that is
// not wedged, and a call that never ends under --request-timeout. Each guard has its negative
// control (MCPWARDEN_FAULT).
//
// Which cgroup version enforced the limits is what the host offers: v2 where the session's
// group is given the controllers, else the v1 hierarchies. Each test says which path ran
// (the placement recorded in session.start), and the tests for the other version skip with
// the reason.
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/child.hpp"
#include "common/cli_run.hpp"
#include "common/journal_rows.hpp"
#include "common/jsonrpc.hpp"
#include "common/procfs.hpp"
#include "common/testing.hpp"
#include "common/util.hpp"
#include "shim/options.hpp"

namespace warden::testing {
namespace {

using Json = nlohmann::json;

// A Python MCP server with the behaviours the tests need, one tool each.
constexpr const char* kLimitsServer = R"PY(
import json, os, sys, time
def send(o):
    sys.stdout.write(json.dumps(o) + "\n"); sys.stdout.flush()
def text(i, t):
    send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": t}]}})
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m or "method" not in m: continue
    i, method = m["id"], m["method"]
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": m["params"]["protocolVersion"],
              "capabilities": {"tools": {}}, "serverInfo": {"name": "sup", "version": "1"}}})
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": i, "result": {}})
    elif method == "tools/call":
        name, args = m["params"]["name"], m["params"].get("arguments", {})
        if name == "sleep":
            time.sleep(args.get("seconds", 2.5)); text(i, "slept")
        elif name == "spin":
            text(i, "spinning")
            while True: pass
        elif name == "hang":
            while True: pass
        elif name == "alloc":
            blocks = [b"x" * (1 << 20) for _ in range(args["mb"])]
            text(i, "allocated %d MiB" % len(blocks))
        elif name == "forks":
            made = refused = 0
            for _ in range(args["n"]):
                try:
                    pid = os.fork()
                except OSError:
                    refused += 1
                    continue
                if pid == 0:
                    time.sleep(60); os._exit(0)
                made += 1
            text(i, "%d %d" % (made, refused))
)PY";

// The v1 hierarchy's group of ours for `controller` ("/sys/fs/cgroup/memory/a/b"), or "".
std::string own_v1_group(const std::string& controller) {
    std::ifstream in("/proc/self/cgroup");
    for (std::string line; std::getline(in, line);) {
        auto a = line.find(':'), b = line.find(':', a + 1);
        std::stringstream ctrls(line.substr(a + 1, b - a - 1));
        for (std::string c; std::getline(ctrls, c, ',');)
            if (c == controller) {
                std::string rel = line.substr(b + 1);
                return "/sys/fs/cgroup/" + controller + (rel == "/" ? "" : rel);
            }
    }
    return "";
}

// The controllers the cgroup v2 group we are in gives its children.
std::string v2_delegated() {
    std::ifstream cg("/proc/self/cgroup");
    std::string rel;
    for (std::string line; std::getline(cg, line);)
        if (line.rfind("0::", 0) == 0) rel = line.substr(3);
    for (const char* mnt : {"/sys/fs/cgroup/unified", "/sys/fs/cgroup"}) {
        std::ifstream in(std::string(mnt) + (rel == "/" ? "" : rel) + "/cgroup.subtree_control");
        if (in) {
            std::string s((std::istreambuf_iterator<char>(in)), {});
            if (!s.empty() && s.back() == '\n') s.pop_back();
            return s;
        }
    }
    return "";
}

bool v2_has(const std::string& controller) {
    std::stringstream in(v2_delegated());
    for (std::string w; in >> w;)
        if (w == controller) return true;
    return false;
}

bool v1_has(const std::string& controller) {
    const std::string g = own_v1_group(controller);
    return !g.empty() && ::access(g.c_str(), W_OK) == 0;
}

// One `mcpwarden run` of kLimitsServer, initialized. The destructor ends what is left and removes
// the session's v1 groups, which only a dead keeper leaves (they are checked before that).
struct LimitedSession {
    TempDir dir;
    std::string db = dir.file("journal.db");
    std::unique_ptr<TestChild> run;
    std::string session;

    // `wrapped`: the server is a `sh -c` that runs the Python server as its child and exits
    // with its status, as launcher scripts do.
    LimitedSession(const std::vector<std::string>& flags, const std::string& fault = "",
                   bool wrapped = false) {
        { std::ofstream(dir.file("server.py")) << kLimitsServer; }
        std::vector<std::string> argv = {kCli,          "run",   "--journal",    db,
                                         "--eof-grace", "200ms", "--term-grace", "500ms"};
        argv.insert(argv.end(), flags.begin(), flags.end());
        if (wrapped)
            argv.insert(argv.end(),
                        {"--", "sh", "-c", "python3 -u \"$0\"; exit $?", dir.file("server.py")});
        else
            argv.insert(argv.end(), {"--", "python3", "-u", dir.file("server.py")});
        ChildOptions o;
        o.capture_stderr = true;
        o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION", "MCPWARDEN_FAULT"};
        if (!fault.empty()) o.env.emplace_back("MCPWARDEN_FAULT", fault);
        run = std::make_unique<TestChild>(argv, o);
    }
    bool initialize() {
        if (!run->started() || !run->write_line(rpc_initialize(1))) return false;
        if (!read_response(*run, 1, 20s)) return false;
        // From the server's environment: session.start may still be on its way to the journal.
        session = env_value(server(), "MCPWARDEN_SESSION").value_or("");
        EXPECT_FALSE(session.empty()) << "no MCPWARDEN_SESSION in the server's environment";
        return true;
    }
    // The server: the keeper's child.
    pid_t server() const {
        for (pid_t k : children_of(run->pid()))
            if (auto st = read_stat(k); st && st->comm.starts_with("mcpwarden-keep"))
                for (pid_t s : children_of(k))
                    return s;
        return 0;
    }
    // Ends the session (stdin EOF) and waits for `run` to return: its exit code, -1 if none.
    int finish() {
        run->close_stdin();
        (void)run->read_all_stdout(20s);
        auto st = run->wait_exit(20s);
        return st && WIFEXITED(*st) ? WEXITSTATUS(*st) : -1;
    }
    // The session's v1 limit groups still there.
    std::vector<std::string> v1_groups_left() const {
        std::vector<std::string> out;
        if (session.empty()) {
            ADD_FAILURE() << "no session id: the groups cannot be looked for";
            return out;
        }
        for (const char* c : {"memory", "pids", "cpu"}) {
            const std::string g = own_v1_group(c);
            if (g.empty()) continue;
            const std::string dir_ = g + "/mcpwarden-" + session;
            if (::access(dir_.c_str(), F_OK) == 0) out.push_back(dir_);
        }
        return out;
    }
    // Which cgroup version holds `limit` ("memory-max"), from session.start: 0 when none.
    int version_of(const std::string& limit) const {
        auto starts = record_data(db, "session.start");
        if (starts.empty() || !starts.front().contains("limits")) return 0;
        for (const Json& l : starts.front()["limits"])
            if (l.value("limit", "") == limit) return l.value("cgroup", 0);
        return 0;
    }
    ~LimitedSession() {
        if (run && !run->exited()) {
            run->signal(SIGKILL);
            (void)run->wait_exit(10s);
        }
        if (run) run->tree().kill_all();
        // A stopped server must die too: the tree guard's SIGKILL reaches it.
        if (session.empty()) return;  // never started: no group was made
        for (const std::string& g : v1_groups_left())
            wait_until([&] { return ::rmdir(g.c_str()) == 0 || errno == ENOENT; }, 5s, 20ms);
    }
};

// The path of the limits that ran here, said once per test in its output.
void say_path(const LimitedSession& s, const std::string& limit) {
    const int v = s.version_of(limit);
    std::cout << "[ limits   ] " << limit << " enforced by cgroup v" << v << "\n";
    ::testing::Test::RecordProperty(limit, "cgroup v" + std::to_string(v));
}

// Skips unless the v1 path is the one a session takes here for `controller`.
#define REQUIRE_V1(controller)                                                                     \
    do {                                                                                           \
        if (v2_has(controller))                                                                    \
            GTEST_SKIP() << "cgroup v2 delegates " controller " here: the v1 path is not taken";   \
        if (!v1_has(controller)) GTEST_SKIP() << "no writable cgroup v1 " controller " hierarchy"; \
    } while (0)
#define REQUIRE_V2(controller)                                                             \
    do {                                                                                   \
        if (!v2_has(controller))                                                           \
            GTEST_SKIP() << "cgroup v2 does not delegate " controller " here (it gives: '" \
                         << v2_delegated() << "'): the v1 tests cover this host";          \
    } while (0)

// ---- The options ---------------------------------------------------------------------------

TEST(LimitsOptions, SizesCountsPercentagesAndDurationsParseAndBadValuesSayWhy) {
    RunOptions o;
    ASSERT_TRUE(shim::set_option(o, "memory-max", "64MiB"));
    EXPECT_EQ(o.memory_max, uint64_t{64} << 20);
    ASSERT_TRUE(shim::set_option(o, "memory-max", "8GiB"));  // past parse_size's 4 GiB
    EXPECT_EQ(o.memory_max, uint64_t{8} << 30);
    ASSERT_TRUE(shim::set_option(o, "tasks-max", "32"));
    EXPECT_EQ(o.tasks_max, 32u);
    ASSERT_TRUE(shim::set_option(o, "cpu-max", "150%"));
    EXPECT_EQ(o.cpu_max, 150u);
    ASSERT_TRUE(shim::set_option(o, "limits", "best-effort"));
    EXPECT_TRUE(o.limits_best_effort);
    ASSERT_TRUE(shim::set_option(o, "health", "1s"));
    EXPECT_EQ(o.health, std::chrono::milliseconds(1000));
    ASSERT_TRUE(shim::set_option(o, "health", "off"));
    EXPECT_FALSE(o.health);
    auto bad = shim::set_option(o, "tasks-max", "0");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message,
              "--tasks-max: cannot parse '0' as a number of processes and threads from 1 to "
              "4194304");
    bad = shim::set_option(o, "memory-max", "12x");
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("--memory-max: cannot parse '12x'"), std::string::npos);
}

// ---- Memory: an OOM kill told apart ------------------------------------------------------

struct OomOutcome {
    std::optional<Json> answer;  // to the alloc call
    std::vector<Json> oom;       // session.oom records
    int code = -1;
    std::vector<std::string> groups_left;
};

OomOutcome allocate_past_the_cap(const std::string& fault) {
    OomOutcome out;
    LimitedSession s({"--memory-max", "64MiB"}, fault);
    if (!s.initialize()) {
        ADD_FAILURE() << "the session did not start: " << s.run->read_stderr(2s);
        return out;
    }
    say_path(s, "memory-max");
    EXPECT_TRUE(s.run->write_line(rpc_tools_call(2, "alloc", {{"mb", 256}})));
    out.answer = read_response(*s.run, 2, 30s);
    out.code = s.finish();
    out.oom = record_data(s.db, "session.oom");
    out.groups_left = s.v1_groups_left();
    return out;
}

void expect_oom_told(const OomOutcome& o) {
    ASSERT_TRUE(o.answer) << "the call in flight got no answer";
    ASSERT_TRUE(o.answer->contains("error")) << o.answer->dump();
    const std::string msg = (*o.answer)["error"].value("message", "");
    EXPECT_NE(msg.find("out of memory"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--memory-max 64MiB"), std::string::npos) << msg;
    ASSERT_EQ(o.oom.size(), 1u);
    EXPECT_TRUE(o.oom[0]["victim"].value("server", false)) << o.oom[0].dump();
    EXPECT_GT(o.oom[0]["victim"].value("pid", 0), 0);
    EXPECT_EQ(o.code, 137);  // the server's SIGKILL
    EXPECT_TRUE(o.groups_left.empty()) << o.groups_left.front();
}

TEST(LimitsV1, AServerPastMemoryMaxIsKilledAndTheCallSaysOutOfMemory) {
    REQUIRE_V1("memory");
    expect_oom_told(allocate_past_the_cap(""));
}

TEST(LimitsV2, AServerPastMemoryMaxIsKilledAndTheCallSaysOutOfMemory) {
    REQUIRE_V2("memory");
    expect_oom_told(allocate_past_the_cap(""));
}

// Under --restart on-failure an OOM kill is a failure like a crash: the call in flight is told
// "out of memory", session.restart names the cause, and the next call is served by a new
// server under the same cap.
TEST(LimitsV1, AnOomKilledServerIsStartedAgainUnderRestartOnFailure) {
    REQUIRE_V1("memory");
    LimitedSession s({"--memory-max", "64MiB", "--restart", "on-failure"});
    ASSERT_TRUE(s.initialize()) << s.run->read_stderr(2s);
    const pid_t first = s.server();
    ASSERT_TRUE(s.run->write_line(rpc_tools_call(2, "alloc", {{"mb", 256}})));
    auto killed = read_response(*s.run, 2, 30s);
    ASSERT_TRUE(killed && killed->contains("error")) << (killed ? killed->dump() : "no answer");
    EXPECT_NE((*killed)["error"].value("message", "").find("out of memory"), std::string::npos);
    ASSERT_TRUE(s.run->write_line(rpc_tools_call(3, "sleep", {{"seconds", 0}})));
    auto next = read_response(*s.run, 3, 30s);
    ASSERT_TRUE(next && next->contains("result")) << (next ? next->dump() : "no answer");
    EXPECT_NE(s.server(), first);
    EXPECT_EQ(s.finish(), 0);
    auto restarts = record_data(s.db, "session.restart");
    ASSERT_EQ(restarts.size(), 1u);
    EXPECT_EQ(restarts[0].value("cause", ""), "oom_kill") << restarts[0].dump();
    EXPECT_EQ(record_data(s.db, "session.oom").size(), 1u);
    EXPECT_TRUE(s.v1_groups_left().empty());
}

// The OOM killer's victim is the wrapper's child, not the server: the server exits 137 as
// any wrapper would, and the victim is named all the same (from the kernel's report of the
// kill), in the error and in session.oom.
struct WrappedOom {
    pid_t child = 0;
    std::string message;
    std::vector<Json> oom;
    int code = -1;
};

WrappedOom oom_in_a_wrapper(const std::string& fault) {
    WrappedOom out;
    LimitedSession s({"--memory-max", "64MiB"}, fault, true);
    if (!s.initialize()) {
        ADD_FAILURE() << "the session did not start: " << s.run->read_stderr(2s);
        return out;
    }
    say_path(s, "memory-max");
    const auto kids = children_of(s.server());
    out.child = kids.empty() ? 0 : kids.front();
    EXPECT_TRUE(s.run->write_line(rpc_tools_call(2, "alloc", {{"mb", 256}})));
    auto answer = read_response(*s.run, 2, 30s);
    EXPECT_TRUE(answer && answer->contains("error")) << (answer ? answer->dump() : "no answer");
    if (answer) out.message = (*answer)["error"].value("message", "");
    out.code = s.finish();
    out.oom = record_data(s.db, "session.oom");
    return out;
}

TEST(LimitsV1, AnOomKilledChildOfAWrapperIsNamed) {
    REQUIRE_V1("memory");
    if (::access("/dev/kmsg", R_OK) != 0)
        GTEST_SKIP() << "the kernel log cannot be read here: the victim is not named (said)";
    WrappedOom o = oom_in_a_wrapper("");
    ASSERT_GT(o.child, 0);
    EXPECT_EQ(o.code, 137);  // the wrapper's exit status, not a signal
    const std::string named = "python3 (pid " + std::to_string(o.child) + ")";
    EXPECT_NE(o.message.find("out of memory: the kernel's OOM killer ended " + named +
                             ", a process of the server's tree at --memory-max 64MiB"),
              std::string::npos)
        << o.message;
    ASSERT_EQ(o.oom.size(), 1u);
    const Json& v = o.oom[0]["victim"];
    EXPECT_EQ(v.value("pid", 0), o.child) << v.dump();
    EXPECT_EQ(v.value("command", ""), "python3") << v.dump();
    EXPECT_FALSE(v.value("server", true)) << v.dump();
    EXPECT_EQ(v.value("named_by", ""), "kernel log") << v.dump();
}

// Negative control: without the kernel log the OOM kill is still told, but the victim is not
// named.
TEST(Limits, NegativeControlWithoutTheKernelLogTheWrappedVictimIsNotNamed) {
    if (!v2_has("memory") && !v1_has("memory")) GTEST_SKIP() << "no memory controller here";
    WrappedOom o = oom_in_a_wrapper("oom_victim_unnamed");
    EXPECT_NE(o.message.find("out of memory: the kernel's OOM killer ended a process of its tree"),
              std::string::npos)
        << o.message;
    EXPECT_EQ(o.message.find("(pid " + std::to_string(o.child) + ")"), std::string::npos)
        << o.message;
    ASSERT_EQ(o.oom.size(), 1u);
    EXPECT_FALSE(o.oom[0]["victim"].contains("pid")) << o.oom[0].dump();
}

TEST(Limits, NegativeControlWithoutTheOomCountTheDeathIsNotExplained) {
    if (!v2_has("memory") && !v1_has("memory")) GTEST_SKIP() << "no memory controller here";
    OomOutcome o = allocate_past_the_cap("oom_untold");
    EXPECT_TRUE(o.oom.empty());
    if (o.answer) {
        const std::string msg = o.answer->dump();
        EXPECT_EQ(msg.find("out of memory"), std::string::npos) << msg;
    }
}

TEST(Limits, NegativeControlWithoutTheLimitWrittenTheAllocationSucceeds) {
    if (!v2_has("memory") && !v1_has("memory")) GTEST_SKIP() << "no memory controller here";
    OomOutcome o = allocate_past_the_cap("limits_unwritten");
    ASSERT_TRUE(o.answer);
    EXPECT_EQ(result_text(*o.answer), "allocated 256 MiB") << o.answer->dump();
    EXPECT_TRUE(o.oom.empty());
}

// ---- Tasks: a bounded fork bomb ------------------------------------------------------------

struct BombOutcome {
    int made = -1, refused = -1;
    std::vector<Json> limits;  // session.limits
    std::vector<pid_t> left;   // tagged processes alive after run returned
    std::vector<std::string> groups_left;
};

// The bomb is bounded (100 forks, each child sleeping), so that its negative control cannot
// harm the machine: the cap's effect is the number of forks it refused.
BombOutcome fork_bomb(const std::string& fault) {
    BombOutcome out;
    LimitedSession s({"--tasks-max", "32"}, fault);
    if (!s.initialize()) {
        ADD_FAILURE() << "the session did not start: " << s.run->read_stderr(2s);
        return out;
    }
    say_path(s, "tasks-max");
    EXPECT_TRUE(s.run->write_line(rpc_tools_call(2, "forks", {{"n", 100}})));
    auto answer = read_response(*s.run, 2, 60s);
    if (answer) std::istringstream(result_text(*answer)) >> out.made >> out.refused;
    const std::string tag = s.run->tag();
    EXPECT_EQ(s.finish(), 0);
    out.limits = record_data(s.db, "session.limits");
    out.left = live_tagged(tag);
    out.groups_left = s.v1_groups_left();
    return out;
}

void expect_bomb_contained(const BombOutcome& b) {
    EXPECT_GT(b.refused, 0);
    EXPECT_LT(b.made, 32);
    ASSERT_EQ(b.limits.size(), 1u);
    EXPECT_GT(b.limits[0]["usage"].value("tasks_refused", 0), 0) << b.limits[0].dump();
    EXPECT_TRUE(b.left.empty()) << b.left.size() << " processes left";
    EXPECT_TRUE(b.groups_left.empty()) << b.groups_left.front();
}

TEST(LimitsV1, AForkBombUnderTasksMax32IsContainedRecordedAndGone) {
    REQUIRE_V1("pids");
    expect_bomb_contained(fork_bomb(""));
}

TEST(LimitsV2, AForkBombUnderTasksMax32IsContainedRecordedAndGone) {
    REQUIRE_V2("pids");
    expect_bomb_contained(fork_bomb(""));
}

TEST(Limits, NegativeControlWithoutTheTasksCapEveryForkSucceeds) {
    if (!v2_has("pids") && !v1_has("pids")) GTEST_SKIP() << "no pids controller here";
    BombOutcome b = fork_bomb("limits_unwritten");
    EXPECT_EQ(b.made, 100);
    EXPECT_EQ(b.refused, 0);
    EXPECT_TRUE(b.left.empty()) << b.left.size() << " processes left";
}

// ---- CPU: a busy loop throttled -------------------------------------------------------------

struct CpuOutcome {
    std::string quota, period;  // the v1 group's cpu.cfs_quota_us, cpu.cfs_period_us
    uint64_t throttled = 0;     // the group's nr_throttled once the server had spun
    std::vector<Json> limits;   // session.limits
    std::vector<std::string> groups_left;
};

// A cgroup file's text without its newline ("" when it cannot be read).
std::string cgroup_file_text(const std::string& path) {
    std::ifstream in(path);
    std::string s((std::istreambuf_iterator<char>(in)), {});
    while (!s.empty() && s.back() == '\n')
        s.pop_back();
    return s;
}

uint64_t keyed(const std::string& text, const std::string& key) {
    std::istringstream in(text);
    for (std::string k; in >> k;) {
        uint64_t v = 0;
        if (!(in >> v)) break;
        if (k == key) return v;
    }
    return 0;
}

// A server that answers and then spins under --cpu-max 20: its group throttles it (the
// kernel's count of throttled periods grows), and session.limits counts it. Bounded: the
// spin is watched for at most 10 s (the negative control waits 2 s of spinning).
CpuOutcome spin_under_cpu_max(const std::string& fault) {
    CpuOutcome out;
    LimitedSession s({"--cpu-max", "20"}, fault);
    if (!s.initialize()) {
        ADD_FAILURE() << "the session did not start: " << s.run->read_stderr(2s);
        return out;
    }
    say_path(s, "cpu-max");
    const std::string group = own_v1_group("cpu") + "/mcpwarden-" + s.session;
    out.quota = cgroup_file_text(group + "/cpu.cfs_quota_us");
    out.period = cgroup_file_text(group + "/cpu.cfs_period_us");
    EXPECT_TRUE(s.run->write_line(rpc_tools_call(2, "spin", Json::object())));
    auto answer = read_response(*s.run, 2, 30s);
    EXPECT_TRUE(answer && result_text(*answer) == "spinning");
    const auto watch = fault.empty() ? 10s : 2s;
    wait_until(
        [&] {
            out.throttled = keyed(cgroup_file_text(group + "/cpu.stat"), "nr_throttled");
            return fault.empty() && out.throttled > 0;
        },
        watch, 50ms);
    EXPECT_EQ(s.finish(), 143);  // spinning, it never reads its EOF: ended by SIGTERM
    out.limits = record_data(s.db, "session.limits");
    out.groups_left = s.v1_groups_left();
    return out;
}

TEST(LimitsV1, ABusyLoopUnderCpuMaxIsThrottledAndCounted) {
    REQUIRE_V1("cpu");
    CpuOutcome o = spin_under_cpu_max("");
    EXPECT_EQ(o.quota, "20000");  // 20 % of a 100 ms period
    EXPECT_EQ(o.period, "100000");
    EXPECT_GT(o.throttled, 0u);
    ASSERT_EQ(o.limits.size(), 1u);
    EXPECT_GT(o.limits[0]["usage"].value("cpu_throttled", 0), 0) << o.limits[0].dump();
    EXPECT_EQ(o.limits[0]["limits"][0].value("limit", ""), "cpu-max") << o.limits[0].dump();
    EXPECT_EQ(o.limits[0]["limits"][0].value("value", 0), 20) << o.limits[0].dump();
    EXPECT_TRUE(o.groups_left.empty()) << o.groups_left.front();
}

TEST(Limits, NegativeControlWithoutTheCpuCapTheBusyLoopIsNeverThrottled) {
    REQUIRE_V1("cpu");
    CpuOutcome o = spin_under_cpu_max("limits_unwritten");
    EXPECT_EQ(o.quota, "-1");  // the v1 group's "no quota"
    EXPECT_EQ(o.throttled, 0u);
    ASSERT_EQ(o.limits.size(), 1u);
    EXPECT_EQ(o.limits[0]["usage"].value("cpu_throttled", -1), 0) << o.limits[0].dump();
    EXPECT_TRUE(o.groups_left.empty()) << o.groups_left.front();
}

// A keeper killed: the relay tears the tree down itself and removes the v1 groups too.
std::vector<std::string> kill_the_keeper(const std::string& fault) {
    LimitedSession s({"--tasks-max", "32"}, fault);
    if (!s.initialize()) {
        ADD_FAILURE() << "the session did not start";
        return {};
    }
    say_path(s, "tasks-max");
    bool killed = false;
    for (pid_t k : children_of(s.run->pid()))
        if (auto st = read_stat(k); st && st->comm.starts_with("mcpwarden-keep"))
            killed = is_same_live_process(k, st->starttime) && ::kill(k, SIGKILL) == 0;
    EXPECT_TRUE(killed);
    const std::string tag = s.run->tag();
    s.finish();
    EXPECT_TRUE(live_tagged(tag).empty());
    return s.v1_groups_left();  // the destructor removes what is left
}

TEST(LimitsV1, AKeeperKilledLeavesNoLimitGroupBehind) {
    REQUIRE_V1("pids");
    auto left = kill_the_keeper("");
    EXPECT_TRUE(left.empty()) << left.front();
}

TEST(LimitsV1, NegativeControlARelayThatLeavesTheGroupsLeavesThemBehind) {
    REQUIRE_V1("pids");
    EXPECT_EQ(kill_the_keeper("limit_groups_left").size(), 1u);
}

TEST(Limits, ExplainAndStatusShowTheLimitsAndWhatTheTreeHolds) {
    if (!v2_has("pids") && !v1_has("pids")) GTEST_SKIP() << "no pids controller here";
    LimitedSession s({"--tasks-max", "32", "--explain"});
    ASSERT_TRUE(s.initialize());
    say_path(s, "tasks-max");
    Json live = only_status_session(s.dir, s.db);
    ASSERT_TRUE(live.is_object());
    EXPECT_NE(live.value("limits", "").find("/32"), std::string::npos) << live.dump();
    EXPECT_EQ(s.finish(), 0);
    const std::string err = s.run->read_stderr(2s);
    EXPECT_NE(err.find("tasks-max       on   32: cgroup v"), std::string::npos) << err;
    EXPECT_NE(err.find("limits          tasks "), std::string::npos) << err;
}

// ---- A limit nothing can enforce -------------------------------------------------------------

TEST(Limits, NoControllerForALimitRefusesTheStartWith125) {
    if (v2_has("memory")) GTEST_SKIP() << "cgroup v2 delegates memory here: nothing is missing";
    // limits_v1_absent: as on a host whose cgroup v2 lacks the controller and that mounts no v1.
    LimitedSession s({"--memory-max", "64MiB"}, "limits_v1_absent");
    ASSERT_TRUE(s.run->started());
    s.run->close_stdin();
    auto st = s.run->wait_exit(20s);
    ASSERT_TRUE(st && WIFEXITED(*st));
    EXPECT_EQ(WEXITSTATUS(*st), 125);
    const std::string err = s.run->read_stderr(2s);
    EXPECT_NE(err.find("cannot enforce --memory-max 64MiB: no memory controller"),
              std::string::npos)
        << err;
    EXPECT_TRUE(live_tagged(s.run->tag()).empty());
}

TEST(Limits, BestEffortStartsWithoutTheLimitAndSaysSo) {
    if (v2_has("memory")) GTEST_SKIP() << "cgroup v2 delegates memory here: nothing is missing";
    LimitedSession s({"--memory-max", "64MiB", "--limits", "best-effort"}, "limits_v1_absent");
    ASSERT_TRUE(s.initialize());
    EXPECT_EQ(s.finish(), 0);
    const std::string err = s.run->read_stderr(2s);
    EXPECT_NE(err.find("running without --memory-max 64MiB"), std::string::npos) << err;
}

TEST(Limits, NegativeControlWithoutTheCheckTheServerRunsUncapped) {
    if (v2_has("memory")) GTEST_SKIP() << "cgroup v2 delegates memory here: nothing is missing";
    LimitedSession s({"--memory-max", "64MiB"}, "limits_v1_absent,limits_unchecked");
    ASSERT_TRUE(s.initialize());  // started: the cap the user asked for is not there
    EXPECT_EQ(s.finish(), 0);
}

// ---- Wedged ----------------------------------------------------------------------------------

const std::vector<std::string> kHealth = {"--health", "300ms", "--health-timeout", "1s"};

struct WedgedOutcome {
    bool ended = false;  // `run` returned by itself
    std::vector<Json> wedged;
    std::vector<Json> ends;
};

// Waits for `run` to end by itself (bounded), then reads the journal.
WedgedOutcome await_wedged(LimitedSession& s, Millis within) {
    WedgedOutcome out;
    (void)s.run->read_all_stdout(within);
    out.ended = s.run->stdout_eof() && s.run->wait_exit(10s).has_value();
    if (!out.ended) {
        s.run->close_stdin();
        (void)s.run->read_all_stdout(10s);
        (void)s.run->wait_exit(10s);
    }
    out.wedged = record_data(s.db, "session.wedged");
    out.ends = record_data(s.db, "session.end");
    return out;
}

WedgedOutcome stop_the_server(const std::string& fault) {
    LimitedSession s(kHealth, fault);
    if (!s.initialize()) {
        ADD_FAILURE() << "the session did not start";
        return {};
    }
    const pid_t server = s.server();
    EXPECT_GT(server, 0);
    auto st = read_stat(server);
    EXPECT_TRUE(st && is_same_live_process(server, st->starttime) && ::kill(server, SIGSTOP) == 0);
    return await_wedged(s, 8s);
}

TEST(Wedged, AStoppedServerIsWedgedWithEvidenceAndEnded) {
    WedgedOutcome o = stop_the_server("");
    EXPECT_TRUE(o.ended);
    ASSERT_EQ(o.wedged.size(), 1u);
    EXPECT_NE(o.wedged[0].value("why", "").find("no answer to a ping"), std::string::npos);
    const Json& members = o.wedged[0]["members"];
    ASSERT_FALSE(members.empty()) << o.wedged[0].dump();
    EXPECT_EQ(members[0].value("state", ""), "T") << members[0].dump();
    EXPECT_TRUE(members[0].contains("wchan"));
    EXPECT_FALSE(members[0]["threads"].empty());
    ASSERT_EQ(o.ends.size(), 1u);
    EXPECT_EQ(o.ends[0].value("reason", ""), "wedged") << o.ends[0].dump();
}

TEST(Wedged, NegativeControlWithoutTheVerdictAStoppedServerIsNeverEnded) {
    WedgedOutcome o = stop_the_server("wedged_unjudged");
    EXPECT_FALSE(o.ended);
    EXPECT_TRUE(o.wedged.empty());
}

TEST(Wedged, ASpinningServerIsWedgedAndItsCpuIsOnRecord) {
    LimitedSession s(kHealth);
    ASSERT_TRUE(s.initialize());
    ASSERT_TRUE(s.run->write_line(rpc_tools_call(2, "spin")));
    ASSERT_TRUE(read_response(*s.run, 2, 20s));  // answered; then it loops
    WedgedOutcome o = await_wedged(s, 10s);
    EXPECT_TRUE(o.ended);
    ASSERT_EQ(o.wedged.size(), 1u);
    const Json& m = o.wedged[0]["members"][0];
    EXPECT_EQ(m.value("state", ""), "R") << m.dump();
    EXPECT_GT(m.value("cpu_ms_in_window", 0), 0) << o.wedged[0].dump();
}

TEST(Wedged, ASlowCallIsNotWedgedAndThePingsStayOutOfTheStreamAndJournal) {
    std::vector<std::string> flags = kHealth;
    flags.insert(flags.end(), {"--request-timeout", "20s"});
    LimitedSession s(flags);
    ASSERT_TRUE(s.initialize());
    std::this_thread::sleep_for(1s);  // pings answered meanwhile
    ASSERT_TRUE(s.run->write_line(rpc_tools_call(2, "sleep", {{"seconds", 2.5}})));
    auto answer = read_response(*s.run, 2, 20s);
    ASSERT_TRUE(answer);
    EXPECT_EQ(result_text(*answer), "slept");
    std::this_thread::sleep_for(1s);
    s.run->close_stdin();
    const std::string rest = s.run->read_all_stdout(20s);
    EXPECT_EQ(rest.find("mcpwarden-health"), std::string::npos) << rest;
    EXPECT_TRUE(s.run->wait_exit(10s));
    EXPECT_TRUE(record_data(s.db, "session.wedged").empty());
    auto health = record_data(s.db, "session.health");
    ASSERT_EQ(health.size(), 1u);
    EXPECT_GE(health[0].value("answered", 0), 3) << health[0].dump();  // pinged, and alive
    for (const Json& r : record_data(s.db, "activity.request"))
        EXPECT_NE(r.value("method", ""), "ping") << r.dump();
}

// --idle-stop with --health: the pings' answers are not activity, so the session still
// goes to sleep once nothing else moves.
bool sleeps_while_pinged(const std::string& fault) {
    LimitedSession s({"--idle-stop", "800ms", "--health", "200ms"}, fault);
    if (!s.initialize()) {
        ADD_FAILURE() << "the session did not start";
        return false;
    }
    const bool slept =
        wait_until([&] { return !record_data(s.db, "session.hibernate").empty(); }, 6s, 100ms);
    EXPECT_EQ(s.finish(), 0);
    return slept;
}

TEST(Wedged, PingsDoNotKeepAnIdleSessionAwake) {
    EXPECT_TRUE(sleeps_while_pinged(""));
}

TEST(Wedged, NegativeControlPingsCountedAsActivityKeepItAwake) {
    EXPECT_FALSE(sleeps_while_pinged("ping_is_activity"));
}

WedgedOutcome call_that_never_ends(const std::string& fault, std::optional<Json>& answer) {
    LimitedSession s({"--request-timeout", "1s"}, fault);
    if (!s.initialize()) {
        ADD_FAILURE() << "the session did not start";
        return {};
    }
    EXPECT_TRUE(s.run->write_line(rpc_tools_call(2, "hang")));
    answer = read_response(*s.run, 2, 8s);
    return await_wedged(s, 5s);
}

TEST(Wedged, ACallPastRequestTimeoutIsAnsweredAsWedged) {
    std::optional<Json> answer;
    WedgedOutcome o = call_that_never_ends("", answer);
    ASSERT_TRUE(answer);
    const std::string msg = (*answer)["error"].value("message", "");
    EXPECT_NE(msg.find("wedged"), std::string::npos) << msg;
    EXPECT_NE(msg.find("--request-timeout"), std::string::npos) << msg;
    EXPECT_TRUE(o.ended);
    ASSERT_EQ(o.wedged.size(), 1u);
}

TEST(Wedged, NegativeControlWithoutTheVerdictTheCallIsNeverAnswered) {
    std::optional<Json> answer;
    WedgedOutcome o = call_that_never_ends("wedged_unjudged", answer);
    EXPECT_FALSE(answer);
    EXPECT_TRUE(o.wedged.empty());
}

}  // namespace
}  // namespace warden::testing
