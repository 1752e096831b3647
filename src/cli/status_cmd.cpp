// `mcpwarden status [--json] [--journal PATH] [--watch [--interval DUR] [--count N]]`: the
// sessions running now (docs/STATUS.md; the JSON schema is docs/status-json.md).
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "mcpwarden/exporter.hpp"
#include "mcpwarden/session.hpp"
#include "mcpwarden/status.hpp"
#include "table.hpp"

namespace warden::cli {
namespace {

using nlohmann::json;

struct StatusArgs {
    std::string journal, interval = "2s";
    bool json_out = false, watch = false;
    int count = 0;  // --watch: frames to show; 0 until interrupted
};

// "45s", "3m12s", "2h05m", "3d4h": the two largest units, as uptimes read.
std::string uptime_text(double seconds) {
    const auto s = static_cast<long long>(seconds);
    char buf[64];
    if (s < 60)
        std::snprintf(buf, sizeof buf, "%llds", s);
    else if (s < 3600)
        std::snprintf(buf, sizeof buf, "%lldm%02llds", s / 60, s % 60);
    else if (s < 86400)
        std::snprintf(buf, sizeof buf, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else
        std::snprintf(buf, sizeof buf, "%lldd%lldh", s / 86400, s / 3600 % 24);
    return buf;
}

std::string rss_text(uint64_t kb) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(kb) / 1024);
    return buf;
}

std::string base_name(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string layers_text(const std::vector<std::string>& layers) {
    std::string out;
    for (const std::string& l : layers)
        out += (out.empty() ? "" : ",") + l;
    return out.empty() ? "-" : out;
}

// "20:41:03" in local time, for a due time in ns since the epoch.
std::string clock_text(std::int64_t ns) {
    const time_t t = static_cast<time_t>(ns / 1000000000);
    tm local{};
    char buf[16];
    if (!::localtime_r(&t, &local) || std::strftime(buf, sizeof buf, "%H:%M:%S", &local) == 0)
        return "?";
    return buf;
}

// What --restart on-failure is doing while the session has no server: the line under the
// table for a session that is restarting or held.
std::string restart_text(const api::LiveSession& s) {
    const std::string who = s.name + " (" + s.session + ")";
    const std::string after = s.restart_cause.empty() ? "" : " after: " + s.restart_cause;
    const bool due_later = s.restart_due_ns > time(nullptr) * std::int64_t{1000000000};
    if (s.state == api::SessionState::Restarting)
        return "restarting: " + who +
               (due_later ? ": backing off until " + clock_text(s.restart_due_ns) + " (start " +
                                std::to_string(s.restart_starts) + " of " +
                                std::to_string(s.restart_burst) + ")"
                          : ": starting a new server") +
               after + "\n";
    return "held: " + who + ": the start limit (" + std::to_string(s.restart_burst) +
           " starts within " + std::to_string(s.restart_interval_ms) +
           " ms) holds the server back" +
           (due_later ? " until " + clock_text(s.restart_due_ns) + "; the first request after"
                      : "; the next request") +
           " starts it again; to reset the limit now, restart the MCP server in the client (a new "
           "session)" +
           after + "\n";
}

// "sandbox: everything (SESSION): 3 calls refused (socket 2, keyctl 1); which: mcpwarden
// journal show SESSION" (its sandbox.denied records name the first calls)
std::string denied_text(const api::LiveSession& s) {
    std::vector<std::pair<std::int64_t, std::string>> calls;
    for (const auto& [call, n] : s.sandbox_denied_by_call)
        calls.emplace_back(-n, call);
    std::sort(calls.begin(), calls.end());
    std::string parts;
    for (const auto& [n, call] : calls)
        parts += (parts.empty() ? "" : ", ") + call + " " + std::to_string(-n);
    return "sandbox: " + s.name + " (" + s.session + "): " + std::to_string(s.sandbox_denied) +
           (s.sandbox_denied == 1 ? " call" : " calls") + " refused (" + parts +
           "); which: mcpwarden journal show " + s.session + "\n";
}

std::string render_table(const std::vector<api::LiveSession>& sessions) {
    if (sessions.empty()) return "No sessions running.\n";
    Table t({{"STATE"},
             {"NAME"},
             {"CLIENT"},
             {"SERVER", Column::Align::Right},
             {"UPTIME", Column::Align::Right},
             {"CALLS", Column::Align::Right},
             {"IN FLIGHT", Column::Align::Right},
             {"RSS", Column::Align::Right},
             {"PROCS", Column::Align::Right},
             {"LAYERS"},
             {"LAST CALL", Column::Align::Left, true}});
    for (const api::LiveSession& s : sessions) {
        std::string client = s.client.pid > 0 ? std::to_string(s.client.pid) : "?";
        if (!s.client_command.empty()) client += " " + base_name(s.client_command);
        std::string last = s.last_call.empty() ? "-" : s.last_call;
        if (s.last_call_age_seconds) last += " (" + uptime_text(*s.last_call_age_seconds) + " ago)";
        t.add_row({api::state_name(s.state), s.name, client, std::to_string(s.server.pid),
                   uptime_text(s.uptime_seconds), std::to_string(s.calls),
                   std::to_string(s.in_flight), rss_text(s.rss_kb), std::to_string(s.processes),
                   s.shared_tree.empty() ? layers_text(s.layers) : "shared:" + s.shared_tree,
                   last});
    }
    std::string out = t.render(output_width(STDOUT_FILENO));
    for (const api::LiveSession& s : sessions)
        if (!s.limits.empty())
            out += "limits: " + s.name + " (" + s.session + "): " + s.limits + "\n";
    for (const api::LiveSession& s : sessions)
        if (s.state == api::SessionState::Restarting || s.state == api::SessionState::Held)
            out += restart_text(s);
    for (const api::LiveSession& s : sessions)
        if (s.sandbox_denied > 0) out += denied_text(s);
    for (const api::LiveSession& s : sessions)
        if (s.journal_lost > 0)
            out += "journal: " + std::to_string(s.journal_lost) + " records of " + s.name + " (" +
                   s.session + ") not written, counted\n";
    return out;
}

// Counts of records not written that are not on record yet (include/mcpwarden/status.hpp).
std::string pending_losses_text(std::int64_t pending) {
    if (pending == 0) return {};
    return "journal: " + std::to_string(pending) +
           " records not written, their count kept in the journal's lock file until a writer "
           "records it (mcpwarden journal reconcile)\n";
}

json ref_json(const api::ProcessRef& r) {
    return {{"pid", r.pid}, {"starttime", r.starttime}};
}

json status_json(const std::vector<api::LiveSession>& sessions, std::int64_t pending) {
    json list = json::array();
    for (const api::LiveSession& s : sessions) {
        json j{{"session", s.session},
               {"name", s.name},
               {"state", api::state_name(s.state)},
               {"relay", ref_json(s.relay)},
               {"client", ref_json(s.client)},
               {"client_command", s.client_command},
               {"keeper", ref_json(s.keeper)},
               {"server", ref_json(s.server)},
               {"server_argv", s.server_argv},
               {"uptime_seconds", s.uptime_seconds},
               {"calls", s.calls},
               {"in_flight", s.in_flight},
               {"last_call", s.last_call},
               {"last_call_age_seconds", nullptr},
               {"processes", s.processes},
               {"rss_kb", s.rss_kb},
               {"layers", s.layers},
               {"shared_tree",
                s.shared_tree.empty() ? nlohmann::json() : nlohmann::json(s.shared_tree)},
               {"journal_lost", s.journal_lost}};
        if (s.last_call_age_seconds) j["last_call_age_seconds"] = *s.last_call_age_seconds;
        if (!s.limits.empty()) j["limits"] = s.limits;
        if (s.state == api::SessionState::Restarting || s.state == api::SessionState::Held)
            j["restart"] = {{"cause", s.restart_cause},
                            {"due_ns", s.restart_due_ns},
                            {"starts", s.restart_starts},
                            {"burst", s.restart_burst},
                            {"interval_ms", s.restart_interval_ms}};
        if (s.sandbox_denied > 0)
            j["sandbox_denied"] = {{"total", s.sandbox_denied},
                                   {"by_call", s.sandbox_denied_by_call}};
        list.push_back(std::move(j));
    }
    return {{"schema", "mcpwarden.status"},
            {"schema_version", 1},
            {"sessions", list},
            {"journal_lost_pending", pending}};
}

// The exporters following the journal (docs/EXPORT.md): where each stands, how far behind,
// and its last failure.
std::string exporters_text(const std::vector<ExporterStatus>& list) {
    std::string out;
    for (const auto& e : list) {
        out += "exporter " + e.destination + " (" + e.target + "): position " +
               std::to_string(e.position) + " of " + std::to_string(e.head) + ", " +
               std::to_string(e.lag_records) + " behind";
        if (e.lag_records > 0)
            out += ", the oldest for " + uptime_text(static_cast<double>(e.lag_ns) / 1e9);
        if (!e.last_error.empty()) out += "; last error: " + e.last_error;
        out += "\n";
    }
    return out;
}

json exporters_json(const std::vector<ExporterStatus>& list) {
    json out = json::array();
    for (const auto& e : list)
        out.push_back({{"destination", e.destination},
                       {"target", e.target},
                       {"position", e.position},
                       {"head", e.head},
                       {"lag_records", e.lag_records},
                       {"lag_ns", e.lag_ns},
                       {"acked_ns", e.acked_ns},
                       {"last_error", e.last_error},
                       {"last_error_ns", e.last_error_ns}});
    return out;
}

// One frame: the table (or one JSON document) for the sessions now. False on error.
bool show_once(const StatusArgs& a, bool compact) {
    auto sessions = api::live_sessions(a.journal);
    if (!sessions) {
        std::fprintf(stderr, "mcpwarden status: %s\n", sessions.error().message.c_str());
        return false;
    }
    const std::int64_t pending = api::journal_losses_pending(a.journal);
    auto exporters = api::export_status(a.journal);
    std::vector<ExporterStatus> none;
    const auto& ex = exporters ? *exporters : none;
    if (a.json_out) {
        json j = status_json(*sessions, pending);
        j["exporters"] = exporters_json(ex);
        std::puts(j.dump(compact ? -1 : 2).c_str());
    } else {
        std::fputs(
            (render_table(*sessions) + pending_losses_text(pending) + exporters_text(ex)).c_str(),
            stdout);
    }
    return true;
}

// Repeats a frame every interval, --count times (0: until interrupted). On a terminal each
// frame replaces the last (cursor home, clear screen); elsewhere — a pipe, a file — frames
// follow each other (JSON: one document per line), so nothing is lost to escape codes.
int watch_status(const StatusArgs& a) {
    auto every = api::parse_run_duration(a.interval);
    if (!every || every->count() < 100) {
        std::fprintf(stderr,
                     "mcpwarden status: --interval %s: expected a duration of 100ms or more\n",
                     a.interval.c_str());
        return 2;
    }
    const bool tty = ::isatty(STDOUT_FILENO) && !a.json_out;
    for (int frame = 1; a.count == 0 || frame <= a.count; ++frame) {
        if (tty) {
            time_t now = ::time(nullptr);
            char clock[16];
            std::strftime(clock, sizeof clock, "%H:%M:%S", std::localtime(&now));
            std::printf("\x1b[H\x1b[2Jmcpwarden status, every %s, %s (Ctrl-C to stop)\n\n",
                        a.interval.c_str(), clock);
        } else if (frame > 1 && !a.json_out) {
            std::fputs("\n", stdout);
        }
        if (!show_once(a, true)) return 1;
        std::fflush(stdout);
        if (a.count != 0 && frame == a.count) break;
        timespec ts{static_cast<time_t>(every->count() / 1000),
                    static_cast<long>(every->count() % 1000) * 1000000L};
        while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
        }
    }
    return 0;
}

const Command status_cmd(15, [](CLI::App& app) {
    static StatusArgs a;
    auto* sub = app.add_subcommand(
        "status", "The sessions running now: client, server, uptime, calls, memory, containment");
    sub->add_flag("--json", a.json_out, "JSON output (docs/status-json.md)");
    sub->add_option("--journal", a.journal,
                    "Journal database (default: $MCPWARDEN_JOURNAL or "
                    "$XDG_STATE_HOME/mcpwarden/journal.db)");
    sub->add_flag("--watch", a.watch, "Refresh every --interval (in place on a terminal)");
    sub->add_option("--interval", a.interval, "Pause between --watch frames (2s)");
    sub->add_option("--count", a.count, "Stop --watch after this many frames (0: never)")
        ->check(CLI::NonNegativeNumber);
    return Bound{sub, [] {
                     if (a.watch) return watch_status(a);
                     return show_once(a, false) ? 0 : 1;
                 }};
});

}  // namespace
}  // namespace warden::cli
