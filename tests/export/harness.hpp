// What the export tests share: a journal with real sessions in it (the relay and the fixture
// server, requests answered and refused, one carrying W3C trace context), the OTLP receiver
// of tests/otlp-receiver (node, the OpenTelemetry project's own OTLP decoder), the records
// as the journal holds them, and `mcpwarden export` run as a user runs it.
#pragma once

#include <sys/stat.h>

#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/cli_run.hpp"
#include "common/jsonrpc.hpp"
#include "common/testing.hpp"
#include "journal/journal.hpp"
#include "journal/query.hpp"

namespace warden::testing {

inline constexpr const char* kClientTraceparent =
    "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

// One session through `mcpwarden run`: initialize, a tools/call carrying traceparent in
// params._meta, a call to a tool that does not exist (a JSON-RPC error), then `calls` more
// echo calls; the client leaves, the tree is torn down. False (and a test failure) when the
// session did not run as planned. `env`: more variables for `mcpwarden run` (a faked clock).
inline bool run_session(const TempDir& dir, const std::string& db, int calls = 0,
                        const std::vector<std::pair<std::string, std::string>>& env = {}) {
    ChildOptions o;
    o.capture_stderr = true;
    o.env = {{"HOME", dir.path()}, {"XDG_STATE_HOME", dir.file("state")}, {"TMPDIR", dir.path()}};
    o.env.insert(o.env.end(), env.begin(), env.end());
    o.unset_env = {"MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION", "MCPWARDEN_FAULT"};
    TestChild c({kCli, "run", "--journal", db, "--", kFixture}, o);
    if (!c.started()) {
        ADD_FAILURE() << c.error();
        return false;
    }
    c.write_line(rpc_initialize(1));
    c.write_line(rpc_initialized());
    nlohmann::json traced{{"name", "echo"},
                          {"arguments", {{"text", "traced"}}},
                          {"_meta", {{"traceparent", kClientTraceparent}}}};
    c.write_line(rpc_request(2, "tools/call", traced));
    c.write_line(rpc_tools_call(3, "no-such-tool"));
    for (int i = 0; i < calls; ++i)
        c.write_line(rpc_tools_call(10 + i, "echo", {{"text", "x"}}));
    int last = calls > 0 ? 10 + calls - 1 : 3;
    bool answered = read_response(c, last, 20s).has_value();
    c.close_stdin();
    auto st = c.wait_exit(30s);
    EXPECT_TRUE(answered) << c.read_stderr(1s);
    EXPECT_TRUE(st.has_value());
    return answered && st.has_value();
}

struct JournalRow {
    int64_t seq;
    std::string kind, hash;
    int64_t ts;
};

inline std::vector<JournalRow> journal_rows(const std::string& db) {
    std::vector<JournalRow> out;
    auto r = journal::RecordReader::open(db);
    if (!r) {
        ADD_FAILURE() << r.error().message;
        return out;
    }
    std::vector<journal::RecordReader::Row> rows;
    EXPECT_TRUE(r->read_after(0, 1000000, SIZE_MAX, rows));
    for (auto& row : rows)
        out.push_back({row.record.seq, row.record.kind, row.leaf_hex, row.record.ts});
    return out;
}

inline std::string receiver_dir() {
    return std::string(kSourceDir) + "/tests/otlp-receiver";
}

inline bool have_receiver() {
    struct stat st;
    return ::stat((receiver_dir() + "/node_modules/@opentelemetry/otlp-transformer").c_str(),
                  &st) == 0 &&
           ::stat("/usr/bin/node", &st) == 0;
}

// The node receiver, on 127.0.0.1; `extra` adds its options (--fail, --tls-cert, --stall…).
class Receiver {
  public:
    Receiver(const TempDir& dir, std::string name, std::vector<std::string> extra = {})
        : out_(dir.file(name + ".jsonl")),
          port_file_(dir.file(name + ".port")),
          extra_(std::move(extra)) {
        start(0);
    }

    bool start(int port) {
        ::unlink(port_file_.c_str());
        std::vector<std::string> argv{"/usr/bin/node", receiver_dir() + "/receiver.js",
                                      "--out",         out_,
                                      "--port-file",   port_file_,
                                      "--port",        std::to_string(port)};
        argv.insert(argv.end(), extra_.begin(), extra_.end());
        ChildOptions o;
        o.capture_stderr = true;
        child_.emplace(argv, o);
        if (!wait_for_file(port_file_, 20s)) {
            ADD_FAILURE() << "the receiver did not start: " << child_->read_stderr(1s);
            return false;
        }
        port_ = *read_port_file(port_file_);
        return true;
    }
    void stop() {
        if (child_) {
            child_->signal(SIGTERM);
            (void)child_->wait_exit(10s);
            child_.reset();
        }
    }
    bool restart() { return start(port_); }

