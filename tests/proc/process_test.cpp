#include "proc/process.hpp"

#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>

#include <gtest/gtest.h>

#include "proc/helpers.hpp"
#include "sys/fd.hpp"
#include "sys/pipe.hpp"

namespace warden {
namespace {

using proc_testing::Child;
using proc_testing::pause_forever;
using proc_testing::wait_until;

// A temp dir removed on destruction.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        char tmpl[] = "/tmp/warden-proc-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

std::string comm_of(pid_t pid) {
    auto p = read_process(pid, kStat);
    return p ? p->comm : std::string();
}

// Waits until `pid` has exec'd into `comm` and the kernel has laid out its new argv and
// environment: exec sets the comm first and the argv/environ bounds a little later, and a
// read in between sees an empty cmdline and environ.
bool wait_exec(pid_t pid, const std::string& comm) {
    return wait_until([&] {
        auto p = read_process(pid, kCmdline | kEnvNames);
        return p && p->comm == comm && !p->cmdline.empty() && !p->env_names.empty();
    });
}

TEST(Process, ReadsSelf) {
    auto p = read_process(::getpid(), kAll);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->id.pid, ::getpid());
    EXPECT_EQ(p->ppid, ::getppid());
    EXPECT_EQ(p->pgid, ::getpgrp());
    EXPECT_EQ(p->sid, ::getsid(0));
    EXPECT_EQ(p->state, 'R');
    EXPECT_EQ(p->uid, ::getuid());
    EXPECT_GT(p->rss_kb, 0u);
    EXPECT_GE(p->threads, 1);
    EXPECT_GT(p->id.starttime, 0u);
    EXPECT_EQ(p->exe, std::filesystem::read_symlink("/proc/self/exe").string());
    EXPECT_EQ(p->cwd, std::filesystem::current_path().string());
    EXPECT_NE(p->net_ns, 0u);
    EXPECT_FALSE(p->argv().empty());
}

// PF_KTHREAD (field 9 of stat) tells kernel threads, whatever their PID: the teardown
// engine skips them by this flag, since inside a PID namespace PID 2 is an ordinary process.
TEST(Process, KernelThreadIsToldByItsFlag) {
    auto self = read_process(::getpid(), kStat);
    ASSERT_TRUE(self.ok()) << self.error().message;
    EXPECT_FALSE(self->kernel_thread()) << "flags " << self->flags;
    // kthreadd is PID 2 only in the initial PID namespace; elsewhere only our side is checked.
    auto kthreadd = read_process(2, kStat);
    if (!kthreadd || kthreadd->comm != "kthreadd" || kthreadd->ppid != 0)
        GTEST_SKIP() << "PID 2 is not kthreadd here (not the initial PID namespace)";
    EXPECT_TRUE(kthreadd->kernel_thread()) << "flags " << kthreadd->flags;
    // Nothing but stat and status is read for it, whatever was asked; a user process with
    // the same request gets its files (the control).
    auto full = read_process(2, kAll);
    ASSERT_TRUE(full.ok()) << full.error().message;
    EXPECT_TRUE(full->fds.empty());
    EXPECT_TRUE(full->cwd.empty());
    EXPECT_EQ(full->net_ns, 0u);
    EXPECT_EQ(full->uid, 0u);
    auto me = read_process(::getpid(), kAll);
    ASSERT_TRUE(me.ok()) << me.error().message;
    EXPECT_FALSE(me->fds.empty());
    EXPECT_FALSE(me->cwd.empty());
}

TEST(Process, CommWithSpacesAndParenthesesFromExec) {
    // exec a copy of sleep through a symlink whose name looks like the end of the comm
    // field: a parser that stops at the first ')' reads "a b" and a garbage state.
    TempDir dir;
    auto link = dir.path / "a b) (c";
    std::filesystem::create_symlink("/bin/sleep", link);
    std::string path = link.string();
    Child child([&] {
        ::execl(path.c_str(), path.c_str(), "30", static_cast<char*>(nullptr));
        ::_exit(127);
    });
    ASSERT_TRUE(child.started());
    ASSERT_TRUE(wait_exec(child.pid(), "a b) (c")) << "comm stayed " << comm_of(child.pid());
    auto p = read_process(child.pid(), kBasic);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->ppid, ::getpid());
    EXPECT_EQ(p->pgid, ::getpgrp());
    EXPECT_TRUE(p->state == 'S' || p->state == 'R') << p->state;
    EXPECT_EQ(p->display_command(), path + " 30");
}

