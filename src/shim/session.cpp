#include "shim/session.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/layers.hpp"
#include "contain/teardown.hpp"
#include "journal/redact.hpp"
#include "record/teardown_record.hpp"
#include "sandbox/dry_start.hpp"
#include "shim/keeper.hpp"
#include "sys/cgroup.hpp"
#include "sys/cpu_affinity.hpp"
#include "sys/exec_path.hpp"
#include "sys/fd_passing.hpp"
#include "sys/pipe.hpp"
#include "sys/prctl.hpp"

extern char** environ;

namespace warden::shim {

std::string_view to_string(Session::End e) {
    switch (e) {
        case Session::End::none:
            return "none";
        case Session::End::client_lost:
            return "client_lost";
        case Session::End::server_exit:
            return "server_exit";
        case Session::End::keeper_died:
            return "keeper_died";
        case Session::End::stdout_guard:
            return "stdout_guard";
        case Session::End::relay_error:
            return "relay_error";
        case Session::End::wedged:
            return "wedged";
    }
    return "?";
}

namespace {

enum : uint32_t { kSignals = 1, kParent, kReport, kKeeper, kDenials };

// Slack on top of the keeper's own bounds (term grace + its SIGKILL wait) before we stop
// waiting for its report and tear down ourselves.
constexpr std::chrono::milliseconds kKeeperSlack{5000};
constexpr std::chrono::milliseconds kKillWait{3000};
// How long after "ended" the keeper may take to exit (its journal's close: the join of its
// writer thread, a transaction at most) before it is SIGKILLed (release_keeper).
constexpr std::chrono::milliseconds kKeeperExitWait{2000};
// How long the relay waits for the commit of the client's evidence (commit_evidence).
constexpr std::chrono::milliseconds kEvidenceCommitWait{2000};

std::string random_session_id() {
    unsigned char b[8];
    if (::getrandom(b, sizeof b, 0) != static_cast<ssize_t>(sizeof b)) {
        auto t = std::chrono::steady_clock::now().time_since_epoch().count();
        std::memcpy(b, &t, sizeof b);
    }
    std::string s;
    for (unsigned char c : b)
        s += fmt::format("{:02x}", c);
    return s;
}

// The run of a shared tree (src/share/broker.cpp) takes the session id its broker chose and
// recorded for the tree's clients. Removed from the environment at once: the server's own
// children must not take it (a nested `mcpwarden run` would reuse it).
std::optional<std::string> shared_tree_session_id() {
    const char* given = std::getenv("MCPWARDEN_SHARE_TREE");
    std::optional<std::string> id;
    if (given && std::strlen(given) == 16 &&
        std::string_view(given).find_first_not_of("0123456789abcdef") == std::string_view::npos)
        id = given;
    ::unsetenv("MCPWARDEN_SHARE_TREE");
    return id;
}

// A client may start us with 0, 1 or 2 closed; a pipe made later would land there and be
// mistaken for stdio. Point missing ones at /dev/null.
void ensure_stdio_open() {
    for (int fd = 0; fd < 3; ++fd)
        if (::fcntl(fd, F_GETFD) < 0) {
            int n = ::open("/dev/null", O_RDWR);
            if (n >= 0 && n != fd) {
                ::dup2(n, fd);
                ::close(n);
            }
        }
}

// The signals that end a session (read through the relay's signalfd), blocked before the
// first fork so none can take the default action (see spawn_keeper_and_server).
void block_session_signals() {
    sigset_t set;
    sigemptyset(&set);
    for (int sig : {SIGTERM, SIGINT, SIGHUP})
        sigaddset(&set, sig);
    ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int wait_status_to_exit_code(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
}

// "exit status 3", "signal 9": for messages.
std::string describe_wait_status(int st) {
    if (WIFEXITED(st)) return fmt::format("exit status {}", WEXITSTATUS(st));
    if (WIFSIGNALED(st)) return fmt::format("signal {}", WTERMSIG(st));
    return fmt::format("wait status {}", st);
}

std::string basename_of(const std::string& p) {
    auto slash = p.rfind('/');
    return slash == std::string::npos ? p : p.substr(slash + 1);
}

// What the stdout guard diverted and what its caps kept back (relay.hpp, "Stdout guard"), for
// session.end (docs/RUN.md).
journal::Json diverted_record(const RelayStats& st) {
    return journal::Json{{"lines", st.diverted},
                         {"bytes", st.diverted_bytes},
                         {"shown_bytes", st.diverted_shown},
                         {"lines_not_shown_whole", st.diverted_dropped},
                         {"over_rate_bytes", st.over_rate},
                         {"over_total_bytes", st.over_total},
                         {"stderr_full_bytes", st.stderr_full}};
}

}  // namespace

void relay_what_is_ready(Relay& relay, const std::function<void(const Relay::Wake&)>& handle) {
    auto moved = [&] {
        const RelayStats& st = relay.stats();
        return st.bytes_server_to_client + st.bytes_stderr + st.server_lines;
    };
    for (int pass = 0; pass < 4096; ++pass) {
        const uint64_t before = moved();
        auto w = relay.poll(0);
        if (!w) return;
        if (w->what != Relay::Wake::What::timeout) handle(*w);
        if (w->what == Relay::Wake::What::timeout && moved() == before) return;
    }
}

namespace {

// --explain under a profile: the server started once in a plan of its own before the real
// start, asked initialize and tools/list, torn down, and each denial it met said with the flag
// that allows it (src/sandbox/dry_start.hpp). A plan that cannot be made is left to the real
// start to report.
std::string dry_start_text(const RunOptions& opts, sandbox::Launch l) {
    l.session_id += "-dry";
    auto plan = sandbox::prepare(opts, l);
    if (!plan) return "";
    auto d = sandbox::dry_start(*plan, opts.command, l.executable, std::chrono::seconds(30));
    sandbox::remove_private_tmp(plan->private_tmp());
    return "mcpwarden: " +
           (d ? sandbox::render_dry_start(*d) : "dry start: " + d.error().message + "\n");
}

}  // namespace

// Requests the session abandons itself. The relay reports outstanding requests only when the
// client is lost; a session can also end with the client still there (the keeper died and took
// the server with it, the server exited, the stdout guard failed). Each request still
// outstanding then is recorded `activity.abandoned` with the session's end reason as cause, so
// that no request stays in flight for ever (reconcile never touches an ended session). The
// client gets no answer for it: the relay has no way to answer the client itself except a
// denial before forwarding, and docs/RUN.md promises only that unanswered requests are on
// record. This sink stands in front of the real one so that a request is resolved once: an
// answer that still reaches the client after its request was abandoned here, or a client loss
// later, does not resolve it again.
class SettlingSink final : public ActivitySink {
  public:
    explicit SettlingSink(std::unique_ptr<ActivitySink> inner) : inner_(std::move(inner)) {}

    Result<int64_t> on_request(const rpc::Message& m, std::string_view line) override {
        return inner_->on_request(m, line);
    }
    Result<int64_t> on_oversize_request(const rpc::Message& m, std::string_view prefix) override {
        return inner_->on_oversize_request(m, prefix);
    }
    void on_response(const Answer& a, const Outstanding* req) override {
        if (req && settled_.count(key(*req))) return;
        inner_->on_response(a, req);
    }
    void on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) override {
        std::vector<Outstanding> rest;
        for (const Outstanding& o : outstanding)
            if (!settled_.count(key(o))) rest.push_back(o);
        inner_->on_client_lost(cause, rest);
    }
    void on_notification(Direction d, const rpc::Message& m) override {
        inner_->on_notification(d, m);
    }
    void on_invalid(Direction d, std::string_view line, std::string_view why) override {
        inner_->on_invalid(d, line, why);
    }
    void on_oversize(Direction d, size_t bytes) override { inner_->on_oversize(d, bytes); }
    void on_diverted(std::string_view line) override { inner_->on_diverted(line); }

