// The teardown on the record: a real two-process tree torn down by the contain engine with
// the journal's TeardownRecorder as its observer. Each target not on record yet gets a
// process.snapshot with the caller's reason before its first process.signal, every signal and
// every end is a row, and the engine's report goes into session.end as it is: integer
// microseconds, which the journal's integers-only bodies accept (a report in float
// milliseconds, its old form, is refused: the negative control).
#include "record/teardown_record.hpp"

#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "common/child.hpp"
#include "common/procfs.hpp"
#include "common/util.hpp"
#include "journal/journal_test_util.hpp"
#include "journal/query.hpp"

namespace warden::journal {
namespace {

using namespace std::chrono_literals;

// A root and its child: sh forks a sleeper and becomes the other.
struct TwoSleepers {
    warden::testing::TestChild root{{"/bin/sh", "-c", "sleep 60 & exec sleep 61"}};
    pid_t child = 0;
    ProcessId root_id{};
    // False (and a test failure) when the tree did not come up.
    bool up() {
        EXPECT_TRUE(root.started()) << root.error();
        EXPECT_TRUE(warden::testing::wait_until(
            [&] { return warden::testing::children_of(root.pid()).size() == 1; }, 5s));
        auto kids = warden::testing::children_of(root.pid());
        auto id = read_identity(root.pid());
        EXPECT_TRUE(id) << id.error().message;
        if (kids.size() != 1 || !id) return false;
        child = kids.front();
        root_id = *id;
        return true;
    }
    // Torn down by the engine with `observer` on it.
    TeardownReport tear_down(TeardownObserver& observer) const {
        TeardownScope scope;
        scope.roots = {root_id};
        TeardownOptions o;
        o.grace = 2s;
        o.verify_ports = false;
        o.observer = &observer;
        return Teardown(std::move(scope), o).run();
    }
};

TEST(TeardownRecorder, SnapshotBeforeSignalWithTheCallersReasonAndTheReportAsItIs) {
    testing_util::TempDir dir;
    const std::string db = dir.path + "/journal.db";
    auto j = Journal::open({.path = db});
    ASSERT_TRUE(j) << j.error().message;
    SessionStart start;
    start.session = "td";
    start.server_name = "sleepers";
    ASSERT_TRUE((*j)->append(session_start(start)));

    TwoSleepers tree;
    ASSERT_TRUE(tree.up());
    const warden::testing::TestChild& root = tree.root;
    const pid_t child = tree.child;

    {
        // The root is on record already (as reap's own snapshot puts it): no second one.
        TeardownRecorder recorder(**j, "td", {"test_first", "test_rescan"},
                                  {{tree.root_id.pid, tree.root_id.starttime}});
        TeardownReport report = tree.tear_down(recorder);
        ASSERT_TRUE(report.ok()) << report.render_text();

        SessionEnd end;
        end.session = "td";
        end.reason = "test";
        end.teardown = Json::parse(teardown_report_json(report));
        EXPECT_TRUE((*j)->append(session_end(end)));
        // The relay's session.end takes the report as the text the keeper sent: spliced as it
        // stands only if it is canonical, which a real teardown's report is (else parsed and
        // serialized again, on the way to `run`'s exit).
        const std::string text = teardown_report_json(report);
        auto spliced = canonical_with(Json::object(), "teardown", text);
        ASSERT_TRUE(spliced) << spliced.error().message << "\n" << text;
        EXPECT_EQ(*spliced, *canonical(Json{{"teardown", Json::parse(text)}}));
        EXPECT_TRUE(end.teardown["phases_us"]["total"].is_number_integer());
        EXPECT_EQ(end.teardown["targets"].size(), 2u);
        // Negative control: the report's old float milliseconds are not a journal body.
        end.teardown = Json{{"phases_ms", {{"total", 1.5}}}};
        auto refused = (*j)->append(session_end(end));
        ASSERT_FALSE(refused);
        EXPECT_NE(refused.error().message.find("floating-point"), std::string::npos)
            << refused.error().message;
    }
    ASSERT_TRUE((*j)->flush());

    auto records = session_records(db, "td");
    ASSERT_TRUE(records) << records.error().message;
    std::map<pid_t, int> snapshot_at, first_signal_at, exit_at;
    int at = 0;
    for (const Record& r : *records) {
        ++at;
        auto body = Json::parse(r.body);
        const Json& d = body["data"];
        if (r.kind == "process.snapshot") {
            EXPECT_EQ(d["reason"], "test_first") << r.body;
            snapshot_at[d["pid"].get<pid_t>()] = at;
        } else if (r.kind == "process.signal") {
            first_signal_at.emplace(d["pid"].get<pid_t>(), at);
        } else if (r.kind == "process.exit") {
            exit_at[d["pid"].get<pid_t>()] = at;
        }
    }
    EXPECT_EQ(snapshot_at.count(root.pid()), 0u) << "the root was on record already";
    ASSERT_EQ(snapshot_at.count(child), 1u);
    ASSERT_EQ(first_signal_at.count(child), 1u);
    EXPECT_LT(snapshot_at[child], first_signal_at[child]);
    EXPECT_EQ(first_signal_at.count(root.pid()), 1u);
    EXPECT_EQ(exit_at.count(child), 1u);
    EXPECT_EQ(exit_at.count(root.pid()), 1u);
}

// The keeper's recorder writes each record to the session's intent file before what it
// precedes, and hands the records over as those very lines (take_unrecorded_lines): the relay
// commits them as they stand. Each line must be the record's own: a signal the kernel
// refused has a record that differs from the intent written before it was sent, and its
// line must say so (the negative control: the intent's line, reused, would record the
// refused signal as delivered).
TEST(TeardownRecorder, EachRecordIsHandedOverAsItsOwnLineAndTheIntentFileHasTheRest) {
    testing_util::TempDir dir;
    const Paths paths = Paths::for_db(dir.path + "/journal.db");
    auto file = IntentFile::open(paths, "td");
    ASSERT_TRUE(file) << file.error().message;
    TeardownRecorder recorder(std::move(*file), "td", {});

    TwoSleepers tree;
    ASSERT_TRUE(tree.up());
    TeardownReport report = tree.tear_down(recorder);
    ASSERT_TRUE(report.ok()) << report.render_text();
    // A signal announced, then refused by the kernel (the target gone meanwhile).
    Target gone;
    gone.id = {tree.root_id.pid, tree.root_id.starttime + 1};
    recorder.on_signalling(gone, SIGKILL);
    recorder.on_signal(gone, SIGKILL, Error::sys("pidfd_send_signal", "", ESRCH));

    ASSERT_FALSE(recorder.intents_failed());
    std::vector<Event> events = recorder.take_unrecorded();
    std::vector<std::string> lines = recorder.take_unrecorded_lines();
    ASSERT_EQ(lines.size(), events.size());
    ASSERT_GE(events.size(), 2u + 2u + 2u + 1u) << "two snapshots, signals and exits, the refused";
    std::string in_file;
    {
        std::ifstream f(paths.intent_file("td"));
        std::stringstream text;
        text << f.rdbuf();
        in_file = text.str();
    }
    for (size_t i = 0; i < events.size(); ++i) {
        auto own = intent_lines(std::span(&events[i], 1));
        ASSERT_TRUE(own) << own.error().message;
        EXPECT_EQ(lines[i] + "\n", *own) << events[i].kind << " #" << i;
        if (i + 1 < events.size()) {
            EXPECT_NE(in_file.find(*own), std::string::npos) << "not in the intent file: " << *own;
        }
    }
    // The refused signal: its record and line carry the error, the file the intent before it.
    EXPECT_NE(lines.back().find("\"errno\":" + std::to_string(ESRCH)), std::string::npos)
        << lines.back();
    EXPECT_EQ(in_file.find(lines.back()), std::string::npos)
        << "the refused signal's line is the intent's, as if it had been delivered";
}

// The report as a record holds it: every target's command and every note redacted, the rest
// as the engine reported it. Only an explicit unredacted writer (a test's, here the control)
// gets the text as it was.
TEST(TeardownReportJson, CommandsAndNotesAreRedactedTheRestKept) {
    TeardownReport report;
    Target t;
    t.id = {4711, 99};
    t.command = "sh -c PGPASSWORD=hunter6 srv postgresql://admin:hunter3@db --api-key sk-live-X1";
    t.how = warden::Outcome::Killed;
    report.targets.push_back(std::move(t));
    report.notes.emplace_back("sweep 1: 4711 (srv --token tok7) left");
    const Json j = Json::parse(teardown_report_json(report));
    EXPECT_EQ(j["targets"][0]["command"],
              "sh -c PGPASSWORD=*** srv postgresql://***@db --api-key ***");
    EXPECT_EQ(j["targets"][0]["pid"], 4711);
    EXPECT_EQ(j["targets"][0]["how"], "killed");
    EXPECT_EQ(j["notes"][0], "sweep 1: 4711 (srv --token ***) left");
    const std::string raw = report.to_json_string(&unredacted_text);
    for (const char* secret : {"hunter6", "hunter3", "sk-live-X1", "tok7"})
        EXPECT_NE(raw.find(secret), std::string::npos) << secret;
}

}  // namespace
}  // namespace warden::journal
