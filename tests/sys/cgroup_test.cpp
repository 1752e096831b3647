#include "sys/cgroup.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "sys/clone3.hpp"
#include "sys/prctl.hpp"

namespace warden {
namespace {

TEST(Cgroup, FindsTheCgroup2MountFromMountinfo) {
    auto m = cgroup2_mount();
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_EQ(::access((*m + "/cgroup.procs").c_str(), F_OK), 0) << *m;
    auto own = own_cgroup();
    ASSERT_TRUE(own) << own.error().message;
    EXPECT_EQ(own->front(), '/');
}

TEST(Cgroup, ChildBornInsideIsKilledAndTheGroupEmpties) {
    auto m = cgroup2_mount();
    auto own = own_cgroup();
    ASSERT_TRUE(m && own);
    std::string base = *m + (*own == "/" ? "" : *own);
    auto cg = Cgroup::create(base + "/warden-systest-" + std::to_string(::getpid()));
    if (!cg) GTEST_SKIP() << cg.error().message;
    ASSERT_TRUE(cg->has_kill());
    CloneRequest req;
    req.cgroup_fd = cg->dir_fd();
    auto r = clone_child(req);
    ASSERT_TRUE(r) << r.error().message;
    if (r->pid == 0) {
        for (;;)
            ::pause();
    }
    EXPECT_TRUE(r->into_cgroup);
    EXPECT_TRUE(r->pidfd.valid());
    auto procs = cg->procs();
    ASSERT_TRUE(procs);
    EXPECT_EQ(*procs, std::vector<pid_t>{r->pid});
    EXPECT_TRUE(*cg->populated());
    ASSERT_TRUE(cg->kill());
    auto empty = cg->wait_empty(5000);
    ASSERT_TRUE(empty);
    EXPECT_TRUE(*empty);
    ::waitpid(r->pid, nullptr, 0);
    EXPECT_TRUE(cg->remove()) << "an emptied group can be removed";
}

TEST(Prctl, SubreaperBitIsReadBack) {
    pid_t c = ::fork();
    if (c == 0) {
        bool ok = set_child_subreaper(true).ok() && *is_child_subreaper();
        ::_exit(ok ? 0 : 1);
    }
    int st = 0;
    ::waitpid(c, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

TEST(Clone3, AutokillProbeAnswersWithoutCrashing) {
    // On kernels without CLONE_PIDFD_AUTOKILL the probe says no; either answer is valid,
    // but it must not depend on anything but the kernel.
    EXPECT_EQ(clone_autokill_supported(), clone_autokill_supported());
    EXPECT_TRUE(clone3_supported());
}

}  // namespace
}  // namespace warden