    // Records each outstanding request not settled yet (those whose answer is being written
    // to the client too, unless `unanswered_only`) as abandoned for `cause`, as evidence
    // (JournalSink::record_evidence): in the intent file when this returns.
    void abandon(std::span<const Outstanding> outstanding, bool unanswered_only,
                 JournalSink* journal, const std::string& session, std::string_view cause) {
        std::vector<journal::Event> abandoned;
        for (const Outstanding& o : outstanding) {
            if (unanswered_only && o.answer != 0) continue;
            if (!settled_.insert(key(o)).second) continue;
            if (!journal || !journal->journal()) continue;
            auto id = journal::rpc_id_from_json_text(o.raw.empty() ? "null" : o.raw);
            abandoned.push_back(ended(o, session, id ? *id : journal::Json(o.raw), cause));
        }
        if (journal) journal->record_evidence(abandoned);
    }

  private:
    // A subscriptions/listen stream is not a call left unanswered: it ends with the session,
    // closed by the server when the server's exit ended it.
    static journal::Event ended(const Outstanding& o, const std::string& session, journal::Json id,
                                std::string_view cause) {
        if (o.method != "subscriptions/listen" || Faults::from_env().stream_abandoned)
            return journal::activity_abandoned(session, o.record, std::move(id),
                                               std::string(cause));
        return journal::activity_stream_end(session, o.record, std::move(id), std::string(cause),
                                            cause == "server_exit" ? "server" : "mcpwarden");
    }

    // Ids are unique among outstanding requests; the record (journal seq or ticket) tells
    // apart a later request that reuses an id.
    static std::pair<int64_t, std::string> key(const Outstanding& o) { return {o.record, o.raw}; }

    std::unique_ptr<ActivitySink> inner_;
    std::set<std::pair<int64_t, std::string>> settled_;
};

Session::Session(RunOptions opts) : opts_(std::move(opts)) {}
Session::~Session() {
    end_helpers();
}

void Session::end_with_session(pid_t helper) {
    if (helper > 0) helpers_.push_back(helper);
}

// Ours and unreaped, a helper's pid cannot name another process yet: signalled and waited
// for by number. Done before anything here reaps children it does not name
// (tear_down_ourselves' waitpid(-1)), which would leave the number free to be reused.
void Session::end_helpers() {
    if (Faults::from_env().sweep_left) helpers_.clear();  // the guard off: a negative control
    for (pid_t h : helpers_)
        end_helper(h);
    helpers_.clear();
}

void end_helper(pid_t child) {
    if (child <= 0) return;
    (void)::kill(child, SIGKILL);
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {
    }
}

void Session::relay_ready_output() {
    relay_what_is_ready(*relay_, [this](const Relay::Wake& w) { handle(w); });
}

void Session::log(const std::string& text) const {
    (void)write_all(2, text, "stderr");
}

// ---- The algorithm ----------------------------------------------------------------------

int Session::run() {
    if (auto s = spawn_keeper_and_server(); !s) {
        log("mcpwarden: " + s.error().message + "\n");
        // A start that failed past the keeper's fork (the relay's own set-up): the lifeline's
        // end makes the keeper tear down what it started, and it is reaped before we return.
        if (keeper_pid_ > 0 && !keeper_dead_) {
            control_.reset();
            reap_keeper(opts_.eof_grace + opts_.term_grace + kKillWait);
        }
        end_helpers();
        return spawn_exit_code_.value_or(125);
    }
    relay_until_client_leaves();
    trace_phase("client_left");
    close_server_input();
    wait_for_exit();
    trace_phase("eof_window_over");
    record_supervision();
    tear_down_tree();
    trace_phase("report_received");
    record_outcome();
    trace_phase("outcome_recorded");
    release_keeper();
    end_helpers();
    trace_phase("keeper_released");
    return exit_code();
}

Status Session::spawn_keeper_and_server() {
    ensure_stdio_open();
    // What follows changes signal state process-wide; a host that called run_session() (the
    // library) gets it back when the session is destroyed.
    host_signals_.emplace(std::initializer_list<int>{SIGPIPE, SIGXFSZ});
    // Before the keeper is forked and before the first journal write: a write past
    // RLIMIT_FSIZE must fail as EFBIG (the journal-failure policy), not kill us by SIGXFSZ
    // and leave the tree to PDEATHSIG. The spawner resets dispositions in the server.
    ::signal(SIGXFSZ, SIG_IGN);
    // Likewise SIGPIPE, before the first write to the keeper's control pipe: a keeper killed
    // early leaves that pipe without a reader, and the write must fail as EPIPE (the relay
    // then tears the tree down itself), not kill the relay and leave the tree to no one.
    ::signal(SIGPIPE, SIG_IGN);
    // SIGTERM/SIGINT/SIGHUP end the session through the relay's signalfd (start_relay), but
    // one can come before that exists: the server is already up (and the client may already
    // see it) while we wait for the keeper's "spawned". Left at their default, one would kill
    // us there and then, leaving the keeper to tear the tree down alone and unrecorded.
    // Blocked from now on, it stays pending and the signalfd reads it first thing.
    // The keeper inherits the mask (it ignores these anyway); the spawner resets the server's.
    block_session_signals();
    session_id_ = shared_tree_session_id().value_or(random_session_id());
    if (opts_.command.empty()) return Error::msg("run: no command given (mcpwarden run -- CMD)");
    if (starts_servers_again() && opts_.isolate == Isolate::Pidns) {
        spawn_exit_code_ = 2;
        return Error::msg(fmt::format(
            "{} cannot be combined with --isolate=pidns: the PID namespace ends with its first "
            "server, and a woken server would need a new one",
            opts_.idle_stop ? "--idle-stop"
            : opts_.lazy    ? "--lazy"
                            : "--restart on-failure"));
    }
    trace_phase("run_start");
    if (auto s = prepare_sandbox(); !s) return s;
    if (auto s = fork_keeper(); !s) return s;
    trace_phase("keeper_forked");
    if (auto s = complete_sandbox(); !s) return s;
    start_denial_counter();
    trace_phase("sandbox_complete");
    open_journal_early();
    if (auto s = spawned_early_ ? Status{} : await_spawn(); !s) {
        sandbox::remove_private_tmp(sandbox_.private_tmp());  // no server will use it
        return s;
    }
    find_limits();
    trace_phase("spawned_received");
    if (auto s = start_journal(); !s) return s;
    if (auto s = start_relay(); !s) return s;
    start_health();
    trace_phase("relay_started");
    if (opts_.explain) explain_relay();
    return {};
}

void Session::relay_until_client_leaves() {
    // A server that exits at once ("exit 3", "kill -9 $$") makes the keeper write "spawned"
    // and "exited" back to back; await_spawn() read both and consumed only the first. The
    // pipe is empty now, so epoll would never report the second: take it from the buffer.
    read_reports();
    while (end_ == End::none) {
        auto w = relay_->poll(next_wake_ms());
        if (!w) {
            log("mcpwarden: relay: " + w.error().message + "\n");
            end_ = End::relay_error;
            relay_->client_lost(ClientLoss::stdout_closed);
            return;
        }
        handle(*w);
        hibernate_if_idle();
        restart_when_due();
        supervise();
    }
    supervise();  // an exit read before the loop
}

void Session::close_server_input() {
    relay_->close_server_input();
}

void Session::wait_for_exit() {
    if (server_status_ || keeper_dead_) return;
    if (hib_ && hib_->state() != Hibernation::State::awake &&
        hib_->state() != Hibernation::State::waking)
        return;  // no server, or the keeper is already tearing it down
    auto deadline = std::chrono::steady_clock::now() + opts_.eof_grace;
    int signals_before = signal_;
    while (!server_status_ && !keeper_dead_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return;
        auto w = relay_->poll(static_cast<int>(left.count()));
        if (!w || w->what == Relay::Wake::What::timeout) return;
        handle(*w);
        if (signal_ != signals_before) return;  // asked again: no more politeness
    }
}

void Session::tear_down_tree() {
    // Evidence first: what the client left in flight is on record before any signal, in the
    // intent file (JournalSink::record_evidence: one write(), as a forwarded request), so the
    // keeper may signal at once; the commit follows while it does, and the keeper, told
    // "evidence" once it is over, writes its own records after it (keeper.cpp).
    // With the server already gone (it exited, or died with the keeper by PDEATHSIG), what
    // it wrote is in its stdout pipe: relay that, and a request still unanswered then never
    // will be. (An answer read but still being written to a slow client is left to the end.)
    // A client that reads slowly can hold the server's last answers in its stdout pipe,
    // unread (reading paused at the high-water mark): those requests are answered, not
    // abandoned, and what is abandoned is then decided in record_outcome, after the drain.
    if (keeper_dead_ || server_status_) {
        relay_what_is_ready(*relay_, [this](const Relay::Wake& w) { handle(w); });
        if (!relay_->server_output_held_back())
            settling_->abandon(relay_->outstanding(), /*unanswered_only=*/true, journal_,
                               session_id_, to_string(end_));
    }
    const Faults faults = Faults::from_env();
    // Under --journal-sync periodic, from now on no periodic fsync starts and the commit of
    // session.end leaves its WAL fsync and its checkpoint's file to the next writer
    // (journal.cpp, "Durability"): `run` exits without waiting for the disk, and what it
    // committed is in the WAL through write().
    const bool leave_end_sync = opts_.journal_sync == JournalSync::Periodic;
    if (journal_) journal_->tearing_down(leave_end_sync);
    trace_phase("evidence_written");
    if (!keeper_dead_) {
        // The reason goes along: if we die before our session.end is on record, the keeper
        // records it (see release_keeper).
        if (!write_all(control_.get(), fmt::format("teardown {}\n", to_string(end_)),
                       "keeper control pipe"))
            keeper_gone();
        if (faults.relay_dies_at_teardown) ::_exit(9);
    }
    commit_evidence();
    auto deadline = std::chrono::steady_clock::now() + opts_.term_grace + kKillWait + kKeeperSlack;
    while (!keeper_dead_ && !report_json_) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) {
            log("mcpwarden: the keeper did not report in time; tearing down ourselves\n");
            (void)keeper_pidfd_.send_signal(SIGKILL);
            (void)keeper_pidfd_.wait_exit(1000);
            keeper_gone();
            break;
        }
        auto w = relay_->poll(static_cast<int>(left.count()));
        if (!w) break;
        handle(*w);
        // The keeper's records come before its report (keeper.cpp): checked and queued as
        // they come, while the keeper removes its cgroup.
        if (journal_ && !keeper_records_.empty() && !faults.relay_drops_keepers_records)
            journal_->queue_keepers_records(std::exchange(keeper_records_, {}));
    }
    if (report_json_ && faults.relay_dies_at_report) ::_exit(9);
    if (!report_json_) {
        // The keeper died (or hung): the tree reparented to us, the other subreaper.
        tear_down_ourselves();
    } else if (journal_ && !faults.relay_drops_keepers_records) {
        // The keeper handed its teardown's records over (keeper_journal.cpp, "The keeper's
        // journal"): after ours, and committed with our session.end.
        journal_->queue_keepers_records(keeper_records_);
    }
    if (!server_status_ && report_json_) {
        auto j = nlohmann::json::parse(*report_json_, nullptr, false);
        if (j.is_object() && j.contains("root_status") && j["root_status"].is_number_integer())
            server_status_ = j["root_status"].get<int>();
    }
}

