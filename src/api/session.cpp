// run_options() and run_session(): `mcpwarden run` over src/shim (options.hpp, session.hpp).
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>

#include "api/internal.hpp"
#include "mcpwarden/session.hpp"
#include "mcpwarden/settings.hpp"
#include "shim/options.hpp"
#include "shim/session.hpp"

namespace warden::api {
namespace {

// Public run options from the internal ones (the parsed values) and back.
RunOptions session_public(const shim::RunOptions& o) {
    RunOptions p;
    p.name = o.name;
    p.eof_grace = o.eof_grace;
    p.term_grace = o.term_grace;
    p.isolate = static_cast<Isolate>(o.isolate);
    p.journal = o.journal;
    p.no_journal = o.no_journal;
    p.stdout_guard = static_cast<StdoutGuard>(o.stdout_guard);
    p.max_message = o.max_message;
    p.on_journal_failure = static_cast<OnJournalFailure>(o.on_journal_failure);
    p.record_args = static_cast<RecordArgs>(o.record_args);
    p.record_argv = static_cast<RecordArgv>(o.record_argv);
    p.journal_sync = static_cast<JournalSync>(o.journal_sync);
    p.journal_retention = o.journal_retention;
    p.explain = o.explain;
    p.sandbox = static_cast<Sandbox>(o.sandbox.profile);
    p.allow_read = o.sandbox.allow_read;
    p.allow_write = o.sandbox.allow_write;
    p.net = o.sandbox.net ? static_cast<SandboxNet>(static_cast<int>(*o.sandbox.net) + 1)
                          : SandboxNet::Profile;
    p.allow_connect.assign(o.sandbox.allow_connect.begin(), o.sandbox.allow_connect.end());
    p.env_allow = o.sandbox.env_allow;
    p.require_sandbox = o.sandbox.require;
    p.idle_stop = o.idle_stop;
    p.command = o.command;
    p.settings_files = o.settings_files;
    p.settings_error = o.settings_error;
    return p;
}

shim::RunOptions session_internal(const RunOptions& p) {
    shim::RunOptions o;
    o.name = p.name;
    o.eof_grace = p.eof_grace;
    o.term_grace = p.term_grace;
    o.isolate = static_cast<shim::Isolate>(p.isolate);
    o.journal = p.journal;
    o.no_journal = p.no_journal;
    o.stdout_guard = static_cast<shim::StdoutGuard>(p.stdout_guard);
    o.max_message = p.max_message;
    o.on_journal_failure = static_cast<shim::OnJournalFailure>(p.on_journal_failure);
    o.record_args = static_cast<shim::RecordArgs>(p.record_args);
    o.record_argv = static_cast<shim::RecordArgv>(p.record_argv);
    o.journal_sync = static_cast<shim::JournalSync>(p.journal_sync);
    o.journal_retention = p.journal_retention;
    o.explain = p.explain;
    o.sandbox.profile = static_cast<sandbox::Profile>(p.sandbox);
    o.sandbox.allow_read = p.allow_read;
    o.sandbox.allow_write = p.allow_write;
    if (p.net != SandboxNet::Profile)
        o.sandbox.net = static_cast<sandbox::Net>(static_cast<int>(p.net) - 1);
    for (int port : p.allow_connect)
        if (port > 0 && port < 65536)
            o.sandbox.allow_connect.push_back(static_cast<uint16_t>(port));
    o.sandbox.env_allow = p.env_allow;
    o.sandbox.require = p.require_sandbox;
    o.idle_stop = p.idle_stop;
    o.command = p.command;
    o.settings_files = p.settings_files;
    o.settings_error = p.settings_error;
    return o;
}

// The public enums are declared in the internal order: the casts above rely on it.
static_assert(static_cast<int>(Isolate::Pidns) == static_cast<int>(shim::Isolate::pidns));
static_assert(static_cast<int>(Isolate::Cgroup) == static_cast<int>(shim::Isolate::cgroup));
static_assert(static_cast<int>(StdoutGuard::Fail) == static_cast<int>(shim::StdoutGuard::fail));
static_assert(static_cast<int>(StdoutGuard::Pass) == static_cast<int>(shim::StdoutGuard::pass));
static_assert(static_cast<int>(OnJournalFailure::Warn) ==
              static_cast<int>(shim::OnJournalFailure::warn));
static_assert(static_cast<int>(RecordArgs::Full) == static_cast<int>(shim::RecordArgs::full));
static_assert(static_cast<int>(RecordArgs::Preview) == static_cast<int>(shim::RecordArgs::preview));
static_assert(static_cast<int>(Sandbox::Workspace) ==
              static_cast<int>(sandbox::Profile::workspace));
static_assert(static_cast<int>(Sandbox::Strict) == static_cast<int>(sandbox::Profile::strict));
static_assert(static_cast<int>(SandboxNet::Any) == static_cast<int>(sandbox::Net::any) + 1);
static_assert(static_cast<int>(SandboxNet::None) == static_cast<int>(sandbox::Net::none) + 1);
static_assert(static_cast<int>(RecordArgv::Full) == static_cast<int>(shim::RecordArgv::full));
static_assert(static_cast<int>(JournalSync::Always) == static_cast<int>(shim::JournalSync::always));

}  // namespace

RunOptions public_run_options(const shim::RunOptions& o) {
    return session_public(o);
}

const std::vector<RunOptionInfo>& run_option_info() {
    static const std::vector<RunOptionInfo> info = [] {
        static constexpr const char* kKinds[] = {"text",    "duration", "size",
                                                 "boolean", "choice",   "list"};
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
    if (!d) return to_public(d.error());
    return *d;
}

Result<int> run_session(const RunOptions& options) {
    if (options.command.empty()) return Error{"no command given", EINVAL};
    try {
        shim::Session session(session_internal(options));
        return session.run();
    } catch (const std::exception& e) {
        return Error{std::string("run: ") + e.what(), 0};
    }
}

}  // namespace warden::api
