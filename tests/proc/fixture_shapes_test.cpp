// The fixture MCP server builds the trees it claims, answers the protocol, and leaks its
// helpers when nobody tears them down. Everything is checked from raw /proc reads
// (tests/common/procfs.hpp), not through src/proc, so this is an independent oracle.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <set>
#include <thread>

#include <gtest/gtest.h>

#include "common/child.hpp"
#include "common/fixture.hpp"
#include "common/jsonrpc.hpp"
#include "common/paths.hpp"
#include "common/procfs.hpp"
#include "common/tree_guard.hpp"
#include "common/util.hpp"

namespace warden::testing {
namespace {

constexpr auto kStart = std::chrono::seconds(10);
constexpr auto kAnswer = std::chrono::seconds(10);
constexpr uint64_t kSigtermBit = uint64_t{1} << (SIGTERM - 1);

ProcStat stat_of(pid_t pid) {
    auto st = read_stat(pid);
    EXPECT_TRUE(st.has_value()) << "no /proc/" << pid << "/stat";
    return st.value_or(ProcStat{});
}

bool contains(const std::vector<pid_t>& v, pid_t p) {
    return std::find(v.begin(), v.end(), p) != v.end();
}

RunningFixture start(const FixtureOptions& opts) {
    auto f = start_fixture(opts, {}, kStart);
    if (!f) ADD_FAILURE() << "fixture --shape " << opts.shape << " did not report its port";
    return std::move(f).value();
}

// ---- shapes ----------------------------------------------------------------------------

TEST(FixtureShapes, NormalHelperIsAChildInTheSameSession) {
    auto f = start({.shape = "normal"});
    ProcStat server = stat_of(f.child.pid()), holder = stat_of(f.holder);
    EXPECT_EQ(holder.ppid, f.child.pid());
    EXPECT_EQ(holder.sid, server.sid);
    EXPECT_FALSE(port_bindable(f.port));
    auto inodes = listening_inodes(f.port);
    ASSERT_EQ(inodes.size(), 1u);
    EXPECT_TRUE(holds_socket(f.holder, inodes[0]));
    EXPECT_FALSE(holds_socket(f.child.pid(), inodes[0]));
    // Negative control for the SigIgn check below: nobody ignores SIGTERM here.
    EXPECT_EQ(status_mask(f.holder, "SigIgn").value_or(~0ull) & kSigtermBit, 0u);
    EXPECT_EQ(status_mask(f.child.pid(), "SigIgn").value_or(~0ull) & kSigtermBit, 0u);
}

TEST(FixtureShapes, SetsidHelperLeadsItsOwnSession) {
    auto f = start({.shape = "setsid"});
    ProcStat server = stat_of(f.child.pid()), holder = stat_of(f.holder);
    EXPECT_EQ(holder.ppid, f.child.pid());
    EXPECT_EQ(holder.sid, f.holder);
    EXPECT_NE(holder.sid, server.sid);
    EXPECT_FALSE(port_bindable(f.port));
}

TEST(FixtureShapes, DoubleforkHolderIsReparentedOutOfTheServersTree) {
    auto f = start({.shape = "doublefork"});
    ProcStat server = stat_of(f.child.pid()), holder = stat_of(f.holder);
    EXPECT_NE(holder.ppid, f.child.pid());
    EXPECT_FALSE(contains(descendants_of(f.child.pid()), f.holder));
    EXPECT_EQ(holder.sid, f.holder);
    EXPECT_NE(holder.sid, server.sid);
    // Found by its tag only: this is what the environment marker is for.
    EXPECT_TRUE(contains(live_tagged(f.child.tag()), f.holder));
    EXPECT_FALSE(port_bindable(f.port));
}

TEST(FixtureShapes, IgnoreTermHolderIgnoresSigterm) {
    auto f = start({.shape = "ignore-term"});
    EXPECT_NE(status_mask(f.holder, "SigIgn").value_or(0) & kSigtermBit, 0u);
    // The server itself does not, unless asked to.
    EXPECT_EQ(status_mask(f.child.pid(), "SigIgn").value_or(~0ull) & kSigtermBit, 0u);
}

TEST(FixtureShapes, IgnoreTermFlagMakesTheServerIgnoreSigterm) {
    auto f = start({.shape = "normal", .ignore_term = true});
    EXPECT_NE(status_mask(f.child.pid(), "SigIgn").value_or(0) & kSigtermBit, 0u);
    EXPECT_EQ(status_mask(f.holder, "SigIgn").value_or(~0ull) & kSigtermBit, 0u);
}

TEST(FixtureShapes, DeepBuildsAChainOfN) {
    for (int depth : {1, 4}) {
        auto f = start({.shape = "deep", .depth = depth});
        // From the holder up to the server: exactly `depth` links, one child per link.
        int links = 0;
        pid_t cur = f.holder;
        for (; cur != f.child.pid() && cur > 1 && links <= 64; ++links) {
            if (cur != f.holder) {
                EXPECT_EQ(children_of(cur).size(), 1u) << "at " << cur;
            }
            cur = stat_of(cur).ppid;
        }
        EXPECT_EQ(cur, f.child.pid());
        EXPECT_EQ(links, depth);
        EXPECT_TRUE(children_of(f.holder).empty());
        EXPECT_EQ(descendants_of(f.child.pid()).size(), static_cast<size_t>(depth));
    }
}

TEST(FixtureShapes, ForkStormKeepsForkingShortLivedChildren) {
    auto f = start({.shape = "fork-storm", .fork_rate = 100});
    std::vector<pid_t> helpers = children_of(f.child.pid());
    ASSERT_EQ(helpers.size(), 2u);
    EXPECT_TRUE(contains(helpers, f.holder));
    pid_t stormer = helpers[0] == f.holder ? helpers[1] : helpers[0];

    std::set<pid_t> seen_first, seen_all;
    for (pid_t p : children_of(stormer))
        seen_first.insert(p);
    bool fresh = wait_until(
        [&] {
            for (pid_t p : children_of(stormer))
                seen_all.insert(p);
            size_t new_ones = 0;
            for (pid_t p : seen_all)
                new_ones += seen_first.count(p) == 0;
            return new_ones >= 10;
        },
        std::chrono::seconds(10));
    EXPECT_TRUE(fresh) << "saw " << seen_all.size() << " storm children";
    // They are short-lived: the first ones seen are gone (or zombies) a while later.
    EXPECT_TRUE(wait_until(
        [&] {
            return std::none_of(seen_first.begin(), seen_first.end(),
                                [](pid_t p) { return is_live(p); });
        },
        std::chrono::seconds(5)));
    EXPECT_TRUE(is_live(stormer));
}

TEST(FixtureShapes, EveryProcessKeepsTheEnvironmentItStartedWith) {
    for (const char* shape : {"normal", "setsid", "doublefork", "deep"}) {
        auto f = start({.shape = shape});
        auto tagged = live_tagged(f.child.tag());
        EXPECT_TRUE(contains(tagged, f.child.pid())) << shape;
        EXPECT_TRUE(contains(tagged, f.holder)) << shape;
        for (pid_t p : descendants_of(f.child.pid()))
            EXPECT_TRUE(contains(tagged, p)) << shape;
    }
}

TEST(FixtureShapes, HelpersDoNotHoldTheServersStdio) {
    auto f = start({.shape = "deep", .depth = 2});
    for (pid_t p : descendants_of(f.child.pid())) {
        for (int fd : {0, 1}) {
            char link[256] = {};
            std::string path = "/proc/" + std::to_string(p) + "/fd/" + std::to_string(fd);
            ssize_t n = ::readlink(path.c_str(), link, sizeof link - 1);
            ASSERT_GT(n, 0) << path;
            EXPECT_EQ(std::string(link), "/dev/null") << path;
        }
    }
}

// ---- protocol ----------------------------------------------------------------------------

TEST(FixtureProtocol, InitializeEchoesTheClientsVersion) {
    auto f = start({});
    ASSERT_TRUE(f.child.write_line(rpc_initialize(1, "2024-11-05")));
    auto r = read_response(f.child, 1, kAnswer);
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)["result"]["protocolVersion"], "2024-11-05");
    EXPECT_EQ((*r)["result"]["serverInfo"]["name"], "mcpwarden-fixture");
    EXPECT_TRUE((*r)["result"]["capabilities"].contains("tools"));

