// The incident record (`inspect`): what the scan and the journal know of one process, the
// revocation of a session's authority, and the process snapshot recorded before a signal.
#include <signal.h>

#include <set>

#include <fmt/format.h>

#include "inventory/argv.hpp"
#include "inventory/inventory_impl.hpp"
#include "journal/redact.hpp"

namespace warden::inventory {

namespace {

std::string fmt_time(int64_t ns) {
    if (ns <= 0) return "unknown";
    time_t secs = static_cast<time_t>(ns / 1000000000);
    tm utc{};
    ::gmtime_r(&secs, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
    return fmt::format("{}.{:03}Z", buf, (ns / 1000000) % 1000);
}

}  // namespace

journal::Event revoke_event(std::string session, ProcessId target, std::string_view scope,
                            std::string_view operator_name, std::string_view reason) {
    journal::Json d{{"pid", static_cast<int64_t>(target.pid)},
                    {"starttime", target.starttime},
                    {"scope", std::string(scope)},
                    {"operator", std::string(operator_name)},
                    {"reason", SensitiveText(std::string(reason))}};
    return journal::Event{kRevokeKind, std::move(session), 0, std::move(d)};
}

namespace {

std::string signal_name(int sig) {
    const char* n = sigabbrev_np(sig);
    return n ? std::string("SIG") + n : std::to_string(sig);
}

// Reads what the journal holds about the target (its session's records, or every record
// naming its identity when it has no session) into the record.
void fill_from_journal(const std::string& path, IncidentRecord& r) {
    auto names_target = [&](const nlohmann::json& d) {
        return d.is_object() && d.value("pid", int64_t{0}) > 0 &&
               d.value("starttime", uint64_t{0}) != 0;
    };
    std::set<std::pair<int64_t, uint64_t>> tree_ids;
    tree_ids.insert({r.target.pid, r.target.starttime});
    tree_ids.insert({r.server.pid, r.server.starttime});
    struct Req {
        int64_t ts = 0;
        std::string method, tool, outcome = "no answer";
        bool answered = false;
    };
    std::map<int64_t, Req> reqs;  // by request seq
    int64_t last_ok = 0;
    std::string last_signal, last_exit;
    auto visit = [&](const journal::Record& rec) {
        auto body = nlohmann::json::parse(rec.body, nullptr, false);
        if (body.is_discarded()) return;
        const auto& d = body["data"];
        if (rec.kind == "activity.request") {
            Req q;
            q.ts = rec.ts;
            q.method = d.value("method", "");
            q.tool = d.value("tool", "");
            reqs[rec.seq] = q;
        } else if (rec.kind == "activity.response") {
            auto it = reqs.find(d.value("request_seq", int64_t{0}));
            std::string outcome = d.value("outcome", "");
            if (it != reqs.end()) {
                it->second.answered = true;
                it->second.outcome = outcome;
            }
            if (outcome == "ok") last_ok = std::max(last_ok, rec.ts);
        } else if (rec.kind == "activity.abandoned" || rec.kind == "activity.unresolved") {
            auto it = reqs.find(d.value("request_seq", int64_t{0}));
            if (it != reqs.end() && !it->second.answered)
                it->second.outcome = rec.kind == "activity.abandoned" ? "abandoned (no answer)"
                                                                      : "unresolved (no answer)";
        } else if (rec.kind == kRevokeKind) {
            if (!names_target(d) || rec.session == r.session ||
                tree_ids.count({d.value("pid", int64_t{0}), d.value("starttime", uint64_t{0})})) {
                r.revoked_ns = rec.ts;
                r.revoked_by = d.value("operator", "");
                r.authorization = fmt::format("revoked at {} by {} (scope: {})", fmt_time(rec.ts),
                                              r.revoked_by.empty() ? "unknown" : r.revoked_by,
                                              d.value("scope", "session"));
            }
        } else if (rec.kind == "process.signal" &&
                   tree_ids.count(
                       {d.value("pid", int64_t{0}), d.value("starttime", uint64_t{0})})) {
            last_signal = fmt::format(
                "{} to pid {} via {} at {}{}", signal_name(d.value("signal", 0)),
                d.value("pid", int64_t{0}), d.value("via", ""), fmt_time(rec.ts),
                d.value("errno", 0) ? " (failed: " + d.value("error", "") + ")" : std::string());
        } else if (rec.kind == "process.exit" &&
                   tree_ids.count(
                       {d.value("pid", int64_t{0}), d.value("starttime", uint64_t{0})})) {
            if (d.contains("term_signal"))
                last_exit = "killed by " + signal_name(d["term_signal"].get<int>());
            else if (d.contains("exit_status"))
                last_exit = "exited " + std::to_string(d["exit_status"].get<int>());
            last_exit += " (" + d.value("phase", "") + ")";
        }
    };
    if (!r.session.empty()) {
        auto recs = journal::session_records(path, r.session);
        if (recs)
            for (const auto& rec : *recs)
                visit(rec);
    } else {
        (void)journal::for_each_record(path, 0, [&](const journal::Record& rec) {
            if (rec.kind == kRevokeKind || starts_with(rec.kind, "process.")) visit(rec);
            return true;
        });
    }
    if (!reqs.empty()) {
        const Req& last = reqs.rbegin()->second;
        r.last_attempt_ns = last.ts;
        r.action_operation = last.method;
        r.action_target = last.tool;
        r.action_result = last.outcome;
        for (const auto& [seq, q] : reqs)
            if (!q.answered)
                r.follow_up.push_back(fmt::format(
                    "request seq {} ({} {}) sent at {} got no answer: check whether it acted", seq,
                    q.method, q.tool, fmt_time(q.ts)));
    }
    if (last_ok) r.last_success_ns = last_ok;
    if (!last_signal.empty() || !last_exit.empty())
        r.termination =
            last_signal + (last_signal.empty() || last_exit.empty() ? "" : " -> ") + last_exit;
}

}  // namespace

Result<IncidentRecord> incident_record(const Inventory& inv, pid_t pid) {
    const Process* p = inv.table().find(pid);
    if (!p) return Error::msg(fmt::format("no process {} in the scan", pid));
    IncidentRecord r;
    r.observed_at_ns = inv.observed_at_ns();
    r.target = p->id;
    r.target_command = p->display_command();
    r.ppid = p->ppid;
    r.pgid = p->pgid;
    r.sid = p->sid;
    if (const Process* parent = inv.table().find(p->ppid))
        r.parent_command = parent->display_command();
    r.caps = inv.capabilities(*p);
    r.server = p->id;
    r.server_command = r.target_command;
    if (p->session_marker) r.session = escape_bytes(*p->session_marker);
    const ServerTree* t = inv.tree_of(pid);
    if (t) {
        r.server = t->server;
        if (const Process* s = inv.table().find(t->server)) r.server_command = s->display_command();
        r.client = t->client;
        if (!t->session.empty()) r.session = t->session;
        r.state = t->state;
        r.state_reasons = t->state_reasons;
        r.os_orphan = t->os_orphan;
        r.evidence = t->evidence;
    } else {
        r.state_reasons.push_back("not recognised as an MCP server (no evidence matched)");
        auto w = inv.stdin_writers(*p);
        if (!w.empty())
            r.client = ClientRef{w.front()->id, w.front()->display_command(), true,
                                 "holds the write end of its stdin"};
    }
    if (!inv.journal_path().empty()) fill_from_journal(inv.journal_path(), r);
    if (r.state == State::LogicalOrphan)
        r.follow_up.push_back(
            "logical orphan: preserve this record, revoke its authority, then "
            "`mcpwarden reap`");
    if (r.os_orphan) r.follow_up.push_back("os-orphan: " + r.os_orphan->reason + " (a clue only)");
    if (!r.caps.credential_env.empty())
        r.follow_up.push_back(fmt::format("holds {} credential-like variable(s): rotate if exposed",
                                          r.caps.credential_env.size()));
    if (!r.caps.connections.empty())
        r.follow_up.push_back(
            fmt::format("{} established connection(s): check for remote jobs that outlive it",
                        r.caps.connections.size()));
    if (r.follow_up.empty()) r.follow_up.push_back("none");
    return r;
}

nlohmann::json incident_json(const IncidentRecord& r) {
    auto opt_time = [](const std::optional<int64_t>& t) {
        return t ? nlohmann::json(fmt_time(*t)) : nlohmann::json(nullptr);
    };
    return {
        {"schema", "mcpwarden.inspect"},
        {"schema_version", 1},
        {"observed_at", fmt_time(r.observed_at_ns)},
        {"boot_id", boot_id()},
        {"target",
         {{"pid", r.target.pid}, {"starttime", r.target.starttime}, {"command", r.target_command}}},
        {"client", r.client ? client_json(*r.client) : nlohmann::json(nullptr)},
        {"server",
         {{"pid", r.server.pid}, {"starttime", r.server.starttime}, {"command", r.server_command}}},
        {"parent", {{"pid", r.ppid}, {"command", r.parent_command}}},
        {"pgid", r.pgid},
        {"sid", r.sid},
        {"session", r.session.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.session)},
        {"state", state_name(r.state)},
        {"state_reasons", r.state_reasons},
        {"os_orphan", r.os_orphan ? nlohmann::json(r.os_orphan->reason) : nlohmann::json(nullptr)},
        {"evidence", evidence_json(r.evidence)},
        {"authorization", r.authorization},
        {"revoked_at", opt_time(r.revoked_ns)},
        {"revoked_by",
         r.revoked_by.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.revoked_by)},
        {"last_success_at", opt_time(r.last_success_ns)},
        {"last_attempt_at", opt_time(r.last_attempt_ns)},
        {"action_target", r.action_target},
        {"action_operation", r.action_operation},
        {"action_result", r.action_result},
        {"termination", r.termination},
        {"capabilities", capabilities_json(r.caps)},
        {"follow_up", r.follow_up},
    };
}

