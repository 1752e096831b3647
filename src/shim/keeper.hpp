// The keeper: the process that parents the server and makes sure nothing of it survives.
//
// The relay forks the keeper first, before any thread exists. The keeper sets up the
// session's containment (child subreaper read back, session cgroup when one can be had,
// PID namespace when asked), with a sandbox waits for the relay's "sandbox-ready" (the
// plan's path rules are in the ruleset they share), spawns the server through contain's
// spawner (PDEATHSIG from this, its only thread), and then waits for one of three things:
//
//   - "teardown <reason>" on the control pipe: the relay has closed the server's stdin and
//     waited the EOF window; run the teardown engine (SIGTERM → grace → SIGKILL → sweep →
//     verify) at once, record it once the tree is gone, report the TeardownReport back, then wait
//     for the relay's "ended" (its session.end is on record) and exit. If the relay dies before
//     that, the keeper records session.end itself (`recorded_by: keeper`, the relay's reason).
//   - EOF on the control pipe: the relay is gone (even SIGKILL closes its end: it holds the
//     only write end, close-on-exec). The server saw EOF on its stdin at the same moment, so
//     run the teardown with the EOF window first, by itself, record session.end for the
//     relay (`recorded_by: keeper`), and exit.
//   - the client's exit (a pidfd on the relay's parent), and no word from the relay within
//     the EOF window + kRelaySlack: the relay is stopped or hung; tear down by itself.
//   - SIGCHLD: the server (or an orphan it left) ended; report the server's status once,
//     reap the rest, keep waiting: what the server left behind is the teardown's.
//   - with hibernation (--idle-stop, --lazy; shim/hibernation.hpp): "hibernate" on the
//     control pipe: the relay has closed the server's stdin; run the teardown engine with the
//     EOF window, answer "hibernated <TeardownReport JSON>" and keep waiting, now without a
//     server. "wake": spawn the server again in the same containment with fresh pipes, pass
//     the relay's ends over the fd socket (SCM_RIGHTS) and say "spawned" (or "wake-failed
//     <message>", and stay asleep). With --lazy the keeper starts asleep.
//
// The keeper lives in a process group of its own (Session::fork_keeper): a kill(-pgid) of
// the client's group, which holds the relay, does not reach it.
//
// Stdio: the relay makes the server's three pipes before forking and keeps the client-facing
// ends; the keeper gets the server ends, places them on its own fds 0-2 for the spawner
// (Stdio::Inherit), and after the spawn points its 0-1 at /dev/null and 2 back at the
// client's stderr, so it holds no end of any server pipe.
//
// Keeper → relay messages, one line each on the report pipe:
//   spawned <pid> <starttime> <cgroup-dir or -> <layers JSON>
//   spawn-failed <errno> <exit code> <message>
//   asleep <cgroup-dir or -> <layers JSON>  (instead of spawned, when started asleep)
//   exited <wait status>
//   record <intent line>  (before the report, one per record of the teardown, which is in
//                          the session's intent file too: for the relay to commit with its
//                          session.end)
//   report <TeardownReport JSON>
//   hibernated <TeardownReport JSON>
//   wake-failed <message>
// Relay → keeper, on the control pipe: "sandbox-ready" first, with a sandbox (the plan is
// complete: the server may start), "journal-started" (its journal is open and
// session.start written: the keeper may open its own now), "hibernate", "wake",
// "teardown <session end reason>", "evidence" (what the client left in flight, written to the
// intent file before "teardown", is committed: the keeper's teardown records go after it),
// then "ended".
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "contain/layers.hpp"
#include "journal/journal.hpp"
#include "proc/process.hpp"
#include "sandbox/sandbox.hpp"
#include "shim/options.hpp"
#include "sys/cpu_affinity.hpp"
#include "sys/fd.hpp"

