#include "sys/background_thread.hpp"

#include <pthread.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <future>
#include <string>

#include <gtest/gtest.h>

namespace warden {
namespace {

// The thread's own nice value, read on it once `gate` lets it go on.
struct Observed {
    std::promise<void> gate;
    std::atomic<int> nice{-100};
    std::atomic<bool> named{false};
};

void observe(Observed& o) {
    o.gate.get_future().wait();
    errno = 0;
    o.nice = ::getpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()));
    char name[16] = {};
    ::pthread_getname_np(::pthread_self(), name, sizeof name);
    o.named = std::string(name) == "mcpwarden-test";
}

// yield() lowers the thread, whether it comes while the work runs or before the thread has
// even stored its id; a thread never told to yield keeps the process's nice value.
TEST(BackgroundThread, AYieldedThreadRunsAtTheLowestNiceValue) {
    const int ours = ::getpriority(PRIO_PROCESS, 0);
    {
        Observed o;
        BackgroundThread t("mcpwarden-test", [&] { observe(o); });
        t.yield();
        o.gate.set_value();
        t.join();
        EXPECT_EQ(o.nice.load(), 19);
        EXPECT_TRUE(o.named.load());
    }
    {
        Observed o;
        BackgroundThread t("mcpwarden-test", [&] { observe(o); });
        o.gate.set_value();
        t.join();
        EXPECT_EQ(o.nice.load(), ours) << "a thread not told to yield was lowered";
        t.yield();  // after its work: nothing left to lower, and no one else is touched
        EXPECT_EQ(::getpriority(PRIO_PROCESS, 0), ours);
    }
}

// Given CPUs, the thread runs only there from before its work begins; without, it has the
// creator's set. The creator's own set is untouched either way.
TEST(BackgroundThread, AThreadGivenCpusRunsOnlyThere) {
    auto ours = cpu_affinity(0);
    ASSERT_TRUE(ours) << ours.error().message;
    const int cpu = ::sched_getcpu();
    ASSERT_GE(cpu, 0);
    auto seen_on = [](std::optional<CpuSet> given) {
        std::optional<CpuSet> seen;
        BackgroundThread t(
            "mcpwarden-test",
            [&] {
                if (auto s = cpu_affinity(0)) seen = *s;
            },
            given);
        t.join();
        return seen;
    };
    auto pinned = seen_on(CpuSet::just(cpu));
    ASSERT_TRUE(pinned);
    EXPECT_EQ(pinned->count(), 1);
    EXPECT_TRUE(pinned->has(cpu));
    auto free = seen_on(std::nullopt);
    ASSERT_TRUE(free);
    EXPECT_TRUE(CPU_EQUAL(&free->cpus, &ours->cpus));
    auto after = cpu_affinity(0);
    ASSERT_TRUE(after);
    EXPECT_TRUE(CPU_EQUAL(&after->cpus, &ours->cpus));
}

}  // namespace
}  // namespace warden
