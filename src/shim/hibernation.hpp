// Hibernation: the relay's side of --idle-stop (docs/RUN.md, "Hibernation and lazy start").
//
// A server that nobody uses is torn down and started again when the client next needs it,
// without the client noticing. The states:
//
//   awake ──idle for DUR──► going_to_sleep ──keeper: hibernated──► asleep
//     ▲                                                              │ a request (not a
//     └──initialize answered, handshake replayed── waking ◄──────────┘  legacy ping)
//        (a stateless session: at once)
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
//   - the era (rpc/message.hpp): a session whose requests name their protocol version in
//     _meta (2026-07-28) and that sent no initialize is stateless. It has no handshake: it
//     may sleep as soon as it is idle (can_sleep(); a legacy session only once its initialize
//     was answered, there being nothing to replay before), and a wake replays nothing, since
//     a fresh server answers such a request as its first message.
//   - what the client sends while the server is not awake: `ping` (legacy: the stateless
//     revision has none, so there it wakes the server like any request) is answered here and
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
//
// A list served from the catalog is what the server answered last time, not necessarily now.
// The served initialize says `listChanged: true` for the lists the catalog holds
// (Catalog::served_initialize), and once a woken server has had the replayed handshake it is
// asked, under ids of ours, each list this client was served from the catalog since the last
// such check (recheck_lists()). Its answers are compared with what was served (Event::
// lists_checked, take_list_checks()): the session tells the client `notifications/<list>/
// list_changed` for each list that differs and records the comparison. The catalog in use
// takes the new answers (a later sleep serves them), and so does the next catalog. The server's
// own initialize result is never forwarded (the client keeps the served one); where it
// differs, initialize_changes() says how.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "shim/catalog.hpp"
#include "shim/relay.hpp"

namespace warden::shim {

class Hibernation final : public RelayGate {
  public:
    enum class State : uint8_t { awake, going_to_sleep, asleep, waking };
    // sleepable: the session may sleep from now on (can_sleep()), told once.
    enum class Event : uint8_t { none, wake_wanted, initialize_answered, lists_checked, sleepable };

    // `replay_all` false: the fault seam (MCPWARDEN_FAULT=wake_replay) replays initialize
    // alone, so a test can show what the rest of the replay is for. `sleep_needs_handshake`
    // (MCPWARDEN_FAULT=sleep_needs_handshake): a stateless session waits for a handshake too.
    Hibernation(Relay& relay, bool replay_all, bool sleep_needs_handshake = false);

    State state() const { return state_; }
    void set_state(State s);
    // A request came in while the server was not awake and has not been served by a wake yet.
    bool wake_wanted() const { return wake_wanted_; }
    // The wake asked for is not made (the restart's start limit answered the held requests):
    // the next request asks again.
    void wake_refused() { wake_wanted_ = false; }
    // The client's initialize has been answered: there is a handshake to replay.
    bool handshake_done() const { return !first_result_.is_null(); }
    // A session of the stateless era (2026-07-28): its requests name their protocol version,
    // and it has sent no initialize. Nothing is replayed to a new server: a request of its is
    // a fresh server's valid first message.
    bool stateless() const { return stateless_seen_ && initialize_line_.empty(); }
    // The server may be put to sleep: a stateless session, or a legacy one whose handshake
    // there is to replay.
    bool can_sleep() const;
    // A subscriptions/listen stream is open (the client asked, the server has not ended it):
    // the session is not idle until it ends, so there is no idle timer to run meanwhile. Its
    // end is told like Event::sleepable.
    bool streams_open() const { return !open_streams_.empty(); }
    // The event poll() reported as What::gate, taken once (lists_checked after the others).
    Event take_event();

    // The replayed initialize (the client's, under our id); nullopt when the client never
    // sent one (then nothing is replayed and the held messages go straight to the server).
    std::optional<std::string> initialize_replay();
    // What follows the answer to it: notifications/initialized, setLevel, subscriptions.
    std::string rest_of_replay();
    // After the replay: the requests, under ids of ours, that ask the woken server each list
    // served from the catalog since the last check; "" when none was (or no handshake).
    std::string recheck_lists();
    // Some of those have not been answered yet: the server is not idle.
    bool checking_lists() const { return !rechecks_.empty(); }
    // Once every recheck has been answered (Event::lists_checked): each list compared.
    struct ListCheck {
        std::string method;
        nlohmann::json difference;  // list_difference(); null: the same
        std::string error;          // the server answered the recheck with an error
        // The notification that tells the client; "" when the served initialize did not say
        // listChanged for its capability (the server declared none).
        std::string notification;
    };
    std::vector<ListCheck> take_list_checks() { return std::exchange(checks_, {}); }
    // The woken server's answer to the replayed initialize: its `result`, or why it refused.
    const nlohmann::json& wake_result() const { return wake_result_; }
    const std::optional<std::string>& wake_refusal() const { return wake_refusal_; }
    // {"before": …, "after": …} of what differs between the first server's initialize result
    // and the woken one's (protocolVersion, capabilities, serverInfo); null when none does.
    nlohmann::json initialize_changes() const;

