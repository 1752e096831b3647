// The multiplexer of one shared tree: many clients, one server, each client seeing a server
// of its own (docs/SHARING.md, "What each client sees").
//
// It is the protocol half of the broker and does no I/O: a line from a client or from the
// server goes in, the lines to write (to the server, to which client) and what the record
// must hold come out. The broker owns the sockets, the tree's pipes and the journal.
//
// What it has to answer, and how:
//
//   - Ids. Two clients may use the same request id at the same instant (every SDK counts from
//     0). Every client request reaches the server under an id of ours (a number, counted per
//     tree), and its answer goes back to that one client under its own id, spliced into the
//     server's bytes: the client reads the server's answer byte for byte, with its own id.
//     An answer to an id we never sent, or to one already answered (a server that answers
//     twice), is dropped and noted.
//   - Progress tokens (params._meta.progressToken) are replaced by tokens of ours
//     ("mcpwarden-share-N"): `notifications/progress` goes to the client whose token it is,
//     under its token, and to nobody else. `notifications/cancelled` from a client names its
//     own id: it reaches the server under ours.
//   - The handshake (legacy era) is made once. The first client's `initialize` goes to the
//     server; its result is kept and given, under their ids, to every later client (and to
//     those that asked while it was under way). `notifications/initialized` is forwarded once.
//     A client asking another protocol version is not this tree's (refusal()): the broker
//     gives it a tree of its own. Requests that name their protocol version in _meta
//     (2026-07-28) need no handshake: they are mapped like any request.
//   - Eras. A server's stdio connection speaks one protocol era. The official SDK's servers
//     take the era of the first request that names one (`initialize`: legacy; `server/discover`
//     or a request whose _meta names its version: 2026-07-28) and then treat every request as
//     that era's: a 2026-07-28 request on a legacy connection is answered without its _meta,
//     its `server/discover` and `subscriptions/listen` refused as unknown methods; a legacy
//     `initialize` on a 2026-07-28 connection is refused. So a tree takes the era (and, in
//     2026-07-28, the version) of the first such request it forwards; a client whose first
//     request is of the other era is not this tree's (refusal(): the broker gives it a tree of
//     its own, on its record why), and a request of the other era from a client already on
//     the tree is answered here with an error, never by a server that would answer it wrong.
//     An `initialize` or a `server/discover` the server answers with an error took no era (a
//     legacy-only server does not know discover; a refused handshake pins nothing): the next
//     request that names one decides.
//   - Broadcasts. `notifications/*/list_changed` go to every client, `resources/updated` to
//     the clients subscribed to that URI: the server is subscribed once, when the first client
//     subscribes, and unsubscribed when the last one leaves or unsubscribes (later subscribe
//     and unsubscribe requests are answered here). `logging/setLevel`: the server gets the
//     most verbose level any client asked for; `notifications/message` reaches each client at
//     or above its own level. Other server notifications go to every client.
//   - A 2026-07-28 `subscriptions/listen` stream is a request that stays open: every
//     notification on it names it (`_meta` "io.modelcontextprotocol/subscriptionId", the
//     request's id — ours, at the server). It goes to the client that opened the stream, under
//     that client's id, and to nobody else.
//   - `ping` from a client is answered here, and so is a `ping` from the server: both ends
//     are alive as far as the other can tell, whoever else is attached.
//   - Requests from the server (sampling/createMessage, elicitation/create, roots/list) carry
//     no hint of which client's call caused them: stdio has no request association. One goes
//     to the one client that has a request in flight and declared that capability at its
//     initialize; with none or several such clients the server gets a JSON-RPC error and the
//     record says why. A client's response to a server request it was never sent is dropped
//     and noted.
//   - A client leaving costs the others nothing: its requests still in flight are cancelled
//     at the server (`notifications/cancelled`) and noted abandoned, their answers dropped
//     when they come; its subscriptions are dropped (the server unsubscribed from a URI
//     nobody else follows); the server's requests it was asked and never answered get an
//     error.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "rpc/message.hpp"

namespace warden::share {

// A client of the tree, as the broker numbers its connections (never 0).
using ClientId = uint64_t;

// One line to write: to the server (client == 0) or to a client.
struct Delivery {
    ClientId client = 0;
    std::string line;  // without its newline
};

// What a guard did, for the record: kind ("share.abandoned", "share.answer_dropped",
// "share.response_dropped", "share.server_request_refused", …) and its data.
struct Note {
    ClientId client = 0;  // the client it concerns; 0: the tree's
    std::string kind;
    nlohmann::json data;
};

struct MuxOutput {
    std::vector<Delivery> lines;
    std::vector<Note> notes;
};

class Multiplexer {
  public:
    // `map_ids` false (a negative control's fault): client ids reach the server as they are;
    // `key_eras` false (another): a tree takes every era's clients and requests.
    explicit Multiplexer(bool map_ids = true, bool check_responses = true, bool key_eras = true);

