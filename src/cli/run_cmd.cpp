// `mcpwarden run [OPTIONS] -- CMD [ARGS...]`: what a client launches instead of its server.
// See docs/RUN.md and include/mcpwarden/session.hpp.
#include <unistd.h>

#include <cstdio>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "command.hpp"
#include "mcpwarden/reap.hpp"
#include "mcpwarden/session.hpp"
#include "mcpwarden/settings.hpp"
#include "mcpwarden/share.hpp"

namespace warden::cli {
namespace {

struct RunArgs {
    std::map<std::string, std::string> values;
    std::map<std::string, std::vector<std::string>> lists;
    std::map<std::string, bool> switches;
    std::vector<std::pair<std::string, CLI::Option*>> opts;  // in --help order
    std::vector<std::string> command;
};

RunArgs& run_args() {
    static RunArgs a;
    return a;
}

int run_main() {
    auto& a = run_args();
    std::vector<std::pair<std::string, std::string>> flags;
    for (const auto& [key, opt] : a.opts) {
        if (opt->count() == 0) continue;
        if (a.switches.count(key))
            flags.emplace_back(key, "1");
        else if (a.lists.count(key))
            for (const std::string& v : a.lists[key])
                flags.emplace_back(key, v);
        else
            flags.emplace_back(key, a.values[key]);
    }
    auto s = api::run_settings(flags, a.command);
    if (!s) {
        std::fprintf(stderr, "mcpwarden run: %s\n", s.error().message.c_str());
        return 2;
    }
    if (s->options.command.empty()) {
        std::fprintf(stderr,
                     "mcpwarden run: no command given: mcpwarden run [OPTIONS] -- CMD [ARGS...]\n");
        return 2;
    }
    // A settings file that cannot be used may be the one place a sandbox, a limit or a
    // redaction was asked for: run on the built-in defaults instead and the server would run
    // less protected than its user wrote, told only by a line the client hides. Not started.
    if (!s->problems.empty()) {
        for (const api::SettingsProblem& p : s->problems)
            std::fprintf(stderr, "mcpwarden run: %s\n", p.text.c_str());
        std::fputs(
            "mcpwarden run: not starting the server: a settings file that cannot be used "
            "may be what sets its sandbox, limits or redaction (fix it; `mcpwarden config "
            "check` lists every problem)\n",
            stderr);
        return 2;
    }
    // One tree for every session of this server (docs/SHARING.md). Sharing is a saving,
    // not a protection: when no broker can be had, the session runs a tree of its own.
    if (s->options.share && !api::inside_shared_tree()) {
        auto rc = api::run_shared(*s, flags);
        if (rc) return *rc;
        std::fprintf(stderr, "mcpwarden run: %s; running a tree of this session's own\n",
                     rc.error().message.c_str());
    }
    // Sessions before this one whose relay and keeper both died: ended by a worker of ours
    // while this session starts, which then applies the journal's retention. The session
    // ends it, if it is still at work, before `run` returns.
    pid_t sweep = 0;
    if (!s->options.no_journal)
        sweep =
            api::end_dead_sessions_in_background(s->options.journal, s->options.journal_retention);
    // Once the session is over and on record, `run` exits at once (the client waits for this
    // exit, and a supervisor restarts the server only after it): it returns only on error.
    auto rc = api::run_session(s->options, api::AfterSession::exit_process, sweep);
    if (!rc) {
        std::fprintf(stderr, "mcpwarden run: %s\n", rc.error().message.c_str());
        return 2;
    }
    return *rc;
}

// Every option of the table (api::run_option_info) as a flag: a switch, a repeatable list,
// or one value. The settings file and the MCPWARDEN_* variables know the same keys.
const Command run_cmd(10, [](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "run",
        "Run an MCP stdio server under supervision: relay its stdio, journal its calls, "
        "and leave nothing of it behind when the client goes");
    auto& a = run_args();
    for (const api::RunOptionInfo& o : api::run_option_info()) {
        const std::string flag = "--" + o.key, help = o.help + " [env " + o.env + "]";
        CLI::Option* opt;
        if (o.type == "boolean") {
            opt = sub->add_flag(flag, a.switches[o.key], help);
        } else if (o.type == "list") {
            // One value per occurrence (--allow-read A --allow-read B): a vector option
            // would otherwise swallow the words after it, `--` and the server's command too.
            opt = sub->add_option(flag, a.lists[o.key], help)->allow_extra_args(false);
        } else {
            opt = sub->add_option(flag, a.values[o.key], help);
        }
        a.opts.emplace_back(o.key, opt);
    }
    auto find = [&](const std::string& key) {
        for (auto& [k, opt] : a.opts)
            if (k == key) return opt;
        return static_cast<CLI::Option*>(nullptr);
    };
    find("journal")->excludes(find("no-journal"));
    sub->add_option("command", a.command, "The server command and its arguments, after --")
        ->expected(-1);
    return Bound{sub, run_main};
});

}  // namespace
}  // namespace warden::cli