// While the keeper signals: what was written to the intent file (and posted before it) is
// committed, and the keeper, which writes its teardown records after ours, is told.
void Session::commit_evidence() {
    // Bounded: the evidence is in the intent file already, and what a slow disk holds back
    // is committed with session.end, after it. The keeper is told only of a commit that is
    // over (it waits kEvidenceWait for the line, and then goes on without it).
    const bool committed = !journal_ || journal_->flush(kEvidenceCommitWait);
    trace_phase("evidence_committed");
    if (!keeper_dead_ && committed)
        (void)write_all(control_.get(), "evidence\n", "keeper control pipe");
}

void Session::record_outcome() {
    // What the server wrote before it went goes to the client, if it still reads.
    relay_->drain(1000);
    finish_server_log();
    // Whatever is still outstanding now will never be answered: on record before the end.
    settling_->abandon(relay_->outstanding(), /*unanswered_only=*/false, journal_, session_id_,
                       to_string(end_));
    record_catalog();
    record_denials();
    if (journal_) {
        journal_->recover_uncommitted();
        // What is queued (the keeper's records, what the drain answered and abandoned) is
        // committed with session.end, in one transaction before it (Journal::append).
        // The keeper's report is its `teardown`, as the keeper wrote it: canonical JSON,
        // spliced into the record as it stands (Journal::append's member), not parsed into a
        // Json and serialized again on the way to `run`'s exit (docs/BENCHMARKS.md).
        journal::Event end = journal::session_end(session_end_record(
            session_id_, std::string(to_string(end_)), server_status_, std::nullopt));
        if (report_json_) end.data.erase("teardown");
        end.data["stdout_diverted"] = diverted_record(relay_->stats());
        if (opts_.journal_sync == JournalSync::Periodic)
            if (journal::Journal* j = journal_->journal()) j->leave_end_sync_to_next_writer();
        journal_->append(
            end, report_json_ ? std::optional<journal::CanonicalMember>({"teardown", *report_json_})
                              : std::nullopt);
        journal_->flush();
    }
}

// The session is on record: "ended" lets the keeper go (it stayed to record session.end
// should we die first), our journal is closed meanwhile, and the keeper is reaped before we
// return: when `run` exits, nothing it made is alive (docs/RUN.md, "When run returns"). The
// wait is bounded: a keeper that has not exited kKeeperExitWait after "ended" (stopped, or
// stuck in the kernel on a hung disk) is SIGKILLed through its pidfd and waited for once more;
// past that it is named on stderr, the one way `run` can return with a process of its own
// alive.
void Session::release_keeper() {
    // The guard off (a negative control): the keeper is neither told nor waited for; our
    // exit closes its lifeline.
    const bool leave_keeper = Faults::from_env().relay_leaves_keeper;
    if (!keeper_dead_ && !leave_keeper) {
        (void)write_all(control_.get(), "ended\n", "keeper control pipe");
        control_.reset();
    }
    if (journal_) {
        if (exit_process_)
            journal_->close_at_exit();
        else
            journal_->close();
    }
    trace_phase("journal_closed");
    closed_for_exit_ = exit_process_;
    if (keeper_dead_ || leave_keeper) return;
    reap_keeper(kKeeperExitWait);
}

