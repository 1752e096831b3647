#include "shim/keeper.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <span>
#include <thread>

#include <fmt/format.h>

#include "contain/spawner.hpp"
#include "contain/teardown.hpp"
#include "journal/intents.hpp"
#include "journal/query.hpp"
#include "record/teardown_record.hpp"
#include "shim/journal_sink.hpp"
#include "shim/keeper_impl.hpp"
#include "sys/background_thread.hpp"
#include "sys/fd_passing.hpp"
#include "sys/pipe.hpp"
#include "sys/signalfd.hpp"

namespace warden::shim {

// ---- LineReader, messages ---------------------------------------------------------------

void LineReader::fill() {
    char buf[4096];
    for (int i = 0; i < 1024; ++i) {
        ssize_t n = ::read(fd_, buf, sizeof buf);
        if (n > 0) {
            buf_.append(buf, static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (n < 0 && errno != EAGAIN)) eof_ = true;
        return;
    }
}

std::optional<std::string> LineReader::next_line() {
    auto nl = buf_.find('\n');
    if (nl == std::string::npos) return std::nullopt;
    std::string line = buf_.substr(0, nl);
    buf_.erase(0, nl + 1);
    return line;
}

KeeperMessage parse_keeper_message(std::string_view line) {
    KeeperMessage m;
    auto word = [&]() {
        auto sp = line.find(' ');
        std::string_view w = line.substr(0, sp);
        line.remove_prefix(sp == std::string_view::npos ? line.size() : sp + 1);
        return std::string(w);
    };
    auto num = [&]() -> long long { return std::strtoll(word().c_str(), nullptr, 10); };
    std::string kind = word();
    if (kind == "spawned") {
        m.kind = KeeperMessage::Kind::spawned;
        m.server.pid = static_cast<pid_t>(num());
        m.server.starttime = static_cast<uint64_t>(num());
        m.cgroup_dir = word();
        if (m.cgroup_dir == "-") m.cgroup_dir.clear();
        m.json = std::string(line);
    } else if (kind == "spawn-failed") {
        m.kind = KeeperMessage::Kind::spawn_failed;
        m.err = static_cast<int>(num());
        m.exit_code = static_cast<int>(num());
        m.message = std::string(line);
    } else if (kind == "exited") {
        m.kind = KeeperMessage::Kind::exited;
        m.status = static_cast<int>(num());
    } else if (kind == "report") {
        m.kind = KeeperMessage::Kind::report;
        m.json = std::string(line);
    } else if (kind == "record") {
        m.kind = KeeperMessage::Kind::record;
        m.json = std::string(line);
    } else if (kind == "asleep") {
        m.kind = KeeperMessage::Kind::asleep;
        m.cgroup_dir = word();
        if (m.cgroup_dir == "-") m.cgroup_dir.clear();
        m.json = std::string(line);
    } else if (kind == "hibernated") {
        m.kind = KeeperMessage::Kind::hibernated;
        m.json = std::string(line);
    } else if (kind == "wake-failed") {
        m.kind = KeeperMessage::Kind::wake_failed;
        m.message = std::string(line);
    }
    return m;
}

// ---- session.end ------------------------------------------------------------------------

journal::SessionEnd session_end_record(const std::string& session, const std::string& reason,
                                       std::optional<int> server_status,
                                       const std::optional<std::string>& report_json) {
    journal::SessionEnd e;
    e.session = session;
    e.reason = reason;
    if (server_status && WIFEXITED(*server_status)) e.exit_status = WEXITSTATUS(*server_status);
    if (server_status && WIFSIGNALED(*server_status)) e.term_signal = WTERMSIG(*server_status);
    if (report_json) {
        auto j = journal::Json::parse(*report_json, nullptr, false);
        if (!j.is_discarded()) e.teardown = std::move(j);
    }
    return e;
}

int64_t trace_clock_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

void trace_phase(const char* name, int64_t at_ns) {
    static const bool on = [] {
        const char* v = std::getenv("MCPWARDEN_PHASES");
        return v && *v == '1';
    }();
    if (!on) return;
    char line[128];
    timespec cpu{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &cpu);
    int n = std::snprintf(line, sizeof line, "mcpwarden-phase %s %lld %lld\n", name,
                          static_cast<long long>(at_ns ? at_ns : trace_clock_ns()),
                          static_cast<long long>(cpu.tv_sec * 1000000000LL + cpu.tv_nsec));
    if (n > 0) (void)!::write(2, line, static_cast<size_t>(std::min<int>(n, sizeof line - 1)));
}

// ---- The keeper -------------------------------------------------------------------------

namespace {

// Test condition keeper_dies_after_signal: the keeper SIGKILLs itself right after its first
// signal, between the signal and the commit of its records.
class DiesAfterFirstSignal final : public TeardownObserver {
  public:
    explicit DiesAfterFirstSignal(TeardownObserver& inner) : inner_(inner) {}
    void on_snapshot(int round, const std::vector<const Target*>& targets) override {
        inner_.on_snapshot(round, targets);
    }
    void on_signalling(const Target& t, int sig) override { inner_.on_signalling(t, sig); }
    void on_signal(const Target& t, int sig, const Status& result) override {
        inner_.on_signal(t, sig, result);
        ::raise(SIGKILL);
    }
    void on_exit(const Target& t, Outcome how) override { inner_.on_exit(t, how); }

  private:
    TeardownObserver& inner_;
};

}  // namespace

int Keeper::run() {
    ignore_terminal_signals();
    trace_phase("keeper_start");
    const bool contained = set_up_containment();
    trace_phase("keeper_contained");
    if (!contained || !await_sandbox_ready() || !start_server()) {
        // The private directory is ours to remove once the relay said it made it.
        if (sandbox_ready_) sandbox::remove_private_tmp(cfg_.sandbox->private_tmp());
        return 1;
    }
    Cause cause = wait_for_teardown_cause();
    for (; cause == Cause::hibernate || cause == Cause::wake; cause = wait_for_teardown_cause())
        if (cause == Cause::hibernate)
            hibernate();
        else
            wake();
    trace_phase("keeper_asked");
    auto report = tear_down_tree(cause);
    trace_phase("keeper_done");
    // Handed over, the records go first, for the relay to commit with its session.end:
    // it checks and queues them while we remove what we made, and then has only the report
    // to wait for. Each as the line the intent file has for it, made while the teardown ran.
    if (std::string records = handed_over_lines(); !records.empty()) {
        (void)write_all(fds_.report.get(), records, "keeper report pipe");
        if (cfg_.contain.faults.keeper_dies_before_report) ::raise(SIGKILL);
    }
    if (cfg_.sandbox) sandbox::remove_private_tmp(cfg_.sandbox->private_tmp());
    // The teardown's records are on record before the report: once it has the report, the
    // relay records session.end with the teardown's short lock wait, and a close of ours
    // still committing then (a slow disk, a loaded machine) would cost the session its end.
    // Asked by a live relay, whose session.end follows the report and signs everything
    // before it: what the keeper wrote is left to that (a signature fewer between the
    // tree's end and the end of `run`). A close that has nothing left to commit then (the
    // records committed, no loss to record) takes no lock: it comes after the report, while
    // the relay commits its session.end (its thread's join and the connection's close, a
    // millisecond or two, before our exit, which the relay waits for).
    const auto tail = cause == Cause::asked ? journal::Journal::Tail::to_next_writer
                                            : journal::Journal::Tail::anchor;
    const bool close_later = cause == Cause::asked && (!journal_ || records_handed_over_ ||
                                                       (records_committed_ && unrecorded_.empty()));
    // The relay died before it asked: nobody else records the session's end.
    if (cause == Cause::relay_gone) end_session_for_the_dead_relay(report);
    if (!close_later) close_journal(cause == Cause::relay_gone, tail);
    // The tree is gone (verified): the session cgroup goes before the report, so that the
    // relay, once it has the report and our exit, leaves nothing of the session behind.
    release_containment();
    (void)write_all(fds_.report.get(), line_of("report " + journal::teardown_report_json(report)),
                    "keeper report pipe");
    trace_phase("keeper_reported");
    if (close_later) close_journal(false, tail);
    if (cause == Cause::asked) end_session_if_the_relay_cannot(report);
    leave_opening_to_the_exit();
    return report.ok() ? 0 : 1;
}

// The keeper is driven by its lifeline, not by signals meant for the client: SIGHUP
// comes when its process group (its own, see fork_keeper) is orphaned by the relay's
// death; a SIGINT/SIGTERM sent by pid or group is for the relay. SIGTTOU: from a group
// of its own, the keeper is in the background of a terminal, and a --explain line on a
// terminal with `stty tostop` must not stop it. SIGPIPE: the relay may be gone.
// SIGXFSZ: a journal write past RLIMIT_FSIZE must fail as EFBIG (the journal-failure
// policy), never kill the keeper halfway through a teardown.
void Keeper::ignore_terminal_signals() {
    for (int s : {SIGINT, SIGHUP, SIGTERM, SIGPIPE, SIGQUIT, SIGXFSZ, SIGTTOU})
        ::signal(s, SIG_IGN);
    ::prctl(PR_SET_NAME, "mcpwarden-keep", 0UL, 0UL, 0UL);
}

bool Keeper::set_up_containment() {
    auto c = Containment::setup(cfg_.session_id, cfg_.contain);
    if (!c) return spawn_failed(c.error(), 125);
    containment_ = std::move(*c);
    const auto& layers = containment_->layers();
    if (cfg_.explain)
        log("mcpwarden: containment layers for session " + cfg_.session_id + ":\n" +
            layers.render_text());
    if (cfg_.require_cgroup && !layers.cgroup.on)
        return spawn_failed(
            Error::msg("--isolate=cgroup: no session cgroup: " + layers.cgroup.reason), 125);
    if (cfg_.require_pidns && !layers.pidns.on)
        return spawn_failed(Error::msg("--isolate=pidns: no PID namespace: " + layers.pidns.reason),
                            125);
    return limits_enforced();
}

// A limit asked for and not enforceable here refuses the start, unless the settings say
// limits = "best-effort": then it is said on stderr (and session.start has the placement).
bool Keeper::limits_enforced() {
    const SessionLimits& limits = containment_->limits();
    if (cfg_.explain && !limits.placements().empty())
        log("mcpwarden: limits for session " + cfg_.session_id + ":\n" + limits.render_text());
    const std::string missing = limits.missing();
    if (missing.empty()) return true;
    if (cfg_.contain.limits.best_effort || cfg_.contain.faults.limits_unchecked) {
        log("mcpwarden: limits = \"best-effort\": running without " + missing + "\n");
        return true;
    }
    return spawn_failed(Error::msg("cannot enforce " + missing +
                                   " (limits = \"best-effort\" in the settings runs "
                                   "without it)"),
                        125);
}

// The plan we inherited is the relay's first half (src/sandbox/sandbox.hpp): the relay adds
// its path rules to the ruleset we share while we set up the containment, and says
// "sandbox-ready" when they are in. A server started before would be confined by a
// ruleset without them: not one path more than allowed, but unable even to exec. No line
// (the relay failed to complete the plan, or died) means no server. Bounded like the
// relay's own wait for "spawned".
bool Keeper::await_sandbox_ready() {
    if (!cfg_.sandbox || !cfg_.sandbox->on()) return true;
    (void)set_nonblocking(fds_.control.get());
    control_.emplace(fds_.control.get());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
        control_->fill();
        if (auto line = control_->next_line()) {
            sandbox_ready_ = *line == "sandbox-ready";
            if (sandbox_ready_) {
                take_back_cpus();
                return true;
            }
            log("mcpwarden: keeper: unexpected message before the sandbox: " + *line + "\n");
            return false;
        }
        if (control_->eof()) return false;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
        if (left.count() <= 0)
            return spawn_failed(Error::msg("the relay did not complete the sandbox in 30 s"), 125);
        pollfd p{fds_.control.get(), POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(left.count()));
    }
}

// The relay is done with its share of the start-up: every CPU it may use is ours again,
// and the server's, which inherits our set (src/sys/cpu_affinity.hpp). The relay made our
// set smaller right after the fork, before its rules and so before this line: taking the
// set back here cannot be overtaken by that change.
void Keeper::take_back_cpus() {
    if (!cfg_.cpus || cfg_.contain.faults.keeper_cpus_kept) return;
    if (auto st = set_cpu_affinity(0, *cfg_.cpus); !st)
        log("mcpwarden: keeper: " + st.error().message + "\n");
}

// The first server, or none yet when the keeper starts asleep (--lazy): the pipes the
// relay made before the fork are then closed, and the first "wake" makes new ones.
bool Keeper::start_server() {
    // SIGCHLD through a signalfd: blocked from here on (the spawner resets the child's
    // mask and dispositions before exec).
    auto sfd = SignalFd::create({SIGCHLD});
    if (!sfd) return spawn_failed(sfd.error(), 125);
    sigchld_.emplace(std::move(*sfd));
    if (cfg_.start_asleep) {
        fds_.server_in.reset();
        fds_.server_out.reset();
        fds_.server_err.reset();
        send(fmt::format("asleep {} {}", cgroup_dir_word(),
                         containment_->layers().to_json_string()));
        return true;
    }
    return spawn_server(std::move(fds_.server_in), std::move(fds_.server_out),
                        std::move(fds_.server_err));
}

// `relay_ends` (a wake): the relay's ends of the new pipes, passed over the fd socket once
// the server runs and before "spawned" (a spawn that fails passes nothing, so the socket
// never holds pipes nobody asked for).
bool Keeper::spawn_server(Fd in, Fd out, Fd err, std::span<const int> relay_ends) {
    // The server's ends onto our 0-2; the spawner's Stdio::Inherit hands them over.
    ::dup2(in.get(), 0);
    ::dup2(out.get(), 1);
    ::dup2(err.get(), 2);
    in.reset();
    out.reset();
    err.reset();

    SpawnOptions o;
    o.argv = cfg_.command;
    o.in = o.out = o.err = Stdio::Inherit;
    o.sandbox = cfg_.sandbox;
    trace_phase("keeper_spawning");
    auto child = spawn(*containment_, o);
    trace_phase("keeper_spawned");

    // Whatever happened, we keep no end of the server's pipes.
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    ::dup2(null, 0);
    ::dup2(null, 1);
    ::close(null);
    ::dup2(fds_.log.get(), 2);

    if (!child) return spawn_failed(child.error(), spawn_error_exit_code(child.error()));
    child_.emplace(std::move(*child));
    status_sent_ = false;
    plan_.reset();
    plan_every_ = kPlanAheadFirst;
    plan_at_ = std::chrono::steady_clock::now() + plan_every_;
    if (!relay_ends.empty())
        if (auto s = send_fds(fds_.fd_socket.get(), relay_ends); !s) {
            send("wake-failed " + s.error().message);  // the relay has it torn down
            return true;
        }
    send(fmt::format("spawned {} {} {} {}", child_->pid(), child_->id().starttime,
                     cgroup_dir_word(), containment_->layers().to_json_string()));
    return true;
}

// The session cgroup's directory for the relay, "-" when there is none.
std::string Keeper::cgroup_dir_word() const {
    const Cgroup* cg = containment_->cgroup();
    if (!cg) return "-";
    std::string dir = cg->path();
    if (auto slash = dir.rfind('/'); slash != std::string::npos) dir.resize(slash);
    return dir;
}

// "hibernate": the relay closed the server's stdin; the usual teardown, EOF window
// first, recorded like any other, and the session goes on without a server.
void Keeper::hibernate() {
    auto report = tear_down_tree(Cause::hibernate);
    reap();
    child_.reset();
    send("hibernated " + journal::teardown_report_json(report));
    // No writer thread of ours while a wake forks; opened again ahead. The relay goes on
    // writing and its session.end signs and syncs what we wrote (Tail::to_next_writer): a
    // signature and an fsync here would hold the next wake, a restart's above all.
    close_journal(false, journal::Journal::Tail::to_next_writer);
    // Opened ahead again, but not at once: a wake often follows within milliseconds (a
    // restart after a crash, a request held while the tree went down), and it would wait for
    // that opening to finish before it may fork. Once the window is over (a teardown before
    // it opens the journal itself, bounded).
    journal_retry_at_ = std::chrono::steady_clock::now() + kWakeWindow;
}

// "wake": fresh pipes, the server spawned again in the same containment, the relay's ends
// passed back before "spawned". A failure leaves the keeper asleep, and says why.
void Keeper::wake() {
    if (child_) return;  // already awake: a stray "wake" changes nothing
    finish_opening();    // no thread of ours while the server is forked
    auto in = make_pipe();
    auto out = make_pipe();
    auto err = make_pipe();
    if (!in || !out || !err) {
        send("wake-failed " + (!in ? in.error() : !out ? out.error() : err.error()).message);
        return;
    }
    // Close-on-exec: the server does not inherit the relay's ends; ours close on return.
    const int relay_ends[3] = {in->write.get(), out->read.get(), err->read.get()};
    if (!spawn_server(std::move(in->read), std::move(out->write), std::move(err->write),
                      relay_ends))
        child_.reset();  // spawn_failed() said "spawn-failed": a failed wake to the relay
}

// Waits for a reason to tear down, reaping what ends meanwhile. The client is watched
// here too (a pidfd on the relay's parent): a relay that is stopped (SIGSTOP, a debugger)
// or hung never asks and never dies, and the whole tree would live as long. Once the
// client is gone, a working relay asks within its EOF window; kRelaySlack later, the
// keeper stops waiting for it. The server's stdin stays open then (the relay holds it),
// so the keeper's teardown starts at SIGTERM.
Keeper::Cause Keeper::wait_for_teardown_cause() {
    (void)set_nonblocking(fds_.control.get());
    if (!control_) control_.emplace(fds_.control.get());
    if (cfg_.contain.faults.keeper_client_watch) fds_.client.reset();
    std::optional<std::chrono::steady_clock::time_point> relay_deadline;
    for (;;) {
        open_journal_ahead();
        int timeout = -1;
        plan_ahead_if_due();
        auto wake_at = journal_retry_at();
        for (const auto& at : {relay_deadline, plan_at_})
            if (at && (!wake_at || *at < *wake_at)) wake_at = at;
        if (wake_at)
            timeout = static_cast<int>(std::max<int64_t>(
                0, std::chrono::ceil<std::chrono::milliseconds>(*wake_at -
                                                                std::chrono::steady_clock::now())
                       .count()));
        // The server's exit under --isolate=pidns comes through the init's status pipe.
        const int exit_notice = child_ && !status_sent_ && !cfg_.contain.faults.pidns_exit_notice
                                    ? child_->exit_notice_fd()
                                    : -1;
        pollfd p[5] = {{fds_.control.get(), POLLIN, 0},
                       {sigchld_->fd(), POLLIN, 0},
                       {fds_.client.valid() ? fds_.client.get() : -1, POLLIN, 0},
                       {exit_notice, POLLIN, 0},
                       {opening_ ? opening_->done_fd() : -1, POLLIN, 0}};
        if (::poll(p, 5, timeout) < 0 && errno != EINTR) return Cause::relay_gone;
        if (p[1].revents) reap();
        if (p[3].revents) report_server_exit();
        if (p[4].revents) finish_opening();
        if (p[0].revents) {
            control_->fill();
            while (auto line = control_->next_line()) {
                if (line->starts_with("teardown")) {
                    end_reason_ = line->size() > 9 ? line->substr(9) : "client_lost";
                    return Cause::asked;
                }
                if (*line == "journal-started") relay_journal_started_ = true;
                if (cfg_.hibernation && *line == "hibernate") return Cause::hibernate;
                if (cfg_.hibernation && *line == "wake") return Cause::wake;
            }
            if (control_->eof()) return Cause::relay_gone;
        }
        if (p[2].revents) {
            fds_.client.reset();
            relay_deadline = std::chrono::steady_clock::now() + cfg_.eof_grace + kRelaySlack;
        }
        if (relay_deadline && std::chrono::steady_clock::now() >= *relay_deadline) {
            log("mcpwarden: the client is gone and the relay did not act: the keeper tears "
                "down\n");
            return Cause::client_gone;
        }
    }
}

// The teardown's plan, made ahead while the session is idle (contain/teardown_ahead.cpp, "A plan
// made ahead"): a keeper's teardown then starts from the members it knows, bound to their
// pidfds with their ports listed, and walks only for what is new, instead of planning
// every member between the client's leaving and the first SIGTERM. Made kPlanAheadFirst
// after the server starts and brought up to date at doubling intervals, up to
// kPlanAheadAtMost: a tree that grows at start-up (npx, uvx: a second or two) is known by
// the time it is used, and an idle one costs a few /proc reads per member now and then.
// Once the server has exited the teardown is near: nothing more is planned.
void Keeper::plan_ahead_if_due() {
    if (!plan_at_ || std::chrono::steady_clock::now() < *plan_at_) return;
    if (!child_ || status_sent_) {
        plan_at_.reset();
        return;
    }
    if (!plan_) plan_.emplace(containment_->scope(&*child_));
    plan_->prepare();
    plan_every_ = std::min(plan_every_ * 2, kPlanAheadAtMost);
    plan_at_ = std::chrono::steady_clock::now() + plan_every_;
}

// Reaps what ended: the server through its Child (status reported once), every other
// child (orphans the subreaper inherited) directly. WNOWAIT peeks first so the server's
// status is never taken by a generic waitpid.
void Keeper::reap() {
    while (auto s = sigchld_->read()) {
        if (!s->has_value()) break;
    }
    for (int i = 0; i < 4096; ++i) {
        siginfo_t si{};
        if (::waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) < 0 || si.si_pid == 0) break;
        pid_t pid = si.si_pid;
        bool is_server = child_ && (pid == child_->pid() || pid == child_->ns_init().pid);
        if (is_server) {
            report_server_exit();
            if (!child_->exit_status()) break;  // pidns init: not ours to reap yet
            continue;
        }
        ::waitpid(pid, nullptr, WNOHANG);
    }
}

