// bench_proc_scan: one full ProcessTable::scan(kBasic) against `ps`, same run.
//
//   bench_proc_scan [EXTRA_PROCESSES=1000] [REPETITIONS=9]
//
// Starts EXTRA_PROCESSES sleeping children (fork + pause, all in one new process group, each
// with PDEATHSIG so a crashed bench leaves none behind), then times, interleaved and
// REPETITIONS times each:
//   scan     ProcessTable::scan(kBasic) in this process (stat + status + cmdline per process;
//            2 threads when the machine has 2 CPUs), and scan(kAll) with 2 threads and 1
//   ps       `ps -eo pid,ppid,pgid,stat,etime,args >/dev/null`, the whole process (spawn+wait)
//   cli      `mcpwarden ps --all --json >/dev/null`, the whole process (spawn+wait)
// and prints each median, and the ratios against ps. Goal: scan and cli no
// slower than ps. The children are SIGKILLed and reaped on every exit path: exactly those
// pids, which cannot be recycled while they are our unreaped children.
#include <cstdlib>

#include "children.hpp"
#include "proc/process_table.hpp"

int main(int argc, char** argv) {
    using warden::bench::median;
    using warden::bench::spread;
    int extra = argc > 1 ? std::atoi(argv[1]) : 1000;
    int reps = argc > 2 ? std::atoi(argv[2]) : 9;
    if (extra < 0 || reps < 1) {
        std::fprintf(stderr, "usage: bench_proc_scan [EXTRA_PROCESSES] [REPETITIONS]\n");
        return 2;
    }

    std::string load_before = warden::bench::loadavg();
    warden::bench::Children sleepers;
    if (!sleepers.start(extra, [](int) { warden::bench::pause_forever(); })) return 1;

    const std::vector<std::string> ps = {"ps", "-eo", "pid,ppid,pgid,stat,etime,args"};
    const std::vector<std::string> cli = {WARDEN_CLI, "ps", "--all", "--json"};
    std::vector<double> scan_ms, scan_all_ms, scan_all1_ms, ps_ms, cli_ms;
    size_t seen = 0;
    // One warm-up round (page cache, dentries), then the measured ones, interleaved so
    // load from the rest of the machine hits all three alike.
    for (int r = -1; r < reps; ++r) {
        auto t0 = warden::bench::Clock::now();
        auto table = warden::ProcessTable::scan(warden::kBasic);
        auto t1 = warden::bench::Clock::now();
        auto table_all = warden::ProcessTable::scan(warden::kAll);
        auto t2 = warden::bench::Clock::now();
        auto table_all1 = warden::ProcessTable::scan(warden::kAll, 1);
        auto t3 = warden::bench::Clock::now();
        double p = warden::bench::time_command(ps);
        double c = warden::bench::time_command(cli);
        if (p < 0 || c < 0) {
            std::fprintf(stderr, "bench_proc_scan: %s failed\n", p < 0 ? "ps" : WARDEN_CLI);
            return 1;
        }
        if (r < 0) continue;
        seen = table.all().size();
        scan_ms.push_back(warden::bench::ms_since(t0, t1));
        scan_all_ms.push_back(warden::bench::ms_since(t1, t2));
        scan_all1_ms.push_back(warden::bench::ms_since(t2, t3));
        ps_ms.push_back(p);
        cli_ms.push_back(c);
    }
    sleepers.stop();

    double s = median(scan_ms), sa = median(scan_all_ms), p = median(ps_ms), c = median(cli_ms);
    std::printf(
        "proc_scan: %zu processes in the table (%d extra sleeping), %d repetitions, "
        "median wall time (min-max)\n",
        seen, extra, reps);
    std::printf("  ProcessTable::scan(kBasic), in process     %8.2f ms (%9s)  %5.2fx ps\n", s,
                spread(scan_ms).c_str(), s / p);
    std::printf("  mcpwarden ps --all --json, whole process   %8.2f ms (%9s)  %5.2fx ps\n", c,
                spread(cli_ms).c_str(), c / p);
    std::printf("  ps -eo pid,ppid,pgid,stat,etime,args       %8.2f ms (%9s)  1.00x (baseline)\n",
                p, spread(ps_ms).c_str());
    std::printf(
        "  ProcessTable::scan(kAll) (fds, env names, netns; for [5])  %8.2f ms (%9s)  %5.2fx "
        "ps\n",
        sa, spread(scan_all_ms).c_str(), sa / p);
    double sa1 = median(scan_all1_ms);
    std::printf(
        "  ProcessTable::scan(kAll, 1 thread)                         %8.2f ms (%9s)  %5.2fx "
        "ps\n",
        sa1, spread(scan_all1_ms).c_str(), sa1 / p);
    std::printf("load average before: %s, after: %s\n", load_before.c_str(),
                warden::bench::loadavg().c_str());
    std::printf("goal: scan and cli no slower than ps -> %s\n",
                s <= p && c <= p ? "met" : "NOT met");
    return 0;
}
