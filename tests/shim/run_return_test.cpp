// When `mcpwarden run` returns, nothing of its session is alive (docs/RUN.md, "When run
// returns"): not the server's tree, not the keeper, not a helper of our own. A client that
// waits for its child waits for all of it; a supervisor that restarts the server when its
// child exits must not find the old one's keeper still at work.
//
// Each way a session ends is played here, and what is alive is looked at the instant the
// test's wait for `run` returns (a pidfd on `run`, polled: it is readable once `run` is gone,
// with no sleep in between): every process that carries the test's tag (inherited by all of
// the session, the keeper included), every process whose environment names the session
// (MCPWARDEN_SESSION), the keeper by the pid learned before the end, and the members of the
// session cgroup; the run's background worker (mcpwarden-sweep, src/api/dead_sessions.cpp),
// which serves the sessions before this one, is the run's too. The negative control is a
// relay that returns without waiting for its keeper (MCPWARDEN_FAULT=relay_leaves_keeper):
// the same look finds the keeper.
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/testing.hpp"

namespace warden::testing {
namespace {

enum class End { stdin_eof, client_exit, sigterm, sighup, hibernated_then_eof, lazy_eof };

struct Way {
    Way(std::string n, End e, bool j = true) : name(std::move(n)), end(e), journal(j) {}
    std::string name;
    End end;
    bool journal = true;
    std::string blkio_group{};  // a cgroup v1 blkio group `run` is started in (its slow disk)
};

std::vector<std::string> run_args(const Way& w, const TempDir& dir) {
    std::vector<std::string> a{kCli, "run", "--eof-grace", "200ms", "--term-grace", "300ms"};
    if (w.journal) {
        a.insert(a.end(), {"--journal", dir.file("journal.db")});
    } else {
        a.push_back("--no-journal");
    }
    if (w.end == End::hibernated_then_eof) a.insert(a.end(), {"--idle-stop", "200ms"});
    if (w.end == End::lazy_eof) a.push_back("--lazy");
    a.push_back("--");
    FixtureOptions fo;
    for (auto& x : fixture_argv(fo, dir.file("port")))
        a.push_back(x);
    return a;
}

std::string shell_word(const std::string& s) {
    std::string out = "'";
    for (char c : s)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::optional<pid_t> child_by_name(pid_t parent, std::string_view prefix) {
    for (pid_t c : children_of(parent))
        if (auto st = read_stat(c); st && st->comm.rfind(prefix, 0) == 0) return c;
    return std::nullopt;
}

// Live processes whose environment names `session`.
std::vector<pid_t> live_with_marker(const std::string& session) {
    std::vector<pid_t> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
        const std::string name = e.path().filename();
        if (name.find_first_not_of("0123456789") != std::string::npos) continue;
        const pid_t pid = std::stoi(name);
        if (env_value(pid, "MCPWARDEN_SESSION") == session && is_live(pid)) out.push_back(pid);
    }
    return out;
}

// What of the session is alive now, one line each (empty: nothing).
std::vector<std::string> alive_of_session(const std::string& tag, const std::string& session,
                                          pid_t keeper, const std::string& cgroup) {
    std::vector<std::string> out;
    auto describe = [](pid_t p) {
        auto st = read_stat(p);
        return std::to_string(p) + " " + (st ? st->comm : "?");
    };
    // The keeper first, by its pid: of the session's processes, the one whose end would follow
    // `run`'s most closely (a scan of /proc takes milliseconds).
    if (keeper > 0 && is_live(keeper)) out.push_back("keeper: " + describe(keeper));
    for (pid_t p : live_tagged(tag))
        out.push_back("tagged: " + describe(p));
    if (!session.empty())
        for (pid_t p : live_with_marker(session))
            out.push_back("marked: " + describe(p));
    if (!cgroup.empty()) {
        std::ifstream procs("/sys/fs/cgroup" + cgroup + "/cgroup.procs");
        for (pid_t p; procs >> p;)
            out.push_back("in the session cgroup: " + describe(p));
    }
    return out;
}

// Blocks until `pid` (a child of ours) is gone, 30 s at most: a pidfd polled, no sleep.
bool wait_gone(pid_t pid) {
    int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
    if (fd < 0) return false;
    pollfd p{fd, POLLIN, 0};
    const bool gone = ::poll(&p, 1, 30000) == 1;
    ::close(fd);
    return gone;
}

// Whether `pid` outlived its parent `run`: a process alive when its parent exits is reparented
// to the nearest subreaper, which the test is; one that `run` reaped never becomes ours. Unlike
// a look at /proc at the instant of the return, this does not race the process's own end.
bool became_ours(pid_t pid) {
    siginfo_t info{};
    return pid > 0 &&
           ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOHANG | WNOWAIT) == 0;
}

struct Outcome {
    bool started = false, returned = false;
    bool keeper_outlived_run = false;  // it became ours (became_ours), alive or not since
    std::vector<std::string> alive;    // at the instant `run` returned
    std::string tag;
    Millis took{0};  // from the client's leaving to `run`'s return
};

// Plays `w` with its journal in `dir` and looks at the session the instant `run` returns.
// `fault`: MCPWARDEN_FAULT.
Outcome play(const Way& w, const TempDir& dir, const std::string& fault = {}) {
    Outcome o;
    ChildOptions co;
    co.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"};
    if (!fault.empty()) co.env.push_back({"MCPWARDEN_FAULT", fault});
    std::unique_ptr<TestChild> client;
    pid_t run = 0;
    if (w.end == End::client_exit) {
        // The client is a shell that starts `run` with the test's pipes and is SIGKILLed: only
        // the pidfd on its parent tells `run`. We are the subreaper `run` is reparented to.
        std::string cmd;
        for (auto& a : run_args(w, dir))
            cmd += shell_word(a) + " ";
        client = std::make_unique<TestChild>(
            std::vector<std::string>{"/bin/sh", "-c", "exec 3<&0; " + cmd + "<&3 3<&- & wait"}, co);
    } else if (!w.blkio_group.empty()) {
        std::vector<std::string> argv{"/bin/sh", "-c",
                                      "echo 0 > \"$0/cgroup.procs\" && exec \"$@\"", w.blkio_group};
        for (auto& a : run_args(w, dir))
            argv.push_back(a);
        client = std::make_unique<TestChild>(argv, co);
    } else {
        client = std::make_unique<TestChild>(run_args(w, dir), co);
    }
    if (!client->started()) return o;
    o.tag = client->tag();
    if (w.end == End::client_exit) {
        if (!wait_until([&] { return child_by_name(client->pid(), "mcpwarden").has_value(); }, 10s))
            return o;
        run = *child_by_name(client->pid(), "mcpwarden");
    } else {
        run = client->pid();
    }
    pid_t keeper = 0, server = 0;
    if (!wait_until(
            [&] {
                auto k = child_by_name(run, "mcpwarden-keep");
                keeper = k.value_or(0);
                return k.has_value();
            },
            10s))
        return o;
    std::string session, cgroup;
    if (w.end != End::lazy_eof) {
        if (!wait_for_file(dir.file("port"), 10s)) return o;
        server = child_by_name(keeper, "").value_or(0);
        session = env_value(server, "MCPWARDEN_SESSION").value_or("");
        cgroup = cgroup_of(server);
        if (!client->write_line(rpc_initialize(1)) || !read_response(*client, 1, 10s)) return o;
    }
    o.started = true;
    const auto left = std::chrono::steady_clock::now();
    switch (w.end) {
        case End::stdin_eof:
        case End::lazy_eof:
            client->close_stdin();
            break;
        case End::hibernated_then_eof:
            // Asleep: the server's tree torn down by --idle-stop, the keeper waiting.
            if (!wait_until([&] { return !is_live(server); }, 10s)) return o;
            client->close_stdin();
            break;
        case End::sigterm:
            client->signal(SIGTERM);
            break;
        case End::sighup:
            client->signal(SIGHUP);
            break;
        case End::client_exit:
            client->signal(SIGKILL);
            client->wait_exit(5s);
            break;
    }
    o.returned = wait_gone(run);
    o.keeper_outlived_run = o.returned && became_ours(keeper);
    if (o.returned) o.alive = alive_of_session(o.tag, session, keeper, cgroup);
    o.took = std::chrono::duration_cast<Millis>(std::chrono::steady_clock::now() - left);
    if (w.end == End::client_exit) {
        int st = 0;
        (void)::waitpid(run, &st, 0);
    } else {
        client->wait_exit(5s);
    }
    // Whatever a failed case left: ended by identity (the tag), the cgroup removed.
    (void)nothing_tagged_left(o.tag);
    client->tree().kill_all();
    if (o.keeper_outlived_run && wait_gone(keeper)) (void)::waitpid(keeper, nullptr, WNOHANG);
    if (!cgroup.empty()) remove_session_cgroup(cgroup);
    return o;
}

std::string listed(const std::vector<std::string>& v) {
    std::string s;
    for (auto& x : v)
        s += "\n  " + x;
    return s;
}

class RunReturns : public ::testing::TestWithParam<Way> {
  protected:
    // `run` is reparented to us when its client dies (End::client_exit).
    void SetUp() override { ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }
    void TearDown() override { ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0); }
};

