// live_sessions(): the sessions running now, for `mcpwarden status`.
//
// The journal says which sessions are open (a session.start, no session.end) and who wrote
// them; an open session whose relay is gone is history (reconcile marks it orphaned), not a
// session running now, so each is checked against its writer's identity (pid, starttime,
// boot) first. What the journal cannot know — how big the tree is now — comes from /proc,
// starting at the server's identity and following /proc/PID/task/TID/children.
#include <sys/stat.h>

#include <exception>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "api/internal.hpp"
#include "contain/limits.hpp"
#include "journal/journal.hpp"
#include "journal/losses.hpp"
#include "journal/query.hpp"
#include "mcpwarden/status.hpp"
#include "proc/children.hpp"
#include "proc/process.hpp"

namespace warden::api {
namespace {

using nlohmann::json;

ProcessRef ref_of(const json& j) {
    if (!j.is_object()) return {};
    return ProcessRef{static_cast<pid_t>(j.value("pid", int64_t{0})),
                      j.value("starttime", uint64_t{0})};
}

std::string text_of(const json& j) {
    return j.is_string() ? j.get<std::string>() : std::string();
}

// The server and its descendants alive now: how many, and their resident memory. Bounded:
// a tree of more than 4096 processes is counted that far.
void measure_tree(LiveSession& s) {
    if (s.server.pid <= 0) return;
    auto root = read_process(s.server.pid, kStat);
    if (!root || root->id.starttime != s.server.starttime || root->zombie()) return;
    std::vector<pid_t> todo{s.server.pid};
    std::set<pid_t> seen;
    while (!todo.empty() && seen.size() < 4096) {
        pid_t pid = todo.back();
        todo.pop_back();
        if (!seen.insert(pid).second) continue;
        auto p = read_process(pid, kStat);
        if (!p || p->zombie()) continue;
        ++s.processes;
        s.rss_kb += p->rss_kb;
        for (pid_t c : read_children(pid))
            todo.push_back(c);
    }
}

std::string client_command(const ProcessRef& client, const json& argv) {
    if (client.pid > 0)
        if (auto p = read_process(client.pid, kExe);
            p && p->id.starttime == client.starttime && !p->exe.empty())
            return p->exe;
    return argv.is_array() && !argv.empty() ? text_of(argv[0]) : std::string();
}

// The session as its records tell it, or nullopt when its relay no longer runs.
std::optional<LiveSession> live_session(const std::string& path, const journal::SessionRow& row,
                                        int64_t now_ns) {
    auto records = journal::session_records(path, row.session);
    if (!records) return std::nullopt;
    LiveSession s;
    s.session = row.session;
    s.name = row.server;
    s.uptime_seconds = static_cast<double>(now_ns - row.started_ns) / 1e9;
    s.calls = row.requests;
    s.in_flight = row.in_flight;
    // --idle-stop: the last session.hibernate has no session.wake after it; --lazy: no
    // session.wake yet (the server has not been started). --restart on-failure: a
    // session.crash that restarts has no session.restart with a new server after it yet;
    // session.backoff says when it is due, a refused session.restart that the limit holds it.
    bool asleep = false;
    std::optional<SessionState> between;  // restarting or held
    for (const journal::Record& r : *records) {
        json body = json::parse(r.body, nullptr, false);
        if (!body.is_object() || !body["data"].is_object()) continue;
        json& d = body["data"];
        if (r.kind == "session.start") {
            const json& w = d["writer"];
            if (!w.is_object()) return std::nullopt;
            journal::WriterIdentity writer{
                {static_cast<pid_t>(w.value("pid", int64_t{0})), w.value("starttime", uint64_t{0})},
                w.value("boot_id", std::string())};
            if (!journal::writer_alive(writer)) return std::nullopt;
            s.relay = {writer.process.pid, writer.process.starttime};
            s.client = ref_of(d["client"]);
            s.client_command = client_command(s.client, d["client_argv"]);
            s.keeper = ref_of(d["keeper"]);
            s.server = ref_of(d["server"]);
            if (d["server_argv"].is_array())
                for (const json& a : d["server_argv"])
                    s.server_argv.push_back(text_of(a));
            if (d["layers"].is_array())
                for (const json& l : d["layers"])
                    s.layers.push_back(text_of(l));
            s.shared_tree = d.value("shared_tree", std::string());
            asleep = d.contains("lazy");
            if (d["restart"].is_object()) {
                s.restart_burst = d["restart"].value("burst", int64_t{0});
                s.restart_interval_ms = d["restart"].value("interval_ms", int64_t{0});
            }
            if (d.contains("limits"))
                s.limits = SessionLimits::find(row.session, s.relay.pid).summary();
        } else if (r.kind == "session.hibernate") {
            asleep = true;
        } else if (r.kind == "session.wake" && !d.contains("error")) {
            asleep = false;
            s.server = ref_of(d["server"]);  // the woken server, not the first
        } else if (r.kind == "session.crash" && text_of(d["restart"]) == "on-failure") {
            between = SessionState::Restarting;
            s.restart_cause = text_of(d["summary"]);
            s.restart_due_ns = 0;
        } else if (r.kind == "session.backoff" && between) {
            s.restart_starts = d.value("starts", int64_t{0});
            s.restart_due_ns = r.ts + d.value("backoff_ms", int64_t{0}) * 1000000;
        } else if (r.kind == "session.restart" && d.contains("refused")) {
            between = SessionState::Held;
            s.restart_starts = d.value("starts", int64_t{0});
            s.restart_due_ns = r.ts + d.value("retry_in_ms", int64_t{0}) * 1000000;
        } else if (r.kind == "session.restart") {
            between.reset();
            s.server = ref_of(d["server"]);  // the new server
            s.restart_cause.clear();
            s.restart_due_ns = 0;
        } else if (r.kind == "sandbox.denied") {
            // Each carries the whole count so far: the newest is the session's.
            s.sandbox_denied = d.value("total", int64_t{0});
            s.sandbox_denied_by_call.clear();
            if (d["by_call"].is_object())
                for (const auto& [call, n] : d["by_call"].items())
                    if (n.is_number_integer()) s.sandbox_denied_by_call[call] = n.get<int64_t>();
        } else if (r.kind == "journal.degraded") {
            s.journal_lost += d.value("lost_events", int64_t{0});
        } else if (r.kind == "activity.request") {
            std::string method = text_of(d["method"]), tool = text_of(d["tool"]);
            s.last_call = tool.empty() ? method : method + " " + tool;
            s.last_call_age_seconds = static_cast<double>(now_ns - r.ts) / 1e9;
        }
    }
    if (s.relay.pid == 0) return std::nullopt;  // no session.start: nothing to go by
    if (asleep || between) {
        s.state = between ? *between : SessionState::Sleeping;
        s.server = {};  // torn down (or dead): nothing runs for it until the next start
    }
    measure_tree(s);
    return s;
}

}  // namespace

Result<std::vector<LiveSession>> live_sessions(const std::string& journal_path) {
    try {
        auto path = journal::resolve_path(journal_path);
        if (!path) return path.error();
        struct stat st {};
        if (::stat(path->c_str(), &st) != 0) return std::vector<LiveSession>{};
        auto rows = journal::list_sessions(*path, {});
        if (!rows) return rows.error();
        const int64_t now = journal::now_ns();
        const auto pending = journal::pending_losses(journal::Paths::for_db(*path).lock);
        std::vector<LiveSession> out;
        for (const journal::SessionRow& row : *rows) {
            const bool ending = row.state == "client_lost";
            if ((row.state != "running" && !ending) ||
                row.writer_boot_id != journal::current_boot_id())
                continue;
            if (auto s = live_session(*path, row, now)) {
                if (ending) s->state = SessionState::Ending;
                if (auto p = pending.find(s->session); p != pending.end())
                    s->journal_lost += p->second;
                out.push_back(std::move(*s));
            }
        }
        return out;
    } catch (const std::exception& e) {
        return internal_error("status", e);
    }
}

std::int64_t journal_losses_pending(const std::string& journal_path) {
    auto path = journal::resolve_path(journal_path);
    if (!path) return 0;
    return journal::pending_losses_total(journal::Paths::for_db(*path).lock);
}

}  // namespace warden::api
