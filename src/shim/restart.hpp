// A server that died while its client was still there: what is said about it, and whether it
// is started again (docs/LOGS.md, "Crash and restart").
//
// A client whose stdio server dies sees its pipe close and, at best, "connection closed"; the
// request it was waiting on is never answered, and the tool is gone for the rest of the
// conversation. The session stays with the client instead:
//
//   1. explained: every request in flight is answered with a JSON-RPC error whose message
//      names what happened (the exit status or the signal, the kernel's OOM kill, a wedged
//      tree ended by us) and the last lines of the server's stderr, redacted and bounded
//      (crash_message). The failure is on record as `session.crash`, with those requests.
//   2. recovered, under `--restart on-failure`: the server's tree is torn down (what it left)
//      and the server started again in the same containment, the client's handshake replayed
//      to it (the machinery of --idle-stop's wake, shim/hibernation.hpp); requests sent
//      meanwhile are held and served by the new server. `session.restart` records the cause,
//      the evidence and the cold start. A clean exit (status 0) is not a failure, as with
//      systemd's on-failure: the session ends with it. Neither is a death before the
//      handshake was answered: there is nothing to replay, and the client's own start-up error
//      (its initialize answered with the crash message) is the right signal.
//   3. bounded: the start limit (StartLimit) allows `burst` starts in any `interval`, the
//      first at once and the next ones after a doubling backoff; past it no server is started,
//      and each request is answered with an error that says so and when it will be tried
//      again. The session stays up: the client still has its connection, and the first
//      request after the interval starts the server again.
//
// Who calls it: the Session, when the keeper reports the server's exit while awake, and any
// guard that ends a tree itself (a wedged server, a memory cap's OOM kill) through
// Session::server_failed(ServerFailure), which applies the same policy.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace warden::shim {

// Why a server tree ended while its client was still there.
struct ServerFailure {
    // "exit" (a non-zero status), "signal", "oom_kill", "wedged", or a guard's own word.
    std::string cause;
    std::optional<int> wait_status;  // the server's, when it was reaped
    // What the guard that saw it knows (a wedged tree's snapshot, the OOM victim); objects are
    // merged into session.crash's `evidence` beside the status and the stderr tail.
    nlohmann::json evidence = nlohmann::json::object();
    // "the server exited with status 1", "the server was killed by signal 9 (SIGKILL)",
    // "the server was killed by the kernel's OOM killer": set by the guard when its words
    // say more than the wait status (else made from it: describe()).
    std::string summary;
    std::vector<std::string> stderr_tail;  // its last lines, redacted (ServerLog::tail)

    // From the keeper's report of the server's exit.
    static ServerFailure from_wait_status(int status);
    std::string describe() const;
    // Whether --restart on-failure restarts after it: anything but a clean exit.
    bool is_failure() const;
};

// The error message the requests in flight are answered with: what happened, then the last
// stderr lines, the whole bounded to kCrashMessageMax bytes (the last lines kept first).
inline constexpr size_t kCrashMessageMax = 2048;
inline constexpr size_t kCrashTailLines = 5;
std::string crash_message(const ServerFailure& f);

// systemd's StartLimitBurst / StartLimitIntervalSec, with a backoff between the starts.
class StartLimit {
  public:
    using Clock = std::chrono::steady_clock;
    StartLimit(int burst, std::chrono::milliseconds interval)
        : burst_(burst), interval_(interval) {}

    struct Decision {
        bool allowed = false;
        Clock::duration delay{};       // allowed: start after this long (backoff)
        Clock::time_point retry_at{};  // refused: the first moment a start is allowed again
    };
    // A start wanted now: allowed (and counted) or refused. `unlimited` is the guard's fault
    // seam (MCPWARDEN_FAULT=restart_unlimited): every start is allowed, without backoff.
    Decision next(Clock::time_point now, bool unlimited = false);
    // Starts counted within the interval before `now`.
    int recent(Clock::time_point now);
    int burst() const { return burst_; }
    std::chrono::milliseconds interval() const { return interval_; }

    // The backoff before the k-th start of a burst (k from 1): none for the first, then
    // kBackoffFirst doubling, at most kBackoffMax.
    static Clock::duration backoff(int k);
    static constexpr std::chrono::milliseconds kBackoffFirst{100}, kBackoffMax{5000};

  private:
    void forget_before(Clock::time_point now);
    int burst_;
    std::chrono::milliseconds interval_;
    std::deque<Clock::time_point> starts_;
};

// The error a request gets while the start limit holds restarts back.
std::string start_limit_message(const StartLimit& limit, std::chrono::milliseconds retry_in,
                                const std::string& last_failure);

}  // namespace warden::shim
