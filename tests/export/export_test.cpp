// The exporter's parts without a receiver: the protobuf writer's wire format, the settings as
// the OpenTelemetry SDKs read the environment (and the usage errors, exit 2), trace context,
// the syslog frame, the backoff, the translation of a journal whose clock stepped back, and
// the retention that keeps what an exporter has not delivered.
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/testing.hpp"
#include "export/follower.hpp"
#include "export/harness.hpp"
#include "export/protobuf_writer.hpp"
#include "export/settings.hpp"
#include "export/signals.hpp"
#include "export/syslog.hpp"
#include "journal/export_position.hpp"
#include "journal/journal.hpp"
#include "journal/prune.hpp"
#include "journal/query.hpp"

namespace warden::testing {
namespace {

using exporter::ProtoWriter;
using nlohmann::json;

std::string hex(const std::string& s) {
    return exporter::bytes_to_hex(s);
}

TEST(ProtoWriter, WritesTheWireFormat) {
    ProtoWriter w;
    w.varint_field(1, 300);  // 08 ac 02
    w.bytes_field(2, "hi");  // 12 02 68 69
    w.fixed64_field(3, 1);   // 19 01 00…
    w.begin(4);              // 22 len
    w.varint_field(1, 1);    //   08 01
    w.end();
    EXPECT_EQ(hex(w.data()),
              "08ac0212026869190100000000000000220208"
              "01");
    // A message longer than 127 bytes takes a two-byte length, and its content moves up.
    ProtoWriter big;
    big.begin(1);
    big.bytes_field(2, std::string(200, 'x'));
    big.end();
    EXPECT_EQ(hex(big.data().substr(0, 6)), "0acb0112c801");
    EXPECT_EQ(big.data().size(), 3u + 3u + 200u);
    ProtoWriter packed;
    packed.packed_fixed64_field(6, {1, 2});
    EXPECT_EQ(hex(packed.data()), "321001000000000000000200000000000000");
}

exporter::EnvLookup env_of(std::map<std::string, std::string> vars) {
    return [vars](const char* name) -> std::optional<std::string> {
        auto it = vars.find(name);
        return it == vars.end() ? std::nullopt : std::optional<std::string>(it->second);
    };
}

TEST(ExportSettings, ReadsTheEnvironmentAsTheOpenTelemetrySdksDo) {
    TempDir dir;
    ExportRequest rq;
    rq.journal = dir.file("j.db");
    auto s = exporter::resolve_settings(
        rq, env_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318/"},
                    {"OTEL_EXPORTER_OTLP_LOGS_ENDPOINT", "https://logs.example/ingest"},
                    {"OTEL_EXPORTER_OTLP_HEADERS", "api-key=a%20b,x-team=one"},
                    {"OTEL_EXPORTER_OTLP_TRACES_HEADERS", "x-team=two"},
                    {"OTEL_EXPORTER_OTLP_TIMEOUT", "2500"},
                    {"OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "http/json"}}));
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->traces.http.url, "http://collector:4318/v1/traces");
    EXPECT_EQ(s->logs.http.url, "https://logs.example/ingest");  // per-signal: as it stands
    EXPECT_EQ(s->metrics.http.url, "http://collector:4318/v1/metrics");
    EXPECT_EQ(s->traces.http.headers, (std::vector<std::string>{"api-key: a b", "x-team: two"}));
    EXPECT_EQ(s->logs.http.headers, (std::vector<std::string>{"api-key: a b", "x-team: one"}));
    EXPECT_EQ(s->traces.http.timeout_ms, 2500);
    EXPECT_EQ(s->traces.encoding, exporter::Encoding::protobuf);
    EXPECT_EQ(s->metrics.encoding, exporter::Encoding::json);

    auto grpc =
        exporter::resolve_settings(rq, env_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4317"},
                                               {"OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"}}));
    ASSERT_FALSE(grpc);
    EXPECT_NE(grpc.error().message.find("grpc is not supported"), std::string::npos);
    auto timeout =
        exporter::resolve_settings(rq, env_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://c"},
                                               {"OTEL_EXPORTER_OTLP_TIMEOUT", "10s"}}));
    ASSERT_FALSE(timeout);
    EXPECT_NE(timeout.error().message.find("OTEL_EXPORTER_OTLP_TIMEOUT '10s'"), std::string::npos);
}

