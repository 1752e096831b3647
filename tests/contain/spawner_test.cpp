// spawn(): what the server is born with — marker, own group, cgroup, pidfd, PDEATHSIG —
// and what a missing command looks like to the caller.
#include "contain/spawner.hpp"

#include <sys/stat.h>

#include <csignal>
#include <fstream>

#include <gtest/gtest.h>

#include "common/tree_guard.hpp"
#include "contain/keeper_harness.hpp"

namespace warden::testing {
namespace {

ContainOptions inert() {
    // In the test process itself: no subreaper bit, no cgroup (nothing is started here).
    ContainOptions o;
    o.use_subreaper = false;
    o.use_cgroup = false;
    o.faults = Faults{};
    return o;
}

TEST(Spawner, MissingCommandIsAnErrorWithExitCode127) {
    auto c = Containment::setup("spawn-missing", inert());
    ASSERT_TRUE(c) << c.error().message;
    SpawnOptions so;
    so.argv = {"mcpwarden-no-such-command-4711"};
    auto r = spawn(**c, so);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "cannot run 'mcpwarden-no-such-command-4711': command not found");
    EXPECT_EQ(r.error().code, ENOENT);
    EXPECT_EQ(spawn_error_exit_code(r.error()), 127);
}

TEST(Spawner, NonExecutableFileIsAnErrorWithExitCode126) {
    TempDir dir;
    std::ofstream(dir.file("script")) << "#!/bin/sh\n";
    ::chmod(dir.file("script").c_str(), 0644);
    auto c = Containment::setup("spawn-noexec", inert());
    ASSERT_TRUE(c);
    SpawnOptions so;
    so.argv = {dir.file("script")};
    auto r = spawn(**c, so);
    ASSERT_FALSE(r);
    EXPECT_EQ(spawn_error_exit_code(r.error()), 126) << r.error().message;
}

TEST(Spawner, InvalidSessionIdIsRefused) {
    auto c = Containment::setup("../escape", inert());
    ASSERT_FALSE(c);
    EXPECT_NE(c.error().message.find("invalid session id"), std::string::npos);
}

TEST(Spawner, ServerIsBornMarkedInItsOwnGroupAndInsideTheSessionCgroup) {
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    std::string err;
    auto j = run_in_keeper(
        [&]() -> nlohmann::json {
            ContainOptions o;
            o.faults = Faults{};
            auto c = Containment::setup("spawn-" + tag, o);
            Scenario sc;
            sc.extra_args = {"--on-eof", "ignore"};
            std::optional<Child> child;
            std::string e;
            if (!start_fixture(**c, sc, tag, dir, child, e)) return {{"error", e}};
            nlohmann::json out;
            pid_t pid = child->pid();
            out["marker"] = env_value(pid, "MCPWARDEN_SESSION").value_or("");
            out["pgid_is_pid"] = read_stat(pid)->pgid == pid;
            out["cgroup"] = read_file("/proc/" + std::to_string(pid) + "/cgroup").value_or("");
            out["payload"] = (*c)->cgroup() ? (*c)->cgroup()->path() : "";
            out["pidfd"] = child->pidfd().valid();
            out["clone3"] = child->via_clone3();
            out["status_before"] = child->try_reap().has_value();
            TeardownReport r = Teardown((*c)->scope(&*child), quick_teardown()).run();
            out["ok"] = r.ok();
            out["status_after"] = child->exit_status().has_value();
            return out;
        },
        err);
    ASSERT_TRUE(j) << err;
    ASSERT_FALSE(j->contains("error")) << j->dump();
    EXPECT_EQ((*j)["marker"], "spawn-" + tag);
    EXPECT_TRUE((*j)["pgid_is_pid"].get<bool>());
    EXPECT_TRUE((*j)["pidfd"].get<bool>());
    EXPECT_TRUE((*j)["clone3"].get<bool>());
    const std::string payload = (*j)["payload"];
    ASSERT_FALSE(payload.empty());
    // /proc/PID/cgroup names the path relative to the cgroup2 mount: its tail must match.
    const std::string rel = payload.substr(payload.find("/mcpwarden-"));
    EXPECT_NE((*j)["cgroup"].get<std::string>().find(rel), std::string::npos) << j->dump();
    EXPECT_FALSE((*j)["status_before"].get<bool>());
    EXPECT_TRUE((*j)["ok"].get<bool>());
    EXPECT_TRUE((*j)["status_after"].get<bool>()) << "the teardown hands the server's status back";
}

// SIGKILL the keeper itself (the supervisor, not its client): the server dies through
// PDEATHSIG; with the pidns layer the whole namespace dies with the keeper's init.
nlohmann::json kill_keeper_mid_session(bool pidns, const std::string& tag, const TempDir& dir,
                                       pid_t& server) {
    auto p = make_pipe();
    pid_t keeper = ::fork();
    if (keeper == 0) {
        p->read.reset();
        ContainOptions o;
        o.use_cgroup = false;
        o.use_pidns = pidns;
        o.faults = Faults{};
        auto c = Containment::setup("kill-" + tag, o);
        Scenario sc;
        sc.extra_args = {"--on-eof", "ignore"};
        std::optional<Child> child;
        std::string e;
        start_fixture(**c, sc, tag, dir, child, e);
        nlohmann::json out{{"server", child ? child->pid() : 0},
                           {"pidns", (*c)->layers().pidns.on}};
        (void)write_all(p->write.get(), out.dump() + "\n", "pipe");
        for (;;)
            ::pause();
    }
    p->write.reset();
    std::string buf;
    char tmp[4096];
    ssize_t n;
    while ((n = ::read(p->read.get(), tmp, sizeof tmp)) > 0) {
        buf.append(tmp, static_cast<size_t>(n));
        if (buf.find('\n') != std::string::npos) break;
    }
    ::kill(keeper, SIGKILL);
    ::waitpid(keeper, nullptr, 0);
    auto j = nlohmann::json::parse(buf, nullptr, false);
    if (!j.is_discarded()) server = j["server"].get<pid_t>();
    return j;
}

TEST(Spawner, ServerDiesWithItsKeeperThroughPdeathsig) {
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    pid_t server = 0;
    auto j = kill_keeper_mid_session(false, tag, dir, server);
    ASSERT_GT(server, 0) << j.dump();
    EXPECT_TRUE(wait_until([&] { return !is_live(server); }, 5s));
    // PDEATHSIG covers the direct child only: its helper is left for the relay's teardown
    // or `reap` (here: the guard).
}

TEST(Spawner, PidnsKeeperKilledTakesTheWholeNamespace) {
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    pid_t server = 0;
    auto j = kill_keeper_mid_session(true, tag, dir, server);
    ASSERT_GT(server, 0) << j.dump();
    if (!j["pidns"].get<bool>()) GTEST_SKIP() << "PID namespaces not allowed here";
    EXPECT_TRUE(wait_until([&] { return live_tagged(tag).empty(); }, 5s));
}

}  // namespace
}  // namespace warden::testing
