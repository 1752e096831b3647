// Session::run() and the end of a session: the algorithm, read top to bottom (session.hpp
// lists its steps), and the teardown, outcome and release of the keeper that close it.
// Its start-up is session_start.cpp, what wakes the relay's loop session_events.cpp,
// hibernation and lazy start session_hibernation.cpp.
#include "shim/session.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <optional>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/layers.hpp"
#include "journal/redact.hpp"
#include "shim/keeper.hpp"
#include "shim/settling_sink.hpp"

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

// Slack on top of the keeper's own bounds (term grace + its SIGKILL wait) before we stop
// waiting for its report and tear down ourselves.
constexpr std::chrono::milliseconds kKeeperSlack{5000};
constexpr std::chrono::milliseconds kKillWait{3000};
// How long after "ended" the keeper may take to exit (its journal's close: the join of its
// writer thread, a transaction at most) before it is SIGKILLed (release_keeper).
constexpr std::chrono::milliseconds kKeeperExitWait{2000};
// How long the relay waits for the commit of the client's evidence (commit_evidence).
constexpr std::chrono::milliseconds kEvidenceCommitWait{2000};

int wait_status_to_exit_code(int st) {
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
    return 1;
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

}  // namespace warden::shim