void Session::reap_keeper(std::chrono::milliseconds bound) {
    auto exits_within = [&](std::chrono::milliseconds b) {
        return !keeper_pidfd_.valid() ||
               keeper_pidfd_.wait_exit(static_cast<int>(b.count())).value_or(false);
    };
    bool gone = exits_within(bound);
    if (!gone) {
        log(fmt::format("mcpwarden: the keeper (pid {}) did not exit within {} ms; killing it\n",
                        keeper_pid_, bound.count()));
        (void)keeper_pidfd_.send_signal(SIGKILL);
        gone = exits_within(kKeeperExitWait);
    }
    if (!gone) {
        log(
            fmt::format("mcpwarden: the keeper (pid {}) is still alive after SIGKILL (stuck in "
                        "the kernel); run returns without it\n",
                        keeper_pid_));
        return;
    }
    int st = 0;
    if (::waitpid(keeper_pid_, &st, 0) == keeper_pid_) keeper_status_ = st;
    keeper_dead_ = true;
    trace_phase("keeper_reaped");
}

int Session::exit_code() const {
    // The guard ended the session, whatever the server's status after it: a client (or a
    // script) must see that the session failed, not the 0 of a server that exited on EOF.
    if (end_ == End::stdout_guard) return kStdoutGuardExit;
    // Ended while asleep: no server ran at the end, and none failed.
    if (hib_ && hib_->state() == Hibernation::State::asleep && end_ == End::client_lost) return 0;
    if (server_status_) return wait_status_to_exit_code(*server_status_);
    return end_ == End::relay_error ? 125 : 1;
}

// ---- Start-up ---------------------------------------------------------------------------

Status Session::fork_keeper() {
    // The client: our parent. A pidfd on it tells us when it exits, whatever thread of it
    // started us (PDEATHSIG would follow that thread, not the client). Parent 1 means we are
    // already orphaned or were started by init: no watch then, stdin EOF still works.
    client_.pid = ::getppid();
    if (client_.pid > 1) {
        if (auto id = read_identity(client_.pid)) client_ = *id;
        if (auto p = Pidfd::open(client_.pid)) parent_pidfd_ = std::move(*p);
        if (::getppid() != client_.pid) parent_pidfd_.reset();  // it died in between
        parent_note_ = parent_pidfd_.valid()
                           ? fmt::format("on   pidfd on the client (pid {})", client_.pid)
                           : "off  pidfd_open on the parent failed";
    } else {
        parent_note_ = "off  parent is pid 1 (already orphaned or started by init)";
    }
    // We are a subreaper too: if the keeper dies, its tree comes to us.
    auto sr = set_child_subreaper(true);
    relay_subreaper_note_ =
        sr ? "on   read back from PR_GET_CHILD_SUBREAPER" : "off  " + sr.error().message;

    auto in = make_pipe(), out = make_pipe(), err = make_pipe(), control = make_pipe(),
         report = make_pipe();
    for (auto* p : {&in, &out, &err, &control, &report})
        if (!*p) return p->error();
    SocketPair fd_socket;
    if (starts_servers_again()) {
        auto sp = make_socket_pair();
        if (!sp) return sp.error();
        fd_socket = std::move(*sp);
    }

    KeeperConfig kc;
    kc.session_id = session_id_;
    kc.command = opts_.command;
    kc.contain.use_cgroup = opts_.isolate != Isolate::None;
    kc.contain.use_pidns = opts_.isolate == Isolate::Pidns;
    kc.require_cgroup = opts_.isolate == Isolate::Cgroup;
    kc.require_pidns = opts_.isolate == Isolate::Pidns;
    kc.eof_grace = opts_.eof_grace;
    kc.term_grace = opts_.term_grace;
    kc.explain = opts_.explain;
    kc.journal_on = !opts_.no_journal;
    kc.journal_path = opts_.journal;
    kc.journal_sync = opts_.journal_sync;
    kc.server_name = opts_.name.empty() ? basename_of(opts_.command[0]) : opts_.name;
    kc.sandbox = &sandbox_;
    kc.hibernation = starts_servers_again();
    kc.contain.limits = {opts_.memory_max, opts_.tasks_max, opts_.cpu_max,
                         opts_.limits_best_effort};
    kc.start_asleep = opts_.lazy;

    // The keeper leaves the client's process group; we stay in it. Clients and process
    // managers stop a child tree with kill(-pgid, SIGKILL): a keeper in that group died with
    // us, nobody was left to tear down, and whatever had left the server's group (a setsid
    // helper holding a port) lived on under PID 1. In a group of its own it sees its
    // lifeline close and tears down. We stay, so that a terminal's ^C still reaches the relay.
    // Both sides call setpgid, so neither acts before the group is in place.
    const bool own_group = !kc.contain.faults.keeper_pgrp;
    // With path rules still to add after the fork, we and the keeper both have work at once:
    // the keeper is moved off our CPU as soon as it exists (src/sys/cpu_affinity.hpp), and
    // takes its whole set back on "sandbox-ready". Without, we sleep right after the fork and
    // the keeper has our CPU to itself (but for the journal's opening: open_journal_early).
    if (!sandbox_.complete())
        if (auto cpus = cpu_affinity(0); cpus && cpus->count() > 1) kc.cpus = *cpus;
    pid_t pid = ::fork();
    if (pid < 0) return Error::sys("fork", "keeper", errno);
    if (pid == 0) {
        // The keeper. Single-threaded: no thread exists yet in the relay.
        if (own_group) ::setpgid(0, 0);
        Fd client(parent_pidfd_.valid() ? ::fcntl(parent_pidfd_.get(), F_DUPFD_CLOEXEC, 3) : -1);
        parent_pidfd_.reset();
        in->write.reset();
        out->read.reset();
        err->read.reset();
        control->write.reset();
        report->read.reset();
        KeeperFds kf;
        kf.server_in = std::move(in->read);
        kf.server_out = std::move(out->write);
        kf.server_err = std::move(err->write);
        kf.control = std::move(control->read);
        kf.report = std::move(report->write);
        kf.client = std::move(client);
        kf.fd_socket = std::move(fd_socket.b);
        fd_socket.a.reset();
        denial_receiver_.reset();  // the relay's alone (sandbox/denials.hpp)
        // Not fd 2 itself: spawn_server puts the server's stderr pipe there to hand it over,
        // and puts this back after. Kept as fd 2, the keeper would hold the server's stderr
        // open for its whole life, and the relay would wait for an EOF that cannot come
        // until the keeper exits: every session's end would take the full drain bound.
        kf.log = Fd(kc.contain.faults.keeper_stderr ? 2 : ::fcntl(2, F_DUPFD_CLOEXEC, 3));
        ::_exit(keeper_main(kc, std::move(kf)));
    }
    keeper_pid_ = pid;
    if (kc.cpus) keeper_moved_off_ = move_child_off_our_cpu(pid, *kc.cpus);
    if (own_group) ::setpgid(pid, pid);
    if (auto p = Pidfd::open(pid)) keeper_pidfd_ = std::move(*p);
    server_in_ = std::move(in->write);
    server_out_ = std::move(out->read);
    server_err_ = std::move(err->read);
    control_ = std::move(control->write);
    report_ = std::move(report->read);
    fd_socket_ = std::move(fd_socket.a);
    (void)set_nonblocking(report_.get());
    reports_ = std::make_unique<LineReader>(report_.get());
    return {};
}

