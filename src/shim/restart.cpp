#include "shim/restart.hpp"

#include <string.h>
#include <sys/wait.h>

#include <algorithm>

#include <fmt/format.h>

namespace warden::shim {

ServerFailure ServerFailure::from_wait_status(int status) {
    ServerFailure f;
    f.wait_status = status;
    f.cause = WIFSIGNALED(status) ? "signal" : "exit";
    if (WIFEXITED(status))
        f.evidence["exit_status"] = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
        f.evidence["signal"] = WTERMSIG(status);
    return f;
}

std::string ServerFailure::describe() const {
    if (!summary.empty()) return summary;
    if (wait_status && WIFEXITED(*wait_status))
        return fmt::format("the server exited with status {}", WEXITSTATUS(*wait_status));
    if (wait_status && WIFSIGNALED(*wait_status)) {
        const int sig = WTERMSIG(*wait_status);
        const char* abbrev = ::sigabbrev_np(sig);
        return abbrev ? fmt::format("the server was killed by signal {} (SIG{})", sig, abbrev)
                      : fmt::format("the server was killed by signal {}", sig);
    }
    return "the server's tree ended (" + cause + ")";
}

bool ServerFailure::is_failure() const {
    return !(cause == "exit" && wait_status && WIFEXITED(*wait_status) &&
             WEXITSTATUS(*wait_status) == 0);
}

std::string crash_message(const ServerFailure& f) {
    std::string head = "mcpwarden: " + f.describe();
    if (f.stderr_tail.empty()) return head + " (its stderr was empty)";
    head += "; its last stderr lines: ";
    // The last lines are the explanation (a traceback ends with the exception): keep them
    // first, and what does not fit goes from the oldest.
    const size_t room = kCrashMessageMax > head.size() ? kCrashMessageMax - head.size() : 0;
    std::vector<std::string> kept;
    size_t used = 0;
    const size_t first =
        f.stderr_tail.size() > kCrashTailLines ? f.stderr_tail.size() - kCrashTailLines : 0;
    for (size_t i = f.stderr_tail.size(); i-- > first;) {
        std::string line = f.stderr_tail[i];
        const size_t sep = kept.empty() ? 0 : 3;
        if (used + sep + line.size() > room) {
            if (kept.empty())
                line = "…" + line.substr(line.size() - (room > 3 ? room - 3 : 0));
            else
                break;
        }
        used += sep + line.size();
        kept.push_back(std::move(line));
    }
    std::reverse(kept.begin(), kept.end());
    std::string out = head;
    for (size_t i = 0; i < kept.size(); ++i)
        out += (i ? " | " : "") + kept[i];
    return out;
}

StartLimit::Clock::duration StartLimit::backoff(int k) {
    if (k <= 1) return Clock::duration::zero();
    Clock::duration d = kBackoffFirst;
    for (int i = 2; i < k && d < kBackoffMax; ++i)
        d *= 2;
    return std::min<Clock::duration>(d, kBackoffMax);
}

void StartLimit::forget_before(Clock::time_point now) {
    while (!starts_.empty() && now - starts_.front() >= interval_)
        starts_.pop_front();
}

int StartLimit::recent(Clock::time_point now) {
    forget_before(now);
    return static_cast<int>(starts_.size());
}

StartLimit::Decision StartLimit::next(Clock::time_point now, bool unlimited) {
    forget_before(now);
    Decision d;
    if (unlimited) {
        d.allowed = true;
        return d;
    }
    if (static_cast<int>(starts_.size()) >= burst_) {
        d.retry_at = starts_.front() + interval_;
        return d;
    }
    d.allowed = true;
    d.delay = backoff(static_cast<int>(starts_.size()) + 1);
    starts_.push_back(now + d.delay);
    return d;
}

std::string start_limit_message(const StartLimit& limit, std::chrono::milliseconds retry_in,
                                const std::string& last_failure) {
    return fmt::format(
        "mcpwarden: the server is not restarted: it failed {} times within {} ms (the start "
        "limit, --restart-burst {} --restart-interval {}ms); the last time {}. The first request "
        "after {} ms starts it again; to reset the limit now, restart the MCP server in the "
        "client (a new session)",
        limit.burst(), limit.interval().count(), limit.burst(), limit.interval().count(),
        last_failure.empty() ? "it failed" : last_failure, std::max<int64_t>(retry_in.count(), 0));
}

}  // namespace warden::shim
