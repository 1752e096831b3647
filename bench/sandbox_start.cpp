// bench_sandbox_start: where the start-up cost of `--sandbox strict` goes, part by part, so
// that what mcpwarden adds can be told from what the kernel charges for confinement itself.
// (bench_relay_latency --startup-only 1 measures the whole, end to end.)
//
//   plan        the relay's work, in a fresh process as in a run (this binary re-executed
//               with --one-plan): prepare_ahead(), before the keeper is forked and so on the
//               critical path; add_path_rules(), after it, beside the keeper's containment
//               set-up. CPU time (getrusage), median of --plans.
//   apply       what the server's process pays between fork and execve: no_new_privs,
//               landlock_restrict_self, installing the seccomp program (the kernel copies and
//               JIT-compiles it), and a one-instruction program for comparison. Median of
//               --applies forks, each step timed inside the child.
//   server      the fixture started from a fork, to its first initialize answer, without
//               and with the plan applied, interleaved start by start: the difference is
//               the apply plus what the server's own start costs under the ruleset (exec,
//               the dynamic loader's path walks, seccomp on every system call).
//
// The sum of the critical parts (prepare_ahead, the longer of add_path_rules and the
// keeper's set-up, the apply, the server under the ruleset) is the floor of what the sandbox
// can add to a start; the end-to-end figure above it is mcpwarden's.
//
// Usage: bench_sandbox_start [--plans N] [--applies N] [--starts N]
#include <fcntl.h>
#include <linux/filter.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sandbox/sandbox.hpp"
#include "sys/landlock.hpp"
#include "sys/seccomp.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double cpu_ms() {
    rusage r{};
    ::getrusage(RUSAGE_SELF, &r);
    return (r.ru_utime.tv_sec + r.ru_stime.tv_sec) * 1e3 +
           (r.ru_utime.tv_usec + r.ru_stime.tv_usec) / 1e3;
}

double median(std::vector<double> v) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

warden::RunOptions strict() {
    warden::RunOptions o;
    o.sandbox = warden::Sandbox::Strict;
    o.command = {WARDEN_FIXTURE};
    return o;
}

warden::sandbox::Launch launch(const char* session) {
    warden::sandbox::Launch l;
    l.argv = {WARDEN_FIXTURE};
    l.executable = WARDEN_FIXTURE;
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) l.cwd = cwd;
    if (const char* h = std::getenv("HOME")) l.home = h;
    if (const char* t = std::getenv("TMPDIR")) l.tmp_parent = t;
    l.session_id = session;
    return l;
}

// --one-plan: the two halves once, in this fresh process; prints "ahead_ms rules_ms".
int one_plan() {
    double c0 = cpu_ms();
    auto plan = warden::sandbox::prepare_ahead(strict(), launch("bench"));
    double c1 = cpu_ms();
    if (!plan) {
        std::fprintf(stderr, "prepare_ahead: %s\n", plan.error().message.c_str());
        return 1;
    }
    auto st = plan->add_path_rules();
    double c2 = cpu_ms();
    if (!st) {
        std::fprintf(stderr, "add_path_rules: %s\n", st.error().message.c_str());
        return 1;
    }
    warden::sandbox::remove_private_tmp(plan->private_tmp());
    std::printf("%f %f\n", c1 - c0, c2 - c1);
    return 0;
}

void plan_part(const std::string& self, int n) {
    std::vector<double> ahead, rules;
    for (int i = 0; i < n; ++i) {
        int p[2];
        if (::pipe2(p, O_CLOEXEC) != 0) return;
        pid_t pid = ::fork();
        if (pid == 0) {
            ::dup2(p[1], 1);
            ::execl(self.c_str(), self.c_str(), "--one-plan", static_cast<char*>(nullptr));
            ::_exit(127);
        }
        ::close(p[1]);
        char buf[128] = {};
        ssize_t got = ::read(p[0], buf, sizeof buf - 1);
        ::close(p[0]);
        ::waitpid(pid, nullptr, 0);
        double a = 0, r = 0;
        if (got > 0 && std::sscanf(buf, "%lf %lf", &a, &r) == 2) {
            ahead.push_back(a);
            rules.push_back(r);
        }
    }
    std::printf("plan, CPU in a fresh process (median of %zu):\n", ahead.size());
    std::printf("  prepare_ahead   (before the fork)        %7.3f ms\n", median(ahead));
    std::printf("  add_path_rules  (beside the keeper)      %7.3f ms\n", median(rules));
}

enum Step { kNothing, kNnp, kLandlock, kSeccomp, kSeccompTiny, kAll, kSteps };
const char* const kStepNames[kSteps] = {"fork only",
                                        "no_new_privs",
                                        "no_new_privs + landlock_restrict_self",
                                        "no_new_privs + seccomp (the plan's)",
                                        "no_new_privs + seccomp (1 instruction)",
                                        "apply_in_child (all three)"};

