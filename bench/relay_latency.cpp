// bench_relay_latency: what `mcpwarden run` adds between a client and its server.
//
// Four ways to reach the same server, measured in one run:
//   direct  the client spawns the server itself (the baseline)
//   shim    mcpwarden run --no-journal -- server
//   socat   socat STDIO EXEC:server (a plain byte relay, the yardstick)
//   floor   this binary as a bare epoll relay (as_relay): the least any relay process costs
//   journal mcpwarden run --journal /var/tmp/…/journal.db -- server (the default: every call
//           recorded before it is forwarded, fsync at most once a second; its cost over
//           `shim` is what the journal adds to a call)
//   jsync   the same with --journal-sync always (an fsync per request: OS-crash durability)
// and four numbers for each: round-trip latency of a 1 KiB tools/call echo (p50, p99);
// throughput of 1 MiB lines through `cat`; start-up to the first initialize answer; for the
// shim, the RSS and PSS of relay + keeper. Ratios are printed against direct and against socat.
// Then the sandbox's start-up cost: `run --no-journal --sandbox strict|workspace` against
// `--sandbox off`, interleaved start by start so that load drifts hit all alike (goal: <= 2 ms
// added).
// --startup-only measures only that.
//
// The journal path also runs --sequential requests (default 50,000) back to back and reports
// them per second.
//
// --journal-rounds R measures only what the journal adds: R rounds, each a --no-journal
// session then a journaled one (N / R calls each), so that load drifts hit both alike; with
// --writer P1,P2… also sessions whose journal writer thread runs under policy P
// (MCPWARDEN_JOURNAL_WRITER: batch, idle, nice:N, cpu:N); with --base-cli PATH also journaled
// sessions of another mcpwarden binary (the A of an A/B: main's build), each in a journal of
// its own. It prints the CPU per call of the relay's thread and of the journal's writer
// thread (schedstat: time on a CPU, so it holds under load, unlike the latencies).
//
// Usage: bench_relay_latency [--iterations N] [--mib M] [--starts K] [--sequential S]
//                            [--startup-only 1]
//                            [--journal-rounds R [--writer P,…] [--base-cli PATH]]
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "children.hpp"

namespace {

using Clock = std::chrono::steady_clock;

using Proc = warden::bench::PipedChild;

Proc spawn(const std::vector<std::string>& argv) {
    return warden::bench::spawn_piped(argv);
}

void finish(Proc& p) {
    if (p.in >= 0) ::close(p.in);
    p.in = -1;
    // The server exits on EOF; bounded wait. Then SIGKILL to the process group we made for
    // it (the rest of its tree: the fixture's port holder), while our child is not reaped
    // yet, so the group's number cannot have been reused; then reap it.
    for (int i = 0; i < 500; ++i) {
        siginfo_t si{};
        if (::waitid(P_PID, static_cast<id_t>(p.pid), &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
            si.si_pid == p.pid)
            break;
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ::kill(-p.pid, SIGKILL);
    ::waitpid(p.pid, nullptr, 0);
    ::close(p.out);
}

void write_all(int fd, const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
        ssize_t n = ::write(fd, s.data() + off, s.size() - off);
        if (n <= 0) {
            if (n < 0 && errno == EINTR) continue;
            std::fprintf(stderr, "write failed\n");
            std::exit(1);
        }
        off += static_cast<size_t>(n);
    }
}

// Reads one line (buffered across calls).
struct Reader {
    explicit Reader(int f) : fd(f) {}
    int fd;
    std::string buf{};
    size_t start = 0;
    bool line(std::string& out) {
        for (;;) {
            auto nl = buf.find('\n', start);
            if (nl != std::string::npos) {
                out.assign(buf, start, nl - start);
                start = nl + 1;
                if (start > (1u << 20)) {
                    buf.erase(0, start);
                    start = 0;
                }
                return true;
            }
            char tmp[65536];
            ssize_t n = ::read(fd, tmp, sizeof tmp);
            if (n <= 0) return false;
            buf.append(tmp, static_cast<size_t>(n));
        }
    }
};

std::string g_self;          // this binary, for the `floor` relay (argv[0] resolved)
std::string g_journal;       // the journal of the `journal` and `jsync` paths (fresh, on disk)
std::string g_base_cli;      // --base-cli: the `base` path's mcpwarden
std::string g_base_journal;  // and its journal

std::vector<std::string> with_wrapper(const std::string& mode, std::vector<std::string> server) {
    if (mode == "direct") return server;
    if (mode == "floor") {
        std::vector<std::string> a{g_self, "--as-relay"};
        a.insert(a.end(), server.begin(), server.end());
        return a;
    }
    // journal:POLICY: the journal with its writer thread under POLICY (journal.cpp,
    // apply_writer_scheduling), set in the environment the session inherits.
    if (mode.rfind("journal:", 0) == 0) {
        ::setenv("MCPWARDEN_JOURNAL_WRITER", mode.c_str() + 8, 1);
        std::vector<std::string> a{WARDEN_CLI, "run", "--journal", g_journal, "--"};
        a.insert(a.end(), server.begin(), server.end());
        return a;
    }
    ::unsetenv("MCPWARDEN_JOURNAL_WRITER");
    if (mode == "base") {
        std::vector<std::string> a{g_base_cli, "run", "--journal", g_base_journal, "--"};
        a.insert(a.end(), server.begin(), server.end());
        return a;
    }
    if (mode == "shim" || mode == "journal" || mode == "jsync" || mode == "strict" ||
        mode == "workspace") {
        std::vector<std::string> a{WARDEN_CLI, "run"};
        if (mode == "journal")
            a.insert(a.end(), {"--journal", g_journal});
        else if (mode != "jsync")
            a.push_back("--no-journal");
        if (mode == "jsync")
            a.insert(a.end(), {"--journal-sync", "always", "--journal", g_journal});
        if (mode == "strict" || mode == "workspace") a.insert(a.end(), {"--sandbox", mode});
        a.push_back("--");
        a.insert(a.end(), server.begin(), server.end());
        return a;
    }
    std::string cmd;
    for (auto& s : server)
        cmd += (cmd.empty() ? "" : " ") + s;
    return {"socat", "STDIO", "EXEC:" + cmd};
}

const char* kInit =
    R"({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})"
    "\n";

double pct(std::vector<double> v, double p) {
    std::sort(v.begin(), v.end());
    size_t i = std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())));
    return v[i];
}

