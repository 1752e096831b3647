// The keeper's process as one object (shim/keeper.hpp says what it does): the steps of its
// life in keeper.cpp, its journal (the teardown's records, its own session.end) in
// keeper_journal.cpp. Internal to src/shim/.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "contain/spawner.hpp"
#include "contain/teardown.hpp"
#include "journal/journal.hpp"
#include "record/teardown_record.hpp"
#include "shim/journal_opening.hpp"
#include "shim/keeper.hpp"
#include "sys/signalfd.hpp"

namespace warden::shim {

class Keeper {
  public:
    Keeper(const KeeperConfig& cfg, KeeperFds fds) : cfg_(cfg), fds_(std::move(fds)) {}

    int run();

  private:
    // Why the keeper tears down.
    enum class Cause {
        asked,        // "teardown <reason>" from the relay
        relay_gone,   // the lifeline closed before the relay asked: it died
        client_gone,  // the client exited and the relay did nothing about it (stopped, hung)
        hibernate,    // "hibernate": tear down, keep the session (not a reason to end)
        wake,         // "wake": spawn the server again
    };

    // ---- Its life (keeper.cpp): start-up, the wait, the teardown ----
    static void ignore_terminal_signals();
    bool set_up_containment();
    bool limits_enforced();
    bool await_sandbox_ready();
    void take_back_cpus();
    bool start_server();
    bool spawn_server(Fd in, Fd out, Fd err, std::span<const int> relay_ends = {});
    std::string cgroup_dir_word() const;
    void hibernate();
    void wake();
    Cause wait_for_teardown_cause();
    void plan_ahead_if_due();
    void reap();
    void report_server_exit();
    TeardownReport tear_down_tree(Cause cause);
    std::optional<bool> await_control_line(std::string_view want, std::chrono::milliseconds bound);
    void release_containment();
    bool spawn_failed(const Error& e, int exit_code);
    void send(const std::string& line);
    static std::string line_of(std::string text);
    void log(const std::string& text);

    // ---- The keeper's journal (keeper_journal.cpp opens with why it works so) ----

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

    // Opened ahead, on a thread of its own.
    bool journal_wanted() const;
    void open_journal_ahead();
    void finish_opening();
    void leave_opening_to_the_exit();
    void attempt_failed(const Error& why);
    std::optional<std::chrono::steady_clock::time_point> journal_retry_at() const;
    void open_for_teardown();
    // The teardown's records.
    std::unique_ptr<journal::TeardownRecorder> recorder_on_intents();
    std::unique_ptr<journal::TeardownRecorder> teardown_recorder(bool relay_gone);
    void record_teardown(Cause cause);
    bool await_relays_evidence();
    void hand_over_records();
    std::string handed_over_lines();
    // What the relay left, and the session's end when the relay cannot record it.
    void take_over_from_relay(journal::Journal& journal);
    void recover_relays_intents(journal::Journal& journal);
    void close_journal(bool say_why, journal::Journal::Tail tail = journal::Journal::Tail::anchor);
    void end_session_if_the_relay_cannot(const TeardownReport& report);
    void end_session_for_the_dead_relay(const TeardownReport& report);
    void record_end(journal::Journal& journal, const TeardownReport& report, bool take_over);
    bool relay_died_before_ending();
    journal::SessionStart session_start_of_keeper() const;

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
    // The keeper's journal (keeper_journal.cpp).
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
    static constexpr std::chrono::milliseconds kWakeWindow{100};  // hibernate(): see there
};

}  // namespace warden::shim