// Tells the relay the server's wait status, once, when it is known.
void Keeper::report_server_exit() {
    if (auto st = child_->try_reap(); st && !status_sent_) {
        status_sent_ = true;
        send(fmt::format("exited {}", *st));
    }
}

TeardownReport Keeper::tear_down_tree(Cause cause) {
    const bool relay_gone = cause == Cause::relay_gone;
    if (opening_ && !cfg_.contain.faults.journal_opening_not_yielded) opening_->yield();
    // A relay stopped by SIGSTOP can be stopped inside a journal transaction, holding
    // the journal's lock: every record of ours would wait out the busy timeout (10 s)
    // before failing, and the teardown with it. Without the relay, tear down unrecorded.
    if (cfg_.journal_on && cause == Cause::client_gone)
        log("mcpwarden: journal: the relay may hold the journal's lock (teardown not "
            "recorded)\n");
    const bool recorded = cfg_.journal_on && cause != Cause::client_gone;
    const bool records_first =
        cfg_.contain.faults.keeper_records_first || cfg_.contain.faults.keeper_journal_late;
    // Signal first, commit after (keeper_journal.cpp): the snapshot is taken
    // before the first signal and kept in memory with the signals and exits, in order,
    // each in the session's intent file before what it precedes.
    std::unique_ptr<journal::TeardownRecorder> observer;
    if (recorded && records_first)
        observer = teardown_recorder(relay_gone);  // the guard off: on record first
    else if (recorded)
        observer = recorder_on_intents();
    std::optional<DiesAfterFirstSignal> dies;
    if (observer && cfg_.contain.faults.keeper_dies_after_signal) dies.emplace(*observer);
    TeardownOptions t;
    // The relay already waited the EOF window when it asks; when it died, its end of the
    // server's stdin closed with it, so the window starts now. Before a hibernation the
    // relay has just closed the server's stdin: the window is ours to wait.
    t.eof_window =
        relay_gone || cause == Cause::hibernate ? cfg_.eof_grace : std::chrono::milliseconds(0);
    t.grace = cfg_.term_grace;
    t.observer = dies ? static_cast<TeardownObserver*>(&*dies) : observer.get();
    const int64_t start = trace_clock_ns();
    trace_phase("keeper_teardown_starts", start);
    TeardownReport r =
        plan_ ? plan_->run(t) : Teardown(containment_->scope(child_ ? &*child_ : nullptr), t).run();
    plan_.reset();
    plan_at_.reset();
    // The engine's own steps (TeardownReport::phases), on the same clock.
    const PhaseTimes& ph = r.phases;
    auto at = [&](double ms) { return start + static_cast<int64_t>(ms * 1e6); };
    trace_phase("first_sigterm", at(ph.plan_ms + ph.eof_ms));
    trace_phase("grace_over", at(ph.plan_ms + ph.eof_ms + ph.grace_ms));
    trace_phase("sweep_over", at(ph.plan_ms + ph.eof_ms + ph.grace_ms + ph.kill_ms));
    trace_phase("verified", at(ph.total_ms));
    if (!r.ok()) log("mcpwarden: " + r.verdict().error().message + "\n");
    if (observer) {
        unrecorded_ = observer->take_unrecorded();
        unrecorded_lines_ = observer->take_unrecorded_lines();
    }
    if (recorded && !records_first) {
        if (cause == Cause::asked && records_in_intents_ && !observer->intents_failed() &&
            unrecorded_lines_.size() == unrecorded_.size())
            hand_over_records();
        else
            record_teardown(cause);
    }
    // The exits posted meanwhile, before the report (the relay's session.end follows it);
    // bounded by kTeardownLockWait, and what fails is counted.
    if (journal_) records_committed_ = journal_->flush().ok() && !records_lost_;
    trace_phase("keeper_recorded");
    return r;
}

