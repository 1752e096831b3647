// `mcpwarden drill [OPTIONS] -- CMD [ARGS...]`: the crash drill of the incident practice,
// automated (include/mcpwarden/drill.hpp, docs/DRILL.md). Progress on stderr; the report (text,
// --json, or --markdown FILE as well) on stdout. Exit 0 when mcpwarden contained every
// trial, the journal verifies and nothing is left running; 1 otherwise; 2 on usage errors;
// 130 when interrupted.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "command.hpp"
#include "mcpwarden/drill.hpp"
#include "mcpwarden/session.hpp"
#include "table.hpp"
#include "temp_journal.hpp"

namespace warden::cli {
namespace {

struct DrillArgs {
    std::string crash_at = "in-flight";
    std::string tool, args = "{}";
    int trials = 1;
    bool compare_direct = false, json = false;
    std::string markdown, journal;
    std::string eof_grace = "1s", term_grace = "2s", timeout = "30s";
    std::vector<std::string> command;
};

DrillArgs& drill_args() {
    static DrillArgs a;
    return a;
}

int drill_main() {
    auto& a = drill_args();
    api::DrillOptions o;
    auto crash = api::parse_crash_at(a.crash_at);
    if (!crash) {
        std::fprintf(stderr, "mcpwarden drill: %s\n", crash.error().message.c_str());
        return 2;
    }
    o.crash_at = *crash;
    o.tool = a.tool;
    o.args_json = a.args;
    o.trials = a.trials;
    o.compare_direct = a.compare_direct;
    o.command = a.command;
    for (auto [text, flag, out] : {std::tuple{&a.eof_grace, "--eof-grace", &o.eof_grace},
                                   std::tuple{&a.term_grace, "--term-grace", &o.term_grace},
                                   std::tuple{&a.timeout, "--timeout", &o.startup_timeout}}) {
        auto d = api::parse_run_duration(*text);
        if (!d) {
            std::fprintf(stderr, "mcpwarden drill: %s: %s\n", flag, d.error().message.c_str());
            return 2;
        }
        *out = *d;
    }
    if (o.command.empty()) {
        std::fprintf(stderr,
                     "mcpwarden drill: no server command given: mcpwarden drill [OPTIONS] -- CMD "
                     "[ARGS...]\n");
        return 2;
    }
    if (!o.tool.empty() || a.args != "{}") {
        if (o.tool.empty()) {
            std::fprintf(stderr, "mcpwarden drill: --args needs --tool NAME\n");
            return 2;
        }
    }
    std::optional<TempJournal> temp;
    if (a.journal.empty()) temp.emplace("drill");
    o.journal = temp ? temp->path() : a.journal;
    if (o.journal.empty()) {
        std::fprintf(stderr, "mcpwarden drill: cannot create a temporary journal directory\n");
        return 2;
    }
    if (a.journal.empty())
        std::fprintf(stderr,
                     "mcpwarden drill: temporary journal %s (removed afterwards unless the drill "
                     "fails; --journal PATH keeps one)\n",
                     o.journal.c_str());
    o.progress = [](const std::string& line) { std::fprintf(stderr, "%s\n", line.c_str()); };
    o.handle_interrupts = true;
    o.color = use_color();

    auto r = api::run_drill(o);
    if (!r) {
        std::fprintf(stderr, "mcpwarden drill: %s\n", r.error().message.c_str());
        return 2;
    }
    std::string out = a.json ? r->json + "\n" : r->text;
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (!a.markdown.empty()) {
        std::ofstream f(a.markdown);
        f << r->markdown;
        if (!f) {
            std::fprintf(stderr, "mcpwarden drill: cannot write %s\n", a.markdown.c_str());
            return 2;
        }
    }
    if (temp && r->exit_code == 1) {
        temp->keep();
        std::fprintf(stderr, "mcpwarden drill: the drill failed: temporary journal kept: %s\n",
                     o.journal.c_str());
    } else if (temp) {
        std::fprintf(stderr, "mcpwarden drill: temporary journal removed\n");
    }
    return r->exit_code;
}

const Command drill_cmd(800, [](CLI::App& app) {
    auto& a = drill_args();
    auto* sub = app.add_subcommand(
        "drill",
        "Crash drill: start a server through mcpwarden, SIGKILL its client at a chosen point, "
        "and report what lingered, when its ports were free, and what the journal recorded");
    sub->add_option("--crash-at", a.crash_at,
                    "before-init|idle|in-flight|mid-response: where the client dies (default "
                    "in-flight)");
    sub->add_option("--tool", a.tool,
                    "Tool to call at the crash point (default: only tools/list is called; a "
                    "drill never fires a tool you did not name)");
    sub->add_option("--args", a.args, "Arguments of --tool, a JSON object (default {})");
    sub->add_option("--trials", a.trials, "Trials per mode (default 1)")->check(CLI::Range(1, 100));
    sub->add_flag("--compare-direct", a.compare_direct,
                  "Also run each trial without mcpwarden (the client spawns the server itself) "
                  "and show what would have leaked; cleaned up by identity afterwards");
    auto* json_flag = sub->add_flag("--json", a.json, "JSON report on stdout");
    auto* md = sub->add_option("--markdown", a.markdown, "Also write the report as Markdown here");
    json_flag->excludes(md);
    sub->add_option("--journal", a.journal,
                    "Journal of the supervised trials (default: a new temporary one)");
    sub->add_option("--eof-grace", a.eof_grace, "Passed to `run` (default 1s)");
    sub->add_option("--term-grace", a.term_grace, "Passed to `run` (default 2s)");
    sub->add_option("--timeout", a.timeout,
                    "How long the server may take to reach the crash point (default 30s)");
    sub->add_option("command", a.command, "The server command and its arguments, after --")
        ->expected(-1);
    return Bound{sub, drill_main};
});

}  // namespace
}  // namespace warden::cli
