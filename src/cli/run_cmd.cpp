// `mcpwarden run [OPTIONS] -- CMD [ARGS...]`: what a client launches instead of its server.
// See docs/RUN.md and src/shim/session.hpp.
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "shim/options.hpp"
#include "shim/session.hpp"

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
    shim::RunOptions o;
    // Environment first, then flags: a flag wins over its MCPWARDEN_* variable.
    for (auto key : shim::run_option_keys()) {
        std::string k(key);
        std::string env = shim::env_name(key);
        const char* ev = std::getenv(env.c_str());
        auto it = a.opts.find(k);
        bool given = it != a.opts.end() && it->second->count() > 0;
        std::string value;
        if (given) {
            value = (k == "explain" || k == "no-journal") ? "1" : a.values[k];
        } else if (ev && *ev) {
            value = ev;
        } else {
            continue;
        }
        if (auto s = o.set(k, value); !s) {
            std::fprintf(stderr, "mcpwarden run: %s%s\n", s.error().message.c_str(),
                         given ? "" : (" (from " + env + ")").c_str());
            return 2;
        }
    }
    o.command = a.command;
    if (o.command.empty()) {
        std::fprintf(stderr,
                     "mcpwarden run: no command given: mcpwarden run [OPTIONS] -- CMD [ARGS...]\n");
        return 2;
    }
    shim::Session session(std::move(o));
    return session.run();
}

const Command run_cmd(10, [](CLI::App& app) {
    auto* sub = app.add_subcommand(
        "run",
        "Run an MCP stdio server under supervision: relay its stdio, journal its calls, "
        "and leave nothing of it behind when the client goes");
    auto& a = run_args();
    auto value = [&](const std::string& key, const std::string& help) {
        a.opts[key] =
            sub->add_option("--" + key, a.values[key], help + " [env " + shim::env_name(key) + "]");
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
    a.opts["journal"]->excludes(a.opts["no-journal"]);
    sub->add_option("command", a.command, "The server command and its arguments, after --")
        ->expected(-1);
    return Bound{sub, run_main};
});

}  // namespace
}  // namespace warden::cli