    void join(ClientId c);
    void from_client(ClientId c, std::string_view line, MuxOutput& out);
    void from_server(std::string_view line, MuxOutput& out);
    void leave(ClientId c, MuxOutput& out);

    // Why a client whose first request is `m` may not use this tree ("": it may): `m` is of
    // the other era than the one the tree's server took, or asks another version than the
    // tree's handshake (legacy) or than the one the tree's server took (2026-07-28).
    std::string refusal(const rpc::Message& m) const;
    // The era the tree's server took (none: not yet).
    rpc::Era era() const { return era_; }
    // The protocol version of the tree's handshake ("" before one).
    const std::string& protocol_version() const { return version_; }
    size_t clients() const { return clients_.size(); }
    // Client requests the server has not answered yet.
    size_t in_flight() const { return pending_.size(); }

  private:
    struct Pending {
        ClientId client = 0;     // 0: ours (an unsubscribe, a setLevel), or its client left
        std::string client_raw;  // the client's id, as it wrote it
        std::string method;
        std::string token;  // our progress token's JSON text, if it had one
        bool initialize = false;
    };
    struct ServerRequest {
        ClientId client = 0;
        std::string method;
    };
    struct Client {
        nlohmann::json capabilities = nlohmann::json::object();
        std::optional<int> log_level;  // index into the levels (debug = 0)
        std::set<std::string> subscriptions;
    };

    void client_request(ClientId c, const rpc::Message& m, std::string_view line, MuxOutput& out);
    void client_notification(ClientId c, const rpc::Message& m, std::string_view line,
                             MuxOutput& out);
    void client_response(ClientId c, const rpc::Message& m, std::string_view line, MuxOutput& out);
    void initialize(ClientId c, const rpc::Message& m, std::string_view line, MuxOutput& out);
    void subscribe(ClientId c, const rpc::Message& m, std::string_view line, bool on,
                   MuxOutput& out);
    void set_level(ClientId c, const rpc::Message& m, std::string_view line, MuxOutput& out);
    // Forwards a client request under an id of ours (and its progress token under ours).
    void forward_request(ClientId c, const rpc::Message& m, std::string_view line, MuxOutput& out,
                         bool initialize = false);
    // A request of ours (no client): its answer is dropped.
    void own_request(std::string_view method, nlohmann::json params, MuxOutput& out);
    void server_response(const rpc::Message& m, std::string_view line, MuxOutput& out);
    void server_request(const rpc::Message& m, std::string_view line, MuxOutput& out);
    void server_notification(const rpc::Message& m, std::string_view line, MuxOutput& out);
    // A notification of a 2026-07-28 stream: to the client that opened it, under its id. False:
    // not a stream's (no subscription id of ours in its _meta).
    bool to_stream_owner(std::string_view line, MuxOutput& out) const;
    void answer_initialize_waiters(MuxOutput& out);
    void answer(ClientId c, std::string_view id_raw, std::string_view result_json,
                MuxOutput& out) const;
    void to_all(std::string_view line, MuxOutput& out) const;
    std::string next_id();

    bool map_ids_, check_responses_, key_eras_;
    rpc::Classifier classifier_;
    std::map<ClientId, Client> clients_;
    int64_t counter_ = 0;
    std::map<std::string, Pending> pending_;  // our id's JSON text → the request
    std::map<std::string, std::pair<ClientId, std::string>> tokens_;  // ours → client's
    std::map<std::string, ServerRequest> server_requests_;   // server's id → the client asked
    std::map<std::string, std::set<ClientId>> subscribers_;  // URI → its clients

    // The era its server took, the 2026-07-28 version it took with it, and the request that
    // took it (its client and id), whose error answer gives the era back.
    rpc::Era era_ = rpc::Era::none;
    std::string era_version_;
    std::optional<std::pair<ClientId, std::string>> era_request_;

    // The handshake.
    enum class Handshake : uint8_t { none, asked, done } handshake_ = Handshake::none;
    std::string version_;
    std::string init_before_id_, init_after_id_;  // the result around its id
    std::vector<std::pair<ClientId, std::string>> init_waiters_;
    bool initialized_sent_ = false;
    std::optional<int> server_level_;
};

}  // namespace warden::share
