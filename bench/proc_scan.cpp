// bench_proc_scan: one full ProcessTable::scan(kBasic) against `ps`, same run.
//
//   bench_proc_scan [EXTRA_PROCESSES=1000] [REPETITIONS=9]
//
// Starts EXTRA_PROCESSES sleeping children (fork + pause, all in one new process group, each
// with PDEATHSIG so a crashed bench leaves none behind), then times, interleaved and
// REPETITIONS times each:
//   scan     ProcessTable::scan(kBasic) in this process (stat + status + cmdline per process)
//   ps       `ps -eo pid,ppid,pgid,stat,etime,args >/dev/null`, the whole process (spawn+wait)
//   cli      `mcpwarden ps --all --json >/dev/null`, the whole process (spawn+wait)
// and prints each median, and the ratios against ps. Goal (issue [1]): scan and cli no
// slower than ps. The children are SIGKILLed and reaped on every exit path: exactly those
// pids, which cannot be recycled while they are our unreaped children.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "proc/process_table.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

// The sleeping children; killed and reaped on destruction.
class Sleepers {
  public:
    Sleepers() = default;
    Sleepers(const Sleepers&) = delete;
    Sleepers& operator=(const Sleepers&) = delete;
    ~Sleepers() { stop(); }

    // Returns false (with a message on stderr) if a fork failed; those started are kept.
    bool start(int n) {
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
                for (;;)
                    ::pause();
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

// Spawns argv with stdout on /dev/null and waits; returns the wall time in ms, or -1.
double time_command(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    auto t0 = Clock::now();
    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int status = 0;
    ::waitpid(pid, &status, 0);
    auto t1 = Clock::now();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    if (v.empty()) return 0;
    size_t m = v.size() / 2;
    return v.size() % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
    int extra = argc > 1 ? std::atoi(argv[1]) : 1000;
    int reps = argc > 2 ? std::atoi(argv[2]) : 9;
    if (extra < 0 || reps < 1) {
        std::fprintf(stderr, "usage: bench_proc_scan [EXTRA_PROCESSES] [REPETITIONS]\n");
        return 2;
    }

    Sleepers sleepers;
    if (!sleepers.start(extra)) return 1;

    const std::vector<std::string> ps = {"ps", "-eo", "pid,ppid,pgid,stat,etime,args"};
    const std::vector<std::string> cli = {WARDEN_CLI, "ps", "--all", "--json"};
    std::vector<double> scan_ms, scan_all_ms, ps_ms, cli_ms;
    size_t seen = 0;
    // One warm-up round (page cache, dentries), then the measured ones, interleaved so
    // load from the rest of the machine hits all three alike.
    for (int r = -1; r < reps; ++r) {
        auto t0 = Clock::now();
        auto table = warden::ProcessTable::scan(warden::kBasic);
        auto t1 = Clock::now();
        auto table_all = warden::ProcessTable::scan(warden::kAll);
        auto t2 = Clock::now();
        double p = time_command(ps);
        double c = time_command(cli);
        if (p < 0 || c < 0) {
            std::fprintf(stderr, "bench_proc_scan: %s failed\n", p < 0 ? "ps" : WARDEN_CLI);
            return 1;
        }
        if (r < 0) continue;
        seen = table.all().size();
        scan_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        scan_all_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
        ps_ms.push_back(p);
        cli_ms.push_back(c);
    }
    sleepers.stop();

    double s = median(scan_ms), sa = median(scan_all_ms), p = median(ps_ms), c = median(cli_ms);
    std::printf(
        "proc_scan: %zu processes in the table (%d extra sleeping), %d repetitions, "
        "median wall time\n",
        seen, extra, reps);
    std::printf("  ProcessTable::scan(kBasic), in process      %8.2f ms   %5.2fx ps\n", s, s / p);
    std::printf("  mcpwarden ps --all --json, whole process    %8.2f ms   %5.2fx ps\n", c, c / p);
    std::printf("  ps -eo pid,ppid,pgid,stat,etime,args        %8.2f ms   1.00x (baseline)\n", p);
    std::printf(
        "  ProcessTable::scan(kAll) (fds, env names, netns; for [5]) %8.2f ms   %5.2fx ps\n", sa,
        sa / p);
    std::printf("goal: scan and cli no slower than ps -> %s\n",
                s <= p && c <= p ? "met" : "NOT met");
    return 0;
}
