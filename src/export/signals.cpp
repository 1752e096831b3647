#include "export/signals.hpp"

#include <algorithm>
#include <tuple>

#include "journal/crypto.hpp"

namespace warden::exporter {

namespace {

int hex_digit(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

// A session's own trace id and span id: the same on every machine and after every restart.
std::string session_trace_id(const std::string& session) {
    auto h = journal::sha256("mcpwarden.trace\n" + session);
    return std::string(reinterpret_cast<const char*>(h.data()), 16);
}
std::string session_span_id(const std::string& session) {
    auto h = journal::sha256("mcpwarden.session\n" + session);
    return std::string(reinterpret_cast<const char*>(h.data()), 8);
}

const Json& data_of(const Json& body) {
    static const Json kNone = Json::object();
    if (body.is_object())
        if (auto it = body.find("data"); it != body.end() && it->is_object()) return *it;
    return kNone;
}

Json parse_body(const journal::Record& r) {
    return Json::parse(r.body, nullptr, false);
}

std::string text(const Json& data, const char* key) {
    auto it = data.find(key);
    return it != data.end() && it->is_string() ? it->get<std::string>() : std::string();
}
int64_t integer(const Json& data, const char* key, int64_t fallback = 0) {
    auto it = data.find(key);
    return it != data.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}

std::string event_name(const std::string& kind) {
    return "mcp.audit." + kind;
}

// Records that say something went wrong read as warnings or errors at the receiver.
std::pair<int, const char*> severity_of(const std::string& kind, const Json& data) {
    if (kind == "journal.degraded" || kind == "journal.export_held" || kind == "session.orphaned")
        return {13, "WARN"};
    if (kind == "session.end") {
        auto td = data.find("teardown");
        if (td != data.end() && td->is_object()) {
            auto c = td->find("counts");
            if (c != td->end() && c->is_object() && c->value("survivors", int64_t{0}) > 0)
                return {17, "ERROR"};
        }
    }
    if (kind == "sandbox.denied" || kind == "activity.abandoned" || kind == "activity.unresolved")
        return {13, "WARN"};
    return {9, "INFO"};
}

// The attributes shared by a record's log and a request's span.
void add_call_attributes(Attributes& a, const Json& data) {
    if (auto m = text(data, "method"); !m.empty()) a.emplace_back("mcp.method.name", m);
    if (auto t = text(data, "tool"); !t.empty()) a.emplace_back("gen_ai.tool.name", t);
    if (auto it = data.find("id"); it != data.end())
        a.emplace_back("jsonrpc.request.id", journal::rpc_id_display(*it));
}

LogItem log_of(const ExportRecord& er, const Json& data, const TranslateOptions& o) {
    const auto& r = er.record;
    LogItem l;
    l.ts = r.ts;
    auto [sev, sev_text] = severity_of(r.kind, data);
    l.severity = sev;
    l.severity_text = sev_text;
    l.event_name = event_name(r.kind);
    auto& a = l.attributes;
    a.emplace_back("event.name", l.event_name);
    a.emplace_back("log.record.uid", er.leaf_hex);
    a.emplace_back("mcpwarden.seq", r.seq);
    a.emplace_back("mcpwarden.origin", r.origin);
    if (!r.session.empty()) a.emplace_back("mcp.session.id", r.session);
    add_call_attributes(a, data);
    // The record's data as it is stored (already redacted at record time); the argument
    // preview only when asked for, under the GenAI name for a call's arguments.
    for (const auto& [k, v] : data.items()) {
        if (k == "arguments") {
            if (o.include_content) a.emplace_back("gen_ai.tool.call.arguments", v);
            continue;
        }
        if (k == "traceparent") continue;
        a.emplace_back("mcpwarden.data." + k, v);
    }
    return l;
}

// A request's end, from whichever record ended it.
struct Ending {
    std::string outcome;  // ok, jsonrpc_error, tool_error, abandoned, unresolved, stream_end
    int64_t error_code = 0;
    bool has_error_code = false;
    int64_t duration_ns = -1;
};

SpanItem request_span(const ExportRecord& request, const Json& req_data, const ExportRecord& end,
                      const Ending& e) {
    SpanItem s;
    const auto& session = request.record.session;
    s.span_id = hex_to_bytes(std::string_view(request.leaf_hex).substr(0, 16));
    if (auto tp = parse_traceparent(text(req_data, "traceparent"))) {
        s.trace_id = tp->trace_id;
        s.parent_span_id = tp->span_id;
    } else {
        s.trace_id = session_trace_id(session);
        s.parent_span_id = session_span_id(session);
    }
    std::string method = text(req_data, "method");
    std::string target = text(req_data, "tool");
    s.name = target.empty() ? method : method + " " + target;
    s.kind = 2;
    s.start = request.record.ts;
    s.end = e.duration_ns >= 0 ? request.record.ts + e.duration_ns : end.record.ts;
    if (s.end < s.start) s.end = s.start;  // a clock stepped back between the two
    auto& a = s.attributes;
    add_call_attributes(a, req_data);
    if (method == "tools/call") a.emplace_back("gen_ai.operation.name", "execute_tool");
    if (!session.empty()) a.emplace_back("mcp.session.id", session);
    a.emplace_back("network.transport", "pipe");
    a.emplace_back("mcpwarden.outcome", e.outcome);
    a.emplace_back("mcpwarden.seq", request.record.seq);
    if (e.has_error_code) a.emplace_back("rpc.response.status_code", std::to_string(e.error_code));
    if (e.outcome != "ok" && e.outcome != "input_required" && e.outcome != "stream_end") {
        a.emplace_back("error.type", e.has_error_code ? std::to_string(e.error_code) : e.outcome);
        s.status = 2;
        s.status_message = e.outcome;
    }
    return s;
}

SpanItem session_span(const ExportRecord& start, const Json& start_data, const ExportRecord& end,
                      const Json& end_data) {
    SpanItem s;
    const auto& session = end.record.session;
    s.trace_id = session_trace_id(session);
    s.span_id = session_span_id(session);
    std::string server = text(start_data, "server_name");
    s.name = server.empty() ? "mcpwarden.session" : "mcpwarden.session " + server;
    s.kind = 1;
    s.start = start.record.ts;
    s.end = std::max(end.record.ts, start.record.ts);
    auto& a = s.attributes;
    a.emplace_back("mcp.session.id", session);
    if (!server.empty()) a.emplace_back("mcpwarden.server.name", server);
    a.emplace_back("mcpwarden.end.reason", text(end_data, "reason"));
    if (auto it = end_data.find("exit_status"); it != end_data.end())
        a.emplace_back("process.exit.code", *it);
    // The teardown as the session's events: its phases in order, then each target's end.
    auto td = end_data.find("teardown");
    if (td != end_data.end() && td->is_object()) {
        int64_t at = s.end;
        if (auto c = td->find("counts"); c != td->end() && c->is_object()) {
            SpanEvent ev{at, "mcpwarden.teardown", {}};
            for (const auto& [k, v] : c->items())
                ev.attributes.emplace_back("mcpwarden.teardown." + k, v);
            if (auto p = td->find("phases_us"); p != td->end() && p->is_object())
                for (const auto& [k, v] : p->items())
                    ev.attributes.emplace_back("mcpwarden.teardown.phase_us." + k, v);
            s.events.push_back(std::move(ev));
            if (c->value("survivors", int64_t{0}) > 0) {
                s.status = 2;
                s.status_message = "teardown left survivors";
            }
        }
        if (auto t = td->find("targets"); t != td->end() && t->is_array()) {
            size_t n = 0;
            for (const auto& target : *t) {
                if (++n > 64) break;  // a span's events stay readable; the log has them all
                SpanEvent ev{at, "mcpwarden.teardown.target", {}};
                for (const char* k : {"pid", "role", "how", "round", "command", "ended_us"})
                    if (auto it = target.find(k); it != target.end())
                        ev.attributes.emplace_back(std::string("mcpwarden.target.") + k, *it);
                s.events.push_back(std::move(ev));
            }
        }
    }
    return s;
}

// The batch's observations, one point per metric and attribute set.
class MetricSink {
  public:
    void observe(const std::string& metric, const Attributes& attrs, double v) {
        auto& m = points_[metric];
        std::string key = Json(attrs).dump();
        auto& p = m[key];
        if (p.attributes.empty()) p.attributes = attrs;
        p.values.push_back(v);
    }
    std::vector<MetricItem> take() {
        static const struct {
            const char* name;
            const char* unit;
            const char* description;
            bool histogram;
        } kMetrics[] = {
            {"mcp.server.operation.duration", "s",
             "Duration of MCP requests, as the relay saw them", true},
            {"mcp.server.session.duration", "s", "Duration of MCP sessions", true},
            {"mcpwarden.sessions", "{session}", "Sessions ended, by reason", false},
            {"mcpwarden.teardown.duration", "s", "Duration of the teardown of a server's tree",
             true},
            {"mcpwarden.teardown.survivors", "{process}", "Processes a teardown could not end",
             false},
            {"mcpwarden.journal.lost", "{record}", "Records the journal could not keep", false},
        };
        std::vector<MetricItem> out;
        for (const auto& d : kMetrics) {
            auto it = points_.find(d.name);
            if (it == points_.end()) continue;
            MetricItem m{d.name, d.unit, d.description, d.histogram, {}};
            for (auto& [k, p] : it->second)
                m.points.push_back(std::move(p));
            out.push_back(std::move(m));
        }
        points_.clear();
        return out;
    }

  private:
    std::map<std::string, std::map<std::string, MetricPoint>> points_;
};

Ending ending_of(const std::string& kind, const Json& data) {
    Ending e;
    if (kind == "activity.response") {
        e.outcome = text(data, "outcome");
        e.duration_ns = integer(data, "duration_ns", -1);
        if (auto it = data.find("error_code"); it != data.end() && it->is_number_integer()) {
            e.error_code = it->get<int64_t>();
            e.has_error_code = true;
        }
    } else {
        e.outcome = kind.substr(std::string_view("activity.").size());
    }
    return e;
}

bool ends_request(const std::string& kind) {
    return kind == "activity.response" || kind == "activity.abandoned" ||
           kind == "activity.unresolved" || kind == "activity.stream_end";
}

}  // namespace

std::string hex_to_bytes(std::string_view hex) {
    std::string out;
    out.reserve(hex.size() / 2);
    for (size_t i = 0; i + 1 < hex.size(); i += 2) {
        int hi = hex_digit(hex[i]), lo = hex_digit(hex[i + 1]);
        if (hi < 0 || lo < 0) return {};
        out.push_back(static_cast<char>(hi * 16 + lo));
    }
    return out;
}

std::string bytes_to_hex(std::string_view bytes) {
    return journal::to_hex(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

std::optional<TraceParent> parse_traceparent(std::string_view t) {
    // version "00": 2 + 1 + 32 + 1 + 16 + 1 + 2 characters, lowercase hex; all-zero ids invalid.
    if (t.size() != 55 || t.substr(0, 3) != "00-" || t[35] != '-' || t[52] != '-') return {};
    for (size_t i : {size_t{3}, size_t{36}, size_t{53}})
        for (size_t j = i; j < (i == 3 ? 35 : i == 36 ? 52 : 55); ++j)
            if (hex_digit(t[j]) < 0 || (t[j] >= 'A' && t[j] <= 'F')) return {};
    TraceParent tp{hex_to_bytes(t.substr(3, 32)), hex_to_bytes(t.substr(36, 16))};
    if (tp.trace_id == std::string(16, '\0') || tp.span_id == std::string(8, '\0')) return {};
    return tp;
}

Signals translate(const std::vector<ExportRecord>& batch, const RecordLookup& lookup,
                  const TranslateOptions& o) {
    Signals out;
    MetricSink metrics;
    // Requests and session starts of this batch, so that most lookups stay in memory.
    std::map<int64_t, size_t> by_seq;
    std::map<std::string, size_t> starts;
    std::vector<Json> bodies;
    bodies.reserve(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
        bodies.push_back(parse_body(batch[i].record));
        const auto& r = batch[i].record;
        if (r.kind == "activity.request") by_seq[r.seq] = i;
        if (r.kind == "session.start") starts[r.session] = i;
    }
    // A record found in the batch, or looked up (and kept here for the batch's life): the
    // record and its data, by reference, never copied.
    struct Found {
        const ExportRecord* record;
        const Json* data;
    };
    std::map<int64_t, std::pair<ExportRecord, Json>> looked_up;
    auto keep = [&](ExportRecord r) -> Found {
        int64_t seq = r.record.seq;
        Json body = parse_body(r.record);
        auto& slot = looked_up[seq] = {std::move(r), std::move(body)};
        return {&slot.first, &data_of(slot.second)};
    };
    auto request_at = [&](int64_t seq) -> std::optional<Found> {
        if (auto it = by_seq.find(seq); it != by_seq.end())
            return Found{&batch[it->second], &data_of(bodies[it->second])};
        if (auto it = looked_up.find(seq); it != looked_up.end())
            return Found{&it->second.first, &data_of(it->second.second)};
        if (!lookup.by_seq) return {};
        auto r = lookup.by_seq(seq);
        if (!r || r->record.kind != "activity.request") return {};
        return keep(std::move(*r));
    };
    auto start_of = [&](const std::string& session) -> std::optional<Found> {
        if (auto it = starts.find(session); it != starts.end())
            return Found{&batch[it->second], &data_of(bodies[it->second])};
        if (!lookup.session_start) return {};
        auto r = lookup.session_start(session);
        if (!r) return {};
        return keep(std::move(*r));
    };
    for (size_t i = 0; i < batch.size(); ++i) {
        const auto& er = batch[i];
        const auto& r = er.record;
        const Json& data = data_of(bodies[i]);
        if (o.logs) out.logs.push_back(log_of(er, data, o));
        if (ends_request(r.kind)) {
            auto req = request_at(integer(data, "request_seq"));
            if (!req) continue;  // its request was pruned, or the record names none
            Ending e = ending_of(r.kind, data);
            SpanItem span = request_span(*req->record, *req->data, er, e);
            if (o.metrics) {
                Attributes attrs;
                for (const auto& [k, v] : span.attributes)
                    if (k == "mcp.method.name" || k == "gen_ai.tool.name" || k == "error.type")
                        attrs.emplace_back(k, v);
                metrics.observe("mcp.server.operation.duration", attrs,
                                static_cast<double>(span.end - span.start) / 1e9);
            }
            if (o.traces) out.spans.push_back(std::move(span));
        } else if (r.kind == "session.end") {
            auto start = start_of(r.session);
            if (start) {
                SpanItem span = session_span(*start->record, *start->data, er, data);
                if (o.metrics)
                    metrics.observe("mcp.server.session.duration", {},
                                    static_cast<double>(span.end - span.start) / 1e9);
                if (o.traces) out.spans.push_back(std::move(span));
            }
            if (o.metrics) {
                metrics.observe("mcpwarden.sessions",
                                {{"mcpwarden.end.reason", text(data, "reason")}}, 1);
                auto td = data.find("teardown");
                if (td != data.end() && td->is_object()) {
                    auto phases = td->value("phases_us", Json::object());
                    if (phases.is_object() && phases.contains("total") &&
                        phases["total"].is_number())
                        metrics.observe("mcpwarden.teardown.duration", {},
                                        phases["total"].get<double>() / 1e6);
                    auto counts = td->value("counts", Json::object());
                    metrics.observe("mcpwarden.teardown.survivors", {},
                                    static_cast<double>(counts.is_object()
                                                            ? counts.value("survivors", int64_t{0})
                                                            : 0));
                }
            }
        } else if (r.kind == "journal.degraded" && o.metrics) {
            metrics.observe("mcpwarden.journal.lost", {},
                            static_cast<double>(integer(data, "lost_events")));
        }
    }
    if (o.metrics) out.metrics = metrics.take();
    return out;
}

}  // namespace warden::exporter
