// `mcpwarden drill` through the built binary, on every fixture shape: what the drill reports
// must be what the fixture is known to do, and nothing may be left after the command returns.
//
// Every run is a TestChild, so everything it starts — the shim, the fixture trees of the
// direct trials, their setsid and double-forked escapees — carries the test's tag: the tag
// oracle (live_tagged) sees leftovers wherever they went, and the TreeGuard kills them if an
// assertion fails.
#include <sys/wait.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/json_doc.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

std::string read_text(const std::string& path) {
    std::ifstream f(path);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
}

nlohmann::json parse(const CliRun& r) {
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "stdout is not JSON:\n" << r.out << "\nstderr:\n" << r.err;
    return j;
}

const nlohmann::json& trial(const nlohmann::json& j, const std::string& mode) {
    static const nlohmann::json none = nlohmann::json::object();
    if (!j.contains("trials")) return none;
    for (const auto& t : j["trials"])
        if (t.value("mode", "") == mode) return t;
    return none;
}

std::vector<std::string> fixture_cmd(const std::string& shape) {
    return {kFixture, "--shape", shape, "--on-eof", "exit"};
}

std::vector<std::string> drill_args(std::vector<std::string> opts,
                                    const std::vector<std::string>& server) {
    std::vector<std::string> a = {"drill", "--json"};
    a.insert(a.end(), opts.begin(), opts.end());
    a.push_back("--");
    a.insert(a.end(), server.begin(), server.end());
    return a;
}

const std::vector<std::string> kSleepCall = {"--tool", "sleep", "--args", R"({"seconds":60})"};

// ---- each shape: what the fixture is known to do ---------------------------------------

struct ShapeCase {
    const char* shape;
    const char* helpers_field;  // how its one helper must have ended
};

class DrillShape : public ::testing::TestWithParam<ShapeCase> {};

TEST_P(DrillShape, OutcomeMatchesTheFixture) {
    const ShapeCase c = GetParam();
    TempDir dir;
    auto opts = kSleepCall;
    opts.insert(opts.end(), {"--term-grace", "800ms"});
    auto r = run_cli(dir, drill_args(opts, fixture_cmd(c.shape)));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto j = parse(r);
    const auto& t = trial(j, "shim");
    ASSERT_FALSE(t.empty()) << r.out;
    // The fixture exits on EOF (--on-eof exit); its helper holds a port and never exits by
    // itself: SIGTERM ends it, unless it ignores SIGTERM.
    EXPECT_EQ(t["server_fate"], "exited on EOF") << t.dump(2);
    EXPECT_EQ(t["helpers"], 1) << t.dump(2);
    EXPECT_EQ(t[c.helpers_field], 1) << t.dump(2);
    EXPECT_EQ(t["ports"].size(), 1u) << t.dump(2);
    EXPECT_EQ(t["processes_left"], 0) << t.dump(2);
    EXPECT_FALSE(t["port_held"].get<bool>()) << t.dump(2);
    EXPECT_GE(t["released_ms"].get<double>(), 0) << t.dump(2);
    EXPECT_GE(t["run_exit_ms"].get<double>(), 0) << t.dump(2);
    EXPECT_EQ(t["call"], "tools/call sleep");
    EXPECT_EQ(t["journal"]["abandoned"], true) << t.dump(2);
    EXPECT_TRUE(t["journal"]["order_ok"].get<bool>()) << t["journal"].dump(2);
    EXPECT_GE(t["journal"]["signals"].get<int>(), 1);
    EXPECT_TRUE(j["verify"]["ok"].get<bool>()) << j["verify"].dump();
    EXPECT_TRUE(j["ok"].get<bool>());
    EXPECT_TRUE(r.left_after.empty()) << r.left_after.size() << " processes left";
    EXPECT_TRUE(r.cgroups_left.empty()) << "cgroups left:" << cgroups_left_text(r);
}

