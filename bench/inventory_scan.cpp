// bench_inventory_scan: the whole `mcpwarden ps --json` against
// `ps -eo pid,ppid,pgid,stat,etime,args` on a machine with many processes holding files,
// as root and as an ordinary user, same run.
//
//   bench_inventory_scan [EXTRA_PROCESSES=1000] [REPETITIONS=5] [USER_UID=65534]
//
// Starts EXTRA_PROCESSES children (one new process group, PDEATHSIG) that each hold a pipe
// on their stdin/stdout, a unix socketpair and a TCP socket listening on 127.0.0.1; every
// tenth re-executes this program as `mcp-server-bench --hold` with those fds, so the scan
// finds that many MCP server trees (heuristic: pipes on stdin+stdout and an MCP name) and
// computes their capabilities from the socket tables, as it would on a real machine. Run as
// root, the children run as USER_UID, so both callers see all of them: root because it may
// read everything, the user because they are its own. Then it times, interleaved,
// REPETITIONS times each (after one warm-up round):
//   scan     inventory::Inventory::scan() in this process (journal not read)
//   cli      `mcpwarden ps --json --no-journal >/dev/null`, the whole process
//   ps       `ps -eo pid,ppid,pgid,stat,etime,args >/dev/null`, the whole process
//   cli, ps  the same two as USER_UID (when run as root)
// Goal: the whole `mcpwarden ps --json` <= 1.5x ps, as root and as an ordinary user.
#include <grp.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "children.hpp"
#include "inventory/inventory.hpp"

namespace {

constexpr int kServerEvery = 10;  // every tenth child looks like an MCP server
constexpr const char* kHoldFlag = "--hold";
pid_t g_bench = 0;     // this benchmark: the holders' parent
uid_t g_user = 65534;  // the ordinary user the holders and the user's commands run as

// Drops to the ordinary user (when root) for good. A change of credentials clears
// PDEATHSIG: set it again and check that the parent did not die in between.
void become_user() {
    if (::geteuid() != 0) return;
    if (::setgroups(0, nullptr) != 0 || ::setgid(g_user) != 0 || ::setuid(g_user) != 0)
        ::_exit(126);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != g_bench) ::_exit(0);
}

void hold_fds(int i) {
    become_user();
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
    if (i % kServerEvery == 0) {
        // The fds above are not close-on-exec: the server keeps them.
        char name[] = "mcp-server-bench";
        char flag[] = "--hold";
        char* args[] = {name, flag, nullptr};
        ::execv("/proc/self/exe", args);
    }
    warden::bench::pause_forever();
}

// Median wall times of one caller's rows, and its ratio.
struct Rows {
    std::vector<double> cli, ps;
    double ratio() const { return warden::bench::median(cli) / warden::bench::median(ps); }
};

void print_rows(const char* who, const Rows& r) {
    using warden::bench::median;
    using warden::bench::spread;
    double c = median(r.cli), p = median(r.ps);
    std::printf("  %-6s mcpwarden ps --json, whole process     %8.2f ms (%9s)  %5.2fx ps\n", who, c,
                spread(r.cli).c_str(), c / p);
    std::printf("  %-6s ps -eo pid,ppid,pgid,stat,etime,args   %8.2f ms (%9s)  1.00x (baseline)\n",
                who, p, spread(r.ps).c_str());
}

// Times argv as the ordinary user: forked, credentials dropped, exec'd; wall time from the
// fork to its reaping (ms), or -1 when it failed.
double time_as_user(const std::vector<std::string>& argv) {
    auto t0 = warden::bench::Clock::now();
    pid_t pid = ::fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        int null = ::open("/dev/null", O_WRONLY);
        if (null < 0 || ::dup2(null, 1) < 0 || ::dup2(null, 2) < 0) ::_exit(127);
        if (::setgroups(0, nullptr) != 0 || ::setgid(g_user) != 0 || ::setuid(g_user) != 0)
            ::_exit(126);
        std::vector<char*> args;
        for (const auto& a : argv)
            args.push_back(const_cast<char*>(a.c_str()));
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        ::_exit(127);
    }
    int status = 0;
    ::waitpid(pid, &status, 0);
    auto t1 = warden::bench::Clock::now();
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return -1;
    return warden::bench::ms_since(t0, t1);
}

}  // namespace

