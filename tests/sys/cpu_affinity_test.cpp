#include "sys/cpu_affinity.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <gtest/gtest.h>

namespace warden {
namespace {

// A child that only waits to be killed; SIGKILLed and reaped by the destructor.
struct PausedChild {
    pid_t pid = ::fork();
    PausedChild() {
        if (pid == 0) {
            ::pause();
            ::_exit(0);
        }
    }
    ~PausedChild() {
        if (pid > 0) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, nullptr, 0);
        }
    }
};

// The child is allowed every CPU of the set but the caller's, and gets the whole set back
// from set_cpu_affinity. Given a set of one CPU there is nowhere to move it: nothing changes.
TEST(CpuAffinity, ChildIsMovedOffOurCpuAndGetsItsSetBack) {
    auto ours = cpu_affinity(0);
    ASSERT_TRUE(ours) << ours.error().message;
    PausedChild child;
    ASSERT_GT(child.pid, 0);
    if (ours->count() > 1) {
        auto moved = move_child_off_our_cpu(child.pid, *ours);
        ASSERT_TRUE(moved.has_value());
        auto theirs = cpu_affinity(child.pid);
        ASSERT_TRUE(theirs) << theirs.error().message;
        EXPECT_EQ(theirs->count(), ours->count() - 1);
        EXPECT_FALSE(CPU_ISSET(*moved, &theirs->cpus));
        ASSERT_TRUE(set_cpu_affinity(child.pid, *ours));
        theirs = cpu_affinity(child.pid);
        ASSERT_TRUE(theirs);
        EXPECT_TRUE(CPU_EQUAL(&theirs->cpus, &ours->cpus));
    }
    CpuSet one{};
    const int cpu = ::sched_getcpu();
    ASSERT_GE(cpu, 0);
    CPU_SET(cpu, &one.cpus);
    EXPECT_FALSE(move_child_off_our_cpu(child.pid, one).has_value());
    auto theirs = cpu_affinity(child.pid);
    ASSERT_TRUE(theirs);
    EXPECT_TRUE(CPU_EQUAL(&theirs->cpus, &ours->cpus));
}

// without() takes one CPU out of a set that holds it and another; a set it would leave
// empty, or one without that CPU, gives nullopt. just() is that CPU alone.
TEST(CpuAffinity, ASetWithoutOneCpuKeepsTheOthers) {
    CpuSet two = CpuSet::just(0);
    CPU_SET(3, &two.cpus);
    auto rest = two.without(0);
    ASSERT_TRUE(rest);
    EXPECT_EQ(rest->count(), 1);
    EXPECT_TRUE(rest->has(3));
    EXPECT_FALSE(rest->has(0));
    EXPECT_FALSE(two.without(1).has_value()) << "a CPU the set does not hold";
    EXPECT_FALSE(CpuSet::just(2).without(2).has_value()) << "nothing would be left";
    EXPECT_FALSE(two.has(-1));
    EXPECT_FALSE(two.has(CPU_SETSIZE));
}

TEST(CpuAffinity, ErrorsNameTheCallAndThePid) {
    auto r = cpu_affinity(4194304 + 7);  // above pid_max: never a process
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().message, "sched_getaffinity(pid 4194311): No such process");
}

}  // namespace
}  // namespace warden