std::string incident_text(const IncidentRecord& r) {
    auto or_unknown = [](const std::string& s) { return s.empty() ? std::string("unknown") : s; };
    auto opt_time = [](const std::optional<int64_t>& t) {
        return t ? fmt_time(*t) : std::string("none recorded");
    };
    std::string o;
    auto line = [&](std::string_view k, const std::string& v) {
        o += fmt::format("{:<22}{}\n", std::string(k) + ":", v);
    };
    line("observed at", fmt_time(r.observed_at_ns));
    line("client", r.client ? fmt::format("pid {} {}{} — {}", r.client->id.pid, r.client->command,
                                          r.client->alive ? "" : " (gone)", r.client->how)
                            : std::string("none holds its stdin"));
    line("server", fmt::format("pid {} {}", r.server.pid, r.server_command));
    if (r.target.pid != r.server.pid)
        line("inspected", fmt::format("pid {} {}", r.target.pid, r.target_command));
    line("parent", fmt::format("pid {} {}", r.ppid, or_unknown(r.parent_command)));
    line("process group", fmt::format("{} (session {})", r.pgid, r.sid));
    line("session id", r.session.empty() ? "none" : r.session);
    std::string st = state_name(r.state);
    if (r.os_orphan) st += " + os-orphan";
    line("state", st);
    for (const auto& why : r.state_reasons)
        line("  because", why);
    if (r.os_orphan) line("  os-orphan", r.os_orphan->reason);
    for (const auto& e : r.evidence)
        line(fmt::format("  evidence ({})", evidence_name(e.kind)),
             fmt::format("pid {}: {}", e.pid, e.detail));
    line("authorization", r.authorization);
    line("last success", opt_time(r.last_success_ns));
    line("last attempt", opt_time(r.last_attempt_ns));
    line("action",
         r.action_operation.empty()
             ? std::string("none recorded")
             : r.action_operation + (r.action_target.empty() ? "" : " " + r.action_target));
    line("result", or_unknown(r.action_result));
    line("revoked", r.revoked_ns ? fmt_time(*r.revoked_ns) + " by " + or_unknown(r.revoked_by)
                                 : std::string("not revoked"));
    line("termination", r.termination.empty() ? "not signalled" : r.termination);
    std::string ports;
    for (const auto& l : r.caps.listening)
        ports += fmt::format("{}{}:{} ", l.udp ? "udp " : "", l.addr, l.port);
    line("listening", ports.empty() ? "none" : ports);
    for (const auto& c : r.caps.connections)
        line("connection", fmt::format("{} {}:{} -> {}:{} {}", c.proto, c.local_addr, c.local_port,
                                       c.remote_addr, c.remote_port, c.state));
    for (const auto& u : r.caps.unix_sockets)
        if (!u.path.empty() || u.peer_pid)
            line("unix socket",
                 fmt::format(
                     "fd {} {}{}", u.fd, u.path.empty() ? "(unnamed)" : u.path,
                     u.peer_pid ? fmt::format(" peer pid {} {}", u.peer_pid, u.peer_command) : ""));
    std::string creds;
    for (const auto& n : r.caps.credential_env)
        creds += n + " ";
    line("credential env", creds.empty() ? "none" : creds + "(names only)");
    line("cwd", or_unknown(escape_bytes(r.caps.cwd)));
    line("exe", or_unknown(escape_bytes(r.caps.exe)));
    line("rss", fmt::format("{} KiB", r.caps.rss_kb));
    line("elapsed", fmt::format("{:.0f} s", r.caps.elapsed_seconds));
    std::string kids;
    for (const auto& k : r.caps.children)
        kids += std::to_string(k.pid) + " ";
    line("children", kids.empty() ? "none" : kids);
    for (const auto& f : r.follow_up)
        line("follow-up", f);
    return o;
}

Result<journal::Event> snapshot_event(const Inventory& inv, pid_t pid, std::string_view reason) {
    const Process* p = inv.table().find(pid);
    if (!p) return Error::msg(fmt::format("no process {} in the scan", pid));
    std::vector<ProcessId> kids;
    for (const Process* c : inv.table().children(pid))
        kids.push_back(c->id);
    std::string session;
    if (const ServerTree* t = inv.tree_of(pid)) session = t->session;
    if (session.empty() && p->session_marker) session = *p->session_marker;
    // The scan reads exe and cwd only where needed; the snapshot records them.
    Process snap = *p;
    if (snap.exe.empty() && snap.cwd.empty()) (void)read_details(snap, kExe | kCwd);
    return journal::process_snapshot(session, snap, reason, kids);
}

}  // namespace warden::inventory
