#include "proc/pipe_peers.hpp"

#include <unistd.h>

#include <gtest/gtest.h>

#include "proc/helpers.hpp"
#include "sys/pipe.hpp"

namespace warden {
namespace {

using proc_testing::Child;
using proc_testing::pause_forever;

TEST(PipePeers, ParentHoldingTheWriteEndIsTheWriterOfStdin) {
    Pipe in = make_pipe().value();
    Pipe ready = make_pipe().value();
    // The child reads its stdin from `in`, like a stdio server from its client.
    Child child([&] {
        ::dup2(in.read.get(), 0);
        in.read.reset();
        in.write.reset();
        ready.write.reset();
        pause_forever();
    });
    in.read.reset();
    ready.write.reset();
    char c;
    ASSERT_EQ(::read(ready.read.get(), &c, 1), 0);  // the child has dropped its copies

    {
        auto t = ProcessTable::scan(kFds);
        PipePeers peers(t);
        const Process* server = t.find(child.pid());
        ASSERT_NE(server, nullptr);
        auto writers = peers.writers_of_stdin(*server);
        ASSERT_EQ(writers.size(), 1u);
        EXPECT_EQ(writers[0]->id.pid, ::getpid());
        // The server holds the read end, and is not its own writer.
        bool server_reads = false;
        for (const auto& e : peers.holders(server->fds[0].inode))
            server_reads |= e.process == server && e.fd == 0 && e.read && !e.write;
        EXPECT_TRUE(server_reads);
    }

    // The client lets go of the write end: nobody can write the server's stdin any more.
    in.write.reset();
    auto t = ProcessTable::scan(kFds);
    PipePeers peers(t);
    const Process* server = t.find(child.pid());
    ASSERT_NE(server, nullptr);
    EXPECT_TRUE(peers.writers_of_stdin(*server).empty());
}

TEST(PipePeers, NoWritersWhenStdinIsNotAPipe) {
    auto t = ProcessTable::scan(kFds);
    PipePeers peers(t);
    Process p;
    p.id.pid = 999999;
    FdInfo f;
    f.fd = 0;
    f.kind = FdInfo::Kind::File;
    p.fds.push_back(f);
    EXPECT_TRUE(peers.writers_of_stdin(p).empty());
    EXPECT_TRUE(peers.holders(1).empty());
}

}  // namespace
}  // namespace warden
