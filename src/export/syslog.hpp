// Syslog for SIEMs that take nothing else: each journal record as one RFC 5424 message, sent
// over TCP with octet-counted framing (RFC 6587 3.4.1, the framing RFC 5425 mandates for TLS),
// in the clear (`tcp://HOST:PORT`) or over TLS (`tls://HOST:PORT`: the system's trust store
// or a CA file, the host name checked against the certificate, a client certificate when
// given).
//
// Syslog has no acknowledgement: a record counts as delivered once the receiver's kernel
// accepted it and the connection is still up after the batch (a zero-byte read that is not
// an end of stream). A receiver that dies with records in its socket buffer loses them; the
// position then still advances. OTLP (HTTP status per batch) does not have that gap.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "export/http.hpp"
#include "export/signals.hpp"
#include "sys/result.hpp"

namespace warden::exporter {

struct SyslogTarget {
    std::string host;
    int port = 0;
    bool tls = false;
    TlsFiles files;
    int64_t timeout_ms = 10000;
};

// "tcp://HOST:PORT" | "tls://HOST:PORT" ([v6] allowed); an error that names what is wrong
// and where the URL came from (`what`: the flag, or the settings file's line and key).
Result<SyslogTarget> parse_syslog_url(std::string_view url, std::string_view what = "--syslog");

// One framed message: "LEN <PRI>1 TIMESTAMP HOST mcpwarden - KIND [mcpwarden@32473 …] JSON".
// The structured data holds the seq, the record's hash (id: what a SIEM deduplicates on), the
// session and the origin; the message is the record's data as canonical JSON (redacted as
// recorded; argument previews only with include_content). 32473 is the private enterprise
// number RFC 5612 reserves for examples and documentation: mcpwarden has none of its own.
std::string syslog_frame(const ExportRecord& r, const std::string& hostname, bool include_content);

class SyslogConnection {
  public:
    explicit SyslogConnection(SyslogTarget target);
    ~SyslogConnection();
    SyslogConnection(const SyslogConnection&) = delete;
    SyslogConnection& operator=(const SyslogConnection&) = delete;

    // Sends the frames in order on the connection (made or made again first); an error
    // names the receiver and why (refused, certificate that does not match, closed).
    Status send(const std::string& frames);
    void close();
    // Whether the last connection failed because the receiver's certificate was refused.
    bool certificate_refused() const { return certificate_refused_; }

  private:
    Status connect();
    struct Impl;
    SyslogTarget target_;
    std::unique_ptr<Impl> impl_;
    bool certificate_refused_ = false;
};

}  // namespace warden::exporter
