// The relay in-process, over real pipes: the test thread plays both the client and the
// server, the relay runs its loop on a second thread. RelayJournal, at the end, adds a
// JournalSink on a real journal and so the journal's writer thread.
#include "shim/relay.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include <atomic>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/util.hpp"    // warden::testing::TempDir
#include "journal/query.hpp"  // for_each_record
#include "proc/helpers.hpp"   // proc_testing: Child (forked, always reaped), wait_until
#include "shim/journal_sink.hpp"
#include "sys/pipe.hpp"

namespace warden::shim {
namespace {

using namespace std::chrono_literals;

// Reads what is available on fd until `want` bytes arrived or `timeout` passed.
std::string read_for(int fd, size_t want, std::chrono::milliseconds timeout) {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char buf[65536];
    while (out.size() < want) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        if (left.count() <= 0) break;
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
        ssize_t n = ::read(fd, buf, sizeof buf);
        if (n <= 0) break;
        out.append(buf, static_cast<size_t>(n));
    }
    return out;
}

// Reads up to and including the first '\n'.
std::string read_line(int fd, std::chrono::milliseconds timeout = 5s) {
    std::string out;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    char c;
    while (std::chrono::steady_clock::now() < deadline) {
        pollfd p{fd, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) continue;
        if (::read(fd, &c, 1) != 1) break;
        out.push_back(c);
        if (c == '\n') break;
    }
    return out;
}

bool write_str(int fd, std::string_view s) {
    return write_all(fd, s, "test pipe").ok();
}

// Writes all of `s`, giving up after `timeout` (the fd is made non-blocking): a relay that
// stops reading fails the test instead of hanging it.
bool write_within(int fd, std::string_view s, std::chrono::milliseconds timeout) {
    if (!set_nonblocking(fd, true).ok()) return false;
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (!s.empty() && std::chrono::steady_clock::now() < deadline) {
        ssize_t n = ::write(fd, s.data(), s.size());
        if (n > 0) {
            s.remove_prefix(static_cast<size_t>(n));
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
        pollfd p{fd, POLLOUT, 0};
        (void)::poll(&p, 1, 50);
    }
    return s.empty();
}

// Remembers which calls were answered, what the answers said, and the order of answers and
// the loss.
class RecordingSink : public CountingSink {
  public:
    void on_response(const Answer& a, const Outstanding* req) override {
        CountingSink::on_response(a, req);
        if (!req) return;
        answered.push_back(req->raw);
        answers.push_back(a);
        events.push_back("answered " + req->raw);
    }
    void on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) override {
        CountingSink::on_client_lost(cause, outstanding);
        events.push_back("lost");
    }
    void on_oversize(Direction d, size_t bytes) override {
        CountingSink::on_oversize(d, bytes);
        last_piece_read = true;
    }
    std::vector<std::string> abandoned_sorted() const {
        auto v = abandoned_ids;
        std::sort(v.begin(), v.end());
        return v;
    }
    std::vector<std::string> answered, events;
    std::vector<Answer> answers;
    std::atomic<bool> last_piece_read{false};  // of an oversize line: the relay has all of it
};

class DenyingSink : public CountingSink {
  public:
    Result<int64_t> on_request(const rpc::Message& m, std::string_view line) override {
        if (m.tool == "forbidden") return Error::msg("journal unavailable");
        return CountingSink::on_request(m, line);
    }
};

// The six pipes, the relay on its own thread, and the wakes it reported.
struct Harness {
    Pipe c_in, c_out, log, s_in, s_out, s_err, stop;
    std::unique_ptr<Relay> relay;
    std::thread thread;
    std::mutex mu;
    std::vector<Relay::Wake> wakes;
    std::atomic<bool> done{false};

    explicit Harness(ActivitySink& sink, RelayOptions opts = {}) {
        c_in = make_pipe().value();
        c_out = make_pipe().value();
        log = make_pipe().value();
        s_in = make_pipe().value();
        s_out = make_pipe().value();
        s_err = make_pipe().value();
        stop = make_pipe().value();
        RelayFds fds;
        fds.client_in = c_in.read.get();
        fds.client_out = c_out.write.get();
        fds.log = log.write.get();
        fds.server_in = std::move(s_in.write);
        fds.server_out = std::move(s_out.read);
        fds.server_err = std::move(s_err.read);
        auto r = Relay::create(opts, std::move(fds), sink);
        if (!r) {
            ADD_FAILURE() << r.error().message;
            return;
        }
        relay = std::make_unique<Relay>(std::move(*r));
        EXPECT_TRUE(relay->watch(stop.read.get(), 99).ok());
        thread = std::thread([this] {
            for (int i = 0; i < 100000; ++i) {
                auto w = relay->poll(10000);
                if (!w) break;
                if (w->what == Relay::Wake::What::watched && w->token == 99) break;
                if (w->what == Relay::Wake::What::timeout) continue;
                std::lock_guard lk(mu);
                wakes.push_back(*w);
            }
            done = true;
        });
    }
    ~Harness() { finish(); }
    void finish() {
        if (thread.joinable()) {
            (void)write_str(stop.write.get(), "x");
            thread.join();
        }
    }
    bool saw(Relay::Wake::What what, std::chrono::milliseconds timeout = 5s) {
        auto deadline = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < deadline) {
            {
                std::lock_guard lk(mu);
                for (auto& w : wakes)
                    if (w.what == what) return true;
            }
            std::this_thread::sleep_for(2ms);
        }
        return false;
    }
};

