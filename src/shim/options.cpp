#include "shim/options.hpp"

#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include "journal/query.hpp"

namespace warden::shim {

namespace {

Error bad(std::string_view key, std::string_view value, std::string_view what) {
    return Error::msg("--" + std::string(key) + ": cannot parse '" + std::string(value) + "' as " +
                      std::string(what));
}

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
        case Isolate::auto_:
            return "auto";
        case Isolate::none:
            return "none";
        case Isolate::cgroup:
            return "cgroup";
        case Isolate::pidns:
            return "pidns";
    }
    return "?";
}

const std::vector<std::string_view>& run_option_keys() {
    static const std::vector<std::string_view> keys = {"name",
                                                       "eof-grace",
                                                       "term-grace",
                                                       "isolate",
                                                       "journal",
                                                       "no-journal",
                                                       "stdout-guard",
                                                       "max-message",
                                                       "on-journal-failure",
                                                       "record-args",
                                                       "record-argv",
                                                       "journal-sync",
                                                       "journal-retention",
                                                       "explain"};
    return keys;
}

std::string env_name(std::string_view key) {
    std::string out = "MCPWARDEN_";
    for (char c : key)
        out.push_back(c == '-' ? '_' : static_cast<char>(std::toupper(c)));
    return out;
}

Status RunOptions::set(std::string_view key, std::string_view v) {
    if (key == "name") {
        name = std::string(v);
    } else if (key == "eof-grace" || key == "term-grace") {
        auto d = parse_duration(v);
        if (!d) return bad(key, v, "a duration (e.g. 250ms, 2s, 1.5s)");
        (key == "eof-grace" ? eof_grace : term_grace) = *d;
    } else if (key == "isolate") {
        if (v == "auto")
            isolate = Isolate::auto_;
        else if (v == "none")
            isolate = Isolate::none;
        else if (v == "cgroup")
            isolate = Isolate::cgroup;
        else if (v == "pidns")
            isolate = Isolate::pidns;
        else
            return bad(key, v, "auto, none, cgroup or pidns");
    } else if (key == "journal") {
        if (v.empty())
            return Error::msg(
                "--journal: empty path (leave the option out for the default journal, or give "
                "--no-journal)");
        journal = std::string(v);
    } else if (key == "no-journal" || key == "explain") {
        auto b = parse_bool(v);
        if (!b) return bad(key, v, "a boolean");
        (key == "no-journal" ? no_journal : explain) = *b;
    } else if (key == "stdout-guard") {
        if (v == "divert")
            stdout_guard = StdoutGuard::divert;
        else if (v == "pass")
            stdout_guard = StdoutGuard::pass;
        else if (v == "fail")
            stdout_guard = StdoutGuard::fail;
        else
            return bad(key, v, "divert, pass or fail");
    } else if (key == "max-message") {
        auto s = parse_size(v);
        if (!s) return bad(key, v, "a size in bytes (e.g. 1048576, 64MiB)");
        max_message = *s;
    } else if (key == "on-journal-failure") {
        if (v == "deny")
            on_journal_failure = OnJournalFailure::deny;
        else if (v == "warn")
            on_journal_failure = OnJournalFailure::warn;
        else
            return bad(key, v, "deny or warn");
    } else if (key == "record-args") {
        if (v == "none")
            record_args = RecordArgs::none;
        else if (v == "preview")
            record_args = RecordArgs::preview;
        else if (v == "full")
            record_args = RecordArgs::full;
        else
            return bad(key, v, "none, preview or full");
    } else if (key == "record-argv") {
        if (v == "redacted")
            record_argv = RecordArgv::redacted;
        else if (v == "full")
            record_argv = RecordArgv::full;
        else
            return bad(key, v, "redacted or full");
    } else if (key == "journal-retention") {
        if (v == "0" || v == "off") {
            journal_retention = std::chrono::seconds(0);
        } else {
            int64_t now = journal::now_ns();
            auto since = journal::parse_since(v, now);
            if (!since || *since >= now || v.find_first_not_of("0123456789") == std::string::npos)
                return bad(key, v, "a span (e.g. 90d, 12h) or 0 to keep everything");
            journal_retention = std::chrono::seconds((now - *since) / 1'000'000'000);
        }
    } else if (key == "journal-sync") {
        if (v == "periodic")
            journal_sync = JournalSync::periodic;
        else if (v == "always")
            journal_sync = JournalSync::always;
        else
            return bad(key, v, "periodic or always");
    } else {
        return Error::msg("unknown option --" + std::string(key));
    }
    return {};
}

}  // namespace warden::shim
