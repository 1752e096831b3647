// The exporter's settings: what `mcpwarden export` was given (mcpwarden/exporter.hpp) with
// the OpenTelemetry environment filling in the rest, checked whole before anything is sent.
//
// The OTLP variables are read as the OpenTelemetry SDKs read them: OTEL_EXPORTER_OTLP_ENDPOINT
// is a base URL to which /v1/traces, /v1/logs and /v1/metrics are appended, while a
// per-signal OTEL_EXPORTER_OTLP_{TRACES,LOGS,METRICS}_ENDPOINT is used as it stands; _HEADERS
// ("k=v,k2=v2", values percent-decoded), _TIMEOUT (milliseconds), _PROTOCOL (http/protobuf,
// http/json; grpc is refused: not supported), _COMPRESSION (gzip, none), _CERTIFICATE,
// _CLIENT_CERTIFICATE and _CLIENT_KEY, each with its per-signal variant taking precedence.
// A flag wins over both. Header values may come from a file (`--headers-file`), so that a
// token is never on a command line, where every user of the machine can read it.
#pragma once

#include <functional>
#include <optional>
#include <string>

#include "export/http.hpp"
#include "export/otlp.hpp"
#include "export/signals.hpp"
#include "export/syslog.hpp"
#include "mcpwarden/exporter.hpp"
#include "sys/result.hpp"

namespace warden::exporter {

struct OtlpSignal {
    bool enabled = false;
    HttpTarget http;
    Encoding encoding = Encoding::protobuf;
};

struct Settings {
    std::string journal;  // resolved
    std::string name;     // destination
    std::string target;   // for status: "otlp http://…" | "syslog tls://…"
    OtlpSignal traces, logs, metrics;
    std::optional<SyslogTarget> syslog;
    TranslateOptions translate;
    bool follow = false;
    bool include_content = false;
    size_t batch = 512;
    int64_t poll_ms = 100;
    Attributes resource;
};

using EnvLookup = std::function<std::optional<std::string>(const char*)>;
EnvLookup process_env();

// Every problem named: which flag or variable, its value, and why.
Result<Settings> resolve_settings(const ExportRequest& request, const EnvLookup& env);

// "Name: value" or "name=value" lines; '#' comments and blank lines skipped.
Result<std::vector<std::string>> read_headers_file(const std::string& path);

// host.id (the machine id), host.name, service.name, service.version, user.name (when asked).
Attributes resource_attributes(const std::string& version, bool user_name);

}  // namespace warden::exporter
