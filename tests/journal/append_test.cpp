// The append path: seqs, hashes exactly over the stored bytes, projections, order of
// posted vs appended events, checkpoints and their files.
#include <sched.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "common/procfs.hpp"
#include "journal/checkpoint.hpp"
#include "journal/journal.hpp"
#include "journal/verify.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using testing_util::query_int;
using testing_util::query_text;
using testing_util::TempDir;

TEST(Append, SeqsStartAtOneAndHashTheStoredBytes) {
    TempDir dir;
    auto j = Journal::open({.path = dir.path + "/journal.db"});
    ASSERT_TRUE(j.ok()) << j.error().message;
    auto a = (*j)->append(Event{"session.start", "s1", 123, Json{{"server_name", "fs"}}});
    ASSERT_TRUE(a.ok()) << a.error().message;
    EXPECT_EQ(a->seq, 1);
    auto b = (*j)->append(
        Event{"activity.request", "s1", 124,
              Json{{"id", rpc_id_number(17)}, {"method", "tools/call"}, {"tool", "read"}}});
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->seq, 2);

    std::string db = dir.path + "/journal.db";
    std::string body = query_text(db, "SELECT body FROM records WHERE seq = 1");
    auto origin = (*j)->origin();
    EXPECT_EQ(body, R"({"data":{"server_name":"fs"},"kind":"session.start","origin":")" + origin +
                        R"(","seq":1,"session":"s1","ts":123,"v":1})");
    Hash leaf = leaf_hash(body);
    Hash chain1 = chain_hash(Hash{}, leaf);
    EXPECT_EQ(query_text(db, "SELECT hex(chain) FROM records WHERE seq = 1"),
              testing_util::upper(to_hex(chain1)));
    EXPECT_EQ(testing_util::upper(to_hex(b->chain)),
              query_text(db, "SELECT hex(chain) FROM records WHERE seq = 2"));
    EXPECT_EQ(query_int(db, "SELECT seq FROM head"), 2);
    EXPECT_EQ(query_text(db, "SELECT request_id || ' ' || outcome FROM activity"),
              R"({"n":17} in_flight)");
}

// A writer that leaves its tail to the next one (the keeper, whose report the relay's
// session.end follows) signs nothing at close, nor when it is destroyed after that: an
// implicit second close signed what the first had left, a signature and three fsyncs on the
// keeper's way to its report. The control: the same writer anchoring its tail signs it.
TEST(Append, ATailLeftToTheNextWriterStaysUnsignedWhenTheJournalIsDestroyed) {
    TempDir dir;
    const std::string db = dir.path + "/journal.db";
    for (auto tail : {Journal::Tail::to_next_writer, Journal::Tail::anchor}) {
        auto j = Journal::open({.path = db});
        ASSERT_TRUE(j.ok()) << j.error().message;
        ASSERT_TRUE((*j)->append(Event{"session.start", "s1", 0, Json{{"server_name", "fs"}}}));
        ASSERT_TRUE((*j)->close(tail).ok());
        j->reset();
        EXPECT_EQ(query_int(db, "SELECT count(*) FROM checkpoints"),
                  tail == Journal::Tail::anchor ? 1 : 0);
    }
}

