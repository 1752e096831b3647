#include "proc/sockets.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include "proc/helpers.hpp"
#include "proc/process_table.hpp"
#include "sys/pipe.hpp"

namespace warden {
namespace {

using proc_testing::Child;
using proc_testing::pause_forever;

TEST(SocketTable, ParsesInetTables) {
    SocketTable t;
    t.add_inet(
        "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  "
        "timeout inode\n"
        "   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0 "
        "       0 4711 1 0000000000000000 100 0 0 10 0\n"
        "   1: 0100007F:A000 0200000A:01BB 01 00000000:00000000 00:00000000 00000000  1000 "
        "       0 4712 1 0000000000000000 20 4 30 10 -1\n",
        SocketEntry::Proto::Tcp, false);
    t.add_inet(
        "  sl  local_address                         remote_address                        st "
        "tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
        "   0: 00000000000000000000000001000000:0035 00000000000000000000000000000000:0000 07 "
        "00000000:00000000 00:00000000 00000000     0        0 4713 2 0000000000000000 0\n",
        SocketEntry::Proto::Udp, true);
    const SocketEntry* l = t.lookup(4711);
    ASSERT_NE(l, nullptr);
    EXPECT_EQ(l->local_addr, "127.0.0.1");
    EXPECT_EQ(l->local_port, 8080);
    EXPECT_TRUE(l->listening());
    EXPECT_EQ(l->state_name(), "LISTEN");
    const SocketEntry* c = t.lookup(4712);
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(c->remote_addr, "10.0.0.2");
    EXPECT_EQ(c->remote_port, 443);
    EXPECT_TRUE(c->connected());
    EXPECT_FALSE(c->listening());
    const SocketEntry* u = t.lookup(4713);
    ASSERT_NE(u, nullptr);
    EXPECT_EQ(u->local_addr, "::1");
    EXPECT_EQ(u->local_port, 53);
    EXPECT_EQ(u->proto_name(), "udp6");
    EXPECT_TRUE(u->listening());
    EXPECT_EQ(t.lookup(1), nullptr);
}

TEST(SocketTable, ParsesUnixTable) {
    SocketTable t;
    t.add_unix(
        "Num       RefCount Protocol Flags    Type St Inode Path\n"
        "0000000000000000: 00000002 00000000 00010000 0001 01 5001 /run/a dir/agent.sock\n"
        "0000000000000000: 00000003 00000000 00000000 0001 03 5002\n"
        "0000000000000000: 00000002 00000000 00010000 0005 01 5003 @abstract\n");
    ASSERT_NE(t.lookup(5001), nullptr);
    EXPECT_EQ(t.lookup(5001)->path, "/run/a dir/agent.sock");
    EXPECT_EQ(t.lookup(5001)->unix_type, SOCK_STREAM);
    ASSERT_NE(t.lookup(5002), nullptr);
    EXPECT_EQ(t.lookup(5002)->path, "");
    EXPECT_EQ(t.lookup(5003)->path, "@abstract");
    EXPECT_EQ(t.size(), 3u);
}

// A child that listens on 127.0.0.1:<ephemeral> (TCP) and binds a UDP port, reporting both.
struct Listener {
    uint16_t tcp = 0, udp = 0;
    Child child;
    static uint16_t bound_port(int s) {
        sockaddr_in a{};
        socklen_t len = sizeof a;
        ::getsockname(s, reinterpret_cast<sockaddr*>(&a), &len);
        return ntohs(a.sin_port);
    }
    static int bind_local(int type) {
        int s = ::socket(AF_INET, type, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) ::_exit(1);
        return s;
    }
    explicit Listener(Pipe report)
        : child([&] {
              int t = bind_local(SOCK_STREAM);
              if (::listen(t, 4) != 0) ::_exit(1);
              int u = bind_local(SOCK_DGRAM);
              uint16_t ports[2] = {bound_port(t), bound_port(u)};
              ::write(report.write.get(), ports, sizeof ports);
              pause_forever();
          }) {
        report.write.reset();
        uint16_t ports[2] = {};
        if (::read(report.read.get(), ports, sizeof ports) == sizeof ports)
            tcp = ports[0], udp = ports[1];
    }
};

bool has_port(const std::vector<ListeningPort>& ports, uint16_t port, bool udp) {
    for (const auto& p : ports)
        if (p.port == port && p.udp == udp && p.addr == "127.0.0.1") return true;
    return false;
}

TEST(Sockets, ListeningPortAttributedToTheRightProcess) {
    Listener l(make_pipe().value());
    ASSERT_NE(l.tcp, 0);
    ASSERT_NE(l.udp, 0);
    auto p = read_process(l.child.pid(), kFds | kNetNs);
    ASSERT_TRUE(p.ok()) << p.error().message;
    auto ports = listening_ports(*p);
    EXPECT_TRUE(has_port(ports, l.tcp, false));
    EXPECT_TRUE(has_port(ports, l.udp, true));
    // Negative control: the test process itself holds neither.
    auto me = read_process(::getpid(), kFds | kNetNs);
    ASSERT_TRUE(me.ok());
    EXPECT_FALSE(has_port(listening_ports(*me), l.tcp, false));

    // Through a whole scan, one table per network namespace.
    auto t = ProcessTable::scan(kFds | kNetNs);
    auto tables = SocketTables::load(t);
    EXPECT_GE(tables.namespaces(), 1u);
    const Process* c = t.find(l.child.pid());
    ASSERT_NE(c, nullptr);
    int found = 0;
    for (const auto& f : c->fds) {
        if (f.kind != FdInfo::Kind::Socket) continue;
        const SocketEntry* e = tables.lookup(*c, f.inode);
        ASSERT_NE(e, nullptr) << f.target;
        if (e->proto == SocketEntry::Proto::Tcp && e->local_port == l.tcp) {
            EXPECT_EQ(e->state_name(), "LISTEN");
            ++found;
        }
    }
    EXPECT_EQ(found, 1);

    l.child.kill_and_reap();
    auto again = SocketTable::load_for(::getpid());
    ASSERT_TRUE(again.ok());
    for (const auto& f : c->fds) {
        if (f.kind == FdInfo::Kind::Socket) {
            EXPECT_EQ(again->lookup(f.inode), nullptr);
        }
    }
}

}  // namespace
}  // namespace warden