// Usage errors as a user meets them: exit 2, what and why, nothing sent, no position.
TEST(ExportCli, MalformedEndpointOrHeaderFileExitsTwo) {
    TempDir dir;
    const std::string db = dir.file("j.db");
    { ASSERT_TRUE(journal::Journal::open({.path = db})); }
    std::ofstream(dir.file("headers")) << "# the collector's token\nAuthorization Bearer abc\n";
    struct Case {
        std::vector<std::string> args;
        std::string says;
    } const cases[] = {
        {{"--otlp", "htp://127.0.0.1:1"}, "--otlp 'htp://127.0.0.1:1': "},
        {{"--otlp", "http://"}, "--otlp 'http://': "},
        {{"--otlp", "http://127.0.0.1:1", "--headers-file", dir.file("headers")},
         "line 2 is not 'Name: value'"},
        {{"--otlp", "http://127.0.0.1:1", "--headers-file", dir.file("missing")}, "--headers-file"},
        {{"--syslog", "udp://127.0.0.1:514"}, "unknown scheme"},
        {{"--syslog", "tcp://127.0.0.1:99999"}, "the port is not a number from 1 to 65535"},
        {{}, "no receiver"},
    };
    for (const auto& c : cases) {
        std::vector<std::string> args{"export"};
        args.insert(args.end(), c.args.begin(), c.args.end());
        args.insert(args.end(), {"--journal", db});
        auto r = run_cli(dir, args, 30s, {{"OTEL_EXPORTER_OTLP_ENDPOINT", ""}});
        EXPECT_EQ(r.code, 2) << r.err;
        EXPECT_NE(r.err.find(c.says), std::string::npos) << r.err;
    }
    EXPECT_TRUE(journal::read_export_positions(db)->empty());
}

// libcurl and the two dozen libraries it needs are the exporter's alone (export/libcurl.hpp):
// a run, the process a client starts for every server of every session, never maps them.
// (The URL checks above, made by libcurl, show the exporter still opens it.)
TEST(ExportLibrary, ARunNeverMapsLibcurl) {
    TestChild run({kCli, "run", "--no-journal", "--", kFixture});
    ASSERT_TRUE(run.started()) << run.error();
    ASSERT_TRUE(run.write_line(rpc_initialize(1)));
    ASSERT_TRUE(read_response(run, 1, 20s)) << "the run never answered";
    std::ifstream maps("/proc/" + std::to_string(run.pid()) + "/maps");
    std::string line, curl;
    while (std::getline(maps, line))
        if (line.find("/libcurl") != std::string::npos) curl = line;
    EXPECT_TRUE(maps.eof()) << "could not read the run's maps";
    EXPECT_EQ(curl, "") << "a run maps libcurl";
    run.close_stdin();
    EXPECT_TRUE(run.wait_exit(15s));
}

// A settings file's values as export_run() hands them to the exporter: text, FILE:LINE and
// layer (0 [export.NAME] of the user's file … 3 [export] of the system's).
exporter::ConfigLookup lookup_of(std::map<std::string, exporter::ConfigValue> values) {
    return [values](std::string_view key) -> std::optional<exporter::ConfigValue> {
        auto it = values.find(std::string(key));
        return it == values.end() ? std::nullopt : std::optional(it->second);
    };
}