TEST_P(RunReturns, WithNothingOfItsSessionAlive) {
    const Way& w = GetParam();
    TempDir dir;
    Outcome o = play(w, dir);
    ASSERT_TRUE(o.started) << w.name << ": the session did not start";
    ASSERT_TRUE(o.returned) << w.name << ": run did not return within 30 s";
    EXPECT_TRUE(o.alive.empty()) << w.name << ": alive when run returned:" << listed(o.alive);
    EXPECT_FALSE(o.keeper_outlived_run) << w.name << ": the keeper outlived run";
}

INSTANTIATE_TEST_SUITE_P(Ends, RunReturns,
                         ::testing::Values(Way{"stdin_eof", End::stdin_eof},
                                           Way{"client_exit", End::client_exit},
                                           Way{"sigterm", End::sigterm}, Way{"sighup", End::sighup},
                                           Way{"hibernated_then_eof", End::hibernated_then_eof},
                                           Way{"lazy_never_started", End::lazy_eof},
                                           Way{"no_journal", End::stdin_eof, false}),
                         [](const ::testing::TestParamInfo<Way>& p) { return p.param.name; });

// The guard off: a relay that returns without telling its keeper the session ended, or waiting
// for it, leaves the keeper to find the lifeline's end and look for a session.end in the
// journal after `run` is gone: the keeper outlives `run` (it becomes the test's), though only
// by the milliseconds of that look, which a look at /proc at the return may miss under load.
TEST(RunReturnsNegativeControl, ARelayThatLeavesItsKeeperIsFoundWithTheKeeperAlive) {
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    TempDir dir;
    Outcome o = play(Way{"stdin_eof", End::stdin_eof}, dir, "relay_leaves_keeper");
    ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    ASSERT_TRUE(o.started && o.returned);
    EXPECT_TRUE(o.keeper_outlived_run) << "the guard is off, yet the keeper ended with run";
}

