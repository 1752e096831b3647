// bench_export: what `mcpwarden export` costs and how far behind it runs.
//
//   throughput  records/s from a journal of --records (default 1,000,000) activity records to
//               a local receiver (an HTTP sink in this process that reads each request whole
//               and answers 200), all three OTLP signals, protobuf; the exporter's CPU per
//               record and its peak RSS (wait4). Goal: ≥ 50,000 records/s.
//   relay       the round trip of a tools/call echo through `mcpwarden run` (journal on),
//               alone and with an exporter following that journal into a receiver that
//               never answers, interleaved round by round (the same run, the same load).
//               Goal: unchanged within noise.
//   lag         a session answering --rate calls/s (default 100) for --seconds (default 10)
//               with an exporter following it (OTLP/JSON traces): the time from each answer
//               to the arrival of its span at the sink (p50, p99).
//
// Usage: bench_export [--records N] [--rounds R] [--calls C] [--rate R] [--seconds S]
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "children.hpp"
#include "journal/journal.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using warden::bench::loadavg;

int64_t arg(int argc, char** argv, const char* name, int64_t fallback) {
    for (int i = 1; i + 1 < argc; ++i)
        if (std::strcmp(argv[i], name) == 0) return std::atoll(argv[i + 1]);
    return fallback;
}

double percentile(std::vector<double> v, double p) {
    if (v.empty()) return 0;
    std::sort(v.begin(), v.end());
    return v[std::min(v.size() - 1, static_cast<size_t>(p * static_cast<double>(v.size())))];
}

// An HTTP/1.1 sink on 127.0.0.1: reads each request whole (Content-Length) and answers 200,
// or never answers (`stall`). With `on_body`, hands each body to it with its arrival time.
class Sink {
  public:
    explicit Sink(bool stall,
                  std::function<void(const std::string&, Clock::time_point)> on_body = {})
        : stall_(stall), on_body_(std::move(on_body)) {
        fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        ::bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a);
        ::listen(fd_, 16);
        socklen_t len = sizeof a;
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
        port_ = ntohs(a.sin_port);
        thread_ = std::thread([this] { accept_loop(); });
    }
    ~Sink() {
        stop_ = true;
        ::shutdown(fd_, SHUT_RDWR);
        ::close(fd_);
        thread_.join();
        for (auto& t : conns_)
            t.join();
    }
    std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  private:
    void accept_loop() {
        while (!stop_) {
            int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
            if (c < 0) return;
            conns_.emplace_back([this, c] { serve(c); });
        }
    }
    void serve(int c) {
        timeval tv{0, 200000};
        ::setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        std::string buf;
        char chunk[1 << 16];
        while (!stop_) {
            ssize_t n = ::read(c, chunk, sizeof chunk);
            if (n == 0) break;
            if (n < 0) {
                if (errno == EAGAIN || errno == EINTR) continue;
                break;
            }
            buf.append(chunk, static_cast<size_t>(n));
            for (;;) {
                auto end = buf.find("\r\n\r\n");
                if (end == std::string::npos) break;
                size_t body = 0;
                auto cl = buf.find("Content-Length: ");
                if (cl != std::string::npos && cl < end)
                    body = std::strtoull(buf.c_str() + cl + 16, nullptr, 10);
                if (buf.size() < end + 4 + body) break;
                if (on_body_) on_body_(buf.substr(end + 4, body), Clock::now());
                buf.erase(0, end + 4 + body);
                if (!stall_) {
                    static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
                    if (::write(c, ok, sizeof ok - 1) < 0) break;
                }
            }
        }
        ::close(c);
    }
    int fd_ = -1;
    uint16_t port_ = 0;
    bool stall_;
    std::function<void(const std::string&, Clock::time_point)> on_body_;
    std::atomic<bool> stop_{false};
    std::thread thread_;
    std::vector<std::thread> conns_;
};