const std::string kReq17 =
    R"({"jsonrpc":"2.0","id":17,"method":"tools/call","params":{"name":"sleep"}})";
const std::string kReqS17 =
    R"({"jsonrpc":"2.0","id":"17","method":"tools/call","params":{"name":"x"}})";

TEST(Relay, ForwardsLinesBothWaysUnchanged) {
    CountingSink sink;
    Harness h(sink, {});
    std::string in =
        kReq17 + "\n" + R"({"jsonrpc":"2.0","method":"notifications/initialized"})" + "\r\n";
    ASSERT_TRUE(write_str(h.c_in.write.get(), in));
    EXPECT_EQ(read_for(h.s_in.read.get(), in.size(), 5s), in);
    std::string out = R"({"jsonrpc":"2.0","id":17,"result":{"content":[]}})"
                      "\n";
    ASSERT_TRUE(write_str(h.s_out.write.get(), out));
    EXPECT_EQ(read_for(h.c_out.read.get(), out.size(), 5s), out);
    ASSERT_TRUE(write_str(h.s_err.write.get(), "log line without newline"));
    EXPECT_EQ(read_for(h.log.read.get(), 24, 5s), "log line without newline");
    h.finish();
    EXPECT_EQ(sink.requests, 1u);
    EXPECT_EQ(sink.matched, 1u);
    EXPECT_EQ(sink.notifications, 1u);
    EXPECT_EQ(h.relay->outstanding().size(), 0u);
}

TEST(Relay, ByteForByteTransparencyWithRandomBytesAndManyLines) {
    CountingSink sink;
    RelayOptions o;
    o.guard = StdoutGuard::Pass;
    o.max_message = 4096;
    Harness h(sink, o);
    std::mt19937 rng(4711);
    std::string data;
    for (int i = 0; i < 3000; ++i) {
        if (i % 3 == 0) {
            data += R"({"jsonrpc":"2.0","id":)" + std::to_string(i) +
                    R"(,"method":"ping"})"
                    "\n";
        } else {
            size_t n = rng() % (i % 100 == 1 ? 20000 : 300);  // some oversize lines
            for (size_t k = 0; k < n; ++k) {
                char c = static_cast<char>(rng() & 0xff);
                data.push_back(c == '\n' && n > 4096 ? ' ' : c);
            }
            data.push_back('\n');
        }
    }
    data += "tail without newline \xff\xfe";
    // Client → server, written from another thread while we read (pipes are small).
    std::thread writer([&] {
        (void)write_str(h.c_in.write.get(), data);
        h.c_in.write.reset();
    });
    std::string got = read_for(h.s_in.read.get(), data.size(), 20s);
    writer.join();
    EXPECT_EQ(got.size(), data.size());
    EXPECT_TRUE(got == data) << "client → server bytes differ";
    // Server → client, the guard on `pass`.
    std::thread writer2([&] {
        (void)write_str(h.s_out.write.get(), data);
        h.s_out.write.reset();  // the partial last line goes out at EOF
    });
    std::string got2 = read_for(h.c_out.read.get(), data.size(), 20s);
    writer2.join();
    EXPECT_TRUE(got2 == data) << "server → client bytes differ";
    h.finish();
    EXPECT_GT(h.relay->stats().oversize_client, 0u);
    EXPECT_EQ(h.relay->stats().partial_client, 1u);
    EXPECT_EQ(h.relay->stats().requests, 1000u);
}

TEST(Relay, DivertsNonJsonStdoutAndKeepsTheProtocolIntact) {
    CountingSink sink;
    Harness h(sink, {});
    std::string json = R"({"jsonrpc":"2.0","id":1,"result":{}})"
                       "\n";
    ASSERT_TRUE(write_str(h.s_out.write.get(), "Server listening on 3000\n" + json + "\n" +
                                                   R"({"not":"rpc"})"
                                                   "\n"));
    EXPECT_EQ(read_for(h.c_out.read.get(), json.size() + 14, 5s), json + R"({"not":"rpc"})"
                                                                         "\n");
    EXPECT_EQ(read_line(h.log.read.get()),
              "[mcpwarden] diverted non-JSON stdout line: Server listening on 3000\n");
    EXPECT_EQ(read_line(h.log.read.get()), "[mcpwarden] diverted non-JSON stdout line: \n");
    h.finish();
    EXPECT_EQ(h.relay->stats().diverted, 2u);
    EXPECT_EQ(sink.diverted, 2u);
}

// The divert rule (docs/RUN.md, "Diverted output"): what is not JSON is diverted; JSON that is not
// a valid JSON-RPC message passes and is counted invalid.
TEST(Relay, JsonThatIsNotJsonRpcPassesAndIsCounted) {
    CountingSink sink;
    Harness h(sink, {});
    const std::string lines = "[]\n{\"id\":{\"a\":1},\"result\":1}\n{\"method\":1}\n";
    ASSERT_TRUE(write_str(h.s_out.write.get(), lines + "not json\n"));
    EXPECT_EQ(read_for(h.c_out.read.get(), lines.size(), 5s), lines);
    EXPECT_EQ(read_line(h.log.read.get()), "[mcpwarden] diverted non-JSON stdout line: not json\n");
    h.finish();
    EXPECT_EQ(h.relay->stats().invalid_server, 3u);
    EXPECT_EQ(h.relay->stats().diverted, 1u);
}