// ---- a slow disk -----------------------------------------------------------------------------

// A cgroup v1 blkio group whose writes to the block device under `dir` are throttled to
// `iops` a second (blkio.throttle.write_iops_device): every write a process of the group
// submits to that device itself waits its turn in the block layer — an fsync's data above
// all —, while the kernel's own writeback and the filesystem's journal thread are not
// throttled. That is the disk a slow or overloaded device gives one process; device-mapper's
// delay target would slow everyone's, but it is not in every kernel (not in this VM's).
// Invalid when the blkio hierarchy or the device cannot be had (the test then skips).
class SlowDisk {
  public:
    SlowDisk(const std::string& dir, int iops) {
        struct stat st {};
        if (::stat(dir.c_str(), &st) != 0) return;
        const std::string dev = fmt::format("{}:{}", major(st.st_dev), minor(st.st_dev));
        // A partition is throttled through its disk.
        std::string disk = dev;
        if (std::ifstream part("/sys/dev/block/" + dev + "/partition"); part.good()) {
            std::error_code ec;
            auto parent = std::filesystem::canonical("/sys/dev/block/" + dev + "/..", ec);
            if (std::ifstream d(parent.string() + "/dev"); !ec && d >> disk) {
            }
        }
        const std::string g = "/sys/fs/cgroup/blkio/wtest-slowdisk-" + unique_tag();
        if (::mkdir(g.c_str(), 0755) != 0) return;
        path_ = g;
        std::ofstream(g + "/blkio.throttle.write_iops_device") << disk << " " << iops << "\n";
        std::ifstream back(g + "/blkio.throttle.write_iops_device");
        std::string line;
        throttled_ = std::getline(back, line) && line.find(disk) != std::string::npos;
    }
    ~SlowDisk() {
        if (!path_.empty()) ::rmdir(path_.c_str());
    }
    bool valid() const { return throttled_; }
    const std::string& path() const { return path_; }
    // Writes the group submitted to the device (blkio.throttle.io_serviced's Write lines).
    int64_t writes() const {
        std::ifstream f(path_ + "/blkio.throttle.io_serviced");
        int64_t total = 0;
        for (std::string devn, op; f >> devn;) {
            int64_t n = 0;
            if (devn == "Total") {
                f >> n;
                continue;
            }
            if (f >> op >> n && op == "Write") total += n;
        }
        return total;
    }

