#include "drill/drill.hpp"

#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <thread>

#include <fmt/format.h>

#include "contain/layers.hpp"
#include "drill/client.hpp"
#include "drill/tagged.hpp"
#include "drill/trial_record.hpp"
#include "journal/query.hpp"
#include "journal/redact.hpp"
#include "proc/process_table.hpp"
#include "proc/sockets.hpp"
#include "sys/pidfd.hpp"
#include "sys/pipe.hpp"

namespace warden::drill {

std::string_view to_string(CrashAt c) {
    switch (c) {
        case CrashAt::BeforeInit:
            return "before-init";
        case CrashAt::Idle:
            return "idle";
        case CrashAt::InFlight:
            return "in-flight";
        case CrashAt::MidResponse:
            return "mid-response";
    }
    return "?";
}

Result<CrashAt> parse_crash_at(std::string_view t) {
    for (CrashAt c : {CrashAt::BeforeInit, CrashAt::Idle, CrashAt::InFlight, CrashAt::MidResponse})
        if (t == to_string(c)) return c;
    return Error::msg("--crash-at: expected before-init, idle, in-flight or mid-response, got '" +
                      std::string(t) + "'");
}

std::string_view to_string(Mode m) {
    return m == Mode::shim ? "with mcpwarden" : "without mcpwarden";
}

std::string paint(bool color, const char* code, const std::string& s) {
    return color ? fmt::format("\x1b[{}m{}\x1b[0m", code, s) : s;
}

std::string format_ms(double ms) {
    if (ms < 0) return "never";
    if (ms < 10) return fmt::format("{:.1f} ms", ms);
    if (ms < 1000) return fmt::format("{:.0f} ms", ms);
    return fmt::format("{:.1f} s", ms / 1000);
}

std::string format_mb(double mb) {
    return mb < 10 ? fmt::format("{:.1f}", mb) : fmt::format("{:.0f}", mb);
}

bool TrialResult::contained() const {
    if (!error.empty()) return false;
    if (!left.empty() || port_held || !clean_after) return false;
    if (mode == Mode::shim) {
        if (run_exit_ms < 0) return false;
        if (!journal || !journal->session_found || !journal->order_ok) return false;
        if (journal->abandoned && !*journal->abandoned && !answered && !journal->response_recorded)
            return false;
    }
    return true;
}

const TrialResult* DrillResult::first(Mode m) const {
    for (const auto& t : trials)
        if (t.mode == m && t.error.empty()) return &t;
    return nullptr;
}

bool DrillResult::ok() const {
    for (const auto& t : trials) {
        if (!t.clean_after) return false;
        if (t.mode == Mode::shim && !t.contained()) return false;
    }
    return !verified || verify_ok;
}

namespace {
volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) {
    g_interrupted = 1;
}
}  // namespace

void handle_interrupts() {
    struct sigaction sa {};
    sa.sa_handler = on_interrupt;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = 0;
    for (int sig : {SIGINT, SIGTERM, SIGHUP})
        ::sigaction(sig, &sa, nullptr);
}

bool interrupted() {
    return g_interrupted != 0;
}

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

void say(const DrillOptions& o, const std::string& line) {
    if (o.progress) o.progress(line);
}

std::string random_hex(int n) {
    static std::mt19937_64 rng{std::random_device{}()};
    std::string s;
    for (int i = 0; i < n; ++i)
        s += "0123456789abcdef"[rng() % 16];
    return s;
}

// Redacted before it is cut: a cut could leave half a credential its shape no longer shows.
// The drill's report is written to be shared.
std::string short_command(const Process& p, size_t max = 60) {
    std::string c = journal::redact_text(p.display_command());
    if (c.size() > max) c = c.substr(0, max - 3) + "...";
    return c;
}

// ---- start_client / reach_crash_point ---------------------------------------------------

struct Client {
    pid_t pid = 0;
    Fd reports;
    std::string buf;
    pid_t spawned = 0;  // `run` (shim) or the server (direct)
    std::string state;  // from "ready <state> <bytes>"
    size_t bytes = 0;
    std::string error;
};

Result<Client> start_client(const ClientConfig& cfg) {
    auto p = make_pipe();
    if (!p) return p.error();
    pid_t pid = ::fork();
    if (pid < 0) return Error::sys("fork", "drill client", errno);
    if (pid == 0) {
        p->read.reset();
        client_main(cfg, p->write.get());
    }
    Client c;
    c.pid = pid;
    c.reports = std::move(p->read);
    return c;
}