    std::string url(const char* scheme = "http") const {
        return std::string(scheme) + "://127.0.0.1:" + std::to_string(port_);
    }
    uint16_t port() const { return port_; }
    const std::string& out() const { return out_; }

    // What it accepted so far, one item a line.
    std::vector<nlohmann::json> items() const {
        std::vector<nlohmann::json> out;
        std::ifstream in(out_);
        for (std::string line; std::getline(in, line);)
            if (auto j = nlohmann::json::parse(line, nullptr, false); !j.is_discarded())
                out.push_back(j);
        return out;
    }
    std::vector<nlohmann::json> items(const std::string& signal) const {
        std::vector<nlohmann::json> out;
        for (auto& i : items())
            if (i.value("signal", "") == signal) out.push_back(i);
        return out;
    }

  private:
    std::string out_, port_file_;
    std::vector<std::string> extra_;
    std::optional<TestChild> child_;
    uint16_t port_ = 0;
};

// The seqs of the log records received, in the order they arrived.
inline std::vector<int64_t> received_seqs(const Receiver& r) {
    std::vector<int64_t> out;
    for (const auto& l : r.items("log"))
        out.push_back(l["attributes"].value("mcpwarden.seq", int64_t{0}));
    return out;
}

// `mcpwarden export …` on `db`, with the environment given (OTEL_* unset otherwise).
inline CliRun export_cli(const TempDir& dir, const std::string& db, std::vector<std::string> args,
                         std::vector<std::pair<std::string, std::string>> env = {},
                         Millis timeout = 60s) {
    args.insert(args.begin(), "export");
    args.insert(args.end(), {"--journal", db});
    for (const char* v : {"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_HEADERS",
                          "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TIMEOUT"})
        env.insert(env.begin(), {v, ""});
    return run_cli(dir, args, timeout, env);
}

// A CA (ca.pem) and two server certificates it signed: right.pem for 127.0.0.1 and
// wrong.pem for wrong.example, each with its key (right.key, wrong.key), made with openssl.
inline bool make_certificates(const TempDir& dir) {
    auto sh = [&](const std::string& cmd) {
        return std::system(("cd '" + dir.path() + "' && (" + cmd + ") >/dev/null 2>&1").c_str()) ==
               0;
    };
    if (!sh("openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 "
            "-subj /CN=test-ca"))
        return false;
    for (std::string name : {"wrong", "right"}) {
        std::string san = name == "right" ? "IP:127.0.0.1" : "DNS:wrong.example";
        if (!sh("openssl req -newkey rsa:2048 -nodes -keyout " + name + ".key -out " + name +
                ".csr -subj /CN=" + name + " && printf 'subjectAltName=" + san + "' > " + name +
                ".ext && openssl x509 -req -in " + name + ".csr -CA ca.pem -CAkey ca.key " +
                "-CAcreateserial -out " + name + ".pem -days 2 -extfile " + name + ".ext"))
            return false;
    }
    return true;
}

// The exporter's position file (export_position.hpp) for destination `name`.
inline nlohmann::json position_of(const std::string& db, const std::string& name) {
    std::string base = db.substr(0, db.size() - 3);  // "….db"
    std::ifstream in(base + ".export/" + name + ".json");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto j = nlohmann::json::parse(text, nullptr, false);
    return j.is_object() ? j : nlohmann::json::object();  // none yet: nothing acknowledged
}

// The exporter's resident memory, from /proc (0 when it is gone).
inline int64_t resident_kib(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);)
        if (line.starts_with("VmRSS:")) return std::stoll(line.substr(6));
    return 0;
}

// `n` records appended to the journal at once, as a busy machine's sessions would add them.
inline void append_records(const std::string& db, int n) {
    auto j = journal::Journal::open({.path = db});
    ASSERT_TRUE(j) << j.error().message;
    std::vector<journal::Event> events;
    for (int i = 0; i < n; ++i)
        events.push_back(
            {"process.signal", "outage", 0, nlohmann::json{{"pid", i}, {"signal", "TERM"}}});
    ASSERT_TRUE((*j)->append_all(events));
    ASSERT_TRUE((*j)->close());
}

}  // namespace warden::testing