    ASSERT_TRUE(f.child.write_line(rpc_request(2, "initialize", nlohmann::json::object())));
    r = read_response(f.child, 2, kAnswer);
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)["result"]["protocolVersion"], "2025-06-18");
}

TEST(FixtureProtocol, ToolsListNamesTheTools) {
    auto f = start({});
    ASSERT_TRUE(f.child.write_line(rpc_tools_list("list")));
    auto r = read_response(f.child, "list", kAnswer);
    ASSERT_TRUE(r);
    std::set<std::string> names;
    for (const auto& t : (*r)["result"]["tools"])
        names.insert(t["name"].get<std::string>());
    EXPECT_EQ(names, (std::set<std::string>{"echo", "sleep", "big", "noise", "try"}));
}

TEST(FixtureProtocol, IdsComeBackByteForByte) {
    auto f = start({});
    for (std::string id : {R"(7)", R"(-12)", R"(1.5e3)", R"("a\"b\u00e9")", R"("")"}) {
        ASSERT_TRUE(f.child.write_line(R"({"jsonrpc":"2.0","id":)" + id + R"(,"method":"ping"})"));
        auto line = f.child.read_line(kAnswer);
        ASSERT_TRUE(line);
        EXPECT_EQ(*line, R"({"jsonrpc":"2.0","id":)" + id + R"(,"result":{}})");
    }
}

