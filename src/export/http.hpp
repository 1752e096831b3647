// One HTTP/1.1 or HTTP/2 connection (libcurl, kept alive between requests) that POSTs OTLP
// bodies, gzip'd, over TLS where the URL says https: the system's trust store, or a CA file,
// and a client certificate when one is given. What comes back is classified the way the
// OTLP/HTTP specification asks: 2xx delivered; 429, 502, 503, 504 and transport failures
// retryable, honouring Retry-After; anything else a failure the user must fix.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

typedef void CURL;

namespace warden::exporter {

struct Libcurl;  // export/libcurl.hpp

struct TlsFiles {
    std::string ca_file;      // PEM bundle to trust instead of the system store
    std::string client_cert;  // PEM certificate presented to the receiver
    std::string client_key;   // its private key
};

struct HttpTarget {
    std::string url;
    std::vector<std::string> headers;  // "Name: value"
    int64_t timeout_ms = 10000;
    bool gzip = true;
    TlsFiles tls;
};

struct SendResult {
    bool ok = false;
    bool retryable = false;
    bool too_large = false;       // 413: send fewer records at once
    int64_t retry_after_ms = -1;  // from Retry-After, when the receiver said
    long status = 0;              // HTTP status, 0 when none came back
    std::string error;            // what failed, on which URL, and why
};

class HttpClient {
  public:
    HttpClient();
    ~HttpClient();
    HttpClient(const HttpClient&) = delete;
    HttpClient& operator=(const HttpClient&) = delete;

    SendResult post(const HttpTarget& target, std::string_view content_type, std::string_view body);

  private:
    const Libcurl* curl_lib_ = nullptr;
    CURL* curl_ = nullptr;
    std::string unusable_;  // why there is no handle
};

// Retry-After: delta seconds, or an HTTP date (then relative to `now_s`); nullopt when neither.
std::optional<int64_t> parse_retry_after_ms(std::string_view value, int64_t now_s);
// gzip (RFC 1952) of `data`.
std::string gzip(std::string_view data);

}  // namespace warden::exporter
