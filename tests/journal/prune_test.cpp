// Bounded on disk, still verifiable: prune removes the oldest records up to a signed
// checkpoint, verify starts from that anchor and says so, tampering after it is still
// caught, and a forged anchor is not accepted. `audit anchor` + --trusted-checkpoint catch a
// rollback of the whole directory.
#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "journal/journal.hpp"
#include "journal/prune.hpp"
#include "journal/verify.hpp"
#include "journal_test_util.hpp"
#include "sys/fd.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

constexpr int64_t kDay = 86'400'000'000'000;

// 40 events three days old, then 15 of today; a checkpoint every 10 records.
std::unique_ptr<Journal> aged_journal(const std::string& db) {
    auto j = Journal::open({.path = db, .checkpoint_every = 10});
    EXPECT_TRUE(j.ok());
    int64_t old = now_ns() - 3 * kDay;
    for (int i = 0; i < 55; ++i) {
        Event e{"process.signal", "s" + std::to_string(i / 5), i < 40 ? old + i : 0,
                Json{{"n", i}}};
        EXPECT_TRUE((*j)->append(e).ok());
    }
    return std::move(*j);
}

TEST(Prune, OlderThanKeepsTheJournalVerifiableFromAnAnchor) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    auto j = aged_journal(db);
    // Checkpoints at 11, 22, 33, 44 (ten events, then the checkpoint); the first event of
    // today is seq 45, so everything before the checkpoint at 44 can go.
    const std::string before_anchor =
        query_text(db, "SELECT lower(hex(chain)) FROM records WHERE seq = 43");
    auto r = prune(*j, {.older_than_ns = kDay, .export_to = dir.path + "/pruned.ndjson"});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_EQ(r->anchor_seq, 44);
    EXPECT_EQ(r->removed, 43);
    ASSERT_TRUE(j->close().ok());
    EXPECT_EQ(query_int(db, "SELECT min(seq) FROM records"), 44);
    EXPECT_EQ(query_text(db, "SELECT kind FROM records WHERE seq = 44"), "checkpoint");
    EXPECT_EQ(query_int(db, "SELECT count(*) FROM records WHERE kind = 'journal.pruned'"), 1);
    // The pruned range, exported first, with its content: 43 lines from seq 1.
    std::string exported = file_text(dir.path + "/pruned.ndjson");
    EXPECT_EQ(std::count(exported.begin(), exported.end(), '\n'), 43);
    EXPECT_EQ(nlohmann::json::parse(exported.substr(0, exported.find('\n')))["seq"], 1);

    // The prune is on record where it cut: the chain value before the anchor and the
    // anchor's, signed by a checkpoint in the same transaction.
    const int64_t record = query_int(db, "SELECT seq FROM records WHERE kind = 'journal.pruned'");
    auto pruned = nlohmann::json::parse(
        query_text(db, fmt::format("SELECT body FROM records WHERE seq = {}", record)))["data"];
    EXPECT_EQ(pruned["anchor_seq"], 44);
    EXPECT_EQ(pruned["first_removed_seq"], 1);
    EXPECT_EQ(pruned["prev_chain"], before_anchor);
    EXPECT_EQ(pruned["anchor_chain"],
              query_text(db, "SELECT lower(hex(chain)) FROM records WHERE seq = 44"));
    EXPECT_EQ(
        nlohmann::json::parse(query_text(db, fmt::format("SELECT body FROM records WHERE seq = {}",
                                                         record + 1)))["data"]["reason"],
        "prune");

    auto v = verify({.path = db});
    EXPECT_EQ(v.exit_code, 0) << v.reason;
    EXPECT_EQ(v.anchor_seq, 44);
    EXPECT_EQ(v.prune_record_seq, record);
    EXPECT_NE(format_report(v).find(fmt::format("verified from anchor seq 44 (records before it "
                                                "pruned, as the signed journal.pruned record at "
                                                "seq {} states)",
                                                record)),
              std::string::npos)
        << format_report(v);
    for (const auto& w : v.warnings)
        EXPECT_EQ(w.find("projection mismatch"), std::string::npos) << w;

    // Still evidence: a byte changed after the anchor is caught.
    ASSERT_TRUE(exec_sql(db,
                         "DROP TRIGGER records_no_update; UPDATE records SET body = "
                         "replace(body, 'signal', 'signaX') WHERE seq = 50"));
    auto t = verify({.path = db});
    EXPECT_EQ(t.exit_code, 1);
    EXPECT_EQ(t.first_bad_seq, 50) << t.reason;

    // A second prune with nothing older than the anchor removes nothing.
    auto again = Journal::open({.path = db});
    ASSERT_TRUE(again.ok());
    auto r2 = prune(**again, {.older_than_ns = kDay});
    ASSERT_TRUE(r2.ok());
    EXPECT_EQ(r2->anchor_seq, 0);
}