// The total cap on diverted output counts every byte written, each line's prefix included:
// the line that crosses it is cut, the cap is said once, the rest is counted (in the server's
// bytes); what reaches stderr stays under the cap, notice and all. A protocol line after the
// flood is relayed. The control (no cap) shows every line.
TEST(Relay, DivertedOutputIsCappedNeverTheProtocol) {
    for (bool capped : {true, false}) {
        SCOPED_TRACE(capped ? "capped" : "uncapped");
        CountingSink sink;
        RelayOptions o;
        o.divert_total = capped ? 2525 : 0;
        o.divert_rate = 0;
        Harness h(sink, o);
        std::string flood;
        for (int i = 0; i < 50; ++i)
            flood += std::string(99, 'n') + "\n";
        const std::string answer = R"({"jsonrpc":"2.0","id":1,"result":{}})"
                                   "\n";
        std::thread w([&] { (void)write_str(h.s_out.write.get(), flood + answer); });
        EXPECT_EQ(read_for(h.c_out.read.get(), answer.size(), 5s), answer);
        w.join();
        h.finish();
        const RelayStats& st = h.relay->stats();
        EXPECT_EQ(st.diverted, 50u);
        EXPECT_EQ(st.diverted_bytes, 5000u);
        std::string err = read_for(h.log.read.get(), 100000, 300ms);
        if (capped) {
            // 2525 less the reserve for the notice: 15 lines of 43 + 99 + 1 bytes, then 74 of
            // the 16th before its mark.
            EXPECT_EQ(st.diverted_shown, 15 * 100u + 74);
            EXPECT_EQ(st.over_total, 5000u - st.diverted_shown);
            EXPECT_EQ(st.diverted_dropped, 35u);
            EXPECT_NE(err.find(std::string(74, 'n') + " [cut]\n[mcpwarden] diverted stdout is "
                                                      "capped at 2 KiB per session"),
                      std::string::npos)
                << err;
            EXPECT_LE(err.size(), 2525u);
        } else {
            EXPECT_EQ(st.diverted_shown, 5000u);
            EXPECT_EQ(st.diverted_dropped, 0u);
            EXPECT_EQ(err.size(), 5000u + 50 * 43);
        }
    }
}

// A diverted line is display text: what would drive the client's terminal (ESC, BEL, a CR
// that rewrites the line, NUL, bytes that are not UTF-8) is escaped as `ps` escapes a command
// line; printable UTF-8 stays as it is, and the CR of a CRLF line ends it like its LF.
TEST(Relay, DivertedLinesReachStderrEscaped) {
    CountingSink sink;
    Harness h(sink, {});
    const char kRaw[] = "red\x1b[31m bell\x07 back\rfake nul\0 \xff caf\xc3\xa9";
    const std::string raw(kRaw, sizeof kRaw - 1);
    ASSERT_TRUE(write_str(h.s_out.write.get(), raw + "\n" + "crlf\r\n"));
    EXPECT_EQ(read_line(h.log.read.get()),
              "[mcpwarden] diverted non-JSON stdout line: red\\x1b[31m bell\\x07 "
              "back\\x0dfake nul\\x00 \\xff caf\xc3\xa9\n");
    EXPECT_EQ(read_line(h.log.read.get()), "[mcpwarden] diverted non-JSON stdout line: crlf\n");
    h.finish();
    EXPECT_EQ(h.relay->stats().diverted, 2u);
    EXPECT_EQ(h.relay->stats().diverted_bytes, raw.size() + 1 + 6);
}

TEST(Relay, PassGuardForwardsNoise) {
    CountingSink sink;
    RelayOptions o;
    o.guard = StdoutGuard::Pass;
    Harness h(sink, o);
    ASSERT_TRUE(write_str(h.s_out.write.get(), "noise\n"));
    EXPECT_EQ(read_line(h.c_out.read.get()), "noise\n");
}

TEST(Relay, FailGuardEndsTheSessionWithoutForwarding) {
    CountingSink sink;
    RelayOptions o;
    o.guard = StdoutGuard::Fail;
    Harness h(sink, o);
    ASSERT_TRUE(
        write_str(h.s_out.write.get(), "noise\n{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n"));
    EXPECT_TRUE(h.saw(Relay::Wake::What::guard_failed));
    EXPECT_EQ(read_for(h.c_out.read.get(), 1, 200ms), "");
}

TEST(Relay, InvalidUtf8JsonIsNotDivertedAndPassesByteForByte) {
    CountingSink sink;
    Harness h(sink, {});
    std::string line = "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"t\":\"\xc3\x28\"}}\n";
    ASSERT_TRUE(write_str(h.s_out.write.get(), line));
    EXPECT_EQ(read_for(h.c_out.read.get(), line.size(), 5s), line);
    std::string req = "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"x\",\"params\":\"\xff\"}\n";
    ASSERT_TRUE(write_str(h.c_in.write.get(), req));
    EXPECT_EQ(read_for(h.s_in.read.get(), req.size(), 5s), req);
    h.finish();
    EXPECT_EQ(h.relay->stats().diverted, 0u);
    EXPECT_EQ(h.relay->stats().invalid_client, 1u);
}

