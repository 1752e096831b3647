// What bench_proc_scan and bench_inventory_scan share: the extra processes they start, the
// timing of a whole command (spawn, run, wait) and the median.
//
// The children are forked into one new process group with PDEATHSIG, so a crashed
// benchmark leaves none behind, and are SIGKILLed and reaped by exact pid on every exit
// path (they are our unreaped children: their pids cannot be recycled meanwhile).
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "sys/fd.hpp"

extern char** environ;

namespace warden::bench {

using Clock = std::chrono::steady_clock;

// A child whose stdin and stdout are ours (pipes), in a process group of its own: whatever a
// server leaves behind (a port holder) is killed with that group by the benchmark. stderr
// goes to /dev/null unless `keep_stderr`.
struct PipedChild {
    pid_t pid = -1;
    int in = -1, out = -1;
};

inline PipedChild spawn_piped(const std::vector<std::string>& argv, bool keep_stderr = false) {
    int a[2], b[2];
    if (::pipe2(a, O_CLOEXEC) || ::pipe2(b, O_CLOEXEC)) std::abort();
    PipedChild p;
    p.pid = ::fork();
    if (p.pid == 0) {
        ::setpgid(0, 0);
        ::dup2(a[0], 0);
        ::dup2(b[1], 1);
        if (!keep_stderr) {
            int null = ::open("/dev/null", O_WRONLY);
            ::dup2(null, 2);
        }
        std::vector<char*> v;
        for (auto& s : argv)
            v.push_back(const_cast<char*>(s.c_str()));
        v.push_back(nullptr);
        ::execvp(v[0], v.data());
        ::_exit(127);
    }
    ::close(a[0]);
    ::close(b[1]);
    p.in = a[1];
    p.out = b[0];
    return p;
}

// The children; killed and reaped on destruction.
class Children {
  public:
    Children() = default;
    Children(const Children&) = delete;
    Children& operator=(const Children&) = delete;
    ~Children() { stop(); }

    // Forks n children; child i runs body(i), which must not return (it pauses or execs).
    // Returns false (with a message on stderr) if a fork failed; those started are kept.
    bool start(int n, const std::function<void(int)>& body) {
        const pid_t parent = ::getpid();
        for (int i = 0; i < n; ++i) {
            pid_t pid = ::fork();
            if (pid < 0) {
                std::perror("fork");
                return false;
            }
            if (pid == 0) {
                ::prctl(PR_SET_PDEATHSIG, SIGKILL);
                if (::getppid() != parent) ::_exit(0);
                ::setpgid(0, pgid_);  // 0 for the first: a new group of its own
                body(i);
                ::_exit(0);
            }
            // Set it from both sides so the group exists before the next fork joins it.
            ::setpgid(pid, pgid_);
            if (pgid_ == 0) pgid_ = pid;
            pids_.push_back(pid);
        }
        return true;
    }

    void stop() {
        for (pid_t pid : pids_)
            ::kill(pid, SIGKILL);
        for (pid_t pid : pids_)
            ::waitpid(pid, nullptr, 0);
        pids_.clear();
    }

    size_t size() const { return pids_.size(); }

  private:
    std::vector<pid_t> pids_;
    pid_t pgid_ = 0;
};

[[noreturn]] inline void pause_forever() {
    for (;;)
        ::pause();
}

// Spawns argv with stdout (and with quiet_stderr, stderr) on /dev/null and waits; returns
// the wall time in ms, or -1 when it could not start or exited above max_ok_exit (lsof
// exits 1 when some file could not be listed; that is not a failed run).
inline double time_command(const std::vector<std::string>& argv, int max_ok_exit = 0,
                           bool quiet_stderr = false) {
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    if (quiet_stderr)
        posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    auto t0 = Clock::now();
    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int status = 0;
    ::waitpid(pid, &status, 0);
    auto t1 = Clock::now();
    if (!WIFEXITED(status) || WEXITSTATUS(status) > max_ok_exit) return -1;
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

inline double ms_since(Clock::time_point t0, Clock::time_point t1) {
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

inline double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return 0;
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

// "median (min-max)" of a series, for the spread the benchmarks print.
inline std::string spread(const std::vector<double>& v) {
    if (v.empty()) return "-";
    auto [lo, hi] = std::minmax_element(v.begin(), v.end());
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.0f-%.0f", *lo, *hi);
    return buf;
}

// /proc/loadavg without its newline: the load the figures were taken under.
inline std::string loadavg() {
    auto r = read_file("/proc/loadavg");
    std::string s = r ? *r : std::string("?");
    while (!s.empty() && s.back() == '\n')
        s.pop_back();
    return s;
}

}  // namespace warden::bench
