#include "export/http.hpp"

#include <zlib.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <ctime>

#include <fmt/format.h>

#include "export/libcurl.hpp"

namespace warden::exporter {

namespace {

// The receiver's answer body (an Export*ServiceResponse) is not needed: its status says it.
size_t discard_body(char*, size_t size, size_t n, void*) {
    return size * n;
}

struct Headers {
    std::string retry_after;
};

size_t on_header(char* data, size_t size, size_t n, void* out) {
    std::string_view line(data, size * n);
    constexpr std::string_view kName = "retry-after:";
    if (line.size() > kName.size()) {
        bool match = true;
        for (size_t i = 0; i < kName.size(); ++i)
            if (std::tolower(static_cast<unsigned char>(line[i])) != kName[i]) match = false;
        if (match) {
            auto v = line.substr(kName.size());
            while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
                v.remove_prefix(1);
            while (!v.empty() && (v.back() == '\r' || v.back() == '\n' || v.back() == ' '))
                v.remove_suffix(1);
            static_cast<Headers*>(out)->retry_after = std::string(v);
        }
    }
    return size * n;
}

}  // namespace

HttpClient::HttpClient() {
    auto lib = libcurl();
    if (!lib) {
        unusable_ = lib.error().message;
        return;
    }
    curl_lib_ = *lib;
    curl_ = curl_lib_->easy_init();
    if (!curl_) unusable_ = "libcurl: cannot create a handle";
}

HttpClient::~HttpClient() {
    if (curl_) curl_lib_->easy_cleanup(curl_);
}

std::optional<int64_t> parse_retry_after_ms(std::string_view v, int64_t now_s) {
    int64_t seconds = 0;
    auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), seconds);
    if (ec == std::errc() && p == v.data() + v.size() && seconds >= 0) return seconds * 1000;
    std::string date(v);
    auto lib = libcurl();
    if (!lib) return std::nullopt;
    time_t t = (*lib)->getdate(date.c_str(), nullptr);
    if (t < 0) return std::nullopt;
    return std::max<int64_t>(0, (static_cast<int64_t>(t) - now_s) * 1000);
}

std::string gzip(std::string_view data) {
    z_stream z{};
    // windowBits 15 + 16: a gzip header and trailer rather than zlib's. Level 1: OTLP bodies
    // are repetitive (the same keys in every record) and shrink almost as much as at the
    // default level for a fraction of its CPU, which the exporter spends on every record.
    if (deflateInit2(&z, Z_BEST_SPEED, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return {};
    std::string out(deflateBound(&z, data.size()), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data.data()));
    z.avail_in = static_cast<uInt>(data.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    int rc = deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return rc == Z_STREAM_END ? out : std::string();
}

SendResult HttpClient::post(const HttpTarget& t, std::string_view content_type,
                            std::string_view body) {
    SendResult r;
    if (!curl_) {
        r.error = unusable_;
        r.retryable = curl_lib_ != nullptr;  // a library missing stays missing
        return r;
    }
    const Libcurl& c = *curl_lib_;
    std::string payload = t.gzip ? gzip(body) : std::string(body);
    curl_slist* headers = nullptr;
    headers = c.slist_append(headers, fmt::format("Content-Type: {}", content_type).c_str());
    if (t.gzip) headers = c.slist_append(headers, "Content-Encoding: gzip");
    headers = c.slist_append(headers, "Expect:");
    for (const auto& h : t.headers)
        headers = c.slist_append(headers, h.c_str());
    char errbuf[CURL_ERROR_SIZE] = {0};
    Headers got;
    c.easy_reset(curl_);
    c.easy_setopt(curl_, CURLOPT_URL, t.url.c_str());
    c.easy_setopt(curl_, CURLOPT_POST, 1L);
    c.easy_setopt(curl_, CURLOPT_POSTFIELDS, payload.data());
    c.easy_setopt(curl_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(payload.size()));
    c.easy_setopt(curl_, CURLOPT_HTTPHEADER, headers);
    c.easy_setopt(curl_, CURLOPT_TIMEOUT_MS, static_cast<long>(t.timeout_ms));
    c.easy_setopt(curl_, CURLOPT_NOSIGNAL, 1L);
    c.easy_setopt(curl_, CURLOPT_ERRORBUFFER, errbuf);
    c.easy_setopt(curl_, CURLOPT_WRITEFUNCTION, discard_body);
    c.easy_setopt(curl_, CURLOPT_HEADERFUNCTION, on_header);
    c.easy_setopt(curl_, CURLOPT_HEADERDATA, &got);
    // Only http and https, and no redirects: a receiver that moves is a configuration to fix.
    c.easy_setopt(curl_, CURLOPT_PROTOCOLS_STR, "http,https");
    c.easy_setopt(curl_, CURLOPT_FOLLOWLOCATION, 0L);
    c.easy_setopt(curl_, CURLOPT_SSL_VERIFYPEER, 1L);
    c.easy_setopt(curl_, CURLOPT_SSL_VERIFYHOST, 2L);
    if (!t.tls.ca_file.empty()) c.easy_setopt(curl_, CURLOPT_CAINFO, t.tls.ca_file.c_str());
    if (!t.tls.client_cert.empty())
        c.easy_setopt(curl_, CURLOPT_SSLCERT, t.tls.client_cert.c_str());
    if (!t.tls.client_key.empty()) c.easy_setopt(curl_, CURLOPT_SSLKEY, t.tls.client_key.c_str());
    CURLcode rc = c.easy_perform(curl_);
    c.slist_free_all(headers);
    if (rc != CURLE_OK) {
        r.error = fmt::format("POST {}: {}", t.url, errbuf[0] ? errbuf : c.easy_strerror(rc));
        // A certificate that does not match or is not trusted does not get better by waiting:
        // said at once (a follower still tries again, slowly, for the receiver's may be
        // replaced); a refused connection or a timeout does.
        r.retryable = rc != CURLE_PEER_FAILED_VERIFICATION && rc != CURLE_SSL_CACERT_BADFILE &&
                      rc != CURLE_SSL_CERTPROBLEM && rc != CURLE_SSL_ISSUER_ERROR &&
                      rc != CURLE_URL_MALFORMAT && rc != CURLE_UNSUPPORTED_PROTOCOL;
        return r;
    }
    c.easy_getinfo(curl_, CURLINFO_RESPONSE_CODE, &r.status);
    if (r.status >= 200 && r.status < 300) {
        r.ok = true;
        return r;
    }
    if (!got.retry_after.empty())
        if (auto ms =
                parse_retry_after_ms(got.retry_after, static_cast<int64_t>(std::time(nullptr))))
            r.retry_after_ms = *ms;
    r.retryable = r.status == 429 || r.status == 502 || r.status == 503 || r.status == 504;
    r.too_large = r.status == 413;
    r.error =
        fmt::format("POST {}: HTTP {}{}", t.url, r.status,
                    r.retry_after_ms >= 0 ? fmt::format(" (Retry-After {} ms)", r.retry_after_ms)
                                          : std::string());
    return r;
}

}  // namespace warden::exporter
