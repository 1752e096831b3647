// `mcpwarden export` against a real OTLP receiver (tests/otlp-receiver: node with the
// OpenTelemetry project's generated OTLP decoder, as a Collector decodes): every record
// arrives once and in order, as protobuf and as JSON, with the MCP conventions' attributes
// and the client's span as parent; through a receiver stopped and restarted, an exporter
// SIGKILLed between send and acknowledgement, a 429 with Retry-After, and a certificate that
// does not match.
#include <signal.h>
#include <sys/stat.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "export/harness.hpp"

namespace warden::testing {
namespace {

using nlohmann::json;

#define SKIP_WITHOUT_RECEIVER()                                      \
    if (!have_receiver())                                            \
    GTEST_SKIP() << "tests/otlp-receiver/node_modules missing: run " \
                    "scripts/deps.sh"

// Each record once, in seq order, with its hash as log.record.uid.
void expect_each_record_once_in_order(const std::vector<JournalRow>& rows, const Receiver& r) {
    auto logs = r.items("log");
    ASSERT_EQ(logs.size(), rows.size());
    for (size_t i = 0; i < rows.size(); ++i) {
        const auto& a = logs[i]["attributes"];
        EXPECT_EQ(a.value("mcpwarden.seq", int64_t{0}), rows[i].seq) << i;
        EXPECT_EQ(a.value("log.record.uid", ""), rows[i].hash) << i;
        EXPECT_EQ(logs[i].value("eventName", ""), "mcp.audit." + rows[i].kind) << i;
        EXPECT_TRUE(logs[i]["violations"].empty()) << logs[i].dump();
    }
}

void expect_spans_follow_conventions(const Receiver& r) {
    auto spans = r.items("span");
    std::map<std::string, json> by_name;
    for (const auto& s : spans) {
        EXPECT_TRUE(s["violations"].empty()) << s.dump();
        by_name[s["name"]] = s;
    }
    ASSERT_TRUE(by_name.count("initialize")) << json(spans).dump();
    ASSERT_TRUE(by_name.count("tools/call echo")) << json(spans).dump();
    ASSERT_TRUE(by_name.count("tools/call no-such-tool")) << json(spans).dump();
    const json& traced = by_name["tools/call echo"];
    // The client's trace context: its trace, its span as the parent.
    EXPECT_EQ(traced["traceId"], "0af7651916cd43dd8448eb211c80319c");
    EXPECT_EQ(traced["parentSpanId"], "b7ad6b7169203331");
    EXPECT_EQ(traced["attributes"]["mcp.method.name"], "tools/call");
    EXPECT_EQ(traced["attributes"]["gen_ai.tool.name"], "echo");
    EXPECT_EQ(traced["attributes"]["jsonrpc.request.id"], "2");
    EXPECT_EQ(traced["kind"], 2);
    const json& refused = by_name["tools/call no-such-tool"];
    EXPECT_EQ(refused["status"]["code"], 2);
    EXPECT_EQ(refused["attributes"]["rpc.response.status_code"],
              refused["attributes"]["error.type"]);
    // Without trace context: the session's trace, under the session's span.
    const json* session = nullptr;
    for (const auto& s : spans)
        if (s["name"].get<std::string>().starts_with("mcpwarden.session")) session = &s;
    ASSERT_NE(session, nullptr);
    EXPECT_EQ(refused["traceId"], (*session)["traceId"]);
    EXPECT_EQ(refused["parentSpanId"], (*session)["spanId"]);
    EXPECT_EQ(refused["attributes"]["mcp.session.id"], (*session)["attributes"]["mcp.session.id"]);
    bool teardown = false;
    for (const auto& e : (*session)["events"])
        teardown |= e["name"] == "mcpwarden.teardown";
    EXPECT_TRUE(teardown) << session->dump();
    const json& resource = traced["resource"];
    EXPECT_EQ(resource["service.name"], "mcpwarden");
    EXPECT_TRUE(resource.contains("host.name") && resource.contains("host.id")) << resource.dump();
    EXPECT_FALSE(resource.contains("user.name")) << "only when asked for";
}

TEST(ExportOtlp, EveryRecordOnceInOrderAsProtobufAndJson) {
    SKIP_WITHOUT_RECEIVER();
    TempDir dir;
    const std::string db = dir.file("j.db");
    ASSERT_TRUE(run_session(dir, db));
    auto rows = journal_rows(db);
    ASSERT_GT(rows.size(), 10u);
    for (const char* protocol : {"http/protobuf", "http/json"}) {
        SCOPED_TRACE(protocol);
        Receiver r(dir, protocol[5] == 'p' ? "pb" : "js");
        // The protocol from the environment, as an OpenTelemetry SDK reads it.
        auto run =
            export_cli(dir, db, {"--otlp", r.url(), "--name", protocol[5] == 'p' ? "pb" : "js"},
                       {{"OTEL_EXPORTER_OTLP_PROTOCOL", protocol}});
        ASSERT_EQ(run.code, 0) << run.err;
        for (const auto& i : r.items())
            EXPECT_EQ(i.value("encoding", ""), protocol + 5) << i.dump();
        expect_each_record_once_in_order(rows, r);
        expect_spans_follow_conventions(r);
        bool duration = false;
        for (const auto& m : r.items("metric"))
            duration |= m["name"] == "mcp.server.operation.duration";
        EXPECT_TRUE(duration);
        // Run again: nothing more to send (the position says so).
        auto again =
            export_cli(dir, db, {"--otlp", r.url(), "--name", protocol[5] == 'p' ? "pb" : "js"});
        ASSERT_EQ(again.code, 0) << again.err;
        EXPECT_EQ(r.items("log").size(), rows.size());
        EXPECT_EQ(position_of(db, protocol[5] == 'p' ? "pb" : "js")["seq"], rows.back().seq);
    }
}

// The receiver goes away mid-stream for a few seconds (a collector restarting; the stop is
// short to keep the suite fast, the backoff is the same for two minutes) and comes back on the
// same port: nothing is lost, and what arrives twice arrives with the same id.
TEST(ExportOtlp, ReceiverStoppedMidStreamLosesNothing) {
    SKIP_WITHOUT_RECEIVER();
    TempDir dir;
    const std::string db = dir.file("j.db");
    ASSERT_TRUE(run_session(dir, db));
    Receiver r(dir, "recv");
    ChildOptions o;
    o.capture_stderr = true;
    o.env = {{"HOME", dir.path()}, {"OTEL_EXPORTER_OTLP_ENDPOINT", ""}};
    TestChild exporter({kCli, "export", "--follow", "--otlp", r.url(), "--batch", "4", "--poll-ms",
                        "20", "--signals", "logs", "--journal", db},
                       o);
    auto position = [&] { return position_of(db, "otlp").value("seq", int64_t{0}); };
    const int64_t first_head = journal_rows(db).back().seq;
    ASSERT_TRUE(wait_until([&] { return position() == first_head; }, 30s));
    // The receiver goes; a session runs meanwhile; the exporter fails, and says so.
    r.stop();
    ASSERT_TRUE(run_session(dir, db, 20));
    auto rows = journal_rows(db);
    ASSERT_TRUE(
        wait_until([&] { return !position_of(db, "otlp").value("last_error", "").empty(); }, 30s));
    EXPECT_NE(position_of(db, "otlp").value("last_error", "").find(r.url()), std::string::npos);
    EXPECT_EQ(position(), first_head) << "nothing acknowledged while the receiver is away";
    ::sleep(3);
    ASSERT_TRUE(r.restart());
    ASSERT_TRUE(wait_until([&] { return position() == rows.back().seq; }, 60s))
        << exporter.read_stderr(1s);
    EXPECT_EQ(position_of(db, "otlp").value("last_error", "x"), "") << "cleared by the success";
    exporter.signal(SIGTERM);
    auto st = exporter.wait_exit(10s);
    ASSERT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0);
    std::map<int64_t, std::set<std::string>> ids;
    for (const auto& l : r.items("log"))
        ids[l["attributes"]["mcpwarden.seq"]].insert(l["attributes"]["log.record.uid"]);
    ASSERT_EQ(ids.size(), rows.size());
    for (const auto& row : rows)
        EXPECT_EQ(ids[row.seq], std::set<std::string>{row.hash}) << row.seq;
    // In order: each seq first arrives after every seq before it.
    auto seqs = received_seqs(r);
    int64_t highest = 0;
    for (int64_t s : seqs) {
        EXPECT_LE(s, highest + 1) << "seq " << s << " before " << highest + 1;
        highest = std::max(highest, s);
    }
}

// SIGKILL after the receiver acknowledged a batch and before the position was written (the
// fault holds the exporter in that window): the batch is sent again after the restart, with
// the same ids, so a receiver that drops what it has ends with each record once. Negative
// control: ids drawn at each send (export_ids_random) leave the receiver two copies it cannot
// tell apart.
TEST(ExportOtlp, KilledBetweenSendAndAcknowledgementResendsWithTheSameIds) {
    SKIP_WITHOUT_RECEIVER();
    for (bool stable : {true, false}) {
        SCOPED_TRACE(stable ? "ids from the record's hash" : "negative control: random ids");
        TempDir dir;
        const std::string db = dir.file("j.db");
        ASSERT_TRUE(run_session(dir, db, 2));
        auto rows = journal_rows(db);
        Receiver r(dir, "recv");
        ChildOptions o;
        o.capture_stderr = true;
        o.env = {{"HOME", dir.path()},
                 {"OTEL_EXPORTER_OTLP_ENDPOINT", ""},
                 {"MCPWARDEN_FAULT",
                  stable ? "export_ack_window" : "export_ack_window,export_ids_random"}};
        TestChild first({kCli, "export", "--follow", "--otlp", r.url(), "--batch", "5", "--signals",
                         "logs", "--journal", db},
                        o);
        ASSERT_TRUE(wait_until([&] { return r.items("log").size() >= 5; }, 30s));
        first.signal(SIGKILL);
        (void)first.wait_exit(10s);
        EXPECT_EQ(position_of(db, "otlp").value("seq", int64_t{0}), 0) << "killed before the ack";
        auto second = export_cli(dir, db, {"--otlp", r.url(), "--signals", "logs"},
                                 {{"MCPWARDEN_FAULT", stable ? "" : "export_ids_random"}});
        ASSERT_EQ(second.code, 0) << second.err;
        std::set<std::string> distinct;
        size_t received = 0;
        for (const auto& l : r.items("log")) {
            distinct.insert(l["attributes"]["log.record.uid"]);
            ++received;
        }
        EXPECT_EQ(received, rows.size() + 5) << "the first batch twice";
        if (stable)
            EXPECT_EQ(distinct.size(), rows.size())
                << "a receiver dropping known ids has each once";
        else
            EXPECT_EQ(distinct.size(), rows.size() + 5) << "the copies cannot be told apart";
    }
}

// 429 with Retry-After: the exporter waits what it was told, then delivers everything; the
// wait and the error are said.
TEST(ExportOtlp, TooManyRequestsWaitsForRetryAfter) {
    SKIP_WITHOUT_RECEIVER();
    TempDir dir;
    const std::string db = dir.file("j.db");
    ASSERT_TRUE(run_session(dir, db));
    auto rows = journal_rows(db);
    Receiver r(dir, "recv", {"--fail", "2", "--fail-status", "429", "--retry-after", "1"});
    auto run = export_cli(dir, db, {"--otlp", r.url(), "--signals", "logs"});
    ASSERT_EQ(run.code, 0) << run.err;
    EXPECT_NE(run.err.find("HTTP 429 (Retry-After 1000 ms)"), std::string::npos) << run.err;
    auto items = r.items();
    ASSERT_GE(items.size(), 3u);
    EXPECT_EQ(items[0]["signal"], "refused");
    EXPECT_EQ(items[1]["signal"], "refused");
    // The second attempt came no sooner than the receiver asked (a lower bound only).
    EXPECT_GE(items[1]["at"].get<int64_t>() - items[0]["at"].get<int64_t>(), 900);
    EXPECT_EQ(received_seqs(r).size(), rows.size());
}

// A certificate for another name: refused, with why, and nothing moves; the same receiver
// with a certificate for 127.0.0.1, trusted through --ca-file, gets everything.
TEST(ExportOtlp, CertificateThatDoesNotMatchIsRefused) {
    SKIP_WITHOUT_RECEIVER();
    TempDir dir;
    ASSERT_TRUE(make_certificates(dir));
    const std::string db = dir.file("j.db");
    ASSERT_TRUE(run_session(dir, db));
    {
        Receiver r(dir, "wrong",
                   {"--tls-cert", dir.file("wrong.pem"), "--tls-key", dir.file("wrong.key")});
        auto run = export_cli(dir, db, {"--otlp", r.url("https"), "--ca-file", dir.file("ca.pem")});
        EXPECT_EQ(run.code, 1) << run.err;
        EXPECT_NE(run.err.find("127.0.0.1"), std::string::npos) << run.err;
        EXPECT_NE(run.err.find("certificate"), std::string::npos) << run.err;
        EXPECT_TRUE(r.items().empty());
        EXPECT_NE(position_of(db, "otlp").value("last_error", "").find("certificate"),
                  std::string::npos);
    }
    Receiver r(dir, "right",
               {"--tls-cert", dir.file("right.pem"), "--tls-key", dir.file("right.key")});
    auto run = export_cli(dir, db, {"--otlp", r.url("https"), "--ca-file", dir.file("ca.pem")});
    EXPECT_EQ(run.code, 0) << run.err;
    EXPECT_EQ(received_seqs(r).size(), journal_rows(db).size());
}

}  // namespace
}  // namespace warden::testing
