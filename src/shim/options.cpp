#include "shim/options.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>
#include <type_traits>

#include "journal/query.hpp"
#include "sandbox/sandbox.hpp"

namespace warden::shim {

namespace {

Result<bool> parse_bool(std::string_view v) {
    if (v == "1" || v == "true" || v == "yes" || v == "on" || v.empty()) return true;
    if (v == "0" || v == "false" || v == "no" || v == "off") return false;
    return Error::msg("not a boolean");
}

// Splits "1.5s" into 1.5 and "s".
bool number_and_unit(std::string_view text, double& number, std::string_view& unit) {
    size_t i = 0;
    while (i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'))
        ++i;
    if (i == 0) return false;
    std::string num(text.substr(0, i));
    char* end = nullptr;
    number = std::strtod(num.c_str(), &end);
    if (end != num.c_str() + num.size() || !std::isfinite(number) || number < 0) return false;
    unit = text.substr(i);
    return true;
}

}  // namespace

Result<std::chrono::milliseconds> parse_duration(std::string_view text) {
    double n = 0;
    std::string_view unit;
    if (!number_and_unit(text, n, unit)) return Error::msg("not a duration");
    double ms;
    if (unit.empty() || unit == "ms")
        ms = n;
    else if (unit == "s")
        ms = n * 1000;
    else if (unit == "m" || unit == "min")
        ms = n * 60000;
    else if (unit == "us")
        ms = n / 1000;
    else
        return Error::msg("not a duration");
    if (ms > 86400e3) return Error::msg("longer than a day");
    return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

Result<size_t> parse_size(std::string_view text) {
    double n = 0;
    std::string_view unit;
    if (!number_and_unit(text, n, unit)) return Error::msg("not a size");
    double mult;
    if (unit.empty() || unit == "B")
        mult = 1;
    else if (unit == "k" || unit == "K" || unit == "KiB")
        mult = 1024.0;
    else if (unit == "M" || unit == "MiB")
        mult = 1024.0 * 1024;
    else if (unit == "G" || unit == "GiB")
        mult = 1024.0 * 1024 * 1024;
    else
        return Error::msg("not a size");
    double bytes = n * mult;
    if (bytes < 1 || bytes > 4.0 * 1024 * 1024 * 1024) return Error::msg("out of range");
    return static_cast<size_t>(bytes);
}

std::string_view to_string(Isolate i) {
    switch (i) {
        case Isolate::Auto:
            return "auto";
        case Isolate::None:
            return "none";
        case Isolate::Cgroup:
            return "cgroup";
        case Isolate::Pidns:
            return "pidns";
    }
    return "?";
}

namespace {

// The index of `v` among the '|'-separated `choices`, or -1.
int choice_index(std::string_view choices, std::string_view v) {
    int i = 0;
    for (size_t pos = 0;; ++i) {
        size_t bar = choices.find('|', pos);
        if (choices.substr(pos, bar - pos) == v) return i;
        if (bar == std::string_view::npos) return -1;
        pos = bar + 1;
    }
}

// "auto|none|cgroup|pidns" → "auto, none, cgroup or pidns".
std::string choice_list(std::string_view choices) {
    const size_t last = choices.rfind('|');
    std::string out;
    for (size_t i = 0; i < choices.size(); ++i)
        if (choices[i] != '|')
            out.push_back(choices[i]);
        else
            out += i == last ? " or " : ", ";
    return out;
}

Error cannot_parse(std::string_view value, std::string_view what) {
    return Error::msg("cannot parse '" + std::string(value) + "' as " + std::string(what));
}

// The words of the enum options, in the order of their enumerators.
constexpr std::string_view kIsolate = "auto|none|cgroup|pidns";
constexpr std::string_view kStdoutGuard = "divert|pass|fail";
constexpr std::string_view kOnJournalFailure = "deny|warn";
constexpr std::string_view kRecordArgs = "none|preview|full";
constexpr std::string_view kRecordArgv = "redacted|full";
constexpr std::string_view kJournalSync = "periodic|always";
constexpr std::string_view kSandbox = "off|strict|workspace";
constexpr std::string_view kRestart = "no|on-failure";

// The setter of an enum option whose enumerators `Choices` spells, in order.
template <auto Member, const std::string_view* Choices>
Status set_choice(RunOptions& o, std::string_view v) {
    int i = choice_index(*Choices, v);
    if (i < 0) return cannot_parse(v, choice_list(*Choices));
    o.*Member = static_cast<std::remove_reference_t<decltype(o.*Member)>>(i);
    return {};
}

Status set_name(RunOptions& o, std::string_view v) {
    o.name = std::string(v);
    return {};
}
template <std::chrono::milliseconds RunOptions::*Member>
Status set_duration(RunOptions& o, std::string_view v) {
    auto d = parse_duration(v);
    if (!d) return cannot_parse(v, "a duration (e.g. 250ms, 2s, 1.5s)");
    o.*Member = *d;
    return {};
}
template <bool RunOptions::*Member>
Status set_bool(RunOptions& o, std::string_view v) {
    auto b = parse_bool(v);
    if (!b) return cannot_parse(v, "a boolean");
    o.*Member = *b;
    return {};
}
Status set_journal(RunOptions& o, std::string_view v) {
    if (v.empty())
        return Error::msg(
            "empty path (leave the option out for the default journal, or give --no-journal)");
    o.journal = std::string(v);
    return {};
}
Status set_retention(RunOptions& o, std::string_view v) {
    if (v == "0" || v == "off") {
        o.journal_retention = std::chrono::seconds(0);
        return {};
    }
    const int64_t now = journal::now_ns();
    auto since = journal::parse_since(v, now);
    if (!since || *since >= now || v.find_first_not_of("0123456789") == std::string_view::npos)
        return cannot_parse(v, "a span (e.g. 90d, 12h) or 0 to keep everything");
    o.journal_retention = std::chrono::seconds((now - *since) / 1'000'000'000);
    return {};
}
Status set_idle_stop(RunOptions& o, std::string_view v) {
    if (v == "off") {
        o.idle_stop.reset();
        return {};
    }
    auto d = parse_duration(v);
    if (!d) return cannot_parse(v, "a duration (e.g. 30s, 5m, 0 for after every answer) or off");
    o.idle_stop = *d;
    return {};
}
// A catalog's age: the durations of parse_duration, and hours and days beyond them.
Status set_lazy_max_age(RunOptions& o, std::string_view v) {
    double n = 0;
    std::string_view unit;
    std::optional<double> ms;
    if (number_and_unit(v, n, unit) && (unit == "h" || unit == "d"))
        ms = n * (unit == "h" ? 3600e3 : 86400e3);
    else if (auto d = parse_duration(v))
        ms = static_cast<double>(d->count());
    if (!ms || *ms < 1 || *ms > 3650 * 86400e3)
        return cannot_parse(v, "an age from 1ms to 3650d (e.g. 12h, 7d, 30m)");
    o.lazy_max_age = std::chrono::milliseconds(static_cast<int64_t>(std::llround(*ms)));
    return {};
}
// --net has no word for SandboxNet::Profile, the default: the words are its enumerators
// from None on.
constexpr std::string_view kNet = "none|loopback|any";
Status set_net(RunOptions& o, std::string_view v) {
    int i = choice_index(kNet, v);
    if (i < 0) return cannot_parse(v, choice_list(kNet));
    o.net = static_cast<SandboxNet>(i + 1);
    return {};
}
template <std::vector<std::string> RunOptions::*Member>
Status add_item(RunOptions& o, std::string_view v) {
    if (!v.empty()) (o.*Member).emplace_back(v);
    return {};
}
Status add_connect(RunOptions& o, std::string_view v) {
    auto port = sandbox::parse_port(v);
    if (!port) return cannot_parse(v, "a TCP port (1-65535)");
    o.allow_connect.push_back(*port);
    return {};
}
Status set_log_size(RunOptions& o, std::string_view v) {
    auto s = parse_size(v);
    if (!s || *s < 4096) return cannot_parse(v, "a size of at least 4KiB (e.g. 1MiB)");
    o.log_size = *s;
    return {};
}
// A count from 1 to 100 (log-files, restart-burst).
template <int RunOptions::*Member>
Status set_count(RunOptions& o, std::string_view v) {
    int n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc() || end != v.data() + v.size() || n < 1 || n > 100)
        return cannot_parse(v, "a count from 1 to 100");
    o.*Member = n;
    return {};
}
Status set_max_message(RunOptions& o, std::string_view v) {
    auto s = parse_size(v);
    if (!s) return cannot_parse(v, "a size in bytes (e.g. 1048576, 64MiB)");
    o.max_message = *s;
    return {};
}

// ---- Limits and health (docs/RUN.md, "Limits", "Wedged") ----
constexpr std::string_view kLimits = "strict|best-effort";
Status set_limits_policy(RunOptions& o, std::string_view v) {
    int i = choice_index(kLimits, v);
    if (i < 0) return cannot_parse(v, choice_list(kLimits));
    o.limits_best_effort = i == 1;
    return {};
}
// Sizes beyond parse_size's 4 GiB: a memory cap may well be larger.
Status set_memory_max(RunOptions& o, std::string_view v) {
    double n = 0;
    std::string_view unit;
    double mult = 0;
    if (number_and_unit(v, n, unit)) {
        if (unit.empty() || unit == "B") mult = 1;
        if (unit == "k" || unit == "K" || unit == "KiB") mult = 1024.0;
        if (unit == "M" || unit == "MiB") mult = 1024.0 * 1024;
        if (unit == "G" || unit == "GiB") mult = 1024.0 * 1024 * 1024;
        if (unit == "T" || unit == "TiB") mult = 1024.0 * 1024 * 1024 * 1024;
    }
    const double bytes = n * mult;
    if (mult == 0 || bytes < 1024.0 * 1024 || bytes > 1024.0 * 1024 * 1024 * 1024 * 1024)
        return cannot_parse(v, "a size from 1MiB to 1024TiB (e.g. 512MiB, 2GiB)");
    o.memory_max = static_cast<uint64_t>(bytes);
    return {};
}
// A whole number in [lo, hi].
std::optional<uint64_t> whole_number(std::string_view v, uint64_t lo, uint64_t hi) {
    uint64_t n = 0;
    auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
    if (ec != std::errc{} || end != v.data() + v.size() || n < lo || n > hi) return std::nullopt;
    return n;
}
Status set_tasks_max(RunOptions& o, std::string_view v) {
    auto n = whole_number(v, 1, 4194304);
    if (!n) return cannot_parse(v, "a number of processes and threads from 1 to 4194304");
    o.tasks_max = *n;
    return {};
}
Status set_cpu_max(RunOptions& o, std::string_view v) {
    if (!v.empty() && v.back() == '%') v.remove_suffix(1);
    auto n = whole_number(v, 1, 100000);
    if (!n) return cannot_parse(v, "a percentage of one CPU (e.g. 50, 200 for two CPUs)");
    o.cpu_max = static_cast<uint32_t>(*n);
    return {};
}
template <std::optional<std::chrono::milliseconds> RunOptions::*Member>
Status set_optional_duration(RunOptions& o, std::string_view v) {
    if (v == "off" || v == "0") {
        (o.*Member).reset();
        return {};
    }
    auto d = parse_duration(v);
    if (!d || d->count() < 10)
        return cannot_parse(v, "a duration of 10ms or more (e.g. 5s), or off");
    o.*Member = *d;
    return {};
}

}  // namespace

const std::vector<OptionSpec>& option_table() {
    using K = OptionKind;
    static const std::vector<OptionSpec> table = {
        {"name",
         K::text,
         "",
         "Display name of the server in the journal (default: basename of CMD)",
         set_name,
         {},
         false},
        {"eof-grace", K::duration, "1s",
         "How long the server gets to exit after EOF on its stdin (default 1s)",
         set_duration<&RunOptions::eof_grace>},
        {"term-grace", K::duration, "2s",
         "How long the tree gets after SIGTERM before SIGKILL (default 2s)",
         set_duration<&RunOptions::term_grace>},
        {"isolate", K::choice, "auto",
         "auto|none|cgroup|pidns: containment to use; cgroup/pidns insist (default auto)",
         set_choice<&RunOptions::isolate, &kIsolate>, kIsolate},
        {"journal", K::text, "",
         "Journal database path (default $XDG_STATE_HOME/mcpwarden/journal.db)", set_journal},
        {"no-journal", K::boolean, "false", "Record nothing", set_bool<&RunOptions::no_journal>},
        {"stdout-guard", K::choice, "divert",
         "divert|pass|fail: non-JSON lines on the server's stdout (default divert)",
         set_choice<&RunOptions::stdout_guard, &kStdoutGuard>, kStdoutGuard},
        {"max-message", K::size, "64MiB",
         "Largest message classified, e.g. 64MiB; longer lines pass unclassified", set_max_message},
        {"on-journal-failure", K::choice, "warn",
         "deny|warn: when a request cannot be recorded, forward it (warn, the default) or refuse "
         "it",
         set_choice<&RunOptions::on_journal_failure, &kOnJournalFailure>, kOnJournalFailure},
        {"record-args", K::choice, "preview",
         "none|preview|full: tool arguments in the journal (default preview)",
         set_choice<&RunOptions::record_args, &kRecordArgs>, kRecordArgs},
        {"record-argv", K::choice, "redacted",
         "redacted|full: command lines in the journal, credentials and prompts removed (default "
         "redacted)",
         set_choice<&RunOptions::record_argv, &kRecordArgv>, kRecordArgv},
        {"journal-sync", K::choice, "periodic",
         "periodic|always: fsync the journal at most every second (default) or per request",
         set_choice<&RunOptions::journal_sync, &kJournalSync>, kJournalSync},
        {"journal-retention", K::text, "90d",
         "Prune journal records older than this when a session starts, e.g. 30d; 0 keeps all "
         "(default 90d)",
         set_retention},
        {"explain", K::boolean, "false",
         "Print which containment layers are on and why others are off",
         set_bool<&RunOptions::explain>},
        {"idle-stop", K::text, "off",
         "Tear the server's tree down after DUR unused and start it again on the next request "
         "(0: after every answer; default off)",
         set_idle_stop},
        {"lazy", K::boolean, "false",
         "Start the server only for the first request its catalog in the journal cannot answer",
         set_bool<&RunOptions::lazy>},
        {"share", K::boolean, "false",
         "Serve this session from the one tree of this server that every session of the same "
         "server and user shares, through the user's broker (docs/SHARING.md)",
         set_bool<&RunOptions::share>},
        {"share-linger", K::duration, "60s",
         "With --share: how long a shared tree, and then the broker, stays without any client",
         set_duration<&RunOptions::share_linger>},
        {"lazy-max-age", K::text, "7d",
         "With --lazy: a catalog older than this is not used, e.g. 12h (default 7d)",
         set_lazy_max_age},
        {"sandbox", K::choice, "off",
         "off|strict|workspace: confine the server's files, network and signals (default off; "
         "docs/SANDBOX.md)",
         set_choice<&RunOptions::sandbox, &kSandbox>, kSandbox},
        {"allow-read", K::list, "", "With --sandbox: also allow reading beneath PATH (repeatable)",
         add_item<&RunOptions::allow_read>},
        {"allow-write", K::list, "",
         "With --sandbox: also allow reading and writing beneath PATH (repeatable)",
         add_item<&RunOptions::allow_write>},
        {"net", K::choice, "loopback",
         "none|loopback|any: the sandbox's network (default loopback)", set_net, kNet},
        {"allow-connect",
         K::list,
         "",
         "With --sandbox: allow TCP connections to PORT (repeatable)",
         add_connect,
         {},
         true,
         ','},
        {"env-allow",
         K::list,
         "",
         "With --sandbox: pass the variable NAME (or NAME*) on (repeatable)",
         add_item<&RunOptions::env_allow>,
         {},
         true,
         ','},
        {"allow-fetch", K::boolean, "false",
         "With --sandbox: let a package launcher (npx, uvx, pipx run, …) fetch what its cache "
         "lacks, over --net any (default: it runs from its cache, offline)",
         set_bool<&RunOptions::allow_fetch>},
        {"require-sandbox", K::boolean, "false",
         "Refuse to start (exit 125) unless the sandbox is fully enforced here",
         set_bool<&RunOptions::require_sandbox>},
        {"logs", K::boolean, "true",
         "Keep the server's stderr in a rotated log (`mcpwarden logs`; default true)",
         set_bool<&RunOptions::logs>},
        {"log-size", K::size, "1MiB", "Largest log file before it is rotated (default 1MiB)",
         set_log_size},
        {"log-files", K::integer, "4",
         "Log files kept per server, the live one included (default 4)",
         set_count<&RunOptions::log_files>},
        {"restart", K::choice, "no",
         "no|on-failure: start a server that died again, its handshake replayed (default no)",
         set_choice<&RunOptions::restart, &kRestart>, kRestart},
        {"restart-burst", K::integer, "5",
         "With --restart: at most this many starts in --restart-interval (default 5)",
         set_count<&RunOptions::restart_burst>},
        {"restart-interval", K::duration, "10s",
         "With --restart: the start limit's interval (default 10s)",
         set_duration<&RunOptions::restart_interval>},
        {"memory-max", K::text, "", "Cap the tree's memory and swap at SIZE, e.g. 512MiB",
         set_memory_max},
        {"tasks-max", K::integer, "", "Cap the tree's processes and threads at N", set_tasks_max},
        {"cpu-max", K::text, "", "Cap the tree's CPU at PERCENT of one CPU (200: two CPUs)",
         set_cpu_max},
        {"limits", K::choice, "strict",
         "strict|best-effort: a limit no controller enforces here refuses the start (strict, "
         "exit 125) or is said and dropped",
         set_limits_policy, kLimits},
        {"health", K::text, "off",
         "Ping the idle server every DUR; one that does not answer is wedged and ended",
         set_optional_duration<&RunOptions::health>},
        {"health-timeout", K::duration, "5s",
         "With --health: how long a ping may go unanswered (default 5s)",
         set_duration<&RunOptions::health_timeout>},
        {"request-timeout", K::text, "off",
         "A request unanswered for DUR marks the server wedged and ends it (default off)",
         set_optional_duration<&RunOptions::request_timeout>},
    };
    return table;
}

const OptionSpec* find_option(std::string_view key) {
    for (const OptionSpec& row : option_table())
        if (row.key == key) return &row;
    return nullptr;
}

const std::vector<std::string_view>& run_option_keys() {
    static const std::vector<std::string_view> keys = [] {
        std::vector<std::string_view> k;
        for (const OptionSpec& row : option_table())
            k.push_back(row.key);
        return k;
    }();
    return keys;
}

std::string env_name(std::string_view key) {
    std::string out = "MCPWARDEN_";
    for (char c : key)
        out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
    return out;
}

Status set_option(RunOptions& o, std::string_view key, std::string_view v) {
    const OptionSpec* row = find_option(key);
    if (!row) return Error::msg("unknown option --" + std::string(key));
    if (auto st = row->set(o, v); !st)
        return Error::msg("--" + std::string(key) + ": " + st.error().message);
    return {};
}

}  // namespace warden::shim