namespace warden::shim {

struct KeeperConfig {
    std::string session_id;
    std::vector<std::string> command;
    ContainOptions contain;
    bool require_cgroup = false, require_pidns = false;
    std::chrono::milliseconds eof_grace{1000}, term_grace{2000};
    bool explain = false;
    // Journal for the teardown's snapshot → signal → exit records; empty path with
    // journal_on: the default path.
    bool journal_on = false;
    std::string journal_path;
    JournalSync journal_sync = JournalSync::Periodic;
    std::string server_name;  // for the session.start the keeper records if the relay could not
    // The relay's plan (inherited across the fork): applied by the spawner in the server's
    // process; its private temporary directory is removed after the teardown.
    const sandbox::Plan* sandbox = nullptr;
    // The CPUs the relay may run on, when it moved us off its own CPU for the time it adds
    // the plan's path rules (Session::fork_keeper): ours again on "sandbox-ready", before
    // anything we start could inherit the smaller set.
    std::optional<CpuSet> cpus;
    // Hibernation: the keeper obeys "hibernate" and "wake" (fds.fd_socket passes the pipes);
    // start_asleep: no server until the first "wake" (--lazy).
    bool hibernation = false;
    bool start_asleep = false;
};

// How long after the client's exit the keeper waits, on top of the EOF window, for the
// relay to ask for the teardown (or die) before it tears down by itself.
inline constexpr std::chrono::milliseconds kRelaySlack{1000};
// How long after its report the keeper waits for the relay's "ended": the relay's final
// drain to the client (1 s at most) and its session.end, with slack.
inline constexpr std::chrono::milliseconds kRelayEndBound{3000};

struct KeeperFds {
    Fd server_in, server_out, server_err;  // the server's ends of its three pipes
    Fd control;                            // read end: commands, and the relay's lifeline
    Fd report;                             // write end: messages to the relay
    Fd client;                             // pidfd on the client (the relay's parent), or none
    Fd fd_socket;                          // hibernation: the relay ends of a new server's pipes
    Fd log;                                // the client's stderr, on a descriptor of its own
};

// Runs the keeper in a freshly forked child; returns its exit code (0 when the tree was
// torn down with no survivor). Call as `_exit(keeper_main(cfg, std::move(fds)))`.
int keeper_main(const KeeperConfig& cfg, KeeperFds fds);

// session.end for `session` as the relay (or, when it died, the keeper) records it: the
// server's wait status and the TeardownReport (as JSON; timings become integer µs).
journal::SessionEnd session_end_record(const std::string& session, const std::string& reason,
                                       std::optional<int> server_status,
                                       const std::optional<std::string>& report_json);

// With MCPWARDEN_PHASES=1 in the environment, the relay and the keeper each write
// "mcpwarden-phase <name> <CLOCK_MONOTONIC ns> <thread CPU ns>" to stderr at each step of a
// session's start and end, so that `bench_shim_teardown` and bench/sandbox_phases.py can say
// where the time goes, and whether an interval was work or waiting (docs/BENCHMARKS.md).
// Off: one getenv per process, nothing written.
// `at_ns`: a time measured earlier (0: now); the CPU time is the thread's when it writes.
void trace_phase(const char* name, int64_t at_ns = 0);
int64_t trace_clock_ns();

// A message from the keeper, parsed.
struct KeeperMessage {
    enum class Kind {
        spawned,
        spawn_failed,
        exited,
        report,
        record,
        asleep,
        hibernated,
        wake_failed,
        unknown
    };
    Kind kind = Kind::unknown;
    ProcessId server{};
    std::string cgroup_dir;  // spawned, asleep: "" when there is no session cgroup
    std::string json;  // spawned, asleep: layers; report, hibernated: the TeardownReport; record
    int err = 0, exit_code = 0;  // spawn_failed
    std::string message;         // spawn_failed, wake_failed
    int status = 0;              // exited: wait status
};
KeeperMessage parse_keeper_message(std::string_view line);

// Line-oriented reading of a pipe that is not on the hot path (control and report pipes).
class LineReader {
  public:
    explicit LineReader(int fd) : fd_(fd) {}
    // Reads what is available (the fd should be non-blocking). Complete lines are returned
    // by next_line(); eof() once the writer closed.
    void fill();
    std::optional<std::string> next_line();
    bool eof() const { return eof_; }

  private:
    int fd_;
    std::string buf_;
    bool eof_ = false;
};

}  // namespace warden::shim
