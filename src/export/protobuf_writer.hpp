// A protobuf wire-format writer for the fixed OTLP schema, and nothing more.
//
// Why not protoc: OTLP/HTTP with protobuf needs the OpenTelemetry .proto files, and no Debian
// package ships them (libprotobuf-dev has the runtime and the well-known types only), while
// the project brings in nothing from outside Debian's packages and vendors no third-party
// sources. What mcpwarden sends is a handful of messages (ExportLogsServiceRequest,
// ExportTraceServiceRequest, ExportMetricsServiceRequest and what they hold), written and
// never read, so the writer is small: varints, fixed64, doubles and length-delimited fields.
// The field numbers live in otlp_proto.cpp next to the message they belong to, and the
// tests check every message against the OpenTelemetry project's own generated decoder
// (tests/otlp-receiver/, the same decoder its JavaScript SDK is built with).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace warden::exporter {

class ProtoWriter {
  public:
    // Fields by type. Zero/empty values are written as given: proto3 readers treat an
    // explicitly written default the same as an absent one.
    void varint_field(uint32_t field, uint64_t v);
    void fixed64_field(uint32_t field, uint64_t v);
    void double_field(uint32_t field, double v);
    void bytes_field(uint32_t field, std::string_view v);  // strings and bytes alike
    // Repeated fixed64 and double fields, packed (one length-delimited run of 8-byte values).
    void packed_fixed64_field(uint32_t field, const std::vector<uint64_t>& v);
    void packed_double_field(uint32_t field, const std::vector<double>& v);

    // An embedded message: begin() writes its tag, end() its length once its fields are
    // written. Nested freely; every begin() needs its end().
    void begin(uint32_t field);
    void end();

    const std::string& data() const { return buf_; }
    std::string take() { return std::move(buf_); }

  private:
    void varint(uint64_t v);
    void le64(uint64_t v);
    void tag(uint32_t field, uint32_t wire_type);
    std::string buf_;
    std::vector<size_t> open_;  // where each open message's content starts
};

}  // namespace warden::exporter
