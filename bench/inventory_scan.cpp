// bench_inventory_scan: the whole `mcpwarden ps --json` against
// `ps -eo pid,ppid,pgid,stat,etime,args` on a machine with many processes holding files,
// same run.
//
//   bench_inventory_scan [EXTRA_PROCESSES=1000] [REPETITIONS=5]
//   setpriv --reuid=65534 --regid=65534 --clear-groups bench_inventory_scan …   (as a user)
//
// Starts EXTRA_PROCESSES children of the caller (one new process group, PDEATHSIG) that
// each hold a pipe on their stdin/stdout, a unix socketpair and a TCP socket listening on
// 127.0.0.1; every tenth re-executes this program as `mcp-server-bench --hold` with those
// fds, so the scan finds that many MCP server trees (heuristic: pipes on stdin+stdout and an
// MCP name) and computes their capabilities from the socket tables, as it would on a real
// machine. Then it times, interleaved, REPETITIONS times each (after one warm-up round):
//   scan   inventory::Inventory::scan() in this process (journal not read)
//   cli    `mcpwarden ps --json --no-journal >/dev/null`, the whole process
//   ps     `ps -eo pid,ppid,pgid,stat,etime,args >/dev/null`, the whole process
// Goal: the whole `mcpwarden ps --json` <= 1.5x ps; run it as root and as an ordinary user
// (the candidates are the caller's own processes, so the holders are the caller's too).
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdlib>
#include <cstring>

#include "children.hpp"
#include "clients/discover.hpp"
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
    const bool root = ::geteuid() == 0;
    std::string load_before = warden::bench::loadavg();
    warden::bench::Children holders;
    if (!holders.start(extra, hold_fds)) return 1;

    const std::vector<std::string> ps = {"ps", "-eo", "pid,ppid,pgid,stat,etime,args"};
    const std::vector<std::string> cli = {WARDEN_CLI, "ps", "--json", "--no-journal"};
    warden::inventory::ScanOptions so;
    so.use_journal = false;
    so.declared = warden::clients::declared_servers_here(std::nullopt);  // as `ps` reads them
    std::vector<double> scan_ms;
    Rows mine;
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
        if (c < 0 || p < 0) {
            std::fprintf(stderr, "bench_inventory_scan: %s failed\n",
                         c < 0 ? "mcpwarden ps" : "ps");
            return 1;
        }
        if (r < 0) continue;
        seen = inv->table().all().size();
        servers = inv->servers().size();
        scan_ms.push_back(warden::bench::ms_since(t0, t1));
        mine.cli.push_back(c);
        mine.ps.push_back(p);
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
    std::printf("load average before: %s, after: %s\n", load_before.c_str(),
                warden::bench::loadavg().c_str());
    bool met = mine.ratio() <= 1.5;
    std::string who = std::string(", as ") + me;
    std::printf("goal: mcpwarden ps --json <= 1.5x ps%s -> %s\n", who.c_str(),
                met ? "met" : "NOT met");
    return 0;
}
