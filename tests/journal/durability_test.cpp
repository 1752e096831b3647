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

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <memory>

#include "common/cli_run.hpp"
#include "common/procfs.hpp"
#include "common/testing.hpp"
#include "journal/query.hpp"
#include "journal/verify.hpp"

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

// The records of the journal `db` as (kind, data), in seq order, and the seq of the last.
struct Log {
    std::vector<std::pair<std::string, nlohmann::json>> records;
    int64_t last_seq = 0;
};
Log read_log(const std::string& db) {
    Log log;
    (void)journal::for_each_record(db, 0, [&](const journal::Record& r) {
        log.records.emplace_back(r.kind, nlohmann::json::parse(r.body)["data"]);
        log.last_seq = r.seq;
        return true;
    });
    return log;
}

// One `mcpwarden run` of the fixture on `db` whose client leaves at once, in `cgroup` (when
// given and the test can make one). `status`: its exit status once `run` exited (its keeper
// reaped before). The child stays, with its tree guard, until the caller is done. `fault`:
// MCPWARDEN_FAULT.
struct EndedRun {
    std::unique_ptr<TestChild> child;
    std::optional<int> status;
};
EndedRun run_to_its_end(const std::string& db, const std::string& fault,
                        ScratchCgroup* cgroup = nullptr) {
    std::vector<std::string> argv = {
        kCli, "run", "--eof-grace", "1s", "--term-grace", "1s", "--journal", db, "--", kFixture};
    if (cgroup && cgroup->valid())
        argv.insert(argv.begin(), {"/bin/sh", "-c", "echo 0 > \"$0/cgroup.procs\" && exec \"$@\"",
                                   cgroup->path()});
    ChildOptions o;
    o.env = {{"MCPWARDEN_FAULT", fault}};
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    EndedRun r;
    r.child = std::make_unique<TestChild>(argv, o);
    if (!r.child->started()) return r;
    r.child->close_stdin();
    r.status = r.child->wait_exit(30s);
    return r;
}

// `run` exits once its session.end is committed (in the WAL through write()) and its keeper is
// reaped; under --journal-sync periodic the WAL's fsync, the checkpoint's file and the WAL's
// copy into the database are left to the next writer (src/journal/journal.cpp, "Durability").
// What a user sees the moment `run` exits: no session cgroup left, the session ended, by the
// relay, last in order, a journal that verifies with nothing unanchored, and the newest
// checkpoint without its file; the next writer to open the journal (here `journal
// reconcile`, which finds nothing to do and appends nothing) writes it. Negative control:
// with that guard off (journal_owed_file) the next writer leaves it missing.
TEST(JournalDurability, RunExitsOnceItsEndIsCommittedAndTheNextWriterWritesTheFileOwed) {
    TempDir dir;
    const std::string db = dir.file("journal.db");
    ScratchCgroup cgroup("wtest-settle-" + unique_tag());
    auto r = run_to_its_end(db, "", &cgroup);
    ASSERT_TRUE(r.status && WIFEXITED(*r.status)) << "run did not exit in time";
    EXPECT_EQ(WEXITSTATUS(*r.status), 0);
    // The session cgroup went before the keeper's report, so before `run`'s exit: whoever
    // ends what is left of the session the moment `run` exits leaves nothing behind.
    if (cgroup.valid()) {
        EXPECT_TRUE(cgroup.children().empty())
            << "the session cgroup outlived run: " << cgroup.children().front();
    }

    Log log = read_log(db);
    ASSERT_GE(log.records.size(), 3u);
    const auto& [end_kind, end] = log.records[log.records.size() - 2];
    const auto& [cp_kind, cp] = log.records.back();
    EXPECT_EQ(end_kind, "session.end");
    EXPECT_FALSE(end.contains("recorded_by")) << "recorded by the relay, not its keeper";
    EXPECT_EQ(cp_kind, "checkpoint");
    EXPECT_EQ(cp.value("reason", ""), "session_end");
    journal::VerifyOptions vo;
    vo.path = db;
    auto v = journal::verify(vo);
    EXPECT_EQ(v.exit_code, 0) << v.reason;
    EXPECT_EQ(v.unanchored, 0);
    EXPECT_EQ(v.last_checkpoint_seq, log.last_seq);

    const std::string file = fmt::format("{}/checkpoints/{}", dir.path(), log.last_seq);
    EXPECT_FALSE(std::filesystem::exists(file)) << "the file is the next writer's";

    auto unguarded = run_cli(dir, {"journal", "reconcile", "--journal", db}, 30s,
                             {{"MCPWARDEN_FAULT", "journal_owed_file"}});
    EXPECT_EQ(unguarded.code, 0) << unguarded.err;
    EXPECT_FALSE(std::filesystem::exists(file)) << "the guard is off: the file stays missing";

    auto next = run_cli(dir, {"journal", "reconcile", "--journal", db}, 30s);
    EXPECT_EQ(next.code, 0) << next.err;
    EXPECT_TRUE(std::filesystem::exists(file)) << "the next writer did not write the file owed";
    EXPECT_EQ(read_log(db).last_seq, log.last_seq) << "nothing appended, nothing lost";
    auto again = journal::verify(vo);
    EXPECT_EQ(again.exit_code, 0) << again.reason;
}

}  // namespace
}  // namespace warden::testing
