// Real PID recycling: a process the teardown engine has planned exits, the kernel gives its
// PID to a newcomer before the engine's first signal, and the newcomer must not be signalled.
//
// identity_test.cpp injects the reuse by rewriting a target's record; here the kernel really
// hands the number out again. Everything runs in a lab: pid 1 of a fresh PID namespace with
// its own /proc, forked from a keeper (keeper_harness.hpp), so that no process outside the
// test can take the PID first and nothing outside is touched. When the lab ends, the kernel
// ends every process of its namespace: nothing can be left behind. In the lab:
//
//   1. fork the victim (it only waits) and give it to the engine as the root of a tree; the
//      subreaper flag stays off, so the newcomer (another child of the lab) is no member;
//   2. in the after_plan seam (targets planned, pidfds bound, no signal sent yet): SIGKILL
//      and reap the victim, then make the next fork get its PID, either by writing
//      /proc/sys/kernel/ns_last_pid or by forking until the namespace's PIDs wrap around to
//      it (bounded: kMaxForks, kMaxReuseTime; where pid_max is per namespace, Linux >= 6.14,
//      the lab first shrinks its own to kLabPidMax so that a lap is short), and fork the
//      newcomer;
//   3. let the engine run to the end; then send the newcomer a realtime marker. It catches
//      every catchable signal and writes each number to a pipe, one handler at a time;
//      standard signals are delivered before realtime ones, so whatever reached it before
//      the marker is in the pipe before the marker. SIGKILL and SIGSTOP cannot be caught: the
//      newcomer would be dead, or never answer the marker.
//
// The negative control does what a naive teardown does at that moment, kill(planned pid),
// and shows that it lands on the newcomer.
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <string>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "contain/keeper_harness.hpp"
#include "contain/teardown.hpp"
#include "sys/pipe.hpp"

