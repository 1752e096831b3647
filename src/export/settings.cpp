#include "export/settings.hpp"

#include <curl/curl.h>
#include <pwd.h>
#include <unistd.h>

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "journal/export_position.hpp"
#include "journal/journal.hpp"
#include "sys/fd.hpp"

namespace warden::exporter {

namespace {

std::string trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
        s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
        s.remove_suffix(1);
    return std::string(s);
}

std::string percent_decode(std::string_view s) {
    std::string out;
    for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '%' && i + 2 < s.size()) {
            int v = 0;
            auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 3, v, 16);
            if (ec == std::errc() && p == s.data() + i + 3) {
                out.push_back(static_cast<char>(v));
                i += 2;
                continue;
            }
        }
        out.push_back(s[i]);
    }
    return out;
}

// A header name: an HTTP token; a value: no line breaks (they would start another header).
bool header_ok(std::string_view name, std::string_view value) {
    if (name.empty()) return false;
    for (char c : name)
        if (!(std::isalnum(static_cast<unsigned char>(c)) ||
              std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos))
            return false;
    return value.find_first_of("\r\n") == std::string_view::npos;
}

// OTEL_EXPORTER_OTLP_HEADERS: "k=v,k2=v2".
Result<std::vector<std::string>> parse_otel_headers(const char* var, std::string_view text) {
    std::vector<std::string> out;
    while (!text.empty()) {
        auto comma = text.find(',');
        auto item = text.substr(0, comma);
        text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
        if (trim(item).empty()) continue;
        auto eq = item.find('=');
        if (eq == std::string_view::npos)
            return Error::msg(fmt::format("{}: '{}' is not name=value", var, trim(item)));
        std::string name = trim(item.substr(0, eq)),
                    value = percent_decode(trim(item.substr(eq + 1)));
        if (!header_ok(name, value))
            return Error::msg(
                fmt::format("{}: '{}' is not a valid header name or value", var, name));
        out.push_back(name + ": " + value);
    }
    return out;
}

// http or https, with a host: anything else is a typo the user must hear about now.
Status check_url(const std::string& what, const std::string& url) {
    CURLU* u = curl_url();
    CURLUcode rc = curl_url_set(u, CURLUPART_URL, url.c_str(), 0);
    char* scheme = nullptr;
    char* host = nullptr;
    if (rc == CURLUE_OK) curl_url_get(u, CURLUPART_SCHEME, &scheme, 0);
    if (rc == CURLUE_OK) curl_url_get(u, CURLUPART_HOST, &host, 0);
    std::string s = scheme ? scheme : "", h = host ? host : "";
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    if (rc != CURLUE_OK)
        return Error::msg(fmt::format("{} '{}': not a URL ({})", what, url, curl_url_strerror(rc)));
    if (s != "http" && s != "https")
        return Error::msg(fmt::format("{} '{}': the scheme must be http or https", what, url));
    if (h.empty()) return Error::msg(fmt::format("{} '{}': no host", what, url));
    return {};
}

std::string signal_var(const char* signal, const char* suffix) {
    return signal ? fmt::format("OTEL_EXPORTER_OTLP_{}_{}", signal, suffix)
                  : fmt::format("OTEL_EXPORTER_OTLP_{}", suffix);
}

// The per-signal variable, else the general one; with the name of the one found.
std::optional<std::pair<std::string, std::string>> otel_var(const EnvLookup& env,
                                                            const char* signal,
                                                            const char* suffix) {
    for (const char* s : {signal, static_cast<const char*>(nullptr)}) {
        std::string var = signal_var(s, suffix);
        if (auto v = env(var.c_str()); v && !v->empty()) return std::pair{var, *v};
        if (!s) break;
    }
    return std::nullopt;
}

