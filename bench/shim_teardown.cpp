// bench_shim_teardown: where the time goes between a client closing the server's stdin and
// the tree being gone, through `mcpwarden run`, phase by phase.
//
// The client is this benchmark. It starts `mcpwarden run [--no-journal] -- fixture --shape S
// --port-file P` (the fixture exits on EOF and leaves a helper holding a TCP port: the tree
// the shim must tear down), waits for the port, then closes the shim's stdin at t0: at once
// (cold: the relay may still be starting, as with a client that starts a server and goes at
// once) or, with --after-initialize, once `initialize` is answered (warm: the relay, its
// journal and the server are up, as when a client leaves after its first exchange); with
// --idle MS the client then waits MS more (a session that ends after a quiet spell, as most
// do: whatever the start-up set going in the background, the keeper's own journal opening
// above all, is over by then). It measures, on CLOCK_MONOTONIC:
//   port free    the first successful bind() of 127.0.0.1:port (tried every 20 µs)
//   tree gone    the exit of the server tree's last process: every process below the shim
//                but its own (the keeper), found before t0 and each held by a pidfd, its exit
//                the pidfd's readiness
//   last gone    the exit of the session's last process but `run`: the tree's and the
//                keeper's (its pidfd, taken before t0), whichever comes later
//   run exit     waitpid() of `mcpwarden run`; `run exit - last gone` is what `run`'s own
//                exit adds once nothing else of its session is alive
// and, before t0, the start as the client sees it: from the spawn of `run` to the port file
// (cold) or to the answer to `initialize` (warm), where a teardown lever that moves work into
// the start would show its cost;
// and, with MCPWARDEN_PHASES=1, the steps the relay and the keeper timestamp on stderr
// (src/shim/keeper.hpp, trace_phase). The baseline, in the same run, is `killpg`: the fixture
// started directly in a process group of its own, SIGKILLed as a group at t0 — what the
// simplest supervisor does, and the floor for "port free". It is run only on the shapes where
// it frees the port (normal, deep): a setsid or double-forked helper escapes a group kill.
//
// With --base-cli PATH (a previous build) each trial is run twice in a row, with this build
// and with that one, so that load hits both alike; the lines "B: …" are the latter's.
//
// Usage: bench_shim_teardown [--trials N] [--shapes normal,setsid,doublefork,deep]
//                            [--journal] [--after-initialize] [--idle MS] [--cli PATH]
//                            [--base-cli PATH]
// Prints medians in ms, and the load average (the machine may be shared: read it).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "children.hpp"
#include "proc/process_table.hpp"
#include "sys/pidfd.hpp"

namespace {

using warden::bench::loadavg;
using warden::bench::median;

int64_t now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

bool bindable(uint16_t port) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return false;
    int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    ::close(fd);
    return ok;
}

