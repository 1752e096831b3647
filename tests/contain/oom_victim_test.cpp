// The OOM killer's victim as the kernel's report of the kill names it (contain/oom_victim.hpp).
// The lines are the kernel's own, as /dev/kmsg gives them on a cgroup v1 host.
#include "contain/oom_victim.hpp"

#include <gtest/gtest.h>

namespace warden {
namespace {

constexpr const char* kKill =
    "6,1334,17404636554,-;oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,"
    "mems_allowed=0,oom_memcg=/process_api/e177/mcpwarden-417ea2fa38df318a,task_memcg=/"
    "process_api/e177/mcpwarden-417ea2fa38df318a,task=python3,pid=13039,uid=0\n";

TEST(OomVictim, TheKernelsReportNamesTheVictimInTheSessionsGroup) {
    auto v = parse_oom_kill_line(kKill, "mcpwarden-417ea2fa38df318a");
    ASSERT_TRUE(v);
    EXPECT_EQ(v->pid, 13039);
    EXPECT_EQ(v->comm, "python3");
    // A dmesg line (no kmsg prefix), the victim in a group beneath the session's.
    auto deeper = parse_oom_kill_line(
        "oom-kill:constraint=CONSTRAINT_MEMCG,oom_memcg=/mcpwarden-s1,task_memcg=/mcpwarden-s1/"
        "payload,task=node,pid=77,uid=1000",
        "mcpwarden-s1");
    ASSERT_TRUE(deeper);
    EXPECT_EQ(deeper->pid, 77);
    EXPECT_EQ(deeper->comm, "node");
}

// Negative controls: another session's kill, a session whose id only begins the same, and
// the kernel's other lines about the same kill are not this session's victim.
TEST(OomVictim, AnotherGroupsKillOrAnotherLineNamesNoVictim) {
    EXPECT_FALSE(parse_oom_kill_line(kKill, "mcpwarden-0000000000000000"));
    EXPECT_FALSE(parse_oom_kill_line(kKill, "mcpwarden-417ea2fa38df"));
    EXPECT_FALSE(parse_oom_kill_line(kKill, ""));
    EXPECT_FALSE(parse_oom_kill_line(
        "3,1335,17404636574,-;Memory cgroup out of memory: Killed process 13039 (python3) "
        "total-vm:75340kB",
        "mcpwarden-417ea2fa38df318a"));
    EXPECT_FALSE(
        parse_oom_kill_line("oom-kill:task_memcg=/mcpwarden-s1,task=x,pid=abc", "mcpwarden-s1"));
}

}  // namespace
}  // namespace warden
