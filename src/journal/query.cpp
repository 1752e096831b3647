#include "journal/query.hpp"

#include <sqlite3.h>

#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "journal/crypto.hpp"
#include "journal/store.hpp"

namespace warden::journal {

namespace {

Result<Db> open_read(const std::string& flag_path) {
    auto path = resolve_path(flag_path);
    if (!path) return path.error();
    Paths p = Paths::for_db(*path);
    if (auto st = check_location(p, /*create=*/false); !st) return st.error();
    return Db::open(p.db, Db::Mode::read, 10000);
}

std::optional<int64_t> opt(const Stmt& s, int col) {
    if (s.is_null(col)) return std::nullopt;
    return s.int64(col);
}

std::string outcome_sql(const std::string& o) {
    if (o == "in-flight" || o == "in_flight") return "in_flight";
    return o;
}

// The one loop every query here is: open the journal at `path` for reading, prepare `sql`,
// bind its parameters (`bind`), and hand each result row to `row` until it returns false.
// `what` names the query in an error ("list sessions: …").
template <class Bind, class Row>
Status each_row(const std::string& path, const char* sql, const char* what, Bind bind, Row row) {
    auto db = open_read(path);
    if (!db) return db.error();
    auto s = db->prepare(sql);
    if (!s) return s.error();
    bind(*s);
    int rc;
    while ((rc = s->step()) == SQLITE_ROW)
        if (!row(*s)) return {};
    if (rc != SQLITE_DONE) return db->error(what, rc);
    return {};
}

// The filter's parameters, as list_sessions and list_activity bind them (?1 … ?5).
void bind_filter(Stmt& s, const Filter& f) {
    s.bind(1, f.since_ns)
        .bind(2, f.server)
        .bind(3, f.session)
        .bind(4, f.tool)
        .bind(5, outcome_sql(f.outcome));
}

}  // namespace

// A client that speaks both protocol eras probes a stdio server with `server/discover` first,
// and the official SDK does it on a short-lived copy of the server command: a session of its
// own, which ends before the real one starts. The two are tied by the client (the same
// process, our parent, for both) and by time.
Result<std::optional<ProbeSession>> probe_session_for(const std::string& path,
                                                      const std::string& session,
                                                      const ProcessId& client, int64_t started_ns,
                                                      std::chrono::milliseconds bound) {
    std::optional<ProbeSession> out;
    if (client.pid <= 0) return out;
    const std::string who = "\"client\":" + identity_json(client).dump();
    auto st = each_row(
        path,
        "SELECT s.session, s.ended_ns FROM sessions s WHERE s.state = 'ended' AND s.ended_ns >= ?1 "
        "AND s.ended_ns <= ?2 AND s.session != ?3 "
        "AND EXISTS (SELECT 1 FROM records r WHERE r.session = s.session AND r.seq = s.start_seq "
        "AND instr(r.body, ?4) > 0) "
        "AND EXISTS (SELECT 1 FROM records r WHERE r.session = s.session "
        "AND r.kind = 'session.protocol' AND instr(r.body, '\"method\":\"server/discover\"') > 0) "
        "AND NOT EXISTS (SELECT 1 FROM activity a WHERE a.session = s.session "
        "AND a.method != 'server/discover') "
        "ORDER BY s.ended_ns DESC LIMIT 1",
        "find the probe session",
        [&](Stmt& s) {
            s.bind(1, started_ns - std::chrono::nanoseconds(bound).count())
                .bind(2, started_ns)
                .bind(3, session)
                .bind(4, who);
        },
        [&](const Stmt& s) {
            out = ProbeSession{std::string(s.text(0)), s.int64(1)};
            return false;
        });
    if (!st) return st.error();
    return out;
}

Result<std::vector<SessionRow>> list_sessions(const std::string& path, const Filter& f) {
    std::vector<SessionRow> out;
    auto st = each_row(
        path,
        "SELECT s.session, s.server, s.state, coalesce(s.end_reason, ''), s.writer_boot_id, "
        "s.start_seq, "
        "s.started_ns, s.state_seq, s.writer_pid, s.ended_ns, s.exit_status, "
        "(SELECT count(*) FROM activity a WHERE a.session = s.session), "
        "(SELECT count(*) FROM activity a WHERE a.session = s.session AND a.outcome = "
        "'in_flight'), "
        // Appended right after session.start (shim/journal_sink.cpp): a short range of the
        // session's index.
        "coalesce((SELECT json_extract(CAST(r.body AS TEXT), '$.data.probe_session') FROM records "
        "r "
        "WHERE r.session = s.session AND r.seq > s.start_seq AND r.seq < s.start_seq + 1000 "
        "AND r.kind = 'session.probed_by' LIMIT 1), '') "
        "FROM sessions s WHERE s.started_ns >= ?1 AND instr(s.server, ?2) > 0 AND (?3 = '' OR "
        "s.session = ?3) "
        "AND (?4 = '' OR EXISTS (SELECT 1 FROM activity a WHERE a.session = s.session AND a.tool = "
        "?4)) "
        "AND (?5 = '' OR EXISTS (SELECT 1 FROM activity a WHERE a.session = s.session AND "
        "a.outcome = ?5)) "
        "ORDER BY s.start_seq",
        "list sessions", [&](Stmt& s) { bind_filter(s, f); },
        [&](const Stmt& s) {
            SessionRow r;
            r.session = s.text(0);
            r.server = s.text(1);
            r.state = s.text(2);
            r.end_reason = s.text(3);
            r.writer_boot_id = s.text(4);
            r.start_seq = s.int64(5);
            r.started_ns = s.int64(6);
            r.state_seq = s.int64(7);
            r.writer_pid = s.int64(8);
            r.ended_ns = opt(s, 9);
            r.exit_status = opt(s, 10);
            r.requests = s.int64(11);
            r.in_flight = s.int64(12);
            r.probed_by = s.text(13);
            out.push_back(std::move(r));
            return true;
        });
    if (!st) return st.error();
    return out;
}

Result<std::vector<ActivityRow>> list_activity(const std::string& path, const Filter& f) {
    std::vector<ActivityRow> out;
    auto st = each_row(
        path,
        "SELECT a.session, a.request_id, a.method, a.tool, a.outcome, a.request_seq, a.started_ns, "
        "a.resolved_seq, a.ended_ns, a.duration_ns, a.bytes FROM activity a "
        "LEFT JOIN sessions s ON s.session = a.session "
        "WHERE a.started_ns >= ?1 AND instr(coalesce(s.server, ''), ?2) > 0 AND (?3 = '' OR "
        "a.session = ?3) "
        "AND (?4 = '' OR a.tool = ?4) AND (?5 = '' OR a.outcome = ?5) ORDER BY a.request_seq",
        "list activity", [&](Stmt& s) { bind_filter(s, f); },
        [&](const Stmt& s) {
            ActivityRow r;
            r.session = s.text(0);
            Json id = Json::parse(s.text(1), nullptr, false);
            r.request_id = id.is_discarded() ? std::string(s.text(1)) : rpc_id_display(id);
            r.method = s.text(2);
            r.tool = s.text(3);
            r.outcome = s.text(4);
            r.request_seq = s.int64(5);
            r.started_ns = s.int64(6);
            r.resolved_seq = opt(s, 7);
            r.ended_ns = opt(s, 8);
            r.duration_ns = opt(s, 9);
            r.bytes = opt(s, 10);
            out.push_back(std::move(r));
            return true;
        });
    if (!st) return st.error();
    return out;
}

Status for_each_record(const std::string& path, int64_t since_seq,
                       const std::function<bool(const Record&)>& fn) {
    Record r;
    return each_row(
        path,
        "SELECT seq, ts, kind, session, origin, body FROM records WHERE seq > ?1 ORDER BY seq",
        "read records", [&](Stmt& s) { s.bind(1, since_seq); },
        [&](const Stmt& s) {
            r.seq = s.int64(0);
            r.ts = s.int64(1);
            r.kind = s.text(2);
            r.session = s.text(3);
            r.origin = s.text(4);
            r.body = s.blob(5);
            return fn(r);
        });
}

Result<std::optional<Record>> newest_server_catalog(const std::string& path, std::string_view key) {
    std::optional<Record> out;
    // The kind is spelled in the SQL, not bound: only then can SQLite use the partial index.
    auto st = each_row(
        path,
        "SELECT seq, ts, kind, session, origin, body FROM records "
        "WHERE kind = 'server.catalog' AND instr(body, ?1) > 0 ORDER BY seq DESC LIMIT 1",
        "read server.catalog", [&](Stmt& s) { s.bind(1, key); },
        [&](const Stmt& s) {
            out = Record{s.int64(0),
                         s.int64(1),
                         std::string(s.text(2)),
                         std::string(s.text(3)),
                         std::string(s.text(4)),
                         std::string(s.blob(5))};
            return false;
        });
    if (!st) return st.error();
    return out;
}

Result<std::vector<Record>> session_records(const std::string& path, const std::string& session) {
    std::vector<Record> out;
    auto st = each_row(
        path,
        "SELECT seq, ts, kind, session, origin, body FROM records WHERE session = ?1 ORDER BY seq",
        "read session", [&](Stmt& s) { s.bind(1, session); },
        [&](const Stmt& s) {
            out.push_back(Record{s.int64(0), s.int64(1), std::string(s.text(2)),
                                 std::string(s.text(3)), std::string(s.text(4)),
                                 std::string(s.blob(5))});
            return true;
        });
    if (!st) return st.error();
    return out;
}

Json identity_json(const ProcessId& p) {
    return Json{{"pid", static_cast<int64_t>(p.pid)}, {"starttime", p.starttime}};
}

ProcessId identity_of(const Json& j) {
    ProcessId id;
    if (!j.is_object()) return id;
    id.pid = static_cast<pid_t>(j.value("pid", int64_t{0}));
    id.starttime = j.value("starttime", uint64_t{0});
    return id;
}

Result<std::vector<UnendedSession>> unended_sessions(const std::string& path,
                                                     const std::string& boot_id) {
    std::vector<UnendedSession> out;
    auto st = each_row(
        path,
        "SELECT s.session, r.body FROM sessions s JOIN records r ON r.seq = s.start_seq "
        "WHERE s.state IN ('running', 'client_lost') AND s.writer_boot_id = ?1 "
        "ORDER BY s.start_seq",
        "list unended sessions", [&](Stmt& s) { s.bind(1, boot_id); },
        [&](const Stmt& s) {
            auto body = Json::parse(s.blob(1), nullptr, false);
            out.push_back(UnendedSession{
                std::string(s.text(0)),
                body.is_object() && body.contains("data") ? body["data"] : Json(nullptr)});
            return true;
        });
    if (!st) return st.error();
    return out;
}

Result<bool> has_session_start(const std::string& path, const std::string& session) {
    bool found = false;
    auto st = each_row(
        path, "SELECT 1 FROM records WHERE session = ?1 AND kind = 'session.start' LIMIT 1",
        "read session", [&](Stmt& s) { s.bind(1, session); },
        [&](const Stmt&) {
            found = true;
            return false;
        });
    if (!st) return st.error();
    return found;
}

struct RecordReader::Impl {
    Db db;
    Stmt after, at, start, head, first;
};

RecordReader::RecordReader() : impl_(std::make_unique<Impl>()) {}
RecordReader::RecordReader(RecordReader&&) noexcept = default;
RecordReader& RecordReader::operator=(RecordReader&&) noexcept = default;
RecordReader::~RecordReader() = default;

Result<RecordReader> RecordReader::open(const std::string& path) {
    auto db = Db::open(path, Db::Mode::read, 5000);
    if (!db) return db.error();
    RecordReader r;
    r.impl_->db = std::move(*db);
    auto& d = r.impl_->db;
    struct {
        Stmt* stmt;
        const char* sql;
    } const statements[] = {
        {&r.impl_->after,
         "SELECT seq, ts, kind, session, origin, body, leaf FROM records WHERE seq > ?1 "
         "ORDER BY seq LIMIT ?2"},
        {&r.impl_->at,
         "SELECT seq, ts, kind, session, origin, body, leaf FROM records WHERE seq = ?1"},
        {&r.impl_->start,
         "SELECT r.seq, r.ts, r.kind, r.session, r.origin, r.body, r.leaf FROM sessions s "
         "JOIN records r ON r.seq = s.start_seq WHERE s.session = ?1"},
        {&r.impl_->head, "SELECT coalesce(max(seq), 0) FROM records"},
        {&r.impl_->first, "SELECT coalesce(min(seq), 0) FROM records"},
    };
    for (const auto& st : statements) {
        auto s = d.prepare(st.sql);
        if (!s) return s.error();
        *st.stmt = std::move(*s);
    }
    return r;
}

namespace {
RecordReader::Row reader_row(const Stmt& s) {
    auto leaf = s.blob(6);
    return {Record{s.int64(0), s.int64(1), std::string(s.text(2)), std::string(s.text(3)),
                   std::string(s.text(4)), std::string(s.blob(5))},
            to_hex(reinterpret_cast<const uint8_t*>(leaf.data()), leaf.size())};
}

Result<std::optional<RecordReader::Row>> one_row(Db& db, Stmt& s, const char* what) {
    int rc = s.step();
    std::optional<RecordReader::Row> out;
    if (rc == SQLITE_ROW) out = reader_row(s);
    s.reset();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db.error(what, rc);
    return out;
}

Result<int64_t> one_int(Db& db, Stmt& s, const char* what) {
    int rc = s.step();
    int64_t v = rc == SQLITE_ROW ? s.int64(0) : 0;
    s.reset();
    if (rc != SQLITE_ROW && rc != SQLITE_DONE) return db.error(what, rc);
    return v;
}
}  // namespace

Status RecordReader::read_after(int64_t since_seq, size_t max_records, size_t max_bytes,
                                std::vector<Row>& out) {
    auto& s = impl_->after;
    s.bind(1, since_seq).bind(2, static_cast<int64_t>(max_records));
    size_t bytes = 0;
    int rc;
    while ((rc = s.step()) == SQLITE_ROW) {
        out.push_back(reader_row(s));
        bytes += out.back().record.body.size();
        if (bytes >= max_bytes) {
            rc = SQLITE_DONE;
            break;
        }
    }
    s.reset();
    if (rc != SQLITE_DONE) return impl_->db.error("export: read records", rc);
    return {};
}

Result<std::optional<RecordReader::Row>> RecordReader::at(int64_t seq) {
    impl_->at.bind(1, seq);
    return one_row(impl_->db, impl_->at, "export: read a record");
}

Result<std::optional<RecordReader::Row>> RecordReader::session_start(const std::string& session) {
    impl_->start.bind(1, session);
    return one_row(impl_->db, impl_->start, "export: read a session.start");
}

Result<int64_t> RecordReader::head() {
    return one_int(impl_->db, impl_->head, "export: head");
}
Result<int64_t> RecordReader::first_seq() {
    return one_int(impl_->db, impl_->first, "export: first record");
}

Result<ExportFormat> parse_export_format(std::string_view t) {
    if (t == "otlp-json") return ExportFormat::OtlpJson;
    if (t == "ndjson") return ExportFormat::Ndjson;
    return Error::msg(fmt::format("--format {}: expected otlp-json or ndjson", t));
}

std::string export_line(const Record& r, ExportFormat format, bool include_content) {
    nlohmann::json body = nlohmann::json::parse(r.body, nullptr, false);
    nlohmann::json data =
        body.is_object() && body.contains("data") ? body["data"] : nlohmann::json::object();
    if (!include_content && data.is_object()) data.erase("arguments");
    if (format == ExportFormat::Ndjson) {
        nlohmann::json j{{"origin", r.origin}, {"seq", r.seq},         {"ts", r.ts},
                         {"kind", r.kind},     {"session", r.session}, {"data", data}};
        return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
    // OTLP/JSON (ExportLogsServiceRequest, one per line, as the Collector's otlpjsonfile
    // receiver reads it): 64-bit integers as strings, lowerCamelCase field names.
    auto attr = [](const char* k, nlohmann::json v) {
        nlohmann::json value;
        if (v.is_number_integer())
            value = {{"intValue", std::to_string(v.get<int64_t>())}};
        else if (v.is_string())
            value = {{"stringValue", v}};
        else
            value = {{"stringValue", v.dump()}};
        return nlohmann::json{{"key", k}, {"value", value}};
    };
    std::string event = "mcp.audit." + r.kind;
    nlohmann::json attrs = nlohmann::json::array(
        {attr("event.name", event), attr("mcpwarden.seq", r.seq),
         attr("mcpwarden.origin", r.origin), attr("network.transport", "pipe")});
    if (!r.session.empty()) attrs.push_back(attr("mcp.session.id", r.session));
    if (data.is_object()) {
        if (auto it = data.find("method"); it != data.end() && it->is_string())
            attrs.push_back(attr("mcp.method.name", *it));
        if (auto it = data.find("tool");
            it != data.end() && it->is_string() && !it->get<std::string>().empty())
            attrs.push_back(attr("gen_ai.tool.name", *it));
        if (auto it = data.find("id"); it != data.end())
            attrs.push_back(attr("jsonrpc.request.id", rpc_id_display(*it)));
        if (auto it = data.find("outcome"); it != data.end() && it->is_string())
            attrs.push_back(attr("mcpwarden.outcome", *it));
        if (auto it = data.find("duration_ns"); it != data.end() && it->is_number_integer())
            attrs.push_back(attr("mcpwarden.duration_ns", *it));
        if (auto it = data.find("pid"); it != data.end() && it->is_number_integer())
            attrs.push_back(attr("process.pid", *it));
        if (auto it = data.find("signal"); it != data.end() && it->is_number_integer())
            attrs.push_back(attr("mcpwarden.signal", *it));
        // Content, only when asked for (erased above otherwise): the redacted preview under
        // the OpenTelemetry GenAI name for a tool call's arguments, an opt-in attribute there
        // too.
        if (auto it = data.find("arguments"); it != data.end())
            attrs.push_back(attr("gen_ai.tool.call.arguments", *it));
    }
    nlohmann::json rec{{"timeUnixNano", std::to_string(r.ts)},
                       {"observedTimeUnixNano", std::to_string(r.ts)},
                       {"severityNumber", 9},
                       {"severityText", "INFO"},
                       {"eventName", event},
                       {"body", {{"stringValue", event}}},
                       {"attributes", attrs}};
    nlohmann::json req{
        {"resourceLogs",
         {{{"resource", {{"attributes", {attr("service.name", "mcpwarden")}}}},
           {"scopeLogs", {{{"scope", {{"name", "mcpwarden.journal"}}}, {"logRecords", {rec}}}}}}}}};
    return req.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

Result<int64_t> parse_since(std::string_view t, int64_t now) {
    if (t.empty()) return int64_t{0};
    int64_t n = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
    if (ec != std::errc() || n < 0)
        return Error::msg(fmt::format("--since {}: expected e.g. 30m, 2h, 1d or Unix seconds", t));
    std::string_view unit(p, static_cast<size_t>(t.data() + t.size() - p));
    int64_t sec;
    if (unit.empty()) return n * 1'000'000'000;
    if (unit == "s")
        sec = 1;
    else if (unit == "m")
        sec = 60;
    else if (unit == "h")
        sec = 3600;
    else if (unit == "d")
        sec = 86400;
    else
        return Error::msg(fmt::format("--since {}: unknown unit `{}` (s, m, h, d)", t, unit));
    return now - n * sec * 1'000'000'000;
}

}  // namespace warden::journal
