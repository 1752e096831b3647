// What the journal says of one trial's session (drill.cpp's run_trial, shim mode): its
// records read back in order, an excerpt of them, and whether the evidence came before the
// signals it explains.
#include "drill/trial_record.hpp"

#include <csignal>
#include <map>
#include <set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "journal/query.hpp"

namespace warden::drill {

namespace {

std::string signal_name(int sig) {
    switch (sig) {
        case SIGTERM:
            return "SIGTERM";
        case SIGKILL:
            return "SIGKILL";
        case SIGCONT:
            return "SIGCONT";
        case SIGINT:
            return "SIGINT";
        case SIGHUP:
            return "SIGHUP";
        default:
            return "signal " + std::to_string(sig);
    }
}

std::string id_text(const nlohmann::json& id) {
    if (id.is_object() && id.contains("n")) return id["n"].dump();
    if (id.is_object() && id.contains("s")) return id["s"].dump();
    if (id.is_object() && id.contains("t")) return id["t"].get<std::string>();
    return id.dump();
}

std::string text_of(const nlohmann::json& v) {
    if (v.is_string()) return v.get<std::string>();
    if (v.is_object() && v.contains("b64")) return "<bytes>";
    return v.dump();
}

// The teardown report of session.end: the server's fate and how the helpers ended.
void read_teardown(const nlohmann::json& td, TrialResult& t) {
    if (!td.is_object() || !td.contains("targets")) return;
    for (const auto& x : td["targets"]) {
        const std::string role = x.value("role", ""), how = x.value("how", "");
        if (role == "namespace-init" || how == "identity changed") continue;
        if (role == "root") {
            t.server_fate = how == "exited after SIGTERM" ? "needed SIGTERM"
                            : how == "killed"             ? "needed SIGKILL"
                            : how == "alive"              ? "survived"
                                                          : "exited on EOF";
        } else if (how == "killed") {
            ++t.helpers_kill;
        } else if (how == "exited after SIGTERM") {
            ++t.helpers_term;
        } else if (how != "alive") {
            ++t.helpers_eof;
        }
    }
}

// session.client_lost: why the client was lost, and which calls were outstanding then.
std::string client_lost_row(const nlohmann::json& d, JournalFindings& f) {
    f.client_lost = true;
    f.cause = d.value("cause", "");
    std::string ids;
    for (const auto& i : d["outstanding"])
        ids += (ids.empty() ? "" : ",") + id_text(i);
    return fmt::format("{}; outstanding: {}", f.cause, ids.empty() ? "none" : ids);
}

// session.end: its reason, and how the teardown it reports ended the tree.
std::string end_row(const nlohmann::json& d, JournalFindings& f, TrialResult& t) {
    f.end_reason = d.value("reason", "");
    read_teardown(d["teardown"], t);
    const auto& td = d["teardown"];
    const auto& c = td.contains("counts") ? td["counts"] : nlohmann::json::object();
    return fmt::format("{}: {} ended on EOF, {} after SIGTERM, {} killed, {} survivors",
                       f.end_reason, c.value("exited_in_eof", 0) + c.value("already_gone", 0),
                       c.value("exited_in_grace", 0), c.value("killed", 0),
                       c.value("survivors", 0));
}

}  // namespace

JournalFindings read_the_record(const std::string& path, TrialResult& t, bool call_outstanding) {
    JournalFindings f;
    auto recs = journal::session_records(path, t.tag);
    if (!recs) {
        f.order_detail = "cannot read the journal: " + recs.error().message;
        return f;
    }
    std::map<int64_t, int64_t> first_signal;  // pid → seq
    std::set<int64_t> snapshotted;
    int64_t first_signal_seq = 0, abandoned_seq = 0, call_seq = 0;
    bool order_ok = true;
    std::string why;
    int shown_snapshots = 0, shown_exits = 0;
    for (const auto& r : *recs) {
        auto body = nlohmann::json::parse(r.body, nullptr, false);
        if (!body.is_object()) continue;
        const auto& d = body["data"];
        std::string row;
        if (r.kind == "session.start") {
            f.session_found = true;
            row = fmt::format("session {} ({})", t.tag.substr(0, 12),
                              text_of(d.value("server_name", nlohmann::json("server"))));
        } else if (r.kind == "activity.request") {
            if (id_text(d["id"]) != t.call_id) continue;
            call_seq = r.seq;
            std::string tool = text_of(d["tool"]);
            row = fmt::format("id {} {}{}", t.call_id, text_of(d["method"]),
                              tool.empty() ? "" : " " + tool);
        } else if (r.kind == "activity.response") {
            if (id_text(d["id"]) != t.call_id) continue;
            row = fmt::format("id {} answered ({})", t.call_id, d.value("outcome", ""));
            f.response_recorded = true;
            if (call_outstanding) f.abandoned = false;
        } else if (r.kind == "session.client_lost") {
            row = client_lost_row(d, f);
        } else if (r.kind == "activity.abandoned") {
            if (id_text(d["id"]) != t.call_id) continue;
            abandoned_seq = r.seq;
            f.abandoned = true;
            row = fmt::format("id {} (request #{}), {}", t.call_id, d.value("request_seq", 0),
                              d.value("cause", ""));
        } else if (r.kind == "process.snapshot") {
            ++f.snapshots;
            snapshotted.insert(d.value("pid", 0));
            if (shown_snapshots++ >= 3) continue;
            row = fmt::format("pid {} {}, {} MB", d.value("pid", 0), text_of(d["comm"]),
                              format_mb(static_cast<double>(d.value("rss_kb", 0)) / 1024.0));
        } else if (r.kind == "process.signal") {
            ++f.signals;
            int64_t pid = d.value("pid", 0);
            if (!first_signal.count(pid)) first_signal[pid] = r.seq;
            if (!first_signal_seq) first_signal_seq = r.seq;
            if (!snapshotted.count(pid) && order_ok) {
                order_ok = false;
                why =
                    fmt::format("signal to pid {} at #{} without a snapshot before it", pid, r.seq);
            }
            if (d.value("signal", 0) == SIGCONT) continue;
            row = fmt::format(
                "{} -> pid {} via {}{}", signal_name(d.value("signal", 0)), pid, d.value("via", ""),
                d.value("errno", 0) ? " (errno " + std::to_string(d.value("errno", 0)) + ")" : "");
        } else if (r.kind == "process.exit") {
            ++f.exits;
            int64_t pid = d.value("pid", 0);
            auto s = first_signal.find(pid);
            if (s == first_signal.end() && !snapshotted.count(pid) && order_ok) {
                order_ok = false;
                why = fmt::format("exit of pid {} at #{} before its snapshot", pid, r.seq);
            }
            if (shown_exits++ >= 4) continue;
            row = fmt::format("pid {} {}", pid, d.value("phase", ""));
        } else if (r.kind == "session.end") {
            row = end_row(d, f, t);
        } else {
            continue;
        }
        f.excerpt.push_back(fmt::format("#{:<5} {:<20} {}", r.seq, r.kind, row));
    }
    if (call_outstanding && !f.abandoned) f.abandoned = false;
    if (!call_outstanding) f.abandoned.reset();
    if (abandoned_seq && first_signal_seq && abandoned_seq > first_signal_seq && order_ok) {
        order_ok = false;
        why = "the abandoned call was recorded after the first signal";
    }
    // A tree that ended by itself on EOF before the teardown began needs no evidence and no
    // signal: nothing to order. Only a signal without evidence is a failure.
    if (f.snapshots == 0 && f.signals > 0 && order_ok) {
        order_ok = false;
        why = "no process.snapshot recorded";
    }
    if (f.snapshots == 0 && f.signals == 0 && order_ok)
        why = "nothing needed a signal: the tree had ended by itself";
    if (!f.session_found) {
        order_ok = false;
        why = "session " + t.tag + " not found in " + path;
    }
    (void)call_seq;
    f.order_ok = order_ok;
    f.order_detail = why;
    return f;
}

}  // namespace warden::drill
