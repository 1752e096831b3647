// The twelve tamper cases of docs/JOURNAL.md ("Verify"), each with the exact reason and exit code
// `verify` must give, plus the untouched journal as the negative control; then the table of
// "What an attacker can do", one test per row, each attack verified as its three columns
// do: with nothing kept off the host, with the public key kept off it, and with a checkpoint
// kept off it.
#include <sqlite3.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "journal/checkpoint.hpp"
#include "journal/journal.hpp"
#include "journal/prune.hpp"
#include "journal/verify.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

// A journal of three sessions (or `sessions`) with requests, responses, an abandoned call and
// a teardown, checkpointed every 10 records; its last record is a checkpoint (session end).
struct Fixture {
    TempDir dir{"/dev/shm"};  // the subject is what verify says, not the disk: no fsync cost
    std::string db = dir.path + "/journal.db";
    explicit Fixture(int sessions = 3) { add_sessions(0, sessions); }
    void add_sessions(int from, int to) const {
        auto j = Journal::open({.path = db, .checkpoint_every = 10});
        EXPECT_TRUE(j.ok());
        for (int s = from; s < to; ++s) {
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
    std::string origin() const {
        return query_text(db, "SELECT value FROM meta WHERE key = 'origin'");
    }
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
        if (b.size() == h.size()) std::memcpy(h.data(), b.data(), h.size());
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
    // Signs every checkpoint from `from` on again over the chain the log has now (table and
    // files) and pins `key` in the database, and in `pub_file` when one is named: what an
    // attacker who rewrote the log does to hide it, with the journal's own key or a new one.
    void resign(const SigningKey& key, int64_t from = 1, const std::string& pub_file = {}) const {
        std::string hex = to_hex(key.public_key().data(), key.public_key().size());
        std::string updates =
            fmt::format("UPDATE meta SET value = '{}' WHERE key = 'public_key';", hex);
        for (auto seqs = query_text(db, fmt::format("SELECT group_concat(seq) FROM checkpoints "
                                                    "WHERE seq >= {}",
                                                    from));
             !seqs.empty();) {
            auto comma = seqs.find(',');
            int64_t s = std::stoll(seqs.substr(0, comma));
            seqs = comma == std::string::npos ? "" : seqs.substr(comma + 1);
            CheckpointFile cp{origin(), s, chain_at(s), key.public_key(), {}, 1};
            cp.signature = *key.sign(checkpoint_message(cp.origin, s, cp.chain));
            updates += fmt::format(
                "UPDATE checkpoints SET chain = x'{}', public_key = '{}', signature = x'{}' "
                "WHERE seq = {};",
                to_hex(cp.chain), hex, to_hex(cp.signature.data(), cp.signature.size()), s);
            if (std::filesystem::exists(fmt::format("{}/checkpoints/{}", dir.path, s))) {
                ASSERT_TRUE(write_checkpoint_file(dir.path + "/checkpoints", cp).ok());
            }
        }
        sql(updates);
        if (!pub_file.empty()) std::ofstream(pub_file) << hex << "\n";
    }
    // Removes the records after `cut` with their checkpoints (table and files) and sets the
    // head there: the journal as it was when seq `cut` was its newest record.
    void roll_back_to(int64_t cut) const {
        sql(fmt::format(
            "DELETE FROM records WHERE seq > {0}; DELETE FROM checkpoints WHERE seq > {0}; "
            "UPDATE head SET seq = {0}, chain = (SELECT chain FROM records WHERE seq = {0});",
            cut));
        for (const auto& e : std::filesystem::directory_iterator(dir.path + "/checkpoints"))
            if (std::stoll(e.path().filename().string()) > cut) std::filesystem::remove(e.path());
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
    // Re-sign every checkpoint (table and files) and re-pin the database: all but journal.pub.
    f.resign(*k2);
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

// What an attacker can do (docs/JOURNAL.md): each test performs one row's attack on a real
// journal and verifies it as each column does.

// What the user keeps off this host: a copy of journal.pub and the line `audit anchor` printed
// (the newest signed checkpoint when it was taken, at seq `seq`).
struct OffHost {
    TempDir dir;
    std::string pub = dir.path + "/journal.pub";
    std::string anchor = dir.path + "/anchor.json";
    int64_t seq = 0;
    explicit OffHost(const Fixture& f) {
        std::filesystem::copy_file(f.dir.path + "/journal.pub", pub);
        auto line = anchor_line(f.db);
        EXPECT_TRUE(line.ok()) << line.error().message;
        if (!line.ok()) return;
        std::ofstream(anchor) << *line;
        auto cp = parse_checkpoint(*line, anchor);
        if (cp.ok()) seq = cp->seq;
    }
};

// The table's three columns: nothing kept off the host (journal.pub and the checkpoint files
// beside the journal), --public-key, --public-key and --trusted-checkpoint.
struct Columns {
    VerifyReport local, public_key, trusted;
};
Columns verify_columns(const Fixture& f, const OffHost& o, bool require_anchored = false) {
    return {verify({.path = f.db, .require_anchored = require_anchored}),
            verify({.path = f.db, .public_key_file = o.pub, .require_anchored = require_anchored}),
            verify({.path = f.db,
                    .trusted_checkpoints = {o.anchor},
                    .public_key_file = o.pub,
                    .require_anchored = require_anchored})};
}

void expect_failure(const VerifyReport& r, int64_t seq, const std::string& reason) {
    EXPECT_EQ(r.exit_code, 1) << r.reason;
    EXPECT_EQ(r.first_bad_seq, seq) << r.reason;
    EXPECT_EQ(r.reason, reason);
}

void expect_each_fails(const Columns& c, int64_t seq, const std::string& reason) {
    for (const auto* r : {&c.local, &c.public_key, &c.trusted}) {
        SCOPED_TRACE(r == &c.local ? "local" : r == &c.public_key ? "--public-key" : "trusted");
        expect_failure(*r, seq, reason);
    }
}

std::string short_hex(const Hash& h) {
    return to_hex(h).substr(0, 16);
}

// The key of the journal's own directory, as its user (or root) reads it.
SigningKey journal_key(const Fixture& f) {
    auto k = SigningKey::load(f.dir.path + "/journal.key");
    if (!k.ok()) {
        ADD_FAILURE() << k.error().message;
        k = SigningKey::generate();  // the test has failed; this only keeps it well-defined
    }
    return std::move(*k);
}

// The newest records' size as prune counts it: a --max-size that keeps about `n` records.
int64_t size_of_newest(const Fixture& f, int n) {
    return query_int(f.db, fmt::format("SELECT sum(length(body) + 160) FROM records WHERE seq > "
                                       "(SELECT max(seq) FROM records) - {}",
                                       n));
}

// Row: without the key, edit any signed record (leaves and links recomputed to the head).
TEST(Attacker, WithoutTheKeyAnEditedSignedRecordFailsInEveryColumn) {
    Fixture f;
    OffHost o(f);
    f.add_sessions(3, 5);
    int64_t cp = f.first_checkpoint_at_or_after(5);
    Hash signed_chain = f.chain_at(cp);
    f.set_row(5, edited(f.body(5)), Hash{}, Hash{});
    f.rechain_from(5);
    expect_each_fails(verify_columns(f, o), cp,
                      fmt::format("checkpoint mismatch at seq {}: checkpoint (table) signed chain "
                                  "{}, the log has {}",
                                  cp, short_hex(signed_chain), short_hex(f.chain_at(cp))));
}

// Row: regenerate the journal under a new key (records edited, every checkpoint, the database's
// pin and journal.pub rewritten).
TEST(Attacker, ANewKeyPassesLocallyAndFailsAgainstTheKeyKeptOffHost) {
    Fixture f;
    OffHost o(f);
    f.add_sessions(3, 5);
    std::string k1hex = query_text(f.db, "SELECT value FROM meta WHERE key = 'public_key'");
    f.set_row(5, edited(f.body(5)), Hash{}, Hash{});
    f.rechain_from(5);
    auto k2 = SigningKey::generate();
    ASSERT_TRUE(k2.ok());
    f.resign(*k2, 1, f.dir.path + "/journal.pub");
    auto c = verify_columns(f, o);
    EXPECT_EQ(c.local.exit_code, 0) << c.local.reason;
    std::string reason =
        fmt::format("key mismatch: the journal pins key {} but {} pins key {}",
                    to_hex(k2->public_key().data(), 32).substr(0, 16), o.pub, k1hex.substr(0, 16));
    int64_t first_cp = query_int(f.db, "SELECT min(seq) FROM checkpoints");
    expect_failure(c.public_key, first_cp, reason);
    expect_failure(c.trusted, first_cp, reason);
}

// Row: without the key, delete every checkpoint (table and files), then edit records.
TEST(Attacker, WithoutCheckpointsAnEditIsUnanchoredUnlessACheckpointIsKeptOffHost) {
    Fixture f;
    OffHost o(f);
    f.add_sessions(3, 5);
    Hash trusted_chain = f.chain_at(o.seq);
    f.sql("DELETE FROM checkpoints;");
    std::filesystem::remove_all(f.dir.path + "/checkpoints");
    f.set_row(5, edited(f.body(5)), Hash{}, Hash{});
    f.rechain_from(5);
    auto c = verify_columns(f, o, /*require_anchored=*/true);
    for (const auto* r : {&c.local, &c.public_key}) {
        EXPECT_EQ(r->exit_code, 3) << r->reason;
        ASSERT_FALSE(r->warnings.empty());
        EXPECT_EQ(r->warnings[0],
                  "NO CHECKPOINT: nothing anchors this journal; a rewritten or truncated log "
                  "would pass unnoticed");
    }
    expect_failure(
        c.trusted, o.seq,
        fmt::format("checkpoint mismatch at seq {}: checkpoint (trusted {}) signed "
                    "chain {}, the log has {}",
                    o.seq, o.anchor, short_hex(trusted_chain), short_hex(f.chain_at(o.seq))));
}

// Row: roll the journal back to an older signed checkpoint (records, checkpoints, files and
// head removed after it).
TEST(Attacker, ARollbackPassesUnlessACheckpointIsKeptOffHost) {
    Fixture f;
    OffHost o(f);
    f.add_sessions(3, 5);
    int64_t cut =
        query_int(f.db, fmt::format("SELECT max(seq) FROM checkpoints WHERE seq < {}", o.seq));
    f.roll_back_to(cut);
    auto c = verify_columns(f, o, /*require_anchored=*/true);
    EXPECT_EQ(c.local.exit_code, 0) << c.local.reason;
    EXPECT_EQ(c.public_key.exit_code, 0) << c.public_key.reason;
    expect_failure(c.trusted, cut + 1,
                   fmt::format("truncated: checkpoint {0} (trusted {1}) covers seq {0} but the "
                               "log ends at seq {2}",
                               o.seq, o.anchor, cut));
}

// Row: cut or edit records after the newest checkpoint (the unanchored tail of a writer that
// has not signed yet).
TEST(Attacker, ACutOrEditInTheUnanchoredTailIsOnlyReportedAsUnanchored) {
    Fixture f;
    OffHost o(f);
    {
        auto j = Journal::open({.path = f.db, .checkpoint_every = 10});
        ASSERT_TRUE(j.ok());
        for (int i = 0; i < 5; ++i)
            ASSERT_TRUE((*j)->append(Event{"process.exit", "late", 0, Json{{"n", i}}}).ok());
        ASSERT_TRUE((*j)->close(Journal::Tail::to_next_writer).ok());
    }
    int64_t anchored = query_int(f.db, "SELECT max(seq) FROM checkpoints");
    ASSERT_EQ(f.head() - anchored, 5);
    f.sql(
        fmt::format("DELETE FROM records WHERE seq > {0}; UPDATE head SET seq = {0}, chain = "
                    "(SELECT chain FROM records WHERE seq = {0});",
                    f.head() - 2));
    for (bool edit : {false, true}) {
        SCOPED_TRACE(edit ? "cut, then edited" : "cut");
        if (edit) {
            f.set_row(anchored + 2, edited(f.body(anchored + 2)), Hash{}, Hash{});
            f.rechain_from(anchored + 2);
        }
        auto c = verify_columns(f, o, /*require_anchored=*/true);
        for (const auto* r : {&c.local, &c.public_key, &c.trusted}) {
            EXPECT_EQ(r->exit_code, 3) << r->reason;
            ASSERT_FALSE(r->warnings.empty());
            EXPECT_EQ(r->warnings.back(),
                      fmt::format("3 unanchored records after checkpoint {}: a truncation there "
                                  "would go unnoticed",
                                  anchored));
        }
    }
}

// Row: without the key, remove every record before a signed checkpoint, set the meta table's
// prune anchor to it and drop the projection rows; then also append an unsigned
// journal.pruned record that states the seam. The negative control: with the check off
// (MCPWARDEN_FAULT=prune_unproven), the forged prune passes in every column, --require-anchored
// included.
TEST(Attacker, WithoutTheKeyAForgedPruneFailsInEveryColumn) {
    Fixture f;
    OffHost o(f);
    f.add_sessions(3, 5);
    const int64_t cut = o.seq;  // the log is made to start at the checkpoint kept off host
    const Hash before = f.chain_at(cut - 1), at = f.chain_at(cut);
    f.sql(
        fmt::format("DELETE FROM records WHERE seq < {0}; DELETE FROM sessions WHERE start_seq "
                    "< {0}; DELETE FROM activity WHERE request_seq < {0}; INSERT OR REPLACE "
                    "INTO meta(key, value) VALUES('pruned_before', '{0}');",
                    cut));
    expect_each_fails(verify_columns(f, o, /*require_anchored=*/true), cut,
                      fmt::format("unexplained prune: the log starts at seq {0} but no "
                                  "journal.pruned record in it names seq {0} as its anchor",
                                  cut));
    {
        ASSERT_EQ(::setenv("MCPWARDEN_FAULT", "prune_unproven", 1), 0);
        auto off = verify_columns(f, o, /*require_anchored=*/true);
        ::unsetenv("MCPWARDEN_FAULT");
        for (const auto* r : {&off.local, &off.public_key, &off.trusted})
            EXPECT_EQ(r->exit_code, 0) << r->reason << " (the check off: the forgery passes)";
    }

    const int64_t seq = f.head() + 1, ts = now_ns();
    std::string body = fmt::format(
        R"({{"data":{{"anchor_chain":"{}","anchor_seq":{},"first_removed_seq":1,"prev_chain":"{}",)"
        R"("previous_anchor_seq":0,"reason":"older_than","removed":{}}},"kind":"journal.pruned",)"
        R"("origin":"{}","seq":{},"session":"","ts":{},"v":1}})",
        to_hex(at), cut, to_hex(before), cut - 1, f.origin(), seq, ts);
    Hash leaf = leaf_hash(body);
    Hash chain = chain_hash(f.chain_at(seq - 1), leaf);
    f.sql(
        fmt::format("INSERT INTO records(seq, ts, kind, session, origin, body, leaf, chain) "
                    "VALUES({0}, {1}, 'journal.pruned', '', '{2}', CAST('{3}' AS BLOB), x'{4}', "
                    "x'{5}'); UPDATE head SET seq = {0}, chain = x'{5}';",
                    seq, ts, f.origin(), body, to_hex(leaf), to_hex(chain)));
    expect_each_fails(verify_columns(f, o), seq,
                      fmt::format("the journal.pruned record at seq {} is not covered by a signed "
                                  "checkpoint: nothing shows the journal's key signed it",
                                  seq));
}

// Row: without the key, move a real prune's anchor to a later signed checkpoint (the records
// between them removed, the meta table's anchor set to it). The control: the real prune
// passes in every column, --require-anchored included.
TEST(Attacker, WithoutTheKeyAMovedPruneAnchorFailsInEveryColumn) {
    Fixture f(5);
    PruneReport pruned;
    {
        auto j = Journal::open({.path = f.db});
        ASSERT_TRUE(j.ok());
        auto r = prune(**j, {.max_bytes = size_of_newest(f, 40), .compact = false});
        ASSERT_TRUE(r.ok()) << r.error().message;
        pruned = *r;
    }
    ASSERT_GT(pruned.anchor_seq, 1);
    const int64_t record = query_int(f.db, "SELECT seq FROM records WHERE kind = 'journal.pruned'");
    OffHost o(f);
    auto real = verify_columns(f, o, /*require_anchored=*/true);
    for (const auto* r : {&real.local, &real.public_key, &real.trusted}) {
        EXPECT_EQ(r->exit_code, 0) << r->reason;
        EXPECT_EQ(r->anchor_seq, pruned.anchor_seq);
        EXPECT_EQ(r->prune_record_seq, record);
    }

    const int64_t moved = query_int(
        f.db, fmt::format("SELECT min(seq) FROM checkpoints WHERE seq > {}", pruned.anchor_seq));
    ASSERT_LT(moved, record);
    f.sql(
        fmt::format("DELETE FROM records WHERE seq < {0}; INSERT OR REPLACE INTO meta(key, "
                    "value) VALUES('pruned_before', '{0}');",
                    moved));
    expect_each_fails(verify_columns(f, o, /*require_anchored=*/true), moved,
                      fmt::format("prune anchor moved: the log starts at seq {} but the newest "
                                  "journal.pruned record (seq {}) names anchor seq {}",
                                  moved, record, pruned.anchor_seq));
    // Moved past the record itself: then nothing in the log names a prune.
    const int64_t past =
        query_int(f.db, fmt::format("SELECT min(seq) FROM checkpoints WHERE seq > {}", record));
    f.sql(
        fmt::format("DELETE FROM records WHERE seq < {0}; INSERT OR REPLACE INTO meta(key, "
                    "value) VALUES('pruned_before', '{0}');",
                    past));
    expect_each_fails(verify_columns(f, o, /*require_anchored=*/true), past,
                      fmt::format("unexplained prune: the log starts at seq {0} but no "
                                  "journal.pruned record in it names seq {0} as its anchor",
                                  past));
}

// Row: with the key, rewrite records and sign every checkpoint again. Caught only where a
// checkpoint kept off host covers the edit; an edit after it passes everywhere.
TEST(Attacker, WithTheKeyARewriteFailsOnlyAgainstACheckpointKeptOffHostThatCoversIt) {
    Fixture f;
    OffHost o(f);
    f.add_sessions(3, 5);
    Hash trusted_chain = f.chain_at(o.seq);
    f.set_row(5, edited(f.body(5)), Hash{}, Hash{});
    f.rechain_from(5);
    f.resign(journal_key(f));
    auto c = verify_columns(f, o);
    EXPECT_EQ(c.local.exit_code, 0) << c.local.reason;
    EXPECT_EQ(c.public_key.exit_code, 0) << c.public_key.reason;
    expect_failure(
        c.trusted, o.seq,
        fmt::format("checkpoint mismatch at seq {}: checkpoint (trusted {}) signed "
                    "chain {}, the log has {}",
                    o.seq, o.anchor, short_hex(trusted_chain), short_hex(f.chain_at(o.seq))));

    Fixture g;
    OffHost og(g);
    g.add_sessions(3, 5);
    const int64_t after = og.seq + 3;
    g.set_row(after, edited(g.body(after)), Hash{}, Hash{});
    g.rechain_from(after);
    g.resign(journal_key(g));
    auto later = verify_columns(g, og, /*require_anchored=*/true);
    for (const auto* r : {&later.local, &later.public_key, &later.trusted})
        EXPECT_EQ(r->exit_code, 0) << r->reason << " (an edit after the kept checkpoint)";
}

// Row: with the key, prune past the checkpoint kept off host, as `journal prune` does, then
// rewrite what is kept and sign it again. Nothing fails; a checkpoint kept off host that the
// prune left behind says so, and is exit 3 with --require-anchored.
TEST(Attacker, WithTheKeyAPrunePastTheCheckpointKeptOffHostLeavesItVouchingForNothing) {
    Fixture f;
    OffHost o(f);
    f.add_sessions(3, 6);
    {
        auto j = Journal::open({.path = f.db});
        ASSERT_TRUE(j.ok());
        auto r = prune(**j, {.max_bytes = size_of_newest(f, 20), .compact = false});
        ASSERT_TRUE(r.ok()) << r.error().message;
        ASSERT_GT(r->anchor_seq, o.seq);
    }
    const int64_t anchor = query_int(f.db, "SELECT min(seq) FROM records");
    f.set_row(anchor + 2, edited(f.body(anchor + 2)), Hash{}, Hash{});
    f.rechain_from(anchor + 2);
    f.resign(journal_key(f), anchor);
    auto c = verify_columns(f, o, /*require_anchored=*/true);
    EXPECT_EQ(c.local.exit_code, 0) << c.local.reason;
    EXPECT_EQ(c.public_key.exit_code, 0) << c.public_key.reason;
    EXPECT_EQ(c.trusted.exit_code, 3) << c.trusted.reason;
    EXPECT_NE(std::find(c.trusted.warnings.begin(), c.trusted.warnings.end(),
                        fmt::format("checkpoint {0} (trusted {1}) is older than the prune anchor "
                                    "(seq {2}): it matches the journal's signed checkpoint at seq "
                                    "{0}, but its records were pruned, so it vouches for none "
                                    "that are kept; keep a newer one (`mcpwarden audit anchor`)",
                                    o.seq, o.anchor, anchor)),
              c.trusted.warnings.end());
}

}  // namespace
}  // namespace warden::journal