namespace warden::testing {
namespace {

using Json = nlohmann::json;

constexpr long kMaxForks = 100000;
constexpr Millis kMaxReuseTime = 5s;
constexpr pid_t kReservedPids = 300;  // where a namespace's PIDs resume after wrapping
constexpr long kLabPidMax = 1024;     // the lab's own pid_max, when the kernel has one per ns

enum class Reuse { ns_last_pid, wraparound };

struct LabOptions {
    Reuse reuse = Reuse::ns_last_pid;
    bool use_pidfd = true;
    bool plain_kill = false;  // negative control: kill(planned pid, SIGTERM) after the reuse
    long host_pid_max = 0;    // /proc/sys/kernel/pid_max as the test process reads it
};

std::string errno_text(const std::string& what) {
    return what + ": " + std::strerror(errno);
}

// ---- The newcomer -----------------------------------------------------------------------

int g_report_fd = -1;

void report_signal(int sig) {
    unsigned char b = static_cast<unsigned char>(sig);
    ssize_t n = ::write(g_report_fd, &b, 1);
    (void)n;
}

// Catches every catchable signal (the realtime marker included) and reports its number;
// byte 0 says the handlers are in place.
[[noreturn]] void be_newcomer(int report_fd) {
    g_report_fd = report_fd;
    ::prctl(PR_SET_NAME, "pid-newcomer", 0UL, 0UL, 0UL);
    struct sigaction sa {};
    sa.sa_handler = report_signal;
    sigfillset(&sa.sa_mask);  // no nesting: a handler's byte is written before the next one's
    for (int s = 1; s <= SIGRTMIN; ++s)
        if (s != SIGKILL && s != SIGSTOP) ::sigaction(s, &sa, nullptr);
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    report_signal(0);
    for (;;)
        ::pause();
}

// Reads report bytes until `until` arrives (not included), or `timeout`; nullopt on timeout.
std::optional<std::vector<int>> read_reports(int fd, int until, Millis timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    std::vector<int> got;
    for (;;) {
        auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        unsigned char b = 0;
        if (::read(fd, &b, 1) != 1) return std::nullopt;
        if (b == until) return got;
        got.push_back(b);
    }
}

// ---- The lab (pid 1 of its own namespace) -----------------------------------------------

// /proc for this namespace: a private mount namespace, so the host's /proc is untouched.
std::string mount_own_proc() {
    if (::unshare(CLONE_NEWNS) != 0) return errno_text("unshare(CLONE_NEWNS)");
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0)
        return errno_text("mount(/, MS_PRIVATE)");
    if (::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0)
        return errno_text("mount(proc)");
    return {};
}

// A child that exits at once, reaped: it only moves the namespace's PID cursor on.
pid_t burn_one_pid() {
    pid_t p = ::vfork();
    if (p == 0) ::_exit(0);
    if (p > 0)
        while (::waitpid(p, nullptr, 0) < 0 && errno == EINTR) {
        }
    return p;
}

[[noreturn]] void wait_forever(const char* name) {
    ::prctl(PR_SET_NAME, name, 0UL, 0UL, 0UL);
    for (;;)
        ::pause();
}

std::optional<long> pid_max() {
    std::ifstream f("/proc/sys/kernel/pid_max");
    long v = 0;
    if (f >> v) return v;
    return std::nullopt;
}

// Shrinks this namespace's PID space so that a wrap-around takes few forks. Only when
// pid_max is the namespace's own (Linux >= 6.14: a new namespace reads its own value, not
// the host's); an older kernel has one global pid_max, which a test must not touch.
std::string shrink_pid_space(long host_pid_max) {
    auto mine = pid_max();
    if (!mine) return "cannot read /proc/sys/kernel/pid_max";
    if (*mine == host_pid_max) {
        if (*mine - kReservedPids <= kMaxForks) return {};  // small enough as it is
        return fmt::format("pid_max {} is global here and a wrap-around takes more than {} forks",
                           *mine, kMaxForks);
    }
    Fd f(::open("/proc/sys/kernel/pid_max", O_WRONLY | O_CLOEXEC));
    const std::string v = std::to_string(kLabPidMax);
    if (!f || ::write(f.get(), v.data(), v.size()) != static_cast<ssize_t>(v.size()))
        return errno_text("write /proc/sys/kernel/pid_max (the lab's own)");
    if (pid_max() != kLabPidMax) return "the lab's pid_max did not take " + v;
    return {};
}

// Makes the next fork of this namespace get `pid` (free by now). Counts the forks it used.
std::string steer_next_fork_to(pid_t pid, Reuse how, long& forks) {
    if (how == Reuse::ns_last_pid) {
        Fd f(::open("/proc/sys/kernel/ns_last_pid", O_WRONLY | O_CLOEXEC));
        const std::string v = std::to_string(pid - 1);
        if (!f || ::write(f.get(), v.data(), v.size()) != static_cast<ssize_t>(v.size()))
            return errno_text("write /proc/sys/kernel/ns_last_pid");
        return {};
    }
    const auto deadline = std::chrono::steady_clock::now() + kMaxReuseTime;
    for (;;) {
        pid_t p = burn_one_pid();
        ++forks;
        if (p < 0) return errno_text("vfork");
        if (p == pid - 1) return {};
        if (forks >= kMaxForks || std::chrono::steady_clock::now() > deadline)
            return fmt::format("PID {} did not come round in {} forks", pid, forks);
    }
}

// Steps 1-3 of the file comment. Returns what happened, as JSON for the test process.
Json lab(const LabOptions& o) {
    Json out;
    if (o.reuse == Reuse::wraparound)
        if (auto e = shrink_pid_space(o.host_pid_max); !e.empty()) return {{"skip", e}};
    out["pid_max"] = pid_max().value_or(-1);
    // After a wrap the PIDs resume at kReservedPids, so the victim must lie above it to be
    // reachable again.
    const pid_t floor = o.reuse == Reuse::wraparound ? kReservedPids + 10 : 2;
    for (int i = 0; i < 1000 && burn_one_pid() < floor; ++i) {
    }
    auto reports = make_pipe();
    if (!reports) return {{"error", reports.error().message}};

    pid_t victim = ::fork();
    if (victim == 0) wait_forever("pid-victim");
    if (victim < 0) return {{"error", errno_text("fork")}};
    auto victim_id = read_identity(victim);
    if (!victim_id) return {{"error", victim_id.error().message}};
    out["victim"] = {{"pid", victim}, {"starttime", victim_id->starttime}};

    pid_t newcomer = -1;
    TeardownScope scope;
    scope.roots = {*victim_id};
    scope.use_pidfd = o.use_pidfd;
    TeardownOptions t = quick_teardown();
    t.verify_ports = false;
    t.after_plan = [&](std::vector<Target>& targets) {
        out["planned"] = targets.size() == 1 && targets.front().id == *victim_id;
        ::kill(victim, SIGKILL);  // our own child, not reaped yet: the PID is still its own
        while (::waitpid(victim, nullptr, 0) < 0 && errno == EINTR) {
        }
        // A later clock tick, so the newcomer's starttime differs from the victim's.
        std::this_thread::sleep_for(Millis(2 * 1000 / ::sysconf(_SC_CLK_TCK) + 5));
        long forks = 0;
        const auto t0 = std::chrono::steady_clock::now();
        if (auto e = steer_next_fork_to(victim, o.reuse, forks); !e.empty()) {
            out["error"] = e;
            return;
        }
        newcomer = ::fork();
        if (newcomer == 0) {
            reports->read.reset();
            be_newcomer(reports->write.get());
        }
        out["forks"] = forks + 1;
        out["reuse_ms"] =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        if (newcomer < 0) {
            out["error"] = errno_text("fork");
            return;
        }
        auto ready = read_reports(reports->read.get(), 0, 5s);
        auto id = read_identity(newcomer);
        out["newcomer"] = {
            {"pid", newcomer}, {"starttime", id ? id->starttime : 0}, {"ready", ready.has_value()}};
        if (o.plain_kill) ::kill(victim_id->pid, SIGTERM);  // what a bare kill(pid) hits now
    };
    TeardownReport r = Teardown(std::move(scope), t).run();
    out["report"] = Json::parse(r.to_json_string(&unredacted_text));
    out["text"] = r.render_text();
    if (newcomer <= 0) return out;

    // The newcomer is our own unreaped child: signalling it by PID is safe.
    ::kill(newcomer, SIGRTMIN);
    auto before_marker = read_reports(reports->read.get(), SIGRTMIN, 5s);
    out["newcomer"]["answered_marker"] = before_marker.has_value();
    out["newcomer"]["signals"] = before_marker.value_or(std::vector<int>{});
    out["newcomer"]["alive"] = ::waitpid(newcomer, nullptr, WNOHANG) == 0;
    ::kill(newcomer, SIGKILL);
    ::waitpid(newcomer, nullptr, 0);
    return out;
}

// Runs `body` as PID 1 of a fresh PID namespace with its own /proc: a keeper unshares
// CLONE_NEWPID, and its next child is that namespace's first process. Returns what `body`
// returned, or {"skip"|"error": why}.
Json in_new_pid_namespace(const std::function<Json()>& body) {
    std::string err;
    auto j = run_in_keeper(
        [&]() -> Json {
            if (::unshare(CLONE_NEWPID) != 0)
                return {{"skip", errno_text("unshare(CLONE_NEWPID)")}};
            std::string inner_err;
            auto inner = run_in_keeper(
                [&]() -> Json {
                    if (auto e = mount_own_proc(); !e.empty()) return {{"skip", e}};
                    return body();
                },
                inner_err, 20s);
            if (!inner) return {{"error", "pid 1: " + inner_err}};
            return *inner;
        },
        err, 30s);
    if (!j) return {{"error", err}};
    return *j;
}

Json run_lab(LabOptions o) {
    o.host_pid_max = pid_max().value_or(0);
    Json j = in_new_pid_namespace([&] { return lab(o); });
    if (pid_max().value_or(0) != o.host_pid_max)
        j["error"] = "the host's pid_max changed: the lab must only change its own";
    return j;
}

const Json* victim_target(const Json& j) {
    for (const auto& t : j["report"]["targets"])
        if (t["pid"] == j["victim"]["pid"] && t["starttime"] == j["victim"]["starttime"]) return &t;
    return nullptr;
}

// ---- Tests ------------------------------------------------------------------------------

struct Case {
    Reuse reuse;
    bool use_pidfd;
};

class PidRecycling : public ::testing::TestWithParam<Case> {};

TEST_P(PidRecycling, TheNewcomerWithTheRecycledPidIsNeverSignalled) {
    const Case c = GetParam();
    Json j = run_lab({.reuse = c.reuse, .use_pidfd = c.use_pidfd});
    if (j.contains("skip")) GTEST_SKIP() << j["skip"].get<std::string>();
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_TRUE(j["planned"].get<bool>()) << "the engine did not plan the victim\n" << j["text"];
    // The premise: the kernel really gave the victim's PID to another process.
    const auto& n = j["newcomer"];
    ASSERT_EQ(n["pid"], j["victim"]["pid"]) << j.dump(2);
    ASSERT_NE(n["starttime"], j["victim"]["starttime"]) << j.dump(2);
    ASSERT_TRUE(n["ready"].get<bool>());
    std::cout << "PID " << n["pid"] << " reused after " << j["forks"] << " fork(s) in "
              << j["reuse_ms"].get<double>() << " ms (the lab's pid_max " << j["pid_max"] << ")\n";

    // What a user would notice: the newcomer got nothing and lives on.
    EXPECT_TRUE(n["answered_marker"].get<bool>()) << "the newcomer never answered: stopped?";
    EXPECT_EQ(n["signals"], Json::array()) << "signals reached the newcomer";
    EXPECT_TRUE(n["alive"].get<bool>()) << "the newcomer was killed";

    // The report: the victim was never signalled and nothing survived.
    const auto& r = j["report"];
    const Json* v = victim_target(j);
    ASSERT_NE(v, nullptr) << j["text"];
    EXPECT_EQ((*v)["signals"], Json::array()) << v->dump();
    EXPECT_EQ(r["counts"]["killed"], 0) << j["text"];
    EXPECT_TRUE(r["ok"].get<bool>()) << j["text"];
    if (!c.use_pidfd) {
        // Only /proc to go by: the starttime check sees the PID name another process, and
        // the report says so.
        EXPECT_EQ((*v)["how"], "identity changed") << j["text"];
        EXPECT_EQ(r["counts"]["identity_changed"], 1) << j["text"];
        const std::string notes = r["notes"].dump();
        EXPECT_NE(notes.find("identity changed"), std::string::npos) << notes;
    } else {
        // The pidfd answers first: the victim's own process ended, whoever holds the number
        // now, so the engine never looks at the number again. It ended before any signal
        // (no EOF window here): already gone, not "exited after SIGTERM".
        EXPECT_EQ((*v)["how"], "already gone") << j["text"];
        EXPECT_EQ(r["counts"]["already_gone"], 1) << j["text"];
        EXPECT_EQ(r["counts"]["exited_in_grace"], 0) << j["text"];
    }
}

INSTANTIATE_TEST_SUITE_P(
    Kernel, PidRecycling,
    ::testing::Values(Case{Reuse::ns_last_pid, true}, Case{Reuse::ns_last_pid, false},
                      Case{Reuse::wraparound, true}, Case{Reuse::wraparound, false}),
    [](const ::testing::TestParamInfo<Case>& i) {
        return std::string(i.param.reuse == Reuse::ns_last_pid ? "NsLastPid" : "WrapAround") +
               (i.param.use_pidfd ? "_Pidfd" : "_ProcOnly");
    });

// The negative control: at the same moment, kill(planned pid) reaches the newcomer. Without
// it, the test above could pass merely because the PID was never really reused.
TEST(PidRecyclingControl, APlainKillOfThePlannedPidHitsTheNewcomer) {
    Json j = run_lab({.reuse = Reuse::ns_last_pid, .plain_kill = true});
    if (j.contains("skip")) GTEST_SKIP() << j["skip"].get<std::string>();
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_EQ(j["newcomer"]["pid"], j["victim"]["pid"]) << j.dump(2);
    EXPECT_EQ(j["newcomer"]["signals"], Json::array({SIGTERM})) << j.dump(2);
}

// Found while building the lab: the engine takes PID 2 and every process whose parent is
// PID 2 for kernel threads (teardown_plan.cpp, plan_members: `p.ppid == 2 || p.id.pid == 2`).
// That holds only in the initial PID namespace. Inside a container `mcpwarden run` as the
// entrypoint is PID 1, its keeper PID 2, and the server (parent: the keeper) is skipped:
// the report says nothing survived while the server lives on. Here the lab is that
// container: its first child plays the keeper (PID 2) and tears down its own child.
// Fixed: the engine tells kernel threads by PF_KTHREAD (field 9 of /proc/PID/stat).
TEST(PidNamespace, AKeeperThatIsPid2EndsItsServer) {
    Json j = in_new_pid_namespace([] {
        std::string err;
        auto k = run_in_keeper(  // PID 1's first child: PID 2
            [] {
                pid_t server = ::fork();
                if (server == 0) wait_forever("pid2-server");
                auto id = read_identity(server);
                if (!id) return Json{{"error", id.error().message}};
                TeardownScope scope;
                scope.roots = {*id};
                TeardownOptions t = quick_teardown();
                t.verify_ports = false;
                TeardownReport r = Teardown(std::move(scope), t).run();
                Json out{{"keeper", ::getpid()},
                         {"report", Json::parse(r.to_json_string(&unredacted_text))},
                         {"text", r.render_text()},
                         {"server_alive", ::waitpid(server, nullptr, WNOHANG) == 0}};
                ::kill(server, SIGKILL);  // our own child, not reaped yet
                ::waitpid(server, nullptr, 0);
                return out;
            },
            err, 10s);
        return k ? *k : Json{{"error", "keeper: " + err}};
    });
    if (j.contains("skip")) GTEST_SKIP() << j["skip"].get<std::string>();
    ASSERT_FALSE(j.contains("error")) << j.dump(2);
    ASSERT_EQ(j["keeper"], 2) << "the keeper is not PID 2: the lab forked before it";
    const std::string text = j["text"];
    EXPECT_EQ(j["report"]["counts"]["targets"], 1) << text;
    EXPECT_FALSE(j["server_alive"].get<bool>()) << "the server survived a teardown that said\n"
                                                << text;
}

}  // namespace
}  // namespace warden::testing