TEST(FixtureProtocol, EchoBigNoiseAndUnknownMethod) {
    auto f = start({});
    ASSERT_TRUE(f.child.write_line(rpc_tools_call(1, "echo", {{"text", "héllo \"world\"\n"}})));
    auto r = read_response(f.child, 1, kAnswer);
    ASSERT_TRUE(r);
    EXPECT_EQ(result_text(*r), "héllo \"world\"\n");

    ASSERT_TRUE(f.child.write_line(rpc_tools_call(2, "big", {{"bytes", 300000}})));
    r = read_response(f.child, 2, kAnswer);
    ASSERT_TRUE(r);
    EXPECT_EQ(result_text(*r).size(), 300000u);

    ASSERT_TRUE(f.child.write_line(rpc_tools_call(3, "noise")));
    auto noise = f.child.read_line(kAnswer);
    ASSERT_TRUE(noise);
    EXPECT_TRUE(nlohmann::json::parse(*noise, nullptr, false).is_discarded()) << *noise;
    r = read_response(f.child, 3, kAnswer);
    ASSERT_TRUE(r);

    ASSERT_TRUE(f.child.write_line(rpc_request(4, "no/such/method")));
    r = read_response(f.child, 4, kAnswer);
    ASSERT_TRUE(r);
    EXPECT_EQ((*r)["error"]["code"], -32601);
}

TEST(FixtureProtocol, NotificationsGetNoAnswerAndSleepDoesNotBlockOthers) {
    auto f = start({});
    // One write, so the order the fixture sees is fixed.
    ASSERT_TRUE(f.child.write(rpc_tools_call(1, "sleep", {{"seconds", 1.5}}) + "\n" +
                              rpc_initialized() + "\n" + rpc_request(2, "ping") + "\n"));
    auto first = f.child.read_line(kAnswer);
    ASSERT_TRUE(first);
    EXPECT_EQ(nlohmann::json::parse(*first)["id"], 2) << *first;
    auto second = f.child.read_line(kAnswer);
    ASSERT_TRUE(second);
    auto j = nlohmann::json::parse(*second);
    EXPECT_EQ(j["id"], 1) << *second;
    EXPECT_EQ(result_text(j), "slept");
}

TEST(FixtureProtocol, LogsGoToStderrOnly) {
    auto f = start_fixture({}, {.capture_stderr = true}, kStart);
    ASSERT_TRUE(f);
    ASSERT_TRUE(f->child.write_line(rpc_request(1, "ping")));
    ASSERT_TRUE(read_response(f->child, 1, kAnswer));
    f->child.close_stdin();
    ASSERT_TRUE(f->child.wait_exit(kAnswer));
    EXPECT_NE(f->child.read_stderr(std::chrono::milliseconds(200)).find("mcpwarden-fixture"),
              std::string::npos);
}