TEST(Relay, DeniedRequestIsAnsweredWithItsIdAndNotForwarded) {
    DenyingSink sink;
    Harness h(sink, {});
    std::string bad =
        R"({"jsonrpc":"2.0","id":"17","method":"tools/call","params":{"name":"forbidden"}})"
        "\n";
    ASSERT_TRUE(write_str(h.c_in.write.get(), bad));
    std::string answer = read_line(h.c_out.read.get());
    EXPECT_NE(answer.find(R"("id":"17")"), std::string::npos) << answer;
    EXPECT_NE(answer.find(R"("error":{"code":-32000)"), std::string::npos) << answer;
    EXPECT_NE(answer.find("journal unavailable"), std::string::npos) << answer;
    // Negative control: an allowed request right after does reach the server, first.
    ASSERT_TRUE(write_str(h.c_in.write.get(), kReq17 + "\n"));
    EXPECT_EQ(read_line(h.s_in.read.get()), kReq17 + "\n");
    h.finish();
    EXPECT_EQ(h.relay->stats().denied, 1u);
}

// Hands out records 1001, 1002, … (as the journal hands out seqs), remembers which id got
// which, and how each record was settled: answered or abandoned. Denies the tool "forbidden".
std::string echo_call(int id);
std::string echo_answer(int id);

class RecordSink : public CountingSink {
  public:
    Result<int64_t> on_request(const rpc::Message& m, std::string_view line) override {
        if (m.tool == "forbidden") return Error::msg("journal unavailable");
        int64_t record = 1000 + *CountingSink::on_request(m, line);
        record_of[std::string(m.id.raw)] = record;
        return record;
    }
    void on_response(const Answer& a, const Outstanding* req) override {
        CountingSink::on_response(a, req);
        if (!req) return;
        settled[req->record].push_back("answered " + req->raw);
        answers[req->record] = a;
    }
    void on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) override {
        CountingSink::on_client_lost(cause, outstanding);
        for (auto& o : outstanding)
            settled[o.record].push_back("abandoned " + o.raw);
    }
    std::map<std::string, int64_t> record_of;             // request id → its record
    std::map<int64_t, std::vector<std::string>> settled;  // record → how it was settled
    std::map<int64_t, Answer> answers;
};

std::string batch_of(int from, int to, const char* tool_at, int at) {
    std::string b = "[";
    for (int id = from; id <= to; ++id) {
        if (id > from) b += ',';
        b += R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
             R"(,"method":"tools/call","params":{"name":")" + (id == at ? tool_at : "echo") +
             R"("}})";
    }
    return b + "]";
}

// A batch of more than 64 requests: every member is tracked under the record the sink gave
// it, so every answer settles its own request (the journal's request_seq) and none stays in
// flight.
TEST(Relay, EveryMemberOfALargeBatchIsAnsweredUnderItsOwnRecord) {
    constexpr int kMembers = 70;
    RecordSink sink;
    Harness h(sink, {});
    std::string batch = batch_of(1, kMembers, "echo", 0) + "\n";
    ASSERT_TRUE(write_str(h.c_in.write.get(), batch));
    ASSERT_EQ(read_for(h.s_in.read.get(), batch.size(), 5s), batch);
    std::string answers = "[";
    for (int id = 1; id <= kMembers; ++id)
        answers += (id > 1 ? "," : "") + echo_answer(id);
    answers += "]\n";
    ASSERT_TRUE(write_str(h.s_out.write.get(), answers));
    ASSERT_EQ(read_for(h.c_out.read.get(), answers.size(), 5s), answers);
    h.c_in.write.reset();
    ASSERT_TRUE(h.saw(Relay::Wake::What::client_lost));
    h.finish();
    ASSERT_EQ(sink.record_of.size(), static_cast<size_t>(kMembers));
    for (int id = 1; id <= kMembers; ++id) {
        auto id_text = std::to_string(id);
        EXPECT_EQ(sink.settled[sink.record_of[id_text]],
                  std::vector<std::string>{"answered " + id_text})
            << "member " << id;
    }
    EXPECT_EQ(sink.settled.count(0), 0u) << "answers settled under record 0";
    EXPECT_EQ(sink.abandoned, 0u);
}

// A batch is forwarded whole or not at all. Refused at its third request, the two recorded
// before it are answered by the refusal (a JSON-RPC error, as the client saw), not left in
// flight; nothing of the batch reaches the server.
TEST(Relay, ABatchRefusedAtAMemberSettlesTheMembersRecordedBeforeIt) {
    RecordSink sink;
    Harness h(sink, {});
    std::string batch = batch_of(1, 4, "forbidden", 3) + "\n";
    ASSERT_TRUE(write_str(h.c_in.write.get(), batch));
    std::string refusal = read_line(h.c_out.read.get());
    for (int id = 1; id <= 4; ++id)
        EXPECT_NE(refusal.find(R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                               R"(,"error":{"code":-32000,)"),
                  std::string::npos)
            << refusal;
    // The next request is the first thing the server reads: the batch never went out.
    ASSERT_TRUE(write_str(h.c_in.write.get(), echo_call(5) + "\n"));
    EXPECT_EQ(read_line(h.s_in.read.get()), echo_call(5) + "\n");
    h.c_in.write.reset();
    ASSERT_TRUE(h.saw(Relay::Wake::What::client_lost));
    h.finish();
    ASSERT_EQ(sink.record_of.size(), 3u);  // 1, 2 and 5; 3 was refused, 4 never asked
    EXPECT_EQ(sink.settled[sink.record_of["1"]], std::vector<std::string>{"answered 1"});
    EXPECT_EQ(sink.settled[sink.record_of["2"]], std::vector<std::string>{"answered 2"});
    const Answer& a = sink.answers[sink.record_of["1"]];
    EXPECT_EQ(a.outcome, rpc::Outcome::rpc_error);
    EXPECT_EQ(a.error_code, -32000);
    EXPECT_EQ(a.bytes + 1, refusal.size());
    // Control: the request the server did get and never answered is abandoned.
    EXPECT_EQ(sink.settled[sink.record_of["5"]], std::vector<std::string>{"abandoned 5"});
    EXPECT_EQ(h.relay->stats().denied, 1u);
}