TEST(Process, CommWithParenthesesFromPrctl) {
    Pipe ready = make_pipe().value();
    Child child([&] {
        ::prctl(PR_SET_NAME, "x) R 1 (y) ", 0, 0, 0);
        ::close(ready.write.release());
        pause_forever();
    });
    ready.write.reset();
    char c;
    ASSERT_EQ(::read(ready.read.get(), &c, 1), 0);  // child closed its end: name is set
    // A parser that stops at the first ')' would read state 'R' and ppid 1 from the comm;
    // wait for the child to sleep in pause() so the real state differs from that.
    ASSERT_TRUE(wait_until([&] {
        auto p = read_process(child.pid(), kStat);
        return p && p->state == 'S';
    }));
    auto p = read_process(child.pid(), kStat);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->comm, "x) R 1 (y) ");
    EXPECT_EQ(p->ppid, ::getpid());  // not the fake "1" inside the comm
    EXPECT_EQ(p->state, 'S');
}

TEST(Process, ZombieIsNotAlive) {
    Child child([] { ::_exit(3); });
    ASSERT_TRUE(child.started());
    // Wait for the exit without reaping it: it stays a zombie until we do.
    siginfo_t info{};
    ASSERT_EQ(::waitid(P_PID, static_cast<id_t>(child.pid()), &info, WEXITED | WNOWAIT), 0);
    auto p = read_process(child.pid(), kBasic);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->state, 'Z');
    EXPECT_TRUE(p->zombie());
    EXPECT_FALSE(is_alive(p->id));
    EXPECT_TRUE(p->cmdline.empty());
    EXPECT_EQ(p->display_command(), "[" + p->comm + "]");
    // The identity is still readable: a zombie keeps its /proc entry (exists != alive).
    auto id = read_identity(child.pid());
    ASSERT_TRUE(id.ok());
    EXPECT_EQ(*id, p->id);
}

TEST(Process, LiveChildIsAliveAndFakedIdentityIsNot) {
    Child child([] { pause_forever(); });
    auto id = read_identity(child.pid());
    ASSERT_TRUE(id.ok()) << id.error().message;
    EXPECT_TRUE(is_alive(*id));
    // Same pid, another starttime: a recycled pid must not count as our process.
    EXPECT_FALSE(is_alive(ProcessId{id->pid, id->starttime + 1}));
    EXPECT_FALSE(is_alive(ProcessId{id->pid, id->starttime - 1}));
    child.kill_and_reap();
    EXPECT_FALSE(is_alive(*id));
}

TEST(Process, VanishedProcessNamesTheFile) {
    Child child([] { ::_exit(0); });
    pid_t pid = child.pid();
    child.reap();
    auto p = read_process(pid, kBasic);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.error().code, ESRCH);
    EXPECT_EQ(p.error().message,
              "cannot read /proc/" + std::to_string(pid) + "/stat: No such process");
    auto id = read_identity(pid);
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.error().code, ESRCH);
}

TEST(Process, ElapsedMatchesPs) {
    Child child([] { pause_forever(); });
    std::this_thread::sleep_for(std::chrono::milliseconds(1300));
    auto p = read_process(child.pid(), kStat);
    ASSERT_TRUE(p.ok()) << p.error().message;
    std::string cmd = "ps -o etimes= -p " + std::to_string(child.pid());
    FILE* f = ::popen(cmd.c_str(), "r");
    ASSERT_NE(f, nullptr);
    long ps_etimes = -1;
    ASSERT_EQ(std::fscanf(f, "%ld", &ps_etimes), 1);
    ::pclose(f);
    double ours = p->elapsed_seconds();
    EXPECT_NEAR(ours, static_cast<double>(ps_etimes), 1.0);
    EXPECT_GE(ours, 1.2);
}

