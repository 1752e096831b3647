// The teardown on the record: a real two-process tree torn down by the contain engine with
// the journal's TeardownRecorder as its observer. Each target not on record yet gets a
// process.snapshot with the caller's reason before its first process.signal, every signal and
// every end is a row, and the engine's report goes into session.end as it is: integer
// microseconds, which the journal's integers-only bodies accept (a report in float
// milliseconds, its old form, is refused: the negative control).
#include "journal/teardown_record.hpp"

#include <signal.h>
#include <unistd.h>

#include <map>
#include <string>

#include <gtest/gtest.h>

#include "common/child.hpp"
#include "common/procfs.hpp"
#include "common/util.hpp"
#include "journal/query.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace std::chrono_literals;

TEST(TeardownRecorder, SnapshotBeforeSignalWithTheCallersReasonAndTheReportAsItIs) {
    testing_util::TempDir dir;
    const std::string db = dir.path + "/journal.db";
    auto j = Journal::open({.path = db});
    ASSERT_TRUE(j) << j.error().message;
    SessionStart start;
    start.session = "td";
    start.server_name = "sleepers";
    ASSERT_TRUE((*j)->append(session_start(start)));

    // sh forks a sleeper and becomes the other: a root and its child.
    warden::testing::TestChild root({"/bin/sh", "-c", "sleep 60 & exec sleep 61"});
    ASSERT_TRUE(root.started()) << root.error();
    ASSERT_TRUE(warden::testing::wait_until(
        [&] { return warden::testing::children_of(root.pid()).size() == 1; }, 5s));
    const pid_t child = warden::testing::children_of(root.pid()).front();
    auto root_id = read_identity(root.pid());
    ASSERT_TRUE(root_id) << root_id.error().message;

    {
        // The root is on record already (as reap's own snapshot puts it): no second one.
        TeardownRecorder recorder(**j, "td", {"test_first", "test_rescan"},
                                  {{root_id->pid, root_id->starttime}});
        TeardownScope scope;
        scope.roots = {*root_id};
        TeardownOptions o;
        o.grace = 2s;
        o.verify_ports = false;
        o.observer = &recorder;
        TeardownReport report = Teardown(std::move(scope), o).run();
        ASSERT_TRUE(report.ok()) << report.render_text();

        SessionEnd end;
        end.session = "td";
        end.reason = "test";
        end.teardown = Json::parse(report.to_json_string());
        EXPECT_TRUE((*j)->append(session_end(end)));
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

}  // namespace
}  // namespace warden::journal