TEST(Append, FilesAndDirectoryArePrivate) {
    TempDir dir;
    std::string sub = dir.path + "/state/mcpwarden";
    auto j = Journal::open({.path = sub + "/journal.db"});
    ASSERT_TRUE(j.ok()) << j.error().message;
    struct stat st {};
    ASSERT_EQ(::stat(sub.c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0700u);
    ASSERT_EQ(::stat((sub + "/journal.db").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    ASSERT_EQ(::stat((sub + "/journal.key").c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(::access((sub + "/journal.pub").c_str(), R_OK), 0);
}

TEST(Append, PostedEventsKeepOrderBeforeASyncAppend) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    auto j = Journal::open({.path = db});
    ASSERT_TRUE(j.ok());
    (*j)->post(Event{"process.exit", "s", 0, Json{{"n", 1}}});
    (*j)->post(Event{"process.exit", "s", 0, Json{{"n", 2}}});
    auto a = (*j)->append(Event{"process.signal", "s", 0, Json{{"n", 3}}});
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->seq, 3);
    ASSERT_TRUE((*j)->flush().ok());
    EXPECT_EQ(
        query_text(db,
                   "SELECT group_concat(kind, ',') FROM (SELECT kind FROM records ORDER BY seq)"),
        "process.exit,process.exit,process.signal");
}

TEST(Append, BatchedPostsAreCommittedByFlush) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    auto j = Journal::open({.path = db, .checkpoint_every = 1000000});
    ASSERT_TRUE(j.ok());
    for (int i = 0; i < 500; ++i)
        (*j)->post(Event{"activity.response", "s", 0, Json{{"i", i}}});
    ASSERT_TRUE((*j)->flush().ok());
    EXPECT_EQ(query_int(db, "SELECT count(*) FROM records"), 500);
}

// bench_relay_latency finds the writer thread by its name and measures it under another
// scheduling policy through MCPWARDEN_JOURNAL_WRITER; without the variable it runs as the
// thread that started it (the control).
TEST(Append, WriterThreadIsNamedAndTakesTheBenchsSchedulingPolicy) {
    TempDir dir;
    auto writer_policy = [&](const char* knob) -> int {
        if (knob)
            ::setenv("MCPWARDEN_JOURNAL_WRITER", knob, 1);
        else
            ::unsetenv("MCPWARDEN_JOURNAL_WRITER");
        auto j = Journal::open({.path = dir.path + "/journal.db"});
        if (!j) {
            ::unsetenv("MCPWARDEN_JOURNAL_WRITER");
            return -2;
        }
        (*j)->post(Event{"activity.response", "s", 0, Json{{"i", 1}}});
        EXPECT_TRUE((*j)->flush().ok());  // the thread ran: named, its policy set
        ::unsetenv("MCPWARDEN_JOURNAL_WRITER");
        int policy = -1;
        for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
            std::ifstream comm(task.path() / "comm");
            std::string name;
            std::getline(comm, name);
            if (name == "mcpwarden-jrnl")
                policy = ::sched_getscheduler(std::stoi(task.path().filename().string()));
        }
        EXPECT_TRUE((*j)->close().ok());
        return policy;
    };
    EXPECT_EQ(writer_policy("idle"), SCHED_IDLE) << "-1: no thread named mcpwarden-jrnl";
    EXPECT_EQ(writer_policy(nullptr), SCHED_OTHER);
}

TEST(Append, InvalidBodyIsRefusedWithThePath) {
    TempDir dir;
    auto j = Journal::open({.path = dir.path + "/journal.db"});
    ASSERT_TRUE(j.ok());
    auto a = (*j)->append(Event{"activity.response", "s", 0, Json{{"latency", 1.5}}});
    ASSERT_FALSE(a.ok());
    EXPECT_EQ(a.error().message,
              "journal: activity.response event: latency: floating-point number; journal bodies "
              "hold integers only");
}

TEST(Append, PostFailureIsReportedByFlushAndRecordedAsDegraded) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    auto j = Journal::open({.path = db});
    ASSERT_TRUE(j.ok());
    (*j)->post(Event{"activity.response", "s", 0, Json{{"bad", 0.5}}});
    auto st = (*j)->flush();
    ASSERT_FALSE(st.ok());
    EXPECT_NE(st.error().message.find("floating-point"), std::string::npos);
    ASSERT_TRUE((*j)->append(Event{"process.signal", "s", 0, {}}).ok());
    EXPECT_EQ(query_text(db, "SELECT kind FROM records WHERE seq = 1"), "journal.degraded");
    EXPECT_EQ(
        query_int(db, "SELECT json_extract(body, '$.data.lost_events') FROM records WHERE seq = 1"),
        1);
}

