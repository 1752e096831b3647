#include "shim/health.hpp"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "sys/fd.hpp"

namespace warden::shim {

namespace {

using Clock = std::chrono::steady_clock;

// What /proc/PID[/task/TID]/stat says of one process or thread.
struct StatLine {
    std::string comm;
    char state = '?';
    uint64_t ticks = 0;  // utime + stime
    bool ok = false;
};

StatLine read_stat_line(const std::string& dir) {
    StatLine s;
    auto text = read_file(dir + "/stat");
    if (!text) return s;
    auto open = text->find('('), close = text->rfind(')');
    if (open == std::string::npos || close == std::string::npos || close < open) return s;
    s.comm = text->substr(open + 1, close - open - 1);
    std::istringstream in(text->substr(close + 1));
    std::string f[13];
    for (auto& x : f)
        in >> x;
    if (f[0].empty()) return s;
    s.state = f[0][0];
    s.ticks = std::strtoull(f[11].c_str(), nullptr, 10) + std::strtoull(f[12].c_str(), nullptr, 10);
    s.ok = true;
    return s;
}

std::string read_wchan(const std::string& dir) {
    auto t = read_file(dir + "/wchan");
    if (!t || t->empty() || *t == "0") return "-";
    return *t;
}

int64_t ticks_to_ms(uint64_t ticks) {
    static const long hz = ::sysconf(_SC_CLK_TCK);
    return static_cast<int64_t>(ticks * 1000 / static_cast<uint64_t>(hz > 0 ? hz : 100));
}

std::vector<pid_t> threads_of(const std::string& dir, size_t at_most) {
    std::vector<pid_t> out;
    DIR* d = ::opendir((dir + "/task").c_str());
    if (!d) return out;
    while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9') continue;
        if (out.size() >= at_most) break;
        out.push_back(static_cast<pid_t>(std::atoi(e->d_name)));
    }
    ::closedir(d);
    std::sort(out.begin(), out.end());
    return out;
}

constexpr size_t kThreadsShown = 16;
constexpr size_t kMembersShown = 64;
// Without a sample from the ping, the window is a short look taken now.
constexpr std::chrono::milliseconds kLookWindow{250};

}  // namespace

CpuSample sample_cpu(const std::vector<pid_t>& members) {
    CpuSample s;
    s.at = Clock::now();
    for (pid_t pid : members)
        if (auto st = read_stat_line("/proc/" + std::to_string(pid)); st.ok)
            s.ticks[pid] = st.ticks;
    return s;
}

journal::Json wedged_evidence(const std::vector<pid_t>& members, const CpuSample& before_in) {
    CpuSample before = before_in;
    if (before.ticks.empty()) {
        before = sample_cpu(members);
        std::this_thread::sleep_for(kLookWindow);
    }
    const auto window_ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - before.at).count();
    journal::Json list = journal::Json::array();
    for (pid_t pid : members) {
        if (list.size() >= kMembersShown) break;
        const std::string dir = "/proc/" + std::to_string(pid);
        StatLine st = read_stat_line(dir);
        if (!st.ok) continue;  // gone meanwhile
        journal::Json m{{"pid", pid},
                        {"comm", st.comm},
                        {"state", std::string(1, st.state)},
                        {"wchan", read_wchan(dir)}};
        if (auto b = before.ticks.find(pid); b != before.ticks.end() && st.ticks >= b->second)
            m["cpu_ms_in_window"] = ticks_to_ms(st.ticks - b->second);
        journal::Json threads = journal::Json::array();
        for (pid_t tid : threads_of(dir, kThreadsShown)) {
            const std::string tdir = dir + "/task/" + std::to_string(tid);
            StatLine t = read_stat_line(tdir);
            if (!t.ok) continue;
            threads.push_back({{"tid", tid},
                               {"state", std::string(1, t.state)},
                               {"wchan", read_wchan(tdir)},
                               {"cpu_ms", ticks_to_ms(t.ticks)}});
        }
        m["threads"] = std::move(threads);
        list.push_back(std::move(m));
    }
    return journal::Json{{"window_ms", static_cast<int64_t>(window_ms)}, {"members", list}};
}

Health::Health(Relay& relay, RelayGate* inner, HealthOptions opts,
               std::function<std::vector<pid_t>()> members)
    : relay_(relay), inner_(inner), opts_(opts), members_(std::move(members)) {
    ping_sent_ = Clock::now();
}

