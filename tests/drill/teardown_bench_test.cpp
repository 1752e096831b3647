// `mcpwarden bench teardown` through the built binary, on the two shapes that separate the
// strategies: every warden trial is measured (none dropped as an error), leaves nothing and
// releases the port; killpg on the same shapes leaves orphans, and the bench must see them
// (the negative control of its own oracle); nothing of any trial is left after it returns,
// not even an empty session cgroup (each warden-cgroup trial makes one).
#include <sys/stat.h>

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/json_doc.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

const nlohmann::json* cell(const nlohmann::json& j, const std::string& strategy,
                           const std::string& shape) {
    for (const auto& c : j["cells"])
        if (c["strategy"] == strategy && c["shape"] == shape) return &c;
    return nullptr;
}

TEST(TeardownBench, WardenTrialsAreMeasuredAndLeaveNothingWhileKillpgLeavesOrphans) {
    TempDir dir;
    CliRun r = run_cli(dir, {"bench", "teardown", "--trials", "2", "--grace-ms", "200", "--shapes",
                             "setsid", "doublefork", "--strategies", "killpg", "warden-subreaper",
                             "warden-cgroup", "--json", "--fixture", kFixture});
    ASSERT_EQ(r.code, 0) << r.err;
    EXPECT_TRUE(r.left_after.empty()) << r.left_after.size() << " process(es) left";
    EXPECT_TRUE(r.cgroups_left.empty()) << "cgroups left:" << cgroups_left_text(r);
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_object()) << r.out;
    EXPECT_EQ(j["schema"], "mcpwarden.bench.teardown");
    EXPECT_EQ(undocumented_keys(j, {schema_doc("bench-teardown-json.md")}),
              std::vector<std::string>{});
    // The strategies of a shape take turns, trial by trial (a slow spell of the machine hits
    // them alike): the progress lines of setsid name them in that order, twice (warden-cgroup
    // left out: where no cgroup can be made it is skipped after its first trial).
    std::vector<std::string> order;
    std::istringstream progress(r.err);
    for (std::string line; std::getline(progress, line);)
        if (auto at = line.find("] "), end = line.find(" setsid:");
            at != std::string::npos && end != std::string::npos &&
            line.find("warden-cgroup") == std::string::npos)
            order.push_back(line.substr(at + 2, end - at - 2));
    EXPECT_EQ(order, (std::vector<std::string>{"killpg", "warden-subreaper", "killpg",
                                               "warden-subreaper"}))
        << r.err;
    for (std::string shape : {"setsid", "doublefork"}) {
        const auto* w = cell(j, "warden-subreaper", shape);
        ASSERT_NE(w, nullptr) << shape;
        EXPECT_FALSE(w->contains("errors")) << shape << ": " << w->dump();
        EXPECT_EQ((*w)["trials"], 2) << shape;
        EXPECT_EQ((*w)["orphan_trials"], 0) << shape;
        EXPECT_EQ((*w)["port_held_trials"], 0) << shape;
        EXPECT_EQ((*w)["never_released"], 0) << shape;
        EXPECT_GE((*w)["release_median_ms"].get<double>(), 0) << shape;

        const auto* k = cell(j, "killpg", shape);
        ASSERT_NE(k, nullptr) << shape;
        EXPECT_EQ((*k)["trials"], 2) << shape;
        EXPECT_EQ((*k)["orphan_trials"], 2) << shape << ": killpg must leave the escapee";

        // Where the test can make cgroups, the bench can too: its cgroup trials ran.
        const auto* cg = cell(j, "warden-cgroup", shape);
        ASSERT_NE(cg, nullptr) << shape;
        if (r.cgroup_checked) {
            EXPECT_EQ((*cg)["trials"], 2) << shape << ": " << cg->dump();
        }
    }
}

// Each warden-cgroup trial's keeper removes its session cgroup on its way out, after its
// report: the bench lets it finish (bounded) before anything is killed. Here that removal is
// made slow (slow_release, 300 ms) and nothing is left. Negative control: the bench SIGKILLs
// the keeper as soon as its report is in (bench_keeper_killed), as it once did, and the
// session cgroup stays behind (seen once in CI without the slowing, by the test above).
TEST(TeardownBench, AKeeperRemovesItsCgroupBeforeTheTrialEnds) {
    auto bench = [](const std::string& faults) {
        TempDir dir;
        return run_cli(dir,
                       {"bench", "teardown", "--trials", "1", "--grace-ms", "200", "--shapes",
                        "normal", "--strategies", "warden-cgroup", "--json", "--fixture", kFixture},
                       90s, {{"MCPWARDEN_FAULT", faults}});
    };
    CliRun r = bench("slow_release");
    ASSERT_EQ(r.code, 0) << r.err;
    if (!r.cgroup_checked) GTEST_SKIP() << "no writable cgroup v2 here";
    EXPECT_TRUE(r.cgroups_left.empty()) << "cgroups left:" << cgroups_left_text(r);

    CliRun killed = bench("slow_release,bench_keeper_killed");
    ASSERT_EQ(killed.code, 0) << killed.err;
    EXPECT_FALSE(killed.cgroups_left.empty()) << "the negative control left nothing";
}

// The cgroup oracle of run_cli sees a directory left in the scratch cgroup.
TEST(TeardownBench, NegativeControlTheCgroupOracleSeesALeftover) {
    ScratchCgroup cg("wtest-oracle-" + unique_tag());
    if (!cg.valid()) GTEST_SKIP() << "no writable cgroup v2 here";
    ASSERT_EQ(::mkdir((cg.path() + "/mcpwarden-left").c_str(), 0755), 0);
    EXPECT_EQ(cg.children(), std::vector<std::string>{"mcpwarden-left"});
}

TEST(TeardownBench, UnknownShapeIsAnErrorNamingIt) {
    TempDir dir;
    CliRun r = run_cli(dir, {"bench", "teardown", "--shapes", "triangle", "--fixture", kFixture});
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.err.find("triangle"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace warden::testing
