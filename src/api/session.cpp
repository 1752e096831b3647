// run_options() and run_session(): `mcpwarden run` over src/shim (options.hpp, session.hpp).
#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>

#include <unistd.h>

#include "api/internal.hpp"
#include "mcpwarden/session.hpp"
#include "mcpwarden/settings.hpp"
#include "shim/keeper.hpp"
#include "shim/options.hpp"
#include "shim/session.hpp"

namespace warden::api {
const std::vector<RunOptionInfo>& run_option_info() {
    static const std::vector<RunOptionInfo> info = [] {
        static constexpr const char* kKinds[] = {"text",   "duration", "size",   "boolean",
                                                 "choice", "list",     "integer"};
        std::vector<RunOptionInfo> out;
        for (const shim::OptionSpec& row : shim::option_table()) {
            RunOptionInfo i;
            i.key = row.key;
            i.type = kKinds[static_cast<int>(row.kind)];
            for (size_t pos = 0; !row.choices.empty();) {
                size_t bar = row.choices.find('|', pos);
                i.choices.emplace_back(row.choices.substr(pos, bar - pos));
                if (bar == std::string_view::npos) break;
                pos = bar + 1;
            }
            i.env = shim::env_name(row.key);
            i.fallback = row.fallback;
            i.help = row.help;
            out.push_back(std::move(i));
        }
        return out;
    }();
    return info;
}

const std::vector<std::string>& run_option_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> k;
        for (const RunOptionInfo& i : run_option_info())
            k.push_back(i.key);
        return k;
    }();
    return keys;
}

bool run_option_is_switch(const std::string& key) {
    const shim::OptionSpec* row = shim::find_option(key);
    return row && row->kind == shim::OptionKind::boolean;
}

char run_option_separator(const std::string& key) {
    const shim::OptionSpec* row = shim::find_option(key);
    return row && row->kind == shim::OptionKind::list ? row->separator : '\0';
}

std::string run_option_env(const std::string& key) {
    return shim::env_name(key);
}

// Flags and MCPWARDEN_* variables only: run_settings() without settings files.
Result<RunOptions> run_options(const std::map<std::string, std::string>& flags,
                               std::vector<std::string> command) {
    // A list option's value carries its items joined by the option's separator.
    std::vector<std::pair<std::string, std::string>> given;
    for (const auto& [key, value] : flags) {
        const char sep = run_option_separator(key);
        if (sep == '\0') {
            given.emplace_back(key, value);
            continue;
        }
        for (size_t pos = 0; pos <= value.size();) {
            size_t end = std::min(value.find(sep, pos), value.size());
            if (end > pos) given.emplace_back(key, value.substr(pos, end - pos));
            pos = end + 1;
        }
    }
    auto s = run_settings(given, std::move(command), SettingsFiles{});
    if (!s) return s.error();
    return std::move(s->options);
}

Result<std::chrono::milliseconds> parse_run_duration(const std::string& text) {
    auto d = shim::parse_duration(text);
    if (!d) return d.error();
    return *d;
}

Result<int> run_session(const RunOptions& options, AfterSession after, pid_t helper) {
    if (options.command.empty()) {
        shim::end_helper(helper);
        return Error{"no command given", EINVAL};
    }
    try {
        int code;
        {
            shim::Session session(options);
            if (helper > 0) session.end_with_session(helper);
            if (after == AfterSession::exit_process) session.exit_process_after();
            code = session.run();
            // run() returned: the session is over and on record, and every process it made is
            // reaped, the keeper too (docs/RUN.md, "When run returns"). What the destructors and
            // a normal exit would still do (free, join, run every library's exit handlers)
            // changes nothing on record and holds up the client, which waits for this exit.
            if (after == AfterSession::exit_process && session.closed_for_exit()) {
                shim::trace_phase("relay_exits");
                std::fflush(nullptr);
                ::_exit(code);
            }
        }
        shim::trace_phase("relay_exits");
        if (after == AfterSession::exit_process) {
            std::fflush(nullptr);
            ::_exit(code);
        }
        return code;
    } catch (const std::exception& e) {
        return Error{std::string("run: ") + e.what(), 0};
    }
}

}  // namespace warden::api