int main(int argc, char** argv) {
    using warden::bench::median;
    using warden::bench::spread;
    if (argc == 2 && std::strcmp(argv[1], kHoldFlag) == 0) warden::bench::pause_forever();
    int extra = argc > 1 ? std::atoi(argv[1]) : 1000;
    int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    long uid = argc > 3 ? std::atol(argv[3]) : 65534;
    if (extra < 0 || reps < 1 || uid <= 0) {
        std::fprintf(stderr,
                     "usage: bench_inventory_scan [EXTRA_PROCESSES] [REPETITIONS] [USER_UID]\n");
        return 2;
    }
    g_bench = ::getpid();
    g_user = static_cast<uid_t>(uid);
    const bool root = ::geteuid() == 0;
    std::string load_before = warden::bench::loadavg();
    warden::bench::Children holders;
    if (!holders.start(extra, hold_fds)) return 1;

    const std::vector<std::string> ps = {"ps", "-eo", "pid,ppid,pgid,stat,etime,args"};
    const std::vector<std::string> cli = {WARDEN_CLI, "ps", "--json", "--no-journal"};
    warden::inventory::ScanOptions so;
    so.use_journal = false;
    std::vector<double> scan_ms;
    Rows mine, user;
    size_t seen = 0, servers = 0;
    for (int r = -1; r < reps; ++r) {
        auto t0 = warden::bench::Clock::now();
        auto inv = warden::inventory::Inventory::scan(so);
        auto t1 = warden::bench::Clock::now();
        if (!inv) {
            std::fprintf(stderr, "bench_inventory_scan: %s\n", inv.error().message.c_str());
            return 1;
        }
        double c = warden::bench::time_command(cli, 0, true);
        double p = warden::bench::time_command(ps, 0, true);
        double uc = root ? time_as_user(cli) : 0;
        double up = root ? time_as_user(ps) : 0;
        if (c < 0 || p < 0 || uc < 0 || up < 0) {
            std::fprintf(stderr, "bench_inventory_scan: %s failed\n",
                         c < 0 || uc < 0 ? "mcpwarden ps" : "ps");
            return 1;
        }
        if (r < 0) continue;
        seen = inv->table().all().size();
        servers = inv->servers().size();
        scan_ms.push_back(warden::bench::ms_since(t0, t1));
        mine.cli.push_back(c);
        mine.ps.push_back(p);
        user.cli.push_back(uc);
        user.ps.push_back(up);
    }
    holders.stop();

    double s = median(scan_ms);
    std::printf(
        "inventory_scan: %zu processes in the table (%d extra, each with a pipe on stdin/stdout, "
        "a unix socketpair and a listening TCP socket; %zu MCP server trees), %d repetitions, "
        "median wall time (min-max)\n",
        seen, extra, servers, reps);
    const char* me = root ? "root" : "user";
    std::printf("  %-6s Inventory::scan(), in process          %8.2f ms (%9s)  %5.2fx ps\n", me, s,
                spread(scan_ms).c_str(), s / median(mine.ps));
    print_rows(me, mine);
    if (root) print_rows("user", user);
    std::printf("load average before: %s, after: %s\n", load_before.c_str(),
                warden::bench::loadavg().c_str());
    bool met = mine.ratio() <= 1.5 && (!root || user.ratio() <= 1.5);
    std::string who = root ? ", as root and as uid " + std::to_string(g_user) : "";
    std::printf("goal: mcpwarden ps --json <= 1.5x ps%s -> %s\n", who.c_str(),
                met ? "met" : "NOT met");
    return 0;
}