// Reads report lines until the client is at its crash point, failed, or the deadline.
void reach_crash_point(Client& c, Clock::time_point deadline) {
    for (;;) {
        for (auto nl = c.buf.find('\n'); nl != std::string::npos; nl = c.buf.find('\n')) {
            std::string line = c.buf.substr(0, nl);
            c.buf.erase(0, nl + 1);
            if (line.rfind("spawned ", 0) == 0) {
                c.spawned = static_cast<pid_t>(std::atoi(line.c_str() + 8));
            } else if (line.rfind("ready ", 0) == 0) {
                auto sp = line.find(' ', 6);
                c.state = line.substr(6, sp - 6);
                if (sp != std::string::npos)
                    c.bytes = std::strtoull(line.c_str() + sp + 1, nullptr, 10);
                return;
            } else if (line.rfind("error ", 0) == 0) {
                c.error = line.substr(6);
                return;
            }
        }
        if (interrupted()) {
            c.error = "interrupted";
            return;
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) {
            c.error = "the crash point was not reached in time";
            return;
        }
        pollfd pf{c.reports.get(), POLLIN, 0};
        int r = ::poll(&pf, 1, static_cast<int>(left.count()));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) continue;
        char tmp[4096];
        ssize_t n = ::read(c.reports.get(), tmp, sizeof tmp);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            c.error = "the drill client died before the crash point";
            return;
        }
        c.buf.append(tmp, static_cast<size_t>(n));
    }
}

