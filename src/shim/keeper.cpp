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

// One attempt at opening the keeper's journal, on a thread of its own ("The keeper's journal"
// below says why). The attempt never waits for the lock, so it is bounded by the opening's
// own work; `done_fd` becomes readable when it is over, and `finish` joins and hands over
// its result. Never two at once; joined before the keeper forks and before a teardown.
class JournalOpening {
  public:
    // `inline_attempt` (fault keeper_journal_inline): made here, before returning, as the
    // wait loop once did; `slow` (keeper_journal_slow): 2 s longer, as on a slow disk.
    static Result<std::unique_ptr<JournalOpening>> start(const std::string& path, JournalSync sync,
                                                         bool slow, bool inline_attempt) {
        auto done = make_pipe();
        if (!done) return done.error();
        auto o = std::unique_ptr<JournalOpening>(new JournalOpening(std::move(*done)));
        if (inline_attempt)
            o->attempt(path, sync, slow);
        else
            o->thread_.emplace("mcpwarden-kopen", [self = o.get(), path, sync, slow] {
                self->attempt(path, sync, slow);
            });
        return o;
    }
    ~JournalOpening() {
        if (thread_ && thread_->joinable()) thread_->join();
    }
    JournalOpening(const JournalOpening&) = delete;
    JournalOpening& operator=(const JournalOpening&) = delete;

    int done_fd() const { return done_.read.get(); }
    // The teardown begins: the attempt under way runs on what it leaves of the cores
    // (sys/background_thread.hpp); its journal is needed only once the tree is gone.
    void yield() {
        if (thread_) thread_->yield();
    }
    Result<std::unique_ptr<journal::Journal>> finish() {
        if (thread_ && thread_->joinable()) thread_->join();
        if (!journal_) return *error_;
        return std::move(journal_);
    }

  private:
    explicit JournalOpening(Pipe done) : done_(std::move(done)) {}
    void attempt(std::string path, JournalSync sync, bool slow) {
        if (slow) std::this_thread::sleep_for(std::chrono::seconds(2));
        if (auto j = open_journal(path, sync, std::chrono::milliseconds(0)))
            journal_ = std::move(*j);
        else
            error_ = j.error();
        (void)!::write(done_.write.get(), "x", 1);
    }
    Pipe done_;
    std::unique_ptr<journal::Journal> journal_;  // the attempt's outcome: one or the other
    std::optional<Error> error_;
    std::optional<BackgroundThread> thread_;
};

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

class Keeper {
  public:
    Keeper(const KeeperConfig& cfg, KeeperFds fds) : cfg_(cfg), fds_(std::move(fds)) {}

    int run() {
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
        const bool close_later =
            cause == Cause::asked &&
            (!journal_ || records_handed_over_ || (records_committed_ && unrecorded_.empty()));
        // The relay died before it asked: nobody else records the session's end.
        if (cause == Cause::relay_gone) end_session_for_the_dead_relay(report);
        if (!close_later) close_journal(cause == Cause::relay_gone, tail);
        // The tree is gone (verified): the session cgroup goes before the report, so that the
        // relay, once it has the report and our exit, leaves nothing of the session behind.
        release_containment();
        (void)write_all(fds_.report.get(),
                        line_of("report " + journal::teardown_report_json(report)),
                        "keeper report pipe");
        trace_phase("keeper_reported");
        if (close_later) close_journal(false, tail);
        if (cause == Cause::asked) end_session_if_the_relay_cannot(report);
        return report.ok() ? 0 : 1;
    }

  private:
    // Why the keeper tears down.
    enum class Cause {
        asked,        // "teardown <reason>" from the relay
        relay_gone,   // the lifeline closed before the relay asked: it died
        client_gone,  // the client exited and the relay did nothing about it (stopped, hung)
        hibernate,    // "hibernate": tear down, keep the session (not a reason to end)
        wake,         // "wake": spawn the server again
    };