// Reads the control pipe until the line `want` (true), its end (false: the relay died)
// or `bound` (nullopt).
std::optional<bool> Keeper::await_control_line(std::string_view want,
                                               std::chrono::milliseconds bound) {
    const auto deadline = std::chrono::steady_clock::now() + bound;
    for (;;) {
        while (auto line = control_->next_line())
            if (*line == want || line->starts_with(std::string(want) + " ")) {
                return true;
            }
        if (control_->eof()) return false;
        auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline -
                                                                 std::chrono::steady_clock::now());
        if (left.count() <= 0) return std::nullopt;
        pollfd p{fds_.control.get(), POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
        control_->fill();
    }
}

// Removes the session cgroup (Containment's destructor) once the tree is gone.
void Keeper::release_containment() {
    containment_.reset();
    trace_phase("keeper_released_containment");
}

bool Keeper::spawn_failed(const Error& e, int exit_code) {
    send(fmt::format("spawn-failed {} {} {}", e.code, exit_code, e.message));
    return false;
}

void Keeper::send(const std::string& line) {
    (void)write_all(fds_.report.get(), line_of(line), "keeper report pipe");
}

// `text` as one line of the report pipe.
std::string Keeper::line_of(std::string text) {
    for (char& c : text)
        if (c == '\n') c = ' ';
    text.push_back('\n');
    return text;
}

void Keeper::log(const std::string& text) {
    (void)write_all(fds_.log.get(), text, "stderr");
}

int keeper_main(const KeeperConfig& cfg, KeeperFds fds) {
    int code;
    {
        Keeper k(cfg, std::move(fds));
        code = k.run();
        trace_phase("keeper_ended");  // the relay said "ended" (or died)
    }
    trace_phase("keeper_exits");  // its containment released
    return code;
}

}  // namespace warden::shim