// config.toml's [export] under the variables and the flags, key by key; a destination's
// section names its receiver (tests/api/settings_test.cpp checks how the files are layered).
TEST(ExportSettings, SettingsFileBelowVariablesAndFlags) {
    TempDir dir;
    const auto plain = lookup_of({{"otlp", {"http://collector.example:4318", "/u.toml:2", 3}},
                                  {"protocol", {"http/json", "/u.toml:3", 2}},
                                  {"batch", {"64", "/u.toml:4", 2}},
                                  {"retry-max", {"5s", "/s.toml:5", 3}},
                                  {"signals", {"logs,metrics", "/s.toml:6", 3}}});
    const auto siem = lookup_of({{"otlp", {"http://collector.example:4318", "/s.toml:2", 3}},
                                 {"syslog", {"tls://siem.example:6514", "/u.toml:9", 0}},
                                 {"ca-file", {"/etc/ssl/siem.pem", "/u.toml:10", 0}}});
    ExportRequest rq;
    rq.journal = dir.file("j.db");
    auto s = exporter::resolve_settings(rq, env_of({}), plain);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->name, "otlp");
    EXPECT_EQ(s->logs.http.url, "http://collector.example:4318/v1/logs");
    EXPECT_FALSE(s->traces.enabled);
    EXPECT_TRUE(s->metrics.enabled);
    EXPECT_EQ(s->logs.encoding, exporter::Encoding::json);
    EXPECT_EQ(s->batch, 64u);
    EXPECT_EQ(s->retry_max_ms, 5000);
    // The variables over the file.
    s = exporter::resolve_settings(rq,
                                   env_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"},
                                           {"OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"}}),
                                   plain);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->logs.http.url, "http://env:4318/v1/logs");
    EXPECT_EQ(s->logs.encoding, exporter::Encoding::protobuf);
    // The flags over both.
    rq.otlp_endpoint = "http://flag:4318";
    rq.batch = 8;
    rq.retry_max = "250ms";
    rq.signals = "traces";
    s = exporter::resolve_settings(rq, env_of({{"OTEL_EXPORTER_OTLP_ENDPOINT", "http://env"}}),
                                   plain);
    ASSERT_TRUE(s) << s.error().message;
    EXPECT_EQ(s->traces.http.url, "http://flag:4318/v1/traces");
    EXPECT_FALSE(s->logs.enabled);
    EXPECT_EQ(s->batch, 8u);
    EXPECT_EQ(s->retry_max_ms, 250);
    // A destination's section names its receiver, over [export]'s OTLP.
    ExportRequest to_siem;
    to_siem.journal = rq.journal;
    to_siem.name = "siem";
    auto t = exporter::resolve_settings(to_siem, env_of({}), siem);
    ASSERT_TRUE(t) << t.error().message;
    ASSERT_TRUE(t->syslog.has_value());
    EXPECT_EQ(t->syslog->host, "siem.example");
    EXPECT_TRUE(t->syslog->tls);
    EXPECT_EQ(t->syslog->files.ca_file, "/etc/ssl/siem.pem");
    EXPECT_EQ(t->target, "syslog tls://siem.example:6514");
    // A bad flag is still the flag's error.
    rq.retry_max = "forever";
    auto bad = exporter::resolve_settings(rq, env_of({}), plain);
    ASSERT_FALSE(bad);
    EXPECT_NE(bad.error().message.find("--retry-max 'forever': expected a duration"),
              std::string::npos)
        << bad.error().message;
}

