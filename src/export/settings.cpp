#include "export/settings.hpp"

#include <pwd.h>
#include <unistd.h>

#include <strings.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdlib>

#include <fmt/format.h>

#include "export/libcurl.hpp"
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
    auto lib = libcurl();
    if (!lib) return Error::msg(fmt::format("{} '{}': {}", what, url, lib.error().message));
    const Libcurl& c = **lib;
    CURLU* u = c.url();
    CURLUcode rc = c.url_set(u, CURLUPART_URL, url.c_str(), 0);
    char* scheme = nullptr;
    char* host = nullptr;
    if (rc == CURLUE_OK) c.url_get(u, CURLUPART_SCHEME, &scheme, 0);
    if (rc == CURLUE_OK) c.url_get(u, CURLUPART_HOST, &host, 0);
    std::string s = scheme ? scheme : "", h = host ? host : "";
    c.free(scheme);
    c.free(host);
    c.url_cleanup(u);
    if (rc != CURLUE_OK)
        return Error::msg(fmt::format("{} '{}': not a URL ({})", what, url, c.url_strerror(rc)));
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

// Where each value comes from: the flag (in the request), the variables, the settings file.
struct Sources {
    const ExportRequest& rq;
    const EnvLookup& env;
    const ConfigLookup& config;

    std::optional<ConfigValue> file(std::string_view key) const {
        return config ? config(key) : std::nullopt;
    }
    // The flag's value, else the file's; with what to call it in a message.
    std::optional<std::pair<std::string, std::string>> flag_or_file(const std::string& flag,
                                                                    std::string_view key) const {
        if (!flag.empty()) return std::pair{"--" + std::string(key), flag};
        if (auto v = file(key)) return std::pair{v->where + ": " + std::string(key), v->text};
        return std::nullopt;
    }
};

std::string base_url(std::string base, const char* path) {
    return (base.ends_with("/") ? base.substr(0, base.size() - 1) : base) + path;
}

// The request's headers: the general variable, the per-signal one, then the file's; a later
// one of the same name replaces an earlier one.
Result<std::vector<std::string>> merged_headers(const EnvLookup& env, const char* signal,
                                                const std::vector<std::string>& file_headers) {
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
    std::vector<std::string> out;
    for (size_t i = 0; i < headers.size(); ++i) {
        std::string name = headers[i].substr(0, headers[i].find(':'));
        bool replaced = false;
        for (size_t j = i + 1; j < headers.size(); ++j)
            if (strncasecmp(headers[j].c_str(), (name + ":").c_str(), name.size() + 1) == 0)
                replaced = true;
        if (!replaced) out.push_back(headers[i]);
    }
    return out;
}

Result<OtlpSignal> resolve_signal(const Sources& src, const char* signal, const char* path,
                                  const std::vector<std::string>& file_headers) {
    const ExportRequest& rq = src.rq;
    const EnvLookup& env = src.env;
    OtlpSignal out;
    out.enabled = true;
    std::string per_signal = signal_var(signal, "ENDPOINT");
    if (!rq.otlp_endpoint.empty()) {
        if (auto st = check_url("--otlp", rq.otlp_endpoint); !st) return st.error();
        out.http.url = base_url(rq.otlp_endpoint, path);
    } else if (auto v = env(per_signal.c_str()); v && !v->empty()) {
        if (auto st = check_url(per_signal, *v); !st) return st.error();
        out.http.url = *v;
    } else if (auto b = env("OTEL_EXPORTER_OTLP_ENDPOINT"); b && !b->empty()) {
        if (auto st = check_url("OTEL_EXPORTER_OTLP_ENDPOINT", *b); !st) return st.error();
        out.http.url = base_url(*b, path);
    } else if (auto f = src.file("otlp")) {
        if (auto st = check_url(f->where + ": otlp", f->text); !st) return st.error();
        out.http.url = base_url(f->text, path);
    } else {
        return Error::msg(
            "export: no receiver: give --otlp URL or --syslog URL, set "
            "OTEL_EXPORTER_OTLP_ENDPOINT, or otlp or syslog in config.toml's [export]");
    }
    auto headers = merged_headers(env, signal, file_headers);
    if (!headers) return headers.error();
    out.http.headers = std::move(*headers);
    if (auto t = otel_var(env, signal, "TIMEOUT")) {
        int64_t ms = 0;
        auto [p, ec] = std::from_chars(t->second.data(), t->second.data() + t->second.size(), ms);
        if (ec != std::errc() || p != t->second.data() + t->second.size() || ms <= 0)
            return Error::msg(fmt::format("{} '{}': expected milliseconds, a positive integer",
                                          t->first, t->second));
        out.http.timeout_ms = ms;
    } else if (auto f = src.file("timeout")) {
        out.http.timeout_ms = parse_millis(f->text).value_or(out.http.timeout_ms);
    }
    std::optional<std::pair<std::string, std::string>> protocol;
    if (!rq.protocol.empty())
        protocol = std::pair{std::string("--protocol"), rq.protocol};
    else if (auto p = otel_var(env, signal, "PROTOCOL"))
        protocol = p;
    else if (auto f = src.file("protocol"))
        protocol = std::pair{f->where + ": protocol", f->text};
    if (!protocol || protocol->second == "http/protobuf")
        out.encoding = Encoding::protobuf;
    else if (protocol->second == "http/json")
        out.encoding = Encoding::json;
    else
        return Error::msg(
            fmt::format("{} '{}': mcpwarden sends http/protobuf or http/json "
                        "(grpc is not supported)",
                        protocol->first, protocol->second));
    std::optional<std::pair<std::string, std::string>> compression =
        otel_var(env, signal, "COMPRESSION");
    if (!compression)
        if (auto f = src.file("compression"))
            compression = std::pair{f->where + ": compression", f->text};
    if (compression) {
        if (compression->second == "none")
            out.http.gzip = false;
        else if (compression->second != "gzip")
            return Error::msg(fmt::format("{} '{}': expected gzip or none", compression->first,
                                          compression->second));
    }
    // TLS files: the flag, the variable, the settings file.
    struct {
        const std::string& flag;
        const char* var;
        std::string_view key;
        std::string& out;
    } const files[] = {
        {rq.ca_file, "CERTIFICATE", "ca-file", out.http.tls.ca_file},
        {rq.client_cert, "CLIENT_CERTIFICATE", "client-cert", out.http.tls.client_cert},
        {rq.client_key, "CLIENT_KEY", "client-key", out.http.tls.client_key}};
    for (const auto& f : files) {
        if (!f.flag.empty())
            f.out = f.flag;
        else if (auto v = otel_var(env, signal, f.var))
            f.out = v->second;
        else if (auto c = src.file(f.key))
            f.out = c->text;
    }
    return out;
}