TEST(Process, EnvironmentNamesWithoutValues) {
    const std::string secret = "s3cr3t-" + std::to_string(::getpid()) + "-value";
    const std::string secret_var = "WARDEN_TEST_TOKEN=" + secret;
    const std::string marker_var = "MCPWARDEN_SESSION=sess-42";
    Child child([&] {
        char* env[] = {const_cast<char*>(secret_var.c_str()), const_cast<char*>(marker_var.c_str()),
                       const_cast<char*>("PATH=/bin"), nullptr};
        ::execle("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr), env);
        ::_exit(127);
    });
    ASSERT_TRUE(wait_exec(child.pid(), "sleep"));
    // Negative control: the value really is in the process's environment.
    auto raw = read_file("/proc/" + std::to_string(child.pid()) + "/environ");
    ASSERT_TRUE(raw.ok());
    ASSERT_NE(raw->find(secret), std::string::npos);

    auto p = read_process(child.pid(), kAll);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_EQ(p->env_names,
              (std::vector<std::string>{"WARDEN_TEST_TOKEN", "MCPWARDEN_SESSION", "PATH"}));
    ASSERT_TRUE(p->session_marker.has_value());
    EXPECT_EQ(*p->session_marker, "sess-42");

    auto holds_secret = [&](const std::string& s) { return s.find(secret) != std::string::npos; };
    EXPECT_FALSE(holds_secret(p->comm));
    EXPECT_FALSE(holds_secret(p->cmdline));
    EXPECT_FALSE(holds_secret(p->exe));
    EXPECT_FALSE(holds_secret(p->cwd));
    EXPECT_FALSE(holds_secret(*p->session_marker));
    for (const auto& n : p->env_names)
        EXPECT_FALSE(holds_secret(n));
    for (const auto& f : p->fds)
        EXPECT_FALSE(holds_secret(f.target));
}

TEST(Process, NoMarkerWhenAbsent) {
    Child child([] {
        char* env[] = {const_cast<char*>("PATH=/bin"), nullptr};
        ::execle("/bin/sleep", "sleep", "30", static_cast<char*>(nullptr), env);
        ::_exit(127);
    });
    ASSERT_TRUE(wait_exec(child.pid(), "sleep"));
    auto p = read_process(child.pid(), kEnvNames);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->env_names, std::vector<std::string>{"PATH"});
    EXPECT_FALSE(p->session_marker.has_value());
}

TEST(Process, CmdlineKeepsRawBytesAndDisplayEscapes) {
    const std::string argv0 = "caf\xc3\xa9\xff\x01";  // valid UTF-8, then a bad byte and a control
    Child child([&] {
        ::execl("/bin/sleep", argv0.c_str(), "30", static_cast<char*>(nullptr));
        ::_exit(127);
    });
    ASSERT_TRUE(wait_until([&] {
        auto p = read_process(child.pid(), kCmdline);
        return p && p->cmdline.starts_with(argv0);
    }));
    auto p = read_process(child.pid(), kCmdline);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(p->cmdline, argv0 + std::string("\0"
                                              "30\0",
                                              4));
    EXPECT_EQ(p->argv(), (std::vector<std::string>{argv0, "30"}));
    EXPECT_EQ(p->display_command(), "caf\xc3\xa9\\xff\\x01 30");
}

TEST(Process, FdTableClassifiesPipesWithTheirEnd) {
    Pipe pipe = make_pipe().value();
    struct stat st {};
    ASSERT_EQ(::fstat(pipe.read.get(), &st), 0);
    auto p = read_process(::getpid(), kFds);
    ASSERT_TRUE(p.ok()) << p.error().message;
    const FdInfo* r = nullptr;
    const FdInfo* w = nullptr;
    for (const auto& f : p->fds) {
        if (f.fd == pipe.read.get()) r = &f;
        if (f.fd == pipe.write.get()) w = &f;
    }
    ASSERT_NE(r, nullptr);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(r->kind, FdInfo::Kind::Pipe);
    EXPECT_EQ(r->inode, st.st_ino);
    EXPECT_EQ(w->inode, st.st_ino);
    EXPECT_EQ(r->flags & O_ACCMODE, O_RDONLY);
    EXPECT_EQ(w->flags & O_ACCMODE, O_WRONLY);
    EXPECT_EQ(r->target, "pipe:[" + std::to_string(st.st_ino) + "]");
}

// A pipe reopened O_RDWR through /proc/self/fd holds both ends: the mode bits of its fd
// link say so (a reader-only or writer-only guess would hide a writer, or invent one).
TEST(Process, FdTableSeesAReadWritePipeEnd) {
    Pipe pipe = make_pipe().value();
    Fd rw(::open(("/proc/self/fd/" + std::to_string(pipe.read.get())).c_str(), O_RDWR | O_CLOEXEC));
    ASSERT_TRUE(rw.valid()) << std::strerror(errno);
    auto p = read_process(::getpid(), kFds);
    ASSERT_TRUE(p.ok()) << p.error().message;
    const FdInfo* f = nullptr;
    for (const auto& x : p->fds)
        if (x.fd == rw.get()) f = &x;
    ASSERT_NE(f, nullptr);
    EXPECT_EQ(f->kind, FdInfo::Kind::Pipe) << f->target;
    EXPECT_EQ(f->flags, O_RDWR);
}