// A settings file with a bad [export] value: `export` refuses to start (exit 2) and `config
// check` fails (exit 1), both naming the file, line and column and why. The negative control:
// the same file mended is accepted, and `export` then sends where it says.
TEST(ExportCli, BadSettingsFileIsNamedByLineAndNothingIsSent) {
    TempDir dir;
    const std::string db = dir.file("j.db");
    { ASSERT_TRUE(journal::Journal::open({.path = db})); }
    std::filesystem::create_directories(dir.file("cfg/mcpwarden"));
    const std::string cfg = dir.file("cfg/mcpwarden/config.toml");
    const std::vector<std::pair<std::string, std::string>> env{{"XDG_CONFIG_HOME", dir.file("cfg")},
                                                               {"OTEL_EXPORTER_OTLP_ENDPOINT", ""}};
    std::ofstream(cfg) << "[export]\n"
                          "otlp = \"http://127.0.0.1:1\"\n"
                          "batch = 0\n"
                          "protocl = \"http/json\"\n"
                          "retry-max = \"100ms\"\n"
                          "\n"
                          "[export.siem]\n"
                          "export-gap = \"allow\"\n"
                          "syslog = \"udp://siem.example:514\"\n";
    const std::string says[] = {
        cfg + ":3:9: [export] batch 0: expected 1 to 100000",
        cfg + ":4:1: [export] protocl: unknown key (did you mean 'protocol'?)",
        cfg + ":8:1: [export.siem] export-gap: applies to every destination",
        cfg + ":9:10: [export.siem] syslog udp://siem.example:514: unknown scheme"};
    auto run = run_cli(dir, {"export", "--journal", db}, 30s, env);
    EXPECT_EQ(run.code, 2) << run.err;
    auto check = run_cli(dir, {"config", "check"}, 30s, env);
    EXPECT_EQ(check.code, 1) << check.err;
    for (const std::string& line : says) {
        EXPECT_NE(run.err.find(line), std::string::npos) << run.err;
        EXPECT_NE(check.err.find(line), std::string::npos) << check.err;
    }
    EXPECT_TRUE(journal::read_export_positions(db)->empty()) << "nothing was tried";

    std::ofstream(cfg) << "[export]\n"
                          "otlp = \"http://127.0.0.1:1\"\n"
                          "batch = 4\n"
                          "protocol = \"http/json\"\n"
                          "retry-max = \"100ms\"\n"
                          "\n"
                          "[export.siem]\n"
                          "syslog = \"tcp://127.0.0.1:1\"\n";
    check = run_cli(dir, {"config", "check"}, 30s, env);
    EXPECT_EQ(check.code, 0) << check.err;
    // `config show` says where each export setting comes from, for a destination too.
    auto show = run_cli(dir, {"config", "show", "--json", "--destination", "siem"}, 30s, env);
    ASSERT_EQ(show.code, 0) << show.err;
    std::map<std::string, json> shown;
    const json doc = json::parse(show.out);
    for (const json& row : doc["settings"])
        shown[row["section"].get<std::string>() + " " + row["key"].get<std::string>()] = row;
    EXPECT_EQ(shown["export batch"]["value"], "4");
    EXPECT_EQ(shown["export batch"]["where"], cfg + ":3");
    EXPECT_EQ(shown["export.siem syslog"]["value"], "tcp://127.0.0.1:1");
    EXPECT_EQ(shown["export.siem syslog"]["where"], cfg + ":8");
    {
        ASSERT_TRUE((*journal::Journal::open({.path = db}))
                        ->append(journal::Event{"process.signal", "s", 0, json{{"n", 1}}}));
    }
    run = run_cli(dir, {"export", "--journal", db}, 60s, env);
    EXPECT_EQ(run.code, 1) << run.err;
    EXPECT_NE(run.err.find("POST http://127.0.0.1:1/v1/"), std::string::npos) << run.err;
    run = run_cli(dir, {"export", "--name", "siem", "--journal", db}, 60s, env);
    EXPECT_EQ(run.code, 1) << run.err;
    EXPECT_NE(run.err.find("mcpwarden export siem: "), std::string::npos) << run.err;
    EXPECT_EQ(run.err.find("/v1/traces"), std::string::npos) << "the section's syslog: " << run.err;
}

TEST(ExportTrace, TraceparentIsTakenOnlyWhenWellFormed) {
    auto tp =
        exporter::parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
    ASSERT_TRUE(tp);
    EXPECT_EQ(hex(tp->trace_id), "0af7651916cd43dd8448eb211c80319c");
    EXPECT_EQ(hex(tp->span_id), "b7ad6b7169203331");
    EXPECT_FALSE(
        exporter::parse_traceparent("00-0AF7651916CD43DD8448EB211C80319C-b7ad6b7169203331-01"));
    EXPECT_FALSE(
        exporter::parse_traceparent("00-00000000000000000000000000000000-b7ad6b7169203331-01"));
    EXPECT_FALSE(
        exporter::parse_traceparent("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331"));
}

