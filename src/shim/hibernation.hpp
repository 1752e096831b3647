// Hibernation: the relay's side of --idle-stop (docs/RUN.md, "Hibernation and lazy start").
//
// A server that nobody uses is torn down and started again when the client next needs it,
// without the client noticing. The states:
//
//   awake ──idle for DUR──► going_to_sleep ──keeper: hibernated──► asleep
//     ▲                                                              │ a request (not ping)
//     └──initialize answered, handshake replayed── waking ◄──────────┘
//
// The Session decides when (Session::hibernate_if_idle, Session::wake) and drives the keeper,
// which owns the teardown and the spawn. This class stands in the relay's path (RelayGate)
// and owns what has to be known about the protocol:
//
//   - the handshake the client made, watched while awake: its first `initialize` request (the
//     line, and the first answer to it), whether it sent `notifications/initialized`, its last
//     `logging/setLevel`, its live `resources/subscribe` URIs. A new server knows none of it.
//   - the replay, under ids of ours (`"mcpwarden-wake-N"`): the client's initialize first;
//     once that is answered (the answer is ours, never forwarded), `notifications/initialized`,
//     setLevel and the subscriptions. Answers to our ids are swallowed.
//   - what the client sends while the server is not awake: `ping` is answered here and
//     not recorded; notifications and responses are dropped (a cancellation has nothing to
//     cancel; no server request is outstanding when the server went to sleep);
//     `notifications/initialized` only marks the handshake. Every other request, a batch
//     too, asks for a wake (Event::wake_wanted) and goes on its usual way: recorded, then held
//     by the relay (Relay::detach_server) until the replay is done.
//   - whether the new server's initialize result differs from the first (protocol version,
//     capabilities, server info): initialize_changes().
//
// With --lazy the session starts asleep, with no server yet, and may hand this a catalog
// (shim/catalog.hpp): while asleep, the requests it can answer are answered from it, under
// the client's ids, and not recorded (as a ping while asleep); an initialize answered so is
// the handshake a wake replays. Awake or not, the answers the server gives to the catalog's
// questions are kept (seen()), for the session to record as the next catalog.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shim/catalog.hpp"
#include "shim/relay.hpp"

namespace warden::shim {

class Hibernation final : public RelayGate {
  public:
    enum class State : uint8_t { awake, going_to_sleep, asleep, waking };
    enum class Event : uint8_t { none, wake_wanted, initialize_answered };

    // `replay_all` false: the fault seam (MCPWARDEN_FAULT=wake_replay) replays initialize
    // alone, so a test can show what the rest of the replay is for.
    Hibernation(Relay& relay, bool replay_all);

    State state() const { return state_; }
    void set_state(State s);
    // A request came in while the server was not awake and has not been served by a wake yet.
    bool wake_wanted() const { return wake_wanted_; }
    // The client's initialize has been answered: there is a handshake to replay.
    bool handshake_done() const { return !first_result_.is_null(); }
    // The event poll() reported as What::gate, taken once.
    Event take_event();

    // The replayed initialize (the client's, under our id); nullopt when the client never
    // sent one (then nothing is replayed and the held messages go straight to the server).
    std::optional<std::string> initialize_replay();
    // What follows the answer to it: notifications/initialized, setLevel, subscriptions.
    std::string rest_of_replay();
    // The woken server's answer to the replayed initialize: its `result`, or why it refused.
    const nlohmann::json& wake_result() const { return wake_result_; }
    const std::optional<std::string>& wake_refusal() const { return wake_refusal_; }
    // {"before": …, "after": …} of what differs between the first server's initialize result
    // and the woken one's (protocolVersion, capabilities, serverInfo); null when none does.
    nlohmann::json initialize_changes() const;

    bool client_message(const rpc::Message& m, std::string_view line) override;
    bool server_response(const rpc::Message& m, std::string_view line) override;
    bool wants_attention() override { return event_ != Event::none; }
    void server_notification(const rpc::Message& m) override;

    // --lazy: answer from `c` while asleep (a catalog why_not_usable() accepted).
    void serve_from(Catalog c) { catalog_ = std::move(c); }
    const std::optional<Catalog>& serving() const { return catalog_; }
    uint64_t served() const { return served_; }
    // The method of the request that asked for the current wake ("batch" for a batch).
    const std::string& wake_method() const { return wake_method_; }
    // The catalog this session can leave for the next: what the server answered, over what
    // was served (all of it replaced when the server's initialize answer is not the one
    // served); `stale` set when the server said its lists change; nullopt when there is
    // nothing to record (no initialize answer seen or served, or the same as served unless
    // `refresh`: a catalog in use is written again before it is too old to be used).
    std::optional<Catalog> catalog_to_record(bool refresh) const;

  private:
    void watch_handshake(const rpc::Message& m, std::string_view line);
    bool answer_from_catalog(const rpc::Message& m, std::string_view line);
    void keep_answer(const std::string& method, const rpc::Message& m, std::string_view line);
    std::string with_our_id(const std::string& line, bool& ok);

    Relay& relay_;
    bool replay_all_;
    State state_ = State::awake;
    Event event_ = Event::none;
    bool wake_wanted_ = false;

    // The handshake.
    std::string initialize_line_, initialize_id_;  // the client's first initialize; its raw id
    nlohmann::json first_result_;                  // the first server's answer to it
    bool initialized_ = false;                     // notifications/initialized was sent
    std::string set_level_line_;
    std::map<std::string, std::string> subscriptions_;  // uri → the subscribe line

    // The replay.
    uint64_t next_id_ = 0;
    std::string replay_init_id_;  // raw JSON text of the id of our initialize
    nlohmann::json wake_result_;
    std::optional<std::string> wake_refusal_;
    std::string wake_method_;

    // The catalog (--lazy).
    std::optional<Catalog> catalog_;            // answers served while asleep
    uint64_t served_ = 0;                       // requests answered from it
    std::map<std::string, std::string> asked_;  // raw id → method, of the catalog's questions
    Catalog seen_;                              // what the server answered to them
};

std::string_view to_string(Hibernation::State s);

}  // namespace warden::shim
