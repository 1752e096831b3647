// What the journal's records become in OpenTelemetry's terms: log records, spans and metric
// points, independent of how they are encoded (otlp.hpp writes them as OTLP JSON or protobuf).
//
// Every id is derived from the journal, never drawn at random, so that a batch sent again
// after a crash carries the same ids and a receiver can drop what it already has: a log
// record's `log.record.uid` is its record's leaf hash; a request's span id is the first 8
// bytes of its activity.request record's leaf hash; a session's trace and span ids are
// hashes of the session id. A request that carried W3C trace context in `params._meta`
// (`traceparent`, kept in its activity.request record) belongs to the client's trace, as a
// child of the client's span; otherwise to its session's trace, as a child of the session's
// span.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "journal/canonical_json.hpp"
#include "journal/query.hpp"

namespace warden::exporter {

using Json = journal::Json;
// Attributes in order; values are JSON scalars, arrays or objects (AnyValue in OTLP).
using Attributes = std::vector<std::pair<std::string, Json>>;

struct LogItem {
    int64_t ts = 0;
    int severity = 9;  // OTLP SeverityNumber: 9 INFO, 13 WARN, 17 ERROR
    std::string severity_text = "INFO";
    std::string event_name;
    std::string trace_id, span_id;  // raw bytes (16 and 8), empty when none
    Attributes attributes;
};

struct SpanEvent {
    int64_t ts = 0;
    std::string name;
    Attributes attributes;
};

struct SpanItem {
    std::string trace_id, span_id, parent_span_id;  // raw bytes
    std::string name;
    int kind = 2;  // OTLP SpanKind: 1 INTERNAL, 2 SERVER
    int64_t start = 0, end = 0;
    Attributes attributes;
    std::vector<SpanEvent> events;
    int status = 0;  // 0 UNSET, 1 OK, 2 ERROR
    std::string status_message;
};

// One histogram or sum data point; the metric it belongs to is named by MetricItem.
// translate() fills in `values`, the batch's observations; MetricTotals::add() makes them the
// cumulative point that is sent (metric_totals.hpp says why cumulative).
struct MetricPoint {
    Attributes attributes;
    std::vector<double> values;   // histogram: the observations; sum: one value each
    int64_t start = 0, time = 0;  // the series' start, the point's time (record times)
    uint64_t count = 0;           // observations since start
    double sum = 0, min = 0, max = 0;
    std::vector<uint64_t> buckets;  // histogram: counts per kDurationBounds bucket
};

struct MetricItem {
    std::string name, unit, description;
    bool histogram = true;  // else a monotonic sum
    std::vector<MetricPoint> points;
};

struct Signals {
    std::vector<LogItem> logs;
    std::vector<SpanItem> spans;
    std::vector<MetricItem> metrics;
    bool empty() const { return logs.empty() && spans.empty() && metrics.empty(); }
};

// A record with its leaf hash (hex), as the exporter reads it.
struct ExportRecord {
    journal::Record record;
    std::string leaf_hex;
};

// What the translation needs from the journal besides the batch: the request a response
// answers, and the start of a session that ends (both usually earlier than the batch).
struct RecordLookup {
    std::function<std::optional<ExportRecord>(int64_t seq)> by_seq;
    std::function<std::optional<ExportRecord>(const std::string& session)> session_start;
};

struct TranslateOptions {
    bool include_content = false;  // argument previews (already redacted) as attributes
    bool logs = true, traces = true, metrics = true;
};

// The batch in OpenTelemetry's terms: a log record for every record; a span for every
// request that ended (answered, abandoned, unresolved, its stream ended) and for every session
// that ended; the observations of what ended in the batch, for MetricTotals::add().
Signals translate(const std::vector<ExportRecord>& batch, const RecordLookup& lookup,
                  const TranslateOptions& options);

// The W3C trace context of `traceparent` ("00-TRACEID-SPANID-FLAGS"), as raw bytes; nullopt
// when it is not well formed (then the request stays in its session's trace).
struct TraceParent {
    std::string trace_id, span_id;
};
std::optional<TraceParent> parse_traceparent(std::string_view text);

std::string hex_to_bytes(std::string_view hex);
std::string bytes_to_hex(std::string_view bytes);

}  // namespace warden::exporter