TEST(Append, CheckpointEveryNRecordsInTableAndFiles) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    auto j = Journal::open({.path = db, .checkpoint_every = 10});
    ASSERT_TRUE(j.ok());
    for (int i = 0; i < 25; ++i)
        ASSERT_TRUE((*j)->append(Event{"process.exit", "s", 0, {}}).ok());
    // 10 records → checkpoint record 11 → 10 more → checkpoint 22.
    EXPECT_EQ(query_text(db, "SELECT group_concat(seq, ',') FROM checkpoints"), "11,22");
    EXPECT_EQ(query_text(db, "SELECT kind FROM records WHERE seq = 22"), "checkpoint");
    auto files = read_checkpoint_dir(dir.path + "/checkpoints");
    ASSERT_TRUE(files.ok());
    ASSERT_EQ(files->files.size(), 2u);
    EXPECT_EQ(files->files[1].second.seq, 22);
    EXPECT_TRUE(checkpoint_signature_valid(files->files[1].second));
    EXPECT_EQ(files->files[1].second.public_key, (*j)->public_key());
}

// A journal at `db` with the session.start of "sess-1" on record, and that session's end
// (client_lost, exit status 0), not yet appended.
struct StartedSession {
    std::unique_ptr<Journal> journal;
    SessionEnd end;
};
StartedSession started_session(const std::string& db) {
    auto j = Journal::open({.path = db});
    if (!j) return {};
    SessionStart s;
    s.session = "sess-1";
    s.server_name = "fs";
    if (!(*j)->append(session_start(s))) return {};
    StartedSession out{std::move(*j), {}};
    out.end.session = "sess-1";
    out.end.reason = "client_lost";
    out.end.exit_status = 0;
    return out;
}

TEST(Append, SessionEndIsCheckpointed) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    auto [j, end] = started_session(db);
    ASSERT_TRUE(j);
    auto e = j->append(session_end(end));
    ASSERT_TRUE(e.ok());
    EXPECT_EQ(e->seq, 2);  // the end itself; the checkpoint follows it
    EXPECT_EQ(query_int(db, "SELECT seq FROM head"), 3);
    EXPECT_EQ(query_int(db, "SELECT max(seq) FROM checkpoints"), 3);
    EXPECT_EQ(query_text(db, "SELECT state || ' ' || end_reason FROM sessions"),
              "ended client_lost");
}

// A session.end whose teardown report comes as canonical text (the keeper's): the stored data
// is byte for byte what the report parsed into the record makes, the end is projected, and
// the chain verifies. A report that is JSON but not canonical is parsed and recorded
// canonically; one that is not JSON is refused and nothing is appended.
TEST(Append, AReportGivenAsTextIsStoredAsItWouldBeParsed) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    auto [j, end] = started_session(db);
    ASSERT_TRUE(j);
    const std::string report = R"({"counts":{"killed":1},"ok":true,"targets":[{"pid":7}]})";
    const std::string loose = R"({"targets": [{"pid": 7}], "ok": true, "counts": {"killed": 1}})";
    auto data_of = [&](int64_t seq) {
        return query_text(db, "SELECT json_extract(body, '$.data') FROM records WHERE seq = " +
                                  std::to_string(seq));
    };
    Event as_text = session_end(end);
    as_text.data.erase("teardown");
    ASSERT_TRUE(j->append(as_text, {"teardown", report}).ok());
    ASSERT_TRUE(j->append(as_text, {"teardown", loose}).ok());
    end.teardown = Json::parse(report);
    ASSERT_TRUE(j->append(session_end(end)).ok());
    const std::string expected =
        R"({"exit_status":0,"reason":"client_lost","teardown":)" + report + "}";
    EXPECT_EQ(data_of(2), expected);
    EXPECT_EQ(data_of(4), expected);  // each after the checkpoint of the end before it
    EXPECT_EQ(data_of(6), expected);
    EXPECT_EQ(query_text(db, "SELECT state || ' ' || end_reason FROM sessions"),
              "ended client_lost");

    auto bad = j->append(as_text, {"teardown", R"({"ok":tru)"});
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.error().message, "journal: session.end event: teardown: not JSON (9 bytes)");
    EXPECT_EQ(query_int(db, "SELECT seq FROM head"), 7);
    EXPECT_TRUE(j->close().ok());
    VerifyOptions vo;
    vo.path = db;
    EXPECT_EQ(verify(vo).exit_code, 0);
}

