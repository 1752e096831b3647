// Negative controls: the guards are needed. Without them the same trees do leave survivors,
// and these tests see them — so the zero-survivor tests could fail.
#include <csignal>

#include <gtest/gtest.h>

#include "common/child.hpp"
#include "common/tree_guard.hpp"
#include "contain/keeper_harness.hpp"

namespace warden::testing {
namespace {

// killpg(SIGKILL) on the server's group, as many MCP clients do: the setsid helper and the
// double-forked daemon are in other groups and keep running, port and all.
void expect_killpg_leaves_survivors(const std::string& shape) {
    TempDir dir;
    ChildOptions co;
    co.new_process_group = true;
    TestChild c({kFixture, "--shape", shape, "--port-file", dir.file("port")}, co);
    ASSERT_TRUE(c.started()) << c.error();
    ASSERT_TRUE(wait_for_file(dir.file("port"), 10s));
    const uint16_t port = read_port_file(dir.file("port")).value_or(0);
    ASSERT_NE(port, 0);
    ASSERT_EQ(::killpg(c.pid(), SIGKILL), 0);
    ASSERT_TRUE(c.wait_exit(10s));
    EXPECT_FALSE(live_tagged(c.tag()).empty()) << "killpg reached everything: control is broken";
    EXPECT_FALSE(port_bindable(port));
    // Clean up what the strategy left, by identity; then nothing may remain.
    EXPECT_TRUE(c.tree().kill_all());
    EXPECT_TRUE(live_tagged(c.tag()).empty());
}

TEST(NegativeControl, KillpgMissesTheSetsidHelper) {
    expect_killpg_leaves_survivors("setsid");
}
TEST(NegativeControl, KillpgMissesTheDoubleForkedDaemon) {
    expect_killpg_leaves_survivors("doublefork");
}

// The engine itself with its layers taken away (no subreaper, no cgroup, no marker sweep):
// the daemon was reparented to PID 1 before the snapshot, so the tree walk cannot see it.
// The report must then name it as a survivor — or, since it never saw it, the outside
// oracle must: either way the test observes the escape.
TEST(NegativeControl, EngineWithoutSubreaperOrCgroupMissesTheDaemon) {
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    Scenario sc;
    sc.shape = "doublefork";
    sc.extra_args = {"--on-eof", "ignore"};
    sc.contain.use_subreaper = false;
    sc.contain.use_cgroup = false;
    sc.contain.faults = Faults{};
    sc.teardown = quick_teardown();
    sc.edit_scope = [](TeardownScope& s) { s.session_marker.clear(); };
    nlohmann::json j = run_scenario(sc, tag, dir);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    EXPECT_FALSE(live_tagged(tag).empty()) << j["text"].get<std::string>();
    EXPECT_FALSE(port_bindable(j["port"].get<uint16_t>()));
    EXPECT_TRUE(guard.kill_all());
    EXPECT_TRUE(live_tagged(tag).empty());
}

// Same, but the marker sweep is on: MCPWARDEN_SESSION finds the daemon again (the `reap`
// fallback), so the very same tree leaves nothing.
TEST(NegativeControl, SessionMarkerFindsTheDaemonWithoutSubreaper) {
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    Scenario sc;
    sc.shape = "doublefork";
    sc.extra_args = {"--on-eof", "ignore"};
    sc.contain.use_subreaper = false;
    sc.contain.use_cgroup = false;
    sc.contain.faults = Faults{};
    sc.teardown = quick_teardown();
    nlohmann::json j = run_scenario(sc, tag, dir);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    EXPECT_TRUE(j["report"]["ok"].get<bool>()) << j["text"].get<std::string>();
    EXPECT_TRUE(live_tagged(tag).empty()) << j["text"].get<std::string>();
    EXPECT_TRUE(port_bindable(j["port"].get<uint16_t>()));
    EXPECT_GE(count_how(j["report"], "exited after SIGTERM"), 1);
}

}  // namespace
}  // namespace warden::testing