// The plan is made here, in the relay, so that --explain, session.start and
// --require-sandbox all describe the same rules the keeper's child applies (it inherits the
// plan, with its ruleset fd, across the fork). A plan that is only partly enforceable on
// this kernel is said on stderr, never downgraded in silence; with --require-sandbox it is
// refused (exit 125).
//
// Only the first half of the plan is made before the fork (src/sandbox/sandbox.hpp); its
// path rules, most of its cost, are added by complete_sandbox() while the keeper sets up the
// containment on the other core, and the keeper starts the server only once told they are in.
Status Session::prepare_sandbox() {
    if (opts_.sandbox == Sandbox::Off) return {};
    sandbox::Launch l;
    l.argv = opts_.command;
    auto exe = find_executable(opts_.command[0]);
    if (!exe) return {};  // the keeper's spawn reports it (127/126) as without a sandbox
    l.executable = *exe;
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) l.cwd = cwd;
    if (const char* h = std::getenv("HOME")) l.home = h;
    if (const char* t = std::getenv("TMPDIR")) l.tmp_parent = t;
    l.session_id = session_id_;
    const Faults faults = Faults::from_env();
    l.no_landlock = faults.landlock;
    l.no_runner_store = faults.runner_store;
    l.no_launcher = faults.sandbox_launcher;
    l.no_inner_commands = faults.sandbox_inner_commands;
    l.no_launcher_home = faults.sandbox_launcher_home_untold;
    if (opts_.explain) log(dry_start_text(opts_, l));
    l.count_denials = !faults.denials_uncounted;
    auto plan = sandbox::prepare_ahead(opts_, l);
    const std::string profile(sandbox::to_string(opts_.sandbox));
    if (!plan) {
        spawn_exit_code_ = 125;
        return Error::msg("--sandbox " + profile + ": " + plan.error().message);
    }
    sandbox_ = std::move(*plan);
    denial_receiver_ = sandbox_.take_denial_receiver();
    if (sandbox_.level() == "full") return {};
    std::string missing;
    for (const auto& n : sandbox_.not_enforced())
        missing += "\n  not enforced: " + n;
    if (opts_.require_sandbox) {
        spawn_exit_code_ = 125;
        return Error::msg("--require-sandbox: the " + profile +
                          " profile cannot be fully enforced here; not starting" + missing);
    }
    log("mcpwarden: --sandbox " + profile + " is only partly enforced on this kernel:" + missing +
        "\n");
    return {};
}

// The plan's path rules, added to the ruleset the keeper inherited (the same kernel object),
// then "sandbox-ready": the keeper does not start the server before that line. A plan that
// cannot be completed ends the session before any server: our end of the control pipe
// closes, the keeper, still waiting for the line, exits without starting one, and we reap it.
Status Session::complete_sandbox() {
    if (sandbox_.complete()) return {};
    if (Faults::from_env().sandbox_ready_early) {
        // The guard's negative control: the server is started before the rules are in.
        (void)write_all(control_.get(), "sandbox-ready\n", "keeper control pipe");
        if (auto s = await_spawn(); !s) return s;
        spawned_early_ = true;
    }
    if (auto st = sandbox_.add_path_rules(); !st) {
        spawn_exit_code_ = 125;
        control_.reset();
        int status = 0;
        ::waitpid(keeper_pid_, &status, 0);
        keeper_dead_ = true;
        return Error::msg("--sandbox " + std::string(sandbox::to_string(opts_.sandbox)) + ": " +
                          st.error().message);
    }
    if (!spawned_early_) (void)write_all(control_.get(), "sandbox-ready\n", "keeper control pipe");
    return {};
}

Status Session::await_spawn() {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
        reports_->fill();
        if (auto line = reports_->next_line()) {
            auto m = parse_keeper_message(*line);
            if (m.kind == KeeperMessage::Kind::spawned || m.kind == KeeperMessage::Kind::asleep) {
                server_ = m.server;  // none yet when asleep (--lazy)
                cgroup_dir_ = m.cgroup_dir;
                layers_json_ = m.json;
                return {};
            }
            int st = 0;
            ::waitpid(keeper_pid_, &st, 0);
            keeper_dead_ = true;
            if (m.kind == KeeperMessage::Kind::spawn_failed) {
                spawn_exit_code_ = m.exit_code;
                if (m.exit_code == 126 || m.exit_code == 127)
                    return Error{
                        fmt::format("cannot run '{}': {}", opts_.command[0], std::strerror(m.err)),
                        m.err};
                return Error::msg(m.message);
            }
            return Error::msg("keeper: unexpected message: " + *line);
        }
        if (reports_->eof()) {
            int st = 0;
            ::waitpid(keeper_pid_, &st, 0);
            keeper_dead_ = true;
            return Error::msg("the keeper died before starting the server");
        }
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) return Error::msg("the keeper did not start the server in 30 s");
        pollfd p{report_.get(), POLLIN, 0};
        ::poll(&p, 1, static_cast<int>(left.count()));
    }
}

// The journal's start-up (journal_sink.cpp, "The journal's start-up") begins as soon as the
// keeper is forked and the sandbox complete: its milliseconds then overlap the keeper's start
// of the server, and it is most often over before a client that leaves at once (`claude mcp
// list`) has left. Not so with --lazy, whose session.start says which catalog it serves, read
// from the journal before the relay starts (start_journal), nor with the guard off
// (journal_start_inline). The relay forks nothing after the keeper, so no child is made while
// the thread may hold a lock of OpenSSL's or SQLite's: the keeper, forked just before, uses
// both.
//
// Where the thread runs matters as much as when. The keeper starts on our CPU, and gets it
// when we sleep (we wait for its "spawned"); a thread of ours that starts at that moment is
// placed there too, and the keeper waited for it, a scheduler slice or more: the server's
// start came 2-4 ms later than without the early opening, more than it saved the teardown
// (docs/BENCHMARKS.md, "teardown through the shim"). So the thread runs where the keeper is
// not: on any CPU but ours, or, when the keeper was moved off ours for the sandbox's path
// rules (fork_keeper), on ours alone. One CPU: nothing to choose.
void Session::open_journal_early() {
    opening_ = journal_opening();
}

std::unique_ptr<JournalSink> Session::journal_opening() const {
    if (opts_.no_journal || opts_.lazy || Faults::from_env().journal_start_inline) return nullptr;
    return JournalSink::opening(opts_.journal, opts_.journal_sync, session_id_,
                                opts_.on_journal_failure, opts_.record_args, 2, opening_cpus());
}

std::optional<CpuSet> Session::opening_cpus() const {
    if (Faults::from_env().journal_opening_beside_keeper) return std::nullopt;
    if (keeper_moved_off_) return CpuSet::just(*keeper_moved_off_);
    auto ours = cpu_affinity(0);
    if (!ours) return std::nullopt;
    return ours->without(::sched_getcpu());
}