TEST(ExportSyslog, FrameIsOctetCountedRfc5424) {
    exporter::ExportRecord r{
        {7, 1700000000123456789, "session.end", "abc", "mcpwarden:h:0:1",
         R"({"data":{"arguments":"secret","reason":"client_lost"},"kind":"session.end"})"},
        std::string(64, 'f')};
    std::string frame = exporter::syslog_frame(r, "host one", false);
    auto space = frame.find(' ');
    EXPECT_EQ(std::stoul(frame.substr(0, space)), frame.size() - space - 1);
    std::string msg = frame.substr(space + 1);
    EXPECT_TRUE(
        msg.starts_with("<14>1 2023-11-14T22:13:20.123456Z host_one mcpwarden - session.end "
                        "[mcpwarden@32473 seq=\"7\" id=\"" +
                        std::string(64, 'f')))
        << msg;
    EXPECT_EQ(msg.find("secret"), std::string::npos) << "argument previews only when asked for";
    EXPECT_NE(msg.find(R"({"reason":"client_lost"})"), std::string::npos) << msg;
}

TEST(ExportBackoff, DoublesToAMinuteWithJitter) {
    EXPECT_EQ(exporter::backoff_ms(0, 0.0), 500);
    EXPECT_EQ(exporter::backoff_ms(0, 1.0), 1000);
    EXPECT_EQ(exporter::backoff_ms(3, 1.0), 8000);
    EXPECT_EQ(exporter::backoff_ms(20, 1.0), 60000);
    EXPECT_EQ(exporter::backoff_ms(20, 0.0), 30000);
    // retry-max: the longest wait, from the attempt that reaches it on.
    EXPECT_EQ(exporter::backoff_ms(1, 1.0, 2000), 2000);
    EXPECT_EQ(exporter::backoff_ms(40, 1.0, 2000), 2000);
    EXPECT_EQ(exporter::backoff_ms(40, 1.0, 3600000), 3600000);
}

// A clock stepped back between a request and its answer, and between records: the batch is
// still in seq order, and no span ends before it starts.
TEST(ExportTrace, ClockSteppedBackKeepsOrderAndSpans) {
    const int64_t t = 1'800'000'000'000'000'000;
    auto rec = [](int64_t seq, int64_t ts, std::string kind, json data) {
        json body{{"data", data}, {"kind", kind}};
        return exporter::ExportRecord{{seq, ts, kind, "s1", "o", body.dump()},
                                      std::string(62, '0') + std::to_string(seq % 10) + "0"};
    };
    std::vector<exporter::ExportRecord> batch{
        rec(1, t, "activity.request",
            {{"id", {{"n", 1}}}, {"method", "tools/call"}, {"tool", "echo"}}),
        rec(2, t - 3'600'000'000'000, "activity.response",
            {{"id", {{"n", 1}}}, {"request_seq", 1}, {"outcome", "ok"}}),
        rec(3, t - 3'500'000'000'000, "process.signal", {{"pid", 1}})};
    auto s = exporter::translate(batch, {}, {});
    ASSERT_EQ(s.logs.size(), 3u);
    for (size_t i = 0; i < 3; ++i)
        EXPECT_EQ(s.logs[i].attributes[2].second, static_cast<int64_t>(i + 1)) << "mcpwarden.seq";
    ASSERT_EQ(s.spans.size(), 1u);
    EXPECT_GE(s.spans[0].end, s.spans[0].start);
    EXPECT_EQ(s.spans[0].name, "tools/call echo");
}

