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
    std::map<std::string, std::vector<std::string>> lists;  // repeatable flags
    std::map<std::string, CLI::Option*> opts;
    bool explain = false, no_journal = false, require_sandbox = false;
    std::vector<std::string> command;
};

RunArgs& run_args() {
    static RunArgs a;
    return a;
}

int run_main() {
    auto& a = run_args();
    std::map<std::string, std::string> flags;
    for (const auto& [key, opt] : a.opts) {
        if (opt->count() == 0) continue;
        if (char sep = api::run_option_separator(key); sep != '\0') {
            std::string joined;
            for (const auto& item : a.lists[key])
                joined += (joined.empty() ? "" : std::string(1, sep)) + item;
            flags[key] = joined;
        } else {
            flags[key] = api::run_option_is_switch(key) ? "1" : a.values[key];
        }
    }
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
    value("on-journal-failure", "deny|warn: when a request cannot be recorded (default deny)");
    value("record-args", "none|preview|full: tool arguments in the journal (default preview)");
    a.opts["explain"] = sub->add_flag(
        "--explain", a.explain,
        "Print which containment layers are on and why others are off [env MCPWARDEN_EXPLAIN]");
    value("sandbox",
          "off|strict|workspace: confine the server's files, network and signals (default "
          "off; docs/SANDBOX.md)");
    auto list = [&](const std::string& key, const std::string& help) {
        a.opts[key] = sub->add_option("--" + key, a.lists[key],
                                      help + " [env " + api::run_option_env(key) + "]")
                          ->allow_extra_args(false);
    };
    list("allow-read", "With --sandbox: also allow reading beneath PATH (repeatable)");
    list("allow-write", "With --sandbox: also allow reading and writing beneath PATH (repeatable)");
    value("net", "none|loopback|any: the sandbox's network (default loopback)");
    list("allow-connect", "With --sandbox: allow TCP connections to PORT (repeatable)");
    list("env-allow", "With --sandbox: pass the variable NAME (or NAME*) on (repeatable)");
    a.opts["require-sandbox"] =
        sub->add_flag("--require-sandbox", a.require_sandbox,
                      "Refuse to start (exit 125) unless the sandbox is fully enforced here "
                      "[env MCPWARDEN_REQUIRE_SANDBOX]");
    a.opts["journal"]->excludes(a.opts["no-journal"]);
    sub->add_option("command", a.command, "The server command and its arguments, after --")
        ->expected(-1);
    return Bound{sub, run_main};
});

}  // namespace
}  // namespace warden::cli
