// The twelve tamper cases of docs/JOURNAL.md ("Verify"), each with the exact reason and exit code
// `verify` must give, plus the untouched journal as the negative control.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "journal/checkpoint.hpp"
#include "journal/journal.hpp"
#include "journal/verify.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

// A journal of three sessions with requests, responses, an abandoned call and a teardown,
// checkpointed every 10 records; its last record is a checkpoint (session end).
struct Fixture {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    Fixture() {
        auto j = Journal::open({.path = db, .checkpoint_every = 10});
        EXPECT_TRUE(j.ok());
        for (int s = 0; s < 3; ++s) {
            std::string session = fmt::format("session-{}", s);
            SessionStart start;
            start.session = session;
            start.server_name = "fixture";
            start.server_argv = {"fixture", "--shape", "normal"};
            EXPECT_TRUE((*j)->append(session_start(start)).ok());
            for (int r = 0; r < 4; ++r) {
                Request req{session, rpc_id_number(r),   "tools/call",
                            "echo",  R"({"text":"hi"})", RecordArgs::Preview,
                            60};
                auto a = (*j)->append(activity_request(req));
                EXPECT_TRUE(a.ok());
                if (r < 3)
                    (*j)->post(activity_response(
                        {session, a->seq, rpc_id_number(r), Outcome::ok, 80, 1000, {}}));
                else
                    (*j)->post(
                        activity_abandoned(session, a->seq, rpc_id_number(r), "client_exit"));
            }
            Process p;
            p.id = {4242, 99};
            EXPECT_TRUE((*j)->append(process_snapshot(session, p, "teardown")).ok());
            EXPECT_TRUE((*j)->append(process_signal(session, p.id, 15, "pidfd")).ok());
            (*j)->post(process_exit(session, p.id, std::nullopt, 15, "grace_window"));
            SessionEnd end;
            end.session = session;
            end.reason = "client_lost";
            EXPECT_TRUE((*j)->append(session_end(end)).ok());
        }
    }
    int64_t head() const { return query_int(db, "SELECT seq FROM head"); }
    int64_t first_checkpoint_at_or_after(int64_t seq) const {
        return query_int(db, fmt::format("SELECT min(seq) FROM checkpoints WHERE seq >= {}", seq));
    }
    void sql(const std::string& s) const {
        std::string err;
        ASSERT_TRUE(exec_sql(
            db,
            "DROP TRIGGER IF EXISTS records_no_update; DROP TRIGGER IF EXISTS records_no_delete;"
            "DROP TRIGGER IF EXISTS checkpoints_no_update; DROP TRIGGER IF EXISTS "
            "checkpoints_no_delete;" +
                s,
            &err))
            << err;
    }
    VerifyReport verify(bool require_anchored = false,
                        std::vector<std::string> trusted = {}) const {
        return journal::verify({.path = db,
                                .trusted_checkpoints = std::move(trusted),
                                .require_anchored = require_anchored});
    }
    std::string body(int64_t seq) const {
        return query_text(db, fmt::format("SELECT body FROM records WHERE seq = {}", seq));
    }
    Hash chain_at(int64_t seq) const {
        Hash h{};
        if (seq == 0) return h;
        std::string b =
            query_text(db, fmt::format("SELECT chain FROM records WHERE seq = {}", seq));
        std::memcpy(h.data(), b.data(), 32);
        return h;
    }
    void set_row(int64_t seq, const std::string& body, const Hash& leaf, const Hash& chain) const {
        sqlite3* h = nullptr;
        ASSERT_EQ(sqlite3_open(db.c_str(), &h), SQLITE_OK);
        sqlite3_exec(h, "DROP TRIGGER IF EXISTS records_no_update", nullptr, nullptr, nullptr);
        sqlite3_stmt* s = nullptr;
        sqlite3_prepare_v2(h, "UPDATE records SET body = ?1, leaf = ?2, chain = ?3 WHERE seq = ?4",
                           -1, &s, nullptr);
        sqlite3_bind_blob(s, 1, body.data(), static_cast<int>(body.size()), SQLITE_TRANSIENT);
        sqlite3_bind_blob(s, 2, leaf.data(), 32, SQLITE_TRANSIENT);
        sqlite3_bind_blob(s, 3, chain.data(), 32, SQLITE_TRANSIENT);
        sqlite3_bind_int64(s, 4, seq);
        EXPECT_EQ(sqlite3_step(s), SQLITE_DONE);
        sqlite3_finalize(s);
        sqlite3_close(h);
    }
    // Recomputes leaf and chain of every row from `from` to the head, and the head: what an
    // attacker who edited row `from` does to hide it.
    void rechain_from(int64_t from) const {
        Hash prev = chain_at(from - 1);
        int64_t last = query_int(db, "SELECT max(seq) FROM records");
        for (int64_t s = from; s <= last; ++s) {
            std::string b = body(s);
            if (b.empty()) continue;
            Hash leaf = leaf_hash(b);
            Hash chain = chain_hash(prev, leaf);
            set_row(s, b, leaf, chain);
            prev = chain;
        }
        sql(fmt::format("UPDATE head SET seq = {}, chain = x'{}'", last, to_hex(prev)));
    }
};

