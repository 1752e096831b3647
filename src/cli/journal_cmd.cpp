// `mcpwarden journal sessions|activity|show|reconcile|prune|export`: reading the journal
// (its projections and records), repairing what dead writers left open, and pruning it.
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <ctime>
#include <map>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "journal_path.hpp"
#include "mcpwarden/journal_query.hpp"
#include "table.hpp"

namespace warden::cli {
namespace {

struct JournalArgs {
    std::string path;
    std::string since, server, tool, outcome;
    bool json = false, jsonl = false;
    std::string session;
    std::string format = "ndjson";
    int64_t since_seq = 0;
    bool include_content = false;
    api::PruneRequest prune;
    bool no_compact = false;
};

std::string time_text(int64_t ns) {
    if (ns <= 0) return "-";
    std::time_t t = static_cast<std::time_t>(ns / 1'000'000'000);
    std::tm tm{};
    ::localtime_r(&t, &tm);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

std::string duration_text(std::optional<int64_t> ns) {
    if (!ns) return "-";
    if (*ns < 1'000'000) return std::to_string(*ns / 1000) + "µs";
    if (*ns < 10'000'000'000) return std::to_string(*ns / 1'000'000) + "ms";
    return std::to_string(*ns / 1'000'000'000) + "s";
}

int fail(const char* what, const api::Error& e) {
    std::fprintf(stderr, "mcpwarden journal %s: %s\n", what, e.message.c_str());
    return 2;
}

api::JournalFilter make_filter(const JournalArgs& a) {
    return {a.since, a.server, a.tool, a.outcome, a.session};
}

size_t terminal_width() {
    return ::isatty(1) ? 120 : 0;
}

int run_sessions(const JournalArgs& a) {
    auto rows = api::journal_sessions(a.path, make_filter(a));
    if (!rows) return fail("sessions", rows.error());
    if (a.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : *rows) {
            nlohmann::json j{{"session", r.session},     {"server", r.server},
                             {"state", r.state},         {"started_ns", r.started_ns},
                             {"start_seq", r.start_seq}, {"writer_pid", r.writer_pid},
                             {"requests", r.requests},   {"in_flight", r.in_flight}};
            if (r.ended_ns) j["ended_ns"] = *r.ended_ns;
            if (!r.end_reason.empty()) j["end_reason"] = r.end_reason;
            if (r.exit_status) j["exit_status"] = *r.exit_status;
            if (!r.probed_by.empty()) j["probed_by"] = r.probed_by;
            out.push_back(std::move(j));
        }
        std::printf("%s\n",
                    out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return 0;
    }
    Table t({{"SESSION"},
             {"STARTED"},
             {"SERVER"},
             {"STATE"},
             {"CALLS", Column::Align::Right},
             {"IN-FLIGHT", Column::Align::Right},
             {"ENDED"},
             {"PROBE"},
             {"REASON", Column::Align::Left, true}});
    // PROBE: "by ID" on a session a probe came before, "for ID" on the probe.
    std::map<std::string, std::string> probe_for;
    for (const auto& r : *rows)
        if (!r.probed_by.empty()) probe_for[r.probed_by] = r.session;
    auto probe = [&](const api::JournalSession& r) -> std::string {
        if (!r.probed_by.empty()) return "by " + r.probed_by.substr(0, 8);
        auto it = probe_for.find(r.session);
        return it == probe_for.end() ? "-" : "for " + it->second.substr(0, 8);
    };
    for (const auto& r : *rows)
        t.add_row({r.session, time_text(r.started_ns), r.server, r.state,
                   std::to_string(r.requests), std::to_string(r.in_flight),
                   r.ended_ns ? time_text(*r.ended_ns) : "-", probe(r),
                   r.end_reason.empty() ? "-" : r.end_reason});
    std::fputs(t.render(terminal_width()).c_str(), stdout);
    return 0;
}

int run_activity(const JournalArgs& a) {
    auto rows = api::journal_activity(a.path, make_filter(a));
    if (!rows) return fail("activity", rows.error());
    if (a.json) {
        nlohmann::json out = nlohmann::json::array();
        for (const auto& r : *rows) {
            nlohmann::json j{{"session", r.session},
                             {"request_seq", r.request_seq},
                             {"id", r.request_id},
                             {"method", r.method},
                             {"tool", r.tool},
                             {"outcome", r.outcome},
                             {"started_ns", r.started_ns}};
            if (r.resolved_seq) j["resolved_seq"] = *r.resolved_seq;
            if (r.duration_ns) j["duration_ns"] = *r.duration_ns;
            if (r.bytes) j["bytes"] = *r.bytes;
            out.push_back(std::move(j));
        }
        std::printf("%s\n",
                    out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return 0;
    }
    Table t({{"SEQ", Column::Align::Right},
             {"STARTED"},
             {"SESSION"},
             {"ID"},
             {"METHOD"},
             {"TOOL"},
             {"OUTCOME"},
             {"DURATION", Column::Align::Right}});
    for (const auto& r : *rows)
        t.add_row({std::to_string(r.request_seq), time_text(r.started_ns), r.session, r.request_id,
                   r.method, r.tool.empty() ? "-" : r.tool,
                   r.outcome == "in_flight" ? "in-flight" : r.outcome,
                   duration_text(r.duration_ns)});
    std::fputs(t.render(terminal_width()).c_str(), stdout);
    return 0;
}

int run_show(const JournalArgs& a) {
    auto recs = api::journal_session_records(a.path, a.session);
    if (!recs) return fail("show", recs.error());
    if (recs->empty()) {
        std::fprintf(stderr, "mcpwarden journal show: no records for session %s\n",
                     a.session.c_str());
        return 1;
    }
    if (a.json) {
        // One document, like every other --json: the stored bodies, in seq order.
        nlohmann::json all = nlohmann::json::array();
        for (const auto& r : *recs)
            all.push_back(nlohmann::json::parse(r.body, nullptr, false));
        std::printf("%s\n",
                    all.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
        return 0;
    }
    for (const auto& r : *recs) {
        if (a.jsonl) {
            std::printf("%s\n", r.body.c_str());  // the stored bytes, one record a line
            continue;
        }
        nlohmann::json b = nlohmann::json::parse(r.body, nullptr, false);
        std::string data =
            b.is_object() && b.contains("data")
                ? b["data"].dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
                : r.body;
        std::printf("%8lld  %s  %-22s %s\n", static_cast<long long>(r.seq), time_text(r.ts).c_str(),
                    r.kind.c_str(), data.c_str());
    }
    return 0;
}

int run_prune(JournalArgs a) {
    a.prune.compact = !a.no_compact;
    auto r = api::journal_prune(a.path, a.prune);
    if (!r) return fail("prune", r.error());
    // What an exporter has not delivered, kept or (export-gap allow) removed: on stderr,
    // whatever the form.
    for (const auto& h : r->held)
        std::fprintf(stderr, "mcpwarden: journal prune: kept for exporter %s (not delivered yet)\n",
                     h.c_str());
    for (const auto& h : r->unexported)
        std::fprintf(stderr,
                     "mcpwarden: journal prune: removed undelivered (export-gap allow): %s\n",
                     h.c_str());
    if (a.json) {
        nlohmann::json out{{"anchor_seq", r->anchor_seq},
                           {"removed", r->removed},
                           {"kept", r->kept},
                           {"exported", r->exported},
                           {"held_for_exporters", r->held},
                           {"removed_unexported", r->unexported}};
        std::printf("%s\n", out.dump().c_str());
    } else if (r->anchor_seq == 0) {
        std::printf(
            "nothing to prune: no signed checkpoint lies past what would go (%lld records "
            "kept)\n",
            static_cast<long long>(r->kept));
    } else {
        std::printf(
            "pruned %lld records before seq %lld (a signed checkpoint: audit verify starts "
            "there); %lld kept%s%s\n",
            static_cast<long long>(r->removed), static_cast<long long>(r->anchor_seq),
            static_cast<long long>(r->kept), r->exported.empty() ? "" : "; exported to ",
            r->exported.c_str());
    }
    return 0;
}

int run_reconcile(const JournalArgs& a) {
    auto r = api::journal_reconcile(a.path);
    if (!r) return fail("reconcile", r.error());
    // Intent files not recovered (another user's, torn lines): on stderr, whatever the form.
    for (const auto& p : r->problems)
        std::fprintf(stderr, "mcpwarden: %s\n", p.c_str());
    if (a.json) {
        nlohmann::json out{{"orphaned", r->orphaned},
                           {"unresolved", r->unresolved},
                           {"alive", r->alive},
                           {"problems", r->problems}};
        std::printf("%s\n", out.dump().c_str());
        return 0;
    }
    for (const auto& s : r->orphaned)
        std::printf("session %s: orphaned (its writer is gone)\n", s.c_str());
    std::printf(
        "%zu sessions orphaned, %lld requests unresolved, %lld open sessions still have a live "
        "writer\n",
        r->orphaned.size(), static_cast<long long>(r->unresolved),
        static_cast<long long>(r->alive));
    return 0;
}

int run_export(const JournalArgs& a) {
    auto format = api::parse_export_format(a.format);
    if (!format) return fail("export", format.error());
    auto st = api::journal_export(
        a.path, a.since_seq, *format, a.include_content, [](const std::string& line) {
            return std::fwrite(line.data(), 1, line.size(), stdout) == line.size();
        });
    if (!st) return fail("export", st.error());
    return std::fflush(stdout) == 0 ? 0 : 2;
}

const Command journal_cmd(300, [](CLI::App& app) {
    static JournalArgs a;
    auto* sub = app.add_subcommand(
        "journal", "Read the journal: sessions, tool calls, records; reconcile; export");
    sub->require_subcommand(1);
    auto add_common = [&](CLI::App* c, bool filters) {
        c->add_option("--journal", a.path,
                      "Journal database (default: $MCPWARDEN_JOURNAL or "
                      "$XDG_STATE_HOME/mcpwarden/journal.db)")
            ->check(journal_path_given());
        c->add_flag("--json", a.json, "JSON output");
        if (filters) {
            c->add_option("--since", a.since,
                          "Only what started within this long (30m, 2h, 1d) or after Unix seconds");
            c->add_option("--server", a.server, "Only sessions whose server name contains this");
            c->add_option("--tool", a.tool, "Only this tool");
            c->add_option("--outcome", a.outcome,
                          "Only this outcome: ok, jsonrpc_error, tool_error, in-flight, abandoned, "
                          "unresolved");
            c->add_option("--session", a.session, "Only this session");
        }
    };
    auto* sessions = sub->add_subcommand("sessions", "Sessions, newest last");
    add_common(sessions, true);
    auto* activity = sub->add_subcommand("activity", "Requests and how each ended");
    add_common(activity, true);
    auto* show = sub->add_subcommand("show", "Every record of one session");
    add_common(show, false);
    show->add_option("session", a.session, "Session id")->required();
    show->add_flag("--jsonl", a.jsonl, "One stored record body a line (as hashed)")
        ->excludes("--json");
    auto* rec = sub->add_subcommand("reconcile", "Mark sessions whose writer died as orphaned");
    add_common(rec, false);
    auto* pr = sub->add_subcommand(
        "prune",
        "Remove the oldest records, up to a signed checkpoint (audit verify starts there)");
    add_common(pr, false);
    pr->add_option("--older-than", a.prune.older_than, "Records older than this (90d, 12h, 30m)");
    pr->add_option("--max-size", a.prune.max_size,
                   "Keep the newest records within about this size (64MiB, 1GiB)");
    pr->add_option("--export-to", a.prune.export_to,
                   "Write the removed records to this new file first (NDJSON, with content)");
    pr->add_flag("--no-compact", a.no_compact, "Do not VACUUM afterwards");
    pr->add_option("--export-gap", a.prune.export_gap,
                   "hold (default): keep records an exporter has not delivered; allow: remove "
                   "them too");
    auto* exp = sub->add_subcommand(
        "export", "Records as OTLP-JSON or NDJSON lines (at least once, keyed by seq)");
    exp->add_option("--journal", a.path, "Journal database")->check(journal_path_given());
    exp->add_option("--format", a.format, "otlp-json or ndjson")->capture_default_str();
    exp->add_option("--since-seq", a.since_seq, "Only records after this seq");
    exp->add_flag("--include-content", a.include_content, "Also export argument previews");
    return Bound{sub, [=] {
                     if (sessions->parsed()) return run_sessions(a);
                     if (activity->parsed()) return run_activity(a);
                     if (show->parsed()) return run_show(a);
                     if (rec->parsed()) return run_reconcile(a);
                     if (pr->parsed()) return run_prune(a);
                     if (exp->parsed()) return run_export(a);
                     return 2;
                 }};
});

}  // namespace
}  // namespace warden::cli