// The port the fixture wrote ("<port> <pid>"), waited for up to 10 s; 0 on failure.
uint16_t wait_port(const std::string& file) {
    for (int i = 0; i < 10000; ++i) {
        std::ifstream f(file);
        unsigned port = 0;
        if (f >> port && port > 0 && port < 65536) return static_cast<uint16_t>(port);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return 0;
}

// First bind() that succeeds after t0, in ms since t0; -1 if the port stays held for 5 s.
double port_free_ms(uint16_t port, int64_t t0) {
    for (int i = 0; i < 250000; ++i) {
        if (bindable(port)) return static_cast<double>(now_ns() - t0) / 1e6;
        ::usleep(20);
    }
    return -1;
}

// The processes below `run` (pid `shim`), each bound to a pidfd that is kept only if the
// process still has the identity the scan read: the server's tree, and the shim's own (named
// mcpwarden-*: the keeper; a pidns init is not used here).
struct Below {
    std::vector<warden::Pidfd> tree, ours;
};
Below below(pid_t shim) {
    Below out;
    auto table = warden::ProcessTable::scan(warden::kStat);
    const warden::Process* root = table.find(shim);
    if (!root) return out;
    for (const warden::Process* p : table.descendants(root->id)) {
        auto fd = warden::Pidfd::open(p->id.pid);
        if (!fd) continue;
        auto again = warden::read_identity(p->id.pid);
        if (!again || again->starttime != p->id.starttime) continue;
        (p->comm.rfind("mcpwarden", 0) == 0 ? out.ours : out.tree).push_back(std::move(*fd));
    }
    return out;
}

// When the last of `tree` exited, in ms since t0 (each pidfd polled until readable, 5 s
// at most); -1 when one outlived that.
double tree_gone_ms(const std::vector<warden::Pidfd>& tree, int64_t t0) {
    std::vector<pollfd> left;
    for (const auto& fd : tree)
        left.push_back({fd.get(), POLLIN, 0});
    const int64_t deadline = now_ns() + 5'000'000'000LL;
    while (!left.empty() && now_ns() < deadline) {
        if (::poll(left.data(), left.size(), 100) < 0 && errno != EINTR) return -1;
        std::erase_if(left, [](const pollfd& p) { return p.revents != 0; });
    }
    return left.empty() ? static_cast<double>(now_ns() - t0) / 1e6 : -1;
}

// The answer to `initialize` (id 1) read from `fd`, within 10 s.
bool initialized(int in, int out) {
    static const std::string request =
        R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":)"
        R"("2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})"
        "\n";
    if (!warden::write_all(in, request, "shim stdin")) return false;
    std::string got;
    char buf[4096];
    for (int i = 0; i < 1000 && got.find('\n') == std::string::npos; ++i) {
        pollfd p{out, POLLIN, 0};
        if (::poll(&p, 1, 10) < 0) return false;
        if (!p.revents) continue;
        ssize_t n = ::read(out, buf, sizeof buf);
        if (n <= 0) return false;
        got.append(buf, static_cast<size_t>(n));
    }
    return got.find(R"("id":1)") != std::string::npos;
}

struct Trial {
    double port_ms = -1, exit_ms = -1, tree_ms = -1, ours_ms = -1;
    // The start, as the client sees it: from the spawn of `run` to the port file (cold) or to
    // the initialize answer (warm). What the teardown's levers may cost the start shows here.
    double start_ms = -1;
    std::map<std::string, double> phases;  // ms since t0 (negative: before it)
    // CPU time of the relay's and the keeper's main thread from the client's leaving to
    // their exit (the phase lines carry it): client_left → relay_exits, keeper_asked →
    // keeper_exits. NaN when a line is missing.
    double cpu_relay_ms = std::numeric_limits<double>::quiet_NaN();
    double cpu_keeper_ms = std::numeric_limits<double>::quiet_NaN();
};

// The session's last process but `run` gone: the tree's and the keeper's, the later.
double last_ms(const Trial& t) {
    return t.tree_ms >= 0 && t.ours_ms >= 0 ? std::max(t.tree_ms, t.ours_ms) : -1;
}