INSTANTIATE_TEST_SUITE_P(Shapes, DrillShape,
                         ::testing::Values(ShapeCase{"normal", "helpers_needed_sigterm"},
                                           ShapeCase{"setsid", "helpers_needed_sigterm"},
                                           ShapeCase{"doublefork", "helpers_needed_sigterm"},
                                           ShapeCase{"ignore-term", "helpers_needed_sigkill"}),
                         [](const ::testing::TestParamInfo<ShapeCase>& p) {
                             std::string s = p.param.shape;
                             for (char& ch : s)
                                 if (ch == '-') ch = '_';
                             return s;
                         });

// ---- --compare-direct: what would have leaked, then nothing --------------------------------

TEST(Drill, CompareDirectShowsTheLeakAndLeavesNothing) {
    TempDir dir;
    auto opts = kSleepCall;
    opts.insert(opts.end(), {"--compare-direct", "--eof-grace", "300ms", "--term-grace", "500ms"});
    auto r = run_cli(dir, drill_args(opts, fixture_cmd("setsid")));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto j = parse(r);
    const auto& direct = trial(j, "direct");
    const auto& shim = trial(j, "shim");
    ASSERT_FALSE(direct.empty()) << r.out;
    ASSERT_FALSE(shim.empty()) << r.out;
    // Without mcpwarden the server exits on EOF but its setsid helper stays, port and all.
    EXPECT_EQ(direct["server_fate"], "exited on EOF") << direct.dump(2);
    EXPECT_GT(direct["processes_left"].get<int>(), 0) << direct.dump(2);
    EXPECT_GT(direct["mb_left"].get<double>(), 0.0);
    EXPECT_TRUE(direct["port_held"].get<bool>());
    EXPECT_LT(direct["released_ms"].get<double>(), 0);
    EXPECT_GT(direct["cleaned_up"].get<int>(), 0);
    EXPECT_TRUE(direct["clean_after"].get<bool>());
    EXPECT_FALSE(direct.contains("journal"));
    // With it: nothing.
    EXPECT_EQ(shim["processes_left"], 0) << shim.dump(2);
    EXPECT_FALSE(shim["port_held"].get<bool>());
    EXPECT_EQ(shim["cleaned_up"], 0);
    // Both modes, a tree with a helper, a port, leftovers, the journal's account: every key
    // is in the schema document.
    EXPECT_EQ(j["schema"], "mcpwarden.drill");
    EXPECT_EQ(undocumented_keys(j, {schema_doc("drill-json.md")}), std::vector<std::string>{});
    // The oracle: nothing carrying the test's tag survived the command, and no cgroup.
    EXPECT_TRUE(r.left_after.empty()) << r.left_after.size() << " processes left";
    EXPECT_TRUE(r.cgroups_left.empty()) << "cgroups left:" << cgroups_left_text(r);
}

// Negative control for the oracle: the same leak, made by hand, is seen by it.
TEST(Drill, OracleSeesASetsidEscapee) {
    TempDir dir;
    TestChild c(
        {kFixture, "--shape", "setsid", "--on-eof", "exit", "--port-file", dir.file("port")});
    ASSERT_TRUE(c.started()) << c.error();
    ASSERT_TRUE(wait_for_file(dir.file("port"), 10s));
    c.close_stdin();
    ASSERT_TRUE(c.wait_exit(5s).has_value());
    EXPECT_EQ(live_tagged(c.tag()).size(), 1u);  // the setsid helper, reparented
    EXPECT_TRUE(c.tree().kill_all());
    EXPECT_TRUE(live_tagged(c.tag()).empty());
}

// ---- crash points -----------------------------------------------------------------------

TEST(Drill, DefaultCallIsToolsListOnly) {
    TempDir dir;
    auto r = run_cli(dir, drill_args({}, fixture_cmd("normal")));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto j = parse(r);
    EXPECT_EQ(j["call"], "tools/list");
    const auto& t = trial(j, "shim");
    EXPECT_EQ(t["call"], "tools/list");
    // A fast answer may beat the kill; either way the journal says which.
    EXPECT_TRUE(t["journal"]["abandoned"].is_boolean()) << t.dump(2);
    for (const auto& line : t["journal"]["excerpt"])
        EXPECT_EQ(line.get<std::string>().find("tools/call"), std::string::npos) << line;
    EXPECT_TRUE(r.left_after.empty());
}