    bool client_message(const rpc::Message& m, std::string_view line) override;
    bool server_response(const rpc::Message& m, std::string_view line) override;
    bool wants_attention() override {
        return event_ != Event::none || checks_ready_ || sleepable_ || stream_ended_;
    }
    void server_notification(const rpc::Message& m) override;

    // --lazy: answer from `c` while asleep (a catalog why_not_usable() accepted).
    void serve_from(Catalog c) { catalog_ = std::move(c); }
    // Called with each request answered from the catalog (not recorded as a request: the
    // journal notes the protocol it speaks, JournalSink::on_served).
    using Served = std::function<void(const rpc::Message&, std::string_view line)>;
    void on_served(Served f) { served_cb_ = std::move(f); }
    const std::optional<Catalog>& serving() const { return catalog_; }
    uint64_t served() const { return served_; }
    // The method of the request that asked for the current wake ("batch" for a batch).
    const std::string& wake_method() const { return wake_method_; }
    // The catalog this session can leave for the next: what the server answered, over what
    // was served (all of it replaced when the server's initialize answer is not the one
    // served, less the lists a list_changed made out of date); nullopt when there is nothing
    // to record (no initialize answer seen or served, or the same as served unless `refresh`:
    // a catalog in use is written again before it is too old to be used).
    std::optional<Catalog> catalog_to_record(bool refresh) const;

  private:
    void watch_handshake(const rpc::Message& m, std::string_view line);
    void note_sleepable();
    bool answer_from_catalog(const rpc::Message& m, std::string_view line);
    void compare_list(const std::string& method, const CachedAnswer& served, std::string_view line,
                      const rpc::Message& m);
    void keep_answer(const std::string& key, const rpc::Message& m, std::string_view line);
    std::string with_our_id(const std::string& line, bool& ok);

    Relay& relay_;
    bool replay_all_;
    bool sleep_needs_handshake_;
    State state_ = State::awake;
    Event event_ = Event::none;
    bool wake_wanted_ = false;

    // The handshake.
    std::string initialize_line_, initialize_id_;  // the client's first initialize; its raw id
    nlohmann::json first_result_;                  // the first server's answer to it
    bool initialized_ = false;                     // notifications/initialized was sent
    std::string set_level_line_;
    std::map<std::string, std::string> subscriptions_;  // uri → the subscribe line
    bool stateless_seen_ = false;                       // a request named its version in _meta
    bool sleepable_ = false, sleepable_told_ = false;   // Event::sleepable: pending, given
    std::set<std::string> open_streams_;                // raw ids of subscriptions/listen
    bool stream_ended_ = false;                         // the last one ended: tell the session

    // The replay.
    uint64_t next_id_ = 0;
    std::string replay_init_id_;  // raw JSON text of the id of our initialize
    nlohmann::json wake_result_;
    std::optional<std::string> wake_refusal_;
    std::string wake_method_;

    // The catalog (--lazy).
    std::optional<Catalog> catalog_;  // answers served while asleep
    uint64_t served_ = 0;             // requests answered from it
    Served served_cb_;
    std::map<std::string, std::string> asked_;  // raw id → answer_key(), of the catalog's questions
    Catalog seen_;                              // what the server answered to them
    bool lists_changed_ = false;                // a recheck found a list the catalog had wrong

    // The rechecks: lists served (method → what was served) since the last; asked (our raw id
    // → method, served); answered, waiting for the session; the capabilities the served
    // initialize said listChanged for.
    std::map<std::string, CachedAnswer> served_lists_;
    std::map<std::string, std::pair<std::string, CachedAnswer>> rechecks_;
    std::vector<ListCheck> checks_;
    bool checks_ready_ = false;
    std::set<std::string> advertised_;
};

std::string_view to_string(Hibernation::State s);

}  // namespace warden::shim