TEST(Relay, TypedIdsMatchOnlyTheirOwnResponse) {
    CountingSink sink;
    Harness h(sink, {});
    ASSERT_TRUE(write_str(h.c_in.write.get(), kReq17 + "\n"));
    EXPECT_EQ(read_line(h.s_in.read.get()), kReq17 + "\n");
    std::string wrong = R"({"jsonrpc":"2.0","id":"17","result":{}})"
                        "\n";
    std::string right = R"({"jsonrpc":"2.0","id":17,"result":{"isError":true}})"
                        "\n";
    ASSERT_TRUE(write_str(h.s_out.write.get(), wrong + right));
    EXPECT_EQ(read_for(h.c_out.read.get(), wrong.size() + right.size(), 5s), wrong + right);
    h.finish();
    EXPECT_EQ(sink.responses, 2u);
    EXPECT_EQ(sink.matched, 1u);
    EXPECT_EQ(sink.tool_errors, 1u);
    EXPECT_EQ(h.relay->stats().unmatched_responses, 1u);
}

TEST(Relay, StdinEofReportsLossWithOutstandingIds) {
    CountingSink sink;
    Harness h(sink, {});
    std::string reqs = kReq17 + "\n" + kReqS17 + "\n";
    ASSERT_TRUE(write_str(h.c_in.write.get(), reqs));
    EXPECT_EQ(read_for(h.s_in.read.get(), reqs.size(), 5s), reqs);
    std::string answer = R"({"jsonrpc":"2.0","id":17,"result":{}})"
                         "\n";
    ASSERT_TRUE(write_str(h.s_out.write.get(), answer));
    EXPECT_EQ(read_for(h.c_out.read.get(), answer.size(), 5s), answer);
    EXPECT_FALSE(h.saw(Relay::Wake::What::client_lost, 50ms));  // negative control
    h.c_in.write.reset();
    EXPECT_TRUE(h.saw(Relay::Wake::What::client_lost));
    h.finish();
    EXPECT_EQ(sink.lost, ClientLoss::stdin_eof);
    ASSERT_EQ(sink.abandoned_ids.size(), 1u);
    EXPECT_EQ(sink.abandoned_ids[0], "\"17\"");
}

TEST(Relay, PartialLastLineFromTheClientIsForwardedAtEof) {
    CountingSink sink;
    Harness h(sink, {});
    std::string partial = R"({"jsonrpc":"2.0","id":5,"method":"ping"})";
    ASSERT_TRUE(write_str(h.c_in.write.get(), partial));
    EXPECT_EQ(read_for(h.s_in.read.get(), 1, 100ms), "");  // held until complete or EOF
    h.c_in.write.reset();
    EXPECT_EQ(read_for(h.s_in.read.get(), partial.size(), 5s), partial);
    h.finish();
    EXPECT_EQ(h.relay->stats().partial_client, 1u);
    EXPECT_EQ(h.relay->stats().requests, 1u);
}

TEST(Relay, EpipeOnClientStdoutIsClientLoss) {
    CountingSink sink;
    Harness h(sink, {});
    h.c_out.read.reset();
    ASSERT_TRUE(write_str(h.s_out.write.get(), R"({"jsonrpc":"2.0","method":"n"})"
                                               "\n"));
    EXPECT_TRUE(h.saw(Relay::Wake::What::client_lost));
    h.finish();
    EXPECT_EQ(sink.lost, ClientLoss::stdout_closed);
}

TEST(Relay, ClientThatNeverReadsStallsTheServerNotOurMemory) {
    CountingSink sink;
    RelayOptions o;
    o.max_message = 1 << 20;
    Harness h(sink, o);
    ASSERT_TRUE(set_nonblocking(h.s_out.write.get()).ok());
    std::string line(999, 'x');
    line = R"({"jsonrpc":"2.0","method":"n","params":")" + line + "\"}\n";
    size_t written = 0;
    // Write until the server's pipe is full and stays full: the relay stopped reading.
    auto deadline = std::chrono::steady_clock::now() + 10s;
    int full_in_a_row = 0;
    while (std::chrono::steady_clock::now() < deadline && written < (64u << 20)) {
        ssize_t n = ::write(h.s_out.write.get(), line.data(), line.size());
        if (n > 0) {
            written += static_cast<size_t>(n);
            full_in_a_row = 0;
            continue;
        }
        if (++full_in_a_row > 50) break;
        std::this_thread::sleep_for(2ms);
    }
    EXPECT_GT(full_in_a_row, 50) << "the server was never stalled";
    EXPECT_LT(written, 2u << 20) << "the relay kept reading for a client that does not read";
    h.finish();
    EXPECT_LE(h.relay->buffered(), 256u << 10);
}