// read_links fills exe and cwd later, but only for the same process: a starttime that does
// not match (a recycled pid) leaves the fields alone and says no.
TEST(Process, ReadLinksChecksIdentityFirst) {
    auto p = read_process(::getpid(), kStat);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_TRUE(p->exe.empty());
    Process other = *p;
    other.id.starttime += 1;  // negative control: not this process
    EXPECT_FALSE(read_links(other));
    EXPECT_TRUE(other.exe.empty());
    EXPECT_TRUE(other.cwd.empty());
    ASSERT_TRUE(read_links(*p));
    EXPECT_EQ(p->exe, std::filesystem::read_symlink("/proc/self/exe").string());
    EXPECT_EQ(p->cwd, std::filesystem::current_path().string());
}

// read_details reads what a scan left out, through the same identity check as read_links: env
// names, netns and pipe modes only for the process the scan saw.
TEST(Process, ReadMoreChecksIdentityThenFillsWhatTheScanLeftOut) {
    Pipe pipe = make_pipe().value();
    auto p = read_process(::getpid(), kFdLinks | kEnvMarker);
    ASSERT_TRUE(p.ok()) << p.error().message;
    EXPECT_TRUE(p->env_names.empty());
    EXPECT_EQ(p->net_ns, 0u);
    FdInfo* w = nullptr;
    for (auto& f : p->fds)
        if (f.fd == pipe.write.get()) w = &f;
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->kind, FdInfo::Kind::Pipe);
    EXPECT_EQ(w->flags, -1);  // links only: which end is not read yet
    const unsigned more = kEnvNames | kNetNs | kPipeModes;
    Process other = *p;
    other.id.starttime += 1;  // negative control: not this process
    EXPECT_FALSE(read_details(other, more));
    EXPECT_TRUE(other.env_names.empty());
    EXPECT_EQ(other.net_ns, 0u);
    ASSERT_TRUE(read_details(*p, more));
    EXPECT_FALSE(p->env_names.empty());
    EXPECT_NE(p->net_ns, 0u);
    for (auto& f : p->fds) {
        if (f.fd == pipe.write.get()) {
            EXPECT_EQ(f.flags, O_WRONLY);
        }
    }
    // An fd closed and reused since the scan: its mode is not taken for the old pipe's.
    Process stale = *p;
    for (auto& f : stale.fds)
        if (f.fd == pipe.write.get()) f.target = "pipe:[1]";
    ASSERT_TRUE(read_details(stale, kPipeModes));
    for (auto& f : stale.fds) {
        if (f.fd == pipe.write.get()) {
            EXPECT_EQ(f.flags, -1);
        }
    }
}

// kUid costs one fstat for the caller's own processes and gives what status says; rss and
// threads come from stat and agree with status.
TEST(Process, UidFromTheOwnerAgreesWithStatus) {
    auto cheap = read_process(::getpid(), kUid);
    auto full = read_process(::getpid(), kStatus);
    ASSERT_TRUE(cheap.ok() && full.ok());
    EXPECT_EQ(cheap->uid, ::getuid());
    EXPECT_EQ(cheap->uid, full->uid);
    EXPECT_EQ(cheap->threads, full->threads);
    EXPECT_GT(cheap->rss_kb, 0u);
    // Same process, a moment apart: the same order of magnitude.
    EXPECT_LT(cheap->rss_kb, full->rss_kb * 2 + 1024);
    EXPECT_GT(cheap->rss_kb * 2 + 1024, full->rss_kb);
    // PID 1 belongs to root (or, in a user namespace, is not ours): status decides.
    auto init_cheap = read_process(1, kUid);
    auto init_full = read_process(1, kStatus);
    if (init_cheap.ok() && init_full.ok()) {
        EXPECT_EQ(init_cheap->uid, init_full->uid);
    }
}

TEST(Process, BootIdLooksLikeAUuid) {
    EXPECT_EQ(boot_id().size(), 36u);
    EXPECT_EQ(boot_id(), boot_id());
}

}  // namespace
}  // namespace warden
