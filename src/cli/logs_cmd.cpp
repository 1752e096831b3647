// `mcpwarden logs [NAME|SESSION] [-f] [--since DUR] [--json] [--journal PATH]`: what the
// servers wrote on stderr, kept per server identity beside the journal (docs/LOGS.md).
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "journal_path.hpp"
#include "mcpwarden/logs.hpp"

namespace warden::cli {
namespace {

struct LogsArgs {
    api::LogQuery q;
    bool follow = false, json_out = false;
};

volatile sig_atomic_t g_stop = 0;
void on_stop(int) {
    g_stop = 1;
}

void print_lines(const std::vector<api::LogEntry>& lines, bool json_out) {
    for (const api::LogEntry& l : lines) {
        if (json_out) {
            nlohmann::json j{{"time", l.time},       {"ts_ns", l.ts_ns}, {"server", l.server},
                             {"session", l.session}, {"pid", l.pid},     {"line", l.text}};
            std::fputs((j.dump() + "\n").c_str(), stdout);
        } else {
            std::fputs((l.time + " " + l.server + " " + l.session + " " + std::to_string(l.pid) +
                        " " + l.text + "\n")
                           .c_str(),
                       stdout);
        }
    }
    std::fflush(stdout);
}

int run_logs(const LogsArgs& a) {
    auto f = api::LogFollower::open(a.q);
    if (!f) {
        std::fprintf(stderr, "mcpwarden %s\n", f.error().message.c_str());
        return 1;
    }
    print_lines((*f)->poll(), a.json_out);
    if (!a.follow) return 0;
    struct sigaction sa {};
    sa.sa_handler = on_stop;
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGPIPE})
        ::sigaction(sig, &sa, nullptr);
    while (!g_stop) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        print_lines((*f)->poll(), a.json_out);
        if (std::ferror(stdout)) return 1;  // the reader went (a closed pipe)
    }
    return 0;
}

const Command logs_cmd(305, [](CLI::App& app) {
    static LogsArgs a;
    auto* sub = app.add_subcommand(
        "logs", "What the servers wrote on stderr, kept per server (rotated, redacted)");
    sub->add_option(
        "target", a.q.target,
        "A server's name, or a session id (or its first characters); all when left out");
    sub->add_flag("-f,--follow", a.follow,
                  "Keep printing lines as they are written, across restarts and hibernation");
    sub->add_option("--since", a.q.since, "Only lines this recent: 10m, 2h, 3d");
    sub->add_flag("--json", a.json_out,
                  "One JSON object a line: time, ts_ns, server, session, pid, line");
    sub->add_option("--journal", a.q.journal,
                    "Journal database whose directory holds the logs (default: "
                    "$MCPWARDEN_JOURNAL or $XDG_STATE_HOME/mcpwarden/journal.db)")
        ->check(journal_path_given());
    return Bound{sub, [] { return run_logs(a); }};
});

}  // namespace
}  // namespace warden::cli