TEST(Relay, OversizeLineIsForwardedWholeAndCounted) {
    CountingSink sink;
    RelayOptions o;
    o.max_message = 1000;
    Harness h(sink, o);
    std::string big =
        R"({"jsonrpc":"2.0","id":1,"method":"x","params":")" + std::string(100000, 'a') + "\"}\n";
    std::thread writer([&] { (void)write_str(h.c_in.write.get(), big + kReq17 + "\n"); });
    std::string got = read_for(h.s_in.read.get(), big.size() + kReq17.size() + 1, 10s);
    writer.join();
    EXPECT_TRUE(got == big + kReq17 + "\n");
    h.finish();
    EXPECT_EQ(h.relay->stats().oversize_client, 1u);
    EXPECT_EQ(sink.oversize, 1u);
    // The oversize line is not classified, but its first piece shows a request (id 1, method
    // x): it is put to the sink before any of it is forwarded.
    EXPECT_EQ(sink.requests, 2u);
}

TEST(Relay, ServerClosingItsOutputIsReportedOnce) {
    CountingSink sink;
    Harness h(sink, {});
    ASSERT_TRUE(write_str(h.s_out.write.get(), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}"));
    h.s_out.write.reset();
    EXPECT_FALSE(h.saw(Relay::Wake::What::server_closed, 100ms));  // stderr still open
    h.s_err.write.reset();
    EXPECT_TRUE(h.saw(Relay::Wake::What::server_closed));
    EXPECT_EQ(read_for(h.c_out.read.get(), 36, 5s), "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}");
    h.finish();
    EXPECT_EQ(h.relay->stats().partial_server, 1u);
}

// ---- Answered means delivered ------------------------------------------------------------

std::string request(int id) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
           R"(,"method":"tools/call","params":{"name":"big"}})"
           "\n";
}

// A response line of exactly `size` bytes, newline included.
std::string answer_of_size(int id, size_t size) {
    std::string head = R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
                       R"(,"result":{"content":[{"type":"text","text":")";
    std::string tail = "\"}]}}\n";
    return head + std::string(size - head.size() - tail.size(), 'a') + tail;
}

// Sends `requests` from the client and waits until the server has them.
void send_requests(Harness& h, const std::string& requests) {
    ASSERT_TRUE(write_str(h.c_in.write.get(), requests));
    ASSERT_EQ(read_for(h.s_in.read.get(), requests.size(), 5s), requests);
}

// A client process that reads `want` bytes of the relay's output, says so, and then waits to
// be SIGKILLed: a client that dies in the middle of an answer.
class ReadingClient {
  public:
    ReadingClient(int from, size_t want)
        : told_(make_pipe().value()), child_([&] {
              // Only async-signal-safe calls: the test process has threads.
              static char buf[65536];
              size_t got = 0;
              while (got < want) {
                  ssize_t n = ::read(from, buf, std::min(sizeof buf, want - got));
                  if (n <= 0) ::_exit(1);
                  got += static_cast<size_t>(n);
              }
              if (::write(told_.write.get(), "r", 1) != 1) ::_exit(1);
              for (;;)
                  ::pause();
          }) {}

    bool started() const { return child_.started(); }
    // True once it has read what it was to read.
    bool has_read(std::chrono::milliseconds timeout) {
        pollfd p{told_.read.get(), POLLIN, 0};
        char c;
        return ::poll(&p, 1, static_cast<int>(timeout.count())) == 1 &&
               ::read(told_.read.get(), &c, 1) == 1;
    }
    void kill() { child_.kill_and_reap(); }

  private:
    Pipe told_;
    proc_testing::Child child_;
};

// Request 17, a `size`-byte answer to it, and a client process that reads `read` bytes of it
// and is SIGKILLed.
void client_killed_after_reading(RecordingSink& sink, size_t size, size_t read) {
    Harness h(sink, {});
    send_requests(h, request(17));
    ReadingClient client(h.c_out.read.get(), read);
    ASSERT_TRUE(client.started());
    h.c_out.read.reset();  // the client holds the only read end
    std::string answer = answer_of_size(17, size);
    bool server_done = false;
    std::thread server([&] { server_done = write_within(h.s_out.write.get(), answer, 20s); });
    EXPECT_TRUE(client.has_read(20s));
    client.kill();
    EXPECT_TRUE(h.saw(Relay::Wake::What::client_lost));
    server.join();
    EXPECT_TRUE(server_done) << "the relay stopped reading the server";
    h.finish();
    EXPECT_EQ(sink.lost, ClientLoss::stdout_closed);
}

TEST(Relay, ClientKilledMidAnswerLeavesTheCallAbandoned) {
    RecordingSink sink;
    client_killed_after_reading(sink, 4u << 20, 1u << 20);  // a quarter of the answer
    EXPECT_EQ(sink.responses, 0u) << "reported answered, but the client never had it all";
    EXPECT_EQ(sink.abandoned_sorted(), std::vector<std::string>{"17"});
}

// Negative control: the same client, reading the whole answer before it dies.
TEST(Relay, ClientKilledAfterTheWholeAnswerLeavesItAnswered) {
    RecordingSink sink;
    client_killed_after_reading(sink, 4u << 20, 4u << 20);
    EXPECT_EQ(sink.answered, std::vector<std::string>{"17"});
    EXPECT_TRUE(sink.abandoned_ids.empty());
    EXPECT_EQ(sink.events, (std::vector<std::string>{"answered 17", "lost"}));
}

// The client's pipe shrunk to one page, so the test knows exactly what write() takes.
size_t shrink_client_pipe(Harness& h) {
    int cap = ::fcntl(h.c_out.write.get(), F_SETPIPE_SZ, 4096);
    EXPECT_GT(cap, 0) << std::strerror(errno);
    return cap > 0 ? static_cast<size_t>(cap) : 4096;
}

