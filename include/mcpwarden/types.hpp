// libmcpwarden — the value types every layer speaks, defined once: the options of a run, the
// stdio of a spawned server, the crash point of a drill, the format of a journal export.
// They are the API's (warden::api names each of them) and the layers' alike, so no layer
// keeps a twin of its own and nothing converts between them. Only standard-library types.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mcpwarden/process_ref.hpp"

namespace warden {

enum class Isolate { Auto, None, Cgroup, Pidns };
// `--restart`: what a server's death while its client is still there leads to.
enum class Restart { No, OnFailure };
enum class StdoutGuard { Divert, Pass, Fail };           // non-JSON lines on the server's stdout
enum class OnJournalFailure { Deny, Warn };              // a request that cannot be recorded
enum class RecordArgs { None, Preview, Full };           // tool arguments in the journal
enum class Sandbox { Off, Strict, Workspace };           // docs/SANDBOX.md has each profile's rules
enum class SandboxNet { Profile, None, Loopback, Any };  // Profile: the profile's (loopback)
enum class RecordArgv { Redacted, Full };                // command lines in the journal
// When a journal commit reaches the disk: Periodic, a write() to the WAL (it survives the
// death of any process) and an fsync at most every second; Always, an fsync per commit.
enum class JournalSync { Periodic, Always };

// The options of `mcpwarden run` (docs/RUN.md): what its flags, their MCPWARDEN_* variables
// and the settings files fill in, and what a session runs on.
struct RunOptions {
    std::string name;  // display name in the journal; empty: basename of command[0]
    std::chrono::milliseconds eof_grace{1000};   // EOF on the server's stdin → SIGTERM
    std::chrono::milliseconds term_grace{2000};  // SIGTERM → SIGKILL
    Isolate isolate = Isolate::Auto;             // Cgroup / Pidns insist (fail when unavailable)
    std::string journal;                         // empty: the default journal
    bool no_journal = false;
    StdoutGuard stdout_guard = StdoutGuard::Divert;
    std::size_t max_message = std::size_t{64} << 20;  // longer lines pass unclassified
    // Warn: a journal that cannot record never takes the server down (docs/JOURNAL.md).
    OnJournalFailure on_journal_failure = OnJournalFailure::Warn;
    RecordArgs record_args = RecordArgs::Preview;
    RecordArgv record_argv = RecordArgv::Redacted;     // Full: credentials and prompts kept
    JournalSync journal_sync = JournalSync::Periodic;  // Always: an fsync per request
    // Records older than this are pruned at session end; 0: the journal is kept whole.
    std::chrono::seconds journal_retention{std::chrono::hours(24 * 90)};
    bool explain = false;  // print the containment layers and why others are off (stderr)
    // The server's reach (docs/SANDBOX.md). Plain fields, so a settings file can fill them.
    Sandbox sandbox = Sandbox::Off;
    std::vector<std::string> allow_read;   // read (and execute) beneath these paths
    std::vector<std::string> allow_write;  // read and write beneath these paths
    SandboxNet net = SandboxNet::Profile;
    std::vector<int> allow_connect;      // TCP ports the server may connect to (1-65535)
    std::vector<std::string> env_allow;  // variables kept beyond the base set ("NAME", "PFX*")
    bool require_sandbox = false;        // refuse to start (125) unless fully enforced
    // A package launcher (npx, uvx, …) may fetch what its cache lacks: the network is then
    // the launcher's (--net any unless --net says otherwise) and it is not told to stay offline.
    bool allow_fetch = false;
    // Tear the tree down after this long unused and start it again on the next request
    // (docs/RUN.md, "Hibernation and lazy start"); nullopt: off. 0: after every answer.
    std::optional<std::chrono::milliseconds> idle_stop;
    // Start the server only for the first request the journal's catalog of it cannot answer
    // (docs/RUN.md, "Lazy start").
    bool lazy = false;
    // A catalog older than this is not used: the server is started (code fetched at run time,
    // `npx -y pkg`, changes behind an unchanged command line).
    std::chrono::milliseconds lazy_max_age{std::chrono::hours(24 * 7)};
    // Join the one tree of this server that this user's broker runs for every session of
    // the same identity, starting both if need be (docs/SHARING.md). share_linger: how long a
    // shared tree (and then the broker) stays without any client.
    bool share = false;
    std::chrono::milliseconds share_linger{std::chrono::seconds(60)};
    // The server's stderr kept in a rotated log per server identity (docs/LOGS.md): off with
    // `logs = false`; at most log_files files of log_size bytes.
    bool logs = true;
    std::size_t log_size = std::size_t{1} << 20;
    int log_files = 4;
    // A server that dies while its client is still there (docs/LOGS.md, "Crash and restart"):
    // started again with the handshake replayed (OnFailure), at most restart_burst times in
    // restart_interval (the start limit), or the session ends with it (No).
    Restart restart = Restart::No;
    int restart_burst = 5;
    std::chrono::milliseconds restart_interval{10000};
    // Limits of the server's tree (docs/RUN.md, "Limits"): memory and swap in bytes, processes
    // and threads, percent of one CPU; nullopt: none. A limit no controller here can enforce
    // refuses the start (exit 125) unless limits_best_effort (`limits = "best-effort"`).
    std::optional<std::uint64_t> memory_max;
    std::optional<std::uint64_t> tasks_max;
    std::optional<std::uint32_t> cpu_max;
    bool limits_best_effort = false;
    // A wedged server (docs/RUN.md, "Wedged"): pinged every `health` while idle, wedged when
    // a ping is not answered within health_timeout or a request not within request_timeout;
    // its tree is then ended. nullopt: off.
    std::optional<std::chrono::milliseconds> health;
    std::chrono::milliseconds health_timeout{5000};
    std::optional<std::chrono::milliseconds> request_timeout;
    std::vector<std::string> command;  // the server and its arguments
    // Recorded in session.start (the settings files fill them in): the settings files read,
    // and why they were not used when one was broken ("FILE:LINE:COL: …"; `mcpwarden run`
    // then refuses to start, a host of the API that starts anyway has it on record).
    std::vector<std::string> settings_files;
    std::string settings_error;
};

// What a spawned server's stdin, stdout or stderr is connected to.
enum class Stdio { Pipe, Inherit, Null };

// Where a drill SIGKILLs the client: before `initialize`, idle after it, with a tool call in
// flight, or while the server is writing its answer.
enum class CrashAt { BeforeInit, Idle, InFlight, MidResponse };

// A crash drill (docs/DRILL.md): `mcpwarden drill`, warden::api::run_drill().
struct DrillOptions {
    std::vector<std::string> command;  // the server, as a client config would name it
    CrashAt crash_at = CrashAt::InFlight;
    std::string tool;              // the call at the crash point; empty: tools/list only
    std::string args_json = "{}";  // arguments of `tool`, a JSON object
    int trials = 1;                // per mode
    bool compare_direct = false;   // also run each trial without mcpwarden, as a client would
    std::string journal;           // journal of the supervised trials (required)
    std::string mcpwarden;         // the mcpwarden binary for `run`; empty: this executable
    std::chrono::milliseconds eof_grace{1000}, term_grace{2000};  // passed to `run`
    std::chrono::milliseconds startup_timeout{30000};             // spawn → crash point
    std::function<void(const std::string&)> progress;             // one line per step
    // Install handlers for SIGINT, SIGTERM and SIGHUP (process-wide, without SA_RESTART):
    // the running trial stops at its next step and still cleans up, the rest are skipped.
    bool handle_interrupts = false;
    bool color = false;  // ANSI colours in the report's text
};

// The side-by-side demo (docs/DRILL.md): `mcpwarden demo`, warden::api::run_demo().
struct DemoOptions {
    std::string fixture;    // mcpwarden-fixture; empty: next to this executable
    std::string mcpwarden;  // empty: this executable
    std::string journal;    // required: where the supervised sessions are recorded
    // The journal is removed once the demo passed (`demo` without --journal): the report
    // then offers no command to read it.
    bool journal_temporary = false;
    bool node = true;  // also server-everything when Node.js and its peers are installed
    std::chrono::milliseconds eof_grace{1000}, term_grace{2000};  // `run`'s defaults
    std::function<void(const std::string&)> progress;
    bool handle_interrupts = false;  // as DrillOptions::handle_interrupts
    bool color = false;              // ANSI colours in the report's text
};

// The state of an MCP server tree (docs/INVENTORY.md says how each is decided): its client
// is alive; its client is gone (a logical orphan, what `reap --orphans` removes); alive but
// without traffic for longer than the wedged threshold; or not decidable from here.
enum class ServerState { Live, LogicalOrphan, Wedged, Unknown };
// "live" | "logical-orphan" | "wedged" | "unknown": the words of `ps`, its JSON and `reap`.
constexpr const char* state_name(ServerState s) {
    switch (s) {
        case ServerState::Live:
            return "live";
        case ServerState::LogicalOrphan:
            return "logical-orphan";
        case ServerState::Wedged:
            return "wedged";
        case ServerState::Unknown:
            return "unknown";
    }
    return "unknown";
}

// The state of a session `mcpwarden status` lists: its server runs; it sleeps (--idle-stop
// tore the server's tree down, or --lazy has not started one yet: the next request starts
// it); it is ending (the client went, the teardown is under way); under --restart on-failure,
// its server died and a new one is starting (restarting: at once, or after the start limit's
// backoff), or the start limit holds it back (held: past --restart-burst starts within
// --restart-interval; the first request after the interval starts one).
enum class SessionState { Running, Sleeping, Ending, Restarting, Held };
// "running" | "sleeping" | "ending" | "restarting" | "held": the words of `status`, its JSON
// and `ps`.
constexpr const char* state_name(SessionState s) {
    switch (s) {
        case SessionState::Running:
            return "running";
        case SessionState::Sleeping:
            return "sleeping";
        case SessionState::Ending:
            return "ending";
        case SessionState::Restarting:
            return "restarting";
        case SessionState::Held:
            return "held";
    }
    return "running";
}

// What `mcpwarden reap` selects (docs/REAP.md). Selectors add trees; `match`, `user` and
// `older_than` narrow them.
struct ReapSelection {
    // The trees `ps --orphans` shows: logical orphans (whatever the evidence kind), and
    // os-orphans whose state is unknown when their evidence is strong. An os-orphan that ps
    // shows as live or wedged is refused: the clue is never the verdict.
    bool orphans = false;
    std::vector<std::string> sessions;  // MCPWARDEN_SESSION ids: session cgroup + marker
    std::vector<pid_t> pids;            // that process and its whole tree
    std::optional<std::chrono::milliseconds> older_than;  // tree root at least this old
    std::string match;          // RE2 regex over a member's command line (searched); narrows only
    std::optional<uid_t> user;  // only this user's trees (default: the caller's)
    bool all_users = false;     // root only: other users' trees may be selected
    // With orphans: also the suspects ps shows (an MCP-looking name alone, or a declared
    // command without dead stdio): never selected without it; the plan says so for each
    // (selected_as "suspect").
    bool include_suspects = false;
};

// How a teardown ended the processes of a tree, counted: the engine's report (src/contain)
// and the API's TeardownReport hold these counts as this one struct.
struct TeardownCounts {
    int exited_in_eof = 0, exited_in_grace = 0, killed = 0, already_gone = 0;
    int identity_changed = 0;  // PIDs that named another process: never signalled
};

// One process of a tree `reap` plans to tear down.
struct ReapMember {
    ProcessId id;
    pid_t ppid = 0;
    uid_t uid = 0;
    std::string command;  // display form
    std::uint64_t rss_kb = 0;
};

// A tree `reap` plans to tear down: its top process(es) and everything below them. The
// library's plan (src/reap) and the API's ReapTree both extend it.
struct ReapTreeFacts {
    std::vector<ProcessId> roots;  // never empty; the teardown starts its walk from these
    std::string selected_as;       // "logical-orphan" | "os-orphan" | "suspect" | "session" | "pid"
    std::vector<std::string> reasons;  // why, one line each ("no live process holds …")
    std::string session;               // MCPWARDEN_SESSION of the tree, or ""
    std::string cgroup;                // session cgroup (payload leaf) found for --session, or ""
    std::vector<ReapMember> members;   // roots first, then descendants
    uid_t uid = 0;
    double age_seconds = 0;  // of the first root

    const ProcessId& root() const { return roots.front(); }
};

// A process `reap` will not signal, and why.
struct ReapRefusal {
    ProcessId id;
    std::string command;
    std::string why;  // "live: stdin writer 812 (claude) is alive", "PID 1", …
};

// `reap`'s configuration: $XDG_CONFIG_HOME/mcpwarden/reap.toml (else ~/.config/…), or
// reap.json beside it. Keys: revoke_cmd (string), revoke_timeout (duration string).
struct ReapConfig {
    std::optional<std::string> revoke_cmd;
    std::optional<std::chrono::milliseconds> revoke_timeout;
    std::string source;  // the file read, or ""
};

// The line format of a journal export: OpenTelemetry log records (OTLP JSON) or the records
// as they are, one JSON object a line.
enum class ExportFormat { OtlpJson, Ndjson };

}  // namespace warden