// Negative control: rows removed by hand before a seq that is not a signed checkpoint, with
// the anchor set to match, are not accepted as a prune.
TEST(Prune, ForgedAnchorIsRefused) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    { auto j = aged_journal(db); }
    ASSERT_TRUE(exec_sql(db,
                         "DROP TRIGGER records_no_delete; DELETE FROM records WHERE seq < 30; "
                         "INSERT INTO meta(key, value) VALUES('pruned_before', '30')"));
    auto v = verify({.path = db});
    EXPECT_EQ(v.exit_code, 1);
    EXPECT_EQ(v.first_bad_seq, 30);
    EXPECT_NE(v.reason.find("prune anchor seq 30 is not a signed checkpoint"), std::string::npos)
        << v.reason;
    // Rows removed up to a real signed checkpoint, the anchor set to it and the projection rows
    // dropped: `audit verify` with the public key and two checkpoints kept off the host, one
    // the cut removed and one at the cut, refuses it; with the check off (the negative
    // control) it passes, --require-anchored included.
    {
        warden::testing::TempDir off;
        std::string db3 = off.file("j3");
        ASSERT_EQ(::mkdir(db3.c_str(), 0700), 0);
        db3 += "/journal.db";
        { auto j = aged_journal(db3); }
        const std::string dir3 = db3.substr(0, db3.rfind('/'));
        std::filesystem::copy_file(dir3 + "/journal.pub", off.file("journal.pub"));
        std::filesystem::copy_file(dir3 + "/checkpoints/22", off.file("22"));
        std::filesystem::copy_file(dir3 + "/checkpoints/44", off.file("44"));
        ASSERT_TRUE(exec_sql(db3,
                             "DROP TRIGGER records_no_delete; DELETE FROM records WHERE seq < 44; "
                             "DELETE FROM sessions WHERE start_seq < 44; DELETE FROM activity "
                             "WHERE request_seq < 44; INSERT INTO meta(key, value) "
                             "VALUES('pruned_before', '44')"));
        const std::vector<std::string> args{"audit",
                                            "verify",
                                            "--journal",
                                            db3,
                                            "--public-key",
                                            off.file("journal.pub"),
                                            "--trusted-checkpoint",
                                            off.file("22"),
                                            "--trusted-checkpoint",
                                            off.file("44"),
                                            "--require-anchored"};
        auto refused = warden::testing::run_cli(off, args);
        EXPECT_EQ(refused.code, 1) << refused.out << refused.err;
        EXPECT_EQ(refused.out.substr(0, refused.out.find('\n')),
                  "INTEGRITY FAILURE at seq 44: unexplained prune: the log starts at seq 44 but "
                  "no journal.pruned record in it names seq 44 as its anchor");
        auto unchecked = warden::testing::run_cli(off, args, std::chrono::seconds(90),
                                                  {{"MCPWARDEN_FAULT", "prune_unproven"}});
        EXPECT_EQ(unchecked.code, 0) << unchecked.out << unchecked.err;
    }
    // And rows removed without an anchor are a gap, as before.
    TempDir dir2;
    std::string db2 = dir2.path + "/journal.db";
    { auto j = aged_journal(db2); }
    ASSERT_TRUE(
        exec_sql(db2, "DROP TRIGGER records_no_delete; DELETE FROM records WHERE seq < 44"));
    auto g = verify({.path = db2});
    EXPECT_EQ(g.exit_code, 1);
    EXPECT_NE(g.reason.find("sequence gap: seq 1 is missing"), std::string::npos) << g.reason;
}

// The newest journal.pruned record is checked against the seam: one whose stated chain value
// before the anchor does not lead to the anchor's fails; one from an older writer, without
// chain values, is accepted with a warning. Both written and signed with the journal's key,
// as only its holder can.
TEST(Prune, TheSeamIsCheckedAgainstTheNewestPruneRecord) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    {
        auto j = aged_journal(db);
        ASSERT_TRUE(prune(*j, {.older_than_ns = kDay, .compact = false}).ok());
    }
    const std::string anchor_chain =
        query_text(db, "SELECT lower(hex(chain)) FROM records WHERE seq = 44");
    auto sign_record = [&](Json data) {
        auto j = Journal::open({.path = db});
        ASSERT_TRUE(j.ok());
        auto a = (*j)->append(Event{"journal.pruned", "", 0, std::move(data)});
        ASSERT_TRUE(a.ok());
        ASSERT_TRUE((*j)->checkpoint().ok());
    };
    sign_record(Json{{"anchor_seq", 44}});
    auto legacy = verify({.path = db});
    EXPECT_EQ(legacy.exit_code, 0) << legacy.reason;
    const int64_t first =
        query_int(db, "SELECT max(seq) FROM records WHERE kind = 'journal.pruned'");
    EXPECT_NE(
        std::find(legacy.warnings.begin(), legacy.warnings.end(),
                  fmt::format("the journal.pruned record at seq {} states no chain values (an "
                              "older mcpwarden wrote it): the anchor's link rests on its "
                              "checkpoint's signature alone",
                              first)),
        legacy.warnings.end());

    sign_record(Json{
        {"anchor_seq", 44}, {"anchor_chain", anchor_chain}, {"prev_chain", std::string(64, '0')}});
    const int64_t second =
        query_int(db, "SELECT max(seq) FROM records WHERE kind = 'journal.pruned'");
    auto broken = verify({.path = db});
    EXPECT_EQ(broken.exit_code, 1);
    EXPECT_EQ(broken.first_bad_seq, 44);
    EXPECT_EQ(broken.reason, fmt::format("prune seam broken at seq 44: its chain value does not "
                                         "follow from the one the journal.pruned record (seq {}) "
                                         "states",
                                         second));
}

