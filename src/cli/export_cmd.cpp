// `mcpwarden export [--follow] (--otlp URL | --syslog tcp|tls://HOST:PORT) …`: the journal's
// records to an OpenTelemetry or syslog receiver, in order, from a position kept beside the
// journal (docs/EXPORT.md). A top-level command: `journal export` writes lines to stdout
// once; this one delivers them and keeps its place.
#include <csignal>
#include <cstdio>
#include <string>

#include "command.hpp"
#include "mcpwarden/exporter.hpp"
#include "mcpwarden/mcpwarden.hpp"

namespace warden::cli {
namespace {

std::atomic<bool> g_export_stop{false};

void on_stop_signal(int) {
    g_export_stop.store(true);
}

int run_export_follow(ExportRequest rq) {
    rq.version = api::build_info().version;
    struct sigaction sa {};
    sa.sa_handler = on_stop_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGTERM, SIGINT, SIGHUP})
        ::sigaction(sig, &sa, nullptr);
    auto r = api::export_run(rq, g_export_stop);
    if (!r) {
        std::fprintf(stderr, "mcpwarden export: %s\n", r.error().message.c_str());
        return r.error().code == EINVAL ? 2 : 1;
    }
    std::fprintf(stderr, "mcpwarden export: %lld records delivered; position %lld\n",
                 static_cast<long long>(r->sent), static_cast<long long>(r->position));
    return 0;
}

const Command export_cmd(305, [](CLI::App& app) {
    static ExportRequest rq;
    auto* sub = app.add_subcommand(
        "export",
        "Send the journal to an OpenTelemetry (OTLP/HTTP) or syslog receiver, in order, "
        "resuming where it stopped");
    sub->add_flag("--follow", rq.follow, "Keep following the journal (else stop at its end)");
    sub->add_option("--otlp", rq.otlp_endpoint,
                    "OTLP/HTTP base URL (default: $OTEL_EXPORTER_OTLP_ENDPOINT)");
    sub->add_option("--syslog", rq.syslog, "Syslog receiver: tcp://HOST:PORT or tls://HOST:PORT");
    sub->add_option("--name", rq.name,
                    "Name of this destination, whose position is kept (default otlp or syslog)");
    sub->add_option("--protocol", rq.protocol,
                    "http/protobuf or http/json (default: $OTEL_EXPORTER_OTLP_PROTOCOL, else "
                    "http/protobuf)");
    sub->add_option("--headers-file", rq.headers_file,
                    "HTTP headers, one 'Name: value' a line (tokens stay off the command line)");
    sub->add_option("--ca-file", rq.ca_file, "CA certificates to trust instead of the system's");
    sub->add_option("--client-cert", rq.client_cert, "Client certificate (PEM) for TLS");
    sub->add_option("--client-key", rq.client_key, "Its private key (PEM)");
    sub->add_option("--signals", rq.signals, "OTLP signals to send (default traces,logs,metrics)");
    sub->add_option("--batch", rq.batch, "Records per request at most (512)");
    sub->add_option("--retry-max", rq.retry_max,
                    "Longest wait between two attempts after failures (60s; 100ms to 1h)");
    sub->add_option("--poll-ms", rq.poll_ms,
                    "How often a caught-up --follow looks for new records (100)");
    sub->add_flag("--include-content", rq.include_content,
                  "Send argument previews (redacted as recorded); off by default");
    sub->add_flag("--user-name", rq.user_name, "Add user.name to the resource attributes");
    sub->add_option("--journal", rq.journal,
                    "Journal database (default: $MCPWARDEN_JOURNAL or "
                    "$XDG_STATE_HOME/mcpwarden/journal.db)");
    return Bound{sub, [] { return run_export_follow(rq); }};
});

}  // namespace
}  // namespace warden::cli
