#include "export/otlp.hpp"

#include <algorithm>
#include <array>
#include <cmath>

#include "export/metric_totals.hpp"
#include "export/protobuf_writer.hpp"

namespace warden::exporter {

namespace {

// --- protobuf: field numbers of opentelemetry/proto/{common,resource,logs,trace,metrics}/v1 ---

void any_value(ProtoWriter& w, const Json& v);

void key_value(ProtoWriter& w, uint32_t field, const std::string& key, const Json& v) {
    w.begin(field);
    w.bytes_field(1, key);  // KeyValue.key
    w.begin(2);             // KeyValue.value
    any_value(w, v);
    w.end();
    w.end();
}

void any_value(ProtoWriter& w, const Json& v) {
    if (v.is_string()) {
        w.bytes_field(1, v.get_ref<const std::string&>());  // string_value
    } else if (v.is_boolean()) {
        w.varint_field(2, v.get<bool>() ? 1 : 0);  // bool_value
    } else if (v.is_number_integer()) {
        w.varint_field(3, static_cast<uint64_t>(v.get<int64_t>()));  // int_value
    } else if (v.is_number()) {
        w.double_field(4, v.get<double>());  // double_value
    } else if (v.is_array()) {
        w.begin(5);  // array_value: ArrayValue.values = 1
        for (const auto& e : v) {
            w.begin(1);
            any_value(w, e);
            w.end();
        }
        w.end();
    } else if (v.is_object()) {
        w.begin(6);  // kvlist_value: KeyValueList.values = 1
        for (const auto& [k, e] : v.items())
            key_value(w, 1, k, e);
        w.end();
    }
    // null: an empty AnyValue
}

void attributes(ProtoWriter& w, uint32_t field, const Attributes& a) {
    for (const auto& [k, v] : a)
        key_value(w, field, k, v);
}

// ResourceX.resource = 1 (Resource.attributes = 1); ScopeX.scope = 1 (name 1, version 2).
void resource_and_scope_begin(ProtoWriter& w, const Attributes& resource) {
    w.begin(1);  // resource_{logs,spans,metrics}
    w.begin(1);  // resource
    attributes(w, 1, resource);
    w.end();
    w.begin(2);  // scope_{logs,spans,metrics}
    w.begin(1);  // scope
    w.bytes_field(1, kScopeName);
    w.end();
}
void resource_and_scope_end(ProtoWriter& w) {
    w.end();
    w.end();
}

std::string logs_proto(const Signals& s, const Attributes& resource) {
    ProtoWriter w;
    resource_and_scope_begin(w, resource);
    for (const auto& l : s.logs) {
        w.begin(2);                                       // ScopeLogs.log_records
        w.fixed64_field(1, static_cast<uint64_t>(l.ts));  // time_unix_nano
        w.varint_field(2, static_cast<uint64_t>(l.severity));
        w.bytes_field(3, l.severity_text);
        w.begin(5);  // body
        any_value(w, l.event_name);
        w.end();
        attributes(w, 6, l.attributes);
        if (!l.trace_id.empty()) w.bytes_field(9, l.trace_id);
        if (!l.span_id.empty()) w.bytes_field(10, l.span_id);
        w.fixed64_field(11, static_cast<uint64_t>(l.ts));  // observed_time_unix_nano
        w.bytes_field(12, l.event_name);
        w.end();
    }
    resource_and_scope_end(w);
    return w.take();
}

std::string traces_proto(const Signals& s, const Attributes& resource) {
    ProtoWriter w;
    resource_and_scope_begin(w, resource);
    for (const auto& sp : s.spans) {
        w.begin(2);  // ScopeSpans.spans
        w.bytes_field(1, sp.trace_id);
        w.bytes_field(2, sp.span_id);
        if (!sp.parent_span_id.empty()) w.bytes_field(4, sp.parent_span_id);
        w.bytes_field(5, sp.name);
        w.varint_field(6, static_cast<uint64_t>(sp.kind));
        w.fixed64_field(7, static_cast<uint64_t>(sp.start));
        w.fixed64_field(8, static_cast<uint64_t>(sp.end));
        attributes(w, 9, sp.attributes);
        for (const auto& ev : sp.events) {
            w.begin(11);  // Span.events
            w.fixed64_field(1, static_cast<uint64_t>(ev.ts));
            w.bytes_field(2, ev.name);
            attributes(w, 3, ev.attributes);
            w.end();
        }
        if (sp.status != 0) {
            w.begin(15);  // Status: message = 2, code = 3
            if (!sp.status_message.empty()) w.bytes_field(2, sp.status_message);
            w.varint_field(3, static_cast<uint64_t>(sp.status));
            w.end();
        }
        w.end();
    }
    resource_and_scope_end(w);
    return w.take();
}

std::string metrics_proto(const Signals& s, const Attributes& resource) {
    constexpr uint64_t kCumulative = 2;
    ProtoWriter w;
    resource_and_scope_begin(w, resource);
    for (const auto& m : s.metrics) {
        w.begin(2);  // ScopeMetrics.metrics
        w.bytes_field(1, m.name);
        w.bytes_field(2, m.description);
        w.bytes_field(3, m.unit);
        w.begin(m.histogram ? 9 : 7);  // histogram | sum
        for (const auto& p : m.points) {
            w.begin(1);  // data_points
            w.fixed64_field(2, static_cast<uint64_t>(p.start));
            w.fixed64_field(3, static_cast<uint64_t>(p.time));
            if (m.histogram) {
                w.fixed64_field(4, p.count);
                w.double_field(5, p.sum);
                w.packed_fixed64_field(6, p.buckets);  // bucket_counts
                w.packed_double_field(
                    7, std::vector<double>(kDurationBounds.begin(), kDurationBounds.end()));
                attributes(w, 9, p.attributes);
                w.double_field(11, p.min);
                w.double_field(12, p.max);
            } else {
                w.double_field(4, p.sum);  // as_double
                attributes(w, 7, p.attributes);
            }
            w.end();
        }
        w.varint_field(2, kCumulative);          // aggregation_temporality
        if (!m.histogram) w.varint_field(3, 1);  // is_monotonic
        w.end();
        w.end();
    }
    resource_and_scope_end(w);
    return w.take();
}

// --- OTLP/JSON ---

Json any_json(const Json& v) {
    if (v.is_string()) return {{"stringValue", v}};
    if (v.is_boolean()) return {{"boolValue", v}};
    if (v.is_number_integer()) return {{"intValue", std::to_string(v.get<int64_t>())}};
    if (v.is_number()) return {{"doubleValue", v}};
    if (v.is_array()) {
        Json values = Json::array();
        for (const auto& e : v)
            values.push_back(any_json(e));
        return {{"arrayValue", {{"values", values}}}};
    }
    if (v.is_object()) {
        Json values = Json::array();
        for (const auto& [k, e] : v.items())
            values.push_back({{"key", k}, {"value", any_json(e)}});
        return {{"kvlistValue", {{"values", values}}}};
    }
    return Json::object();
}

Json attributes_json(const Attributes& a) {
    Json out = Json::array();
    for (const auto& [k, v] : a)
        out.push_back({{"key", k}, {"value", any_json(v)}});
    return out;
}

std::string ns(int64_t t) {
    return std::to_string(t);
}

std::string json_request(const char* resource_key, const char* scope_key, const char* items_key,
                         const Attributes& resource, Json items) {
    Json req{
        {resource_key,
         {{{"resource", {{"attributes", attributes_json(resource)}}},
           {scope_key, {{{"scope", {{"name", kScopeName}}}, {items_key, std::move(items)}}}}}}}};
    return req.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string logs_json(const Signals& s, const Attributes& resource) {
    Json items = Json::array();
    for (const auto& l : s.logs) {
        Json r{{"timeUnixNano", ns(l.ts)},
               {"observedTimeUnixNano", ns(l.ts)},
               {"severityNumber", l.severity},
               {"severityText", l.severity_text},
               {"eventName", l.event_name},
               {"body", {{"stringValue", l.event_name}}},
               {"attributes", attributes_json(l.attributes)}};
        if (!l.trace_id.empty()) r["traceId"] = bytes_to_hex(l.trace_id);
        if (!l.span_id.empty()) r["spanId"] = bytes_to_hex(l.span_id);
        items.push_back(std::move(r));
    }
    return json_request("resourceLogs", "scopeLogs", "logRecords", resource, std::move(items));
}

std::string traces_json(const Signals& s, const Attributes& resource) {
    Json items = Json::array();
    for (const auto& sp : s.spans) {
        Json r{{"traceId", bytes_to_hex(sp.trace_id)},
               {"spanId", bytes_to_hex(sp.span_id)},
               {"name", sp.name},
               {"kind", sp.kind},
               {"startTimeUnixNano", ns(sp.start)},
               {"endTimeUnixNano", ns(sp.end)},
               {"attributes", attributes_json(sp.attributes)}};
        if (!sp.parent_span_id.empty()) r["parentSpanId"] = bytes_to_hex(sp.parent_span_id);
        if (!sp.events.empty()) {
            Json evs = Json::array();
            for (const auto& ev : sp.events)
                evs.push_back({{"timeUnixNano", ns(ev.ts)},
                               {"name", ev.name},
                               {"attributes", attributes_json(ev.attributes)}});
            r["events"] = std::move(evs);
        }
        if (sp.status != 0) r["status"] = {{"code", sp.status}, {"message", sp.status_message}};
        items.push_back(std::move(r));
    }
    return json_request("resourceSpans", "scopeSpans", "spans", resource, std::move(items));
}

std::string metrics_json(const Signals& s, const Attributes& resource) {
    constexpr int kCumulative = 2;
    Json items = Json::array();
    for (const auto& m : s.metrics) {
        Json points = Json::array();
        for (const auto& p : m.points) {
            Json dp{{"startTimeUnixNano", ns(p.start)},
                    {"timeUnixNano", ns(p.time)},
                    {"attributes", attributes_json(p.attributes)}};
            if (m.histogram) {
                Json counts = Json::array();
                for (uint64_t c : p.buckets)
                    counts.push_back(std::to_string(c));
                dp["count"] = std::to_string(p.count);
                dp["sum"] = p.sum;
                dp["bucketCounts"] = counts;
                dp["explicitBounds"] = kDurationBounds;
                dp["min"] = p.min;
                dp["max"] = p.max;
            } else {
                dp["asDouble"] = p.sum;
            }
            points.push_back(std::move(dp));
        }
        Json metric{{"name", m.name}, {"description", m.description}, {"unit", m.unit}};
        if (m.histogram)
            metric["histogram"] = {{"dataPoints", points}, {"aggregationTemporality", kCumulative}};
        else
            metric["sum"] = {{"dataPoints", points},
                             {"aggregationTemporality", kCumulative},
                             {"isMonotonic", true}};
        items.push_back(std::move(metric));
    }
    return json_request("resourceMetrics", "scopeMetrics", "metrics", resource, std::move(items));
}

}  // namespace

std::string encode_logs(const Signals& s, const Attributes& resource, Encoding e) {
    if (s.logs.empty()) return {};
    return e == Encoding::protobuf ? logs_proto(s, resource) : logs_json(s, resource);
}
std::string encode_traces(const Signals& s, const Attributes& resource, Encoding e) {
    if (s.spans.empty()) return {};
    return e == Encoding::protobuf ? traces_proto(s, resource) : traces_json(s, resource);
}
std::string encode_metrics(const Signals& s, const Attributes& resource, Encoding e) {
    if (s.metrics.empty()) return {};
    return e == Encoding::protobuf ? metrics_proto(s, resource) : metrics_json(s, resource);
}

}  // namespace warden::exporter
