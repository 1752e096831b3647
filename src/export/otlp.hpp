// OTLP request bodies for the signals of one batch: ExportLogsServiceRequest,
// ExportTraceServiceRequest and ExportMetricsServiceRequest, as protobuf (protobuf_writer.hpp)
// or as OTLP/JSON (hex trace and span ids, 64-bit integers as strings, enums as numbers,
// lowerCamelCase names, as the OpenTelemetry Collector reads it).
#pragma once

#include <string>

#include "export/signals.hpp"

namespace warden::exporter {

enum class Encoding { protobuf, json };

// The body for one signal; "" when the batch has nothing for it.
std::string encode_logs(const Signals& s, const Attributes& resource, Encoding e);
std::string encode_traces(const Signals& s, const Attributes& resource, Encoding e);
std::string encode_metrics(const Signals& s, const Attributes& resource, Encoding e);

// The scope every record is sent under.
inline constexpr const char* kScopeName = "mcpwarden.journal";

}  // namespace warden::exporter
