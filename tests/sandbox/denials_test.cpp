// The count of what the sandbox's filter refuses (src/sandbox/denials.hpp): the notifying
// program decides exactly as the errno program does, the counter answers each refused call
// with the errno the errno program gives, and a counter gone leaves every refused call
// refused.
#include <fcntl.h>
#include <linux/seccomp.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "common/testing.hpp"
#include "sandbox/confined_child.hpp"
#include "sandbox/denials.hpp"
#include "sandbox/launch_of.hpp"
#include "sandbox/sandbox.hpp"
#include "sys/seccomp.hpp"

namespace warden::testing {
namespace {

// Every socket(2) the filter's network rules look at: each family the kernel numbers, each
// type, TCP, UDP and SCTP; then keyctl (refused whatever its arguments).
struct SocketCall {
    long family, type, protocol;
};
std::vector<SocketCall> grid() {
    std::vector<SocketCall> out;
    for (long family = 0; family < 46; ++family)
        for (long type : {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET, SOCK_PACKET})
            for (long protocol : {0, 6, 17, 132})
                out.push_back({family, type, protocol});
    return out;
}

// Forks; the child applies `plan` and makes every call of grid() and a keyctl; the errno
// of each (0: it succeeded), or {} when the plan could not be applied.
std::vector<int> errnos_of_calls(const sandbox::Plan& plan) {
    const auto calls = grid();
    return errnos_in_child(plan, calls.size() + 1, [&](auto report) {
        for (const SocketCall& c : calls) {
            int fd = ::socket(static_cast<int>(c.family), static_cast<int>(c.type) | SOCK_CLOEXEC,
                              static_cast<int>(c.protocol));
            int e = fd >= 0 ? 0 : errno;
            if (fd >= 0) ::close(fd);
            report(e);
        }
        report(::syscall(SYS_keyctl, 0, -3, 0) >= 0 ? 0 : errno);
    });
}

Result<sandbox::Plan> strict_plan(const TempDir& home, bool count) {
    RunOptions s;
    s.sandbox = Sandbox::Strict;
    auto l = launch_of(home, {kFixture});
    l.count_denials = count;
    return sandbox::prepare(s, l);
}

TEST(Denials, NotifyingProgramChangesOnlyTheAnswersToRefusals) {
    auto prog = sandbox::precompiled_seccomp({true, true});
    if (!prog) GTEST_SKIP() << "no precompiled program on this architecture";
    auto notifying = notifying_refusals(*prog, {ENOSYS});
    const sock_fprog a = prog->fprog(), b = notifying.fprog();
    ASSERT_EQ(a.len, b.len);
    int changed = 0;
    for (unsigned i = 0; i < a.len; ++i) {
        const sock_filter &x = a.filter[i], &y = b.filter[i];
        EXPECT_EQ(x.code, y.code) << i;
        EXPECT_EQ(x.jt, y.jt) << i;
        EXPECT_EQ(x.jf, y.jf) << i;
        if (x.k == y.k) continue;
        ++changed;
        // Only a refusal by errno, never ENOSYS (clone3), never ALLOW, became a notification.
        EXPECT_EQ(x.code, BPF_RET | BPF_K) << i;
        EXPECT_EQ(x.k & SECCOMP_RET_ACTION_FULL, SECCOMP_RET_ERRNO) << i;
        EXPECT_NE(x.k & SECCOMP_RET_DATA, static_cast<uint32_t>(ENOSYS)) << i;
        EXPECT_EQ(y.k, SECCOMP_RET_USER_NOTIF) << i;
    }
    EXPECT_GT(changed, 0);
}

// The counter answers what the errno program would have: the same errno for every call of
// the grid, allowed calls untouched, and each refusal counted by call.
TEST(Denials, CountedCallsGetTheErrnoTheProgramWouldGive) {
    if (!seccomp_user_notif_available()) GTEST_SKIP() << "no seccomp user notification";
    TempDir home;
    auto plain = strict_plan(home, false);
    ASSERT_TRUE(plain.ok()) << plain.error().message;
    EXPECT_FALSE(plain->denials_counted());
    auto counted = strict_plan(home, true);
    ASSERT_TRUE(counted.ok()) << counted.error().message;
    if (!counted->denials_counted()) GTEST_SKIP() << counted->denials_uncounted();
    EXPECT_NE(counted->render_text().find("denied calls counted per session"), std::string::npos);
    EXPECT_NE(counted->render_text().find("paths and TCP ports Landlock refuses are not counted"),
              std::string::npos);
    auto counter = sandbox::DenialCounter::start(counted->take_denial_receiver());
    ASSERT_TRUE(counter.ok()) << counter.error().message;

    const auto expected = errnos_of_calls(*plain);
    const auto got = errnos_of_calls(*counted);
    ASSERT_FALSE(expected.empty());
    ASSERT_EQ(got.size(), expected.size());
    const auto calls = grid();
    int refused = 0;
    for (size_t i = 0; i < calls.size(); ++i) {
        EXPECT_EQ(got[i], expected[i]) << "socket(" << calls[i].family << ", " << calls[i].type
                                       << ", " << calls[i].protocol << ")";
        if (expected[i] == EACCES || expected[i] == EAFNOSUPPORT) ++refused;
    }
    EXPECT_EQ(got.back(), EPERM);  // keyctl
    EXPECT_TRUE((*counter)->listening());
    sandbox::Denials d = (*counter)->take();
    // Every refused socket and the keyctl; a socket the kernel itself cannot make (a family
    // it lacks) may be refused by the program too, and is counted as such.
    EXPECT_GE(d.total, 1 + 2);
    EXPECT_LE(d.total, refused + 1);
    EXPECT_EQ(d.by_call["keyctl"], 1);
    EXPECT_EQ(d.by_call["socket"], d.total - 1);
    ASSERT_FALSE(d.first.empty());
    EXPECT_EQ(d.first.size(), sandbox::Denials::kFirstKept);
    EXPECT_EQ(d.first.front().rfind("socket(AF_UNSPEC, SOCK_STREAM) by pid ", 0), 0u)
        << d.first.front();
}

// A counter gone is a listener closed: the kernel answers every refused call ENOSYS, and the
// allowed ones still run. The control: the same calls unconfined succeed.
TEST(Denials, RefusedCallsStayRefusedWithoutTheCounter) {
    if (!seccomp_user_notif_available()) GTEST_SKIP() << "no seccomp user notification";
    TempDir home;
    auto counted = strict_plan(home, true);
    ASSERT_TRUE(counted.ok()) << counted.error().message;
    if (!counted->denials_counted()) GTEST_SKIP() << counted->denials_uncounted();
    auto counter = sandbox::DenialCounter::start(counted->take_denial_receiver(), true);
    ASSERT_TRUE(counter.ok()) << counter.error().message;
    const auto got = errnos_of_calls(*counted);
    ASSERT_FALSE(got.empty());
    const auto calls = grid();
    for (size_t i = 0; i < calls.size(); ++i) {
        const SocketCall& c = calls[i];
        if (c.family == AF_INET && c.type == SOCK_DGRAM && c.protocol == 0) {
            EXPECT_EQ(got[i], ENOSYS) << "UDP";
        }
        if (c.family == AF_INET && c.type == SOCK_STREAM && c.protocol == 0) {
            EXPECT_EQ(got[i], 0) << "TCP";
        }
        if (c.family == AF_UNIX && c.type == SOCK_STREAM && c.protocol == 0) {
            EXPECT_EQ(got[i], 0) << "UNIX";
        }
    }
    EXPECT_EQ(got.back(), ENOSYS);  // keyctl
    EXPECT_EQ((*counter)->take().total, 0);

    sandbox::Plan off;
    const auto open = errnos_of_calls(off);
    ASSERT_FALSE(open.empty());
    for (size_t i = 0; i < calls.size(); ++i)
        if (calls[i].family == AF_INET && calls[i].type == SOCK_DGRAM && calls[i].protocol == 0) {
            EXPECT_EQ(open[i], 0) << "UDP unconfined";
        }
    EXPECT_EQ(open.back(), 0);  // keyctl unconfined
}

}  // namespace
}  // namespace warden::testing
