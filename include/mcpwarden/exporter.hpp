// libmcpwarden — `mcpwarden export`: a follower of the journal that sends its records to an
// OpenTelemetry receiver (OTLP/HTTP: traces, logs, metrics) or a syslog receiver (RFC 5424
// over TCP or TLS), in order, from a position kept beside the journal, through any outage.
// docs/EXPORT.md describes it; src/export/ holds it.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"
#include "mcpwarden/settings.hpp"

namespace warden {

// What the user asked for on the command line; an empty value (0 for a number) is not
// given, and is taken from the OTEL_EXPORTER_OTLP_* environment (as the OpenTelemetry SDKs
// read it), then from config.toml's [export.NAME] and [export], then the default.
struct ExportRequest {
    std::string journal;        // empty: the default journal
    std::string name;           // the destination's name (its position file); default otlp|syslog
    std::string otlp_endpoint;  // base URL (…/v1/traces, /v1/logs, /v1/metrics appended)
    std::string syslog;         // tcp://HOST:PORT | tls://HOST:PORT
    std::string protocol;       // http/protobuf | http/json (default: env, else protobuf)
    std::string headers_file;   // "Name: value" lines, so that a token is never in argv
    std::string ca_file, client_cert, client_key;
    std::string signals;           // "traces,logs,metrics" (the default: all three)
    std::string retry_max;         // the longest wait between attempts: "60s" (the default)
    bool follow = false;           // keep following the journal; else stop at its end
    bool include_content = false;  // argument previews (redacted) as attributes
    bool user_name = false;        // user.name among the resource attributes
    int64_t batch = 0;             // records per request at most (512)
    int64_t poll_ms = 0;           // how often a caught-up follower looks for new records (100)
    std::string version;           // service.version
};

struct ExportProgress {
    std::int64_t sent = 0;      // records acknowledged by this run
    std::int64_t position = 0;  // the last acknowledged seq
};

struct ExporterStatus {
    std::string destination, target;
    std::int64_t position = 0, head = 0, lag_records = 0;
    std::int64_t lag_ns = 0;  // now − the acknowledged record's time (0 when caught up)
    std::int64_t acked_ns = 0;
    std::string last_error;
    std::int64_t last_error_ns = 0;
};

namespace api {
// Runs the exporter until the journal's end (follow false) or until `stop` is set. Usage
// errors (a malformed endpoint, header file, protocol; a settings file with a problem, every
// problem listed "FILE:LINE:COL: …") come back before anything is sent, with code EINVAL.
MCPW_API Result<ExportProgress> export_run(const ExportRequest& request,
                                           const std::atomic<bool>& stop,
                                           const SettingsFiles& files = default_settings_files());
// Every exporter of the journal at `journal` (empty: the default): position, lag, last error.
MCPW_API Result<std::vector<ExporterStatus>> export_status(const std::string& journal);
}  // namespace api

}  // namespace warden