// Waits until the client's pipe holds `bytes` (the relay wrote them and nobody read).
bool pipe_holds(Harness& h, size_t bytes) {
    return proc_testing::wait_until([&] {
        int n = 0;
        return ::ioctl(h.c_out.read.get(), FIONREAD, &n) == 0 && static_cast<size_t>(n) == bytes;
    });
}

TEST(Relay, AnswersInOneWriteAreAnsweredOnlyIfWhollyWritten) {
    RecordingSink sink;
    Harness h(sink, {});
    size_t cap = shrink_client_pipe(h);
    send_requests(h, request(1) + request(2) + request(3));
    // Three answers in one write: the first fits the client's pipe, the second does not.
    std::string answers =
        answer_of_size(1, 1000) + answer_of_size(2, 3 * cap) + answer_of_size(3, 200);
    ASSERT_TRUE(write_within(h.s_out.write.get(), answers, 5s));
    ASSERT_TRUE(pipe_holds(h, cap));
    EXPECT_FALSE(h.saw(Relay::Wake::What::client_lost, 50ms));
    h.c_out.read.reset();  // the client dies without reading
    EXPECT_TRUE(h.saw(Relay::Wake::What::client_lost));
    h.finish();
    EXPECT_EQ(sink.answered, std::vector<std::string>{"1"});
    EXPECT_EQ(sink.abandoned_sorted(), (std::vector<std::string>{"2", "3"}));
    EXPECT_EQ(sink.events, (std::vector<std::string>{"answered 1", "lost"}));
}

// The boundary: the newline is the answer's last byte; without it the call is not answered.
TEST(Relay, AnAnswerIsAnsweredWithItsLastByteNotBefore) {
    for (size_t extra : {0u, 1u}) {
        SCOPED_TRACE(extra ? "one byte over the pipe" : "exactly the pipe");
        RecordingSink sink;
        Harness h(sink, {});
        size_t cap = shrink_client_pipe(h);
        send_requests(h, request(1));
        ASSERT_TRUE(write_within(h.s_out.write.get(), answer_of_size(1, cap + extra), 5s));
        ASSERT_TRUE(pipe_holds(h, cap));
        h.c_out.read.reset();
        EXPECT_TRUE(h.saw(Relay::Wake::What::client_lost));
        h.finish();
        EXPECT_EQ(sink.answered.size(), extra ? 0u : 1u);
        EXPECT_EQ(sink.abandoned_ids.size(), extra ? 1u : 0u);
    }
}

// An answer to an id with an escaped quote, its id last (as the TypeScript SDK writes it), a
// text that looks like members, and isError after the content.
const std::string kOddId = R"("x\"7")";
const std::string kOddRequest =
    R"({"jsonrpc":"2.0","id":"x\"7","method":"tools/call","params":{"name":"big"}})"
    "\n";

std::string oversize_answer(size_t text_bytes) {
    std::string text;
    const std::string decoy = R"(\"},\"id\":\"x\\\"7\",\"error\":{\"code\":1},{[ )";
    while (text.size() < text_bytes)
        text += decoy;
    return R"({"result":{"content":[{"type":"text","text":")" + text +
           R"("}],"isError":true},"jsonrpc":"2.0","id":"x\"7"})"
           "\n";
}

// Request kOddId and an oversize answer to it (--max-message 1000). Either the client reads
// it all and closes its stdin (and it must have arrived byte for byte), or the client's pipe is
// one page, so that most of the answer is still queued when the relay has read its last piece,
// and then the client closes its stdout without reading. Returns the answer's size.
size_t oversize_exchange(RecordingSink& sink, size_t text_bytes, bool read_all) {
    RelayOptions o;
    o.max_message = 1000;
    Harness h(sink, o);
    if (!read_all) shrink_client_pipe(h);
    send_requests(h, kOddRequest);
    std::string answer = oversize_answer(text_bytes);
    bool server_done = false;
    std::thread server([&] { server_done = write_within(h.s_out.write.get(), answer, 10s); });
    if (read_all) {
        std::string got = read_for(h.c_out.read.get(), answer.size(), 10s);
        EXPECT_TRUE(got == answer) << "the oversize answer was not forwarded byte for byte";
        h.c_in.write.reset();
    } else {
        EXPECT_TRUE(proc_testing::wait_until([&] { return sink.last_piece_read.load(); }));
        h.c_out.read.reset();
    }
    EXPECT_TRUE(h.saw(Relay::Wake::What::client_lost));
    server.join();
    EXPECT_TRUE(server_done) << "the relay stopped reading the server";
    h.finish();
    EXPECT_EQ(h.relay->stats().oversize_server, 1u);
    return answer.size();
}

TEST(Relay, OversizeAnswerAnswersItsCallWhenItsLastPieceIsWritten) {
    RecordingSink sink;
    size_t size = oversize_exchange(sink, 200000, true);
    EXPECT_EQ(sink.answered, std::vector<std::string>{kOddId});
    ASSERT_EQ(sink.answers.size(), 1u);
    EXPECT_EQ(sink.answers[0].outcome, rpc::Outcome::tool_error);
    EXPECT_FALSE(sink.answers[0].error_code.has_value());
    EXPECT_EQ(sink.answers[0].bytes, size - 1);
    EXPECT_EQ(sink.lost, ClientLoss::stdin_eof);
    EXPECT_TRUE(sink.abandoned_ids.empty());
}