TEST(Prune, MaxSizeKeepsTheNewestWithinTheBound) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    auto j = aged_journal(db);
    int64_t all = query_int(db, "SELECT sum(length(body) + 160) FROM records");
    auto r = prune(*j, {.max_bytes = all / 2});
    ASSERT_TRUE(r.ok()) << r.error().message;
    EXPECT_GT(r->anchor_seq, 1);
    ASSERT_TRUE(j->close().ok());
    EXPECT_LE(query_int(db,
                        "SELECT sum(length(body) + 160) FROM records WHERE kind != "
                        "'journal.pruned' AND seq < (SELECT max(seq) FROM records WHERE kind "
                        "= 'journal.pruned')"),
              all / 2);
    EXPECT_EQ(verify({.path = db}).exit_code, 0);
}

// `audit anchor` printed and kept elsewhere; the whole directory rolled back to an older
// copy: verify alone passes (nothing on this machine can tell), with the kept anchor it fails.
TEST(Prune, KeptAnchorCatchesAWholeDirectoryRollback) {
    warden::testing::TempDir dir;
    std::string state = dir.file("j"), backup = dir.file("backup");
    ASSERT_EQ(::mkdir(state.c_str(), 0700), 0);
    std::string db = state + "/journal.db";
    { auto j = aged_journal(db); }
    std::filesystem::copy(state, backup, std::filesystem::copy_options::recursive);
    {
        auto j = Journal::open({.path = db});
        ASSERT_TRUE(j.ok());
        ASSERT_TRUE((*j)->append(Event{"process.signal", "later", 0, Json{{"n", 99}}}).ok());
        ASSERT_TRUE((*j)->checkpoint().ok());
    }
    auto anchor = warden::testing::run_cli(dir, {"audit", "anchor", "--journal", db});
    ASSERT_EQ(anchor.code, 0) << anchor.err;
    EXPECT_EQ(std::count(anchor.out.begin(), anchor.out.end(), '\n'), 1) << anchor.out;
    std::ofstream(dir.file("anchor.json")) << anchor.out;

    std::filesystem::remove_all(state);
    std::filesystem::rename(backup, state);
    auto alone = warden::testing::run_cli(dir, {"audit", "verify", "--journal", db});
    EXPECT_EQ(alone.code, 0) << alone.out << "(a consistent rollback passes on its own)";
    auto kept = warden::testing::run_cli(
        dir, {"audit", "verify", "--journal", db, "--trusted-checkpoint", dir.file("anchor.json")});
    EXPECT_EQ(kept.code, 1) << kept.out;
    EXPECT_NE(kept.out.find("truncated: checkpoint"), std::string::npos) << kept.out;
}

// The retention (`run --journal-retention`) is applied by the worker every `run` starts in
// the background, while its session runs, not at the session's end, where the client would
// wait for it: the aged journal is pruned from its anchor, on record, while the server is
// up. (The worker ends with its run: a run whose server exits at once may end it first, under
// load, and leave the work to the next run.) The control: with `--journal-retention 0`
// nothing is pruned.
TEST(Prune, EveryRunAppliesTheRetentionOffItsCriticalPath) {
    warden::testing::TempDir dir;
    for (std::string keep : {"0", "1d"}) {
        SCOPED_TRACE(keep);
        std::string db = dir.file("journal-" + keep + ".db");
        { auto j = aged_journal(db); }
        warden::testing::TestChild run({warden::testing::kCli, "run", "--journal", db,
                                        "--journal-retention", keep, "--",
                                        warden::testing::kFixture});
        ASSERT_TRUE(run.started()) << run.error();
        auto pruned = [&] {
            return query_int(db, "SELECT count(*) FROM records WHERE kind = 'journal.pruned'") == 1;
        };
        const auto end_run = [&run] {
            run.close_stdin();
            auto st = run.wait_exit(std::chrono::seconds(15));
            EXPECT_TRUE(st && warden::testing::describe_status(*st) == "exited 0");
        };
        if (keep == "0") {
            EXPECT_FALSE(warden::testing::wait_until(pruned, std::chrono::seconds(2)));
            end_run();
            EXPECT_EQ(query_int(db, "SELECT min(seq) FROM records"), 1);
        } else {
            const bool done = warden::testing::wait_until(pruned, std::chrono::seconds(20));
            end_run();
            ASSERT_TRUE(done) << "the run's worker did not apply the retention";
            EXPECT_EQ(query_int(db, "SELECT min(seq) FROM records"), 44);
            auto v = warden::testing::run_cli(dir, {"audit", "verify", "--journal", db});
            EXPECT_EQ(v.code, 0) << v.out << v.err;
        }
    }
}

}  // namespace
}  // namespace warden::journal