Trial shim_trial(const std::string& cli, const std::string& shape, bool journal, bool warm,
                 int idle_ms, const std::string& dir) {
    const std::string port_file = dir + "/port";
    std::filesystem::remove(port_file);
    std::vector<std::string> argv = {cli, "run", "--eof-grace", "1s", "--term-grace", "2s"};
    if (journal) {
        argv.insert(argv.end(), {"--journal", dir + "/journal.db"});
    } else {
        argv.push_back("--no-journal");
    }
    argv.insert(argv.end(), {"--", WARDEN_FIXTURE, "--shape", shape, "--port-file", port_file});
    if (shape == "deep") argv.insert(argv.end(), {"--depth", "5"});
    int err[2];
    if (::pipe2(err, O_CLOEXEC)) std::abort();
    ::setenv("MCPWARDEN_PHASES", "1", 1);
    // stderr: the phases. A pipe we read after the exit: the lines are few and short.
    int saved = ::dup(2);
    ::dup2(err[1], 2);
    const int64_t spawned = now_ns();
    warden::bench::PipedChild c = warden::bench::spawn_piped(argv, /*keep_stderr=*/true);
    ::dup2(saved, 2);
    ::close(saved);
    ::close(err[1]);
    ::unsetenv("MCPWARDEN_PHASES");
    Trial t;
    uint16_t port = wait_port(port_file);
    if (port != 0 && warm && !initialized(c.in, c.out)) port = 0;
    if (port != 0) t.start_ms = static_cast<double>(now_ns() - spawned) / 1e6;
    if (port != 0 && idle_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(idle_ms));
    if (port == 0) {
        ::close(c.in);
    } else {
        const Below procs = below(c.pid);
        const int64_t t0 = now_ns();
        ::close(c.in);
        // On threads of their own: the port's release, the tree's end and the keeper's are
        // watched at once.
        std::thread tree_watch(
            [&] { t.tree_ms = procs.tree.empty() ? -1 : tree_gone_ms(procs.tree, t0); });
        std::thread ours_watch(
            [&] { t.ours_ms = procs.ours.empty() ? -1 : tree_gone_ms(procs.ours, t0); });
        t.port_ms = port_free_ms(port, t0);
        tree_watch.join();
        ours_watch.join();
        int st = 0;
        ::waitpid(c.pid, &st, 0);
        t.exit_ms = static_cast<double>(now_ns() - t0) / 1e6;
        std::string text;
        char buf[4096];
        for (ssize_t n; (n = ::read(err[0], buf, sizeof buf)) > 0;)
            text.append(buf, static_cast<size_t>(n));
        std::istringstream lines(text);
        std::map<std::string, long long> cpu;
        for (std::string line; std::getline(lines, line);) {
            char name[64];
            long long ns = 0, cpu_ns = 0;
            if (std::sscanf(line.c_str(), "mcpwarden-phase %63s %lld %lld", name, &ns, &cpu_ns) >=
                2) {
                t.phases[name] = static_cast<double>(ns - t0) / 1e6;
                cpu[name] = cpu_ns;
            }
        }
        auto cpu_between = [&](const char* from, const char* to) {
            return cpu.count(from) && cpu.count(to) ? static_cast<double>(cpu[to] - cpu[from]) / 1e6
                                                    : std::numeric_limits<double>::quiet_NaN();
        };
        t.cpu_relay_ms = cpu_between("client_left", "relay_exits");
        t.cpu_keeper_ms = cpu_between("keeper_asked", "keeper_exits");
    }
    if (port == 0) {
        int st = 0;
        ::waitpid(c.pid, &st, 0);
    }
    ::close(c.out);
    ::close(err[0]);
    ::kill(-c.pid, SIGKILL);  // its group, in case a failed trial left anything in it
    return t;
}

Trial killpg_trial(const std::string& shape, const std::string& dir) {
    const std::string port_file = dir + "/port";
    std::filesystem::remove(port_file);
    std::vector<std::string> argv = {WARDEN_FIXTURE, "--shape", shape, "--port-file", port_file};
    if (shape == "deep") argv.insert(argv.end(), {"--depth", "5"});
    warden::bench::PipedChild c = warden::bench::spawn_piped(argv);
    Trial t;
    uint16_t port = wait_port(port_file);
    const int64_t t0 = now_ns();
    ::kill(-c.pid, SIGKILL);
    if (port) t.port_ms = port_free_ms(port, t0);
    int st = 0;
    ::waitpid(c.pid, &st, 0);
    t.exit_ms = static_cast<double>(now_ns() - t0) / 1e6;
    ::close(c.in);
    ::close(c.out);
    return t;
}

std::vector<std::string> split(const std::string& s) {
    std::vector<std::string> out;
    size_t from = 0;
    while (from <= s.size()) {
        size_t comma = s.find(',', from);
        if (comma == std::string::npos) comma = s.size();
        if (comma > from) out.push_back(s.substr(from, comma - from));
        from = comma + 1;
    }
    return out;
}

}  // namespace

