// `mcpwarden run [OPTIONS] -- CMD [ARGS...]`: what a client launches instead of its server.
// See docs/RUN.md and include/mcpwarden/session.hpp.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "command.hpp"
#include "mcpwarden/session.hpp"

namespace warden::cli {
namespace {

struct RunArgs {
    std::map<std::string, std::string> values;
    std::map<std::string, CLI::Option*> opts;
    bool explain = false, no_journal = false;
    std::vector<std::string> command;
};

RunArgs& run_args() {
    static RunArgs a;
    return a;
}

int run_main() {
    auto& a = run_args();
    std::map<std::string, std::string> flags;
    for (const auto& [key, opt] : a.opts)
        if (opt->count() > 0) flags[key] = api::run_option_is_switch(key) ? "1" : a.values[key];
    auto o = api::run_options(flags, a.command);
    if (!o) {
        std::fprintf(stderr, "mcpwarden run: %s\n", o.error().message.c_str());
        return 2;
    }
    if (o->command.empty()) {
        std::fprintf(stderr,
                     "mcpwarden run: no command given: mcpwarden run [OPTIONS] -- CMD [ARGS...]\n");
        return 2;
    }
    auto rc = api::run_session(*o);
    if (!rc) {
        std::fprintf(stderr, "mcpwarden run: %s\n", rc.error().message.c_str());
        return 2;
    }
    return *rc;
}

const Command run_cmd(10, [](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "run",
        "Run an MCP stdio server under supervision: relay its stdio, journal its calls, "
        "and leave nothing of it behind when the client goes");
    auto& a = run_args();
    auto value = [&](const std::string& key, const std::string& help) {
        a.opts[key] = sub->add_option("--" + key, a.values[key],
                                      help + " [env " + api::run_option_env(key) + "]");
    };
    value("name", "Display name of the server in the journal (default: basename of CMD)");
    value("eof-grace", "How long the server gets to exit after EOF on its stdin (default 1s)");
    value("term-grace", "How long the tree gets after SIGTERM before SIGKILL (default 2s)");
    value("isolate",
          "auto|none|cgroup|pidns: containment to use; cgroup/pidns insist (default auto)");
    value("journal", "Journal database path (default $XDG_STATE_HOME/mcpwarden/journal.db)");
    a.opts["no-journal"] =
        sub->add_flag("--no-journal", a.no_journal, "Record nothing [env MCPWARDEN_NO_JOURNAL]");
    value("stdout-guard",
          "divert|pass|fail: non-JSON lines on the server's stdout (default divert)");
    value("max-message", "Largest message classified, e.g. 64MiB; longer lines pass unclassified");
    value("on-journal-failure",
          "warn|deny: when a request cannot be recorded, forward it (warn, the default) or refuse "
          "it");
    value("record-args", "none|preview|full: tool arguments in the journal (default preview)");
    value("record-argv",
          "redacted|full: command lines in the journal, credentials and prompts removed (default "
          "redacted)");
    value("journal-retention",
          "Prune journal records older than this at session end, e.g. 30d; 0 keeps all "
          "(default 90d)");
    value("journal-sync",
          "periodic|always: fsync the journal at most every second (default) or per request");
    a.opts["explain"] = sub->add_flag(
        "--explain", a.explain,
        "Print which containment layers are on and why others are off [env MCPWARDEN_EXPLAIN]");
    a.opts["journal"]->excludes(a.opts["no-journal"]);
    sub->add_option("command", a.command, "The server command and its arguments, after --")
        ->expected(-1);
    return Bound{sub, run_main};
});

}  // namespace
}  // namespace warden::cli