// The official SDK client (tests/e2e, installed by scripts/deps.sh) accepts the fixture, and
// even its clean close() leaves the fixture's setsid helper behind: the problem mcpwarden
// exists for, shown with a real client.
TEST(FixtureProtocol, OfficialSdkClientTalksToItAndItsCleanCloseStillLeaks) {
    std::string e2e = std::string(kSourceDir) + "/tests/e2e";
    if (::access((e2e + "/node_modules/@modelcontextprotocol/sdk/package.json").c_str(), R_OK) != 0)
        GTEST_SKIP() << "npm test peers not installed (scripts/deps.sh)";
    TempDir dir;
    TestChild client({"node", e2e + "/sdk_client.mjs", "--call", "echo", "--args",
                      R"({"text":"über"})", "--", kFixture, "--shape", "setsid", "--port-file",
                      dir.file("port")});
    if (!client.started()) GTEST_SKIP() << client.error();
    client.close_stdin();
    auto line = client.read_line(std::chrono::seconds(60));
    ASSERT_TRUE(line);
    auto j = nlohmann::json::parse(*line, nullptr, false);
    ASSERT_TRUE(j.is_object()) << *line;
    EXPECT_EQ(j["ok"], true) << *line;
    EXPECT_EQ(j["serverInfo"]["name"], "mcpwarden-fixture");
    EXPECT_EQ(j["tools"].size(), 5u);
    EXPECT_EQ(result_text(j["calls"][0]), "über");
    auto st = client.wait_exit(std::chrono::seconds(30));
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");

    auto port = read_port_file(dir.file("port"));
    ASSERT_TRUE(port);
    EXPECT_FALSE(port_bindable(*port));
    EXPECT_EQ(live_tagged(client.tag()).size(), 1u);  // the setsid helper, alone
    EXPECT_TRUE(client.tree().kill_all());
    EXPECT_TRUE(live_tagged(client.tag()).empty());
    EXPECT_TRUE(wait_until([&] { return port_bindable(*port); }, std::chrono::seconds(5)));
}

TEST(FixtureFlags, ReadyFileNamesTheServerAndPidFileTheHolder) {
    TempDir dir;
    auto f = start({.extra_args = {"--ready-file", dir.file("ready")}});
    EXPECT_EQ(read_pid_file(dir.file("ready")), f.child.pid());
    EXPECT_TRUE(contains(children_of(f.child.pid()), f.holder));
}

TEST(FixtureFlags, RejectsAnUnknownShapeByName) {
    TestChild c({kFixture, "--shape", "spiral"}, {.capture_stderr = true});
    ASSERT_TRUE(c.started()) << c.error();
    auto st = c.wait_exit(kAnswer);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 2");
    EXPECT_NE(c.read_stderr(kAnswer).find("--shape: unknown shape 'spiral'"), std::string::npos);
}

// ---- stdin EOF -----------------------------------------------------------------------------

TEST(FixtureEof, ExitExitsOnStdinClose) {
    auto f = start({});
    f.child.close_stdin();
    auto st = f.child.wait_exit(kAnswer);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");
}

TEST(FixtureEof, ExitExitsOnStdinCloseEvenWhileSleeping) {
    auto f = start({});
    ASSERT_TRUE(f.child.write_line(rpc_tools_call(1, "sleep", {{"seconds", 3600}})));
    f.child.close_stdin();
    auto st = f.child.wait_exit(kAnswer);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");
}

TEST(FixtureEof, IgnoreKeepsRunningAfterStdinClose) {
    auto f = start({.on_eof_ignore = true});
    f.child.close_stdin();
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    EXPECT_FALSE(f.child.wait_exit(std::chrono::milliseconds(0)));
    EXPECT_TRUE(is_live(f.child.pid()));
}

// ---- the leak is real, and the guard cleans it --------------------------------------------

class FixtureLeak : public ::testing::TestWithParam<const char*> {};