// 60 records, a checkpoint every 10; an exporter that acknowledged seq 25.
std::string journal_with_exporter_at(const TempDir& dir, int64_t position) {
    std::string db = dir.file("j.db");
    auto j = journal::Journal::open({.path = db, .checkpoint_every = 10});
    EXPECT_TRUE(j.ok());
    for (int i = 0; i < 60; ++i)
        EXPECT_TRUE((*j)->append(journal::Event{"process.signal", "s", 0, json{{"n", i}}}).ok());
    EXPECT_TRUE((*j)->close().ok());
    journal::ExportPosition p;
    p.destination = "collector";
    p.seq = position;
    EXPECT_TRUE(journal::write_export_position(db, p).ok());
    return db;
}

int64_t count_kind(const std::string& db, const std::string& kind) {
    int64_t n = 0;
    EXPECT_TRUE(journal::for_each_record(db, 0, [&](const journal::Record& r) {
        n += r.kind == kind;
        return true;
    }));
    return n;
}

// Retention never removes what an exporter has not delivered without saying so: it stops at
// the checkpoint before the first undelivered record and writes journal.export_held (once
// for that position); with export-gap "allow" it removes them and journal.pruned names them.
// Negative control: export_prune_unheld removes them and says nothing.
TEST(ExportRetention, KeepsWhatNoExporterDeliveredAndSaysSo) {
    {
        TempDir dir;
        std::string db = journal_with_exporter_at(dir, 25);
        auto j = journal::Journal::open({.path = db});
        ASSERT_TRUE(j.ok());
        auto r = journal::prune(**j, {.max_bytes = 3000, .compact = false});
        ASSERT_TRUE(r) << r.error().message;
        ASSERT_EQ(r->held.size(), 1u);
        EXPECT_EQ(r->held[0].destination, "collector");
        EXPECT_EQ(r->held[0].position, 25);
        EXPECT_LE(r->anchor_seq, 26) << "nothing after the position goes";
        EXPECT_GT(r->anchor_seq, 0) << "what was delivered still goes";
        EXPECT_EQ(count_kind(db, "journal.export_held"), 1);
        auto again = journal::prune(**j, {.max_bytes = 3000, .compact = false});
        ASSERT_TRUE(again);
        EXPECT_EQ(count_kind(db, "journal.export_held"), 1) << "said once per position";
        ASSERT_TRUE((*j)->close().ok());
        auto rows = journal::RecordReader::open(db);
        ASSERT_TRUE(rows);
        EXPECT_TRUE(rows->at(26)->has_value()) << "the first undelivered record is kept";
    }
    {
        TempDir dir;
        std::string db = journal_with_exporter_at(dir, 25);
        auto j = journal::Journal::open({.path = db});
        auto r =
            journal::prune(**j, {.max_bytes = 3000, .compact = false, .export_gap_allow = true});
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_GT(r->anchor_seq, 26);
        ASSERT_EQ(r->unexported.size(), 1u);
        int64_t named = 0;
        (void)journal::for_each_record(db, 0, [&](const journal::Record& rec) {
            if (rec.kind == "journal.pruned")
                named = json::parse(rec.body)["data"]["unexported"][0]["records"].get<int64_t>();
            return true;
        });
        EXPECT_EQ(named, r->anchor_seq - 1 - 25);
        ASSERT_TRUE((*j)->close().ok());
    }
    {
        TempDir dir;
        std::string db = journal_with_exporter_at(dir, 25);
        ::setenv("MCPWARDEN_FAULT", "export_prune_unheld", 1);
        auto j = journal::Journal::open({.path = db});
        auto r = journal::prune(**j, {.max_bytes = 3000, .compact = false});
        ::unsetenv("MCPWARDEN_FAULT");
        ASSERT_TRUE(r) << r.error().message;
        EXPECT_GT(r->anchor_seq, 26) << "the guard off: undelivered records removed";
        EXPECT_TRUE(r->held.empty() && r->unexported.empty());
        EXPECT_EQ(count_kind(db, "journal.export_held"), 0);
        ASSERT_TRUE((*j)->close().ok());
    }
}