// Negative control: the relay has read the whole answer, but only its first page went out.
TEST(Relay, OversizeAnswerCutOffByTheClientIsAbandoned) {
    RecordingSink sink;
    oversize_exchange(sink, 100000, false);
    EXPECT_EQ(sink.responses, 0u);
    EXPECT_EQ(sink.lost, ClientLoss::stdout_closed);
    EXPECT_EQ(sink.abandoned_ids, std::vector<std::string>{kOddId});
}

TEST(Relay, ErrorAnswersCarryTheirCodeAndToolErrorsTheirOutcome) {
    RecordingSink sink;
    Harness h(sink, {});
    send_requests(h, request(1) + request(2) + request(3));
    std::string answers =
        R"({"jsonrpc":"2.0","id":1,"error":{"data":{"code":7},"message":"no","code":-32601}})"
        "\n"
        R"({"jsonrpc":"2.0","id":2,"result":{"content":[{"isError":false}],"isError":true}})"
        "\n"
        R"({"jsonrpc":"2.0","id":3,"result":{"content":[]}})"
        "\n";
    ASSERT_TRUE(write_str(h.s_out.write.get(), answers));
    EXPECT_EQ(read_for(h.c_out.read.get(), answers.size(), 5s), answers);
    h.finish();
    ASSERT_EQ(sink.answered, (std::vector<std::string>{"1", "2", "3"}));
    EXPECT_EQ(sink.answers[0].outcome, rpc::Outcome::rpc_error);
    EXPECT_EQ(sink.answers[0].error_code, std::optional<int64_t>(-32601));
    EXPECT_EQ(sink.answers[1].outcome, rpc::Outcome::tool_error);
    EXPECT_FALSE(sink.answers[1].error_code.has_value());
    EXPECT_EQ(sink.answers[2].outcome, rpc::Outcome::ok);
}

// ---- With the journal ---------------------------------------------------------------------

std::string echo_call(int id) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
           R"(,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}})";
}
std::string echo_answer(int id) {
    return R"({"jsonrpc":"2.0","id":)" + std::to_string(id) +
           R"(,"result":{"content":[{"type":"text","text":"hi"}]}})";
}

// What `mcpwarden run` does, in-process: the relay thread appends each request through the
// JournalSink (synchronously, draining what was posted) while the journal's writer thread
// commits the posted answers. scripts/test.sh runs this under ThreadSanitizer
// (docs/RELIABILITY.md). Every answer the client received is on record as answered; the call
// left unanswered when the client goes is the control: recorded as abandoned, not answered.
TEST(RelayJournal, DeliveredAnswersAreRecordedWhileTheWriterThreadCommits) {
    warden::testing::TempDir dir;
    std::string db = dir.file("journal.db");
    auto j = open_journal(db);
    ASSERT_TRUE(j) << j.error().message;
    auto sink = std::make_unique<JournalSink>(std::move(*j), "", "s1", OnJournalFailure::Deny,
                                              RecordArgs::None, STDERR_FILENO);
    journal::SessionStart start;
    start.session = "s1";
    start.server_name = "in-process";
    sink->append(journal::session_start(start));
    constexpr int kCalls = 40;
    {
        Harness h(*sink, {});
        ASSERT_TRUE(h.relay);
        for (int id = 1; id <= kCalls; ++id) {
            ASSERT_TRUE(write_str(h.c_in.write.get(), echo_call(id) + "\n"));
            ASSERT_EQ(read_line(h.s_in.read.get()), echo_call(id) + "\n") << "call " << id;
            if (id == kCalls) break;  // the last call is never answered
            ASSERT_TRUE(write_str(h.s_out.write.get(), echo_answer(id) + "\n"));
            ASSERT_EQ(read_line(h.c_out.read.get()), echo_answer(id) + "\n") << "answer " << id;
        }
        h.c_in.write.reset();  // the client goes with call kCalls outstanding
        ASSERT_TRUE(h.saw(Relay::Wake::What::client_lost));
        h.finish();
    }
    sink->flush();
    sink.reset();  // closes the journal: its writer thread is joined

    int requests = 0, lost = 0;
    std::map<int, std::string> outcome;  // id → the response's outcome, or "abandoned"
    auto st = journal::for_each_record(db, 0, [&](const journal::Record& rec) {
        auto body = nlohmann::json::parse(rec.body, nullptr, false);
        if (!body.is_object()) return true;
        const auto data = body.value("data", nlohmann::json::object());
        const auto id = data.value("id", nlohmann::json());  // typed: {"n": 7}
        int n = id.is_object() ? id.value("n", -1) : -1;
        if (rec.kind == "activity.request") ++requests;
        if (rec.kind == "activity.response") outcome[n] = data.value("outcome", "?");
        if (rec.kind == "activity.abandoned") outcome[n] = "abandoned";
        if (rec.kind == "session.client_lost") ++lost;
        return true;
    });
    ASSERT_TRUE(st.ok()) << st.error().message;
    EXPECT_EQ(requests, kCalls);
    EXPECT_EQ(lost, 1);
    ASSERT_EQ(outcome.size(), static_cast<size_t>(kCalls));
    for (int id = 1; id < kCalls; ++id)
        EXPECT_EQ(outcome[id], "ok") << "call " << id;
    EXPECT_EQ(outcome[kCalls], "abandoned");
}

}  // namespace
}  // namespace warden::shim
