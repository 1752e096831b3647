// libmcpwarden — `mcpwarden run` as a function: relay this process's stdin/stdout to an MCP
// stdio server, journal its calls, and tear its whole tree down when the client goes.
//
//     auto o = warden::api::run_options({{"eof-grace", "250ms"}}, {"my-server", "--stdio"});
//     if (!o) { fprintf(stderr, "%s\n", o.error().message.c_str()); return 2; }
//     auto rc = warden::api::run_session(*o);                 // the exit code of `run`
//
// Every option has a flag name ("eof-grace") and an environment equivalent
// ("MCPWARDEN_EOF_GRACE"): many MCP clients pass a server only a few variables plus the
// config's `env`, so the variables are how a client config sets them. A flag wins over its
// variable. docs/RUN.md has the defaults and what each option does.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"

namespace warden::api {

enum class Isolate { Auto, None, Cgroup, Pidns };
enum class StdoutGuard { Divert, Pass, Fail };           // non-JSON lines on the server's stdout
enum class OnJournalFailure { Deny, Warn };              // a request that cannot be recorded
enum class RecordArgs { None, Preview, Full };           // tool arguments in the journal
enum class Sandbox { Off, Strict, Workspace };           // docs/SANDBOX.md has each profile's rules
enum class SandboxNet { Profile, None, Loopback, Any };  // Profile: the profile's (loopback)
enum class RecordArgv { Redacted, Full };                // command lines in the journal
enum class JournalSync { Periodic, Always };             // when the journal reaches the disk

struct RunOptions {
    std::string name;  // display name in the journal; empty: basename of command[0]
    std::chrono::milliseconds eof_grace{1000};   // EOF on the server's stdin → SIGTERM
    std::chrono::milliseconds term_grace{2000};  // SIGTERM → SIGKILL
    Isolate isolate = Isolate::Auto;             // Cgroup / Pidns insist (fail when unavailable)
    std::string journal;                         // empty: the default journal
    bool no_journal = false;
    StdoutGuard stdout_guard = StdoutGuard::Divert;
    std::size_t max_message = std::size_t{64} << 20;  // longer lines pass unclassified
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
    std::vector<int> allow_connect;      // TCP ports the server may connect to
    std::vector<std::string> env_allow;  // variables kept beyond the base set ("NAME", "PFX*")
    bool require_sandbox = false;        // refuse to start (125) unless fully enforced
    // Tear the tree down after this long unused and start it again on the next request
    // (docs/RUN.md, "Hibernation and lazy start"); nullopt: off. 0: after every answer.
    std::optional<std::chrono::milliseconds> idle_stop;
    std::vector<std::string> command;  // the server and its arguments
    // Recorded in session.start (settings.hpp fills them in): the settings files read, and
    // why they were ignored when one was broken.
    std::vector<std::string> settings_files;
    std::string settings_error;
};

// One row of the option table: what `run --help`, the MCPWARDEN_* variables, the settings
// file and `mcpwarden config` know about an option.
struct RunOptionInfo {
    std::string key;                   // "eof-grace"
    std::string type;                  // "text", "duration", "size", "boolean", "choice" or "list"
    std::vector<std::string> choices;  // a choice's words
    std::string env;                   // "MCPWARDEN_EOF_GRACE"
    std::string fallback;              // the built-in default as text ("1s"), "" for none
    std::string help;                  // the --help line
};
MCPW_API const std::vector<RunOptionInfo>& run_option_info();

// The option keys, in --help order: "name", "eof-grace", "term-grace", "isolate", "journal",
// "no-journal", "stdout-guard", "max-message", "on-journal-failure", "record-args",
// "record-argv", "journal-sync", "journal-retention", "explain", "idle-stop", "sandbox",
// "allow-read",
// "allow-write", "net", "allow-connect", "env-allow", "require-sandbox". "no-journal", "explain"
// and "require-sandbox" are switches (a given flag is the value "1").
MCPW_API const std::vector<std::string>& run_option_keys();
MCPW_API bool run_option_is_switch(const std::string& key);
// List options take several items in one value, joined by this separator (':' for
// "allow-read"/"allow-write" as in PATH, ',' for "allow-connect"/"env-allow"); '\0' for the
// others. MCPWARDEN_ALLOW_READ=/srv/a:/srv/b is two paths.
MCPW_API char run_option_separator(const std::string& key);
// "eof-grace" → "MCPWARDEN_EOF_GRACE".
MCPW_API std::string run_option_env(const std::string& key);

// Options from flags (key → value, only those given) and, for every key not given, its
// MCPWARDEN_* variable when set and not empty. Errors name the option and the value, and
// the variable when the value came from one:
//   "--eof-grace: cannot parse '3x' as a duration (e.g. 250ms, 2s, 1.5s)"
//   "--isolate: cannot parse 'x' as auto, none, cgroup or pidns (from MCPWARDEN_ISOLATE)"
MCPW_API Result<RunOptions> run_options(const std::map<std::string, std::string>& flags,
                                        std::vector<std::string> command = {});

// A duration as `run` and `drill` read it: "250ms", "2s", "1.5s", "1m", "0" (plain numbers
// are milliseconds). reap.hpp's parse_duration() reads the longer spans of `reap`.
MCPW_API Result<std::chrono::milliseconds> parse_run_duration(const std::string& text);

// Runs one session on this process's stdin and stdout (the client's pipes) until the client
// goes or the server exits, then tears the server's tree down. Returns the exit code of
// `mcpwarden run` (the server's status when it exited by itself; docs/RUN.md). Diagnostics
// go to stderr as "mcpwarden run: …". Process-wide effects: this process becomes a child
// subreaper (and stays one); while it runs, it blocks SIGINT, SIGTERM, SIGHUP and SIGCHLD
// (read through a signalfd) and ignores SIGPIPE and SIGXFSZ (a journal write past
// RLIMIT_FSIZE fails instead of killing it); the mask and those two dispositions are
// restored when it returns. Call it from a process that is the session, as `mcpwarden run`
// is. Error only when it cannot start (no command).
MCPW_API Result<int> run_session(const RunOptions& options);

}  // namespace warden::api
