// The exporter's settings: what `mcpwarden export` was given (mcpwarden/exporter.hpp) with
// the OpenTelemetry environment filling in the rest, checked whole before anything is sent.
//
// The OTLP variables are read as the OpenTelemetry SDKs read them: OTEL_EXPORTER_OTLP_ENDPOINT
// is a base URL to which /v1/traces, /v1/logs and /v1/metrics are appended, while a
// per-signal OTEL_EXPORTER_OTLP_{TRACES,LOGS,METRICS}_ENDPOINT is used as it stands; _HEADERS
// ("k=v,k2=v2", values percent-decoded), _TIMEOUT (milliseconds), _PROTOCOL (http/protobuf,
// http/json; grpc is refused: not supported), _COMPRESSION (gzip, none), _CERTIFICATE,
// _CLIENT_CERTIFICATE and _CLIENT_KEY, each with its per-signal variant taking precedence.
// Header values may come from a file (`--headers-file`), so that a token is never on a
// command line, where every user of the machine can read it.
//
// The settings file (config.toml, read by src/api/settings.cpp) is the lowest source before
// the built-in defaults: for each setting the first of the flag, its variable
// (OTEL_EXPORTER_OTLP_* or MCPWARDEN_*), the [export.NAME] section of the destination (the
// user's file, then the system's), [export] (the user's, then the system's) gives it, whole.
// The receiver counts as one setting: the layer that names one (`otlp` or `syslog`) chooses
// the kind too, so a flag's --syslog is never mixed with a file's OTLP headers.
#pragma once

#include <functional>
#include <optional>
#include <span>
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
    int64_t retry_max_ms = 60000;  // the longest wait between two attempts (Retry-After aside)
    Attributes resource;
};

using EnvLookup = std::function<std::optional<std::string>(const char*)>;
EnvLookup process_env();

// ---- config.toml: [export] and [export.NAME] ----------------------------------------------

enum class ConfigKind {
    path,
    url,
    syslog_url,
    protocol,
    compression,
    millis,
    count,
    boolean,
    signals,
    gap,
    name
};
// A key, named as its flag is (docs/EXPORT.md, "Settings"), with the range of a number.
struct ConfigKey {
    std::string_view key;
    ConfigKind kind;
    bool per_destination;  // also in an [export.NAME] section, else only in [export]
    int64_t min = 0, max = 0;
};
std::span<const ConfigKey> config_keys();
const ConfigKey* find_config_key(std::string_view key);
// What is wrong with `text` as the value of `key`, starting with the key ("batch '0':
// expected 1 to 100000 records"); "" when nothing is.
std::string config_value_problem(const ConfigKey& key, const std::string& text);
// "250ms", "10s", "5m", "1h", or an integer of milliseconds.
std::optional<int64_t> parse_millis(std::string_view text);

// A value the settings file gave: its text, where it stands ("FILE:LINE") and its layer
// (0 the highest: [export.NAME] of the user's file, of the system's, then [export]).
struct ConfigValue {
    std::string text, where;
    int layer = 0;
};
using ConfigLookup = std::function<std::optional<ConfigValue>(std::string_view key)>;

// Every problem named: which flag, variable or line of the settings file, its value, and why.
Result<Settings> resolve_settings(const ExportRequest& request, const EnvLookup& env,
                                  const ConfigLookup& config = {});

// "Name: value" or "name=value" lines; '#' comments and blank lines skipped.
// `what` names where the path came from in a message ("--headers-file", "FILE:LINE: …").
Result<std::vector<std::string>> read_headers_file(const std::string& path,
                                                   const std::string& what = "--headers-file");

// host.id (the machine id), host.name, service.name, service.version, user.name (when asked).
Attributes resource_attributes(const std::string& version, bool user_name);

}  // namespace warden::exporter
