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
#include <string>
#include <string_view>
#include <vector>

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
    std::vector<std::string> command;

    // Sets one option by its flag name without dashes ("eof-grace", "stdout-guard", …).
    // Errors name the option and the value: "--eof-grace: cannot parse '3x' as a duration".
    Status set(std::string_view key, std::string_view value);
};

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
