// run_drill(), demo_from_json() and run_teardown_bench() (mcpwarden/drill.hpp) driven
// directly: the report a user reads, the exit code `mcpwarden drill` would give, the usage
// errors, and nothing left of any tree afterwards (the test's tag is the oracle).
#include <stdlib.h>

#include <chrono>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/testing.hpp"
#include "mcpwarden/mcpwarden.hpp"

namespace warden::testing {
namespace {

// Every process a drill starts inherits the test's tag while this lives.
class DrillTag {
  public:
    DrillTag() : tag_(unique_tag()) { ::setenv(kTagVar, tag_.c_str(), 1); }
    ~DrillTag() { ::unsetenv(kTagVar); }
    DrillTag(const DrillTag&) = delete;
    DrillTag& operator=(const DrillTag&) = delete;
    const std::string& tag() const { return tag_; }

  private:
    std::string tag_;
};

TEST(ApiDrill, ParseCrashAtNamesTheChoices) {
    auto c = api::parse_crash_at("mid-response");
    ASSERT_TRUE(c);
    EXPECT_EQ(*c, api::CrashAt::MidResponse);
    auto bad = api::parse_crash_at("later");
    ASSERT_FALSE(bad);
    EXPECT_EQ(bad.error().message,
              "--crash-at: expected before-init, idle, in-flight or mid-response, got 'later'");
}

TEST(ApiDrill, CompareDirectReportsTheLeakAndContainsItWithMcpwarden) {
    TempDir dir;
    DrillTag tag;
    TreeGuard guard(0, tag.tag());
    api::DrillOptions o;
    o.command = {kFixture, "--shape", "setsid", "--on-eof", "exit"};
    o.crash_at = api::CrashAt::Idle;
    o.compare_direct = true;
    o.journal = dir.file("journal.db");
    o.mcpwarden = kCli;
    o.eof_grace = std::chrono::milliseconds(300);
    o.term_grace = std::chrono::milliseconds(500);
    auto r = api::run_drill(o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_TRUE(r->ok) << r->text;
    EXPECT_FALSE(r->interrupted);
    EXPECT_EQ(r->exit_code, 0) << r->text;
    auto j = nlohmann::json::parse(r->json, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r->json;
    ASSERT_EQ(j["trials"].size(), 2u) << r->json;
    for (const auto& t : j["trials"]) {
        if (t["mode"] == "direct") {
            EXPECT_GT(t["processes_left"].get<int>(), 0) << t.dump(2);  // the setsid helper
        } else {
            EXPECT_EQ(t["processes_left"], 0) << t.dump(2);
        }
    }
    EXPECT_TRUE(j["verify"]["ok"].get<bool>()) << j["verify"].dump();
    EXPECT_NE(r->text.find("without mcpwarden"), std::string::npos) << r->text;
    EXPECT_EQ(r->text.find("\x1b["), std::string::npos) << "colour was not asked for";
    EXPECT_NE(r->markdown.find('|'), std::string::npos) << r->markdown;
    EXPECT_TRUE(live_tagged(tag.tag()).empty()) << "the drill left a process behind";
}

TEST(ApiDrill, WithoutACommandOrJournalItCannotRun) {
    api::DrillOptions o;
    o.journal = "/tmp/unused.db";
    EXPECT_FALSE(api::run_drill(o));
    o.command = {kFixture};
    o.journal.clear();
    EXPECT_FALSE(api::run_drill(o));
}

TEST(ApiDrill, DemoFromJsonRejectsOtherJson) {
    auto r = api::demo_from_json(R"({"benchmark":"teardown"})");
    ASSERT_FALSE(r);
    EXPECT_FALSE(r.error().message.empty());
    EXPECT_FALSE(api::demo_from_json("not json at all"));
}

TEST(ApiDrill, TeardownBenchMeasuresAndLeavesNothing) {
    DrillTag tag;
    TreeGuard guard(0, tag.tag());
    api::TeardownBenchOptions o;
    o.trials = 1;
    o.grace_ms = 200;
    o.shapes = {"setsid"};
    o.strategies = {"killpg", "warden-subreaper"};
    o.fixture = kFixture;
    o.command = "api test";
    auto r = api::run_teardown_bench(o);
    ASSERT_TRUE(r) << r.error().message;
    EXPECT_EQ(r->errors, 0) << r->table;
    auto j = nlohmann::json::parse(r->json, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r->json;
    EXPECT_EQ(j["command"], "api test");
    for (const auto& c : j["cells"]) {
        if (c["strategy"] == "killpg") {
            EXPECT_EQ(c["orphan_trials"], 1) << c.dump();  // the control: killpg leaves one
        } else {
            EXPECT_EQ(c["orphan_trials"], 0) << c.dump();
        }
    }
    EXPECT_NE(r->table.find("warden-subreaper"), std::string::npos) << r->table;
    EXPECT_NE(r->svg.find("<svg"), std::string::npos);
    EXPECT_TRUE(live_tagged(tag.tag()).empty());
}

TEST(ApiDrill, TeardownBenchUnknownShapeIsNamed) {
    api::TeardownBenchOptions o;
    o.shapes = {"triangle"};
    o.fixture = kFixture;
    auto r = api::run_teardown_bench(o);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "unknown shape 'triangle'");
}

}  // namespace
}  // namespace warden::testing
