// Reconcile: a session whose writer died without session.end becomes session.orphaned, and
// each request it never resolved becomes activity.unresolved; live writers are left alone.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "journal/journal.hpp"
#include "journal/verify.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

TEST(Reconcile, DeadWriterSessionIsOrphanedWithItsOpenRequestsUnresolved) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        auto j = Journal::open({.path = db});
        if (!j) ::_exit(3);
        SessionStart s;
        s.session = "dead";
        s.server_name = "fixture";
        if (!(*j)->append(session_start(s))) ::_exit(4);
        auto answered = (*j)->append(activity_request(
            {"dead", rpc_id_number(1), "tools/call", "a", "", RecordArgs::None, 1}));
        if (!answered) ::_exit(5);
        (*j)->post(
            activity_response({"dead", answered->seq, rpc_id_number(1), Outcome::ok, 1, 1, {}}));
        if (!(*j)->append(activity_request(
                {"dead", rpc_id_string("2"), "tools/call", "b", "", RecordArgs::None, 1})))
            ::_exit(6);
        ::raise(SIGKILL);  // the relay dies mid-call
    }
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    ASSERT_TRUE(WIFSIGNALED(status));

    auto j = Journal::open({.path = db});
    ASSERT_TRUE(j.ok());
    SessionStart live;
    live.session = "live";  // written by this process: its writer is alive
    ASSERT_TRUE((*j)->append(session_start(live)).ok());
    ASSERT_TRUE((*j)->append(activity_request({"live", rpc_id_number(9), "tools/call", "c", "",
                                               RecordArgs::None, 1}))
                    .ok());

    auto r = reconcile(**j);
    ASSERT_TRUE(r.ok()) << r.error().message;
    ASSERT_EQ(r->orphaned, std::vector<std::string>{"dead"});
    EXPECT_EQ(r->unresolved, 1);
    EXPECT_EQ(r->alive, 1);
    EXPECT_EQ(query_text(db, "SELECT state FROM sessions WHERE session = 'dead'"), "orphaned");
    EXPECT_EQ(query_text(db, "SELECT state FROM sessions WHERE session = 'live'"), "running");
    EXPECT_EQ(
        query_text(
            db, "SELECT group_concat(tool || ':' || outcome) FROM activity WHERE session = 'dead'"),
        "a:ok,b:unresolved");
    EXPECT_EQ(query_text(db,
                         "SELECT json_extract(body, '$.data.id.s') FROM records WHERE kind = "
                         "'activity.unresolved'"),
              "2");
    EXPECT_EQ(query_int(db, "SELECT count(*) FROM records WHERE kind = 'session.orphaned'"), 1);

    // Idempotent: nothing left to reconcile.
    auto again = reconcile(**j);
    ASSERT_TRUE(again.ok());
    EXPECT_TRUE(again->orphaned.empty());
    EXPECT_EQ(query_int(db, "SELECT count(*) FROM records WHERE kind = 'session.orphaned'"), 1);
    j->reset();
    auto v = verify({.path = db});
    EXPECT_EQ(v.exit_code, 0) << v.reason;
    for (const auto& w : v.warnings)
        EXPECT_EQ(w.find("projection"), std::string::npos) << w;
}

}  // namespace
}  // namespace warden::journal
