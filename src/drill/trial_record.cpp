// What the journal says of one trial's session (drill.cpp's run_trial, shim mode): its
// records read back in order, an excerpt of them, and whether the evidence came before the
// signals it explains.
#include "drill/trial_record.hpp"

#include <csignal>
#include <map>
#include <optional>
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

// Reads one trial's session records in seq order: each record may give a row of the excerpt,
// and the order the drill proves (a snapshot before the first signal to a process, the
// abandoned call before any signal) is checked as the records come; the first break of it
// is the one reported.
class TrialRecordReader {
  public:
    TrialRecordReader(TrialResult& t, bool call_outstanding)
        : t_(t), call_outstanding_(call_outstanding) {}

    // The excerpt's row for record `r` with data `d`; nullopt for one the excerpt leaves out.
    std::optional<std::string> row(const journal::Record& r, const nlohmann::json& d) {
        if (r.kind == "session.start") {
            f_.session_found = true;
            return fmt::format("session {} ({})", t_.tag.substr(0, 12),
                               text_of(d.value("server_name", nlohmann::json("server"))));
        }
        if (r.kind == "activity.request" || r.kind == "activity.response" ||
            r.kind == "activity.abandoned")
            return call_row(r, d);
        if (r.kind == "session.client_lost") return client_lost_row(d, f_);
        if (r.kind == "process.snapshot") return snapshot_row(d);
        if (r.kind == "process.signal") return signal_row(r, d);
        if (r.kind == "process.exit") return exit_row(r, d);
        if (r.kind == "session.end") return end_row(d, f_, t_);
        return std::nullopt;
    }

    // What the whole record says once read: the abandoned call's verdict, and why the order
    // holds or not.
    JournalFindings conclude(const std::string& path) {
        if (call_outstanding_ && !f_.abandoned) f_.abandoned = false;
        if (!call_outstanding_) f_.abandoned.reset();
        if (abandoned_seq_ && first_signal_seq_ && abandoned_seq_ > first_signal_seq_)
            out_of_order("the abandoned call was recorded after the first signal");
        // A tree that ended by itself on EOF before the teardown began needs no evidence and
        // no signal: nothing to order. Only a signal without evidence is a failure.
        if (f_.snapshots == 0 && f_.signals > 0) out_of_order("no process.snapshot recorded");
        if (f_.snapshots == 0 && f_.signals == 0 && order_ok_)
            why_ = "nothing needed a signal: the tree had ended by itself";
        if (!f_.session_found) {
            order_ok_ = false;
            why_ = "session " + t_.tag + " not found in " + path;
        }
        f_.order_ok = order_ok_;
        f_.order_detail = why_;
        return std::move(f_);
    }

  private:
    void out_of_order(std::string why) {
        if (!order_ok_) return;
        order_ok_ = false;
        why_ = std::move(why);
    }

    // The trial's call: asked, answered, or abandoned (other calls are left out).
    std::optional<std::string> call_row(const journal::Record& r, const nlohmann::json& d) {
        if (id_text(d["id"]) != t_.call_id) return std::nullopt;
        if (r.kind == "activity.request") {
            std::string tool = text_of(d["tool"]);
            return fmt::format("id {} {}{}", t_.call_id, text_of(d["method"]),
                               tool.empty() ? "" : " " + tool);
        }
        if (r.kind == "activity.response") {
            f_.response_recorded = true;
            if (call_outstanding_) f_.abandoned = false;
            return fmt::format("id {} answered ({})", t_.call_id, d.value("outcome", ""));
        }
        abandoned_seq_ = r.seq;
        f_.abandoned = true;
        return fmt::format("id {} (request #{}), {}", t_.call_id, d.value("request_seq", 0),
                           d.value("cause", ""));
    }

    // The first three snapshots are shown; all count as evidence.
    std::optional<std::string> snapshot_row(const nlohmann::json& d) {
        ++f_.snapshots;
        snapshotted_.insert(d.value("pid", 0));
        if (shown_snapshots_++ >= 3) return std::nullopt;
        return fmt::format("pid {} {}, {} MB", d.value("pid", 0), text_of(d["comm"]),
                           format_mb(static_cast<double>(d.value("rss_kb", 0)) / 1024.0));
    }

    // A signal needs its process's snapshot before it; SIGCONT (after a SIGSTOP) is not shown.
    std::optional<std::string> signal_row(const journal::Record& r, const nlohmann::json& d) {
        ++f_.signals;
        const int64_t pid = d.value("pid", 0);
        if (!first_signal_.count(pid)) first_signal_[pid] = r.seq;
        if (!first_signal_seq_) first_signal_seq_ = r.seq;
        if (!snapshotted_.count(pid))
            out_of_order(
                fmt::format("signal to pid {} at #{} without a snapshot before it", pid, r.seq));
        if (d.value("signal", 0) == SIGCONT) return std::nullopt;
        return fmt::format(
            "{} -> pid {} via {}{}", signal_name(d.value("signal", 0)), pid, d.value("via", ""),
            d.value("errno", 0) ? " (errno " + std::to_string(d.value("errno", 0)) + ")" : "");
    }

    // An exit of a process never signalled needs its snapshot before it; four are shown.
    std::optional<std::string> exit_row(const journal::Record& r, const nlohmann::json& d) {
        ++f_.exits;
        const int64_t pid = d.value("pid", 0);
        if (!first_signal_.count(pid) && !snapshotted_.count(pid))
            out_of_order(fmt::format("exit of pid {} at #{} before its snapshot", pid, r.seq));
        if (shown_exits_++ >= 4) return std::nullopt;
        return fmt::format("pid {} {}", pid, d.value("phase", ""));
    }

    TrialResult& t_;
    const bool call_outstanding_;
    JournalFindings f_;
    std::map<int64_t, int64_t> first_signal_;  // pid → seq
    std::set<int64_t> snapshotted_;
    int64_t first_signal_seq_ = 0, abandoned_seq_ = 0;
    bool order_ok_ = true;
    std::string why_;
    int shown_snapshots_ = 0, shown_exits_ = 0;
};

}  // namespace

JournalFindings read_the_record(const std::string& path, TrialResult& t, bool call_outstanding) {
    auto recs = journal::session_records(path, t.tag);
    if (!recs) {
        JournalFindings f;
        f.order_detail = "cannot read the journal: " + recs.error().message;
        return f;
    }
    TrialRecordReader reader(t, call_outstanding);
    std::vector<std::string> excerpt;
    for (const auto& r : *recs) {
        auto body = nlohmann::json::parse(r.body, nullptr, false);
        if (!body.is_object()) continue;
        if (auto row = reader.row(r, body["data"]))
            excerpt.push_back(fmt::format("#{:<5} {:<20} {}", r.seq, r.kind, *row));
    }
    JournalFindings f = reader.conclude(path);
    f.excerpt = std::move(excerpt);
    return f;
}

}  // namespace warden::drill
