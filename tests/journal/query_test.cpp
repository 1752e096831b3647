// Queries over the journal (src/journal/query.cpp) that the recording paths rely on.
#include <gtest/gtest.h>

#include "journal/journal.hpp"
#include "journal/query.hpp"
#include "journal_test_util.hpp"

namespace warden::journal {
namespace {

using namespace testing_util;

// The keeper and reap record a session.start only for a session that has none: the lookup
// tells a started session from one whose only rows came later, and says why when it cannot.
TEST(Query, HasSessionStartTellsAStartedSessionFromOneWithOnlyLaterRows) {
    TempDir dir;
    std::string db = dir.path + "/journal.db";
    {
        auto j = Journal::open({.path = db});
        ASSERT_TRUE(j.ok()) << j.error().message;
        SessionStart s;
        s.session = "started";
        ASSERT_TRUE((*j)->append(session_start(s)).ok());
        ASSERT_TRUE(
            (*j)->append(Event{"process.signal", "unstarted", 0, Json{{"signal", 15}}}).ok());
    }
    auto started = has_session_start(db, "started");
    ASSERT_TRUE(started.ok()) << started.error().message;
    EXPECT_TRUE(*started);
    auto unstarted = has_session_start(db, "unstarted");
    ASSERT_TRUE(unstarted.ok()) << unstarted.error().message;
    EXPECT_FALSE(*unstarted);
    auto unknown = has_session_start(db, "never-seen");
    ASSERT_TRUE(unknown.ok());
    EXPECT_FALSE(*unknown);

    auto missing = has_session_start(dir.path + "/nope.db", "started");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.error().message.find("nope.db"), std::string::npos)
        << missing.error().message;
}

}  // namespace
}  // namespace warden::journal
