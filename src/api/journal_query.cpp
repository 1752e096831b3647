// journal_sessions(), journal_activity(), journal_session_records(), journal_export() and
// journal_reconcile(): reading the journal over src/journal/query.hpp, the public rows.
#include <cerrno>
#include <exception>

#include "api/internal.hpp"
#include "journal/journal.hpp"
#include "journal/prune.hpp"
#include "journal/query.hpp"
#include "mcpwarden/journal_query.hpp"
#include "mcpwarden/settings.hpp"
#include "shim/options.hpp"

namespace warden::api {
namespace {

warden::Result<journal::Filter> query_filter(const JournalFilter& p) {
    journal::Filter f;
    auto since = journal::parse_since(p.since, journal::now_ns());
    if (!since) return since.error();
    f.since_ns = *since;
    f.server = p.server;
    f.tool = p.tool;
    f.outcome = p.outcome;
    f.session = p.session;
    return f;
}

}  // namespace

Result<std::vector<JournalSession>> journal_sessions(const std::string& path,
                                                     const JournalFilter& filter) {
    try {
        auto f = query_filter(filter);
        if (!f) return f.error();
        auto rows = journal::list_sessions(path, *f);
        if (!rows) return rows.error();
        std::vector<JournalSession> out;
        out.reserve(rows->size());
        for (const journal::SessionRow& r : *rows)
            out.push_back({r.session, r.server, r.state, r.end_reason, r.start_seq, r.started_ns,
                           r.writer_pid, r.ended_ns, r.exit_status, r.requests, r.in_flight,
                           r.probed_by});
        return out;
    } catch (const std::exception& e) {
        return internal_error("journal sessions", e);
    }
}

Result<std::vector<JournalRequest>> journal_activity(const std::string& path,
                                                     const JournalFilter& filter) {
    try {
        auto f = query_filter(filter);
        if (!f) return f.error();
        auto rows = journal::list_activity(path, *f);
        if (!rows) return rows.error();
        std::vector<JournalRequest> out;
        out.reserve(rows->size());
        for (const journal::ActivityRow& r : *rows)
            out.push_back({r.session, r.request_id, r.method, r.tool, r.outcome, r.request_seq,
                           r.started_ns, r.resolved_seq, r.duration_ns, r.bytes});
        return out;
    } catch (const std::exception& e) {
        return internal_error("journal activity", e);
    }
}

Result<std::vector<JournalRecord>> journal_session_records(const std::string& path,
                                                           const std::string& session) {
    try {
        auto recs = journal::session_records(path, session);
        if (!recs) return recs.error();
        std::vector<JournalRecord> out;
        out.reserve(recs->size());
        for (journal::Record& r : *recs)
            out.push_back({r.seq, r.ts, std::move(r.kind), std::move(r.session),
                           std::move(r.origin), std::move(r.body)});
        return out;
    } catch (const std::exception& e) {
        return internal_error("journal show", e);
    }
}

Result<ReconcileResult> journal_reconcile(const std::string& path) {
    try {
        auto j = journal::Journal::open({.path = path});
        if (!j) return j.error();
        auto r = journal::reconcile(**j);
        if (!r) return r.error();
        if (auto st = (*j)->close(); !st) return st.error();
        return ReconcileResult{r->orphaned, r->unresolved, r->alive, r->problems};
    } catch (const std::exception& e) {
        return internal_error("journal reconcile", e);
    }
}

Result<PruneResult> journal_prune(const std::string& path, const PruneRequest& p) {
    try {
        journal::PruneOptions o;
        int64_t now = journal::now_ns();
        if (!p.older_than.empty()) {
            auto since = journal::parse_since(p.older_than, now);
            if (!since) return Error{"--older-than: " + since.error().message, EINVAL};
            o.older_than_ns = now - *since;
            if (o.older_than_ns <= 0)
                return Error{"--older-than " + p.older_than + ": not in the past", EINVAL};
        }
        if (!p.max_size.empty()) {
            auto size = shim::parse_size(p.max_size);
            if (!size || *size == 0)
                return Error{
                    "--max-size: cannot parse '" + p.max_size + "' as a size (e.g. 64MiB, 1GiB)",
                    EINVAL};
            o.max_bytes = static_cast<int64_t>(*size);
        }
        o.export_to = p.export_to;
        o.compact = p.compact;
        if (p.export_gap != "" && p.export_gap != "hold" && p.export_gap != "allow")
            return Error{"--export-gap " + p.export_gap + ": expected hold or allow", EINVAL};
        // Not given: config.toml's [export] export-gap (a file with a problem gives nothing,
        // and nothing undelivered goes).
        o.export_gap_allow = (p.export_gap.empty() ? export_settings().value("export-gap")
                                                   : p.export_gap) == "allow";
        auto j = journal::Journal::open({.path = path});
        if (!j) return j.error();
        auto r = journal::prune(**j, o);
        if (!r) return r.error();
        if (auto st = (*j)->close(); !st) return st.error();
        auto said = [](const std::vector<journal::ExportHold>& list) {
            std::vector<std::string> out;
            for (const auto& h : list)
                out.push_back(h.destination + ": " + std::to_string(h.records) +
                              " records after seq " + std::to_string(h.position));
            return out;
        };
        return PruneResult{r->anchor_seq, r->removed,    r->kept,
                           r->exported,   said(r->held), said(r->unexported)};
    } catch (const std::exception& e) {
        return internal_error("journal prune", e);
    }
}

Result<ExportFormat> parse_export_format(const std::string& text) {
    auto f = journal::parse_export_format(text);
    if (!f) return f.error();
    return *f;
}

Result<std::int64_t> journal_export(const std::string& path, std::int64_t since_seq,
                                    ExportFormat format, bool include_content,
                                    const std::function<bool(const std::string&)>& sink) {
    try {
        std::int64_t taken = 0;
        auto st = journal::for_each_record(path, since_seq, [&](const journal::Record& r) {
            if (!sink(journal::export_line(r, format, include_content))) return false;
            ++taken;
            return true;
        });
        if (!st) return st.error();
        return taken;
    } catch (const std::exception& e) {
        return internal_error("journal export", e);
    }
}

}  // namespace warden::api
