#include "proc/children.hpp"

#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <gtest/gtest.h>

#include "proc/helpers.hpp"
#include "sys/fd.hpp"

namespace warden {
namespace {

using proc_testing::Child;
using proc_testing::pause_forever;

bool has(const std::vector<pid_t>& v, pid_t p) {
    return std::find(v.begin(), v.end(), p) != v.end();
}

TEST(Children, ListsWhatThisProcessForked) {
    if (!proc_children_supported()) GTEST_SKIP() << "no CONFIG_PROC_CHILDREN";
    Child a(pause_forever), b(pause_forever);
    ASSERT_TRUE(a.started() && b.started());
    auto kids = read_children(::getpid());
    EXPECT_TRUE(has(kids, a.pid())) << a.pid();
    EXPECT_TRUE(has(kids, b.pid())) << b.pid();
    EXPECT_FALSE(has(kids, ::getpid()));
}

// A child belongs to the thread that forked it: the main thread's file alone misses a child
// forked on another thread (the negative control), the union over every thread has it.
TEST(Children, ListsAChildForkedOnAnotherThread) {
    if (!proc_children_supported()) GTEST_SKIP() << "no CONFIG_PROC_CHILDREN";
    // A thread that forked and ended: the kernel moved its child to a live thread.
    std::unique_ptr<Child> c;
    std::thread t([&] { c = std::make_unique<Child>(pause_forever); });
    t.join();
    ASSERT_TRUE(c && c->started());
    const pid_t forked = c->pid();
    // While the forking thread lives, the child sits in that thread's list only.
    std::unique_ptr<Child> d;
    bool stop = false;
    std::mutex m;
    std::condition_variable cv;
    pid_t tid = 0;
    std::thread u([&] {
        d = std::make_unique<Child>(pause_forever);
        std::unique_lock lk(m);
        tid = ::gettid();
        cv.notify_all();
        cv.wait(lk, [&] { return stop; });
    });
    {
        std::unique_lock lk(m);
        cv.wait(lk, [&] { return tid != 0; });
    }
    const std::string main_file = "/proc/self/task/" + std::to_string(::getpid()) + "/children";
    auto main_only = read_file(main_file);
    auto all = read_children(::getpid());
    {
        std::lock_guard lk(m);
        stop = true;
    }
    cv.notify_all();
    u.join();
    ASSERT_TRUE(main_only.ok());
    EXPECT_EQ(main_only->find(std::to_string(d->pid())), std::string::npos)
        << "the main thread's list holds a child another thread forked: " << *main_only;
    EXPECT_TRUE(has(all, d->pid())) << d->pid();
    EXPECT_TRUE(has(read_children(::getpid()), forked)) << forked;
}

TEST(Children, GoneProcessHasNone) {
    Child a([] { ::_exit(0); });
    ASSERT_TRUE(a.started());
    pid_t pid = a.pid();
    a.reap();
    EXPECT_TRUE(read_children(pid).empty());
}

}  // namespace
}  // namespace warden