bool Health::client_message(const rpc::Message& m, std::string_view line) {
    if (m.kind == rpc::Kind::request) {
        if (m.method == "initialize") handshake_seen_ = true;
        if (m.era == rpc::Era::stateless && !stateless_ && opts_.every) {
            stateless_ = true;
            std::fprintf(stderr,
                         "mcpwarden: --health: a session of the 2026-07-28 protocol has no ping; "
                         "only --request-timeout watches this server\n");
        }
    }
    return inner_ && inner_->client_message(m, line);
}

bool Health::server_response(const rpc::Message& m, std::string_view line) {
    if (!ping_id_.empty() && m.id.type == rpc::IdType::string && m.id.raw == ping_id_) {
        // Answered, whatever the answer says (an error is an answer too): alive.
        ping_id_.clear();
        ++answered_;
        if (idle_before_ping_ && !opts_.ping_is_activity)
            relay_.restore_idle_since(*idle_before_ping_);
        return true;
    }
    return inner_ && inner_->server_response(m, line);
}

void Health::server_notification(const rpc::Message& m) {
    if (inner_) inner_->server_notification(m);
}

std::optional<Clock::time_point> Health::oldest_request() const {
    std::optional<Clock::time_point> oldest;
    for (const Outstanding& o : relay_.outstanding())
        if (o.answer == 0 && (!oldest || o.sent < *oldest)) oldest = o.sent;
    return oldest;
}

bool Health::ping_due(Clock::time_point now) const {
    if (!opts_.every || stateless_ || !handshake_seen_ || !ping_id_.empty()) return false;
    if (!relay_.idle_since()) return false;  // in flight, or bytes queued: not idle
    return now - ping_sent_ >= *opts_.every;
}

void Health::send_ping(Clock::time_point now) {
    ++pings_;
    std::string id = fmt::format("\"mcpwarden-health-{}\"", pings_);
    const std::string line =
        fmt::format("{{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}}\n", id);
    idle_before_ping_ = relay_.idle_since();
    window_ = sample_cpu(members_());
    ping_sent_ = now;
    if (relay_.write_to_server_now(line)) ping_id_ = std::move(id);
}

std::optional<Health::Wedged> Health::check(bool awake) {
    if (wedged_) return std::nullopt;
    const auto now = Clock::now();
    if (!awake) {
        ping_id_.clear();  // the server it went to is gone
        return std::nullopt;
    }
    std::optional<std::string> why;
    if (!ping_id_.empty() && now - ping_sent_ >= opts_.answer_within) {
        why = fmt::format("no answer to a ping within {} ms", opts_.answer_within.count());
    } else if (auto oldest = oldest_request();
               oldest && opts_.request_timeout && now - *oldest >= *opts_.request_timeout) {
        why = fmt::format(
            "a request unanswered for {} ms (--request-timeout)",
            std::chrono::duration_cast<std::chrono::milliseconds>(now - *oldest).count());
        window_ = CpuSample{};  // no sample covers the request: take a short look
    } else if (ping_due(now)) {
        send_ping(now);
    }
    if (!why) return std::nullopt;
    wedged_ = true;  // once: no more probes after a verdict
    if (!opts_.judge) return std::nullopt;
    return Wedged{*why, wedged_evidence(members_(), window_)};
}

int Health::timeout_ms() const {
    if (wedged_) return -1;
    const auto now = Clock::now();
    std::optional<Clock::time_point> next;
    auto sooner = [&](Clock::time_point t) {
        if (!next || t < *next) next = t;
    };
    if (!ping_id_.empty()) {
        sooner(ping_sent_ + opts_.answer_within);
        // The next ping's time, if the answer comes before it (never one already past: the
        // answer is taken without a wake, and a past time would spin).
        if (opts_.every && ping_sent_ + *opts_.every > now) sooner(ping_sent_ + *opts_.every);
    }
    if (opts_.request_timeout)
        if (auto oldest = oldest_request()) sooner(*oldest + *opts_.request_timeout);
    // The next ping, or, while busy (or before the handshake), the next look: the relay does
    // not return from poll() when a request is answered, so a busy session is looked at
    // again every DUR, never at once (a due ping that cannot be sent would spin).
    if (opts_.every && !stateless_ && ping_id_.empty()) {
        const auto due = ping_sent_ + *opts_.every;
        sooner(handshake_seen_ && relay_.idle_since() ? due : now + *opts_.every);
    }
    // A request that comes while nothing else is watched is seen within 1.5 timeouts.
    if (opts_.request_timeout && !next) sooner(now + *opts_.request_timeout / 2);
    if (!next) return -1;
    auto left = std::chrono::ceil<std::chrono::milliseconds>(*next - now).count();
    return static_cast<int>(std::clamp<int64_t>(left, 0, 24 * 3600 * 1000));
}

}  // namespace warden::shim