struct SignalChoice {
    bool traces = false, logs = false, metrics = false;
};

// "traces,logs,metrics" or any of them; `what` names where the list came from.
Result<SignalChoice> parse_signals(const std::string& what, std::string_view list) {
    SignalChoice c;
    const std::string whole(list);
    while (!list.empty()) {
        auto comma = list.find(',');
        std::string sig = trim(list.substr(0, comma));
        list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 1);
        if (sig == "traces")
            c.traces = true;
        else if (sig == "logs")
            c.logs = true;
        else if (sig == "metrics")
            c.metrics = true;
        else if (!sig.empty())
            return Error::msg(fmt::format("{} '{}': expected traces, logs, metrics", what, whole));
    }
    if (!c.traces && !c.logs && !c.metrics)
        return Error::msg(fmt::format("{} '{}': names no signal", what, whole));
    return c;
}

constexpr ConfigKey kConfigKeys[] = {
    {"name", ConfigKind::name, false},
    {"journal", ConfigKind::path, false},
    {"otlp", ConfigKind::url, true},
    {"syslog", ConfigKind::syslog_url, true},
    {"protocol", ConfigKind::protocol, true},
    {"compression", ConfigKind::compression, true},
    {"timeout", ConfigKind::millis, true, 1, 3600000},
    {"headers-file", ConfigKind::path, true},
    {"ca-file", ConfigKind::path, true},
    {"client-cert", ConfigKind::path, true},
    {"client-key", ConfigKind::path, true},
    {"signals", ConfigKind::signals, true},
    {"batch", ConfigKind::count, true, 1, 100000},
    {"poll-ms", ConfigKind::count, true, 1, 60000},
    {"retry-max", ConfigKind::millis, true, 100, 3600000},
    {"include-content", ConfigKind::boolean, true},
    {"user-name", ConfigKind::boolean, true},
    {"export-gap", ConfigKind::gap, false},
};

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

Result<std::vector<std::string>> read_headers_file(const std::string& path,
                                                   const std::string& what) {
    auto text = read_file(path);
    if (!text) return Error::msg(fmt::format("{} {}: {}", what, path, text.error().message));
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
                fmt::format("{} {}: line {} is not 'Name: value'", what, path, line_no));
        std::string name = trim(std::string_view(line).substr(0, sep));
        std::string value = trim(std::string_view(line).substr(sep + 1));
        if (!header_ok(name, value))
            return Error::msg(fmt::format("{} {}: line {}: '{}' is not a header name", what, path,
                                          line_no, name));
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

std::span<const ConfigKey> config_keys() {
    return kConfigKeys;
}

const ConfigKey* find_config_key(std::string_view key) {
    for (const ConfigKey& k : kConfigKeys)
        if (k.key == key) return &k;
    return nullptr;
}

