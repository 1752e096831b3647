// Health: telling a wedged server from a slow one (`--health DUR`, `--request-timeout DUR`).
//
// A server that is stopped (SIGSTOP), deadlocked or spinning in a loop looks exactly like
// a slow one from the client's side until the client's own timeout, minutes later. Two
// probes tell them apart:
//
//   - The ping. While nothing is in flight and the server is awake, the relay writes a
//     `ping` request to the server every DUR under an id of its own
//     ("mcpwarden-health-N"). Its answer is taken out of the stream by this gate: never
//     forwarded to the client, never recorded as a call, and not counted as activity for
//     --idle-stop. A ping not answered within --health-timeout marks the server wedged. A
//     slow tool call is never pinged through: while a request is in flight there is no
//     ping, so a 2.5 s call is just a call.
//   - The request timeout. A client request unanswered for --request-timeout marks the
//     server wedged whatever it is doing: this is what catches a server that loops inside
//     a call.
//
// The ping is a legacy-era request: a session of the 2026-07-28 era has no ping (and no
// handshake after which one would be valid), so there the ping is skipped, said once on
// stderr, and only the request timeout watches it. Before the client's initialize has been
// answered nothing is pinged either.
//
// Cost: nothing runs between probes. The session's poll() sleeps until the next one is due
// (timeout_ms()), so an idle session wakes twice per DUR: the timer, and the server's
// answer. docs/BENCHMARKS.md measures it.
//
// Wedged, the evidence is taken before anything is signalled (wedged_evidence): each member
// of the tree with its state, wchan, CPU time over the window the probe covered (since the
// ping was sent, or a short look when there was no ping) and its threads from /proc. Then the
// session ends the tree for cause "wedged" (Session::end_tree_for).
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "journal/canonical_json.hpp"
#include "shim/relay.hpp"

namespace warden::shim {

// CPU time of each member, at one moment.
struct CpuSample {
    std::chrono::steady_clock::time_point at{};
    std::map<pid_t, uint64_t> ticks;  // utime + stime, clock ticks
};
CpuSample sample_cpu(const std::vector<pid_t>& members);

// Each member as /proc shows it now: {"pid","comm","state","wchan","cpu_ms_in_window",
// "threads":[{"tid","state","wchan"}…]} (threads listed up to 16), with the window's length.
journal::Json wedged_evidence(const std::vector<pid_t>& members, const CpuSample& before);

struct HealthOptions {
    std::optional<std::chrono::milliseconds> every;            // --health: off when nullopt
    std::chrono::milliseconds answer_within{5000};             // --health-timeout
    std::optional<std::chrono::milliseconds> request_timeout;  // --request-timeout
    bool judge = true;              // false: MCPWARDEN_FAULT=wedged_unjudged (the negative control)
    bool ping_is_activity = false;  // MCPWARDEN_FAULT=ping_is_activity (a negative control)
};

class Health : public RelayGate {
  public:
    // `inner`: the gate that stood in the relay's path before (hibernation), or null; every
    // message that is not ours goes on to it. `members`: the tree's processes now.
    Health(Relay& relay, RelayGate* inner, HealthOptions opts,
           std::function<std::vector<pid_t>()> members);

    bool client_message(const rpc::Message& m, std::string_view line) override;
    bool server_response(const rpc::Message& m, std::string_view line) override;
    bool wants_attention() override { return inner_ && inner_->wants_attention(); }
    void server_notification(const rpc::Message& m) override;

    struct Wedged {
        std::string why;  // "no answer to a ping within 5000 ms"
        journal::Json evidence;
    };
    // After each wake of the session's loop: sends the ping that is due, and says once that
    // the server is wedged. `awake`: a server runs and is not being put to sleep or woken.
    std::optional<Wedged> check(bool awake);
    // Milliseconds until check() has something to do; -1: nothing.
    int timeout_ms() const;
    uint64_t pings() const { return pings_; }
    uint64_t answered() const { return answered_; }

  private:
    bool ping_due(std::chrono::steady_clock::time_point now) const;
    void send_ping(std::chrono::steady_clock::time_point now);
    std::optional<std::chrono::steady_clock::time_point> oldest_request() const;

    Relay& relay_;
    RelayGate* inner_;
    HealthOptions opts_;
    std::function<std::vector<pid_t>()> members_;
    bool handshake_seen_ = false;  // a legacy initialize went to the server
    bool stateless_ = false;       // a 2026-07-28 request: no ping (said once)
    uint64_t pings_ = 0, answered_ = 0;
    std::string ping_id_;  // the id of the ping in flight, quoted; "" when none
    // When the last ping went out (the session's start before the first): pings go out every
    // DUR from the last one sent.
    std::chrono::steady_clock::time_point ping_sent_{};
    std::optional<std::chrono::steady_clock::time_point> idle_before_ping_;
    CpuSample window_;  // members' CPU when the ping was sent
    bool wedged_ = false;
};

}  // namespace warden::shim
