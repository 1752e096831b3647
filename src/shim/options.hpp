// The options of `mcpwarden run`, from flags and MCPWARDEN_* environment variables.
//
// Many clients pass the server only a few variables (the TypeScript SDK: HOME, LOGNAME,
// PATH, SHELL, TERM, USER plus the config's `env`), so every flag has an environment
// equivalent that can sit in the client config's `env`: --eof-grace ↔ MCPWARDEN_EOF_GRACE
// and so on (upper case, dashes to underscores). A flag wins over its variable.
//
// Defaults (docs/RUN.md): a server that honours EOF exits inside the 1 s EOF window, one
// that honours SIGTERM inside the 2 s grace; one that ignores both is SIGKILLed after
// eof-grace + term-grace = 3 s.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sandbox/sandbox.hpp"
#include "shim/relay.hpp"
#include "sys/result.hpp"

namespace warden::shim {

enum class Isolate : uint8_t { auto_, none, cgroup, pidns };
enum class OnJournalFailure : uint8_t { deny, warn };
enum class RecordArgs : uint8_t { none, preview, full };
enum class RecordArgv : uint8_t { redacted, full };
enum class JournalSync : uint8_t { periodic, always };

struct RunOptions {
    std::string name;  // display name of the server; default: basename of argv[0]
    std::chrono::milliseconds eof_grace{1000};
    std::chrono::milliseconds term_grace{2000};
    Isolate isolate = Isolate::auto_;
    std::string journal;  // empty: the journal's default path
    bool no_journal = false;
    StdoutGuard stdout_guard = StdoutGuard::divert;
    size_t max_message = rpc::kDefaultMaxMessage;
    // warn: a journal that cannot record never takes the server down (docs/JOURNAL.md).
    OnJournalFailure on_journal_failure = OnJournalFailure::warn;
    RecordArgs record_args = RecordArgs::preview;
    RecordArgv record_argv = RecordArgv::redacted;     // full: command lines kept verbatim
    JournalSync journal_sync = JournalSync::periodic;  // always: an fsync per request
    // Records older than this are pruned at session end (journal/prune.hpp); 0: kept forever.
    std::chrono::seconds journal_retention{std::chrono::hours(24 * 90)};
    bool explain = false;
    // --idle-stop: tear the tree down after this long unused and start it again on the next
    // request; nullopt: off (docs/RUN.md, "Hibernation and lazy start").
    std::optional<std::chrono::milliseconds> idle_stop;
    // --lazy: answer the handshake and the lists from the journal's last record of this
    // server, start it on the first request that needs it; records older than lazy_max_age
    // are not used.
    bool lazy = false;
    std::chrono::seconds lazy_max_age{std::chrono::hours(24 * 7)};
    // --sandbox, --allow-read, --allow-write, --net, --allow-connect, --env-allow,
    // --require-sandbox (docs/SANDBOX.md).
    sandbox::Settings sandbox;
    std::vector<std::string> command;
    // Where the options came from, for session.start: the settings files read, and why they
    // were ignored when one was broken ("FILE:LINE:COL: …"; the session then runs on the
    // built-in defaults, flags and MCPWARDEN_* variables).
    std::vector<std::string> settings_files;
    std::string settings_error;

    // Sets one option by its flag name without dashes ("eof-grace", "stdout-guard", …).
    // A list option adds one item a call.
    // Errors name the option and the value: "--eof-grace: cannot parse '3x' as a duration".
    Status set(std::string_view key, std::string_view value);
};

// ---- The option table ---------------------------------------------------------------------
//
// Every option of `run` is one row: its flag name, the type of its value, its built-in
// default as text, its --help line and the setter that parses a value into RunOptions. The
// flag (--KEY), the environment variable (MCPWARDEN_KEY, see env_name), the settings-file key
// (KEY in [run] or [server.NAME], docs/SETTINGS.md), `config show` and `config check` all
// come from this table: an option added here is all of those at once.
enum class OptionKind : uint8_t {
    text,      // any string
    duration,  // parse_duration
    size,      // parse_size
    boolean,   // a switch: the flag takes no value; "1"/"true"/"yes"/"on" or "0"/"false"/…
    choice,    // one of the words in `choices` ("auto|none|cgroup|pidns")
    list,      // repeatable: each value is one more item (env: items separated by `separator`)
};

struct OptionSpec {
    std::string_view key;
    OptionKind kind;
    std::string_view fallback;  // the built-in default as a user would write it ("1s")
    std::string_view help;
    // Parses one value (one item of a list) into the options. The error says what the value
    // should be, without the option's name: "cannot parse '3x' as a duration (e.g. …)".
    Status (*set)(RunOptions&, std::string_view value);
    std::string_view choices{};  // choice: the words, '|'-separated
    // Whether a settings file may give it: not `name` in [run] (a default name would name
    // every server alike); it may in a [server.NAME] section matched by command.
    bool in_run_section = true;
    // list: what separates the items of one MCPWARDEN_* value (':' for paths, as in PATH;
    // ',' for ports and names).
    char separator = ':';
};

// The rows, in --help order.
const std::vector<OptionSpec>& option_table();
// The row of `key`, or nullptr.
const OptionSpec* find_option(std::string_view key);

// The flag names `set` knows, in --help order.
const std::vector<std::string_view>& run_option_keys();
// "eof-grace" → "MCPWARDEN_EOF_GRACE".
std::string env_name(std::string_view key);

// "250ms", "2s", "1.5s", "1m", "0" (plain numbers are milliseconds).
Result<std::chrono::milliseconds> parse_duration(std::string_view text);
// "1048576", "64KiB", "64MiB", "1GiB", "64k", "64M" (binary multiples).
Result<size_t> parse_size(std::string_view text);

std::string_view to_string(Isolate i);

}  // namespace warden::shim
