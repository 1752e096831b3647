// FdSnapshot: every fd table from one BPF iterator read, checked against /proc.
#include "proc/fd_snapshot.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <linux/magic.h>
#include <sys/stat.h>

#include <cstdlib>
#include <map>
#include <string>

#include <gtest/gtest.h>

#include "helpers.hpp"
#include "proc/process.hpp"
#include "proc/process_table.hpp"

namespace warden {
namespace {

using proc_testing::Child;

// Whether this machine lets us use the iterator (root, BTF, initial pid namespace). The
// tests that need it say why they are skipped otherwise: CI runs as root on a kernel with
// BTF, where they run.
Result<FdSnapshot> snapshot_or_skip_reason() {
    return FdSnapshot::take();
}

#define TAKE_OR_SKIP(var)                 \
    auto var = snapshot_or_skip_reason(); \
    if (!var) GTEST_SKIP() << "no BPF here: " << var.error().message

// A child holding each kind of fd: the read end of one pipe and the write end of another,
// both ends of a third, a unix socketpair, a TCP socket listening on 127.0.0.1, a regular
// file and /dev/null.
struct Holder {
    int ready[2] = {-1, -1};
    Child child;
    explicit Holder()
        : child([this] {
              int a[2], b[2], c[2], sp[2];
              if (::pipe(a) || ::pipe(b) || ::pipe(c) || ::socketpair(AF_UNIX, SOCK_STREAM, 0, sp))
                  ::_exit(1);
              ::close(a[1]);  // keeps the read end of a
              ::close(b[0]);  // keeps the write end of b
              int s = ::socket(AF_INET, SOCK_STREAM, 0);
              sockaddr_in addr{};
              addr.sin_family = AF_INET;
              addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
              if (s < 0 || ::bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) ||
                  ::listen(s, 1))
                  ::_exit(1);
              (void)::open("/proc/self/status", O_RDONLY);
              (void)::open("/dev/null", O_WRONLY);
              ::pause();
          }) {}
};

std::map<int, FdInfo> by_fd(const std::vector<FdInfo>& v) {
    std::map<int, FdInfo> m;
    for (const auto& f : v)
        m[f.fd] = f;
    return m;
}

TEST(FdSnapshot, AgreesWithProcForEveryPipeAndSocket) {
    Holder h;
    ASSERT_TRUE(h.child.started());
    ASSERT_TRUE(proc_testing::wait_until([&] {
        auto p = read_process(h.child.pid(), kFds);
        return p && p->fds.size() >= 11;  // 0-2, six pipe fds less two, 2+1 sockets, 2 files
    }));
    TAKE_OR_SKIP(snap);
    auto proc = read_process(h.child.pid(), kFds | kStatus);
    ASSERT_TRUE(proc);
    Process from_bpf;
    from_bpf.id = proc->id;
    ASSERT_TRUE(snap->fill(from_bpf)) << "no records for the holder";
    if (FdSnapshot::uids_as_proc_shows()) {
        EXPECT_EQ(from_bpf.uid, proc->uid);
    }
    auto want = by_fd(proc->fds);
    auto got = by_fd(from_bpf.fds);
    ASSERT_EQ(got.size(), want.size());
    int pipes = 0, sockets = 0;
    for (const auto& [fd, w] : want) {
        ASSERT_TRUE(got.count(fd)) << "fd " << fd << " missing";
        const FdInfo& g = got[fd];
        if (w.kind == FdInfo::Kind::Pipe || w.kind == FdInfo::Kind::Socket) {
            EXPECT_EQ(g.kind, w.kind) << "fd " << fd;
            EXPECT_EQ(g.inode, w.inode) << "fd " << fd;
            EXPECT_EQ(g.target, w.target) << "fd " << fd;
            if (w.kind == FdInfo::Kind::Pipe) {
                ++pipes;
                EXPECT_EQ(g.flags, w.flags) << "access mode of pipe fd " << fd;
            } else {
                ++sockets;
            }
        } else if (w.kind == FdInfo::Kind::File) {
            EXPECT_EQ(g.kind, FdInfo::Kind::File) << "fd " << fd << " " << w.target;
            EXPECT_TRUE(g.target.empty());
        }
    }
    EXPECT_GE(pipes, 4);
    EXPECT_EQ(sockets, 3);
}

FdSnapshot::Record record(uint32_t tgid, uint32_t fd, uint64_t start_ticks) {
    FdSnapshot::Record r;
    r.tgid = r.pid = tgid;
    r.fd = fd;
    r.start_boottime =
        start_ticks * (1'000'000'000ull / static_cast<uint64_t>(::sysconf(_SC_CLK_TCK)));
    r.inode = 4242;
    r.s_magic = PIPEFS_MAGIC;
    r.i_mode = S_IFIFO | 0600;
    r.f_mode = 0x2;  // FMODE_WRITE
    return r;
}

// The table under a pid is that process's only if it started when the process did: a pid
// reused between the snapshot and the read of stat gives nothing.
TEST(FdSnapshot, ATableUnderARecycledPidIsNotTaken) {
    auto snap = FdSnapshot::from_records({record(777, 0, 5000), record(777, 1, 5000)});
    Process other;
    other.id = {777, 5001};
    EXPECT_FALSE(snap.fill(other));
    EXPECT_TRUE(other.fds.empty());
    // Negative control: the same pid and start time takes it.
    Process same;
    same.id = {777, 5000};
    ASSERT_TRUE(same.fds.empty());
    EXPECT_TRUE(snap.fill(same));
    ASSERT_EQ(same.fds.size(), 2u);
    EXPECT_EQ(same.fds[1].target, "pipe:[4242]");
    EXPECT_EQ(same.fds[1].flags, O_WRONLY);
}

// /proc/PID/fd lists the thread-group leader's table; a thread with a table of its own
// (clone without CLONE_FILES) is not the process's.
TEST(FdSnapshot, OnlyTheLeadersTableCounts) {
    auto thread = record(900, 3, 10);
    thread.pid = 901;
    auto snap = FdSnapshot::from_records({record(900, 0, 10), thread});
    Process p;
    p.id = {900, 10};
    ASSERT_TRUE(snap.fill(p));
    ASSERT_EQ(p.fds.size(), 1u);
    EXPECT_EQ(p.fds[0].fd, 0);
    // Negative control: as the leader's own, fd 3 is listed.
    auto leader3 = record(900, 3, 10);
    auto both = FdSnapshot::from_records({record(900, 0, 10), leader3});
    Process q;
    q.id = {900, 10};
    ASSERT_TRUE(both.fill(q));
    EXPECT_EQ(q.fds.size(), 2u);
}

// The iterator gives tables in pid and fd order; records in any other order are sorted, not
// trusted.
TEST(FdSnapshot, RecordsOutOfOrderAreSortedByProcessAndFd) {
    auto snap = FdSnapshot::from_records(
        {record(20, 5, 1), record(10, 2, 1), record(20, 1, 1), record(10, 0, 1)});
    Process a, b;
    a.id = {10, 1};
    b.id = {20, 1};
    ASSERT_TRUE(snap.fill(a));
    ASSERT_TRUE(snap.fill(b));
    ASSERT_EQ(a.fds.size(), 2u);
    ASSERT_EQ(b.fds.size(), 2u);
    EXPECT_EQ(a.fds[0].fd, 0);
    EXPECT_EQ(a.fds[1].fd, 2);
    EXPECT_EQ(b.fds[0].fd, 1);
    EXPECT_EQ(b.fds[1].fd, 5);
}

// A pipe is a FIFO on pipefs. A named FIFO on a disk is an ordinary file to /proc (its link
// is a path), not a pipe whose peers we would look for.
TEST(FdSnapshot, ANamedFifoIsAFileNotAPipe) {
    auto fifo = record(1, 0, 1);
    fifo.s_magic = TMPFS_MAGIC;
    EXPECT_EQ(FdSnapshot::to_fd_info(fifo).kind, FdInfo::Kind::File);
    EXPECT_EQ(FdSnapshot::to_fd_info(fifo).inode, 0u);
    // Negative control: on pipefs it is a pipe.
    EXPECT_EQ(FdSnapshot::to_fd_info(record(1, 0, 1)).kind, FdInfo::Kind::Pipe);
    auto rw = record(1, 0, 1);
    rw.f_mode = 0x3;
    EXPECT_EQ(FdSnapshot::to_fd_info(rw).flags, O_RDWR);
    rw.f_mode = 0x1;
    EXPECT_EQ(FdSnapshot::to_fd_info(rw).flags, O_RDONLY);
    auto sock = record(1, 4, 1);
    sock.s_magic = SOCKFS_MAGIC;
    sock.i_mode = S_IFSOCK | 0777;
    EXPECT_EQ(FdSnapshot::to_fd_info(sock).target, "socket:[4242]");
    EXPECT_EQ(FdSnapshot::to_fd_info(sock).flags, -1);
}

std::map<pid_t, const Process*> pick(const ProcessTable& t, std::initializer_list<pid_t> pids) {
    std::map<pid_t, const Process*> out;
    for (pid_t pid : pids)
        out[pid] = t.find(pid);
    return out;
}

// The scan with kFdsBulk gives what the /proc scan gives, for every pipe and socket of the
// processes this test started, and the uid; the pipes come with their access mode.
TEST(FdSnapshot, BulkScanAgreesWithTheProcScan) {
    Holder a, b;
    ASSERT_TRUE(a.child.started() && b.child.started());
    for (pid_t pid : {a.child.pid(), b.child.pid()})
        ASSERT_TRUE(proc_testing::wait_until([&] {
            auto p = read_process(pid, kFds);
            return p && p->fds.size() >= 11;
        }));
    if (!FdSnapshot::may_work()) GTEST_SKIP() << "not root: the scan reads /proc only";
    const unsigned what = kUid | kCmdline | kFdLinks;
    ProcessTable bulk = ProcessTable::scan(what | kFdsBulk);
    ProcessTable proc = ProcessTable::scan(what | kPipeModes);
    if (bulk.fds_from() != "bpf") GTEST_SKIP() << bulk.fds_from();
    EXPECT_EQ(proc.fds_from(), "/proc");
    auto from_bulk = pick(bulk, {a.child.pid(), b.child.pid()});
    auto from_proc = pick(proc, {a.child.pid(), b.child.pid()});
    for (auto [pid, p] : from_proc) {
        const Process* q = from_bulk[pid];
        ASSERT_NE(p, nullptr);
        ASSERT_NE(q, nullptr);
        EXPECT_EQ(q->uid, p->uid);
        EXPECT_EQ(q->cmdline, p->cmdline);
        ASSERT_EQ(q->fds.size(), p->fds.size());
        for (size_t i = 0; i < p->fds.size(); ++i) {
            EXPECT_EQ(q->fds[i].fd, p->fds[i].fd);
            if (p->fds[i].kind != FdInfo::Kind::Pipe && p->fds[i].kind != FdInfo::Kind::Socket)
                continue;
            EXPECT_EQ(q->fds[i].target, p->fds[i].target);
            EXPECT_EQ(q->fds[i].flags, p->fds[i].flags);
        }
    }
}

// A process that holds no file at all has no table in the snapshot: the scan still has it,
// read from /proc.
TEST(FdSnapshot, AProcessWithoutFilesIsReadFromProc) {
    int go[2];
    ASSERT_EQ(::pipe(go), 0);
    Child bare([&] {
        char c;
        ::close(go[1]);
        (void)::read(go[0], &c, 1);  // until the parent's end closes
        for (int fd = 0; fd < 1024; ++fd)
            ::close(fd);
        ::pause();
    });
    ::close(go[0]);
    ASSERT_TRUE(bare.started());
    ::close(go[1]);
    ASSERT_TRUE(proc_testing::wait_until([&] {
        auto p = read_process(bare.pid(), kFds);
        return p && p->fds.empty();
    }));
    TAKE_OR_SKIP(snap);
    auto p = read_process(bare.pid(), kStatus);
    ASSERT_TRUE(p);
    Process copy = *p;
    EXPECT_FALSE(snap->fill(copy)) << "the snapshot alone would not know it";
    ProcessTable t = ProcessTable::scan(kUid | kFdLinks | kFdsBulk);
    ASSERT_EQ(t.fds_from(), "bpf");
    const Process* seen = t.find(p->id);
    ASSERT_NE(seen, nullptr);
    EXPECT_TRUE(seen->fds.empty());
    EXPECT_EQ(seen->uid, p->uid);
}

// An ordinary file comes from the snapshot without its path; kStdioTargets reads the path
// of fds 0-2.
TEST(FdSnapshot, StdioTargetsGiveOrdinaryFilesTheirPath) {
    Child on_null([] {
        int fd = ::open("/dev/null", O_RDONLY);
        if (fd < 0 || ::dup2(fd, 0) < 0) ::_exit(1);
        ::pause();
    });
    ASSERT_TRUE(on_null.started());
    ASSERT_TRUE(proc_testing::wait_until([&] {
        auto p = read_process(on_null.pid(), kFds);
        return p && !p->fds.empty() && p->fds[0].target == "/dev/null";
    }));
    if (!FdSnapshot::may_work()) GTEST_SKIP() << "not root: the scan reads /proc only";
    ProcessTable t = ProcessTable::scan(kFdLinks | kFdsBulk);
    if (t.fds_from() != "bpf") GTEST_SKIP() << t.fds_from();
    const Process* p = t.find(on_null.pid());
    ASSERT_NE(p, nullptr);
    ASSERT_FALSE(p->fds.empty());
    EXPECT_EQ(p->fds[0].kind, FdInfo::Kind::File);
    EXPECT_EQ(p->fds[0].target, "") << "negative control: the snapshot has no path";
    Process copy = *p;
    ASSERT_TRUE(read_more(copy, kStdioTargets));
    EXPECT_EQ(copy.fds[0].target, "/dev/null");
    ProcessTable with = ProcessTable::scan(kFdLinks | kFdsBulk | kStdioTargets);
    ASSERT_NE(with.find(on_null.pid()), nullptr);
    EXPECT_EQ(with.find(on_null.pid())->fds[0].target, "/dev/null");
}

// The snapshot fails after the scan planned on it (a verifier refusal, say): every process
// is read from /proc after all, whole, and the scan says why.
TEST(FdSnapshot, AFailedSnapshotFallsBackToProcForEveryProcess) {
    if (!FdSnapshot::may_work()) GTEST_SKIP() << "the scan would not plan on a snapshot here";
    Holder h;
    ASSERT_TRUE(h.child.started());
    ASSERT_TRUE(proc_testing::wait_until([&] {
        auto p = read_process(h.child.pid(), kFds);
        return p && p->fds.size() >= 11;
    }));
    auto want = read_process(h.child.pid(), kFds | kStatus);
    ASSERT_TRUE(want);
    ::setenv("MCPWARDEN_FAULT", "clone3,bpf_iter", 1);
    ProcessTable t = ProcessTable::scan(kUid | kFdLinks | kFdsBulk);
    ::unsetenv("MCPWARDEN_FAULT");
    EXPECT_EQ(t.fds_from(), "/proc: BPF fd iterator: injected fault (MCPWARDEN_FAULT)");
    const Process* p = t.find(want->id);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p->uid, want->uid);
    ASSERT_EQ(p->fds.size(), want->fds.size());
    for (size_t i = 0; i < p->fds.size(); ++i) {
        EXPECT_EQ(p->fds[i].target, want->fds[i].target);
        EXPECT_EQ(p->fds[i].flags, want->fds[i].flags) << "fd " << p->fds[i].fd;
    }
    // Negative control: without the fault the same scan takes the snapshot.
    EXPECT_EQ(ProcessTable::scan(kUid | kFdLinks | kFdsBulk).fds_from(), "bpf");
}

// MCPWARDEN_NO_BPF=1 turns the iterator off, and the scan says so.
TEST(FdSnapshot, TurnedOffByTheEnvironment) {
    ::setenv("MCPWARDEN_NO_BPF", "1", 1);
    ProcessTable t = ProcessTable::scan(kFdLinks | kFdsBulk);
    auto s = FdSnapshot::take();
    ::unsetenv("MCPWARDEN_NO_BPF");
    EXPECT_EQ(t.fds_from(), "/proc");
    ASSERT_FALSE(s);
    EXPECT_EQ(s.error().message, "BPF fd iterator: turned off by MCPWARDEN_NO_BPF");
    EXPECT_NE(t.find(::getpid()), nullptr);
    EXPECT_FALSE(t.find(::getpid())->fds.empty()) << "fds read from /proc instead";
}

}  // namespace
}  // namespace warden