// Negative control for every containment test: SIGKILL of the server alone leaves the tree
// (and its port) behind. Only the TreeGuard's tag walk gets rid of it.
TEST_P(FixtureLeak, KillingOnlyTheServerLeavesThePortHeldUntilTheGuardCleans) {
    auto f = start({.shape = GetParam()});
    std::string tag = f.child.tag();
    ASSERT_TRUE(f.child.signal(SIGKILL));
    ASSERT_TRUE(f.child.wait_exit(kAnswer));

    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    EXPECT_TRUE(is_live(f.holder));
    EXPECT_FALSE(port_bindable(f.port));
    EXPECT_FALSE(live_tagged(tag).empty());

    EXPECT_TRUE(f.child.tree().kill_all());
    EXPECT_EQ(live_tagged(tag), std::vector<pid_t>{});
    EXPECT_TRUE(wait_until([&] { return port_bindable(f.port); }, std::chrono::seconds(5)));
}

TEST_P(FixtureLeak, TestChildDestructorLeavesZeroRemnants) {
    std::string tag;
    uint16_t port = 0;
    {
        auto f = start({.shape = GetParam()});
        tag = f.child.tag();
        port = f.port;
        EXPECT_FALSE(port_bindable(port));
        EXPECT_GE(live_tagged(tag).size(), 2u);
    }
    EXPECT_EQ(live_tagged(tag), std::vector<pid_t>{});
    EXPECT_TRUE(wait_until([&] { return port_bindable(port); }, std::chrono::seconds(5)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, FixtureLeak,
                         ::testing::Values("normal", "setsid", "doublefork", "ignore-term", "deep",
                                           "fork-storm"),
                         [](const auto& param_info) {
                             std::string s = param_info.param;
                             std::replace(s.begin(), s.end(), '-', '_');
                             return s;
                         });

// ---- the helpers themselves -----------------------------------------------------------------

TEST(TestChildHelper, ReportsExecFailure) {
    TestChild c({"/nonexistent/warden-binary"});
    EXPECT_FALSE(c.started());
    EXPECT_EQ(c.error(), "exec(/nonexistent/warden-binary): No such file or directory");
}

TEST(TestChildHelper, PassesEnvAndSession) {
    TestChild c({"/bin/sh", "-c", "echo \"$FOO\"; cat"},
                {.env = {{"FOO", "bar baz"}}, .tag = "fixed-tag", .new_session = true});
    ASSERT_TRUE(c.started()) << c.error();
    EXPECT_EQ(c.read_line(kAnswer), "bar baz");
    EXPECT_EQ(env_value(c.pid(), kTagVar), "fixed-tag");
    EXPECT_EQ(stat_of(c.pid()).sid, c.pid());
    c.close_stdin();
    auto st = c.wait_exit(kAnswer);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "exited 0");
}

TEST(TreeGuardHelper, NeverSignalsAProcessWhoseIdentityChanged) {
    TestChild bystander({"/bin/sleep", "30"});
    ASSERT_TRUE(bystander.started()) << bystander.error();
    uint64_t start = stat_of(bystander.pid()).starttime;
    {
        // A recorded identity with another starttime: the pid was "recycled".
        TreeGuard g;
        g.add(bystander.pid(), start + 1);
        EXPECT_TRUE(g.live_members().empty());
        EXPECT_TRUE(g.kill_all());
    }
    EXPECT_TRUE(is_same_live_process(bystander.pid(), start));
    {
        // Positive control: the true identity is killed.
        TreeGuard g;
        g.add(bystander.pid(), start);
        EXPECT_EQ(g.live_members(), std::vector<pid_t>{bystander.pid()});
    }
    auto st = bystander.wait_exit(kAnswer);
    ASSERT_TRUE(st);
    EXPECT_EQ(describe_status(*st), "killed by signal 9");
}

TEST(UtilHelper, PortBindableSeesAListener) {
    auto f = start({});
    EXPECT_FALSE(port_bindable(f.port));
    uint16_t free_port = 0;
    for (uint16_t p = 20000; p < 20100 && !free_port; ++p)
        if (port_bindable(p)) free_port = p;
    EXPECT_NE(free_port, 0);
}

}  // namespace
}  // namespace warden::testing
