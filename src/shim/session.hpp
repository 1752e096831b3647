// Session: the whole life of one `mcpwarden run`, read top to bottom in run().
//
//   spawn_keeper_and_server   the sandbox plan, pipes, fork the keeper (before any thread), the
//                             plan's path rules while it sets up the containment, then it
//                             spawns the server (confined by the plan)
//   relay_until_client_leaves bytes both ways until the client goes (EOF, EPIPE, its exit,
//                             a signal), the server exits, or the keeper dies
//   close_server_input        EOF on the server's stdin: the spec's polite shutdown
//   wait_for_exit             up to --eof-grace for the server to exit by itself
//   tear_down_tree            the keeper's teardown (SIGTERM → --term-grace → SIGKILL → sweep),
//                             or our own when the keeper is gone (we are a subreaper too)
//   record_outcome            session.end in the journal, the rest of the server's output
//   release_keeper            "ended" to the keeper (which records session.end if we die
//                             first), and reap it: nothing of the session outlives run()
//
// With --idle-stop, relay_until_client_leaves also puts the server to sleep when it is idle
// and wakes it on the next request (hibernate_if_idle, wake; shim/hibernation.hpp). With
// --lazy the keeper starts no server: the session begins asleep, answers what the server's
// catalog can (shim/catalog.hpp), and the first other request wakes the first server.
//
// Exit status: the server's (128 + signal when a signal ended it); 127/126 when the command
// cannot be run (nothing is left then); 125 when mcpwarden itself could not start.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "contain/limits.hpp"
#include "proc/process.hpp"
#include "sandbox/denials.hpp"
#include "shim/health.hpp"
#include "shim/hibernation.hpp"
#include "shim/journal_sink.hpp"
#include "shim/options.hpp"
#include "shim/relay.hpp"
#include "shim/restart.hpp"
#include "shim/server_log.hpp"
#include "sys/pidfd.hpp"
#include "sys/signalfd.hpp"

namespace warden::shim {

class LineReader;
struct KeeperConfig;
struct KeeperMessage;
class SettlingSink;  // shim/settling_sink.hpp

// The exit code of `run` when --stdout-guard=fail ended the session (docs/RUN.md).
inline constexpr int kStdoutGuardExit = 124;

class Session {
  public:
    explicit Session(RunOptions opts);
    ~Session();
    Session(const Session&) = delete;
    Session& operator=(const Session&) = delete;

    // Runs the session; returns the process exit code.
    int run();

    // The caller ends the process as soon as run() returns (`mcpwarden run`): the journal is
    // closed for that exit (Journal::close_at_exit: its idle writer thread and connection end
    // with the process). Either way run() reaps the keeper before it returns.
    void exit_process_after() { exit_process_ = true; }
    // After run(): the session ended, its journal closed for the process's exit, the keeper
    // reaped. The process may _exit now; else (a session that could not start) it is
    // destroyed as usual.
    bool closed_for_exit() const { return closed_for_exit_; }
    // A child process of ours that must not outlive the session (`run`'s background worker,
    // api/dead_sessions.cpp): ended and reaped before run() returns (end_helpers).
    void end_with_session(pid_t helper);

    const std::string& id() const { return session_id_; }

    // The server's tree ended (or was ended by a guard: a wedged server, an OOM kill) while
    // the client is still there: every request in flight is answered with an error naming
    // `f` and the server's last stderr lines, `session.crash` records it, and the restart
    // policy applies (shim/restart.hpp): the server started again after the start limit's
    // backoff, or held back by the limit, or the session ends with it (--restart no, a
    // clean exit, a death before the handshake). Calls on the relay's thread only.
    void server_failed(ServerFailure f);

    enum class End {
        none,
        client_lost,
        server_exit,
        keeper_died,
        stdout_guard,
        relay_error,
        wedged,  // --health / --request-timeout: the tree was ended (end_tree_for)
    };

  private:
    Status spawn_keeper_and_server();
    void relay_until_client_leaves();
    void close_server_input();
    void wait_for_exit();
    void tear_down_tree();
    void commit_evidence();
    void record_outcome();
    void release_keeper();
    void reap_keeper(std::chrono::milliseconds bound);
    int exit_code() const;

