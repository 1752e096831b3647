// Codex's stop sequence against the real server-everything through `mcpwarden run`: Codex
// starts its server in a process group of its own, and at the end of a run closes its stdin,
// SIGTERMs the group and SIGKILLs the relay 270-640 ms later (docs/CLIENTS.md, "Stop
// sequences"). server-everything does not exit on EOF (its timers keep node running), so the
// SIGKILL finds the relay in its EOF window, before it asked for the teardown: the keeper,
// in a group of its own, tears down by itself, and must record the session's end with the
// teardown's report. The journal is read with `journal show` once the keeper is gone. The
// negative control switches the keeper's session.end off (MCPWARDEN_FAULT=keeper_session_end):
// the session is then left without an end (`client_lost`, or `running` when the relay died
// before it read the SIGTERM), as it was.
// Label: e2e (needs node and tests/e2e/node_modules; skipped without them).
#include <signal.h>
#include <sys/wait.h>

#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/e2e.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

// Prints a CLI command's stdout (30 s at most).
std::string cli_out(const std::vector<std::string>& argv) {
    TestChild c(argv);
    if (!c.started()) return {};
    c.close_stdin();
    std::string out = c.read_all_stdout(30s);
    c.wait_exit(10s);
    return out;
}

struct Ended {
    std::string state;          // `journal sessions`' state
    nlohmann::json end;         // the session.end record, null if none
    bool nothing_left = false;  // the keeper and the tree gone within the bound
};

// Plays Codex's sequence with the SIGKILL `kill_after` the SIGTERM; reads the journal once
// every process of the session is gone.
Ended codex_stops(Millis kill_after, const std::string& fault = {}) {
    Ended e;
    TempDir dir;
    const std::string journal = dir.file("journal.db");
    ChildOptions co;
    co.new_process_group = true;  // Codex's process_group(0)
    co.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    if (!fault.empty()) co.env.push_back({"MCPWARDEN_FAULT", fault});
    TestChild relay({kCli, "run", "--name", "everything", "--journal", journal, "--", "node",
                     e2e_dir() + "/node_modules/@modelcontextprotocol/server-everything/dist/"
                                 "index.js",
                     "stdio"},
                    co);
    if (!relay.started()) return e;
    if (!relay.write_line(rpc_initialize(1)) || !read_response(relay, 1, 30s)) return e;
    ::kill(-relay.pid(), SIGTERM);
    relay.close_stdin();
    std::this_thread::sleep_for(kill_after);
    relay.signal(SIGKILL);
    relay.wait_exit(10s);
    // The keeper's teardown: its EOF window (1 s), SIGTERM, its grace; then the record.
    e.nothing_left = wait_until([&] { return live_tagged(relay.tag()).empty(); }, 15s);
    auto sessions = nlohmann::json::parse(
        cli_out({kCli, "journal", "sessions", "--json", "--journal", journal}), nullptr, false);
    if (!sessions.is_array() || sessions.size() != 1) return e;
    e.state = sessions[0].value("state", "");
    std::istringstream lines(cli_out({kCli, "journal", "show", sessions[0].value("session", ""),
                                      "--jsonl", "--journal", journal}));
    for (std::string line; std::getline(lines, line);) {
        auto j = nlohmann::json::parse(line, nullptr, false);
        if (j.is_object() && j.value("kind", "") == "session.end") e.end = j;
    }
    relay.tree().kill_all();
    return e;
}

class CodexStops : public ::testing::TestWithParam<int> {};

TEST_P(CodexStops, TheKeeperRecordsTheEndWithItsTeardown) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    Ended e = codex_stops(Millis(GetParam()));
    EXPECT_TRUE(e.nothing_left) << "the session's processes outlived the keeper's bound";
    EXPECT_EQ(e.state, "ended");
    ASSERT_TRUE(e.end.is_object()) << "no session.end on record";
    // client_lost once the relay had recorded the client's loss; relay_died when it was
    // killed before it read the SIGTERM.
    const std::string reason = e.end["data"].value("reason", "");
    EXPECT_TRUE(reason == "client_lost" || reason == "relay_died") << e.end.dump();
    EXPECT_TRUE(e.end["data"]["teardown"].is_object()) << e.end.dump();
    // Killed at once, the relay cannot have recorded it; later, whoever was left did (a
    // server that exits on EOF quickly lets the relay finish first).
    const std::string by = e.end["data"].value("recorded_by", "relay");
    RecordProperty("recorded_by", by);
    if (GetParam() == 0) {
        EXPECT_EQ(by, "keeper") << e.end.dump();
    }
}

// 0 ms: the relay killed with the SIGTERM; 30 ms: the quickest reproduction of what Codex
// does; 270 and 640 ms: Codex's measured range.
INSTANTIATE_TEST_SUITE_P(KillAfter, CodexStops, ::testing::Values(0, 30, 270, 640),
                         [](const auto& p) { return std::to_string(p.param) + "ms"; });

TEST(CodexStopsNegativeControl, WithoutTheKeepersRecordTheSessionIsLeftUnended) {
    if (!have_node_modules()) GTEST_SKIP() << "tests/e2e/node_modules or node absent";
    Ended e = codex_stops(0ms, "keeper_session_end");
    EXPECT_TRUE(e.nothing_left);
    EXPECT_NE(e.state, "ended");  // running, or client_lost had the relay recorded it
    EXPECT_TRUE(e.end.is_null()) << e.end.dump();
}

}  // namespace
}  // namespace warden::testing