Status Session::start_journal() {
    std::vector<std::string> layers;
    auto lj = nlohmann::json::parse(layers_json_, nullptr, false);
    if (lj.is_object())
        for (auto& [name, v] : lj.items())
            if (v.is_object() && v.value("on", false)) layers.push_back(name);

    if (opts_.no_journal) {
        sink_ = std::make_unique<CountingSink>();
        return {};
    }
    journal::SessionStart s;
    s.session = session_id_;
    s.server_name = opts_.name.empty() ? basename_of(opts_.command[0]) : opts_.name;
    s.writer = journal::WriterIdentity::self();
    s.client = client_;
    if (client_.pid > 1)
        if (auto p = read_process(client_.pid, kCmdline); p && p->id == client_)
            s.client_argv = p->argv();
    if (auto k = read_identity(keeper_pid_)) s.keeper = *k;
    s.server = server_;
    s.server_argv = opts_.command;
    s.record_argv = opts_.record_argv;
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd)) s.cwd = cwd;
    for (char** e = environ; e && *e; ++e) {
        std::string_view kv(*e);
        s.env_names.emplace_back(kv.substr(0, kv.find('=')));
    }
    s.layers = layers;
    s.extra = journal::Json{
        {"eof_grace_ms", static_cast<int64_t>(opts_.eof_grace.count())},
        {"term_grace_ms", static_cast<int64_t>(opts_.term_grace.count())},
        {"stdout_guard", std::string(to_string(opts_.stdout_guard))},
        {"record_args", opts_.record_args == RecordArgs::None   ? "none"
                        : opts_.record_args == RecordArgs::Full ? "full"
                                                                : "preview"},
        {"journal_sync", opts_.journal_sync == JournalSync::Always ? "always" : "periodic"}};
    // Which settings files shaped these options, or why they were ignored (docs/SETTINGS.md).
    if (!opts_.settings_files.empty() || !opts_.settings_error.empty()) {
        journal::Json settings{{"files", opts_.settings_files}};
        if (!opts_.settings_error.empty()) settings["error"] = opts_.settings_error;
        s.extra["settings"] = std::move(settings);
    }
    s.extra["sandbox"] = sandbox_record(sandbox_);
    if (opts_.idle_stop) s.extra["idle_stop_ms"] = static_cast<int64_t>(opts_.idle_stop->count());
    if (opts_.restart != Restart::No)
        s.extra["restart"] =
            journal::Json{{"burst", opts_.restart_burst},
                          {"interval_ms", static_cast<int64_t>(opts_.restart_interval.count())}};
    s.extra.update(supervision_record());
    // The keeper opens its journal ahead of any teardown, but only after ours is open and
    // session.start is written: two openings at once can find a new journal half made
    // (SQLite answers `PRAGMA journal_mode=WAL` with "database is locked", and ours would
    // then record nothing of the session). We say "journal-started" when that is over.
    const int started_fd = keeper_dead_ ? -1 : control_.get();
    if (!opening_) opening_ = journal_opening();
    if (opening_) {
        opening_->begin(std::move(s), started_fd);
        journal_ = opening_.get();
        sink_ = std::move(opening_);
        return {};
    }
    if (Faults::from_env().journal_slow_open) std::this_thread::sleep_for(std::chrono::seconds(1));
    auto j = open_journal(opts_.journal, opts_.journal_sync);
    std::string err = j ? "" : j.error().message;
    auto sink = std::make_unique<JournalSink>(j ? std::move(*j) : nullptr, err, session_id_,
                                              opts_.on_journal_failure, opts_.record_args, 2);
    journal_ = sink.get();
    sink_ = std::move(sink);
    if (!journal_->journal()) {
        journal_->warn_once(err);
    } else {
        if (opts_.lazy) s.extra["lazy"] = find_usable_catalog();
        journal_->append(journal::session_start(s));
        journal_->link_probe(s);
    }
    trace_phase("journal_started");
    if (started_fd >= 0) (void)write_all(started_fd, "journal-started\n", "keeper control pipe");
    return {};
}

Status Session::start_relay() {
    auto sfd = SignalFd::create({SIGTERM, SIGINT, SIGHUP, SIGCHLD});
    if (!sfd) return sfd.error();
    signals_.emplace(std::move(*sfd));

    RelayOptions ro;
    ro.max_message = opts_.max_message;
    ro.guard = opts_.stdout_guard;
    if (Faults::from_env().divert_uncapped) {
        // The diverted-output cap's negative control.
        ro.divert_total = 0;
        ro.divert_rate = 0;
    }
    if (Faults::from_env().relay_copy) {
        // The memory bound's negative control (docs/RELIABILITY.md): parse every line whole
        // and copy what a reader has not taken.
        ro.parse_limit = SIZE_MAX;
        ro.lend = false;
    }
    if (Faults::from_env().relay_queue_unreclaimed) ro.reclaim = false;  // a flood's control
    RelayFds fds;
    fds.server_in = std::move(server_in_);
    fds.server_out = std::move(server_out_);
    fds.server_err = std::move(server_err_);
    auto settling = std::make_unique<SettlingSink>(std::move(sink_));  // see SettlingSink
    settling_ = settling.get();
    sink_ = std::move(settling);
    auto r = Relay::create(ro, std::move(fds), *sink_);
    if (!r) return r.error();
    relay_ = std::make_unique<Relay>(std::move(*r));
    if (starts_servers_again()) {
        hib_ = std::make_unique<Hibernation>(*relay_, !Faults::from_env().wake_replay,
                                             Faults::from_env().sleep_needs_handshake);
        relay_->set_gate(hib_.get());
    }
    if (opts_.lazy) {
        // No server yet: what the client sends is held for the first one.
        relay_->detach_server();
        hib_->set_state(Hibernation::State::asleep);
        if (catalog_) hib_->serve_from(std::move(*catalog_));
        catalog_.reset();
        if (journal_)
            hib_->on_served([j = journal_](const rpc::Message& m, std::string_view line) {
                j->on_served(m, line);
            });
    }
    start_server_log();
    if (auto s = relay_->watch(signals_->fd(), kSignals); !s) return s;
    if (parent_pidfd_.valid())
        if (auto s = relay_->watch(parent_pidfd_.get(), kParent); !s) return s;
    if (auto s = relay_->watch(report_.get(), kReport); !s) return s;
    if (keeper_pidfd_.valid())
        if (auto s = relay_->watch(keeper_pidfd_.get(), kKeeper); !s) return s;
    if (denials_)
        if (auto s = relay_->watch(denials_->ready_fd(), kDenials); !s) return s;
    return {};
}

void Session::explain_relay() {
    log(fmt::format(
        "mcpwarden: relay (pid {}):\n"
        "relay-subreaper {}\n"
        "client-watch    {}\n"
        "keeper          pid {}, server pid {}\n"
        "eof-grace       {} ms, term-grace {} ms, stdout-guard {}, max-message {} bytes\n"
        "journal         {}\n",
        ::getpid(), relay_subreaper_note_, parent_note_, keeper_pid_, server_.pid,
        opts_.eof_grace.count(), opts_.term_grace.count(), to_string(opts_.stdout_guard),
        opts_.max_message,
        opts_.no_journal ? "off (--no-journal)"
        : journal_ && journal_->journal()
            ? "on  " + journal_->journal()->paths().db
            : "off (could not be opened; requests are " +
                  std::string(opts_.on_journal_failure == OnJournalFailure::Deny ? "refused)"
                                                                                 : "forwarded)")));
    log(sandbox_.render_text());
    explain_supervision();
}

// ---- Events -----------------------------------------------------------------------------

void Session::handle(const Relay::Wake& w) {
    using What = Relay::Wake::What;
    switch (w.what) {
        case What::client_lost:
            loss_ = w.loss;
            if (end_ == End::none) end_ = End::client_lost;
            return;
        case What::guard_failed:
            log("mcpwarden: the server wrote a non-JSON line to stdout, which --stdout-guard=fail "
                "does not allow: ending the session (exit " +
                std::to_string(kStdoutGuardExit) + ")\n");
            // The guard's verdict, whatever ends the session around it: the relay may read
            // the client's EOF, or the server's exit on it, before the line the server wrote.
            if (end_ == End::none || end_ == End::client_lost || end_ == End::server_exit)
                end_ = End::stdout_guard;
            return;
        case What::gate:
            on_gate();
            return;
        case What::server_closed:
            // While waking, only the new server's streams count (the last one's close too).
            if (hib_ && hib_->state() == Hibernation::State::waking && attached_)
                wake_failed("it closed its stdout before answering the replayed initialize");
            return;
        case What::timeout:
            return;
        case What::watched:
            break;
    }
    switch (w.token) {
        case kSignals:
            read_signals();
            return;
        case kParent:
            (void)relay_->unwatch(parent_pidfd_.get());
            parent_pidfd_.reset();
            relay_->client_lost(ClientLoss::client_exit);
            loss_ = ClientLoss::client_exit;
            if (end_ == End::none) end_ = End::client_lost;
            return;
        case kReport:
            read_reports();
            return;
        case kKeeper:
            keeper_gone();
            return;
        case kDenials:
            record_denials();
            return;
    }
}

