#include "sys/epoll.hpp"

#include <unistd.h>

#include <array>

#include <gtest/gtest.h>

#include "sys/pipe.hpp"

namespace warden {
namespace {

TEST(Epoll, ReportsReadableWithItsData) {
    auto ep = Epoll::create();
    ASSERT_TRUE(ep.ok()) << ep.error().message;
    auto p = make_pipe();
    ASSERT_TRUE(p.ok());
    ASSERT_TRUE(ep->add(p->read.get(), EPOLLIN, 42).ok());
    std::array<epoll_event, 4> evs{};
    auto n = ep->wait(evs, 0);
    ASSERT_TRUE(n.ok());
    EXPECT_EQ(*n, 0);  // nothing written yet: the negative control
    ASSERT_EQ(::write(p->write.get(), "x", 1), 1);
    n = ep->wait(evs, 1000);
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(*n, 1);
    const uint64_t data = evs[0].data.u64;  // a copy: epoll_event is packed (x86-64)
    EXPECT_EQ(data, 42u);
    EXPECT_TRUE(evs[0].events & EPOLLIN);
}

TEST(Epoll, ReportsHangupWhenWriterCloses) {
    auto ep = Epoll::create();
    auto p = make_pipe();
    ASSERT_TRUE(ep.ok() && p.ok());
    ASSERT_TRUE(ep->add(p->read.get(), EPOLLIN, 7).ok());
    p->write.reset();
    std::array<epoll_event, 4> evs{};
    auto n = ep->wait(evs, 1000);
    ASSERT_TRUE(n.ok());
    ASSERT_EQ(*n, 1);
    EXPECT_TRUE(evs[0].events & EPOLLHUP);
}

TEST(Epoll, ModifyAndRemove) {
    auto ep = Epoll::create();
    auto p = make_pipe();
    ASSERT_TRUE(ep.ok() && p.ok());
    ASSERT_TRUE(ep->add(p->write.get(), EPOLLOUT, 1).ok());
    std::array<epoll_event, 4> evs{};
    EXPECT_EQ(*ep->wait(evs, 0), 1);
    ASSERT_TRUE(ep->modify(p->write.get(), 0, 1).ok());
    EXPECT_EQ(*ep->wait(evs, 0), 0);
    ASSERT_TRUE(ep->remove(p->write.get()).ok());
    EXPECT_TRUE(ep->remove(p->write.get()).ok());  // not registered: still fine
}

TEST(Epoll, ErrorNamesOperationAndFd) {
    auto ep = Epoll::create();
    ASSERT_TRUE(ep.ok());
    auto s = ep->add(9999, EPOLLIN, 0);
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.error().message, "epoll_ctl(ADD, 9999): Bad file descriptor");
    EXPECT_EQ(s.error().code, EBADF);
}

}  // namespace
}  // namespace warden