    // Start-up (session_start.cpp).
    Status prepare_sandbox();
    void watch_client();
    KeeperConfig keeper_config() const;
    Status fork_keeper();
    Status complete_sandbox();
    Status await_spawn();
    void open_journal_early();
    std::unique_ptr<JournalSink> journal_opening() const;
    std::optional<CpuSet> opening_cpus() const;
    Status start_journal();
    Status start_relay();
    void explain_relay();
    // What wakes the relay's loop (session_events.cpp): the tokens of what it watches for us.
    enum Token : uint32_t { kSignals = 1, kParent, kReport, kKeeper, kDenials };
    void handle(const Relay::Wake& w);
    void read_signals();
    void read_reports();
    void keeper_gone();
    void tear_down_ourselves();
    void end_helpers();
    void log(const std::string& text) const;

    // Hibernation (session_hibernation.cpp; docs/RUN.md, "Hibernation and lazy start").
    // A server may be started again in this session (--idle-stop, --lazy, --restart): the
    // keeper obeys "hibernate" and "wake", and passes new pipes over the fd socket.
    bool starts_servers_again() const {
        return opts_.idle_stop || opts_.lazy || opts_.restart != Restart::No;
    }
    int idle_timeout_ms() const;
    void hibernate_if_idle();
    void hibernate();
    void hibernated(const std::string& report_json);
    void wake();
    void server_woken(const KeeperMessage& m);
    void replay_answered();
    void lists_checked();
    void wake_done();
    void wake_failed(const std::string& why);
    void on_gate();
    void record(const std::string& kind, journal::Json data);
    // What the sandbox refused the server, counted (session_denials.cpp; sandbox/denials.hpp).
    void start_denial_counter();
    void record_denials();

    // The server's log, crash and restart (session_supervise.cpp; shim/server_log.hpp,
    // shim/restart.hpp).
    void relay_ready_output();
    void start_server_log();
    void finish_server_log();
    bool server_exit_handled(int wait_status);
    void explain_exit(ServerFailure& f);  // the OOM kill (supervision.cpp)
    // session.oom's `victim` and its words in the error.
    std::pair<journal::Json, std::string> oom_victim(int wait_status,
                                                     const std::string& group) const;
    std::string restart_refusal(const ServerFailure& f) const;
    void restart_torn_down(const std::string& report_json);
    bool restart_allows_wake();
    void refuse_held_requests(StartLimit::Clock::time_point retry_at);
    void restarted(journal::Json wake);
    void post_record(const std::string& kind, journal::Json data);  // queued, never waits
    void restart_when_due();
    int poll_timeout_ms() const;
    // Limits and health (shim/supervision.cpp; contain/limits.hpp, shim/health.hpp).
    void find_limits();
    void start_health();
    int next_wake_ms() const;
    void supervise();
    void explain_supervision() const;
    journal::Json supervision_record() const;
    void record_supervision();
    std::vector<pid_t> tree_members() const;
    // Ends the server's tree for `cause` ("wedged"): session.<cause> with the evidence on
    // record, every request in flight answered with an error naming the cause, and the
    // session's end set. The restart policy, where there is one, takes it from here.
    void end_tree_for(std::string_view cause, const std::string& why, journal::Json evidence);

    // Lazy start (session_hibernation.cpp; shim/catalog.hpp).
    journal::Json find_usable_catalog();
    void record_catalog();

    RunOptions opts_;
    std::string session_id_;
    // The run of a shared tree (its broker chose session_id_): the calls it serves are on the
    // records of the client sessions that made them (JournalSink::leave_calls_to_clients).
    bool shared_tree_ = false;
    std::string relay_subreaper_note_, parent_note_;

    // The client: our parent, watched through a pidfd.
    ProcessId client_{};
    Pidfd parent_pidfd_;

