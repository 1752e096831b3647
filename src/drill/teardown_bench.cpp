#include "drill/teardown_bench.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <optional>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/spawner.hpp"
#include "contain/teardown.hpp"
#include "drill/tagged.hpp"
#include "drill/teardown_chart.hpp"
#include "proc/process_table.hpp"
#include "record/teardown_record.hpp"
#include "sys/pidfd.hpp"
#include "sys/pipe.hpp"

namespace warden::drill {

const std::vector<std::string>& teardown_bench_shapes() {
    static const std::vector<std::string> s = {"normal", "setsid", "doublefork", "ignore-term",
                                               "deep",   "sh-c",   "fork-storm"};
    return s;
}

const std::vector<std::string>& teardown_bench_strategies() {
    static const std::vector<std::string> s = {"sigterm-top", "killpg",           "two-stage",
                                               "ppid-sweep",  "warden-subreaper", "warden-cgroup",
                                               "warden-pidns"};
    return s;
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

void sleep_ms(double ms) {
    timespec ts{static_cast<time_t>(ms / 1000), static_cast<long>(std::fmod(ms, 1000.0) * 1e6)};
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

std::string shell_quote(const std::string& s) {
    std::string out = "'";
    for (char c : s)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::vector<std::string> fixture_argv(const std::string& shape, const std::string& fixture,
                                      const std::string& port_file) {
    if (shape == "sh-c") {
        // "; true" keeps sh alive as a real wrapper (a lone command would be exec'd).
        return {"/bin/sh", "-c",
                shell_quote(fixture) + " --shape normal --port-file " + shell_quote(port_file) +
                    " --on-eof ignore; true"};
    }
    return {fixture, "--shape", shape, "--port-file", port_file, "--on-eof", "ignore"};
}

std::optional<uint16_t> wait_port_file(const std::string& path, int timeout_ms) {
    for (int waited = 0; waited < timeout_ms; waited += 2) {
        auto s = read_file(path);
        if (s && !s->empty()) return static_cast<uint16_t>(std::atoi(s->c_str()));
        sleep_ms(2);
    }
    return std::nullopt;
}

// Binds the port every 50 µs from the start of the call; records the first success. The
// interval is the figure's resolution: at 0.5 ms, as it once was, nearly every release of
// every strategy was seen by the second probe, and the medians told strategies apart by
// where that probe fell, not by when the port was freed. Each probe is four system calls
// (~6 µs here), a tenth of a core; the timer slack is ours to shorten, not the 50 µs default.
class Prober {
  public:
    Prober(uint16_t port, Clock::time_point t0) : port_(port), t0_(t0) {
        th_ = std::thread([this] {
            ::prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);
            while (!stop_.load()) {
                if (port_bindable(port_)) {
                    released_.store(ms_between(t0_, Clock::now()));
                    return;
                }
                sleep_ms(0.05);
            }
        });
    }
    // Waits up to `ms` more for a release, then stops. Returns ms since t0, or -1.
    double finish(int ms) {
        for (int waited = 0; waited < ms && released_.load() < 0; ++waited)
            sleep_ms(1);
        stop_.store(true);
        th_.join();
        return released_.load();
    }
    ~Prober() {
        if (th_.joinable()) {
            stop_.store(true);
            th_.join();
        }
    }

  private:
    uint16_t port_;
    Clock::time_point t0_;
    std::atomic<bool> stop_{false};
    std::atomic<double> released_{-1};
    std::thread th_;
};

struct Trial {
    double teardown_ms = 0;
    double release_ms = -1;
    int orphans = 0;
    bool port_held = false;
    int exited_in_grace = 0, killed = 0;
    std::map<std::string, double> phases_ms;  // warden: the engine's own phase timings
    std::string skipped;
    std::string error;
};

// ---- classic strategies, run in this process as a client would -------------------------

struct ClassicTree {
    pid_t root = 0;
    Pidfd root_fd;
    uint16_t port = 0;
    Fd stdin_w;
};

Result<ClassicTree> start_classic(const std::vector<std::string>& argv, const std::string& tag,
                                  const std::string& port_file) {
    auto in = make_pipe();
    if (!in) return in.error();
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e)
        if (std::string_view(*e).rfind("MCPWARDEN_SESSION=", 0) != 0) env.emplace_back(*e);
    env.push_back("MCPWARDEN_SESSION=" + tag);
    std::vector<char*> av, ev;
    for (auto& s : const_cast<std::vector<std::string>&>(argv))
        av.push_back(s.data());
    av.push_back(nullptr);
    for (auto& s : env)
        ev.push_back(s.data());
    ev.push_back(nullptr);
    int null_fd = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    pid_t pid = ::fork();
    if (pid < 0) return Error::sys("fork", "", errno);
    if (pid == 0) {
        ::setpgid(0, 0);  // its own group, as clients do, so killpg has a group to hit
        ::dup2(in->read.get(), 0);
        ::dup2(null_fd, 1);
        ::dup2(null_fd, 2);
        ::execve(av[0], av.data(), ev.data());
        ::_exit(127);
    }
    ::close(null_fd);
    ::setpgid(pid, pid);
    ClassicTree t;
    t.root = pid;
    t.stdin_w = std::move(in->write);
    if (auto fd = Pidfd::open(pid); fd) t.root_fd = std::move(*fd);
    auto port = wait_port_file(port_file, 10000);
    if (!port) {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
        kill_tagged(tag);
        return Error::msg("fixture wrote no port file: " + port_file);
    }
    t.port = *port;
    return t;
}

// The published ppid sweep: snapshot by ppid walk (leaves first), starttime guard,
// SIGTERM, poll liveness every 10 ms by non-empty cmdline for up to the grace, SIGKILL.
void ppid_sweep(const ClassicTree& t, int grace_ms, Trial& out) {
    ProcessTable table = ProcessTable::scan(kStat);
    const Process* root = table.find(t.root);
    if (!root) return;
    std::vector<ProcessId> members;
    for (const Process* d : table.descendants(root->id))
        members.push_back(d->id);
    members.push_back(root->id);
    auto same = [](const ProcessId& id) {
        auto now = read_identity(id.pid);
        return now && now->starttime == id.starttime;
    };
    auto alive = [&](const ProcessId& id) {
        if (!same(id)) return false;
        auto p = read_process(id.pid, kCmdline);
        return p && !p->cmdline.empty();
    };
    for (const ProcessId& id : members)
        if (same(id)) ::kill(id.pid, SIGTERM);
    const auto deadline = Clock::now() + std::chrono::milliseconds(grace_ms);
    std::vector<ProcessId> left = members;
    while (Clock::now() < deadline) {
        left.erase(std::remove_if(left.begin(), left.end(), [&](auto& id) { return !alive(id); }),
                   left.end());
        if (left.empty()) break;
        sleep_ms(10);
    }
    left.erase(std::remove_if(left.begin(), left.end(), [&](auto& id) { return !alive(id); }),
               left.end());
    out.exited_in_grace = static_cast<int>(members.size() - left.size());
    for (const ProcessId& id : left)
        if (same(id) && ::kill(id.pid, SIGKILL) == 0) ++out.killed;
}

Trial run_classic(const std::string& strategy, const std::vector<std::string>& argv,
                  const std::string& tag, const std::string& port_file, int grace_ms) {
    Trial tr;
    auto tree = start_classic(argv, tag, port_file);
    if (!tree) {
        tr.error = tree.error().message;
        return tr;
    }
    ClassicTree& t = *tree;
    const auto before = live_tagged(tag);
    const auto t0 = Clock::now();
    Prober prober(t.port, t0);
    if (strategy == "sigterm-top") {
        ::kill(t.root, SIGTERM);
    } else if (strategy == "killpg") {
        ::killpg(t.root, SIGKILL);
    } else if (strategy == "two-stage") {
        ::killpg(t.root, SIGTERM);
        if (t.root_fd) (void)t.root_fd.wait_exit(grace_ms);
        // What the grace hid: members that ended before the group SIGKILL.
        auto still = live_tagged(tag);
        tr.exited_in_grace = static_cast<int>(before.size()) - static_cast<int>(still.size());
        ::killpg(t.root, SIGKILL);
        tr.killed = 0;
        for (const ProcessId& id : still)
            if (auto p = read_process(id.pid, kStat); p && p->pgid == t.root) ++tr.killed;
    } else if (strategy == "ppid-sweep") {
        ppid_sweep(t, grace_ms, tr);
    }
    const auto t1 = Clock::now();
    tr.port_held = !port_bindable(t.port);
    tr.teardown_ms = ms_between(t0, t1);
    tr.orphans = static_cast<int>(live_tagged(tag, false).size());
    tr.release_ms = prober.finish(1000);
    kill_tagged(tag);
    ::waitpid(t.root, nullptr, 0);
    return tr;
}

// ---- warden strategies, run in a forked keeper as `mcpwarden run` does -----------------

// Returns the keeper's exit code. Everything it set up (the session cgroup above all) is
// released by destructors on the way out: a keeper that called _exit from in here left one
// empty `mcpwarden-bench-*` cgroup directory per trial behind.
int keeper_body(const std::string& strategy, const std::vector<std::string>& argv,
                const std::string& tag, const std::string& port_file, int grace_ms, int to_bench,
                int from_bench) {
    auto say = [&](const std::string& line) { (void)write_all(to_bench, line + "\n", "bench"); };
    ContainOptions o;
    o.use_cgroup = strategy == "warden-cgroup";
    o.use_pidns = strategy == "warden-pidns";
    auto c = Containment::setup(tag, o);
    if (!c) {
        say("error " + c.error().message);
        return 1;
    }
    const LayerState& want = o.use_cgroup  ? (*c)->layers().cgroup
                             : o.use_pidns ? (*c)->layers().pidns
                                           : (*c)->layers().subreaper;
    if (!want.on) {
        say("skip " + want.reason);
        return 0;
    }
    SpawnOptions so;
    so.argv = argv;
    so.out = Stdio::Null;
    so.err = Stdio::Null;
    auto child = spawn(**c, so);
    if (!child) {
        say("error " + child.error().message);
        return 1;
    }
    auto port = wait_port_file(port_file, 10000);
    if (!port) {
        say("error fixture wrote no port file");
        return 1;
    }
    // As `mcpwarden run`'s keeper does while the session is idle, the plan is made ahead of
    // the teardown (contain/teardown_ahead.cpp, "A plan made ahead").
    Teardown teardown((*c)->scope(&*child));
    teardown.prepare();
    say(fmt::format("ready {}", *port));
    char go = 0;
    if (::read(from_bench, &go, 1) != 1) return 1;
    TeardownOptions t;
    t.grace = std::chrono::milliseconds(grace_ms);
    // steady_clock is CLOCK_MONOTONIC, one clock for every process: the bench measures the
    // port release from the moment the keeper began, not from when it was scheduled.
    const auto began = Clock::now().time_since_epoch().count();
    TeardownReport r = teardown.run(t);
    say(fmt::format("{} {}", began, journal::teardown_report_json(r)));
    return 0;
}

[[noreturn]] void keeper_main(const std::string& strategy, const std::vector<std::string>& argv,
                              const std::string& tag, const std::string& port_file, int grace_ms,
                              int to_bench, int from_bench) {
    ::_exit(keeper_body(strategy, argv, tag, port_file, grace_ms, to_bench, from_bench));
}

Trial run_warden(const std::string& strategy, const std::vector<std::string>& argv,
                 const std::string& tag, const std::string& port_file, int grace_ms) {
    Trial tr;
    auto up = make_pipe();
    auto down = make_pipe();
    if (!up || !down) {
        tr.error = "pipe failed";
        return tr;
    }
    pid_t keeper = ::fork();
    if (keeper < 0) {
        tr.error = "fork failed";
        return tr;
    }
    if (keeper == 0) {
        up->read.reset();
        down->write.reset();
        keeper_main(strategy, argv, tag, port_file, grace_ms, up->write.get(), down->read.get());
    }
    up->write.reset();
    down->read.reset();
    std::string buf;
    auto read_line = [&]() -> std::optional<std::string> {
        for (;;) {
            auto nl = buf.find('\n');
            if (nl != std::string::npos) {
                std::string line = buf.substr(0, nl);
                buf.erase(0, nl + 1);
                return line;
            }
            pollfd pf{up->read.get(), POLLIN, 0};
            if (::poll(&pf, 1, 30000) <= 0) return std::nullopt;
            char tmp[65536];
            ssize_t n = ::read(up->read.get(), tmp, sizeof tmp);
            if (n <= 0) return std::nullopt;
            buf.append(tmp, static_cast<size_t>(n));
        }
    };
    // The keeper exits by itself once its report is out (or it gave up), removing its session
    // cgroup on the way out (Containment's destructor, which may wait for the last member's
    // exit). A SIGKILL sent as soon as the report arrived cut that short now and then and left
    // an empty `mcpwarden-bench-*` directory behind: the kill is for a keeper that does not
    // exit within kKeeperExitMs, after its pipe from us is closed.
    constexpr int kKeeperExitMs = 3000;
    const bool kill_at_once = Faults::from_env().bench_keeper_killed;
    auto finish = [&] {
        down->write.reset();            // a keeper still waiting for "go" reads EOF and leaves
        auto fd = Pidfd::open(keeper);  // our own unreaped child: no other process has its PID
        if (kill_at_once || !fd || !fd->wait_exit(kKeeperExitMs).value_or(false))
            ::kill(keeper, SIGKILL);
        ::waitpid(keeper, nullptr, 0);
        kill_tagged(tag);
    };
    auto first = read_line();
    if (!first || first->rfind("ready ", 0) != 0) {
        if (first && first->rfind("skip ", 0) == 0)
            tr.skipped = first->substr(5);
        else
            tr.error = first ? *first : "keeper died";
        finish();
        return tr;
    }
    const uint16_t port = static_cast<uint16_t>(std::atoi(first->c_str() + 6));
    const auto t0 = Clock::now();
    Prober prober(port, t0);
    (void)write_all(down->write.get(), "g", "keeper");
    auto report_line = read_line();
    const auto t1 = Clock::now();
    tr.port_held = !port_bindable(port);
    tr.orphans = static_cast<int>(live_tagged(tag, false).size());
    tr.release_ms = prober.finish(1000);
    // The keeper's line is "<steady_clock ticks when it began> <report JSON>"; the release is
    // timed from that moment, so the pipe wake-up of the keeper is not charged to warden.
    nlohmann::json j(nullptr);
    if (report_line) {
        size_t sp = report_line->find(' ');
        Clock::rep began = std::strtoll(report_line->c_str(), nullptr, 10);
        if (sp != std::string::npos && began > 0) {
            j = nlohmann::json::parse(report_line->substr(sp + 1), nullptr, false);
            const double late = ms_between(t0, Clock::time_point(Clock::duration(began)));
            if (tr.release_ms >= 0) tr.release_ms = std::max(0.0, tr.release_ms - late);
        }
    }
    if (j.is_object()) {
        tr.teardown_ms = j["phases_us"]["total"].get<double>() / 1000;
        for (const auto& [k, v] : j["phases_us"].items())
            if (k != "total" && v.is_number()) tr.phases_ms[k] = v.get<double>() / 1000;
        tr.exited_in_grace = j["counts"]["exited_in_grace"].get<int>();
        tr.killed = j["counts"]["killed"].get<int>();
    } else {
        tr.teardown_ms = ms_between(t0, t1);
        tr.error = "keeper sent no report";
    }
    finish();
    return tr;
}

double percentile(std::vector<double> v, double q) {
    if (v.empty()) return -1;
    std::sort(v.begin(), v.end());
    double pos = q * static_cast<double>(v.size() - 1);
    size_t lo = static_cast<size_t>(pos);
    size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

std::string fmt_ms(double v) {
    if (v < 0) return "-";
    return v < 10 ? fmt::format("{:.2f}", v) : fmt::format("{:.0f}", v);
}

}  // namespace

Result<TeardownBenchResult> run_teardown_bench(const TeardownBenchOptions& o) {
    const auto& shapes = o.shapes.empty() ? teardown_bench_shapes() : o.shapes;
    const auto& strategies = o.strategies.empty() ? teardown_bench_strategies() : o.strategies;
    for (const auto& s : shapes)
        if (std::find(teardown_bench_shapes().begin(), teardown_bench_shapes().end(), s) ==
            teardown_bench_shapes().end())
            return Error::msg("unknown shape '" + s + "'");
    for (const auto& s : strategies)
        if (std::find(teardown_bench_strategies().begin(), teardown_bench_strategies().end(), s) ==
            teardown_bench_strategies().end())
            return Error::msg("unknown strategy '" + s + "'");
    if (::access(o.fixture.c_str(), X_OK) != 0) return Error::sys("access", o.fixture, errno);

    char tmpl[] = "/tmp/mcpwarden-bench-XXXXXX";
    if (!::mkdtemp(tmpl)) return Error::sys("mkdtemp", tmpl, errno);
    const std::string dir = tmpl;

    TeardownBenchResult res;
    const int total = static_cast<int>(shapes.size() * strategies.size()) * o.trials;
    int n = 0;
    // The strategies of a shape take turns, trial by trial: the machine's speed drifts (a
    // shared VM's by 2x within minutes), and a cell whose trials all ran in one slow spell
    // would lose to the others for that alone. Interleaved, every strategy of the shape
    // meets the same spells, and the comparison the table exists for is between them.
    for (const auto& shape : shapes) {
        std::vector<TeardownCell> cells(strategies.size());
        for (size_t k = 0; k < strategies.size(); ++k) {
            cells[k].strategy = strategies[k];
            cells[k].shape = shape;
        }
        for (int i = 0; i < o.trials; ++i) {
            for (size_t k = 0; k < strategies.size(); ++k) {
                TeardownCell& cell = cells[k];
                const std::string& strategy = strategies[k];
                if (!cell.skipped.empty()) continue;  // counted in n when it was skipped
                ++n;
                const std::string tag = fmt::format("bench-{}-{}", ::getpid(), n);
                const std::string port_file = dir + "/" + tag + ".port";
                auto argv = fixture_argv(shape, o.fixture, port_file);
                Trial tr = strategy.rfind("warden-", 0) == 0
                               ? run_warden(strategy, argv, tag, port_file, o.grace_ms)
                               : run_classic(strategy, argv, tag, port_file, o.grace_ms);
                ::unlink(port_file.c_str());
                if (!tr.skipped.empty()) {
                    cell.skipped = tr.skipped;
                    if (o.progress)
                        o.progress(fmt::format("[{}/{}] {} {}: skipped ({})", n, total, strategy,
                                               shape, tr.skipped));
                    n += o.trials - i - 1;
                    continue;
                }
                if (!tr.error.empty()) {
                    if (cell.errors++ == 0) cell.error = tr.error;
                    if (o.progress)
                        o.progress(fmt::format("[{}/{}] {} {}: error: {}", n, total, strategy,
                                               shape, tr.error));
                    continue;
                }
                ++cell.trials;
                cell.orphans += tr.orphans;
                cell.orphan_trials += tr.orphans > 0;
                cell.port_held_trials += tr.port_held;
                cell.teardown_ms.push_back(tr.teardown_ms);
                for (const auto& [key, v] : tr.phases_ms)
                    cell.phases_ms[key].push_back(v);
                if (tr.release_ms >= 0)
                    cell.release_ms.push_back(tr.release_ms);
                else
                    ++cell.never_released;
                cell.exited_in_grace += tr.exited_in_grace;
                cell.killed += tr.killed;
                if (o.progress)
                    o.progress(fmt::format(
                        "[{}/{}] {} {}: {} orphan(s), port {} at return, teardown {} ms, "
                        "release {}",
                        n, total, strategy, shape, tr.orphans, tr.port_held ? "held" : "free",
                        fmt_ms(tr.teardown_ms),
                        tr.release_ms >= 0 ? fmt_ms(tr.release_ms) + " ms" : "never"));
            }
        }
        for (TeardownCell& cell : cells)
            res.cells.push_back(std::move(cell));
    }
    ::rmdir(dir.c_str());
    return res;
}

std::string TeardownBenchResult::render_table() const {
    // A second header line carries each column's unit: the share of trials, milliseconds,
    // processes (summed over the trials).
    const char* row = "{:<17} {:<12} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6}\n";
    std::string out = fmt::format(fmt::runtime(row), "strategy", "shape", "orphans", "port-held",
                                  "td-med", "td-p90", "rel-med", "rel-p90", "in-grace", "killed") +
                      fmt::format(fmt::runtime(row), "", "", "%trials", "%trials", "ms", "ms", "ms",
                                  "ms", "procs", "procs");
    for (const TeardownCell& c : cells) {
        if (!c.skipped.empty()) {
            out += fmt::format("{:<17} {:<12} skipped: {}\n", c.strategy, c.shape, c.skipped);
            continue;
        }
        if (c.errors)
            out += fmt::format("{:<17} {:<12} {} of {} trial(s) failed: {}\n", c.strategy, c.shape,
                               c.errors, c.errors + c.trials, c.error);
        if (c.trials == 0) continue;
        auto pct = [&](int k) {
            return c.trials ? fmt::format("{:.0f}%", 100.0 * k / c.trials) : std::string("-");
        };
        std::string rel_med = fmt_ms(percentile(c.release_ms, 0.5));
        std::string rel_p90 = fmt_ms(percentile(c.release_ms, 0.9));
        if (c.never_released > 0) {
            if (c.release_ms.empty())
                rel_med = rel_p90 = "never";
            else
                rel_p90 = fmt::format("never({})", c.never_released);
        }
        out += fmt::format(
            "{:<17} {:<12} {:>7} {:>9} {:>9} {:>9} {:>9} {:>9} {:>8} {:>6}\n", c.strategy, c.shape,
            pct(c.orphan_trials), pct(c.port_held_trials), fmt_ms(percentile(c.teardown_ms, 0.5)),
            fmt_ms(percentile(c.teardown_ms, 0.9)), rel_med, rel_p90, c.exited_in_grace, c.killed);
    }
    return out;
}

int TeardownBenchResult::errors() const {
    int n = 0;
    for (const TeardownCell& c : cells)
        n += c.errors;
    return n;
}

std::string TeardownBenchResult::to_json() const {
    nlohmann::json cs = nlohmann::json::array();
    for (const TeardownCell& c : cells) {
        nlohmann::json j{{"strategy", c.strategy},
                         {"shape", c.shape},
                         {"trials", c.trials},
                         {"orphan_trials", c.orphan_trials},
                         {"orphans", c.orphans},
                         {"port_held_trials", c.port_held_trials},
                         {"teardown_ms", c.teardown_ms},
                         {"release_ms", c.release_ms},
                         {"never_released", c.never_released},
                         {"teardown_median_ms", percentile(c.teardown_ms, 0.5)},
                         {"teardown_p90_ms", percentile(c.teardown_ms, 0.9)},
                         {"release_median_ms", percentile(c.release_ms, 0.5)},
                         {"release_p90_ms", percentile(c.release_ms, 0.9)},
                         {"exited_in_grace", c.exited_in_grace},
                         {"killed", c.killed}};
        if (!c.skipped.empty()) j["skipped"] = c.skipped;
        if (!c.phases_ms.empty()) {
            nlohmann::json ph = nlohmann::json::object();
            for (const auto& [k, v] : c.phases_ms)
                ph[k] = percentile(v, 0.5);
            j["phase_median_ms"] = ph;
        }
        if (c.errors) {
            j["errors"] = c.errors;
            j["error"] = c.error;
        }
        cs.push_back(j);
    }
    return nlohmann::json{{"schema", "mcpwarden.bench.teardown"},
                          {"schema_version", 1},
                          {"benchmark", "teardown"},
                          {"command", command},
                          {"cells", cs}}
        .dump(2);
}

// Median port-release time per strategy, grouped by shape, on a log axis
// (teardown_chart.hpp); a port never released in most trials is drawn as "never".
std::string TeardownBenchResult::render_svg() const {
    std::vector<ReleaseBar> bars;
    for (const TeardownCell& c : cells) {
        if (!c.skipped.empty() || c.trials == 0) continue;
        const bool never = c.release_ms.empty() || c.never_released * 2 > c.trials;
        bars.push_back({c.shape, c.strategy, never ? -1 : percentile(c.release_ms, 0.5)});
    }
    return release_chart_svg(bars);
}

}  // namespace warden::drill