std::optional<int64_t> parse_millis(std::string_view text) {
    int64_t n = 0;
    auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
    if (ec != std::errc() || n < 0 || p == text.data()) return std::nullopt;
    const std::string_view unit(p, static_cast<size_t>(text.data() + text.size() - p));
    constexpr std::pair<std::string_view, int64_t> kUnits[] = {
        {"", 1}, {"ms", 1}, {"s", 1000}, {"m", 60000}, {"h", 3600000}};
    for (const auto& [u, scale] : kUnits)
        if (unit == u) return n * scale;
    return std::nullopt;
}

std::string config_value_problem(const ConfigKey& k, const std::string& text) {
    const std::string key(k.key);
    auto range = [&](int64_t v) { return v >= k.min && v <= k.max; };
    switch (k.kind) {
        case ConfigKind::path:
            return text.empty() ? key + ": expected a path, not an empty string" : "";
        case ConfigKind::url:
            if (auto st = check_url(key, text); !st) return st.error().message;
            return "";
        case ConfigKind::syslog_url:
            if (auto t = parse_syslog_url(text, key); !t) return t.error().message;
            return "";
        case ConfigKind::protocol:
            return text == "http/protobuf" || text == "http/json"
                       ? ""
                       : key + " '" + text +
                             "': mcpwarden sends http/protobuf or http/json (grpc is not "
                             "supported)";
        case ConfigKind::compression:
            return text == "gzip" || text == "none"
                       ? ""
                       : key + " '" + text + "': expected gzip or none";
        case ConfigKind::millis:
            if (auto ms = parse_millis(text); ms && range(*ms)) return "";
            return fmt::format(
                "{} '{}': expected a duration from {}ms to {}ms (\"250ms\", "
                "\"10s\", \"5m\") or an integer of milliseconds",
                key, text, k.min, k.max);
        case ConfigKind::count: {
            int64_t n = 0;
            auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
            if (ec == std::errc() && p == text.data() + text.size() && range(n)) return "";
            return fmt::format("{} {}: expected {} to {}", key, text, k.min, k.max);
        }
        case ConfigKind::boolean:
            return text == "true" || text == "false" ? "" : key + ": expected true or false";
        case ConfigKind::signals:
            if (auto c = parse_signals(key, text); !c) return c.error().message;
            return "";
        case ConfigKind::gap:
            return text == "hold" || text == "allow"
                       ? ""
                       : key + " '" + text +
                             "': expected \"hold\" (keep what an exporter has not delivered) or "
                             "\"allow\"";
        case ConfigKind::name:
            return journal::valid_destination_name(text)
                       ? ""
                       : key + " '" + text + "': use 1-64 of A-Z a-z 0-9 . _ -";
    }
    return "";
}