Result<OtlpSignal> resolve_signal(const ExportRequest& rq, const EnvLookup& env, const char* signal,
                                  const char* path, const std::vector<std::string>& file_headers) {
    OtlpSignal out;
    out.enabled = true;
    std::string per_signal = signal_var(signal, "ENDPOINT");
    if (!rq.otlp_endpoint.empty()) {
        std::string base = rq.otlp_endpoint;
        if (auto st = check_url("--otlp", base); !st) return st.error();
        out.http.url = (base.ends_with("/") ? base.substr(0, base.size() - 1) : base) + path;
    } else if (auto v = env(per_signal.c_str()); v && !v->empty()) {
        if (auto st = check_url(per_signal, *v); !st) return st.error();
        out.http.url = *v;
    } else if (auto b = env("OTEL_EXPORTER_OTLP_ENDPOINT"); b && !b->empty()) {
        if (auto st = check_url("OTEL_EXPORTER_OTLP_ENDPOINT", *b); !st) return st.error();
        out.http.url = (b->ends_with("/") ? b->substr(0, b->size() - 1) : *b) + path;
    } else {
        return Error::msg(
            "export: no receiver: give --otlp URL or --syslog URL, or set "
            "OTEL_EXPORTER_OTLP_ENDPOINT");
    }
    // Headers: the general variable, the per-signal one, then the file; a later one of the
    // same name replaces an earlier one.
    std::vector<std::string> headers;
    for (const char* s : {static_cast<const char*>(nullptr), signal}) {
        std::string var = signal_var(s, "HEADERS");
        if (auto v = env(var.c_str()); v && !v->empty()) {
            auto h = parse_otel_headers(var.c_str(), *v);
            if (!h) return h.error();
            headers.insert(headers.end(), h->begin(), h->end());
        }
    }
    headers.insert(headers.end(), file_headers.begin(), file_headers.end());
    for (size_t i = 0; i < headers.size(); ++i) {
        std::string name = headers[i].substr(0, headers[i].find(':'));
        bool replaced = false;
        for (size_t j = i + 1; j < headers.size(); ++j)
            if (strncasecmp(headers[j].c_str(), (name + ":").c_str(), name.size() + 1) == 0)
                replaced = true;
        if (!replaced) out.http.headers.push_back(headers[i]);
    }
    if (auto t = otel_var(env, signal, "TIMEOUT")) {
        int64_t ms = 0;
        auto [p, ec] = std::from_chars(t->second.data(), t->second.data() + t->second.size(), ms);
        if (ec != std::errc() || p != t->second.data() + t->second.size() || ms <= 0)
            return Error::msg(fmt::format("{} '{}': expected milliseconds, a positive integer",
                                          t->first, t->second));
        out.http.timeout_ms = ms;
    }
    std::string protocol = rq.protocol;
    std::string protocol_from = "--protocol";
    if (protocol.empty())
        if (auto p = otel_var(env, signal, "PROTOCOL")) std::tie(protocol_from, protocol) = *p;
    if (protocol.empty() || protocol == "http/protobuf")
        out.encoding = Encoding::protobuf;
    else if (protocol == "http/json")
        out.encoding = Encoding::json;
    else
        return Error::msg(
            fmt::format("{} '{}': mcpwarden sends http/protobuf or http/json "
                        "(grpc is not supported)",
                        protocol_from, protocol));
    if (auto c = otel_var(env, signal, "COMPRESSION")) {
        if (c->second == "none")
            out.http.gzip = false;
        else if (c->second != "gzip")
            return Error::msg(fmt::format("{} '{}': expected gzip or none", c->first, c->second));
    }
    out.http.tls.ca_file = rq.ca_file;
    if (out.http.tls.ca_file.empty())
        if (auto v = otel_var(env, signal, "CERTIFICATE")) out.http.tls.ca_file = v->second;
    out.http.tls.client_cert = rq.client_cert;
    if (out.http.tls.client_cert.empty())
        if (auto v = otel_var(env, signal, "CLIENT_CERTIFICATE"))
            out.http.tls.client_cert = v->second;
    out.http.tls.client_key = rq.client_key;
    if (out.http.tls.client_key.empty())
        if (auto v = otel_var(env, signal, "CLIENT_KEY")) out.http.tls.client_key = v->second;
    return out;
}

std::string read_machine_id() {
    for (const char* p : {"/etc/machine-id", "/var/lib/dbus/machine-id"})
        if (auto t = read_file(p)) return trim(std::string_view(*t).substr(0, t->find('\n')));
    return {};
}

}  // namespace

EnvLookup process_env() {
    return [](const char* name) -> std::optional<std::string> {
        const char* v = std::getenv(name);
        return v ? std::optional<std::string>(v) : std::nullopt;
    };
}

