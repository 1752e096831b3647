// journal_sessions(), journal_activity(), journal_session_records(), journal_export(),
// journal_reconcile() (mcpwarden/journal_query.hpp) and audit_verify() (mcpwarden/audit.hpp)
// on a journal written by a real session through run_session(): what `mcpwarden journal …`
// and `mcpwarden audit verify` show a user.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "api/session_child.hpp"
#include "common/testing.hpp"
#include "mcpwarden/mcpwarden.hpp"

namespace warden::testing {
namespace {

// One fixture session (initialize + an echo call, then EOF) recorded in dir/journal.db.
class JournalOfOneSession : public ::testing::Test {
  protected:
    void SetUp() override {
        const std::string tag = unique_tag();
        TreeGuard guard(0, tag);
        auto r = echo_session_in_child("normal", db, dir, tag);
        ASSERT_TRUE(r.exit_code) << "run_session did not return";
        ASSERT_EQ(*r.exit_code, 0);
        ASSERT_TRUE(live_tagged(tag).empty());
    }
    TempDir dir;
    std::string db = dir.file("journal.db");
};

TEST_F(JournalOfOneSession, SessionsActivityAndRecords) {
    auto sessions = api::journal_sessions(db);
    ASSERT_TRUE(sessions) << sessions.error().message;
    ASSERT_EQ(sessions->size(), 1u);
    const api::JournalSession& s = sessions->front();
    EXPECT_EQ(s.server, "mcpwarden-fixture");
    EXPECT_EQ(s.state, "ended");
    EXPECT_TRUE(s.ended_ns);
    EXPECT_GE(s.requests, 1);

    auto activity = api::journal_activity(db);
    ASSERT_TRUE(activity) << activity.error().message;
    bool echo = false;
    for (const auto& a : *activity)
        echo = echo || (a.method == "tools/call" && a.tool == "echo" && a.session == s.session);
    EXPECT_TRUE(echo) << activity->size() << " requests, none the echo call";
    api::JournalFilter other;
    other.tool = "no-such-tool";
    auto none = api::journal_activity(db, other);
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->empty());

    auto records = api::journal_session_records(db, s.session);
    ASSERT_TRUE(records) << records.error().message;
    ASSERT_FALSE(records->empty());
    EXPECT_EQ(records->front().kind, "session.start");
    EXPECT_EQ(records->back().kind, "session.end");
    auto unknown = api::journal_session_records(db, "no-such-session");
    ASSERT_TRUE(unknown);
    EXPECT_TRUE(unknown->empty());
}

TEST_F(JournalOfOneSession, BadSinceIsNamed) {
    api::JournalFilter f;
    f.since = "bogus";
    auto r = api::journal_sessions(db, f);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "--since bogus: expected e.g. 30m, 2h, 1d or Unix seconds");
}

TEST_F(JournalOfOneSession, ExportLinesInSeqOrderAndTheSinkCanStop) {
    std::vector<std::string> lines;
    auto n =
        api::journal_export(db, 0, api::ExportFormat::Ndjson, false, [&](const std::string& line) {
            lines.push_back(line);
            return true;
        });
    ASSERT_TRUE(n) << n.error().message;
    ASSERT_EQ(*n, static_cast<std::int64_t>(lines.size()));
    ASSERT_GE(lines.size(), 3u);
    std::int64_t last = 0;
    for (const auto& l : lines) {
        ASSERT_EQ(l.back(), '\n');
        auto j = nlohmann::json::parse(l, nullptr, false);
        ASSERT_TRUE(j.is_object()) << l;
        EXPECT_GT(j["seq"].get<std::int64_t>(), last);
        last = j["seq"].get<std::int64_t>();
    }
    int taken = 0;
    auto stopped = api::journal_export(db, 0, api::ExportFormat::OtlpJson, false,
                                       [&](const std::string&) { return ++taken < 2; });
    ASSERT_TRUE(stopped);
    EXPECT_EQ(*stopped, 1);
    EXPECT_EQ(taken, 2);
    auto after = api::journal_export(db, last, api::ExportFormat::Ndjson, false,
                                     [](const std::string&) { return true; });
    ASSERT_TRUE(after);
    EXPECT_EQ(*after, 0);

    auto f = api::parse_export_format("otlp-json");
    ASSERT_TRUE(f);
    EXPECT_EQ(*f, api::ExportFormat::OtlpJson);
    EXPECT_FALSE(api::parse_export_format("xml"));
}

TEST_F(JournalOfOneSession, ReconcileFindsNothingToMarkAndAuditVerifies) {
    auto r = api::journal_reconcile(db);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->orphaned.empty());
    EXPECT_EQ(r->unresolved, 0);

    api::AuditOptions o;
    o.path = db;
    api::AuditReport a = api::audit_verify(o);
    EXPECT_EQ(a.exit_code, 0) << a.text;
    EXPECT_TRUE(a.ok);
    EXPECT_GT(a.records, 0);
    EXPECT_FALSE(a.text.empty());
    auto j = nlohmann::json::parse(a.json, nullptr, false);
    EXPECT_TRUE(j.is_object()) << a.json;
}

TEST(ApiJournalQuery, MissingJournalIsAnErrorAndAuditSaysExit2) {
    TempDir dir;
    const std::string missing = dir.file("nothing-here.db");
    EXPECT_FALSE(api::journal_sessions(missing));
    api::AuditOptions o;
    o.path = missing;
    api::AuditReport a = api::audit_verify(o);
    EXPECT_EQ(a.exit_code, 2) << a.text;
    EXPECT_FALSE(a.reason.empty());
}

}  // namespace
}  // namespace warden::testing
