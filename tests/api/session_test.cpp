// run_options() and run_session() (mcpwarden/session.hpp) driven directly: the options a
// client config sets through flags and MCPWARDEN_* variables, the errors a user reads, and
// a session that ends with the server's status and leaves nothing of its tree.
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

#include "api/scoped_env.hpp"
#include "api/session_child.hpp"
#include "common/testing.hpp"
#include "mcpwarden/mcpwarden.hpp"

namespace warden::testing {
namespace {

TEST(ApiSession, OptionKeysAndTheirVariables) {
    const auto& keys = api::run_option_keys();
    ASSERT_EQ(keys.size(), 40u);
    EXPECT_EQ(keys.front(), "name");
    EXPECT_EQ(api::run_option_env("on-journal-failure"), "MCPWARDEN_ON_JOURNAL_FAILURE");
    EXPECT_EQ(api::run_option_env("journal-retention"), "MCPWARDEN_JOURNAL_RETENTION");
    EXPECT_TRUE(api::run_option_is_switch("no-journal"));
    EXPECT_FALSE(api::run_option_is_switch("journal"));
}

TEST(ApiSession, FlagsAndVariablesAreParsed) {
    ScopedEnv term("MCPWARDEN_TERM_GRACE", "1.5s");
    auto o = api::run_options({{"eof-grace", "250ms"}, {"isolate", "none"}, {"no-journal", "1"}},
                              {"srv", "--stdio"});
    ASSERT_TRUE(o) << o.error().message;
    EXPECT_EQ(o->eof_grace, std::chrono::milliseconds(250));
    EXPECT_EQ(o->term_grace, std::chrono::milliseconds(1500));  // from the variable
    EXPECT_EQ(o->isolate, api::Isolate::None);
    EXPECT_TRUE(o->no_journal);
    EXPECT_EQ(o->max_message, std::size_t{64} << 20);
    EXPECT_EQ(o->command, (std::vector<std::string>{"srv", "--stdio"}));
}

// --idle-stop is off unless asked for; 0 (after every answer) and "off" are values of it.
// --lazy is off unless asked for; its catalogs are good for 7 days unless told otherwise.
TEST(ApiSession, IdleStopIsOffByDefaultAndTakesZero) {
    auto plain = api::run_options({});
    ASSERT_TRUE(plain) << plain.error().message;
    EXPECT_FALSE(plain->idle_stop.has_value());
    ScopedEnv idle("MCPWARDEN_IDLE_STOP", "0");
    auto zero = api::run_options({});
    ASSERT_TRUE(zero) << zero.error().message;
    EXPECT_EQ(zero->idle_stop, std::chrono::milliseconds(0));
    auto off = api::run_options({{"idle-stop", "off"}});
    ASSERT_TRUE(off) << off.error().message;
    EXPECT_FALSE(off->idle_stop.has_value());
    EXPECT_FALSE(plain->lazy);
    EXPECT_EQ(plain->lazy_max_age, std::chrono::hours(24 * 7));
    ScopedEnv lazy("MCPWARDEN_LAZY", "1");
    ScopedEnv age("MCPWARDEN_LAZY_MAX_AGE", "36h");
    auto on = api::run_options({});
    ASSERT_TRUE(on) << on.error().message;
    EXPECT_TRUE(on->lazy);
    EXPECT_EQ(on->lazy_max_age, std::chrono::hours(36));
    auto brief = api::run_options({{"lazy-max-age", "90s"}});
    ASSERT_TRUE(brief) << brief.error().message;
    EXPECT_EQ(brief->lazy_max_age, std::chrono::seconds(90));
}

TEST(ApiSession, BadValueNamesTheOptionTheValueAndTheVariable) {
    auto flag = api::run_options({{"eof-grace", "3x"}});
    ASSERT_FALSE(flag);
    EXPECT_EQ(flag.error().message,
              "--eof-grace: cannot parse '3x' as a duration (e.g. 250ms, 2s, 1.5s)");

    ScopedEnv iso("MCPWARDEN_ISOLATE", "jail");
    auto env = api::run_options({});
    ASSERT_FALSE(env);
    EXPECT_EQ(env.error().message,
              "--isolate: cannot parse 'jail' as auto, none, cgroup or pidns (from "
              "MCPWARDEN_ISOLATE)");
    // Control: a flag wins over its variable, so the bad variable is never read.
    auto given = api::run_options({{"isolate", "auto"}});
    EXPECT_TRUE(given) << given.error().message;

    auto unknown = api::run_options({{"colour", "1"}});
    ASSERT_FALSE(unknown);
    EXPECT_EQ(unknown.error().message, "unknown option --colour");
}

TEST(ApiSession, ParseDuration) {
    auto d = api::parse_run_duration("1.5s");
    ASSERT_TRUE(d);
    EXPECT_EQ(*d, std::chrono::milliseconds(1500));
    EXPECT_FALSE(api::parse_run_duration("soon"));
}

TEST(ApiSession, NoCommandIsAnError) {
    auto rc = api::run_session(api::RunOptions{});
    ASSERT_FALSE(rc);
    EXPECT_EQ(rc.error().message, "no command given");
}

// The server exits with 3 on its own and leaves a background sleep behind: the session
// exits 3 and the sleep is gone.
const char* const kLeakyScript = "sleep 60 & exit 3";

TEST(ApiSession, ServerStatusIsTheExitCodeAndNothingOfItsTreeIsLeft) {
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    api::RunOptions o;
    o.no_journal = true;
    o.eof_grace = std::chrono::milliseconds(200);
    o.term_grace = std::chrono::milliseconds(300);
    o.command = {"/bin/sh", "-c", kLeakyScript};
    auto r = run_session_in_child(o, tag, "", dir.file("out"), std::chrono::seconds(20));
    ASSERT_TRUE(r.exit_code) << "run_session did not return";
    EXPECT_EQ(*r.exit_code, 3);
    EXPECT_TRUE(live_tagged(tag).empty()) << "the server's background sleep survived";
}

// Negative control: the same script started without run_session leaves its sleep running,
// and the oracle above sees it.
TEST(ApiSession, WithoutTheSessionTheSleepIsLeft) {
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
        ::setenv(kTagVar, tag.c_str(), 1);
        ::execl("/bin/sh", "sh", "-c", kLeakyScript, static_cast<char*>(nullptr));
        ::_exit(127);
    }
    int st = 0;
    ASSERT_EQ(::waitpid(pid, &st, 0), pid);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 3);
    // The shell may exit while its child is still inside execve(sleep), when its
    // /proc/PID/environ reads empty for a moment: wait (bounded) for the survivor to show.
    EXPECT_TRUE(wait_until([&] { return !live_tagged(tag).empty(); }, 5s))
        << "the background sleep did not survive its shell";
    EXPECT_TRUE(guard.kill_all());
}