// A journal of `n` records: sessions of 1,000 records, each a start, request/answer pairs of
// tools/call, and an end.
void build_journal(const std::string& db, int64_t n) {
    namespace j = warden::journal;
    auto journal = j::Journal::open({.path = db, .checkpoint_every = 1 << 30});
    if (!journal) {
        std::fprintf(stderr, "bench_export: %s\n", journal.error().message.c_str());
        std::exit(1);
    }
    std::vector<j::Event> batch;
    int64_t seq = 0;
    for (int64_t s = 0; seq < n; ++s) {
        std::string session = "bench" + std::to_string(s);
        batch.push_back({"session.start", session, 0, {{"server_name", "fixture"}}});
        ++seq;
        for (int i = 0; i < 499 && seq + 2 < n; ++i) {
            int64_t req = ++seq;
            batch.push_back(
                {"activity.request",
                 session,
                 0,
                 {{"id", {{"n", i}}}, {"method", "tools/call"}, {"tool", "echo"}, {"bytes", 120}}});
            ++seq;
            batch.push_back({"activity.response",
                             session,
                             0,
                             {{"id", {{"n", i}}},
                              {"request_seq", req},
                              {"outcome", "ok"},
                              {"bytes", 80},
                              {"duration_ns", 150000}}});
        }
        batch.push_back({"session.end", session, 0, {{"reason", "client_lost"}}});
        ++seq;
        if (batch.size() >= 10000 || seq >= n) {
            if (!(*journal)->append_all(batch)) std::exit(1);
            batch.clear();
        }
    }
    (void)(*journal)->close();
}

// An empty journal, so that a follower started before the first session finds one.
void create_journal(const std::string& db) {
    auto journal = warden::journal::Journal::open({.path = db});
    if (!journal) std::exit(1);
    (void)(*journal)->close();
}

struct ChildRun {
    double wall_s = 0, cpu_s = 0;
    long max_rss_kb = 0;
    int status = -1;
};

ChildRun run_exporter(const std::vector<std::string>& argv) {
    auto t0 = Clock::now();
    pid_t pid = ::fork();
    if (pid == 0) {
        int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 2);
        std::vector<char*> v;
        for (auto& s : argv)
            v.push_back(const_cast<char*>(s.c_str()));
        v.push_back(nullptr);
        ::execv(v[0], v.data());
        ::_exit(127);
    }
    ChildRun r;
    rusage ru{};
    ::wait4(pid, &r.status, 0, &ru);
    r.wall_s = std::chrono::duration<double>(Clock::now() - t0).count();
    r.cpu_s = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
              static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
    r.max_rss_kb = ru.ru_maxrss;
    return r;
}

// A session through `mcpwarden run` and a client that times its calls.
struct Session {
    warden::bench::PipedChild p;
    std::string pending;
    int64_t next_id = 100;

    explicit Session(const std::string& db) {
        p = warden::bench::spawn_piped({WARDEN_CLI, "run", "--journal", db, "--", WARDEN_FIXTURE});
        call(
            R"({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}})");
    }
    // EOF to the relay; it tears the tree down and exits (bounded), then its group goes.
    ~Session() {
        ::close(p.in);
        for (int i = 0; i < 500; ++i) {
            if (::waitpid(p.pid, nullptr, WNOHANG) == p.pid) {
                ::close(p.out);
                return;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(10));
        }
        ::kill(-p.pid, SIGKILL);
        ::waitpid(p.pid, nullptr, 0);
        ::close(p.out);
    }
    // One request, its answer read: the round trip in µs.
    double call(const std::string& line) {
        auto t0 = Clock::now();
        std::string out = line + "\n";
        if (::write(p.in, out.data(), out.size()) < 0) std::exit(1);
        char buf[65536];
        for (;;) {
            auto nl = pending.find('\n');
            if (nl != std::string::npos) {
                pending.erase(0, nl + 1);
                break;
            }
            ssize_t n = ::read(p.out, buf, sizeof buf);
            if (n <= 0) std::exit(1);
            pending.append(buf, static_cast<size_t>(n));
        }
        return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
    }
    double echo() {
        return call(R"({"jsonrpc":"2.0","id":)" + std::to_string(next_id++) +
                    R"(,"method":"tools/call","params":{"name":"echo","arguments":{"text":"x"}}})");
    }
};