  private:
    std::string path_;
    bool throttled_ = false;
};

// The journal on a slow disk (2 writes a second for `run`'s own): `run` still returns with
// nothing of its session alive, and leaves the journal consistent for the next writer: it
// verifies, and the next writer writes the checkpoint file the session's end left to it. How
// long `run` took from the client's leaving is recorded (RecordProperty), not judged here:
// docs/BENCHMARKS.md has the figures.
TEST(RunReturnsSlowDisk, NothingAliveAndTheJournalConsistentForTheNextWriter) {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root for a blkio group";
    TempDir dir;
    SlowDisk disk(dir.path(), 2);
    if (!disk.valid()) GTEST_SKIP() << "no cgroup v1 blkio hierarchy with write throttling here";
    ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
    // The journal made first, off the slow disk (its keys, its schema: many fsyncs).
    Outcome first = play(Way{"made", End::stdin_eof}, dir);
    Way w{"slow_disk", End::stdin_eof};
    w.blkio_group = disk.path();
    Outcome o = play(w, dir);
    ::prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0);
    ASSERT_TRUE(first.started && first.returned);
    ASSERT_TRUE(o.started && o.returned);
    RecordProperty("run_returned_ms", static_cast<int>(o.took.count()));
    EXPECT_GT(disk.writes(), 0) << "none of run's writes went through the throttle";
    EXPECT_TRUE(o.alive.empty()) << "alive when run returned:" << listed(o.alive);

    const std::string db = dir.file("journal.db");
    auto verify = run_cli(dir, {"audit", "verify", "--journal", db}, 60s);
    EXPECT_EQ(verify.code, 0) << verify.out << verify.err;
    auto next = run_cli(dir, {"journal", "reconcile", "--journal", db}, 60s);
    EXPECT_EQ(next.code, 0) << next.err;
    auto sessions = run_cli(dir, {"journal", "sessions", "--json", "--journal", db}, 60s);
    auto j = nlohmann::json::parse(sessions.out, nullptr, false);
    ASSERT_TRUE(j.is_array() && j.size() == 2) << sessions.out;
    for (const auto& row : j)
        EXPECT_EQ(row.value("state", ""), "ended") << row.dump();
    size_t files = 0;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir.file("checkpoints"), ec)) {
        (void)e;
        ++files;
    }
    EXPECT_GT(files, 0u) << "the next writer wrote no checkpoint file";
}

}  // namespace
}  // namespace warden::testing
