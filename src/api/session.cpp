// run_options() and run_session(): `mcpwarden run` over src/shim (options.hpp, session.hpp).
#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>

#include "api/internal.hpp"
#include "mcpwarden/session.hpp"
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
    p.command = o.command;
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
    o.command = p.command;
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
static_assert(static_cast<int>(RecordArgv::Full) == static_cast<int>(shim::RecordArgv::full));
static_assert(static_cast<int>(JournalSync::Always) == static_cast<int>(shim::JournalSync::always));

}  // namespace

const std::vector<std::string>& run_option_keys() {
    static const std::vector<std::string> keys = [] {
        std::vector<std::string> k;
        for (auto key : shim::run_option_keys())
            k.emplace_back(key);
        return k;
    }();
    return keys;
}

bool run_option_is_switch(const std::string& key) {
    return key == "explain" || key == "no-journal";
}

std::string run_option_env(const std::string& key) {
    return shim::env_name(key);
}

Result<RunOptions> run_options(const std::map<std::string, std::string>& flags,
                               std::vector<std::string> command) {
    try {
        const auto& keys = run_option_keys();
        for (const auto& flag : flags)
            if (std::find(keys.begin(), keys.end(), flag.first) == keys.end())
                return Error{"unknown option --" + flag.first, EINVAL};
        shim::RunOptions o;
        // Environment first, then flags: a flag wins over its MCPWARDEN_* variable.
        for (auto key : shim::run_option_keys()) {
            std::string k(key);
            std::string env = shim::env_name(key);
            const char* ev = std::getenv(env.c_str());
            auto it = flags.find(k);
            bool given = it != flags.end();
            std::string value;
            if (given) {
                value = it->second;
            } else if (ev && *ev) {
                value = ev;
            } else {
                continue;
            }
            if (auto s = o.set(k, value); !s)
                return Error{s.error().message + (given ? "" : " (from " + env + ")"), EINVAL};
        }
        o.command = std::move(command);
        return session_public(o);
    } catch (const std::exception& e) {
        return Error{std::string("run options: ") + e.what(), EINVAL};
    }
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
