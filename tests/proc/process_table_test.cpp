#include "proc/process_table.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <gtest/gtest.h>

#include "proc/helpers.hpp"
#include "sys/pipe.hpp"

namespace warden {
namespace {

using proc_testing::Child;
using proc_testing::pause_forever;
using proc_testing::Stray;
using proc_testing::wait_until;

ProcessId self_id() {
    return read_identity(::getpid()).value();
}

std::vector<pid_t> pids(const std::vector<const Process*>& ps) {
    std::vector<pid_t> out;
    for (auto* p : ps)
        out.push_back(p->id.pid);
    return out;
}

bool contains(const std::vector<const Process*>& ps, pid_t pid) {
    auto v = pids(ps);
    return std::find(v.begin(), v.end(), pid) != v.end();
}

// Position of pid in the list, or -1.
long index_of(const std::vector<const Process*>& ps, pid_t pid) {
    auto v = pids(ps);
    auto it = std::find(v.begin(), v.end(), pid);
    return it == v.end() ? -1 : it - v.begin();
}

Process fake(pid_t pid, pid_t ppid, uint64_t starttime) {
    Process p;
    p.id = {pid, starttime};
    p.ppid = ppid;
    p.state = 'S';
    return p;
}

// Reads a pid_t the child writes to a pipe (bounded by the child's own progress: the read
// returns 0 if it dies first).
pid_t read_pid(const Pipe& p) {
    pid_t pid = 0;
    ssize_t n = ::read(p.read.get(), &pid, sizeof pid);
    return n == sizeof pid ? pid : 0;
}

TEST(ProcessTable, ScanFindsSelfAndChildren) {
    Child child([] { pause_forever(); });
    auto t = ProcessTable::scan();
    const Process* me = t.find(::getpid());
    ASSERT_NE(me, nullptr);
    EXPECT_EQ(me->id, self_id());
    EXPECT_TRUE(contains(t.children(::getpid()), child.pid()));
    EXPECT_NE(t.find(self_id()), nullptr);
    EXPECT_EQ(t.find(ProcessId{::getpid(), self_id().starttime + 1}), nullptr);
    EXPECT_TRUE(std::is_sorted(t.all().begin(), t.all().end(),
                               [](auto& a, auto& b) { return a.id.pid < b.id.pid; }));
}

TEST(ProcessTable, DescendantsIgnoreGroupAndSession) {
    Child in_group([] { pause_forever(); });
    Child other_group([] {
        ::setpgid(0, 0);
        pause_forever();
    });
    Child own_session([] {
        ::setsid();
        pause_forever();
    });
    ASSERT_TRUE(wait_until([&] {
        auto a = read_process(other_group.pid(), kStat);
        auto b = read_process(own_session.pid(), kStat);
        return a && b && a->pgid == other_group.pid() && b->sid == own_session.pid();
    }));
    auto t = ProcessTable::scan();
    auto d = t.descendants(self_id());
    EXPECT_TRUE(contains(d, in_group.pid()));
    EXPECT_TRUE(contains(d, other_group.pid()));
    EXPECT_TRUE(contains(d, own_session.pid()));
    EXPECT_NE(t.find(other_group.pid())->pgid, ::getpgrp());
    EXPECT_NE(t.find(own_session.pid())->sid, ::getsid(0));
    EXPECT_FALSE(contains(d, ::getpid()));  // the root itself is not a descendant
}

TEST(ProcessTable, DoubleForkedGrandchildFoundOnlyWhileItsParentLives) {
    Pipe report = make_pipe().value();
    Pipe release = make_pipe().value();
    Child middle([&] {
        release.write.reset();  // else the read below never sees EOF
        report.read.reset();
        pid_t gc = ::fork();
        if (gc == 0) {
            release.read.reset();
            report.write.reset();
            ::setsid();
            pause_forever();
        }
        ::write(report.write.get(), &gc, sizeof gc);
        char c;
        ::read(release.read.get(), &c, 1);  // exits when the test closes `release`
        ::_exit(0);
    });
    report.write.reset();
    release.read.reset();
    pid_t gc_pid = read_pid(report);
    ASSERT_GT(gc_pid, 0);
    Stray grandchild;
    ASSERT_TRUE(wait_until([&] {
        auto p = read_process(gc_pid, kStat);
        if (p && p->ppid == middle.pid()) grandchild.set(p->id);
        return p && p->sid == gc_pid;
    }));
    ASSERT_GT(grandchild.id().pid, 0);

    auto t = ProcessTable::scan();
    auto d = t.descendants(self_id());
    ASSERT_TRUE(contains(d, middle.pid()));
    ASSERT_TRUE(contains(d, gc_pid));
    // Leaves first: the grandchild comes before its parent.
    EXPECT_LT(index_of(d, gc_pid), index_of(d, middle.pid()));
    EXPECT_TRUE(contains(t.descendants(t.find(middle.pid())->id), gc_pid));

    // The intermediate exits: the grandchild reparents to PID 1 (or the nearest subreaper,
    // which the test process is not). A /proc walk can no longer reach it. This is the gap
    // the keeper's PR_SET_CHILD_SUBREAPER closes; asserting it here is the negative control.
    release.write.reset();
    middle.reap();
    ASSERT_TRUE(wait_until([&] {
        auto p = read_process(gc_pid, kStat);
        return p && p->ppid != middle.pid();
    }));
    ASSERT_TRUE(is_alive(grandchild.id()));
    auto t2 = ProcessTable::scan();
    EXPECT_FALSE(contains(t2.descendants(self_id()), gc_pid));
    EXPECT_NE(t2.find(grandchild.id()), nullptr);  // alive, just out of reach
}

TEST(ProcessTable, FakedRootIdentityGivesNothing) {
    Child child([] { pause_forever(); });
    auto t = ProcessTable::scan();
    ProcessId me = self_id();
    ASSERT_FALSE(t.descendants(me).empty());  // control: the real identity finds the child
    EXPECT_TRUE(t.descendants(ProcessId{me.pid, me.starttime + 1}).empty());
    EXPECT_TRUE(t.descendants(ProcessId{me.pid, me.starttime - 1}).empty());
    const Process* c = t.find(child.pid());
    ASSERT_NE(c, nullptr);
    EXPECT_FALSE(is_alive(ProcessId{c->id.pid, c->id.starttime + 1}));
    EXPECT_TRUE(is_alive(c->id));
}

TEST(ProcessTable, ChildOlderThanParentIsARecycledPid) {
    // pid 100 started at tick 500; "child" 101 claims ppid 100 but started at 400, before
    // its parent: 100 is a recycled pid and 101's real parent died long ago.
    auto t = ProcessTable::from_processes(
        {fake(100, 1, 500), fake(101, 100, 400), fake(102, 100, 600), fake(103, 102, 700)});
    EXPECT_EQ(pids(t.children(100)), std::vector<pid_t>{102});
    EXPECT_EQ(pids(t.descendants({100, 500})), (std::vector<pid_t>{103, 102}));
    // Control: with a plausible starttime the same process is a child.
    auto t2 = ProcessTable::from_processes(
        {fake(100, 1, 500), fake(101, 100, 500), fake(102, 100, 600), fake(103, 102, 700)});
    EXPECT_EQ(pids(t2.children(100)), (std::vector<pid_t>{101, 102}));
    EXPECT_EQ(pids(t2.descendants({100, 500})).size(), 3u);
}

TEST(ProcessTable, DescendantsAreLeavesFirst) {
    auto t = ProcessTable::from_processes({fake(10, 1, 1), fake(11, 10, 2), fake(12, 11, 3),
                                           fake(13, 12, 4), fake(14, 10, 5), fake(15, 1, 6)});
    auto d = pids(t.descendants({10, 1}));
    ASSERT_EQ(d.size(), 4u);
    auto pos = [&](pid_t p) { return std::find(d.begin(), d.end(), p) - d.begin(); };
    EXPECT_LT(pos(13), pos(12));
    EXPECT_LT(pos(12), pos(11));
    EXPECT_EQ(std::count(d.begin(), d.end(), 15), 0);
    EXPECT_TRUE(t.descendants({99, 1}).empty());  // unknown root
}

}  // namespace
}  // namespace warden