// In a forked child: the step(s), timed there; microseconds.
double apply_us(const warden::sandbox::Plan& plan, const sock_fprog& prog, Step step) {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) return 0;
    pid_t pid = ::fork();
    if (pid == 0) {
        auto t0 = Clock::now();
        int e = 0;
        if (step == kAll) {
            e = plan.apply_in_child();
        } else if (step != kNothing) {
            e = ::prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL);
            if (step == kLandlock && plan.ruleset_fd() >= 0)
                e = warden::landlock::restrict_self(plan.ruleset_fd(), plan.restrict_flags());
            if (step == kSeccomp) e = warden::install_seccomp(prog);
            if (step == kSeccompTiny) {
                sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, 0x7fff0000U)};
                sock_fprog tiny{1, allow};
                e = warden::install_seccomp(tiny);
            }
        }
        double us = e == 0 ? ms_since(t0) * 1e3 : -1;
        ::_exit(::write(p[1], &us, sizeof us) == sizeof us ? 0 : 1);
    }
    ::close(p[1]);
    double us = -1;
    if (::read(p[0], &us, sizeof us) != sizeof us) us = -1;
    ::close(p[0]);
    ::waitpid(pid, nullptr, 0);
    return us;
}

// The fixture from a fork, with or without the plan, to its first initialize answer (ms).
double server_ms(const warden::sandbox::Plan* plan) {
    static const char kInit[] =
        "{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{\"protocolVersion\":"
        "\"2025-06-18\",\"capabilities\":{},\"clientInfo\":{\"name\":\"bench\",\"version\":"
        "\"1\"}}}\n";
    int in[2], out[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0) return -1;
    auto t0 = Clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
        ::setpgid(0, 0);  // its port holder too, for the kill below
        ::dup2(in[0], 0);
        ::dup2(out[1], 1);
        int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 2);
        if (plan && plan->apply_in_child() != 0) ::_exit(126);
        char* argv[] = {const_cast<char*>(WARDEN_FIXTURE), nullptr};
        ::execve(WARDEN_FIXTURE, argv, environ);
        ::_exit(127);
    }
    ::setpgid(pid, pid);
    ::close(in[0]);
    ::close(out[1]);
    ssize_t w = ::write(in[1], kInit, sizeof kInit - 1);
    char buf[4096];
    ssize_t n = w > 0 ? ::read(out[0], buf, sizeof buf) : -1;
    double ms = n > 0 ? ms_since(t0) : -1;
    ::close(in[1]);
    ::close(out[0]);
    ::kill(-pid, SIGKILL);  // our child is not reaped yet: the group's number is still ours
    ::waitpid(pid, nullptr, 0);
    return ms;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 1 && std::strcmp(argv[1], "--one-plan") == 0) return one_plan();
    int plans = 21, applies = 201, starts = 41;
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--plans") plans = std::atoi(argv[i + 1]);
        if (a == "--applies") applies = std::atoi(argv[i + 1]);
        if (a == "--starts") starts = std::atoi(argv[i + 1]);
    }
    char self[4096];
    ssize_t len = ::readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = '\0';
    ::signal(SIGPIPE, SIG_IGN);

    plan_part(self, plans);

    auto plan = warden::sandbox::prepare(strict(), launch("bench"));
    if (!plan) {
        std::fprintf(stderr, "prepare: %s\n", plan.error().message.c_str());
        return 1;
    }
    std::printf("  (%zu path rules, Landlock ABI %d)\n", plan->paths().size(),
                plan->landlock_abi());
    const sock_fprog fprog = plan->seccomp().fprog();
    std::vector<double> us[kSteps];
    for (int i = 0; i < applies; ++i)
        for (int s = 0; s < kSteps; ++s)
            us[s].push_back(apply_us(*plan, fprog, static_cast<Step>(s)));
    std::printf(
        "\napply, in the forked child (median of %d; the seccomp program of %zu "
        "instructions):\n",
        applies, plan->seccomp().size());
    for (int s = 0; s < kSteps; ++s)
        std::printf("  %-40s %8.1f us\n", kStepNames[s], median(us[s]));

    std::vector<double> plain, confined;
    for (int i = 0; i < starts; ++i) {
        plain.push_back(server_ms(nullptr));
        confined.push_back(server_ms(&*plan));
    }
    double p = median(plain), c = median(confined);
    std::printf("\nserver, fork to the first initialize answer (median of %d, interleaved):\n",
                starts);
    std::printf("  unconfined                               %7.3f ms\n", p);
    std::printf("  under the plan (apply + exec + start)    %7.3f ms  added %+.3f ms\n", c, c - p);
    warden::sandbox::remove_private_tmp(plan->private_tmp());
    return 0;
}