void Session::read_signals() {
    while (auto s = signals_->read()) {
        if (!s->has_value()) break;
        int sig = static_cast<int>((*s)->ssi_signo);
        if (sig == SIGCHLD) continue;  // the keeper's end is seen through its pidfd
        signal_ = sig;
        relay_->client_lost(ClientLoss::signal);
        if (loss_ == ClientLoss::none) loss_ = ClientLoss::signal;
        if (end_ == End::none) end_ = End::client_lost;
    }
}

void Session::read_reports() {
    reports_->fill();
    while (auto line = reports_->next_line()) {
        auto m = parse_keeper_message(*line);
        using Kind = KeeperMessage::Kind;
        const bool awake = !hib_ || hib_->state() == Hibernation::State::awake;
        if (m.kind == Kind::exited && !awake) {
            // Expected when going to sleep (EOF); a failed wake when waking.
            if (hib_->state() == Hibernation::State::waking)
                wake_failed(fmt::format("it exited ({}) before answering the replayed initialize",
                                        describe_wait_status(m.status)));
        } else if (m.kind == Kind::exited) {
            trace_phase("server_exit_reported");
            if (end_ == End::none)
                exit_to_handle_ = m.status;  // after these lines (server_exit_handled)
            else
                server_status_ = m.status;
        } else if (m.kind == Kind::report) {
            report_json_ = m.json;
        } else if (m.kind == Kind::record) {
            keeper_records_.push_back(std::move(m.json));
        } else if (m.kind == Kind::hibernated) {
            hibernated(m.json);
        } else if (m.kind == Kind::spawned) {
            server_woken(m);
        } else if ((m.kind == Kind::spawn_failed || m.kind == Kind::wake_failed) && hib_ &&
                   hib_->state() == Hibernation::State::waking) {
            wake_failed("it could not be started: " + m.message);
        }
    }
    if (auto st = std::exchange(exit_to_handle_, std::nullopt); st && !server_exit_handled(*st)) {
        server_status_ = *st;
        if (end_ == End::none) end_ = End::server_exit;
    }
    if (reports_->eof()) {
        (void)relay_->unwatch(report_.get());
        if (!report_json_) keeper_gone();
    }
}

void Session::keeper_gone() {
    if (keeper_dead_) return;
    // A report may still sit in the pipe.
    reports_->fill();
    while (auto line = reports_->next_line()) {
        auto m = parse_keeper_message(*line);
        if (m.kind == KeeperMessage::Kind::exited) server_status_ = m.status;
        if (m.kind == KeeperMessage::Kind::report) report_json_ = m.json;
        if (m.kind == KeeperMessage::Kind::record) keeper_records_.push_back(std::move(m.json));
    }
    if (keeper_pidfd_.valid()) {
        if (!keeper_pidfd_.is_exited()) return;  // the report pipe closed early: not dead yet
        (void)relay_->unwatch(keeper_pidfd_.get());
    }
    int st = 0;
    if (::waitpid(keeper_pid_, &st, 0) == keeper_pid_) keeper_status_ = st;
    keeper_dead_ = true;
    if (end_ == End::none) end_ = report_json_ ? End::server_exit : End::keeper_died;
}

void Session::tear_down_ourselves() {
    if (!keeper_dead_) keeper_gone();
    end_helpers();  // not the server's: our child, and a teardown as subreaper would take it
    if (journal_) journal_->recover_keepers_records();
    TeardownScope s;
    if (server_.pid > 0) s.roots.push_back(server_);
    s.subreaper = true;
    s.sole_parent = true;  // our only child was the keeper, reaped: the rest is its tree
    s.session_marker = session_id_;
    s.use_pidfd = pidfd_supported();
    std::optional<Cgroup> cg;
    if (!cgroup_dir_.empty())
        if (auto c = Cgroup::open(cgroup_dir_ + "/payload")) {
            cg.emplace(std::move(*c));
            s.cgroup = &*cg;
        }
    std::unique_ptr<TeardownObserver> observer;
    if (!opts_.no_journal)
        if (auto o = make_teardown_journal(session_id_, opts_.journal, nullptr, opts_.journal_sync))
            observer = std::move(*o);
    TeardownOptions t;
    t.eof_window = std::chrono::milliseconds(0);  // stdin is closed; the server is PDEATHSIG'd
    t.grace = opts_.term_grace;
    t.observer = observer.get();
    TeardownReport r = Teardown(std::move(s), t).run();
    if (!r.ok()) log("mcpwarden: " + r.verdict().error().message + "\n");
    report_json_ = journal::teardown_report_json(r);
    if (!server_status_ && r.root_status) server_status_ = r.root_status;
    cg.reset();
    if (!cgroup_dir_.empty()) remove_session_cgroup(cgroup_dir_);
    if (limits_ && !Faults::from_env().limit_groups_left)
        limits_->remove_found();  // the keeper's v1 groups, empty now
}

}  // namespace warden::shim

namespace warden::shim {

// ---- Hibernation ------------------------------------------------------------------------
//
// The relay decides, the keeper acts (docs/RUN.md, "Hibernation and lazy start"): idle for
// --idle-stop → detach the server's input and say "hibernate"; the keeper's teardown report
// comes back as "hibernated" and is recorded as session.hibernate. A request while asleep
// (Hibernation says so through the relay's gate) → "wake"; the keeper passes the new pipes
// and says "spawned"; the handshake is replayed, and once the new server has answered the
// replayed initialize, what the client sent meanwhile is released to it: session.wake.

namespace {
int64_t ms_between(std::chrono::steady_clock::time_point a,
                   std::chrono::steady_clock::time_point b) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(b - a).count();
}
}  // namespace

int Session::idle_timeout_ms() const {
    if (!hib_ || !opts_.idle_stop || hib_->state() != Hibernation::State::awake) return -1;
    const auto dur = *opts_.idle_stop;
    auto since = relay_->idle_since();
    // Nothing to sleep with yet (no request of the stateless era, no legacy handshake to
    // replay): the gate says when there is (Event::sleepable), so no timeout till then.
    if (!hib_->can_sleep()) return -1;
    // A listen stream is activity until it ends, and its end wakes the relay (the gate):
    // nothing to look at before that.
    if (hib_->streams_open()) return -1;
    // Busy (a request in flight, bytes queued). The relay does not return from poll() when
    // that changes, so look again soon (at most every 10 ms, at least every second).
    if (!since || hib_->checking_lists())
        return static_cast<int>(std::clamp<int64_t>(dur.count() / 4, 10, 1000));
    int64_t left = dur.count() - ms_between(*since, std::chrono::steady_clock::now());
    return static_cast<int>(std::clamp<int64_t>(left, 0, 24 * 3600 * 1000));
}

void Session::hibernate_if_idle() {
    if (!hib_ || !opts_.idle_stop || end_ != End::none ||
        hib_->state() != Hibernation::State::awake)
        return;
    if (!hib_->can_sleep()) return;      // a legacy session with no handshake to replay yet
    if (hib_->checking_lists()) return;  // its answers are on their way
    auto since = relay_->idle_since();
    if (!since) return;
    const int64_t idle = ms_between(*since, std::chrono::steady_clock::now());
    if (idle < opts_.idle_stop->count()) return;
    idle_ms_ = idle;
    hibernate();
}

