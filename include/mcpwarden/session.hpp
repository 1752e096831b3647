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

#include <sys/types.h>

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"
#include "mcpwarden/types.hpp"

namespace warden::api {

// The options and their enums are the layers' own value types (types.hpp).
using warden::Isolate;
using warden::JournalSync;
using warden::OnJournalFailure;
using warden::RecordArgs;
using warden::RecordArgv;
using warden::RunOptions;
using warden::Sandbox;
using warden::SandboxNet;
using warden::StdoutGuard;

// One row of the option table: what `run --help`, the MCPWARDEN_* variables, the settings
// file and `mcpwarden config` know about an option.
struct RunOptionInfo {
    std::string key;                   // "eof-grace"
    std::string type;                  // "text", "duration", "size", "boolean", "choice", "list" or
                                       // "integer"
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
//
// `after`: what happens once the session's end is on record. Either way the keeper, the
// helper process that tore the tree down, is reaped first: nothing of the session is alive
// then (docs/RUN.md, "When run returns"). `return_code` (a library host that goes on
// running): the journal is closed and the code returned. `exit_process` (`mcpwarden run`):
// the journal is closed for the exit, and this process exits with the code at once (stdio
// flushed, no exit handlers run) and never returns.
// `helper`: a child process of the caller that must not outlive the session (the worker of
// end_dead_sessions_in_background); 0 for none. It is ended (SIGKILL) and reaped before the
// session returns, and before a teardown the relay makes itself could count it in the tree.
enum class AfterSession { return_code, exit_process };
MCPW_API Result<int> run_session(const RunOptions& options,
                                 AfterSession after = AfterSession::return_code, pid_t helper = 0);

}  // namespace warden::api