void kill_client(Client& c) {
    if (c.pid <= 0) return;
    ::kill(c.pid, SIGKILL);  // our own unreaped child: never a recycled pid
    while (::waitpid(c.pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    c.pid = 0;
}

// The session marker `run` gave the tree: the value of MCPWARDEN_SESSION on a descendant
// of the client. Bounded: the server may still be starting (before-init).
std::string find_session_marker(pid_t client, Clock::time_point deadline) {
    for (;;) {
        ProcessTable t = ProcessTable::scan(kEnvNames);
        if (const Process* c = t.find(client)) {
            for (const Process* d : t.descendants(c->id))
                if (d->session_marker && !d->session_marker->empty()) return *d->session_marker;
        }
        if (Clock::now() >= deadline || interrupted()) return {};
        ::usleep(5000);
    }
}

// In flight under the shim: the call is committed to the journal before it is forwarded, so
// its row is the proof that the server has it. Bounded.
bool wait_for_request_on_record(const std::string& journal, const std::string& session,
                                Clock::time_point deadline) {
    journal::Filter f;
    f.session = session;
    const std::string id = std::to_string(kCallId);
    for (;;) {
        if (auto rows = journal::list_activity(journal, f))
            for (const auto& r : *rows)
                if (r.request_id == id) return true;
        if (Clock::now() >= deadline || interrupted()) return false;
        ::usleep(5000);
    }
}

// ---- snapshot_tree ----------------------------------------------------------------------

struct Watch {
    std::vector<TreeProcess> procs;
    std::vector<Pidfd> fds;  // parallel to procs
    std::vector<PortState> ports;
};

Watch snapshot_tree(const std::string& tag) {
    Watch w;
    ProcessTable t = ProcessTable::scan(kEnvNames | kStatus | kCmdline | kFds | kNetNs);
    SocketTables sockets = SocketTables::load(t);
    const uid_t me = ::getuid();
    std::set<std::pair<std::string, uint16_t>> seen;
    std::vector<const Process*> members;
    for (const Process& p : t.all())
        if (!p.zombie() && p.uid == me && p.session_marker && *p.session_marker == tag)
            members.push_back(&p);
    // The server: the oldest member whose parent is not a member.
    const Process* server = nullptr;
    for (const Process* p : members) {
        bool parent_member = std::any_of(members.begin(), members.end(),
                                         [&](const Process* q) { return q->id.pid == p->ppid; });
        if (!parent_member && (!server || p->id.starttime < server->id.starttime)) server = p;
    }
    for (const Process* p : members) {
        TreeProcess tp;
        tp.id = p->id;
        tp.ppid = p->ppid;
        tp.command = short_command(*p);
        tp.rss_mb = static_cast<double>(p->rss_kb) / 1024.0;
        tp.server = p == server;
        Pidfd fd;
        if (auto o = Pidfd::open(p->id.pid)) {
            auto again = read_identity(p->id.pid);
            if (again && again->starttime == p->id.starttime) fd = std::move(*o);
        }
        w.procs.push_back(tp);
        w.fds.push_back(std::move(fd));
        for (const auto& f : p->fds) {
            if (f.kind != FdInfo::Kind::Socket) continue;
            const SocketEntry* s = sockets.lookup(*p, f.inode);
            if (!s || !s->listening() || s->proto != SocketEntry::Proto::Tcp) continue;
            if (seen.insert({s->local_addr, s->local_port}).second)
                w.ports.push_back(PortState{s->local_addr, s->local_port, -1});
        }
    }
    return w;
}

// ---- watch_release ----------------------------------------------------------------------

struct Extra {
    Pidfd fd;
    double ended_ms = -1;
};

// Until every member ended, every port binds again and every `extra` (the `run` relay) ended,
// or the deadline. Event-driven on the pidfds; the ports are probed every millisecond while
// one is held (a bind is the only outside proof of release).
void watch_release(Watch& w, std::vector<Extra*> extras, Clock::time_point t0,
                   Clock::time_point deadline) {
    for (;;) {
        const double now = ms_since(t0);
        for (auto& p : w.ports)
            if (p.free_ms < 0 && port_bindable(p.port, p.addr)) p.free_ms = now;
        for (size_t i = 0; i < w.procs.size(); ++i)
            if (w.procs[i].ended_ms < 0 && !w.fds[i].valid() && !is_alive(w.procs[i].id))
                w.procs[i].ended_ms = now;
        bool procs_done = std::all_of(w.procs.begin(), w.procs.end(),
                                      [](const TreeProcess& p) { return p.ended_ms >= 0; });
        bool ports_done = std::all_of(w.ports.begin(), w.ports.end(),
                                      [](const PortState& p) { return p.free_ms >= 0; });
        bool extras_done = std::all_of(extras.begin(), extras.end(),
                                       [](const Extra* e) { return e->ended_ms >= 0; });
        if ((procs_done && ports_done && extras_done) || interrupted()) return;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return;
        std::vector<pollfd> pfs;
        std::vector<double*> ends;
        for (size_t i = 0; i < w.procs.size(); ++i)
            if (w.procs[i].ended_ms < 0 && w.fds[i].valid()) {
                pfs.push_back({w.fds[i].get(), POLLIN, 0});
                ends.push_back(&w.procs[i].ended_ms);
            }
        for (Extra* e : extras)
            if (e->ended_ms < 0 && e->fd.valid()) {
                pfs.push_back({e->fd.get(), POLLIN, 0});
                ends.push_back(&e->ended_ms);
            }
        const bool fds_only = ports_done && std::all_of(w.fds.begin(), w.fds.end(),
                                                        [](const Pidfd& f) { return f.valid(); });
        int timeout = fds_only ? static_cast<int>(std::min<int64_t>(left.count(), 1000)) : 1;
        int r = ::poll(pfs.data(), pfs.size(), timeout);
        if (r < 0 && errno != EINTR) return;
        const double at = ms_since(t0);
        for (size_t i = 0; i < pfs.size(); ++i)
            if (pfs[i].revents) *ends[i] = at;
        for (Extra* e : extras)
            if (e->ended_ms < 0 && !e->fd.valid()) e->ended_ms = at;
    }
}

// ---- the keeper ----------------------------------------------------------------------------

// `run` reaps its keeper before it exits (docs/RUN.md, "When run returns"); one that names a
// keeper on record which is still alive after `run` exited broke that, and a drill that
// returned then would leave it behind. So the drill checks the keeper it finds on record
// (session.start, by identity); one that has not exited in the bound is a finding, and ended
// by pidfd. Returns how many it had to end.
int await_keeper(const std::string& journal, const std::string& session,
                 std::vector<std::string>& notes) {
    auto recs = journal::session_records(journal, session);
    if (!recs) return 0;
    ProcessId keeper;
    for (const auto& r : *recs) {
        if (r.kind != "session.start") continue;
        auto body = nlohmann::json::parse(r.body, nullptr, false);
        if (body.is_object() && body["data"].contains("keeper"))
            keeper = journal::identity_of(body["data"]["keeper"]);
    }
    if (keeper.pid <= 0) return 0;
    auto fd = Pidfd::open(keeper.pid);
    if (!fd) return 0;  // gone already
    auto now = read_identity(keeper.pid);
    if (!now || now->starttime != keeper.starttime) return 0;  // gone, its PID reused
    constexpr int kKeeperBoundMs = 5000;
    if (auto gone = fd->wait_exit(kKeeperBoundMs); gone && *gone) return 0;
    notes.push_back(fmt::format("the keeper (pid {}) had not exited {} s after run", keeper.pid,
                                kKeeperBoundMs / 1000));
    if (!fd->send_signal(SIGKILL)) return 0;
    (void)fd->wait_exit(1000);
    return 1;
}

// ---- one trial --------------------------------------------------------------------------

std::vector<std::string> run_argv(const DrillOptions& o, const std::string& journal) {
    std::vector<std::string> a = {o.mcpwarden.empty() ? self_exe() : o.mcpwarden,
                                  "run",
                                  "--journal",
                                  journal,
                                  "--eof-grace",
                                  std::to_string(o.eof_grace.count()) + "ms",
                                  "--term-grace",
                                  std::to_string(o.term_grace.count()) + "ms"};
    if (!o.label.empty()) {
        a.push_back("--name");
        a.push_back(o.label);
    }
    a.push_back("--");
    a.insert(a.end(), o.command.begin(), o.command.end());
    return a;
}

// The longest `run` may take after the kill: EOF window, grace, its kill wait (3 s) and the
// relay's slack for a keeper that does not report (5 s), plus a margin.
std::chrono::milliseconds run_bound(const DrillOptions& o) {
    return o.eof_grace + o.term_grace + std::chrono::milliseconds(10000);
}

// The client of one trial: `run` in front of the server (shim), or the server alone with the
// marker the drill finds its tree by (direct).
ClientConfig trial_client(const DrillOptions& o, Mode mode, int index, TrialResult& t) {
    ClientConfig cc;
    cc.drill = &o;
    if (mode == Mode::shim) {
        cc.argv = run_argv(o, o.journal);
        cc.unset_env = {"MCPWARDEN_SESSION", "MCPWARDEN_NO_JOURNAL"};
    } else {
        t.tag = fmt::format("drill-{}-{}-{}", ::getpid(), index, random_hex(8));
        cc.argv = o.command;
        cc.env = {"MCPWARDEN_SESSION=" + t.tag};
    }
    return cc;
}

// At the crash point: `run` and its session's marker found (shim), the call on record before
// the client dies (or a moment for the server to read it), and what the client had read.
void at_the_crash_point(const DrillOptions& o, Mode mode, Client& c, Extra& run, TrialResult& t) {
    if (c.error.empty() && mode == Mode::shim) {
        if (c.spawned > 0)
            if (auto fd = Pidfd::open(c.spawned)) run.fd = std::move(*fd);
        t.tag = find_session_marker(c.pid, Clock::now() + std::chrono::seconds(5));
        if (t.tag.empty()) c.error = "no process of the session carries MCPWARDEN_SESSION";
    }
    if (c.error.empty() && c.state == "sent") {
        if (mode == Mode::shim) {
            if (!wait_for_request_on_record(o.journal, t.tag,
                                            Clock::now() + std::chrono::seconds(5)))
                t.notes.push_back("the call was not on record 5 s after it was sent");
        } else {
            // Without the shim there is no record to wait for: give the server a moment to
            // read the call off its stdin.
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
    }
    if (c.state == "answered") {
        t.answered = true;
        t.notes.push_back(
            "the whole answer arrived before the crash: name a tool with a large result "
            "(--tool) for a real mid-response crash");
    }
    if (c.state == "partial")
        t.notes.push_back(fmt::format("killed after {} bytes of the answer", c.bytes));
}

// A trial that could not reach its crash point: everything it started ended, by identity.
void end_failed_trial(const DrillOptions& o, Mode mode, Client& c, Extra& run, TrialResult& t) {
    t.error = c.error;
    kill_client(c);
    if (run.fd.valid()) (void)run.fd.wait_exit(static_cast<int>(run_bound(o).count()));
    if (!t.tag.empty()) t.cleaned_up = kill_tagged(t.tag);
    if (mode == Mode::shim && !t.tag.empty())
        t.cleaned_up += await_keeper(o.journal, t.tag, t.notes);
    t.clean_after = t.tag.empty() || live_tagged(t.tag).empty();
}

// What is still there once the watch ended (a fresh scan: a process forked after the
// snapshot counts too), and when the tree and its ports were released.
void tally_the_release(const Watch& w, TrialResult& t) {
    for (const ProcessId& id : live_tagged(t.tag, false)) {
        TreeProcess tp;
        tp.id = id;
        if (auto p = read_process(id.pid, kBasic); p && p->id.starttime == id.starttime) {
            tp.ppid = p->ppid;
            tp.command = short_command(*p);
            tp.rss_mb = static_cast<double>(p->rss_kb) / 1024.0;
        }
        for (const auto& s : w.procs)
            if (s.id == id) tp.server = s.server;
        t.left_mb += tp.rss_mb;
        t.left.push_back(tp);
    }
    for (const auto& p : w.ports)
        if (p.free_ms < 0 && !port_bindable(p.port, p.addr)) t.port_held = true;
    t.tree = w.procs;
    t.ports = w.ports;
    double gone = 0, free = 0;
    bool all_gone = true, all_free = true;
    for (const auto& p : t.tree) {
        if (p.ended_ms < 0) all_gone = false;
        gone = std::max(gone, p.ended_ms);
    }
    for (const auto& p : t.ports) {
        if (p.free_ms < 0) all_free = false;
        free = std::max(free, p.free_ms);
    }
    t.gone_ms = all_gone && t.left.empty() ? gone : -1;
    t.ports_free_ms = all_free ? free : -1;
    t.released_ms =
        t.gone_ms >= 0 && t.ports_free_ms >= 0 ? std::max(t.gone_ms, t.ports_free_ms) : -1;
}

// clean_up: nothing carrying the marker outlives the drill, whatever happened before.
void clean_up_trial(const DrillOptions& o, Mode mode, Extra& run, TrialResult& t) {
    t.cleaned_up = kill_tagged(t.tag);
    if (mode == Mode::shim && run.ended_ms < 0 && run.fd.valid()) {
        // `run` outlived its bound: a finding, and ours to end (bound by pidfd).
        if (run.fd.send_signal(SIGKILL)) ++t.cleaned_up;
        (void)run.fd.wait_exit(1000);
    }
    if (mode == Mode::shim) t.cleaned_up += await_keeper(o.journal, t.tag, t.notes);
    t.clean_after = live_tagged(t.tag).empty();
}

std::string trial_summary(const TrialResult& t) {
    std::string summary;
    if (t.left.empty() && !t.port_held)
        summary = fmt::format("nothing left; released after {}", format_ms(t.released_ms));
    else
        summary = fmt::format("{} process(es), {} MB left after {}{}", t.left.size(),
                              format_mb(t.left_mb), format_ms(t.watched_ms),
                              t.port_held ? ", port held" : "");
    if (t.cleaned_up > 0) summary += fmt::format("; {} cleaned up by identity", t.cleaned_up);
    return summary;
}

// One trial: start the client, bring it to the crash point, look at the tree, SIGKILL the
// client (the way a crashing client goes), watch what is released and when, read the record
// (shim), and end whatever is left.
TrialResult run_trial(const DrillOptions& o, Mode mode, int index, const std::string& what) {
    TrialResult t;
    t.mode = mode;
    t.crash_at = o.crash_at;
    t.index = index;
    if (o.crash_at == CrashAt::InFlight || o.crash_at == CrashAt::MidResponse) {
        t.call = o.tool.empty() ? "tools/list" : "tools/call " + o.tool;
        t.call_id = std::to_string(kCallId);
    }
    const ClientConfig cc = trial_client(o, mode, index, t);
    say(o,
        fmt::format("{} {}: starting, crash at {}", what, to_string(mode), to_string(o.crash_at)));
    auto started = start_client(cc);
    if (!started) {
        t.error = started.error().message;
        return t;
    }
    Client c = std::move(*started);
    const auto start = Clock::now();
    reach_crash_point(c, start + o.startup_timeout + o.settle + std::chrono::seconds(2));
    Extra run;  // `run` (shim), watched to its exit
    at_the_crash_point(o, mode, c, run, t);
    if (!c.error.empty()) {
        end_failed_trial(o, mode, c, run, t);
        return t;
    }

    Watch w = snapshot_tree(t.tag);
    for (const auto& p : w.procs) {
        t.tree_mb += p.rss_mb;
        if (!p.server) ++t.helpers;
    }
    const bool had_server =
        std::any_of(w.procs.begin(), w.procs.end(), [](const TreeProcess& p) { return p.server; });
    std::string ports;
    for (const auto& p : w.ports)
        ports += (ports.empty() ? ", port " : ",") + std::to_string(p.port);
    say(o, fmt::format("{} {}: {}{}; tree {} process(es), {} MB{}; killing the client", what,
                       to_string(mode),
                       c.state == "quiet"  ? "server started, nothing sent"
                       : c.state == "idle" ? "initialized, idle"
                                           : t.call + " in flight",
                       c.state == "partial" ? fmt::format(" ({} bytes read)", c.bytes) : "",
                       w.procs.size(), format_mb(t.tree_mb), ports));

    // kill_client: SIGKILL, the way a crashing client goes.
    const auto t0 = Clock::now();
    kill_client(c);
    const auto deadline = t0 + (mode == Mode::shim ? run_bound(o) : o.eof_grace + o.term_grace);
    std::vector<Extra*> extras;
    if (mode == Mode::shim) extras.push_back(&run);
    watch_release(w, extras, t0, deadline);
    t.watched_ms = ms_since(t0);
    t.run_exit_ms = run.ended_ms;
    if (mode == Mode::shim && run.ended_ms < 0)
        t.notes.push_back("mcpwarden run had not exited when the watch ended");
    tally_the_release(w, t);

    // The server's fate as seen from outside (the shim's journal refines it below).
    for (const auto& p : t.tree)
        if (p.server) t.server_fate = p.ended_ms >= 0 ? "exited on EOF" : "still running";
    if (!had_server) t.server_fate = "gone before the kill";
    if (mode == Mode::shim) {
        const bool outstanding = !t.call.empty() && !t.answered;
        t.journal = read_the_record(o.journal, t, outstanding);
        if (t.journal->abandoned && !*t.journal->abandoned)
            t.notes.push_back("the server answered " + t.call +
                              " before the client died: nothing was in flight");
    }
    clean_up_trial(o, mode, run, t);
    say(o, fmt::format("{} {}: {}", what, to_string(mode), trial_summary(t)));
    return t;
}

}  // namespace

Result<DrillResult> run_drill(const DrillOptions& o) {
    if (o.command.empty()) return Error::msg("drill: no server command given (-- CMD [ARGS...])");
    if (o.shim && o.journal.empty())
        return Error::msg("drill: no journal path for the shim trials");
    if (!o.tool.empty()) {
        auto a = nlohmann::json::parse(o.args_json, nullptr, false);
        if (a.is_discarded() || !a.is_object())
            return Error::msg("--args: expected a JSON object, got '" + o.args_json + "'");
    }
    DrillResult r;
    r.label = o.label.empty() ? o.command[0].substr(o.command[0].rfind('/') + 1) : o.label;
    r.command = o.command;
    r.crash_at = o.crash_at;
    if (o.crash_at == CrashAt::InFlight || o.crash_at == CrashAt::MidResponse)
        r.call = o.tool.empty() ? "tools/list" : "tools/call " + o.tool;
    r.journal_path = o.shim ? o.journal : "";
    const int per = (o.compare_direct ? 1 : 0) + (o.shim ? 1 : 0);
    const int total = per * o.trials;
    int n = 0;
    for (int i = 1; i <= o.trials && !interrupted(); ++i) {
        if (o.compare_direct) {
            ++n;
            r.trials.push_back(
                run_trial(o, Mode::direct, i, fmt::format("[{}/{}] {}", n, total, r.label)));
        }
        if (o.shim && !interrupted()) {
            ++n;
            r.trials.push_back(
                run_trial(o, Mode::shim, i, fmt::format("[{}/{}] {}", n, total, r.label)));
        }
    }
    if (o.shim && o.verify) verify_journal(o.journal, r);
    return r;
}

}  // namespace warden::drill
