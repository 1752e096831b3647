// Never the wrong process: a recycled PID is not signalled, and a process that merely looks
// like the tree (same argv) but is not in it survives.
#include <thread>

#include <gtest/gtest.h>

#include "common/child.hpp"
#include "common/tree_guard.hpp"
#include "contain/keeper_harness.hpp"

namespace warden::testing {
namespace {

// PID reuse, made deterministic (psutil's trick): after the plan, one target's recorded PID
// is rewritten to the PID of an unrelated live process (the decoy), keeping the target's
// starttime — exactly what the record looks like when the target died and its PID went to
// someone else. The engine must refuse to signal it, say so, and still end the real tree.
TEST(Identity, RecycledPidIsNeverSignalled) {
    TempDir decoy_dir;
    TestChild decoy({kFixture, "--shape", "normal", "--port-file", decoy_dir.file("port")});
    ASSERT_TRUE(decoy.started()) << decoy.error();
    ASSERT_TRUE(wait_for_file(decoy_dir.file("port"), 10s));
    const pid_t decoy_pid = decoy.pid();
    const uint64_t decoy_start = read_stat(decoy_pid)->starttime;
    // starttime counts clock ticks (10 ms): a server started in the decoy's tick would make
    // the "stale" record name the decoy exactly, and signalling it would be right. Two ticks
    // apart, the record is stale for certain (the same-tick flake of the reap test).
    std::this_thread::sleep_for(25ms);

    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    Scenario sc;
    sc.extra_args = {"--on-eof", "ignore"};
    sc.contain.use_cgroup = false;
    sc.contain.faults = Faults{};
    sc.teardown = quick_teardown();
    sc.teardown.after_plan = [decoy_pid](std::vector<Target>& targets) {
        for (Target& t : targets)
            if (t.role == Role::Root) {
                t.id.pid = decoy_pid;  // stale record: the decoy now "has" the server's PID
                t.pidfd.reset();       // as if the pidfd layer were off: only the check guards
                return;
            }
    };
    nlohmann::json j = run_scenario(sc, tag, dir);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    const auto& r = j["report"];
    EXPECT_EQ(r["counts"]["identity_changed"].get<int>(), 1) << j["text"].get<std::string>();
    for (const auto& t : r["targets"])
        if (t["pid"] == decoy_pid) {
            EXPECT_EQ(t["how"], "identity changed");
            EXPECT_TRUE(t["signals"].empty()) << t.dump();
        }
    // The decoy was not touched; the real tree is gone anyway (re-planned by identity).
    EXPECT_TRUE(is_same_live_process(decoy_pid, decoy_start));
    EXPECT_EQ(decoy.wait_exit(0ms), std::nullopt);
    EXPECT_TRUE(live_tagged(tag).empty()) << j["text"].get<std::string>();
    EXPECT_TRUE(r["ok"].get<bool>()) << j["text"].get<std::string>();
    // The test ends the decoy itself (TestChild's destructor, by identity).
}

// The same identity check with the pidfd in place: a target whose starttime no longer
// matches is refused even though a pidfd would have made the signal safe.
TEST(Identity, ChangedStarttimeIsRefusedEvenWithAPidfd) {
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    Scenario sc;
    sc.extra_args = {"--on-eof", "ignore"};
    sc.contain.use_cgroup = false;
    sc.contain.faults = Faults{};
    sc.teardown = quick_teardown();
    sc.teardown.after_plan = [](std::vector<Target>& targets) {
        for (Target& t : targets)
            if (t.role != Role::Root) {
                t.id.starttime += 1;
                return;
            }
    };
    nlohmann::json j = run_scenario(sc, tag, dir);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    EXPECT_EQ(j["report"]["counts"]["identity_changed"].get<int>(), 1)
        << j["text"].get<std::string>();
    // The real process was planned again under its true identity and ended.
    EXPECT_TRUE(live_tagged(tag).empty()) << j["text"].get<std::string>();
}

// A decoy with exactly the tree's argv, started outside the tree, survives the teardown.
TEST(Identity, DecoyWithTheSameArgvSurvives) {
    TempDir dir;
    const std::string port_file = dir.file("port");
    TestChild decoy(
        {kFixture, "--shape", "normal", "--port-file", port_file, "--on-eof", "ignore"});
    ASSERT_TRUE(decoy.started()) << decoy.error();
    ASSERT_TRUE(wait_for_file(port_file, 10s));
    const uint16_t decoy_port = read_port_file(port_file).value_or(0);
    ASSERT_EQ(::unlink(port_file.c_str()), 0);  // the tree writes the same path again

    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    for (bool cgroup : {false, true}) {
        Scenario sc;
        sc.extra_args = {"--on-eof", "ignore"};  // argv identical to the decoy's
        sc.contain.use_cgroup = cgroup;
        sc.contain.faults = Faults{};
        sc.teardown = quick_teardown();
        nlohmann::json j = run_scenario(sc, tag, dir);
        ASSERT_FALSE(j.contains("error")) << j.dump(2);
        EXPECT_TRUE(j["report"]["ok"].get<bool>()) << j["text"].get<std::string>();
        EXPECT_TRUE(live_tagged(tag).empty());
        EXPECT_EQ(live_tagged(decoy.tag()).size(), 2u) << "decoy or its helper was hit";
        EXPECT_FALSE(port_bindable(decoy_port));
        ::unlink(port_file.c_str());
    }
}

}  // namespace
}  // namespace warden::testing
