#include "export/syslog.hpp"

#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <charconv>
#include <ctime>

#include <fmt/format.h>

#include "sys/fd.hpp"

namespace warden::exporter {

namespace {

// PRI = facility × 8 + severity; facility 1 (user-level).
int severity_of_kind(const std::string& kind, const Json& data) {
    if (kind == "journal.degraded" || kind == "journal.export_held") return 4;  // warning
    if (kind == "session.end") {
        auto td = data.find("teardown");
        if (td != data.end() && td->is_object() && td->contains("counts") &&
            (*td)["counts"].value("survivors", int64_t{0}) > 0)
            return 3;  // error
    }
    if (kind == "sandbox.denied" || kind == "activity.abandoned" || kind == "session.orphaned")
        return 4;
    return 6;  // informational
}

std::string rfc3339(int64_t ns) {
    time_t s = static_cast<time_t>(ns / 1'000'000'000);
    struct tm tm;
    gmtime_r(&s, &tm);
    return fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:06}Z", tm.tm_year + 1900,
                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                       (ns % 1'000'000'000) / 1000);
}

// PARAM-VALUE escapes '"', '\' and ']' (RFC 5424 6.3.3).
std::string sd_value(std::string_view v) {
    std::string out;
    for (char c : v) {
        if (c == '"' || c == '\\' || c == ']') out.push_back('\\');
        out.push_back(c);
    }
    return out;
}

// HOSTNAME and MSGID: printable US-ASCII, no spaces, bounded.
std::string header_token(std::string_view v, size_t max) {
    std::string out;
    for (char c : v.substr(0, max))
        out.push_back(c > 32 && c < 127 ? c : '_');
    return out.empty() ? "-" : out;
}

std::string openssl_error() {
    unsigned long e = ERR_get_error();
    if (e == 0) return "unknown error";
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    return buf;
}

}  // namespace

Result<SyslogTarget> parse_syslog_url(std::string_view url, std::string_view what) {
    SyslogTarget t;
    auto bad = [&](std::string_view why) {
        return Error::msg(
            fmt::format("{} {}: {} (expected tcp://HOST:PORT or tls://HOST:PORT)", what, url, why));
    };
    std::string_view rest;
    if (url.starts_with("tcp://")) {
        rest = url.substr(6);
    } else if (url.starts_with("tls://")) {
        rest = url.substr(6);
        t.tls = true;
    } else {
        return bad("unknown scheme");
    }
    size_t colon;
    if (rest.starts_with("[")) {
        auto close = rest.find(']');
        if (close == std::string_view::npos) return bad("unclosed [");
        t.host = std::string(rest.substr(1, close - 1));
        colon = close + 1;
        if (colon >= rest.size() || rest[colon] != ':') return bad("no port");
    } else {
        colon = rest.rfind(':');
        if (colon == std::string_view::npos) return bad("no port");
        t.host = std::string(rest.substr(0, colon));
    }
    auto port = rest.substr(colon + 1);
    auto [p, ec] = std::from_chars(port.data(), port.data() + port.size(), t.port);
    if (ec != std::errc() || p != port.data() + port.size() || t.port < 1 || t.port > 65535)
        return bad("the port is not a number from 1 to 65535");
    if (t.host.empty()) return bad("no host");
    return t;
}

std::string syslog_frame(const ExportRecord& er, const std::string& hostname,
                         bool include_content) {
    const auto& r = er.record;
    Json body = Json::parse(r.body, nullptr, false);
    Json data = body.is_object() && body.contains("data") ? body["data"] : Json::object();
    if (!include_content && data.is_object()) data.erase("arguments");
    std::string msg = fmt::format(
        "<{}>1 {} {} mcpwarden - {} [mcpwarden@32473 seq=\"{}\" id=\"{}\" session=\"{}\" "
        "origin=\"{}\"] ",
        8 + severity_of_kind(r.kind, data), rfc3339(r.ts), header_token(hostname, 255),
        header_token(r.kind, 32), r.seq, er.leaf_hex, sd_value(r.session), sd_value(r.origin));
    msg += "\xEF\xBB\xBF";  // the MSG is UTF-8 (RFC 5424 6.4: BOM)
    msg += data.dump(-1, ' ', false, Json::error_handler_t::replace);
    return fmt::format("{} {}", msg.size(), msg);
}

struct SyslogConnection::Impl {
    Fd fd;
    SSL_CTX* ctx = nullptr;
    SSL* ssl = nullptr;
    ~Impl() {
        if (ssl) SSL_free(ssl);
        if (ctx) SSL_CTX_free(ctx);
    }
};

SyslogConnection::SyslogConnection(SyslogTarget target) : target_(std::move(target)) {}
SyslogConnection::~SyslogConnection() = default;

void SyslogConnection::close() {
    impl_.reset();
}

Status SyslogConnection::connect() {
    certificate_refused_ = false;
    auto impl = std::make_unique<Impl>();
    const std::string where = fmt::format("syslog {}:{}", target_.host, target_.port);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string port = std::to_string(target_.port);
    if (int rc = ::getaddrinfo(target_.host.c_str(), port.c_str(), &hints, &res); rc != 0)
        return Error::msg(fmt::format("{}: cannot resolve: {}", where, gai_strerror(rc)));
    int err = 0;
    for (addrinfo* a = res; a; a = a->ai_next) {
        int s = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (s < 0) {
            err = errno;
            continue;
        }
        if (::connect(s, a->ai_addr, a->ai_addrlen) == 0) {
            impl->fd = Fd(s);
            break;
        }
        err = errno;
        ::close(s);
    }
    ::freeaddrinfo(res);
    if (!impl->fd) return Error::sys("connect", where, err);
    timeval tv{static_cast<time_t>(target_.timeout_ms / 1000),
               static_cast<suseconds_t>((target_.timeout_ms % 1000) * 1000)};
    ::setsockopt(impl->fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    ::setsockopt(impl->fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    if (target_.tls) {
        impl->ctx = SSL_CTX_new(TLS_client_method());
        if (!impl->ctx) return Error::msg(fmt::format("{}: TLS: {}", where, openssl_error()));
        SSL_CTX_set_min_proto_version(impl->ctx, TLS1_2_VERSION);
        SSL_CTX_set_verify(impl->ctx, SSL_VERIFY_PEER, nullptr);
        int ok =
            target_.files.ca_file.empty()
                ? SSL_CTX_set_default_verify_paths(impl->ctx)
                : SSL_CTX_load_verify_locations(impl->ctx, target_.files.ca_file.c_str(), nullptr);
        if (ok != 1)
            return Error::msg(
                fmt::format("{}: TLS: cannot load the trust store {}: {}", where,
                            target_.files.ca_file.empty() ? "(system)" : target_.files.ca_file,
                            openssl_error()));
        if (!target_.files.client_cert.empty()) {
            if (SSL_CTX_use_certificate_chain_file(impl->ctx, target_.files.client_cert.c_str()) !=
                    1 ||
                SSL_CTX_use_PrivateKey_file(
                    impl->ctx,
                    (target_.files.client_key.empty() ? target_.files.client_cert
                                                      : target_.files.client_key)
                        .c_str(),
                    SSL_FILETYPE_PEM) != 1)
                return Error::msg(fmt::format("{}: TLS: client certificate {}: {}", where,
                                              target_.files.client_cert, openssl_error()));
        }
        impl->ssl = SSL_new(impl->ctx);
        SSL_set_fd(impl->ssl, impl->fd.get());
        // The name the certificate must carry: an IP address or a DNS name.
        X509_VERIFY_PARAM* param = SSL_get0_param(impl->ssl);
        if (X509_VERIFY_PARAM_set1_ip_asc(param, target_.host.c_str()) != 1) {
            X509_VERIFY_PARAM_set1_host(param, target_.host.c_str(), 0);
            SSL_set_tlsext_host_name(impl->ssl, target_.host.c_str());
        }
        if (SSL_connect(impl->ssl) != 1) {
            long v = SSL_get_verify_result(impl->ssl);
            certificate_refused_ = v != X509_V_OK;
            if (v != X509_V_OK)
                return Error::msg(fmt::format("{}: TLS: the receiver's certificate was refused: {}",
                                              where, X509_verify_cert_error_string(v)));
            return Error::msg(fmt::format("{}: TLS handshake failed: {}", where, openssl_error()));
        }
    }
    impl_ = std::move(impl);
    return {};
}

Status SyslogConnection::send(const std::string& frames) {
    const std::string where = fmt::format("syslog {}:{}", target_.host, target_.port);
    // A receiver that went away shows as a readable end of stream on an idle connection:
    // found before sending, so that a batch is not written into a dead connection.
    if (impl_) {
        pollfd p{impl_->fd.get(), POLLIN, 0};
        if (::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
            char c;
            ssize_t n = ::recv(impl_->fd.get(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
            if (n <= 0) close();
        }
    }
    if (!impl_)
        if (auto st = connect(); !st) return st;
    size_t off = 0;
    while (off < frames.size()) {
        ssize_t n;
        if (impl_->ssl) {
            n = SSL_write(impl_->ssl, frames.data() + off,
                          static_cast<int>(std::min<size_t>(frames.size() - off, 1 << 20)));
            if (n <= 0) {
                close();
                return Error::msg(fmt::format("{}: TLS write failed: {}", where, openssl_error()));
            }
        } else {
            n = ::send(impl_->fd.get(), frames.data() + off, frames.size() - off, MSG_NOSIGNAL);
            if (n < 0) {
                if (errno == EINTR) continue;
                int err = errno;
                close();
                return Error::sys("send", where, err);
            }
        }
        off += static_cast<size_t>(n);
    }
    return {};
}

}  // namespace warden::exporter