// The drill's client says who it is as a client does, with this build's version (the journal
// keeps it in session.protocol): what the server reads, through a tee in front of it.
TEST(Drill, ItsClientNamesItselfWithTheBuildsVersion) {
    TempDir dir;
    auto v = run_cli(dir, {"--version"});
    ASSERT_EQ(v.code, 0) << v.err;
    ASSERT_EQ(v.out.rfind("mcpwarden ", 0), 0u) << v.out;
    const std::string version = v.out.substr(10, v.out.find('\n') - 10);
    const std::string seen = dir.file("seen");
    auto r = run_cli(
        dir,
        drill_args({}, {"/bin/sh", "-c", "tee -a \"$0\" | exec \"$1\" --shape normal --on-eof exit",
                        seen, kFixture}));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    std::istringstream lines(read_text(seen));
    int initializes = 0;
    for (std::string line; std::getline(lines, line);) {
        auto m = nlohmann::json::parse(line, nullptr, false);
        if (m.is_discarded() || m.value("method", "") != "initialize") continue;
        ++initializes;
        EXPECT_EQ(m["params"]["clientInfo"]["name"], "mcpwarden-drill") << line;
        EXPECT_EQ(m["params"]["clientInfo"]["version"], version) << line;
    }
    EXPECT_GE(initializes, 1) << read_text(seen);
    EXPECT_TRUE(r.left_after.empty());
}

TEST(Drill, BeforeInitAndIdleHaveNothingInFlight) {
    for (const char* at : {"before-init", "idle"}) {
        TempDir dir;
        auto r = run_cli(dir, drill_args({"--crash-at", at}, fixture_cmd("setsid")));
        ASSERT_EQ(r.code, 0) << at << "\n" << r.out << r.err;
        auto j = parse(r);
        const auto& t = trial(j, "shim");
        EXPECT_EQ(t["crash_at"], at);
        EXPECT_EQ(t["call"], "");
        EXPECT_TRUE(t["journal"]["abandoned"].is_null()) << t.dump(2);
        EXPECT_EQ(t["processes_left"], 0);
        EXPECT_EQ(t["helpers_needed_sigterm"], 1) << t.dump(2);
        EXPECT_TRUE(r.left_after.empty()) << at;
    }
}

TEST(Drill, MidResponseAbandonsTheCallBeingAnswered) {
    TempDir dir;
    auto r = run_cli(dir, drill_args({"--crash-at", "mid-response", "--tool", "big", "--args",
                                      R"({"bytes":16777216})"},
                                     fixture_cmd("normal")));
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    auto j = parse(r);
    const auto& t = trial(j, "shim");
    EXPECT_FALSE(t["answered"].get<bool>()) << t.dump(2);
    bool partial = false;
    for (const auto& n : t["notes"])
        partial = partial || n.get<std::string>().find("killed after") != std::string::npos;
    EXPECT_TRUE(partial) << t["notes"].dump();
    EXPECT_EQ(t["journal"]["abandoned"], true) << t.dump(2);
    EXPECT_EQ(t["processes_left"], 0);
    EXPECT_TRUE(r.left_after.empty());
}

