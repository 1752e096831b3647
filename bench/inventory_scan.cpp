// bench_inventory_scan: a full inventory scan (fds, env names, netns, socket tables per
// namespace, pipe peers, unix socket peers, server trees) against `lsof -nP` and
// `ps -eo pid,ppid,pgid,stat,etime,args`, same run.
//
//   bench_inventory_scan [EXTRA_PROCESSES=1000] [REPETITIONS=5]
//
// Starts EXTRA_PROCESSES children (one new process group, PDEATHSIG) that each hold a pipe
// on their stdin/stdout, a unix socketpair and a TCP socket listening on 127.0.0.1, then
// times, interleaved, REPETITIONS times each (after one warm-up round):
//   scan   inventory::Inventory::scan() in this process (journal not read)
//   cli    `mcpwarden ps --json >/dev/null`, the whole process
//   lsof   `lsof -nP >/dev/null`, the whole process
//   ps     `ps -eo pid,ppid,pgid,stat,etime,args >/dev/null`, the whole process
// Goals (issue [5]): scan >= 10x faster than lsof, and <= 2x ps. The children are SIGKILLed
// and reaped by exact pid on every exit path (they are our unreaped children: no reuse).
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "inventory/inventory.hpp"

extern char** environ;

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void hold_fds_forever() {
    int p[2];
    if (::pipe(p) == 0) {
        ::dup2(p[0], 0);
        ::dup2(p[1], 1);
    }
    int sp[2];
    (void)::socketpair(AF_UNIX, SOCK_STREAM, 0, sp);
    int s = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) ::listen(s, 1);
    for (;;)
        ::pause();
}

class Holders {
  public:
    Holders() = default;
    Holders(const Holders&) = delete;
    Holders& operator=(const Holders&) = delete;
    ~Holders() { stop(); }

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
                ::setpgid(0, pgid_);
                hold_fds_forever();
            }
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

  private:
    std::vector<pid_t> pids_;
    pid_t pgid_ = 0;
};

double time_command(const std::vector<std::string>& argv) {
    std::vector<char*> args;
    for (const auto& a : argv)
        args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, STDERR_FILENO, "/dev/null", O_WRONLY, 0);
    auto t0 = Clock::now();
    pid_t pid = 0;
    int rc = ::posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) return -1;
    int status = 0;
    ::waitpid(pid, &status, 0);
    auto t1 = Clock::now();
    // lsof exits 1 when some file could not be listed; that is not a failed run.
    if (!WIFEXITED(status) || WEXITSTATUS(status) > 1) return -1;
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
    int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    if (extra < 0 || reps < 1) {
        std::fprintf(stderr, "usage: bench_inventory_scan [EXTRA_PROCESSES] [REPETITIONS]\n");
        return 2;
    }
    Holders holders;
    if (!holders.start(extra)) return 1;

    const std::vector<std::string> ps = {"ps", "-eo", "pid,ppid,pgid,stat,etime,args"};
    const std::vector<std::string> lsof = {"lsof", "-nP"};
    const std::vector<std::string> cli = {WARDEN_CLI, "ps", "--json", "--no-journal"};
    warden::inventory::ScanOptions so;
    so.use_journal = false;
    std::vector<double> scan_ms, cli_ms, lsof_ms, ps_ms;
    size_t seen = 0;
    for (int r = -1; r < reps; ++r) {
        auto t0 = Clock::now();
        auto inv = warden::inventory::Inventory::scan(so);
        auto t1 = Clock::now();
        if (!inv) {
            std::fprintf(stderr, "bench_inventory_scan: %s\n", inv.error().message.c_str());
            return 1;
        }
        double c = time_command(cli);
        double l = time_command(lsof);
        double p = time_command(ps);
        if (c < 0 || l < 0 || p < 0) {
            std::fprintf(stderr, "bench_inventory_scan: %s failed\n",
                         c < 0   ? "mcpwarden ps"
                         : l < 0 ? "lsof"
                                 : "ps");
            return 1;
        }
        if (r < 0) continue;
        seen = inv->table().all().size();
        scan_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
        cli_ms.push_back(c);
        lsof_ms.push_back(l);
        ps_ms.push_back(p);
    }
    holders.stop();

    double s = median(scan_ms), c = median(cli_ms), l = median(lsof_ms), p = median(ps_ms);
    std::printf(
        "inventory_scan: %zu processes in the table (%d extra, each with a pipe on stdin/stdout, "
        "a unix socketpair and a listening TCP socket), %d repetitions, median wall time\n",
        seen, extra, reps);
    std::printf(
        "  Inventory::scan(), in process             %9.2f ms   %6.2fx ps   %6.1fx faster than "
        "lsof\n",
        s, s / p, l / s);
    std::printf(
        "  mcpwarden ps --json, whole process        %9.2f ms   %6.2fx ps   %6.1fx faster than "
        "lsof\n",
        c, c / p, l / c);
    std::printf("  lsof -nP                                  %9.2f ms   %6.2fx ps\n", l, l / p);
    std::printf("  ps -eo pid,ppid,pgid,stat,etime,args     %9.2f ms    1.00x (baseline)\n", p);
    bool met = l / s >= 10 && s / p <= 2;
    std::printf("goal: scan >= 10x faster than lsof and <= 2x ps -> %s\n", met ? "met" : "NOT met");
    return 0;
}