int main(int argc, char** argv) {
    int trials = 12;
    std::vector<std::string> shapes = {"normal", "setsid", "doublefork", "deep"};
    bool journal = false, warm = false;
    int idle_ms = 0;
    std::string cli = WARDEN_CLI;
    std::string base_cli;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--trials" && i + 1 < argc) {
            trials = std::max(1, std::atoi(argv[++i]));
        } else if (a == "--after-initialize") {
            warm = true;
        } else if (a == "--idle" && i + 1 < argc) {
            idle_ms = std::max(0, std::atoi(argv[++i]));
        } else if (a == "--shapes" && i + 1 < argc) {
            shapes = split(argv[++i]);
        } else if (a == "--journal") {
            journal = true;
        } else if (a == "--cli" && i + 1 < argc) {
            cli = argv[++i];
        } else if (a == "--base-cli" && i + 1 < argc) {
            base_cli = argv[++i];
        } else {
            std::fprintf(stderr, "bench_shim_teardown: unknown argument '%s'\n", a.c_str());
            return 2;
        }
    }
    char tmpl[] = "/tmp/mcpwarden-bench-shim-XXXXXX";
    if (!::mkdtemp(tmpl)) return 1;
    const std::string dir = tmpl;

    // The start's steps come first, then the relay's: with the client leaving at once, some of them
    // fall after t0 (journal_opened and journal_started, its journal's start-up, on a thread
    // of its own), and none should hold back client_left.
    const std::vector<std::string> order = {"run_start",
                                            "keeper_forked",
                                            "keeper_start",
                                            "keeper_contained",
                                            "keeper_spawning",
                                            "keeper_spawned",
                                            "sandbox_complete",
                                            "spawned_received",
                                            "relay_started",
                                            "journal_opened",
                                            "journal_started",
                                            "client_left",
                                            "server_exit_reported",
                                            "eof_window_over",
                                            "evidence_written",
                                            "keeper_asked",
                                            "keeper_teardown_starts",
                                            "first_sigterm",
                                            "evidence_committed",
                                            "grace_over",
                                            "sweep_over",
                                            "verified",
                                            "keeper_recorded",
                                            "keeper_done",
                                            "keeper_reported",
                                            "report_received",
                                            "keeper_released_containment",
                                            "outcome_recorded",
                                            "keeper_ended",
                                            "journal_closed",
                                            "keeper_released",
                                            "keeper_exits",
                                            "keeper_reaped",
                                            "relay_exits"};
    std::printf(
        "bench_shim_teardown: client closes stdin at t0 (%s, then %d ms idle); medians of %d "
        "trials, ms; %s; journal %s\nshim: %s\nload average: %s\n\n",
        warm ? "warm: after initialize is answered" : "cold: as soon as the server is up", idle_ms,
        trials, "fixture exits on EOF, its port holder must be torn down",
        journal ? "on" : "off (--no-journal)", cli.c_str(), loadavg().c_str());
    const bool has_b = !base_cli.empty();
    if (has_b) std::printf("B: %s\n\n", base_cli.c_str());
    for (const auto& shape : shapes) {
        std::vector<Trial> ts, bs;
        for (int i = 0; i < trials; ++i) {
            ts.push_back(shim_trial(cli, shape, journal, warm, idle_ms, dir));
            if (has_b) bs.push_back(shim_trial(base_cli, shape, journal, warm, idle_ms, dir));
        }
        constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
        auto med_of = [&](const std::vector<Trial>& of, auto get) {
            std::vector<double> v;
            for (auto& t : of)
                if (double x = get(t); !std::isnan(x)) v.push_back(x);
            return v.empty() ? kNone : median(v);
        };
        auto med = [&](auto get) { return med_of(ts, get); };
        auto phase = [&](const std::string& name) {
            return [&name](const Trial& t) {
                auto it = t.phases.find(name);
                return it == t.phases.end() ? kNone : it->second;
            };
        };
        std::printf("%s\n", shape.c_str());
        for (const auto& name : order)
            if (double m = med(phase(name)); !std::isnan(m))
                std::printf("  %-24s %8.2f\n", name.c_str(), m);
        auto measured = [&](double x) { return x >= 0 ? x : kNone; };
        const char* start_label = warm ? "start (to initialize)" : "start (to port file)";
        std::printf("  %-24s %8.2f\n", start_label,
                    med([&](const Trial& t) { return measured(t.start_ms); }));
        std::printf("  %-24s %8.2f\n", "port free",
                    med([&](const Trial& t) { return measured(t.port_ms); }));
        std::printf("  %-24s %8.2f\n", "run exit",
                    med([&](const Trial& t) { return measured(t.exit_ms); }));
        std::printf("  %-24s %8.2f\n", "tree gone",
                    med([&](const Trial& t) { return measured(t.tree_ms); }));
        std::printf("  %-24s %8.2f\n", "last gone",
                    med([&](const Trial& t) { return measured(last_ms(t)); }));
        // The goals (docs/BENCHMARKS.md): the session's last process gone within 5 ms of the
        // client's leaving (9 ms on deep), and `run`'s exit within 0.5 ms of it. Medians of
        // each trial's difference.
        auto exit_after_last = [&](const Trial& t) {
            return last_ms(t) >= 0 && t.exit_ms >= 0 ? t.exit_ms - last_ms(t) : kNone;
        };
        std::printf("  %-24s %8.2f\n", "run exit - last gone", med(exit_after_last));
        // The same to the tree's end, and to the port's release (which comes first where the
        // port holder is not the last to go, as on deep).
        auto gap_to = [&](double Trial::*from) {
            return [from](const Trial& t) {
                return t.*from >= 0 && t.exit_ms >= 0 ? t.exit_ms - t.*from : kNone;
            };
        };
        const auto gap = gap_to(&Trial::port_ms);
        std::printf("  %-24s %8.2f\n", "run exit - tree gone", med(gap_to(&Trial::tree_ms)));
        std::printf("  %-24s %8.2f\n", "run exit - port free", med(gap));
        // From the keeper's proof that the tree is gone (`verified`, on the same clock) to the
        // exit: the part of the gap that is ours, without the port's own release.
        auto after_verified = [&](const Trial& t) {
            auto v = t.phases.find("verified");
            return v != t.phases.end() && t.exit_ms >= 0 ? t.exit_ms - v->second : kNone;
        };
        std::printf("  %-24s %8.2f\n", "run exit - verified", med(after_verified));
        if (!std::isnan(med([&](const Trial& t) { return t.cpu_relay_ms; })))
            std::printf("  %-24s %8.2f / %.2f   (CPU after t0, ms: relay / keeper)\n", "cpu",
                        med([&](const Trial& t) { return t.cpu_relay_ms; }),
                        med([&](const Trial& t) { return t.cpu_keeper_ms; }));
        if (has_b) {
            std::printf("  B: %s\n", base_cli.c_str());
            for (const auto& name : order)
                if (double m = med_of(bs, phase(name)); !std::isnan(m))
                    std::printf("  B: %-21s %8.2f\n", name.c_str(), m);
            std::printf("  B: %-21s %8.2f\n", start_label,
                        med_of(bs, [&](const Trial& t) { return measured(t.start_ms); }));
            std::printf("  %-24s %8.2f\n", "B: port free",
                        med_of(bs, [&](const Trial& t) { return measured(t.port_ms); }));
            std::printf("  %-24s %8.2f\n", "B: run exit",
                        med_of(bs, [&](const Trial& t) { return measured(t.exit_ms); }));
            std::printf("  %-24s %8.2f\n", "B: last gone",
                        med_of(bs, [&](const Trial& t) { return measured(last_ms(t)); }));
            std::printf("  %-24s %8.2f\n", "B: run exit - last gone", med_of(bs, exit_after_last));
            std::printf("  %-24s %8.2f\n", "B: run exit - tree gone",
                        med_of(bs, gap_to(&Trial::tree_ms)));
            std::printf("  %-24s %8.2f\n", "B: run exit - port free", med_of(bs, gap));
            std::printf("  %-24s %8.2f\n", "B: run exit - verified", med_of(bs, after_verified));
            std::printf("  %-24s %8.2f / %.2f\n", "B: cpu",
                        med_of(bs, [&](const Trial& t) { return t.cpu_relay_ms; }),
                        med_of(bs, [&](const Trial& t) { return t.cpu_keeper_ms; }));
        }
        if (shape == "normal" || shape == "deep") {
            std::vector<Trial> ks;
            for (int i = 0; i < trials; ++i)
                ks.push_back(killpg_trial(shape, dir));
            std::vector<double> v;
            for (auto& t : ks)
                if (t.port_ms >= 0) v.push_back(t.port_ms);
            std::printf("  %-24s %8.2f   (baseline)\n", "killpg: port free",
                        v.empty() ? -1.0 : median(v));
            std::vector<double> e;
            for (auto& t : ks)
                if (t.exit_ms >= 0) e.push_back(t.exit_ms);
            std::printf("  %-24s %8.2f   (baseline: the group's leader reaped)\n", "killpg: exit",
                        e.empty() ? -1.0 : median(e));
        }
        std::fflush(stdout);
    }
    std::filesystem::remove_all(dir);
    return 0;
}