void Session::hibernate() {
    hib_->set_state(Hibernation::State::going_to_sleep);
    attached_ = false;
    relay_->detach_server();
    if (!write_all(control_.get(), "hibernate\n", "keeper control pipe")) keeper_gone();
}

void Session::hibernated(const std::string& report_json) {
    if (restarting_) return restart_torn_down(report_json);
    auto end = session_end_record(session_id_, "", std::nullopt, report_json);
    record("session.hibernate",
           journal::Json{
               {"idle_ms", idle_ms_},
               {"server", journal::Json{{"pid", server_.pid}, {"starttime", server_.starttime}}},
               {"teardown", end.teardown}});
    server_status_.reset();
    hib_->set_state(Hibernation::State::asleep);
    if (hib_->wake_wanted()) wake();
}

void Session::wake() {
    if (end_ != End::none || hib_->state() != Hibernation::State::asleep) return;
    if (!restart_allows_wake()) return;
    hib_->set_state(Hibernation::State::waking);
    wake_started_ = std::chrono::steady_clock::now();
    if (!write_all(control_.get(), "wake\n", "keeper control pipe")) keeper_gone();
}

void Session::on_gate() {
    switch (hib_->take_event()) {
        case Hibernation::Event::wake_wanted:
            wake();  // asleep: now; going to sleep: once the keeper says "hibernated"
            return;
        case Hibernation::Event::initialize_answered:
            replay_answered();
            return;
        case Hibernation::Event::lists_checked:
            lists_checked();
            return;
        case Hibernation::Event::sleepable:  // idle_timeout_ms() counts from now on
            return;
        case Hibernation::Event::none:
            return;
    }
}

// "spawned" from the keeper: the new server's pipes wait on the fd socket.
// Every "spawned" after the first comes with the pipes: they are taken off the socket whatever
// happens next, so that the next wake's are the next ones there.
void Session::server_woken(const KeeperMessage& m) {
    if (!hib_) return;
    auto fds = recv_fds(fd_socket_.get(), 3);
    // The wake failed meanwhile, or the client left while the keeper was spawning: the new
    // server gets EOF with these ends closed, and the teardown asked for takes its tree.
    if (hib_->state() != Hibernation::State::waking || end_ != End::none) return;
    if (!fds) {
        wake_failed("its pipes did not arrive: " + fds.error().message);
        return;
    }
    server_ = m.server;
    if (server_log_) server_log_->server_started(server_.pid);
    attached_ = true;
    if (auto s =
            relay_->attach_server(std::move((*fds)[0]), std::move((*fds)[1]), std::move((*fds)[2]));
        !s) {
        wake_failed("its pipes could not be watched: " + s.error().message);
        return;
    }
    auto init = hib_->initialize_replay();
    if (!init) {
        wake_done();  // the client never initialized: nothing to replay
        return;
    }
    if (!relay_->write_to_server_now(*init)) wake_failed("it did not read the replayed initialize");
}

void Session::replay_answered() {
    if (hib_->state() != Hibernation::State::waking) return;
    if (const auto& refusal = hib_->wake_refusal()) {
        wake_failed(*refusal);
        return;
    }
    std::string rest = hib_->rest_of_replay();
    if (!Faults::from_env().lazy_recheck) rest += hib_->recheck_lists();
    if (!relay_->write_to_server_now(rest)) {
        wake_failed("it did not read the replayed handshake");
        return;
    }
    wake_done();
}

// The woken server's answers to the lists the client was served from the catalog, compared:
// the client is told of each list that differs (once per notification: resources/list and
// resources/templates/list share one), and the comparison is on record.
void Session::lists_checked() {
    journal::Json compared = journal::Json::array(), changed = journal::Json::array();
    std::set<std::string> told;
    for (auto& c : hib_->take_list_checks()) {
        compared.push_back(c.method);
        if (c.difference.is_null() && c.error.empty()) continue;
        journal::Json d{{"method", c.method}};
        if (!c.difference.is_null()) d["difference"] = std::move(c.difference);
        if (!c.error.empty()) d["error"] = c.error;
        d["notified"] = c.notification.empty() ? journal::Json() : journal::Json(c.notification);
        if (!c.notification.empty() && told.insert(c.notification).second)
            relay_->answer_client(R"({"jsonrpc":"2.0","method":")" + c.notification + "\"}");
        changed.push_back(std::move(d));
    }
    record("session.lists_checked",
           journal::Json{{"compared", std::move(compared)}, {"changed", std::move(changed)}});
}

void Session::wake_done() {
    relay_->release_server_input();
    hib_->set_state(Hibernation::State::awake);
    journal::Json d{
        {"cold_start_us", std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - wake_started_)
                              .count()},
        {"server", journal::Json{{"pid", server_.pid}, {"starttime", server_.starttime}}},
        {"request", hib_->wake_method()}};
    if (!server_started_) d["lazy_start"] = true;  // the session's first server (--lazy)
    server_started_ = true;
    if (auto changes = hib_->initialize_changes(); !changes.is_null())
        d["initialize_changed"] = std::move(changes);
    if (restarting_) return restarted(std::move(d));
    record("session.wake", std::move(d));
}

// The requests held for the new server are answered with an error naming why; whatever the
// failed start left is torn down, and the next request tries again.
void Session::wake_failed(const std::string& why) {
    relay_->fail_held_requests("mcpwarden: the server could not be woken: " + why);
    log("mcpwarden: the server could not be woken: " + why + "\n");
    record("session.wake",
           journal::Json{{"error", SensitiveText(why)}, {"request", hib_->wake_method()}});
    idle_ms_ = 0;
    hibernate();
}

void Session::record(const std::string& kind, journal::Json data) {
    if (!journal_ || !journal_->journal()) return;
    journal_->append(journal::Event{kind, session_id_, 0, std::move(data)});
}

}  // namespace warden::shim

namespace warden::shim {

// ---- Lazy start -------------------------------------------------------------------------
//
// --lazy (shim/catalog.hpp): the newest catalog of this server's identity, if it may be used,
// is handed to Hibernation by start_relay; session.start says which (`lazy.catalog_seq`) or
// why none is (`lazy.not_used`). At the end, what this session's server answered (over what
// was served) is recorded as the next catalog, unless it is the one served and still young.

journal::Json Session::find_usable_catalog() {
    identity_ = server_identity(opts_);
    journal::Json j{{"catalog_seq", nullptr},
                    {"max_age_ms", static_cast<int64_t>(opts_.lazy_max_age.count())}};
    if (!journal_ || !journal_->journal()) {
        j["not_used"] = "no journal";
        return j;
    }
    auto found = find_catalog(journal_->journal()->paths().db, *identity_);
    if (!found) {
        j["not_used"] = "the journal could not be read: " + found.error().message;
    } else if (!*found) {
        j["not_used"] = "no catalog of this server yet";
    } else if (auto why =
                   why_not_usable(**found, *identity_, journal::now_ns(), opts_.lazy_max_age);
               why && !Faults::from_env().lazy_stale) {
        j["not_used"] = *why;
    } else {
        j["catalog_seq"] = (*found)->seq;
        catalog_ = std::move(**found);
    }
    return j;
}

void Session::record_catalog() {
    if (!opts_.lazy || !hib_ || !identity_ || !journal_ || !journal_->journal()) return;
    const auto& serving = hib_->serving();
    const bool refresh = serving && journal::now_ns() - serving->ts_ns >
                                        std::chrono::nanoseconds(opts_.lazy_max_age).count() / 2;
    if (auto c = hib_->catalog_to_record(refresh))
        record("server.catalog", c->to_record(*identity_));
}

}  // namespace warden::shim