    // The keeper is driven by its lifeline, not by signals meant for the client: SIGHUP
    // comes when its process group (its own, see fork_keeper) is orphaned by the relay's
    // death; a SIGINT/SIGTERM sent by pid or group is for the relay. SIGTTOU: from a group
    // of its own, the keeper is in the background of a terminal, and a --explain line on a
    // terminal with `stty tostop` must not stop it. SIGPIPE: the relay may be gone.
    // SIGXFSZ: a journal write past RLIMIT_FSIZE must fail as EFBIG (the journal-failure
    // policy), never kill the keeper halfway through a teardown.
    static void ignore_terminal_signals() {
        for (int s : {SIGINT, SIGHUP, SIGTERM, SIGPIPE, SIGQUIT, SIGXFSZ, SIGTTOU})
            ::signal(s, SIG_IGN);
        ::prctl(PR_SET_NAME, "mcpwarden-keep", 0UL, 0UL, 0UL);
    }

    bool set_up_containment() {
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
            return spawn_failed(
                Error::msg("--isolate=pidns: no PID namespace: " + layers.pidns.reason), 125);
        return limits_enforced();
    }

    // A limit asked for and not enforceable here refuses the start, unless the settings say
    // limits = "best-effort": then it is said on stderr (and session.start has the placement).
    bool limits_enforced() {
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
    bool await_sandbox_ready() {
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
            auto left = std::chrono::ceil<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0)
                return spawn_failed(Error::msg("the relay did not complete the sandbox in 30 s"),
                                    125);
            pollfd p{fds_.control.get(), POLLIN, 0};
            ::poll(&p, 1, static_cast<int>(left.count()));
        }
    }

    // The relay is done with its share of the start-up: every CPU it may use is ours again,
    // and the server's, which inherits our set (src/sys/cpu_affinity.hpp). The relay made our
    // set smaller right after the fork, before its rules and so before this line: taking the
    // set back here cannot be overtaken by that change.
    void take_back_cpus() {
        if (!cfg_.cpus || cfg_.contain.faults.keeper_cpus_kept) return;
        if (auto st = set_cpu_affinity(0, *cfg_.cpus); !st)
            log("mcpwarden: keeper: " + st.error().message + "\n");
    }

    // The first server, or none yet when the keeper starts asleep (--lazy): the pipes the
    // relay made before the fork are then closed, and the first "wake" makes new ones.
    bool start_server() {
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
    bool spawn_server(Fd in, Fd out, Fd err, std::span<const int> relay_ends = {}) {
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
    std::string cgroup_dir_word() const {
        const Cgroup* cg = containment_->cgroup();
        if (!cg) return "-";
        std::string dir = cg->path();
        if (auto slash = dir.rfind('/'); slash != std::string::npos) dir.resize(slash);
        return dir;
    }

    // "hibernate": the relay closed the server's stdin; the usual teardown, EOF window
    // first, recorded like any other, and the session goes on without a server.
    void hibernate() {
        auto report = tear_down_tree(Cause::hibernate);
        reap();
        child_.reset();
        send("hibernated " + journal::teardown_report_json(report));
        // No writer thread of ours while a wake forks; opened again ahead. The relay goes on
        // writing and its session.end signs and syncs what we wrote (Tail::to_next_writer):
        // a signature and an fsync here would hold the next wake, a restart's above all.
        close_journal(false, journal::Journal::Tail::to_next_writer);
        // Opened ahead again, but not at once: a wake often follows within milliseconds (a
        // restart after a crash, a request held while the tree went down), and it would wait
        // for that opening to finish before it may fork. Once the window is over (a teardown
        // before it opens the journal itself, bounded).
        journal_retry_at_ = std::chrono::steady_clock::now() + kWakeWindow;
    }
    static constexpr std::chrono::milliseconds kWakeWindow{100};

    // "wake": fresh pipes, the server spawned again in the same containment, the relay's ends
    // passed back before "spawned". A failure leaves the keeper asleep, and says why.
    void wake() {
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
    Cause wait_for_teardown_cause() {
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
                timeout = static_cast<int>(
                    std::max<int64_t>(0, std::chrono::ceil<std::chrono::milliseconds>(
                                             *wake_at - std::chrono::steady_clock::now())
                                             .count()));
            // The server's exit under --isolate=pidns comes through the init's status pipe.
            const int exit_notice =
                child_ && !status_sent_ && !cfg_.contain.faults.pidns_exit_notice
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

    // The teardown's plan, made ahead while the session is idle (contain/teardown.cpp, "A plan
    // made ahead"): a keeper's teardown then starts from the members it knows, bound to their
    // pidfds with their ports listed, and walks only for what is new, instead of planning
    // every member between the client's leaving and the first SIGTERM. Made kPlanAheadFirst
    // after the server starts and brought up to date at doubling intervals, up to
    // kPlanAheadAtMost: a tree that grows at start-up (npx, uvx: a second or two) is known by
    // the time it is used, and an idle one costs a few /proc reads per member now and then.
    // Once the server has exited the teardown is near: nothing more is planned.
    void plan_ahead_if_due() {
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
    void reap() {
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
    void report_server_exit() {
        if (auto st = child_->try_reap(); st && !status_sent_) {
            status_sent_ = true;
            send(fmt::format("exited {}", *st));
        }
    }

    TeardownReport tear_down_tree(Cause cause) {
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
        // Signal first, commit after ("The keeper's journal" below): the snapshot is taken
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
            plan_ ? plan_->run(t)
                  : Teardown(containment_->scope(child_ ? &*child_ : nullptr), t).run();
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

    // The teardown's records, kept in memory while it ran, in one transaction once the tree is
    // gone: after the relay's evidence when the relay asked (it says "evidence" once that is
    // committed, or dies, and then its intent file holds it), after the session.start and the
    // intents of a relay that died. Without a journal they stay in unrecorded_, and
    // close_journal counts them.
    void record_teardown(Cause cause) {
        bool relay_gone = cause == Cause::relay_gone;
        const bool await_evidence =
            cause == Cause::asked && !cfg_.contain.faults.keeper_evidence_wait;
        // A relay whose client left during its journal's start-up (no "journal-started" yet:
        // shim/journal_sink.cpp) writes its session.start and its evidence once that is over,
        // which a wait for the lock can make long: our journal is opened after it (two
        // openings of a new journal at once can fail one), and our records go after its.
        const bool relay_starting = cfg_.journal_on && !relay_journal_started_;
        if (await_evidence && relay_starting)
            relay_gone = !await_control_line("evidence", kRelayStartWait).value_or(true);
        open_for_teardown();
        if (await_evidence && !relay_starting) relay_gone = !await_relays_evidence();
        if (!journal_) return;
        // A relay that died: its intent file, ours in it, is recovered first; what of ours
        // is on record then is not appended twice (append_missing).
        if (relay_gone) take_over_from_relay(*journal_);
        if (auto a = journal::append_missing(*journal_, unrecorded_); !a) {
            journal_->count_lost(unrecorded_, a.error());
            records_lost_ = true;  // owed: journal.degraded, committed by the close
        }
        unrecorded_.clear();
    }

    // A live relay asked for the teardown, and every record of it is in the session's intent
    // file: the relay commits them (sent before our report, as they are in memory: a signal's
    // outcome is known only after its line was written), after its own evidence and with its
    // session.end, and we neither wait for its "evidence" nor open or commit anything on the
    // way to our report ("The keeper's journal" below says why, and what a death of either
    // does then).
    void hand_over_records() { records_handed_over_ = true; }

    // The records handed over, as lines of the report pipe (none if they were not).
    std::string handed_over_lines() {
        std::string lines;
        if (!records_handed_over_) return lines;
        unrecorded_.clear();
        for (const std::string& l : std::exchange(unrecorded_lines_, {}))
            lines += line_of("record " + l);
        return lines;
    }

    // The recorder of a teardown that signals first: its records in memory until
    // record_teardown commits them, and each in the session's intent file before what it
    // precedes. Without that file (keeper_no_intents, or it cannot be opened) in memory only:
    // a keeper killed before its commit then loses them, uncounted.
    std::unique_ptr<journal::TeardownRecorder> recorder_on_intents() {
        const journal::TeardownRecorder::Reasons reasons{};
        if (!cfg_.contain.faults.keeper_no_intents) {
            auto path = journal::resolve_path(cfg_.journal_path);
            auto file =
                path ? journal::IntentFile::open(journal::Paths::for_db(*path), cfg_.session_id)
                     : Result<journal::IntentFile>(path.error());
            // A file that cannot be opened: the journal cannot be written either, which the
            // relay has said once already; the records are then counted at close as before.
            if (file) {
                records_in_intents_ = true;
                return std::make_unique<journal::TeardownRecorder>(std::move(*file),
                                                                   cfg_.session_id, reasons);
            }
        }
        return std::make_unique<journal::TeardownRecorder>(nullptr, cfg_.session_id, reasons);
    }

    // The journal opened ahead, its attempt under way finished (bounded), or else one bounded
    // attempt now (a session too short for the attempts between the relay's own appends, or a
    // lock held all along: kTeardownLockWait); if that fails, the records are counted at close.
    void open_for_teardown() {
        finish_opening();
        if (journal_) return;
        if (auto j = open_journal(cfg_.journal_path, cfg_.journal_sync, kTeardownLockWait))
            journal_ = std::move(*j);
        else
            journal_error_ = j.error();
    }

    // Until the relay says "evidence" (true) or dies (false); a relay that does neither
    // within kEvidenceWait (stopped, or its commit stuck past its own lock bound) is alive:
    // our records then go on record after whatever of its evidence is committed by then.
    bool await_relays_evidence() {
        return await_control_line("evidence", kEvidenceWait).value_or(true);
    }

    // Reads the control pipe until the line `want` (true), its end (false: the relay died)
    // or `bound` (nullopt).
    std::optional<bool> await_control_line(std::string_view want, std::chrono::milliseconds bound) {
        const auto deadline = std::chrono::steady_clock::now() + bound;
        for (;;) {
            while (auto line = control_->next_line())
                if (*line == want || line->starts_with(std::string(want) + " ")) {
                    return true;
                }
            if (control_->eof()) return false;
            auto left = std::chrono::ceil<std::chrono::milliseconds>(
                deadline - std::chrono::steady_clock::now());
            if (left.count() <= 0) return std::nullopt;
            pollfd p{fds_.control.get(), POLLIN, 0};
            if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
            control_->fill();
        }
    }

    // ---- The keeper's journal ---------------------------------------------------------
    //
    // The keeper records the teardown: a snapshot of every target taken before its first
    // signal, every signal, every exit. On a machine where a commit costs milliseconds, a
    // commit of the snapshot before the first signal, and of each signal before it, held the
    // tree (and its ports) that long. What must come before a signal is the snapshot's
    // *taking*: what /proc shows of each target while it still runs. So the teardown signals
    // first: the recorder keeps the snapshot, the signals and the exits in memory, in order
    // (TeardownRecorder without a journal), and record_teardown writes them in one
    // transaction once the tree is gone, before the report. The relay's evidence of what the
    // client left in flight was in its intent file before it asked (one write(), as a
    // forwarded request), and is committed while we signal; it says "evidence" when it is,
    // and our records go after it, so the log reads client_lost, abandoned, snapshot,
    // signals, exits, session.end as before. If the relay dies instead, its intent file is
    // recovered first. A keeper killed during the teardown leaves its records in the intent
    // file: the relay, which then tears down what is left, commits them before its own
    // (recover_keepers_intents), or whoever recovers the file later does.
    //
    // When a live relay asked for the teardown, that file is where the records stay: they
    // are in it, each before what it precedes, so they survive the death of either process
    // as a committed transaction would, and the relay's session.end is the next commit
    // anyway. So the keeper hands them over (hand_over_records: a "record" line each, as it
    // would have committed them, before its report) and the relay queues them after its own
    // records and commits them with its session.end, in one transaction. Our commit of them (the
    // lock, the lookups, a transaction, and the writer thread's WAL fsync racing the relay's
    // commit) was a millisecond or more between the tree's last process and `run`'s exit; in a
    // session that ended during the relay's journal start-up, it was the opening of our journal too
    // (~7 ms of CPU). A relay killed after the report, before its commit: we see it die
    // before "ended" and recover the whole file before writing the end ourselves
    // (end_session_if_the_relay_cannot). Both killed: the file is there for the next `run`'s
    // dead-session worker or `journal reconcile`. A recorder that could not write the file
    // keeps them in memory only: then we commit them ourselves, as before.
    //
    // Opening a journal is milliseconds of work (the lock, the signing key, the schema check
    // in a transaction) and, with another writer holding the lock, a wait. So the journal is
    // opened ahead, as soon as the server runs, and kept (idle: no transaction, no writer
    // thread) until the teardown needs it; an opening still under way when the teardown is
    // asked for is finished after the signals, not before. Only a session that ends before
    // any attempt succeeded opens it at the teardown's end, within kTeardownLockWait.
    //
    // Opening ahead starts once the relay says "journal-started" (its journal open, its
    // session.start written: two openings of a new journal at once can fail one of them),
    // and never waits for the lock: a writer holding it (a stuck process) makes the attempt
    // fail at once, and the wait loop tries again 10 ms later, backing off to once a second.
    // An attempt is still milliseconds of work (SQLite's open, OpenSSL reading the key), and
    // a client that closes right after its first exchange (`claude mcp list` does) ends the
    // session in that very window: done in the wait loop, the attempt held back the report
    // of the server's exit, and so the whole teardown, by as long as it took. So it runs on
    // a thread of its own (JournalOpening) while the loop goes on reaping and listening; the
    // thread is joined before anything forks (a wake) and when the teardown's records are
    // written. A journal that cannot be opened then leaves the records in memory
    // (unrecorded_): close_journal opens the journal with a longer wait and counts them as
    // lost, by kind, in a journal.degraded record. A journal that opened but cannot write
    // (lock held, disk full) counts them the same way; the counts are written at close, before
    // the report, so that the relay's session.end, which follows the report, does not wait
    // behind them.
    //
    // After each teardown (a hibernation too) the journal is closed: a wake forks a server,
    // and the journal's writer thread must not be running then. It is opened ahead again.

    static constexpr std::chrono::milliseconds kJournalRetryFirst{10};
    static constexpr std::chrono::milliseconds kJournalRetryMax{1000};
    // The wait for the lock once the teardown is over (close_journal): long enough for a
    // writer's transaction, short enough not to keep `run` from exiting for long.
    static constexpr std::chrono::milliseconds kLateRecordLockWait{2000};
    // How long the teardown's records wait for the relay's "evidence" (its commit is bounded
    // by kTeardownLockWait per wait for the lock).
    static constexpr std::chrono::milliseconds kEvidenceWait{1000};
    // The same for a relay still opening its journal: its wait for the lock (10 s, as a
    // request's), and the evidence's commit after it.
    static constexpr std::chrono::milliseconds kRelayStartWait{12000};

    bool journal_wanted() const {
        return cfg_.journal_on && relay_journal_started_ && !journal_ && !opening_ &&
               !cfg_.contain.faults.keeper_journal_late;
    }

    // One attempt when one is due, on its own thread.
    void open_journal_ahead() {
        if (!journal_wanted() || std::chrono::steady_clock::now() < journal_retry_at_) return;
        auto o = JournalOpening::start(cfg_.journal_path, cfg_.journal_sync,
                                       cfg_.contain.faults.keeper_journal_slow,
                                       cfg_.contain.faults.keeper_journal_inline);
        if (!o) {
            attempt_failed(o.error());
            return;
        }
        opening_ = std::move(*o);
        if (cfg_.contain.faults.keeper_journal_inline) finish_opening();
    }

    // The attempt under way, if any, is over (joined): its journal kept, or the next one due.
    void finish_opening() {
        if (!opening_) return;
        auto j = opening_->finish();
        opening_.reset();
        if (j) {
            journal_ = std::move(*j);
            journal_->set_lock_wait(kTeardownLockWait);
            journal_error_.reset();
            journal_backoff_ = kJournalRetryFirst;
            trace_phase("keeper_journal_open");
            return;
        }
        attempt_failed(j.error());
    }

    void attempt_failed(const Error& why) {
        journal_error_ = why;
        journal_retry_at_ = std::chrono::steady_clock::now() + journal_backoff_;
        journal_backoff_ = std::min(journal_backoff_ * 2, kJournalRetryMax);
    }

    // When the wait loop must wake to try again.
    std::optional<std::chrono::steady_clock::time_point> journal_retry_at() const {
        if (!journal_wanted()) return std::nullopt;
        return journal_retry_at_;
    }

    // The guards off (keeper_records_first, keeper_journal_late): the recorder for a
    // teardown that records each snapshot and signal before it, as the keeper once did, on
    // the journal opened ahead (its opening finished first), or on none (its records are
    // counted later). Once the relay died, what take_over_from_relay writes comes first.
    std::unique_ptr<journal::TeardownRecorder> teardown_recorder(bool relay_gone) {
        if (cfg_.contain.faults.keeper_journal_late && !journal_) {
            // The guard off: opened now, on the teardown path; no journal, no record.
            auto j = open_journal(cfg_.journal_path, cfg_.journal_sync, kTeardownLockWait);
            if (!j) {
                if (relay_gone)
                    log("mcpwarden: " + j.error().message + " (teardown not recorded)\n");
                return nullptr;
            }
            journal_ = std::move(*j);
            trace_phase("keeper_journal_open");
        }
        open_for_teardown();
        if (!journal_)
            return std::make_unique<journal::TeardownRecorder>(
                nullptr, cfg_.session_id, journal::TeardownRecorder::Reasons{});
        if (relay_gone) take_over_from_relay(*journal_);
        return std::make_unique<journal::TeardownRecorder>(*journal_, cfg_.session_id,
                                                           journal::TeardownRecorder::Reasons{});
    }

    // The relay died: the session.start it may not have written comes first, so the
    // teardown's rows belong to a session, then what it left in its intent file. Best
    // effort: a journal that cannot say whether the start is there, or take it, still gets
    // the teardown's rows (their own appends report what fails).
    void take_over_from_relay(journal::Journal& journal) {
        auto started = journal::has_session_start(journal.paths().db, cfg_.session_id);
        if (started && !*started)
            (void)journal.append(journal::session_start(session_start_of_keeper()));
        if (!cfg_.contain.faults.keeper_intents) recover_relays_intents(journal);
    }

    // The relay died: the requests it forwarded but had not chained yet, and the evidence it
    // left before the teardown, are in its intent file (journal.cpp, "Intents"). On record
    // now, in their order, before the teardown's records or the session's end.
    void recover_relays_intents(journal::Journal& journal) {
        auto r = journal::recover_session_intents(journal, cfg_.session_id);
        if (!r) {
            log("mcpwarden: " + r.error().message + "\n");
            return;
        }
        for (const auto& p : r->problems)
            log("mcpwarden: " + p + "\n");
    }

    // Before the report: what the teardown could not write is counted, what is owed is
    // written (journal.degraded first), and the journal is closed. `say_why`: a journal
    // that cannot be opened even now is worth a line (the relay, alive, has said it).
    void close_journal(bool say_why, journal::Journal::Tail tail = journal::Journal::Tail::anchor) {
        if (!cfg_.journal_on) return;
        if (!journal_ && !unrecorded_.empty()) {
            auto j = open_journal(cfg_.journal_path, cfg_.journal_sync, kLateRecordLockWait);
            if (!j) {
                if (say_why)
                    log(fmt::format("mcpwarden: {} ({} teardown records not recorded)\n",
                                    j.error().message, unrecorded_.size()));
                unrecorded_.clear();
                return;
            }
            journal_ = std::move(*j);
        }
        if (!journal_) return;
        if (!unrecorded_.empty()) {
            Error why =
                Error::msg("journal: not open when the teardown began" +
                           (journal_error_ ? " (" + journal_error_->message + ")" : std::string()));
            journal_->count_lost(unrecorded_, why);
            unrecorded_.clear();
        }
        journal_->set_lock_wait(kLateRecordLockWait);
        // A journal that opened but cannot take what is owed even now: its counts die with it.
        if (auto st = journal_->close(tail); !st)
            log("mcpwarden: " + st.error().message +
                " (the keeper's teardown records are not all recorded)\n");
        journal_.reset();
        journal_retry_at_ = {};
    }

    // The relay asked for the teardown and records session.end once it has the report; it
    // then says "ended" on the control pipe. If it dies before that (a client's stop
    // sequence: SIGINT, SIGTERM, then SIGKILL while the grace window runs), the session
    // would be left without an end, and `journal reconcile` would call it orphaned although
    // its tree was torn down in full. So the keeper waits for "ended" or the lifeline's
    // end, and on the latter records the end itself, `recorded_by: keeper`, unless the
    // journal already holds one (the relay died right after writing it). The relay had
    // recorded what the client left in flight before asking, so nothing stays in flight.
    // A relay that neither says "ended" nor dies within kRelayEndBound (a slow client
    // reading the last answers) is alive and writes its own record.
    void end_session_if_the_relay_cannot(const TeardownReport& report) {
        if (!cfg_.journal_on) return;
        if (!relay_died_before_ending()) return;
        if (cfg_.contain.faults.keeper_session_end) return;
        auto j = open_journal(cfg_.journal_path);
        if (!j) {
            log("mcpwarden: journal: " + j.error().message + " (session.end not recorded)\n");
            return;
        }
        // Records handed over to it (hand_over_records) are in its intent file, and so is
        // what it left of a start-up it may not have finished (its session.start too).
        record_end(**j, report, /*take_over=*/true);
    }

    // The relay died before it asked for the teardown: a client that SIGKILLs it inside its
    // EOF window (Codex SIGTERMs the relay's group and SIGKILLs it 270-640 ms later, while the
    // relay waits the 1 s window for a server that does not exit on EOF; docs/CLIENTS.md).
    // Nobody else records the session's end: without this, the session stayed `client_lost`
    // until a later `run` or `reconcile` called it orphaned. record_teardown took over what
    // the relay left (its session.start, its intent file) before the teardown's records; the
    // end follows them, on the same journal, `recorded_by: keeper`. Its reason is the relay's
    // when the relay had recorded the client's loss, else `relay_died`.
    void end_session_for_the_dead_relay(const TeardownReport& report) {
        if (!cfg_.journal_on || cfg_.contain.faults.keeper_session_end) return;
        if (!journal_) {
            auto j = open_journal(cfg_.journal_path, cfg_.journal_sync, kLateRecordLockWait);
            if (!j) {
                log("mcpwarden: journal: " + j.error().message + " (session.end not recorded)\n");
                return;
            }
            journal_ = std::move(*j);
            take_over_from_relay(*journal_);
        }
        record_end(*journal_, report, /*take_over=*/false);
    }

    // session.end for the relay, unless the journal already holds one (the relay died right
    // after writing it). `take_over`: what the relay left is taken over first.
    void record_end(journal::Journal& journal, const TeardownReport& report, bool take_over) {
        journal::Filter f;
        f.session = cfg_.session_id;
        auto rows = journal::list_sessions(journal.paths().db, f);
        if (rows && !rows->empty() && rows->front().state == "ended") return;
        if (take_over) take_over_from_relay(journal);
        if (end_reason_.empty()) {
            // Read after the take-over: the relay's session.client_lost may be in its intents.
            auto now = journal::list_sessions(journal.paths().db, f);
            const bool lost = now && !now->empty() && now->front().state == "client_lost";
            end_reason_ = lost ? "client_lost" : "relay_died";
        }
        auto status = child_ && child_->exit_status() ? child_->exit_status() : report.root_status;
        journal::Event e = journal::session_end(session_end_record(
            cfg_.session_id, end_reason_, status, journal::teardown_report_json(report)));
        e.data["recorded_by"] = "keeper";
        if (auto a = journal.append(e); !a)
            log("mcpwarden: journal: " + a.error().message + " (session.end not recorded)\n");
    }

    // Removes the session cgroup (Containment's destructor) once the tree is gone.
    void release_containment() {
        containment_.reset();
        trace_phase("keeper_released_containment");
    }

    // True when the lifeline closes before "ended" (bounded by kRelayEndBound).
    bool relay_died_before_ending() {
        return !await_control_line("ended", kRelayEndBound).value_or(true);
    }

    // What the relay would have recorded as session.start, as far as the keeper knows it:
    // used only if the relay died before its record was durable. The client is unknown
    // here (the keeper's parent was the relay), and the record says who wrote it.
    journal::SessionStart session_start_of_keeper() const {
        journal::SessionStart s;
        s.session = cfg_.session_id;
        s.server_name = cfg_.server_name;
        s.writer = journal::WriterIdentity::self();
        s.keeper = s.writer.process;
        if (child_) s.server = child_->id();
        s.server_argv = cfg_.command;
        char cwd[4096];
        if (::getcwd(cwd, sizeof cwd)) s.cwd = cwd;
        if (containment_)
            for (const LayerState* l : containment_->layers().all())
                if (l->on) s.layers.push_back(l->name);
        s.extra = journal::Json{{"recorded_by", "keeper"},
                                {"eof_grace_ms", static_cast<int64_t>(cfg_.eof_grace.count())},
                                {"term_grace_ms", static_cast<int64_t>(cfg_.term_grace.count())}};
        if (cfg_.sandbox) s.extra["sandbox"] = sandbox_record(*cfg_.sandbox);
        return s;
    }

    bool spawn_failed(const Error& e, int exit_code) {
        send(fmt::format("spawn-failed {} {} {}", e.code, exit_code, e.message));
        return false;
    }

    void send(const std::string& line) {
        (void)write_all(fds_.report.get(), line_of(line), "keeper report pipe");
    }

    // `text` as one line of the report pipe.
    static std::string line_of(std::string text) {
        for (char& c : text)
            if (c == '\n') c = ' ';
        text.push_back('\n');
        return text;
    }

    void log(const std::string& text) { (void)write_all(fds_.log.get(), text, "stderr"); }

    const KeeperConfig& cfg_;
    KeeperFds fds_;
    std::unique_ptr<Containment> containment_;
    std::optional<Child> child_;
    // The teardown's plan made ahead while the session is idle (plan_ahead_if_due).
    std::optional<Teardown> plan_;
    std::optional<std::chrono::steady_clock::time_point> plan_at_;
    std::chrono::milliseconds plan_every_ = kPlanAheadFirst;
    std::optional<SignalFd> sigchld_;
    std::optional<LineReader> control_;
    bool sandbox_ready_ = false;  // the relay said the plan is complete (await_sandbox_ready)
    std::string end_reason_;      // from "teardown <reason>"; empty: the relay never said
    bool status_sent_ = false;
    // The keeper's journal ("The keeper's journal" above).
    std::unique_ptr<journal::Journal> journal_;
    std::unique_ptr<JournalOpening> opening_;  // an attempt under way
    std::optional<Error> journal_error_;       // why it is not open (yet)
    std::chrono::steady_clock::time_point journal_retry_at_{};
    bool relay_journal_started_ = false;  // "journal-started": the relay's journal is open
    std::chrono::milliseconds journal_backoff_ = kJournalRetryFirst;
    std::vector<journal::Event> unrecorded_;     // the teardown's records, made without a journal
    std::vector<std::string> unrecorded_lines_;  // their intent lines (handed over: the relay's)
    bool records_committed_ = false;             // the teardown's records are all on record
    bool records_lost_ = false;                  // some could not be: a loss to record
    bool records_in_intents_ = false;            // the teardown's recorder writes the intent file
    bool records_handed_over_ = false;           // the relay commits them (hand_over_records)
    static constexpr std::chrono::milliseconds kPlanAheadFirst{100};
    static constexpr std::chrono::milliseconds kPlanAheadAtMost{5000};
};

}  // namespace

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