TEST(Drill, TextReportAndMarkdown) {
    TempDir dir;
    std::vector<std::string> a = {"drill", "--markdown", dir.file("drill.md")};
    a.insert(a.end(), kSleepCall.begin(), kSleepCall.end());
    a.push_back("--");
    for (const auto& s : fixture_cmd("doublefork"))
        a.push_back(s);
    auto r = run_cli(dir, a);
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("client SIGKILLed with tools/call sleep in flight"), std::string::npos)
        << r.out;
    EXPECT_NE(r.out.find("activity.abandoned"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("drill passed"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "colour without a TTY";
    // A file path cannot be wrapped; every other line fits 80 columns.
    for (size_t at = 0, nl; (nl = r.out.find('\n', at)) != std::string::npos; at = nl + 1)
        if (r.out.substr(at, nl - at).find("/tmp/") == std::string::npos) {
            EXPECT_LE(columns(r.out.substr(at, nl - at)), 80u) << r.out.substr(at, nl - at);
        }
    EXPECT_NE(r.err.find("temporary journal"), std::string::npos) << r.err;
    auto md = read_text(dir.file("drill.md"));
    EXPECT_NE(md.find("| trial | server |"), std::string::npos) << md;
    EXPECT_TRUE(r.left_after.empty());
}

// A server that answers at once and ends on EOF with nothing else in its tree (most real
// servers): the call is usually answered before the kill, and nothing needs a signal. Both
// are findings about the server, not failures of containment: the drill passes and says so.
TEST(Drill, AServerTooQuickToCatchInFlightIsAFindingNotAFailure) {
    TempDir dir;
    const std::string server = R"(import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m: continue
    r = {"tools": []}
    if m["method"] == "initialize":
        r = {"protocolVersion": m["params"]["protocolVersion"], "capabilities": {"tools": {}},
             "serverInfo": {"name": "quick", "version": "1"}}
    print(json.dumps({"jsonrpc": "2.0", "id": m["id"], "result": r}), flush=True)
)";
    auto r = run_cli(dir, {"drill", "--crash-at", "in-flight", "--markdown", dir.file("d.md"), "--",
                           "python3", "-c", server});
    ASSERT_EQ(r.code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("drill passed"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
    auto md = read_text(dir.file("d.md"));
    EXPECT_NE(md.find("- snapshot -> signal -> exit: yes"), std::string::npos) << md;
    if (md.find("in-flight call abandoned: no (answered)") != std::string::npos) {
        EXPECT_NE(r.out.find("tools/list was answered before the crash: no call was in flight"),
                  std::string::npos)
            << r.out;
    } else {
        EXPECT_NE(md.find("in-flight call abandoned: yes"), std::string::npos) << md;
    }
    EXPECT_TRUE(r.left_after.empty());
}

// ---- usage errors -----------------------------------------------------------------------

TEST(Drill, UsageErrorsNameTheProblem) {
    TempDir dir;
    auto bad = run_cli(dir, {"drill", "--crash-at", "lunch", "--", kFixture});
    EXPECT_EQ(bad.code, 2);
    EXPECT_NE(bad.err.find("--crash-at: expected before-init, idle, in-flight or mid-response, "
                           "got 'lunch'"),
              std::string::npos)
        << bad.err;
    auto none = run_cli(dir, {"drill"});
    EXPECT_EQ(none.code, 2);
    EXPECT_NE(none.err.find("no server command given"), std::string::npos) << none.err;
    auto args = run_cli(dir, {"drill", "--tool", "echo", "--args", "[1", "--", kFixture});
    EXPECT_EQ(args.code, 2);
    EXPECT_NE(args.err.find("--args: expected a JSON object, got '[1'"), std::string::npos)
        << args.err;
}

TEST(Drill, ACommandThatDoesNotExistIsAnErrorNotAPass) {
    TempDir dir;
    auto r = run_cli(dir, drill_args({}, {dir.file("no-such-server")}));
    EXPECT_EQ(r.code, 1) << r.out << r.err;
    auto j = parse(r);
    EXPECT_TRUE(trial(j, "shim").contains("error")) << r.out;
    EXPECT_FALSE(j["ok"].get<bool>());
    EXPECT_EQ(undocumented_keys(j, {schema_doc("drill-json.md")}), std::vector<std::string>{});
    EXPECT_TRUE(r.left_after.empty());
}

}  // namespace
}  // namespace warden::testing