// A still well-formed body with one more field in its data.
std::string edited(std::string body) {
    body.replace(body.find("\"data\":{"), 8, "\"data\":{\"forged\":1,");
    return body;
}

TEST(Tamper, UntouchedJournalVerifiesCleanAndAnchored) {
    Fixture f;
    auto r = f.verify(/*require_anchored=*/true);
    EXPECT_EQ(r.exit_code, 0) << r.reason;
    EXPECT_TRUE(r.ok);
    EXPECT_EQ(r.records, f.head());
    EXPECT_EQ(r.unanchored, 0);
    EXPECT_TRUE(r.warnings.empty()) << r.warnings[0];
}

// 1
TEST(Tamper, FlippedBodyByteIsALeafMismatchAtThatSeq) {
    Fixture f;
    std::string b = f.body(5);
    b[b.find("\"kind\"") + 3] ^= 0x01;  // "kind" → "kjnd"
    Hash leaf{};
    std::string stored_leaf = query_text(f.db, "SELECT leaf FROM records WHERE seq = 5");
    std::memcpy(leaf.data(), stored_leaf.data(), 32);
    f.set_row(5, b, leaf, f.chain_at(5));
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, 5);
    EXPECT_EQ(r.reason, "leaf mismatch at seq 5: the body does not hash to the stored leaf");
}

// 2
TEST(Tamper, EditedBodyWithRecomputedLeafIsALinkBreakAtThatSeq) {
    Fixture f;
    std::string b = edited(f.body(5));
    f.set_row(5, b, leaf_hash(b), f.chain_at(5));
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, 5);
    EXPECT_EQ(r.reason, "link broken at seq 5: its chain hash does not follow from seq 4");
}

// 3
TEST(Tamper, RecomputedLeafAndLinkOfOneRowBreaksTheNextLink) {
    Fixture f;
    std::string b = edited(f.body(5));
    Hash leaf = leaf_hash(b);
    f.set_row(5, b, leaf, chain_hash(f.chain_at(4), leaf));
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, 6);
    EXPECT_EQ(r.reason, "link broken at seq 6: its chain hash does not follow from seq 5");
}

// 4
TEST(Tamper, RecomputedSuffixFailsAtTheFirstCoveringCheckpoint) {
    Fixture f;
    f.set_row(5, edited(f.body(5)), Hash{}, Hash{});
    f.rechain_from(5);
    int64_t cp = f.first_checkpoint_at_or_after(5);
    ASSERT_GT(cp, 5);
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, cp);
    EXPECT_EQ(
        r.reason.rfind(
            fmt::format("checkpoint mismatch at seq {}: checkpoint (table) signed chain ", cp), 0),
        0u)
        << r.reason;
}

// 5
TEST(Tamper, DeletedMiddleRowIsASequenceGap) {
    Fixture f;
    f.sql("DELETE FROM records WHERE seq = 7");
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, 7);
    EXPECT_EQ(r.reason, "sequence gap: seq 7 is missing (the next row is seq 8)");
}

