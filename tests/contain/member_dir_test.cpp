// MemberDir: one member of a tree read through one open /proc/PID directory.
#include "contain/member_dir.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include <gtest/gtest.h>

namespace warden::testing {
namespace {

bool lists(const std::vector<pid_t>& v, pid_t pid) {
    return std::find(v.begin(), v.end(), pid) != v.end();
}

// A child belongs to the thread that forked it: with more than one thread, every thread's
// children file is read. Negative control: the one-thread shortcut (one file, the main
// thread's) misses the child of another thread.
TEST(MemberDir, ChildrenOfEveryThreadAreListed) {
    int gate[2];
    ASSERT_EQ(::pipe2(gate, O_CLOEXEC), 0);
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    std::atomic<pid_t> kid{0};
    std::thread forker([&] {
        pid_t c = ::fork();
        if (c == 0) {
            ::close(gate[1]);  // else our own write end keeps the gate open
            char b;
            ssize_t n = ::read(gate[0], &b, 1);  // until the test closes the gate
            ::_exit(n < 0 ? 1 : 0);
        }
        kid = c;
        std::unique_lock lk(mu);  // stay alive: the child is listed under this thread
        cv.wait(lk, [&] { return done; });
    });
    for (int i = 0; i < 5000 && kid.load() == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    const pid_t child = kid.load();
    auto m = MemberDir::open(::getpid());
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_GT(m->proc.threads, 1);
    EXPECT_TRUE(lists(m->children(), child)) << child;
    m->proc.threads = 1;  // the shortcut, where it does not apply
    EXPECT_FALSE(lists(m->children(), child)) << child;
    {
        std::lock_guard lk(mu);
        done = true;
    }
    cv.notify_all();
    forker.join();
    ::close(gate[1]);
    ::close(gate[0]);
    if (child > 0) ::waitpid(child, nullptr, 0);
}

// Reads through the directory fail once the process it named is gone; its sockets are
// listed by fd number and inode.
TEST(MemberDir, ReadsFailOnceTheProcessIsGoneAndSocketsAreListed) {
    int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ASSERT_GE(s, 0);
    auto self = MemberDir::open(::getpid());
    ASSERT_TRUE(self) << self.error().message;
    auto socks = self->sockets();
    EXPECT_TRUE(std::any_of(socks.begin(), socks.end(), [&](auto& p) { return p.first == s; }));
    ::close(s);

    pid_t c = ::fork();
    if (c == 0) ::_exit(0);
    ASSERT_GT(c, 0);
    auto m = MemberDir::open(c);  // alive or a zombie until reaped: its directory opens
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_TRUE(m->still_there());
    ::waitpid(c, nullptr, 0);
    EXPECT_FALSE(m->still_there());
    EXPECT_TRUE(m->children().empty());
    EXPECT_TRUE(m->sockets().empty());
}

// A plan made ahead reads its members again at the teardown through the directories it kept
// (Teardown::prepare): an exec since shows in the argv read again, with PID and starttime
// unchanged; once the process is gone the directory no longer reads, whoever holds its PID.
TEST(MemberDir, RefreshSeesAnExecAndFailsOnceTheProcessIsGone) {
    int gate[2];
    ASSERT_EQ(::pipe2(gate, O_CLOEXEC), 0);
    pid_t c = ::fork();
    if (c == 0) {
        ::close(gate[1]);
        char b;
        if (::read(gate[0], &b, 1) != 1) ::_exit(1);
        ::execl("/bin/sleep", "sleep", "600", static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ASSERT_GT(c, 0);
    ::close(gate[0]);
    auto m = MemberDir::open(c);
    ASSERT_TRUE(m) << m.error().message;
    const uint64_t starttime = m->proc.id.starttime;
    EXPECT_EQ(m->proc.cmdline.find("sleep"), std::string::npos);
    ASSERT_EQ(::write(gate[1], "x", 1), 1);
    bool execd = false;  // bounded: 5 s
    for (int i = 0; i < 500 && !execd; ++i) {
        ASSERT_TRUE(m->refresh());
        execd = m->proc.cmdline.find("600") != std::string::npos;
        if (!execd) ::usleep(10000);
    }
    EXPECT_TRUE(execd) << m->proc.cmdline;
    EXPECT_EQ(m->proc.id.starttime, starttime);
    EXPECT_EQ(m->proc.id.pid, c);
    ::kill(c, SIGKILL);  // our own child, not yet reaped: no other process has its PID
    ::waitpid(c, nullptr, 0);
    EXPECT_FALSE(m->refresh());
    ::close(gate[1]);
}

}  // namespace
}  // namespace warden::testing