pid_t keeper_of(pid_t relay) {
    std::ifstream f("/proc/" + std::to_string(relay) + "/task/" + std::to_string(relay) +
                    "/children");
    pid_t c = 0;
    while (f >> c) {
        std::ifstream comm("/proc/" + std::to_string(c) + "/comm");
        std::string n;
        std::getline(comm, n);
        if (n == "mcpwarden-keep") return c;
    }
    return 0;
}

// The `floor` baseline: the least a relay process in the middle can do. One thread per
// direction, blocking read then write, client stdin -> server stdin and server stdout ->
// client stdout: no framing, no parsing, no epoll, no keeper, no journal. What the shim adds
// beyond this is its own cost; what this adds over `direct` is the cost of any process in the
// middle on this machine (two more pipe hops and wake-ups per round trip).
int as_relay(char** server) {
    int a[2], b[2];
    if (::pipe2(a, O_CLOEXEC) || ::pipe2(b, O_CLOEXEC)) return 125;
    pid_t pid = ::fork();
    if (pid == 0) {
        ::dup2(a[0], 0);
        ::dup2(b[1], 1);
        ::execvp(server[0], server);
        ::_exit(127);
    }
    ::close(a[0]);
    ::close(b[1]);
    auto pump = [](int from, int to) {
        std::vector<char> buf(1 << 16);
        for (;;) {
            ssize_t r = ::read(from, buf.data(), buf.size());
            if (r < 0 && errno == EINTR) continue;
            if (r <= 0) return;
            for (ssize_t off = 0; off < r;) {
                ssize_t w = ::write(to, buf.data() + off, static_cast<size_t>(r - off));
                if (w < 0 && errno == EINTR) continue;
                if (w <= 0) return;
                off += w;
            }
        }
    };
    std::thread up([&] {
        pump(0, a[1]);
        ::close(a[1]);  // the server's EOF
    });
    pump(b[0], 1);
    up.join();
    int st = 0;
    ::waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

struct Memory {
    uint64_t rss_kb = 0, pss_kb = 0, uss_kb = 0;
};

// Rss and Pss of one process from /proc/PID/smaps_rollup. Rss counts every resident page it
// maps, shared library text included (counted again in every process that maps it); Pss
// divides each shared page among the processes mapping it; Uss (Private_Clean + Private_Dirty)
// is what the process alone holds, what one more session costs.
Memory memory_of(pid_t pid) {
    Memory m;
    std::ifstream f("/proc/" + std::to_string(pid) + "/smaps_rollup");
    for (std::string l; std::getline(f, l);) {
        if (l.rfind("Rss:", 0) == 0) m.rss_kb = std::stoull(l.substr(4));
        if (l.rfind("Pss:", 0) == 0) m.pss_kb = std::stoull(l.substr(4));
        if (l.rfind("Private_Clean:", 0) == 0 || l.rfind("Private_Dirty:", 0) == 0)
            m.uss_kb += std::stoull(l.substr(14));
    }
    return m;
}

struct Latency {
    double p50 = 0, p99 = 0;
    double per_s = 0;  // round trips per second, back to back
    Memory relay, keeper;
};

// The round trips of `iterations` 1 KiB tools/call echoes through `mode` (after 200 not
// counted), and how long they took back to back.
struct Samples {
    std::vector<double> us;
    double seconds = 0;
    double writer_cpu_us = 0;  // the journal's writer thread, over the counted calls
    double relay_cpu_us = 0;   // the relay's thread (the one that forwards), likewise
    double relay_user_us = 0;  // of which in user space (/proc stat: 10 ms ticks, pooled)
};

// CPU time (µs) a thread has run, from /proc/PID/task/TID/schedstat.
double task_cpu_us(const std::filesystem::path& task) {
    std::ifstream stat(task / "schedstat");
    double ns = 0;
    stat >> ns;
    return ns / 1000.0;
}

// CPU time (µs) of the relay's journal writer thread (named mcpwarden-jrnl).
double writer_cpu_us(pid_t relay) {
    std::error_code ec;
    std::filesystem::directory_iterator tasks("/proc/" + std::to_string(relay) + "/task", ec);
    for (; !ec && tasks != std::filesystem::directory_iterator(); tasks.increment(ec)) {
        std::ifstream comm(tasks->path() / "comm");
        std::string name;
        std::getline(comm, name);
        if (name == "mcpwarden-jrnl") return task_cpu_us(tasks->path());
    }
    return 0;
}

// CPU time (µs) of the relay's main thread, which reads, records and forwards every line.
double relay_cpu_us(pid_t relay) {
    std::string task = "/proc/" + std::to_string(relay) + "/task/" + std::to_string(relay);
    return task_cpu_us(task);
}

// Its user-space part (utime, field 14 of /proc/PID/stat, in clock ticks): what the journal's
// own code costs on the relay's path, apart from the kernel's share (system calls, switches).
double relay_user_us(pid_t relay) {
    std::ifstream f("/proc/" + std::to_string(relay) + "/task/" + std::to_string(relay) + "/stat");
    std::string text((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto paren = text.rfind(')');
    if (paren == std::string::npos) return 0;
    std::istringstream rest(text.substr(paren + 2));
    std::string field;
    for (int i = 3; i < 14 && rest >> field; ++i) {
    }
    double ticks = 0;
    rest >> ticks;
    return ticks * 1e6 / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

Latency latency(const std::string& mode, int iterations, Samples* keep = nullptr) {
    Proc p = spawn(with_wrapper(mode, {WARDEN_FIXTURE}));
    Reader r(p.out);
    std::string line;
    write_all(p.in, kInit);
    if (!r.line(line)) std::exit(1);
    std::string text(1024 - 100, 'a');
    std::vector<double> us;
    us.reserve(static_cast<size_t>(iterations));
    Clock::time_point started;
    for (int i = 0; i < iterations + 200; ++i) {
        if (i == 200) {
            started = Clock::now();
            if (keep) {
                keep->writer_cpu_us -= writer_cpu_us(p.pid);
                keep->relay_cpu_us -= relay_cpu_us(p.pid);
                keep->relay_user_us -= relay_user_us(p.pid);
            }
        }
        std::string req =
            R"({"jsonrpc":"2.0","id":)" + std::to_string(i + 1) +
            R"(,"method":"tools/call","params":{"name":"echo","arguments":{"text":")" + text +
            "\"}}}\n";
        auto t0 = Clock::now();
        write_all(p.in, req);
        if (!r.line(line)) std::exit(1);
        auto t1 = Clock::now();
        if (i >= 200) us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    }
    double seconds = std::chrono::duration<double>(Clock::now() - started).count();
    if (keep) {
        keep->us.insert(keep->us.end(), us.begin(), us.end());
        keep->seconds += seconds;
        keep->writer_cpu_us += writer_cpu_us(p.pid);
        keep->relay_cpu_us += relay_cpu_us(p.pid);
        keep->relay_user_us += relay_user_us(p.pid);
    }
    Latency l{pct(us, 0.5), pct(us, 0.99), static_cast<double>(iterations) / seconds, {}, {}};
    if (mode == "shim") {
        pid_t k = keeper_of(p.pid);
        l.relay = memory_of(p.pid);
        if (k) l.keeper = memory_of(k);
    }
    if (mode == "floor") l.relay = memory_of(p.pid);  // the baseline: one bare C++ relay
    finish(p);
    return l;
}

// MiB/s of 1 MiB lines echoed by `cat`: a writer thread feeds, we read back.
double throughput(const std::string& mode, int mib) {
    Proc p = spawn(with_wrapper(mode, {"cat"}));
    std::string msg = R"({"jsonrpc":"2.0","method":"notifications/message","params":{"data":")";
    msg += std::string((1u << 20) - msg.size() - 4, 'x');
    msg += "\"}}\n";
    auto t0 = Clock::now();
    std::thread w([&] {
        for (int i = 0; i < mib; ++i)
            write_all(p.in, msg);
    });
    size_t want = msg.size() * static_cast<size_t>(mib), got = 0;
    std::vector<char> buf(1 << 20);
    while (got < want) {
        ssize_t n = ::read(p.out, buf.data(), buf.size());
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    auto t1 = Clock::now();
    w.join();
    finish(p);
    return static_cast<double>(got) / (1 << 20) / std::chrono::duration<double>(t1 - t0).count();
}

double one_startup_ms(const std::string& mode) {
    auto t0 = Clock::now();
    Proc p = spawn(with_wrapper(mode, {WARDEN_FIXTURE}));
    write_all(p.in, kInit);
    Reader r(p.out);
    std::string line;
    if (!r.line(line)) std::exit(1);
    double ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    finish(p);
    return ms;
}

double startup_ms(const std::string& mode, int starts) {
    std::vector<double> ms;
    for (int i = 0; i < starts; ++i)
        ms.push_back(one_startup_ms(mode));
    return pct(ms, 0.5);
}

// Start-up with each sandbox profile against --sandbox off, interleaved.
void sandbox_startup(int starts) {
    const char* modes[] = {"shim", "strict", "workspace"};
    constexpr int kModes = 3;
    std::vector<double> ms[kModes];
    for (int i = 0; i < starts; ++i)
        for (int m = 0; m < kModes; ++m)
            ms[m].push_back(one_startup_ms(modes[m]));
    double off = pct(ms[0], 0.5);
    std::printf(
        "\nsandbox start-up (median of %d, to the first initialize answer, --no-journal):\n",
        starts);
    std::printf("  --sandbox off        %8.2f ms\n", off);
    for (int m = 1; m < kModes; ++m)
        std::printf("  --sandbox %-15s %8.2f ms  added %+.2f ms (goal <= 2), x%.3f\n", modes[m],
                    pct(ms[m], 0.5), pct(ms[m], 0.5) - off, pct(ms[m], 0.5) / off);
}

// The journal's cost alone, load drifts cancelled: `rounds` rounds, each one session of
// `--no-journal` then one of `--journal` (iterations / rounds calls each), samples pooled
// per path. What the journal adds is read from the two pools, which met the same load.
int journal_rounds(int iterations, int rounds, const std::string& writer_policies) {
    char dir[] = "/var/tmp/bench-relay-XXXXXX";
    if (!::mkdtemp(dir)) {
        std::perror("mkdtemp /var/tmp");
        return 1;
    }
    g_journal = std::string(dir) + "/journal.db";
    g_base_journal = std::string(dir) + "/base.db";
    std::vector<std::string> modes{"shim", "journal"};
    if (!g_base_cli.empty()) modes.push_back("base");
    for (size_t at = 0; at < writer_policies.size();) {
        size_t comma = writer_policies.find(',', at);
        if (comma == std::string::npos) comma = writer_policies.size();
        modes.push_back("journal:" + writer_policies.substr(at, comma - at));
        at = comma + 1;
    }
    double load[3] = {};
    ::getloadavg(load, 3);
    std::vector<Samples> pools(modes.size());
    const int each = std::max(1, iterations / rounds);
    for (int r = 0; r < rounds; ++r)
        for (size_t m = 0; m < modes.size(); ++m)
            latency(modes[m], each, &pools[m]);
    double after[3] = {};
    ::getloadavg(after, 3);
    std::printf(
        "journal rounds: %d x %d round trips of a 1 KiB tools/call echo per path, "
        "interleaved (load %.2f before, %.2f after)\n\n",
        rounds, each, load[0], after[0]);
    if (!g_base_cli.empty()) std::printf("base: %s\n\n", g_base_cli.c_str());
    std::printf("%-14s %10s %10s %10s %10s %12s %12s %12s\n", "path", "p50 us", "p99 us",
                "p99.9 us", "calls/s", "relay CPU", "(user)", "writer CPU");
    for (size_t m = 0; m < modes.size(); ++m) {
        const double calls = static_cast<double>(pools[m].us.size());
        std::printf("%-14s %10.1f %10.1f %10.1f %10.0f %9.1f us %9.1f us %9.1f us\n",
                    modes[m].c_str(), pct(pools[m].us, 0.5), pct(pools[m].us, 0.99),
                    pct(pools[m].us, 0.999), calls / pools[m].seconds,
                    pools[m].relay_cpu_us / calls, pools[m].relay_user_us / calls,
                    pools[m].writer_cpu_us / calls);
    }
    std::printf("(CPU per call: the relay's thread and the journal's writer thread)\n");
    auto per_call = [&](size_t m, double Samples::*cpu) {
        return pools[m].*cpu / static_cast<double>(pools[m].us.size());
    };
    for (size_t m = 1; m < modes.size(); ++m)
        std::printf(
            "%s vs --no-journal: p50 %+.1f us (goal <= 50), p99 %+.1f us (goal <= 250), "
            "rate x%.2f; journal CPU per call %.1f us (relay %+.1f, writer %.1f)\n",
            modes[m].c_str(), pct(pools[m].us, 0.5) - pct(pools[0].us, 0.5),
            pct(pools[m].us, 0.99) - pct(pools[0].us, 0.99),
            (static_cast<double>(pools[m].us.size()) / pools[m].seconds) /
                (static_cast<double>(pools[0].us.size()) / pools[0].seconds),
            per_call(m, &Samples::relay_cpu_us) - per_call(0, &Samples::relay_cpu_us) +
                per_call(m, &Samples::writer_cpu_us),
            per_call(m, &Samples::relay_cpu_us) - per_call(0, &Samples::relay_cpu_us),
            per_call(m, &Samples::writer_cpu_us));
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    return 0;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 2 && std::strcmp(argv[1], "--as-relay") == 0) return as_relay(argv + 2);
    {
        char self[4096];
        ssize_t n = ::readlink("/proc/self/exe", self, sizeof self - 1);
        g_self = n > 0 ? std::string(self, static_cast<size_t>(n)) : std::string(argv[0]);
    }
    int iterations = 5000, mib = 256, starts = 20, sequential = 50000;
    bool startup_only = false;
    int rounds = 0;
    std::string writer_policies;  // with --journal-rounds: also these writer policies
    for (int i = 1; i + 1 < argc; i += 2) {
        std::string a = argv[i];
        if (a == "--startup-only") startup_only = std::atoi(argv[i + 1]) != 0;
        if (a == "--iterations") iterations = std::atoi(argv[i + 1]);
        if (a == "--mib") mib = std::atoi(argv[i + 1]);
        if (a == "--starts") starts = std::atoi(argv[i + 1]);
        if (a == "--sequential") sequential = std::atoi(argv[i + 1]);
        if (a == "--journal-rounds") rounds = std::atoi(argv[i + 1]);
        if (a == "--writer") writer_policies = argv[i + 1];
        if (a == "--base-cli") g_base_cli = argv[i + 1];
    }
    ::signal(SIGPIPE, SIG_IGN);
    if (rounds > 0) return journal_rounds(iterations, rounds, writer_policies);
    if (startup_only) {
        sandbox_startup(starts);
        return 0;
    }
    char dir[] = "/var/tmp/bench-relay-XXXXXX";  // on disk: the journal's fsyncs are real
    if (!::mkdtemp(dir)) {
        std::perror("mkdtemp /var/tmp");
        return 1;
    }
    g_journal = std::string(dir) + "/journal.db";
    const char* modes[] = {"direct", "shim", "socat", "floor", "journal", "jsync"};
    constexpr int kModes = 6;
    Latency lat[kModes];
    double thr[kModes], st[kModes];
    for (int m = 0; m < kModes; ++m) {
        std::fprintf(stderr, "%s: latency...\n", modes[m]);
        lat[m] = latency(modes[m], iterations);
        std::fprintf(stderr, "%s: throughput...\n", modes[m]);
        thr[m] = throughput(modes[m], mib);  // journal: notifications, not recorded
        std::fprintf(stderr, "%s: start-up...\n", modes[m]);
        st[m] = startup_ms(modes[m], starts);
    }
    std::printf(
        "relay benchmark: %d round trips of a 1 KiB tools/call echo (fixture), %d x 1 MiB "
        "lines through cat, %d start-ups\n\n",
        iterations, mib, starts);
    std::printf("%-8s %10s %10s %12s %14s\n", "path", "p50 us", "p99 us", "MiB/s", "startup ms");
    for (int m = 0; m < kModes; ++m)
        std::printf("%-8s %10.1f %10.1f %12.0f %14.2f\n", modes[m], lat[m].p50, lat[m].p99, thr[m],
                    st[m]);
    std::printf(
        "\nadded by the shim vs direct: p50 %+.1f us (goal <= 25), p99 %+.1f us (goal <= 100), "
        "start-up %+.2f ms\n",
        lat[1].p50 - lat[0].p50, lat[1].p99 - lat[0].p99, st[1] - st[0]);
    std::printf(
        "shim vs socat: latency p50 x%.2f, p99 x%.2f (goal <= 1); throughput x%.2f (goal >= 1)\n",
        lat[1].p50 / lat[2].p50, lat[1].p99 / lat[2].p99, thr[1] / thr[2]);
    std::printf(
        "shim vs floor (a bare relay, same hops): p50 %+.1f us, p99 %+.1f us; floor vs "
        "direct: p50 %+.1f us\n",
        lat[1].p50 - lat[3].p50, lat[1].p99 - lat[3].p99, lat[3].p50 - lat[0].p50);
    std::printf(
        "journal on vs off (--journal vs --no-journal): p50 %+.1f us (goal <= 50), p99 %+.1f us "
        "(goal <= 250), start-up %+.2f ms\n",
        lat[4].p50 - lat[1].p50, lat[4].p99 - lat[1].p99, st[4] - st[1]);
    std::printf(
        "journal with --journal-sync always vs off: p50 %+.1f us, p99 %+.1f us (an fsync per "
        "request)\n",
        lat[5].p50 - lat[1].p50, lat[5].p99 - lat[1].p99);
    std::fprintf(stderr, "journal: %d sequential requests...\n", sequential);
    Latency seq = latency("journal", sequential);
    std::printf(
        "%d sequential requests through the journaled shim: %.0f per second (goal >= 20000; the "
        "shim without journal: %.0f per second over its %d)\n",
        sequential, seq.per_s, lat[1].per_s, iterations);
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    const Memory& r = lat[1].relay;
    const Memory& k = lat[1].keeper;
    std::printf(
        "relay + keeper: RSS %.2f + %.2f = %.2f MB, PSS %.2f + %.2f = %.2f MB (goal <= 4 MB)\n",
        static_cast<double>(r.rss_kb) / 1024.0, static_cast<double>(k.rss_kb) / 1024.0,
        static_cast<double>(r.rss_kb + k.rss_kb) / 1024.0, static_cast<double>(r.pss_kb) / 1024.0,
        static_cast<double>(k.pss_kb) / 1024.0, static_cast<double>(r.pss_kb + k.pss_kb) / 1024.0);
    // Named baselines for the RSS goal, same run: the floor relay (one process of the bench
    // binary: C++, the same shared libraries, nothing of mcpwarden's relay code) and an idle
    // `sleep` (coreutils: C, libc only), the smallest process this machine runs.
    Memory idle;
    {
        Proc s = spawn({"sleep", "1"});
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        idle = memory_of(s.pid);
        finish(s);
    }
    const Memory& f = lat[3].relay;
    std::printf(
        "baselines: floor relay (1 process) RSS %.2f MB, PSS %.2f MB; idle sleep RSS %.2f MB, "
        "two of them %.2f MB\n",
        static_cast<double>(f.rss_kb) / 1024.0, static_cast<double>(f.pss_kb) / 1024.0,
        static_cast<double>(idle.rss_kb) / 1024.0, static_cast<double>(2 * idle.rss_kb) / 1024.0);
    std::printf("relay + keeper: USS (private) %.2f + %.2f = %.2f MB\n",
                static_cast<double>(r.uss_kb) / 1024.0, static_cast<double>(k.uss_kb) / 1024.0,
                static_cast<double>(r.uss_kb + k.uss_kb) / 1024.0);
    sandbox_startup(starts);
    return 0;
}