// 6
TEST(Tamper, InsertedRowBreaksALink) {
    Fixture f;
    // Make room at seq 5 and insert a well-formed row chained onto seq 4.
    f.sql(
        "UPDATE records SET seq = seq + 1000000 WHERE seq >= 5; UPDATE records SET seq = seq - "
        "999999 WHERE seq > 1000000;");
    std::string b = f.body(4);
    b.replace(b.find("\"seq\":4"), 7, "\"seq\":5");
    Hash leaf = leaf_hash(b);
    Hash chain = chain_hash(f.chain_at(4), leaf);
    f.sql(
        fmt::format("INSERT INTO records(seq, ts, kind, session, origin, body, leaf, chain) SELECT "
                    "5, ts, kind, "
                    "session, origin, CAST('{}' AS BLOB), x'{}', x'{}' FROM records WHERE seq = 4",
                    b, to_hex(leaf), to_hex(chain)));
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, 6);
    EXPECT_EQ(r.reason, "link broken at seq 6: its chain hash does not follow from seq 5");
}

// 7
TEST(Tamper, SwappedRowsBreakALink) {
    Fixture f;
    f.sql(
        "UPDATE records SET seq = -5 WHERE seq = 5; UPDATE records SET seq = 5 WHERE seq = 8; "
        "UPDATE records SET seq = 8 WHERE seq = -5;");
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, 5);
    EXPECT_EQ(r.reason, "link broken at seq 5: its chain hash does not follow from seq 4");
}

// 8
TEST(Tamper, TruncationBelowTheLastCheckpointIsCaughtByTheFiles) {
    Fixture f;
    int64_t head = f.head();
    int64_t cut = 15;
    int64_t next_cp = f.first_checkpoint_at_or_after(cut + 1);
    ASSERT_LE(next_cp, head);
    f.sql(fmt::format(
        "DELETE FROM records WHERE seq > {0}; DELETE FROM checkpoints WHERE seq > {0}; "
        "UPDATE head SET seq = {0}, chain = (SELECT chain FROM records WHERE seq = {0});",
        cut));
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, cut + 1);
    EXPECT_EQ(
        r.reason,
        fmt::format("truncated: checkpoint {0} ({1}/checkpoints/{0}) covers seq {0} but the log "
                    "ends at seq {2}",
                    next_cp, f.dir.path, cut));
}

TEST(Tamper, TruncationWithEveryLocalFileGoneIsCaughtByATrustedCheckpoint) {
    Fixture f;
    int64_t head = f.head();
    std::string saved = f.dir.path + "/off-host-copy";
    std::filesystem::copy_file(fmt::format("{}/checkpoints/{}", f.dir.path, head), saved);
    int64_t cut = 15;
    f.sql(fmt::format(
        "DELETE FROM records WHERE seq > {0}; DELETE FROM checkpoints WHERE seq > {0}; "
        "UPDATE head SET seq = {0}, chain = (SELECT chain FROM records WHERE seq = {0});",
        cut));
    std::filesystem::remove_all(f.dir.path + "/checkpoints");
    auto clean = f.verify();
    EXPECT_EQ(clean.exit_code, 0) << "without the outside copy, the cut is invisible";
    auto r = f.verify(false, {saved});
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, cut + 1);
    EXPECT_EQ(
        r.reason,
        fmt::format("truncated: checkpoint {0} (trusted {1}) covers seq {0} but the log ends at "
                    "seq {2}",
                    head, saved, cut));
}

// 9
TEST(Tamper, TruncationInsideTheUnanchoredTailIsReportedAsUnanchored) {
    Fixture f;
    // A writer that dies after five appends (a writer that closes signs its tail): in a
    // child that exits without closing its Journal.
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        auto j = Journal::open({.path = f.db, .checkpoint_every = 10});
        for (int i = 0; j.ok() && i < 5; ++i)
            if (!(*j)->append(Event{"process.exit", "late", 0, {}}).ok()) ::_exit(1);
        ::_exit(j.ok() ? 0 : 1);
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    int64_t head = f.head();
    int64_t anchored = query_int(f.db, "SELECT max(seq) FROM checkpoints");
    ASSERT_EQ(head - anchored, 5);
    f.sql(
        fmt::format("DELETE FROM records WHERE seq > {0}; UPDATE head SET seq = {0}, chain = "
                    "(SELECT chain FROM "
                    "records WHERE seq = {0});",
                    head - 2));
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 0);
    EXPECT_EQ(r.unanchored, 3);
    ASSERT_FALSE(r.warnings.empty());
    EXPECT_EQ(r.warnings.back(),
              fmt::format("3 unanchored records after checkpoint {}: a truncation there would go "
                          "unnoticed",
                          anchored));
    EXPECT_EQ(f.verify(/*require_anchored=*/true).exit_code, 3);
}

