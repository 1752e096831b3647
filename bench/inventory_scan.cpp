// bench_inventory_scan: a full inventory scan (fds, env names, netns, socket tables per
// namespace, pipe peers, unix socket peers, server trees) against `lsof -nP` and
// `ps -eo pid,ppid,pgid,stat,etime,args`, same run.
//
//   bench_inventory_scan [EXTRA_PROCESSES=1000] [REPETITIONS=5] [BASELINE_CLI]
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
//   reap   `mcpwarden reap --orphans --dry-run --json`, the whole process (its plan: the
//          scan plus the evidence and safety checks of every orphan)
// With BASELINE_CLI (another build's mcpwarden, e.g. the main branch's), `cli` and `reap` are
// timed for it too, interleaved in the same run, and the ratios new/baseline printed: the
// goal of issue [11] is that neither is slower than the baseline by more than 10 %.
// Goals (issue [5]): scan >= 10x faster than lsof, and <= 2x ps.
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

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
    const std::string baseline = argc > 3 ? argv[3] : "";
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
    const std::vector<std::string> reap = {WARDEN_CLI, "reap", "--orphans", "--dry-run", "--json"};
    std::vector<std::string> base_cli = cli, base_reap = reap;
    base_cli[0] = base_reap[0] = baseline;
    // The dry run journals a reap.pass: into a journal of its own, not the user's.
    char state_dir[] = "/tmp/bench-inventory-XXXXXX";
    if (!::mkdtemp(state_dir)) return 1;
    ::setenv("XDG_STATE_HOME", state_dir, 1);
    std::vector<double> reap_ms, base_cli_ms, base_reap_ms;
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
        double rp = warden::bench::time_command(reap, 0, true);
        double bc = baseline.empty() ? 0 : warden::bench::time_command(base_cli, 0, true);
        double br = baseline.empty() ? 0 : warden::bench::time_command(base_reap, 0, true);
        if (rp < 0 || bc < 0 || br < 0) {
            std::fprintf(stderr, "bench_inventory_scan: %s failed\n",
                         rp < 0 ? "mcpwarden reap --dry-run" : "the baseline mcpwarden");
            return 1;
        }
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
        reap_ms.push_back(rp);
        base_cli_ms.push_back(bc);
        base_reap_ms.push_back(br);
    }
    holders.stop();
    std::error_code ec;
    std::filesystem::remove_all(state_dir, ec);

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
    double rp = median(reap_ms);
    std::printf("  mcpwarden reap --orphans --dry-run     %8.2f ms (%9s)  %5.2fx ps\n", rp,
                spread(reap_ms).c_str(), rp / p);
    if (!baseline.empty()) {
        double bc = median(base_cli_ms), br = median(base_reap_ms);
        std::printf("  baseline %s:\n", baseline.c_str());
        std::printf("    ps --json, whole process             %8.2f ms (%9s)  new/baseline %5.3f\n",
                    bc, spread(base_cli_ms).c_str(), c / bc);
        std::printf("    reap --orphans --dry-run             %8.2f ms (%9s)  new/baseline %5.3f\n",
                    br, spread(base_reap_ms).c_str(), rp / br);
        std::printf("goal: no slower than the baseline by more than 10 %% -> %s\n",
                    c / bc <= 1.10 && rp / br <= 1.10 ? "met" : "NOT met");
    }
    std::printf("fd tables of the first scan from: %s\n", fds_from.c_str());
    std::printf("load average before: %s, after: %s\n", load_before.c_str(),
                warden::bench::loadavg().c_str());
    bool met = l / s >= 10 && s / p <= 2;
    std::printf("goal: scan >= 10x faster than lsof and <= 2x ps -> %s\n", met ? "met" : "NOT met");
    return 0;
}