    // The keeper and the server.
    pid_t keeper_pid_ = 0;
    Pidfd keeper_pidfd_;
    Fd control_;  // write end: commands, and the keeper's lifeline
    Fd report_;   // read end: the keeper's messages
    std::unique_ptr<LineReader> reports_;
    Fd server_in_, server_out_, server_err_;  // our ends, until the relay takes them
    ProcessId server_{};
    std::string cgroup_dir_;
    std::string layers_json_;
    sandbox::Plan sandbox_;  // prepared before the keeper is forked, which inherits it, and
                             // completed after (complete_sandbox)
    Fd denial_receiver_;     // the plan's listeners arrive here (the relay's alone)
    std::unique_ptr<sandbox::DenialCounter> denials_;

    // The host's mask and its SIGPIPE and SIGXFSZ dispositions, restored when the session is
    // destroyed (after signals_, which restores only the mask it found).
    std::optional<SavedSignals> host_signals_;
    std::optional<SignalFd> signals_;
    std::unique_ptr<ActivitySink> sink_;
    SettlingSink* settling_ = nullptr;      // sink_ once the relay is started (start_relay)
    JournalSink* journal_ = nullptr;        // what sink_ records through when the journal is on
    std::unique_ptr<JournalSink> opening_;  // the journal's start-up, until start_journal()
    // The CPU the keeper was moved off while we add the sandbox's path rules (fork_keeper).
    std::optional<int> keeper_moved_off_;
    std::unique_ptr<Relay> relay_;
    std::unique_ptr<Hibernation> hib_;  // --idle-stop
    Fd fd_socket_;                      // the keeper passes a woken server's pipes here
    std::chrono::steady_clock::time_point wake_started_{};
    int64_t idle_ms_ = 0;    // how long the server had been idle when it was put to sleep
    bool attached_ = false;  // the relay has the woken server's pipes
    bool server_started_ = !opts_.lazy;       // a server has run in this session
    std::optional<ServerIdentity> identity_;  // --lazy: what its catalog is kept under
    std::optional<Catalog> catalog_;          // --lazy: found, until start_relay hands it on

    // What happened.
    End end_ = End::none;
    ClientLoss loss_ = ClientLoss::none;
    int signal_ = 0;  // the signal that ended the session, if one did
    bool keeper_dead_ = false;
    std::vector<pid_t> helpers_;  // end_with_session(): ended by end_helpers()
    bool exit_process_ = false;   // exit_process_after()
    bool closed_for_exit_ = false;
    bool spawned_early_ = false;  // MCPWARDEN_FAULT=sandbox_ready_early: before the rules
    std::optional<int> keeper_status_;
    std::optional<int> server_status_;  // wait status
    std::optional<std::string> report_json_;
    std::vector<std::string> keeper_records_;  // "record" lines: its teardown's, ours to commit
    std::optional<int> spawn_exit_code_;

    // The server's log and the restart policy (session_supervise.cpp).
    std::unique_ptr<ServerLog> server_log_;
    std::optional<StartLimit> start_limit_;          // --restart on-failure
    std::optional<ServerFailure> restarting_;        // the failure a restart answers
    std::optional<journal::Json> restart_teardown_;  // what the teardown after it found
    std::optional<std::chrono::steady_clock::time_point> restart_at_;     // the backoff's end
    std::optional<std::chrono::steady_clock::time_point> refused_until_;  // the start limit
    std::optional<int> exit_to_handle_;  // the server's exit, reported while awake
    // Limits and health.
    std::optional<SessionLimits> limits_;  // the keeper's groups, seen from here
    std::unique_ptr<Health> health_;       // --health, --request-timeout
    uint64_t oom_kills_seen_ = 0;
};

// Moves what is ready now between the server and the client, without waiting: a server that
// is gone left its last words in its stdout pipe. Stops when a pass moves nothing (bounded).
void relay_what_is_ready(Relay& relay, const std::function<void(const Relay::Wake&)>& handle);

std::string_view to_string(Session::End e);

// Ends a child process of ours that is not the session's and must not outlive it: SIGKILL
// (what it has not done is left to the next run; it keeps nothing that a kill can tear),
// then reaped. 0: nothing to do.
void end_helper(pid_t child);

}  // namespace warden::shim