TEST(Append, ReopenKeepsOriginAndKey) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    std::string origin;
    PublicKey key{};
    {
        auto j = Journal::open({.path = db});
        ASSERT_TRUE(j.ok());
        origin = (*j)->origin();
        key = (*j)->public_key();
        ASSERT_TRUE((*j)->append(Event{"x.y", "", 0, {}}).ok());
    }
    auto j = Journal::open({.path = db});
    ASSERT_TRUE(j.ok());
    EXPECT_EQ((*j)->origin(), origin);
    EXPECT_EQ((*j)->public_key(), key);
    auto a = (*j)->append(Event{"x.y", "", 0, {}});
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->seq, 3);  // x.y, the checkpoint its writer signed when it closed, x.y
}

TEST(Append, ForeignKeyIsRefused) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    { ASSERT_TRUE(Journal::open({.path = db}).ok()); }
    ASSERT_EQ(::unlink((dir.path + "/journal.key").c_str()), 0);
    auto j = Journal::open({.path = db});
    ASSERT_FALSE(j.ok());
    EXPECT_NE(j.error().message.find("does not match the key pinned in the journal"),
              std::string::npos)
        << j.error().message;
}

// ---- A checkpoint left to the next writer ------------------------------------------------

// The CPU time (clock ticks) the writer thread uses over `window`, in a journal whose end's
// sync is left to the next writer (as a relay's teardown leaves it) and whose WAL has then
// grown past the checkpoint mark (1,000 pages): the checkpoint is the next writer's to make.
// `fault`: MCPWARDEN_FAULT while the journal opens.
std::optional<uint64_t> writer_ticks_with_a_checkpoint_left(std::chrono::milliseconds window,
                                                            const char* fault) {
    TempDir dir;
    const std::string db = dir.path + "/journal.db";
    if (fault) ::setenv("MCPWARDEN_FAULT", fault, 1);
    auto j = Journal::open({.path = db});
    ::unsetenv("MCPWARDEN_FAULT");
    EXPECT_TRUE(j.ok()) << j.error().message;
    if (!j.ok()) return std::nullopt;
    (*j)->leave_end_sync_to_next_writer();
    const std::string blob(8000, 'x');
    struct stat st {};
    for (int i = 0; i < 5000; ++i) {
        if (::stat((db + "-wal").c_str(), &st) == 0 && st.st_size > 4500 * 1024) break;
        EXPECT_TRUE((*j)->append(Event{"process.signal", "s", 0, Json{{"blob", blob}}}).ok());
    }
    EXPECT_GT(st.st_size, 4500 * 1024) << "the WAL never passed the checkpoint mark";
    std::optional<uint64_t> before;
    for (int i = 0; i < 100 && !before; ++i) {
        before = warden::testing::thread_cpu_ticks(::getpid(), "mcpwarden-jrnl");
        if (!before) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    EXPECT_TRUE(before) << "no writer thread";
    std::this_thread::sleep_for(window);
    auto after = warden::testing::thread_cpu_ticks(::getpid(), "mcpwarden-jrnl");
    EXPECT_TRUE((*j)->close().ok());
    if (!before || !after) return std::nullopt;
    return *after - *before;
}

// The writer thread waits idle: the checkpoint is no work of its own. It once counted it as
// work, its wait returned at once every time, and it spun on a core for as long as the
// journal stayed open: through the whole teardown of a session that ended.
TEST(Append, ACheckpointLeftToTheNextWriterLeavesTheWriterThreadIdle) {
    const auto window = std::chrono::milliseconds(600);
    auto ticks = writer_ticks_with_a_checkpoint_left(window, nullptr);
    ASSERT_TRUE(ticks);
    const uint64_t window_ticks = 600 * static_cast<uint64_t>(::sysconf(_SC_CLK_TCK)) / 1000;
    EXPECT_LE(*ticks, window_ticks / 10) << "of " << window_ticks << " ticks";
}

TEST(Append, NegativeControlAWriterThatCountsTheLeftCheckpointAsWorkSpins) {
    const auto window = std::chrono::milliseconds(600);
    auto ticks = writer_ticks_with_a_checkpoint_left(window, "writer_spins");
    ASSERT_TRUE(ticks);
    const uint64_t window_ticks = 600 * static_cast<uint64_t>(::sysconf(_SC_CLK_TCK)) / 1000;
    EXPECT_GE(*ticks, window_ticks / 3) << "of " << window_ticks << " ticks";
}

}  // namespace
}  // namespace warden::journal
