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
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcpwarden/types.hpp"
#include "sys/result.hpp"

namespace warden::shim {

// RunOptions and its enums are mcpwarden/types.hpp's: the API hands them to Session as they
// are. Sets one option by its flag name without dashes ("eof-grace", "stdout-guard", …); a
// list option adds one item a call. Errors name the option and the value:
// "--eof-grace: cannot parse '3x' as a duration".
Status set_option(RunOptions& o, std::string_view key, std::string_view value);

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
    integer,   // a whole number (a count: "5"); in a settings file an integer or its text
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