TEST(ApiSession, FixtureAnswersThroughTheSessionThenItsSetsidHelperIsTornDown) {
    TempDir dir;
    const std::string tag = unique_tag();
    TreeGuard guard(0, tag);
    auto r = echo_session_in_child("setsid", "", dir, tag);
    ASSERT_TRUE(r.exit_code) << "run_session did not return";
    EXPECT_EQ(*r.exit_code, 0);  // the fixture exits 0 on EOF
    EXPECT_TRUE(live_tagged(tag).empty()) << "the setsid helper survived";
    auto port = read_port_file(dir.file("port"));
    ASSERT_TRUE(port);
    EXPECT_TRUE(port_bindable(*port));
    std::ifstream f(dir.file("out"));
    std::stringstream out;
    out << f.rdbuf();
    EXPECT_NE(out.str().find("\"hi\""), std::string::npos) << out.str();
}

// What a library host can see of its signals: for each signal run_session() uses, whether it
// is blocked and its disposition.
std::string host_signal_state() {
    sigset_t mask;
    ::pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    std::string state;
    for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, SIGXFSZ}) {
        struct sigaction sa {};
        ::sigaction(sig, nullptr, &sa);
        state += std::string(::sigabbrev_np(sig)) + (sigismember(&mask, sig) ? " blocked" : "") +
                 (sa.sa_handler == SIG_IGN   ? " ignored"
                  : sa.sa_handler == SIG_DFL ? ""
                                             : " handled") +
                 "\n";
    }
    return state;
}

// A host in a forked child: starts from an empty mask and default dispositions (whatever
// the test runner passed down), writes host_signal_state() before and after `body` into
// dir/before and dir/after, then sends itself SIGTERM. Returns its wait status.
int host_child(const TempDir& dir, const std::function<void()>& body) {
    pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int in = ::open("/dev/null", O_RDONLY);  // the client: EOF at once
        int out = ::open(dir.file("out").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (in < 0 || out < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0) ::_exit(120);
        sigset_t none;
        sigemptyset(&none);
        ::pthread_sigmask(SIG_SETMASK, &none, nullptr);
        for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGCHLD, SIGPIPE, SIGXFSZ})
            ::signal(sig, SIG_DFL);
        std::ofstream(dir.file("before")) << host_signal_state();
        body();
        std::ofstream(dir.file("after")) << host_signal_state();
        ::kill(::getpid(), SIGTERM);
        ::_exit(0);  // SIGTERM was blocked or ignored
    }
    int st = 0;
    // Bounded: the session ends at the client's EOF, within its grace windows.
    bool exited = wait_until([&] { return ::waitpid(pid, &st, WNOHANG) == pid; }, 20s);
    if (!exited) {
        ::kill(pid, SIGKILL);  // our own child, not reaped yet
        ::waitpid(pid, &st, 0);
    }
    return st;
}

std::string file_text(const std::string& path) {
    std::ifstream f(path);
    std::stringstream s;
    s << f.rdbuf();
    return s.str();
}

// run_session() blocks SIGTERM/SIGINT/SIGHUP/SIGCHLD (read through its signalfd) and ignores
// SIGPIPE and SIGXFSZ while it runs; a host gets its mask and dispositions back, so a SIGTERM
// after the session ends the host as it would have before.
TEST(ApiSession, TheHostGetsItsSignalMaskAndDispositionsBack) {
    TempDir dir;
    int st = host_child(dir, [] {
        api::RunOptions o;
        o.no_journal = true;
        o.eof_grace = std::chrono::milliseconds(200);
        o.term_grace = std::chrono::milliseconds(300);
        o.command = {"/bin/sh", "-c", "exit 0"};
        (void)api::run_session(o);
    });
    EXPECT_EQ(file_text(dir.file("before")), "TERM\nINT\nHUP\nCHLD\nPIPE\nXFSZ\n");
    EXPECT_EQ(file_text(dir.file("after")), file_text(dir.file("before")));
    EXPECT_TRUE(WIFSIGNALED(st) && WTERMSIG(st) == SIGTERM) << "wait status " << st;
}

// Negative control: a host that blocks SIGTERM itself shows it in the state and survives the
// SIGTERM, so the test above can fail.
TEST(ApiSession, AHostThatBlocksSigtermShowsItAndSurvives) {
    TempDir dir;
    int st = host_child(dir, [] {
        sigset_t set;
        sigemptyset(&set);
        sigaddset(&set, SIGTERM);
        ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
    });
    EXPECT_EQ(file_text(dir.file("after")), "TERM blocked\nINT\nHUP\nCHLD\nPIPE\nXFSZ\n");
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << "wait status " << st;
}

}  // namespace
}  // namespace warden::testing
