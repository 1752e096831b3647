// Process-crash durability without an fsync per request (--journal-sync periodic, the
// default): the relay and the keeper SIGKILLed at random points of a busy session, in random
// order, and every request whose answer the client read — so every request that was
// forwarded — is on record afterwards, in a journal that still verifies.
#include <signal.h>
#include <chrono>
#include <thread>

#include <algorithm>
#include <chrono>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/procfs.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

struct KillRound {
    int answered_before_kill;
    int victims;  // 1: relay, 2: keeper, 3: both
    bool keeper_first;
};

std::set<int64_t> recorded_request_ids(const std::string& db) {
    std::set<int64_t> ids;
    (void)journal::for_each_record(db, 0, [&](const journal::Record& r) {
        if (r.kind != "activity.request") return true;
        auto d = nlohmann::json::parse(r.body)["data"];
        if (d["id"].contains("n")) ids.insert(d["id"]["n"].get<int64_t>());
        return true;
    });
    return ids;
}

// Signals `pid` only while it is still the process seen with `starttime` (never a recycled pid).
void kill_if_same(pid_t pid, uint64_t starttime) {
    if (is_same_live_process(pid, starttime)) ::kill(pid, SIGKILL);
}

// With relay and keeper both killed nobody removes the session cgroup: the round does, once
// its tree is gone (bounded: 100 tries, 20 ms apart).
struct SessionCgroup {
    std::string payload;
    ~SessionCgroup() {
        for (int i = 0; i < 100 && !remove_session_cgroup(payload); ++i)
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
};

TEST(JournalDurability, KilledRelayAndKeeperLoseNoForwardedRequest) {
    TempDir dir;
    std::string db = dir.file("journal.db");
    std::mt19937 rng(std::random_device{}());
    std::vector<KillRound> rounds;
    for (int i = 0; i < 6; ++i)
        rounds.push_back({std::uniform_int_distribution<int>(1, 40)(rng),
                          std::uniform_int_distribution<int>(1, 3)(rng),
                          std::uniform_int_distribution<int>(0, 1)(rng) == 1});
    int64_t next_id = 1;
    std::set<int64_t> answered;
    for (const auto& round : rounds) {
        SCOPED_TRACE(::testing::Message() << "answered before kill " << round.answered_before_kill
                                          << ", victims " << round.victims);
        SessionCgroup cgroup;  // destroyed after `c` and its tree guard
        TestChild c({kCli, "run", "--eof-grace", "200ms", "--term-grace", "300ms", "--journal", db,
                     "--", kFixture},
                    {.capture_stderr = true});
        ASSERT_TRUE(c.started()) << c.error();
        for (int k = 0; k < round.answered_before_kill; ++k) {
            int64_t id = next_id++;
            ASSERT_TRUE(c.write_line(rpc_tools_call(id, "echo", {{"text", std::to_string(id)}})));
            ASSERT_TRUE(read_response(c, id, 10s)) << "id " << id;
            answered.insert(id);
        }
        // One more request on its way while the processes die: it may or may not be
        // forwarded, and is not counted either way.
        auto relay = read_stat(c.pid());
        ASSERT_TRUE(relay);
        std::optional<ProcStat> keeper;
        for (pid_t kid : children_of(c.pid()))
            if (auto s = read_stat(kid); s && s->comm == "mcpwarden-keep") keeper = s;
        ASSERT_TRUE(keeper) << "no keeper under the relay";
        for (pid_t server : children_of(keeper->pid))
            if (auto cg = cgroup_of(server); !cg.empty()) cgroup.payload = cg;
        ASSERT_TRUE(c.write_line(rpc_tools_call(next_id++, "echo", {{"text", "in flight"}})));
        std::vector<std::pair<pid_t, uint64_t>> victims;
        if (round.victims & 1) victims.emplace_back(relay->pid, relay->starttime);
        if (round.victims & 2) victims.emplace_back(keeper->pid, keeper->starttime);
        if (round.keeper_first) std::reverse(victims.begin(), victims.end());
        for (auto [pid, start] : victims)
            kill_if_same(pid, start);
        // Only the relay's death ends `run`; with the keeper alone killed, the relay tears the
        // tree down itself and exits once the client leaves.
        c.close_stdin();
        ASSERT_TRUE(c.wait_exit(20s));
        // With both killed, what the server started may outlive it (reap's job, not this
        // test's): TestChild's guard removes the tagged tree at the end of the round.
    }
    // A request is on record once its intent is written (src/journal/journal.cpp, "Intents");
    // with relay and keeper both killed, it is chained by whoever finds the intent file: the
    // next run's dead-session worker (in the background) or, here, `journal reconcile`.
    auto rec = run_cli(dir, {"journal", "reconcile", "--journal", db}, 30s);
    EXPECT_EQ(rec.code, 0) << rec.out << rec.err;
    auto recorded = recorded_request_ids(db);
    std::vector<int64_t> missing;
    for (auto id : answered)
        if (!recorded.count(id)) missing.push_back(id);
    EXPECT_TRUE(missing.empty()) << missing.size() << " answered requests not on record, first "
                                 << (missing.empty() ? 0 : missing.front());
    auto v = run_cli(dir, {"audit", "verify", "--journal", db}, 30s);
    EXPECT_EQ(v.code, 0) << "the journal no longer verifies:\n" << v.out << v.err;
}

}  // namespace
}  // namespace warden::testing