// `export-gap = "allow"` in config.toml's [export] is the user's choice for `journal prune`
// as the flag is: the undelivered records go, and it says so. The control: without the file,
// the same prune keeps them for the exporter; a flag's `hold` wins over the file.
TEST(ExportRetention, TheSettingsFilesExportGapIsReadByJournalPrune) {
    for (const char* setting : {"allow", "", "allow, --export-gap hold"}) {
        SCOPED_TRACE(setting);
        TempDir dir;
        std::string db = journal_with_exporter_at(dir, 25);
        std::filesystem::create_directories(dir.file("cfg/mcpwarden"));
        const bool in_file = *setting != 0;
        const bool flag_holds = std::string_view(setting).ends_with("hold");
        if (in_file)
            std::ofstream(dir.file("cfg/mcpwarden/config.toml"))
                << "[export]\nexport-gap = \"allow\"\n";
        std::vector<std::string> args{"journal",   "prune", "--max-size", "3000", "--no-compact",
                                      "--journal", db};
        if (flag_holds) args.insert(args.end(), {"--export-gap", "hold"});
        auto r = run_cli(dir, args, 30s, {{"XDG_CONFIG_HOME", dir.file("cfg")}});
        EXPECT_EQ(r.code, 0) << r.err;
        const bool removed = in_file && !flag_holds;
        EXPECT_EQ(
            r.err.find("removed undelivered (export-gap allow): collector") != std::string::npos,
            removed)
            << r.err;
        EXPECT_EQ(r.err.find("kept for exporter collector") != std::string::npos, !removed)
            << r.err;
    }
}

// The exporter holds one batch, never the backlog: with its receiver away and 40,000 records
// waiting, its memory is that of one batch of 512. Negative control: export_batch_unbounded
// reads every waiting record at once, and its memory grows with them.
TEST(ExportMemory, OneBatchInMemoryWhateverTheBacklog) {
    int64_t peak[2] = {0, 0};
    for (bool bounded : {true, false}) {
        SCOPED_TRACE(bounded ? "one batch" : "negative control: the whole backlog");
        TempDir dir;
        const std::string db = dir.file("j.db");
        append_records(db, 40000);
        ChildOptions o;
        o.capture_stderr = true;
        o.env = {{"HOME", dir.path()},
                 {"OTEL_EXPORTER_OTLP_ENDPOINT", ""},
                 {"MCPWARDEN_FAULT", bounded ? "" : "export_batch_unbounded"}};
        // Nothing listens on port 1: every attempt fails, and the batch stays in memory.
        TestChild exporter({kCli, "export", "--follow", "--otlp", "http://127.0.0.1:1", "--signals",
                            "logs", "--retry-max", "100ms", "--journal", db},
                           o);
        // Up to 45 s: the control reads all 40,000 records before its first attempt,
        // which took over 10 s under ASan on a loaded machine.
        int failures = 0;
        for (int tick = 0; tick < 450 && failures < 3; ++tick) {
            std::this_thread::sleep_for(100ms);
            peak[bounded ? 0 : 1] = std::max(peak[bounded ? 0 : 1], resident_kib(exporter.pid()));
            auto err = journal::read_export_position(db, "otlp");
            if (err && err->last_error_ns > 0) ++failures;
        }
        EXPECT_GE(failures, 3) << exporter.read_stderr(1s);
        exporter.signal(SIGTERM);
        (void)exporter.wait_exit(10s);
    }
    RecordProperty("peak_kib_one_batch", static_cast<int>(peak[0]));
    RecordProperty("peak_kib_whole_backlog", static_cast<int>(peak[1]));
    EXPECT_GT(peak[0], 0);
    EXPECT_GT(peak[1] - peak[0], 16 * 1024) << "KiB: the backlog in memory, against one batch";
}

}  // namespace
}  // namespace warden::testing