pid_t start_follower(const std::string& db, const std::string& url, const char* protocol,
                     const char* signals) {
    pid_t pid = ::fork();
    if (pid == 0) {
        int null = ::open("/dev/null", O_WRONLY);
        ::dup2(null, 2);
        // Uncompressed, so that the lag's sink can read the request ids in the bodies.
        ::setenv("OTEL_EXPORTER_OTLP_COMPRESSION", "none", 1);
        ::execl(WARDEN_CLI, WARDEN_CLI, "export", "--follow", "--otlp", url.c_str(), "--protocol",
                protocol, "--signals", signals, "--journal", db.c_str(),
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    return pid;
}

void stop_follower(pid_t pid) {
    ::kill(pid, SIGTERM);
    ::waitpid(pid, nullptr, 0);
}

}  // namespace

int main(int argc, char** argv) {
    const int64_t records = arg(argc, argv, "--records", 1'000'000);
    const int64_t rounds = arg(argc, argv, "--rounds", 6);
    const int64_t calls = arg(argc, argv, "--calls", 2000);
    const int64_t rate = arg(argc, argv, "--rate", 100);
    const int64_t seconds = arg(argc, argv, "--seconds", 10);
    auto dir =
        std::filesystem::temp_directory_path() / ("bench_export." + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::printf(
        "export benchmark: %lld records; relay %lld rounds of %lld calls; lag at %lld calls/s "
        "for %lld s; load %s\n",
        static_cast<long long>(records), static_cast<long long>(rounds),
        static_cast<long long>(calls), static_cast<long long>(rate),
        static_cast<long long>(seconds), loadavg().c_str());

    // Throughput.
    {
        std::string db = (dir / "big.db").string();
        auto t0 = Clock::now();
        build_journal(db, records);
        std::printf("  journal of %lld records built in %.1f s\n", static_cast<long long>(records),
                    std::chrono::duration<double>(Clock::now() - t0).count());
        Sink sink(false);
        auto r = run_exporter(
            {WARDEN_CLI, "export", "--otlp", sink.url(), "--batch", "1000", "--journal", db});
        std::printf(
            "  throughput: %.0f records/s (goal >= 50,000), %.2f us CPU/record, peak RSS %.1f MiB, "
            "exit %d\n",
            static_cast<double>(records) / r.wall_s, r.cpu_s * 1e6 / static_cast<double>(records),
            static_cast<double>(r.max_rss_kb) / 1024, WEXITSTATUS(r.status));
    }
    // The relay's round trip, with and without an exporter stalled on its receiver.
    {
        std::string db = (dir / "relay.db").string();
        create_journal(db);
        Sink stalled(true);
        std::vector<double> alone, beside;
        for (int64_t round = 0; round < rounds; ++round) {
            // Which goes first alternates, so that neither always follows the other.
            for (bool with : {round % 2 == 1, round % 2 == 0}) {
                pid_t follower =
                    with ? start_follower(db, stalled.url(), "http/protobuf", "traces,logs,metrics")
                         : 0;
                // Running already, as a follower is: its start-up is not what is measured.
                if (follower) std::this_thread::sleep_for(std::chrono::milliseconds(500));
                {
                    Session s(db);
                    for (int64_t i = 0; i < calls; ++i)
                        (with ? beside : alone).push_back(s.echo());
                }
                if (follower) stop_follower(follower);
            }
        }
        std::printf(
            "  relay round trip, journal on: alone p50 %.1f us p99 %.1f us; exporter running, "
            "receiver stalled: p50 %.1f us p99 %.1f us (goal: unchanged within noise)\n",
            percentile(alone, 0.5), percentile(alone, 0.99), percentile(beside, 0.5),
            percentile(beside, 0.99));
    }
    // Lag from an answer to its span at the receiver.
    {
        std::string db = (dir / "lag.db").string();
        create_journal(db);
        std::mutex mu;
        std::map<std::string, Clock::time_point> arrived;
        Sink sink(false, [&](const std::string& body, Clock::time_point at) {
            static const std::string key = R"("jsonrpc.request.id","value":{"stringValue":")";
            std::lock_guard lock(mu);
            for (size_t p = body.find(key); p != std::string::npos; p = body.find(key, p + 1)) {
                size_t s = p + key.size();
                arrived.emplace(body.substr(s, body.find('"', s) - s), at);
            }
        });
        pid_t follower = start_follower(db, sink.url(), "http/json", "traces");
        std::map<std::string, Clock::time_point> answered;
        {
            Session s(db);
            auto period = std::chrono::microseconds(1'000'000 / std::max<int64_t>(rate, 1));
            auto next = Clock::now();
            for (int64_t i = 0; i < rate * seconds; ++i) {
                std::this_thread::sleep_until(next);
                next += period;
                std::string id = std::to_string(s.next_id);
                s.echo();
                answered[id] = Clock::now();
            }
            std::this_thread::sleep_for(std::chrono::seconds(2));
        }
        stop_follower(follower);
        std::vector<double> lag;
        size_t missing = 0;
        std::lock_guard lock(mu);
        for (const auto& [id, t] : answered) {
            auto it = arrived.find(id);
            if (it == arrived.end())
                ++missing;
            else
                lag.push_back(std::chrono::duration<double, std::milli>(it->second - t).count());
        }
        std::printf(
            "  lag answer -> span at the receiver, %lld calls/s: p50 %.1f ms p99 %.1f ms "
            "(%zu spans, %zu missing)\n",
            static_cast<long long>(rate), percentile(lag, 0.5), percentile(lag, 0.99), lag.size(),
            missing);
    }
    std::filesystem::remove_all(dir);
    return 0;
}