// 10
TEST(Tamper, RegeneratedWithANewKeyIsAKeyMismatchAgainstThePin) {
    Fixture f;
    auto k2 = SigningKey::generate();
    ASSERT_TRUE(k2.ok());
    std::string k2hex = to_hex(k2->public_key().data(), 32);
    std::string origin = query_text(f.db, "SELECT value FROM meta WHERE key = 'origin'");
    // Re-sign every checkpoint (table and files) and re-pin the database: all but journal.pub.
    f.sql(fmt::format("UPDATE meta SET value = '{}' WHERE key = 'public_key'", k2hex));
    auto dir = read_checkpoint_dir(f.dir.path + "/checkpoints");
    ASSERT_TRUE(dir.ok());
    std::string updates;
    for (auto seqs = query_text(f.db, "SELECT group_concat(seq) FROM checkpoints");
         !seqs.empty();) {
        auto comma = seqs.find(',');
        int64_t s = std::stoll(seqs.substr(0, comma));
        seqs = comma == std::string::npos ? "" : seqs.substr(comma + 1);
        CheckpointFile cp{origin, s, f.chain_at(s), k2->public_key(), {}, 1};
        cp.signature = *k2->sign(checkpoint_message(origin, s, cp.chain));
        updates += fmt::format(
            "UPDATE checkpoints SET public_key = '{}', signature = x'{}' WHERE seq = {};", k2hex,
            to_hex(cp.signature.data(), 64), s);
        if (std::filesystem::exists(fmt::format("{}/checkpoints/{}", f.dir.path, s))) {
            ASSERT_TRUE(write_checkpoint_file(f.dir.path + "/checkpoints", cp).ok());
        }
    }
    f.sql(updates);
    int64_t first_cp = query_int(f.db, "SELECT min(seq) FROM checkpoints");
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.first_bad_seq, first_cp);
    std::ifstream pubf(f.dir.path + "/journal.pub");
    std::string k1hex;
    pubf >> k1hex;
    EXPECT_EQ(r.reason,
              fmt::format("key mismatch: the journal pins key {} but {}/journal.pub pins key {}",
                          k2hex.substr(0, 16), f.dir.path, k1hex.substr(0, 16)));
}

// 11
TEST(Tamper, NoCheckpointAtAllIsExit3WhenRequiredAndALoudWarningOtherwise) {
    Fixture f;
    f.sql("DELETE FROM checkpoints;");
    std::filesystem::remove_all(f.dir.path + "/checkpoints");
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 0);
    ASSERT_FALSE(r.warnings.empty());
    EXPECT_EQ(r.warnings[0],
              "NO CHECKPOINT: nothing anchors this journal; a rewritten or truncated log would "
              "pass unnoticed");
    auto req = f.verify(/*require_anchored=*/true);
    EXPECT_EQ(req.exit_code, 3);
    EXPECT_TRUE(req.ok);
}

// 12
TEST(Tamper, EditedProjectionIsAWarningAndTheLogStaysOk) {
    Fixture f;
    f.sql(
        "UPDATE activity SET outcome = 'ok' WHERE outcome = 'abandoned' AND session = "
        "'session-1';");
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 0);
    ASSERT_EQ(r.warnings.size(), 1u);
    EXPECT_EQ(r.warnings[0],
              "projection mismatch: the activity table differs from the log (it is a cache; the "
              "log is the "
              "evidence)");
    Fixture g;
    g.sql("UPDATE sessions SET state = 'running' WHERE session = 'session-2';");
    auto s = g.verify();
    EXPECT_EQ(s.exit_code, 0);
    ASSERT_EQ(s.warnings.size(), 1u);
    EXPECT_EQ(s.warnings[0],
              "projection mismatch: the sessions table differs from the log (first: session "
              "session-2) (it is a "
              "cache; the log is the evidence)");
}

TEST(Tamper, EditedIndexColumnIsCaughtAgainstTheBody) {
    Fixture f;
    f.sql("UPDATE records SET kind = 'session.end' WHERE seq = 5");
    auto r = f.verify();
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.reason, "body of seq 5 does not match its index column `kind`");
}

}  // namespace
}  // namespace warden::journal