Result<std::vector<std::string>> read_headers_file(const std::string& path) {
    auto text = read_file(path);
    if (!text) return Error::msg(fmt::format("--headers-file {}: {}", path, text.error().message));
    std::vector<std::string> out;
    size_t line_no = 0;
    std::string_view rest = *text;
    while (!rest.empty()) {
        auto nl = rest.find('\n');
        std::string line = trim(rest.substr(0, nl));
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
        ++line_no;
        if (line.empty() || line.front() == '#') continue;
        auto sep = line.find_first_of(":=");
        if (sep == std::string::npos)
            return Error::msg(
                fmt::format("--headers-file {}: line {} is not 'Name: value'", path, line_no));
        std::string name = trim(std::string_view(line).substr(0, sep));
        std::string value = trim(std::string_view(line).substr(sep + 1));
        if (!header_ok(name, value))
            return Error::msg(fmt::format("--headers-file {}: line {}: '{}' is not a header name",
                                          path, line_no, name));
        out.push_back(name + ": " + value);
    }
    return out;
}

Attributes resource_attributes(const std::string& version, bool user_name) {
    Attributes a;
    a.emplace_back("service.name", "mcpwarden");
    if (!version.empty()) a.emplace_back("service.version", version);
    if (auto id = read_machine_id(); !id.empty()) a.emplace_back("host.id", id);
    char host[256] = {0};
    if (::gethostname(host, sizeof host - 1) == 0) a.emplace_back("host.name", std::string(host));
    if (user_name)
        if (passwd* pw = ::getpwuid(::geteuid()))
            a.emplace_back("user.name", std::string(pw->pw_name));
    return a;
}

Result<Settings> resolve_settings(const ExportRequest& rq, const EnvLookup& env) {
    Settings s;
    auto path = journal::resolve_path(rq.journal);
    if (!path) return path.error();
    s.journal = *path;
    s.follow = rq.follow;
    s.include_content = rq.include_content;
    s.translate.include_content = rq.include_content;
    if (rq.batch < 1 || rq.batch > 100000)
        return Error::msg(fmt::format("--batch {}: expected 1 to 100000 records", rq.batch));
    s.batch = static_cast<size_t>(rq.batch);
    s.poll_ms = std::max<int64_t>(rq.poll_ms, 1);
    s.resource = resource_attributes(rq.version, rq.user_name);
    if (!rq.syslog.empty() && !rq.otlp_endpoint.empty())
        return Error::msg(
            "export: --otlp and --syslog name two destinations: run one exporter "
            "for each (with its own --name)");
    s.name = rq.name.empty() ? (rq.syslog.empty() ? "otlp" : "syslog") : rq.name;
    if (!journal::valid_destination_name(s.name))
        return Error::msg(fmt::format("--name '{}': use 1-64 of A-Z a-z 0-9 . _ -", s.name));
    if (!rq.syslog.empty()) {
        auto t = parse_syslog_url(rq.syslog);
        if (!t) return t.error();
        t->files = {rq.ca_file, rq.client_cert, rq.client_key};
        s.syslog = *t;
        s.target = "syslog " + rq.syslog;
        return s;
    }
    std::vector<std::string> file_headers;
    if (!rq.headers_file.empty()) {
        auto h = read_headers_file(rq.headers_file);
        if (!h) return h.error();
        file_headers = std::move(*h);
    }
    bool traces = false, logs = false, metrics = false;
    std::string_view list = rq.signals;
    while (!list.empty()) {
        auto comma = list.find(',');
        std::string sig = trim(list.substr(0, comma));
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        if (sig == "traces")
            traces = true;
        else if (sig == "logs")
            logs = true;
        else if (sig == "metrics")
            metrics = true;
        else if (!sig.empty())
            return Error::msg(
                fmt::format("--signals '{}': expected traces, logs, metrics", rq.signals));
    }
    if (!traces && !logs && !metrics)
        return Error::msg(fmt::format("--signals '{}': names no signal", rq.signals));
    struct {
        bool on;
        OtlpSignal* out;
        const char* env_name;
        const char* path;
    } const all[] = {{traces, &s.traces, "TRACES", "/v1/traces"},
                     {logs, &s.logs, "LOGS", "/v1/logs"},
                     {metrics, &s.metrics, "METRICS", "/v1/metrics"}};
    for (const auto& sig : all) {
        if (!sig.on) continue;
        auto r = resolve_signal(rq, env, sig.env_name, sig.path, file_headers);
        if (!r) return r.error();
        *sig.out = std::move(*r);
    }
    s.translate.traces = traces;
    s.translate.logs = logs;
    s.translate.metrics = metrics;
    const OtlpSignal& first = traces ? s.traces : logs ? s.logs : s.metrics;
    s.target = "otlp " + first.http.url;
    return s;
}

}  // namespace warden::exporter