namespace {

// The journal exported: the flag, else MCPWARDEN_JOURNAL (resolve_path reads it), else the
// file's, else the default.
Result<std::string> exported_journal(const Sources& src) {
    std::string journal = src.rq.journal;
    if (journal.empty() && !src.env("MCPWARDEN_JOURNAL").value_or("").size())
        if (auto f = src.file("journal")) journal = f->text;
    return journal::resolve_path(journal);
}

// A number: the flag (0: not given), else the file (checked when it was read), else the
// default.
Result<int64_t> flag_file_or_default(const Sources& src, int64_t flag, std::string_view key,
                                     int64_t fallback) {
    if (flag == 0) {
        auto f = src.file(key);
        return f ? std::stoll(f->text) : fallback;
    }
    const ConfigKey& range = *find_config_key(key);
    if (flag < range.min || flag > range.max)
        return Error::msg(
            fmt::format("--{} {}: expected {} to {}", key, flag, range.min, range.max));
    return flag;
}

// How much, how often and how patiently: --batch, --poll-ms and --retry-max.
Status resolve_pace(const Sources& src, Settings& s) {
    auto batch = flag_file_or_default(src, src.rq.batch, "batch", 512);
    if (!batch) return batch.error();
    s.batch = static_cast<size_t>(*batch);
    auto poll = flag_file_or_default(src, src.rq.poll_ms, "poll-ms", 100);
    if (!poll) return poll.error();
    s.poll_ms = *poll;
    if (auto r = src.flag_or_file(src.rq.retry_max, "retry-max")) {
        auto ms = parse_millis(r->second);
        const ConfigKey& range = *find_config_key("retry-max");
        if (!ms || *ms < range.min || *ms > range.max)
            return Error::msg(fmt::format("{} '{}': {}", r->first, r->second,
                                          "expected a duration from 100ms to 1h (\"250ms\", "
                                          "\"10s\", \"5m\")"));
        s.retry_max_ms = *ms;
    }
    return {};
}

// The syslog receiver with what to call it in a message, when syslog is the destination: the
// flag, else (no --otlp, no OTLP variable) the file's when its layer is higher than any layer
// naming an OTLP endpoint (a layer naming both was refused when the file was read).
std::optional<std::pair<std::string, std::string>> chosen_syslog(const Sources& src) {
    if (!src.rq.syslog.empty()) return std::pair{std::string("--syslog"), src.rq.syslog};
    if (!src.rq.otlp_endpoint.empty()) return std::nullopt;
    for (const char* v :
         {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
          "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"})
        if (!src.env(v).value_or("").empty()) return std::nullopt;
    auto file_syslog = src.file("syslog");
    auto file_otlp = src.file("otlp");
    if (file_syslog && (!file_otlp || file_syslog->layer < file_otlp->layer))
        return std::pair{file_syslog->where + ": syslog", file_syslog->text};
    return std::nullopt;
}

// The exporter's name (its position file's): the flag, else the file's, else the kind of
// destination.
Result<std::string> exporter_name(const Sources& src, bool syslog) {
    std::string name = src.rq.name;
    if (name.empty())
        if (auto f = src.file("name")) name = f->text;
    if (name.empty()) name = syslog ? "syslog" : "otlp";
    if (!journal::valid_destination_name(name))
        return Error::msg(fmt::format("--name '{}': use 1-64 of A-Z a-z 0-9 . _ -", name));
    return name;
}

// The syslog destination: its URL, with the TLS files of the flags or the file over the
// URL's own.
Status resolve_syslog(const Sources& src, const std::pair<std::string, std::string>& syslog,
                      Settings& s) {
    auto t = parse_syslog_url(syslog.second, syslog.first);
    if (!t) return t.error();
    std::string* files[] = {&t->files.ca_file, &t->files.client_cert, &t->files.client_key};
    std::pair<const std::string*, std::string_view> given[] = {{&src.rq.ca_file, "ca-file"},
                                                               {&src.rq.client_cert, "client-cert"},
                                                               {&src.rq.client_key, "client-key"}};
    for (size_t i = 0; i < 3; ++i)
        if (auto v = src.flag_or_file(*given[i].first, given[i].second)) *files[i] = v->second;
    s.syslog = *t;
    s.target = "syslog " + syslog.second;
    return {};
}

// The OTLP destination: each signal chosen (--signals, else the file's, else all three) with
// its endpoint and headers (the headers file's come last).
Status resolve_otlp(const Sources& src, Settings& s) {
    std::vector<std::string> file_headers;
    if (auto hf = src.flag_or_file(src.rq.headers_file, "headers-file")) {
        auto h = read_headers_file(hf->second, hf->first);
        if (!h) return h.error();
        file_headers = std::move(*h);
    }
    std::string list = "traces,logs,metrics";
    std::string list_from = "--signals";
    if (auto l = src.flag_or_file(src.rq.signals, "signals")) std::tie(list_from, list) = *l;
    auto signals = parse_signals(list_from, list);
    if (!signals) return signals.error();
    const auto [traces, logs, metrics] = *signals;
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
        auto r = resolve_signal(src, sig.env_name, sig.path, file_headers);
        if (!r) return r.error();
        *sig.out = std::move(*r);
    }
    s.translate.traces = traces;
    s.translate.logs = logs;
    s.translate.metrics = metrics;
    const OtlpSignal& first = traces ? s.traces : logs ? s.logs : s.metrics;
    s.target = "otlp " + first.http.url;
    return {};
}

}  // namespace

Result<Settings> resolve_settings(const ExportRequest& rq, const EnvLookup& env,
                                  const ConfigLookup& config) {
    const Sources src{rq, env, config};
    Settings s;
    auto path = exported_journal(src);
    if (!path) return path.error();
    s.journal = *path;
    s.follow = rq.follow;
    auto file_switch = [&](std::string_view key) {
        auto f = src.file(key);
        return f && f->text == "true";
    };
    s.include_content = rq.include_content || file_switch("include-content");
    s.translate.include_content = s.include_content;
    if (auto st = resolve_pace(src, s); !st) return st.error();
    s.resource = resource_attributes(rq.version, rq.user_name || file_switch("user-name"));
    if (!rq.syslog.empty() && !rq.otlp_endpoint.empty())
        return Error::msg(
            "export: --otlp and --syslog name two destinations: run one exporter "
            "for each (with its own --name)");
    const auto syslog = chosen_syslog(src);
    auto name = exporter_name(src, syslog.has_value());
    if (!name) return name.error();
    s.name = std::move(*name);
    auto st = syslog ? resolve_syslog(src, *syslog, s) : resolve_otlp(src, s);
    if (!st) return st.error();
    return s;
}

}  // namespace warden::exporter
