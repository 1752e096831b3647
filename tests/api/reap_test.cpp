// mcpwarden/reap.hpp through the shared library: the orphans of a SIGKILLed client are
// planned, reaped and gone, while a live tree with the same command line and a decoy outside
// any tree are left alone; the usage rules and a journal that cannot be opened come back as
// errors that name what and why. Every selection is narrowed to this test's tag.
#include <sys/types.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing.hpp"
#include "mcpwarden/mcpwarden.hpp"
#include "reap/reap_test_util.hpp"

namespace warden::testing {
namespace {

bool alive_as(pid_t pid, uint64_t starttime) {
    auto st = read_stat(pid);
    return st && st->starttime == starttime && st->state != 'Z';
}

api::ReapOptions orphans_of(const std::string& tag, const std::string& journal) {
    api::ReapOptions o;
    o.selection.orphans = true;
    o.selection.include_suspects = true;  // the fixture pairs are MCP by name alone
    o.selection.match = tag;              // only this test's processes
    o.journal_path = journal;
    o.use_client_configs = false;
    o.grace = std::chrono::milliseconds(1000);
    return o;
}

TEST(ApiReap, OrphansOfAKilledClientAreReapedAndNothingElse) {
    const std::string tag = unique_tag();
    CrashedClient crashed(tag, 2);
    ASSERT_TRUE(crashed.ready());
    FakeClient live(1, tag);  // same command line, its client alive: never reaped
    ASSERT_TRUE(live.ready());
    Decoy decoy(tag);  // same argv, stdin on /dev/null: not an MCP tree
    ASSERT_TRUE(wait_until([&] { return descendants_of(decoy.pid()).size() >= 2; }, 10s));
    auto live_members = live.members();
    auto decoy_start = read_stat(decoy.pid());
    ASSERT_TRUE(decoy_start);
    TempDir dir;
    const std::string journal = dir.file("journal.db");

    auto reaper = api::Reaper::open(orphans_of(tag, journal));
    ASSERT_TRUE(reaper) << reaper.error().message;
    EXPECT_TRUE(reaper->has_journal());
    auto plan = reaper->plan();
    ASSERT_TRUE(plan) << plan.error().message;
    ASSERT_EQ(plan->trees.size(), 2u);
    for (const api::ReapTree& t : plan->trees) {
        EXPECT_EQ(t.selected_as, "suspect");  // the fixture pairs: MCP by name alone
        EXPECT_GE(t.members.size(), 3u);
        EXPECT_NE(t.command().find(tag), std::string::npos) << t.command();
        EXPECT_TRUE(nlohmann::json::parse(t.capabilities_json).is_object());
        for (const api::ReapMember& m : t.members)
            for (auto [pid, starttime] : live_members)
                EXPECT_NE(m.id.pid, pid) << "a member of the live tree is planned";
    }
    // Negative control: everything planned is alive before act().
    for (auto [pid, starttime] : crashed.leaked)
        EXPECT_TRUE(alive_as(pid, starttime)) << pid;

    api::ReapReport r = reaper->act(*plan);
    EXPECT_TRUE(r.ok);
    ASSERT_EQ(r.trees.size(), 2u);
    for (const api::ReapTreeResult& t : r.trees) {
        EXPECT_EQ(t.outcome, "reaped") << t.detail;
        EXPECT_TRUE(t.torn_down);
        EXPECT_EQ(t.survivors, 0u);
        EXPECT_TRUE(t.ports_free);
        EXPECT_FALSE(t.revoke_ran);
    }
    for (auto [pid, starttime] : crashed.leaked)
        EXPECT_FALSE(alive_as(pid, starttime)) << pid << " survived the reap";
    for (auto [pid, starttime] : live_members)
        EXPECT_TRUE(alive_as(pid, starttime)) << pid << " of the live tree was hit";
    EXPECT_TRUE(alive_as(decoy.pid(), decoy_start->starttime)) << "the decoy was hit";
    EXPECT_EQ(reaper->close(), std::nullopt);

    // A second pass finds nothing more to reap.
    auto again = api::Reaper::open(orphans_of(tag, journal));
    ASSERT_TRUE(again);
    auto none = again->plan();
    ASSERT_TRUE(none);
    EXPECT_TRUE(none->trees.empty());
    again->record_plan(*none, false);
    EXPECT_EQ(again->close(), std::nullopt);
    api::VerifyResult v = api::journal_verify(journal);
    EXPECT_TRUE(v.ok) << v.json;
    EXPECT_GT(v.records, 2);  // snapshots, signals, exits, targets, passes
}

TEST(ApiReap, UsageErrorsSayWhatAndWhy) {
    auto none = api::reap_check({});
    ASSERT_TRUE(none);
    EXPECT_EQ(none->message, "nothing selected: give --orphans, --session ID or --pid N");
    api::ReapSelection match_only;
    match_only.match = "x";
    auto m = api::reap_check(match_only);
    ASSERT_TRUE(m);
    EXPECT_NE(m->message.find("--match only narrows a selection"), std::string::npos);
    api::ReapSelection orphans;
    orphans.orphans = true;
    EXPECT_EQ(api::reap_check(orphans), std::nullopt);  // the control: a usable selection

    auto d = api::parse_duration("5 parsecs");
    ASSERT_FALSE(d);
    EXPECT_NE(d.error().message.find("5 parsecs"), std::string::npos) << d.error().message;
    auto ok = api::parse_duration("1h30m");
    ASSERT_TRUE(ok);
    EXPECT_EQ(ok->count(), 90 * 60 * 1000);

    auto u = api::user_id("no-such-user-mcpwarden");
    ASSERT_FALSE(u);
    EXPECT_EQ(u.error().message, "no-such-user-mcpwarden: no such user");
    auto me = api::user_id(std::to_string(::getuid()));
    ASSERT_TRUE(me);
    EXPECT_EQ(*me, ::getuid());

    api::ReapOptions bad;  // Reaper::open applies the same rules
    auto r = api::Reaper::open(bad);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, none->message);
}

TEST(ApiReap, NothingIsReapedOffTheRecord) {
    TempDir dir;
    const std::string file = dir.file("not-a-dir");
    std::ofstream(file) << "x";
    api::ReapOptions o = orphans_of(unique_tag(), file + "/journal.db");
    auto r = api::Reaper::open(o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message.rfind("cannot open the journal, and nothing is reaped off the "
                                      "record: ",
                                      0),
              0u)
        << r.error().message;
    // A plan that is never acted on may go without one.
    o.journal_required = false;
    auto dry = api::Reaper::open(o);
    ASSERT_TRUE(dry) << dry.error().message;
    EXPECT_FALSE(dry->has_journal());
    auto plan = dry->plan();
    ASSERT_TRUE(plan) << plan.error().message;
    EXPECT_TRUE(plan->trees.empty());
    api::ReapReport rep = dry->act(*plan);  // nothing planned, nothing done
    EXPECT_TRUE(rep.ok);
}

}  // namespace
}  // namespace warden::testing
