// bench_inventory_scan: a full inventory scan (fds, env names, netns, socket tables per
// namespace, pipe peers, unix socket peers, server trees) against `lsof -nP` and
// `ps -eo pid,ppid,pgid,stat,etime,args`, same run.
//
//   bench_inventory_scan [EXTRA_PROCESSES=1000] [REPETITIONS=5]
//
// Starts EXTRA_PROCESSES children (one new process group, PDEATHSIG) that each hold a pipe
// on their stdin/stdout, a unix socketpair and a TCP socket listening on 127.0.0.1; every
// tenth re-executes this program as `mcp-server-bench --hold` with those fds, so the scan
// finds that many MCP server trees (heuristic: pipes on stdin+stdout and an MCP name) and
// computes their capabilities from the socket tables, as it would on a real machine. Then
// it times, interleaved, REPETITIONS times each (after one warm-up round):
//   scan   inventory::Inventory::scan() in this process (journal not read); as root its fd
//          tables come from one BPF iterator read (docs/INVENTORY.md)
//   procfs the same scan with MCPWARDEN_NO_BPF=1: fd tables listed through /proc, as for a
//          caller that is not root
//   cli    `mcpwarden ps --json --no-journal >/dev/null`, the whole process
//   lsof   `lsof -nP >/dev/null`, the whole process
//   ps     `ps -eo pid,ppid,pgid,stat,etime,args >/dev/null`, the whole process
// Goals (issue [5]): scan >= 10x faster than lsof, and <= 2x ps.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "children.hpp"
#include "inventory/inventory.hpp"

namespace {

constexpr int kServerEvery = 10;  // every tenth child looks like an MCP server
constexpr const char* kHoldFlag = "--hold";

void hold_fds(int i) {
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

}  // namespace

int main(int argc, char** argv) {
    using warden::bench::median;
    using warden::bench::spread;
    if (argc == 2 && std::strcmp(argv[1], kHoldFlag) == 0) warden::bench::pause_forever();
    int extra = argc > 1 ? std::atoi(argv[1]) : 1000;
    int reps = argc > 2 ? std::atoi(argv[2]) : 5;
    if (extra < 0 || reps < 1) {
        std::fprintf(stderr, "usage: bench_inventory_scan [EXTRA_PROCESSES] [REPETITIONS]\n");
        return 2;
    }
    std::string load_before = warden::bench::loadavg();
    warden::bench::Children holders;
    if (!holders.start(extra, hold_fds)) return 1;

    const std::vector<std::string> ps = {"ps", "-eo", "pid,ppid,pgid,stat,etime,args"};
    const std::vector<std::string> lsof = {"lsof", "-nP"};
    const std::vector<std::string> cli = {WARDEN_CLI, "ps", "--json", "--no-journal"};
    warden::inventory::ScanOptions so;
    so.use_journal = false;
    std::vector<double> scan_ms, procfs_ms, cli_ms, lsof_ms, ps_ms;
    size_t seen = 0, servers = 0;
    std::string fds_from;
    for (int r = -1; r < reps; ++r) {
        auto t0 = warden::bench::Clock::now();
        auto inv = warden::inventory::Inventory::scan(so);
        auto t1 = warden::bench::Clock::now();
        if (!inv) {
            std::fprintf(stderr, "bench_inventory_scan: %s\n", inv.error().message.c_str());
            return 1;
        }
        ::setenv("MCPWARDEN_NO_BPF", "1", 1);
        auto t2 = warden::bench::Clock::now();
        auto inv_procfs = warden::inventory::Inventory::scan(so);
        auto t3 = warden::bench::Clock::now();
        ::unsetenv("MCPWARDEN_NO_BPF");
        if (!inv_procfs) {
            std::fprintf(stderr, "bench_inventory_scan: %s\n", inv_procfs.error().message.c_str());
            return 1;
        }
        double c = warden::bench::time_command(cli, 0, true);
        double l = warden::bench::time_command(lsof, 1, true);
        double p = warden::bench::time_command(ps, 0, true);
        if (c < 0 || l < 0 || p < 0) {
            std::fprintf(stderr, "bench_inventory_scan: %s failed\n",
                         c < 0   ? "mcpwarden ps"
                         : l < 0 ? "lsof"
                                 : "ps");
            return 1;
        }
        if (r < 0) continue;
        seen = inv->table().all().size();
        servers = inv->servers().size();
        fds_from = inv->table().fds_from();
        scan_ms.push_back(warden::bench::ms_since(t0, t1));
        procfs_ms.push_back(warden::bench::ms_since(t2, t3));
        cli_ms.push_back(c);
        lsof_ms.push_back(l);
        ps_ms.push_back(p);
    }
    holders.stop();

    double s = median(scan_ms), f = median(procfs_ms), c = median(cli_ms), l = median(lsof_ms),
           p = median(ps_ms);
    std::printf(
        "inventory_scan: %zu processes in the table (%d extra, each with a pipe on stdin/stdout, "
        "a unix socketpair and a listening TCP socket; %zu MCP server trees), %d repetitions, "
        "median wall time (min-max)\n",
        seen, extra, servers, reps);
    std::printf(
        "  Inventory::scan(), in process          %8.2f ms (%9s)  %5.2fx ps  %5.1fx faster than "
        "lsof\n",
        s, spread(scan_ms).c_str(), s / p, l / s);
    std::printf(
        "  Inventory::scan(), fds through /proc   %8.2f ms (%9s)  %5.2fx ps  %5.1fx faster than "
        "lsof\n",
        f, spread(procfs_ms).c_str(), f / p, l / f);
    std::printf(
        "  mcpwarden ps --json, whole process     %8.2f ms (%9s)  %5.2fx ps  %5.1fx faster than "
        "lsof\n",
        c, spread(cli_ms).c_str(), c / p, l / c);
    std::printf("  lsof -nP                               %8.2f ms (%9s)  %5.2fx ps\n", l,
                spread(lsof_ms).c_str(), l / p);
    std::printf("  ps -eo pid,ppid,pgid,stat,etime,args   %8.2f ms (%9s)  1.00x (baseline)\n", p,
                spread(ps_ms).c_str());
    std::printf("fd tables of the first scan from: %s\n", fds_from.c_str());
    std::printf("load average before: %s, after: %s\n", load_before.c_str(),
                warden::bench::loadavg().c_str());
    bool met = l / s >= 10 && s / p <= 2;
    std::printf("goal: scan >= 10x faster than lsof and <= 2x ps -> %s\n", met ? "met" : "NOT met");
    return 0;
}
