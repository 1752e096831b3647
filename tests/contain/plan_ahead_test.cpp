// A plan made ahead (Teardown::prepare, contain/teardown_ahead.cpp "A plan made ahead"): the keeper
// binds the tree's members while the session is idle, and the teardown starts from them. What
// a user must not notice is any difference in what the teardown does: a process forked since
// is asked to leave with the others, a member that ended since is not on record as ended by
// the teardown, and a port opened since is proven free. Each has its negative control:
// MCPWARDEN_FAULT=plan_ahead_only, the plan made ahead taken as it stands.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include <gtest/gtest.h>

#include "common/tree_guard.hpp"
#include "contain/keeper_harness.hpp"

namespace warden::testing {
namespace {

// Subreaper and the /proc walk alone: the processes the tests fork in the keeper are its
// children, members as the subreaper's (a session cgroup would hold only the server's tree).
Scenario planned_ahead(bool guard_off) {
    Scenario sc;
    sc.shape = "normal";
    sc.extra_args = {"--on-eof", "ignore"};
    sc.teardown = quick_teardown();
    sc.contain.faults = Faults{};
    sc.contain.faults.plan_ahead_only = guard_off;
    sc.contain.use_cgroup = false;
    sc.edit_scope = [](TeardownScope& s) { s.session_marker.clear(); };
    sc.plan_ahead = true;
    return sc;
}

// Each test's directory, tag and guard: whatever a failing test leaves carries the tag, and
// the guard ends it.
class PlanAhead : public ::testing::Test {
  protected:
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard{0, tag};
};

const nlohmann::json* target_with_pid(const nlohmann::json& report, pid_t pid) {
    for (const auto& t : report["targets"])
        if (t["pid"].get<pid_t>() == pid) return &t;
    return nullptr;
}

bool port_on_record(const nlohmann::json& report, uint16_t port) {
    for (const auto& p : report["ports"])
        if (p["port"].get<uint16_t>() == port && p["bindable"].get<bool>()) return true;
    return false;
}

// Forks a listener after the plan made ahead; returns it and the keeper's answer.
std::pair<std::optional<Listener>, nlohmann::json> fork_after_the_plan(bool guard_off,
                                                                       const std::string& tag,
                                                                       const TempDir& dir) {
    Scenario sc = planned_ahead(guard_off);
    const std::string file = dir.file("newcomer");
    sc.after_plan_ahead = [file, tag] {
        if (fork_tagged_listener(tag, file) > 0)
            (void)wait_for_file(file, std::chrono::seconds(10));
    };
    nlohmann::json j = run_scenario(sc, tag, dir);
    return {read_listener(file), j};
}

TEST_F(PlanAhead, WhatForkedSinceIsAskedToLeaveWithTheOthersAndItsPortProvenFree) {
    auto [newcomer, j] = fork_after_the_plan(false, tag, dir);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_TRUE(newcomer) << "the newcomer did not start";
    const auto& r = j["report"];
    const std::string text = j["text"].get<std::string>();
    EXPECT_TRUE(r["ok"].get<bool>()) << text;
    EXPECT_EQ(live_tagged(tag), std::vector<pid_t>{}) << text;
    const nlohmann::json* t = target_with_pid(r, newcomer->pid);
    ASSERT_NE(t, nullptr) << "the newcomer is not on the snapshot\n" << text;
    EXPECT_EQ((*t)["round"].get<int>(), 0) << "not in the first snapshot\n" << text;
    EXPECT_EQ((*t)["how"], "exited after SIGTERM") << text;
    EXPECT_TRUE(port_bindable(newcomer->port));
    EXPECT_TRUE(port_on_record(r, newcomer->port)) << r["ports"].dump() << "\n" << text;
}

TEST_F(PlanAhead, NegativeControlThePlanAsItStoodLeavesTheNewcomerToALaterRound) {
    auto [newcomer, j] = fork_after_the_plan(true, tag, dir);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_TRUE(newcomer) << "the newcomer did not start";
    const nlohmann::json* t = target_with_pid(j["report"], newcomer->pid);
    ASSERT_NE(t, nullptr) << j["text"].get<std::string>();
    EXPECT_GE((*t)["round"].get<int>(), 1) << j["text"].get<std::string>();
}

// A member that was there when the plan was made ahead and ended before the teardown (here
// killed and reaped by the keeper) is not on the teardown's snapshot: the snapshot says what
// the teardown found, and nothing of the teardown ended it.
nlohmann::json end_a_member_after_the_plan(bool guard_off, const std::string& tag,
                                           const TempDir& dir, pid_t& member) {
    Scenario sc = planned_ahead(guard_off);
    const std::string file = dir.file("member");
    auto pid = std::make_shared<pid_t>(0);
    sc.edit_scope = [pid, file, tag](TeardownScope& s) {
        s.session_marker.clear();
        *pid = fork_tagged_listener(tag, file);
        if (*pid > 0) (void)wait_for_file(file, std::chrono::seconds(10));
    };
    sc.after_plan_ahead = [pid] {
        // Our own child, not yet reaped: no other process can hold its PID.
        if (*pid <= 0) return;
        ::kill(*pid, SIGKILL);
        ::waitpid(*pid, nullptr, 0);
    };
    nlohmann::json j = run_scenario(sc, tag, dir);
    auto l = read_listener(file);
    member = l ? l->pid : 0;
    return j;
}

TEST_F(PlanAhead, AMemberThatEndedSinceIsNotOnTheSnapshot) {
    pid_t member = 0;
    nlohmann::json j = end_a_member_after_the_plan(false, tag, dir, member);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_GT(member, 0) << "the member did not start";
    const std::string text = j["text"].get<std::string>();
    EXPECT_TRUE(j["report"]["ok"].get<bool>()) << text;
    EXPECT_EQ(target_with_pid(j["report"], member), nullptr) << text;
    EXPECT_EQ(live_tagged(tag), std::vector<pid_t>{}) << text;
}

TEST_F(PlanAhead, NegativeControlThePlanAsItStoodPutsTheEndedMemberOnTheSnapshot) {
    pid_t member = 0;
    nlohmann::json j = end_a_member_after_the_plan(true, tag, dir, member);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_GT(member, 0) << "the member did not start";
    EXPECT_NE(target_with_pid(j["report"], member), nullptr) << j["text"].get<std::string>();
}

// A member known to the plan made ahead that opens a port afterwards: the port is listed
// once its SIGTERM is out, and proven free like any other.
nlohmann::json port_opened_after_the_plan(bool guard_off, const std::string& tag,
                                          const TempDir& dir, std::optional<Listener>& member) {
    Scenario sc = planned_ahead(guard_off);
    const std::string file = dir.file("member");
    struct Shared {
        Fd go_read, go_write;
    };
    auto shared = std::make_shared<Shared>();
    sc.edit_scope = [shared, file, tag](TeardownScope& s) {
        s.session_marker.clear();
        auto p = make_pipe();
        if (!p) return;
        shared->go_read = std::move(p->read);
        shared->go_write = std::move(p->write);
        (void)fork_tagged_listener(tag, file, shared->go_read.get());
        shared->go_read.reset();
    };
    sc.after_plan_ahead = [shared, file] {
        if (!shared->go_write.valid()) return;
        (void)::write(shared->go_write.get(), "g", 1);
        (void)wait_for_file(file, std::chrono::seconds(10));
    };
    nlohmann::json j = run_scenario(sc, tag, dir);
    member = read_listener(file);
    return j;
}

TEST_F(PlanAhead, APortOpenedSinceByAKnownMemberIsProvenFree) {
    std::optional<Listener> member;
    nlohmann::json j = port_opened_after_the_plan(false, tag, dir, member);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_TRUE(member) << "the member did not listen";
    const auto& r = j["report"];
    const std::string text = j["text"].get<std::string>();
    const nlohmann::json* t = target_with_pid(r, member->pid);
    ASSERT_NE(t, nullptr) << text;
    EXPECT_EQ((*t)["round"].get<int>(), 0) << text;
    EXPECT_TRUE(port_bindable(member->port));
    EXPECT_TRUE(port_on_record(r, member->port)) << r["ports"].dump() << "\n" << text;
}

TEST_F(PlanAhead, NegativeControlThePlanAsItStoodMissesThePortOpenedSince) {
    std::optional<Listener> member;
    nlohmann::json j = port_opened_after_the_plan(true, tag, dir, member);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_TRUE(member) << "the member did not listen";
    EXPECT_FALSE(port_on_record(j["report"], member->port)) << j["report"]["ports"].dump();
}

// A member known to the plan made ahead that closes its listener afterwards: the port is no
// longer the tree's, and whoever binds it next (here the keeper itself, a stranger to the
// tree) holds it at the verify step. The teardown lists the member's sockets again and
// forgets the settled listener that is gone, so the report does not say the tree left that
// port held.
nlohmann::json listener_closed_after_the_plan(bool guard_off, const std::string& tag,
                                              const TempDir& dir, uint16_t& port) {
    Scenario sc = planned_ahead(guard_off);
    const std::string opened = dir.file("opened"), closed = dir.file("closed");
    const std::string tag_env = std::string(kTagVar) + "=" + tag;
    struct Shared {
        Fd go, stranger;
    };
    auto shared = std::make_shared<Shared>();
    sc.edit_scope = [shared, opened, closed, tag_env](TeardownScope& s) {
        s.session_marker.clear();
        auto p = make_pipe();
        if (!p) return;
        pid_t c = ::fork();
        if (c == 0) {
            p->write.reset();
            LoopbackSocket l = listen_on_loopback();
            if (l.fd < 0 || !write_file(opened, std::to_string(l.port))) ::_exit(1);
            char b = 0;
            if (::read(p->read.get(), &b, 1) != 1) ::_exit(1);
            ::close(l.fd);
            if (!write_file(closed, "closed")) ::_exit(1);
            char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("600"), nullptr};
            char* const envp[] = {const_cast<char*>(tag_env.c_str()), nullptr};
            ::execve("/bin/sleep", argv, envp);
            ::_exit(127);
        }
        p->read.reset();
        shared->go = std::move(p->write);
        (void)wait_for_file(opened, std::chrono::seconds(10));
    };
    sc.after_plan_ahead = [shared, opened, closed] {
        if (!shared->go.valid() || ::write(shared->go.get(), "g", 1) != 1) return;
        if (!wait_for_file(closed, std::chrono::seconds(10))) return;
        auto given_up = read_port_file(opened);
        if (!given_up) return;
        // The stranger: a listener of the keeper's own on the port the member gave up.
        if (LoopbackSocket l = listen_on_loopback(*given_up); l.fd >= 0)
            shared->stranger = Fd(l.fd);
    };
    nlohmann::json j = run_scenario(sc, tag, dir);
    port = read_port_file(opened).value_or(0);
    return j;
}

TEST_F(PlanAhead, APortItsListenerClosedSinceIsNotTheTreesToProve) {
    uint16_t port = 0;
    nlohmann::json j = listener_closed_after_the_plan(false, tag, dir, port);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_GT(port, 0) << "the member did not listen";
    const auto& r = j["report"];
    bool listed = false;
    for (const auto& p : r["ports"])
        listed |= p["port"].get<uint16_t>() == port;
    EXPECT_FALSE(listed) << r["ports"].dump() << "\n" << j["text"].get<std::string>();
    EXPECT_TRUE(r["ok"].get<bool>()) << j["text"].get<std::string>();
    EXPECT_EQ(live_tagged(tag), std::vector<pid_t>{}) << j["text"].get<std::string>();
}

TEST_F(PlanAhead, NegativeControlThePlanAsItStoodProvesTheStrangersPortHeld) {
    uint16_t port = 0;
    nlohmann::json j = listener_closed_after_the_plan(true, tag, dir, port);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_GT(port, 0) << "the member did not listen";
    bool held = false;
    for (const auto& p : j["report"]["ports"])
        held |= p["port"].get<uint16_t>() == port && !p["bindable"].get<bool>();
    EXPECT_TRUE(held) << j["report"]["ports"].dump();
}

// The plan made ahead holds a pidfd and an open directory per member for as long as the
// session is idle, in a keeper that needs descriptors of its own: past
// TeardownOptions::max_planned_ahead members it keeps none. Counted in the keeper, its open
// descriptors after prepare() against before, for a tree of 21 (the server, its helper and
// 19 children of the keeper); the negative control is a bound above the tree.
int descriptors_held_ahead(size_t bound, const std::string& tag, const TempDir& dir,
                           nlohmann::json& j) {
    Scenario sc = planned_ahead(false);
    sc.teardown.max_planned_ahead = bound;
    const std::string held = dir.file("held");
    auto before = std::make_shared<int>(0);
    sc.edit_scope = [before, tag, &dir](TeardownScope& s) {
        s.session_marker.clear();
        for (int i = 0; i < 19; ++i) {
            const std::string file = dir.file("member-" + std::to_string(i));
            if (fork_tagged_listener(tag, file) > 0)
                (void)wait_for_file(file, std::chrono::seconds(10));
        }
        *before = open_descriptors(::getpid());
    };
    sc.after_plan_ahead = [before, held] {
        (void)write_file(held, std::to_string(open_descriptors(::getpid()) - *before));
    };
    j = run_scenario(sc, tag, dir);
    auto text = read_file(held);
    return text ? std::atoi(text->c_str()) : -1;
}

TEST_F(PlanAhead, ATreeLargerThanItsBoundIsPlannedByTheTeardownAlone) {
    nlohmann::json j;
    EXPECT_EQ(descriptors_held_ahead(8, tag, dir, j), 0);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    const auto& r = j["report"];
    EXPECT_TRUE(r["ok"].get<bool>()) << j["text"].get<std::string>();
    EXPECT_GE(r["counts"]["targets"].get<int>(), 21) << j["text"].get<std::string>();
    EXPECT_EQ(live_tagged(tag), std::vector<pid_t>{}) << j["text"].get<std::string>();
}

TEST_F(PlanAhead, NegativeControlUnderItsBoundThePlanHoldsADescriptorPerMember) {
    nlohmann::json j;
    EXPECT_GE(descriptors_held_ahead(1000, tag, dir, j), 21);
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
}

}  // namespace
}  // namespace warden::testing
