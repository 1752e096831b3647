// src/shim — `mcpwarden run`: the relay, the keeper and the session that ties them.
//
// This folder owns what a client launches instead of its server: the relay (this file),
// which moves bytes between the client and the server and watches the client; the keeper
// (keeper.hpp), the subreaper that parents the server and tears its tree down; the options
// of `run` (options.hpp); and the Session (session.hpp) whose run() is the whole life of
// one `mcpwarden run`.
//
// The relay is one epoll loop over three streams:
//   client stdin  → framer → classifier → (sink may deny) → server stdin
//   server stdout → framer → classifier → stdout guard   → client stdout
//   server stderr →                                          our stderr
// Bytes are never re-serialised: what is forwarded is exactly what was read, in order.
// Lines are forwarded whole once complete (a request must be recorded before its bytes
// reach the server); consecutive lines of one read go out in one write. A line longer than
// --max-message is forwarded in pieces, unclassified (rpc/framer.hpp, "Oversize rule").
//
// Answered means delivered. A call is answered once every byte of its response line has been
// written into the client's stdout (write() accepted the last byte), not when the relay read
// it: a client that dies while a large answer is still queued never had it. Until then the
// request stays outstanding; if the client is lost first (EPIPE, its exit, stdin EOF, a
// signal), it is among the requests on_client_lost reports abandoned, even when part of its
// answer went out. The client sink counts the bytes it accepted and the bytes write() took; a
// response read from the server waits in a small FIFO as (end offset in that count, ticket of
// its request, outcome), and ActivitySink::on_response runs when the written count reaches
// the end offset, so durations run to delivery. The FIFO holds one entry per response still
// in the client queue: bounded, like the queue, by the high-water mark; it reuses its memory.
// An answer still queued when the relay is dropped without a client loss (the server exited
// and drain() gave up on a client that does not read) is reported neither way.
//
// Oversize requests: a client line longer than --max-message is forwarded in pieces too, but
// not unrecorded. Its first piece (max_message bytes and more) is scanned before anything of
// it is forwarded; unless that prefix shows a response or an MCP notification, the sink's
// on_oversize_request records it (id if the prefix holds it, method, tool) or refuses it. A
// refused line is consumed and dropped whole, and answered with a JSON-RPC error carrying the
// id the scan found by its end (null when it has none). A recorded one is tracked under that
// id once its last piece is read, so its answer resolves it like any other request.
//
// An oversize response (longer than --max-message) is still forwarded in pieces and never
// classified, but a streaming scan of its pieces (rpc::Scan, rpc/scan.hpp) finds its top-level id
// and outcome, so it answers its request too: when its last piece is written. Until then it
// is as undelivered as any other answer. An oversize line whose id cannot be found (not an
// object, an id of more than 256 bytes, truncated at EOF) answers nothing.
//
// Long lines: a parser's index costs up to four bytes per byte of its input (one index entry
// per JSON token), so parsing a line of --max-message in place could need five times its size.
// A line longer than the parse limit (1 MiB) is therefore scanned, not parsed: the streaming
// rpc::Scan (rpc/scan.hpp) that serves oversize lines reads its id, method, tool and outcome in one
// pass and allocates nothing. It is forwarded and recorded like any other line, but not
// validated: the stdout guard judges it by its first byte (`{` or `[` passes), a request's
// arguments are not recorded, and a batch this long resolves none of its requests.
//
// Batches: a client batch is forwarded whole or not at all. Each request in it is put to the
// sink in turn and tracked under the value the sink returned, so each answer in the server's
// batch settles its own record. When the sink refuses member k, the batch is refused whole:
// the client gets one error per request, and the members recorded before k are answered by
// that refusal (outcome rpc_error, code -32000) once it is written.
//
// Backpressure: each sink has a small queue. A source is read only while its sink's queue
// is below the high-water mark, so a client that never reads stalls the server's stdout in
// the kernel pipe, never our memory. A line is resident once: what its reader does not take
// at once stays in the framer's buffer, lent to the sink, and its stream reads nothing until
// it has gone (Sink, in relay_sink.hpp). A queue drops what it has written before it would grow,
// so a reader that almost keeps up costs no more than one that keeps up. Memory per direction
// is therefore --max-message plus one read chunk and the queue (less than twice the
// high-water mark), plus the classifier's parse of the line (docs/RUN.md, "Memory"). What the
// sink posts to the journal is paced the same way (JournalSink::kPostsPerWait).
//
// Stdout guard (server stdout only; the client's bytes always pass): a line that is not
// JSON would corrupt the protocol. `divert` (default) writes it to our stderr as
// "[mcpwarden] diverted non-JSON stdout line: <line>" and counts it; `pass` forwards it;
// `fail` ends the session (poll() returns Wake::guard_failed) without forwarding it.
// The rule: what is not JSON is diverted; JSON that is not a valid JSON-RPC message (`[]`,
// `{"x":1}`, `{"id":{"a":1}}`, `{"method":1}`) passes and is counted as invalid: it cannot
// corrupt the framing, and it is the client's to judge. "Not JSON": it does not parse, or it
// holds invalid UTF-8 and does not start with `{` or `[`. Blank lines are diverted. The first
// piece of an oversize (or scanned) line decides for the whole line.
//
// Diverted output is capped, never the protocol: what a server writes to stdout by mistake
// can be endless (`cat /dev/zero`), and our stderr is the client's log. A diverted line is
// shown as display text: its control bytes and invalid UTF-8 escaped as `ps` escapes a
// command line (sys/text.hpp), behind the prefix. Written are at most kDivertTotal bytes per
// session, at a rate of kDivertRate bytes per second (a bucket that holds kDivertBurst); and
// never more than stderr_cap queued when our stderr is not read. The caps count every byte
// written, the prefix and the escapes included: an empty line costs 44 bytes, not 1. A line
// over a cap is cut (shown up to the cap, then " [cut]") or not shown; each cap says so on
// stderr once, and what each one kept back is counted (RelayStats, session.end). The
// protocol never waits for stderr: diverting costs no more than dropping.
// The relay knows nothing of processes: the Session adds the other fds it waits on (the
// signalfd, the client's pidfd, the keeper's report pipe) with watch(), and poll() returns
// when one of them is ready.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "mcpwarden/types.hpp"
#include "rpc/framer.hpp"
#include "rpc/message.hpp"
#include "rpc/scan.hpp"
#include "sys/epoll.hpp"
#include "sys/fd.hpp"

namespace warden::shim {

enum class Direction : uint8_t { client_to_server, server_to_client };

// Why the relay decided the client is gone.
enum class ClientLoss : uint8_t {
    none,
    stdin_eof,      // the client closed our stdin (the spec's polite shutdown)
    stdout_closed,  // EPIPE / EPOLLERR on our stdout: nobody reads the answers any more
    client_exit,    // our parent (the client) exited: pidfd readable
    signal,         // SIGTERM / SIGINT / SIGHUP to us
};
std::string_view to_string(ClientLoss c);
std::string_view to_string(StdoutGuard g);

// A client request forwarded to the server and not answered yet: no answer read, or its answer
// read but not wholly written to the client.
struct Outstanding {
    rpc::IdType type = rpc::IdType::none;
    std::string raw;  // the id's JSON text
    std::string method, tool;
    std::chrono::steady_clock::time_point sent{};
    // What the sink returned for it: its record in the journal (a seq, or the ticket of an
    // intent not yet chained: journal.cpp, "Intents"); 0 when it was not recorded.
    int64_t record = 0;
    // Nonzero once the server's answer has been read and is being written to the client (the
    // relay's ticket for it); 0 while the server has not answered.
    uint64_t answer = 0;
};

// What a server response said, kept until it has been delivered (the line itself is gone).
struct Answer {
    rpc::Outcome outcome = rpc::Outcome::ok;
    std::optional<int64_t> error_code;  // error.code of a JSON-RPC error (not for batch members)
    size_t bytes = 0;                   // the line without its newline (a batch: the whole batch)
};

// Where the relay reports what it sees. Called on the relay's thread, in stream order;
// implementations must be quick (queue, don't write to disk) except on_request, which is
// the one place allowed to block: a request is recorded before it can act.
class ActivitySink {
  public:
    virtual ~ActivitySink() = default;
    // A client request about to be forwarded. An Error denies it: the relay answers the
    // client with a JSON-RPC error carrying the same id (and the Error's message) and
    // forwards nothing. The value is kept as Outstanding::record.
    virtual Result<int64_t> on_request(const rpc::Message& m, std::string_view line) = 0;
    // A server response, once its whole line has been written to the client: the call is
    // answered now, so a duration measured here is request forwarded → answer delivered.
    // `req` is the request it answers (nullptr if none was outstanding).
    virtual void on_response(const Answer& a, const Outstanding* req) = 0;
    // The client is gone; `outstanding` were forwarded and never answered, those whose
    // answer was still being written (Outstanding::answer != 0) included. Answers wholly
    // written before the loss was seen are reported through on_response first.
    virtual void on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) = 0;
    // A client line longer than --max-message that may be a request (relay.hpp, "Oversize
    // requests"), before its first byte is forwarded: `m` holds what its first `prefix` bytes
    // show (the id may be missing: IdType::none). Same contract as on_request: an Error
    // refuses the whole line; the value is kept as Outstanding::record.
    virtual Result<int64_t> on_oversize_request(const rpc::Message& m, std::string_view prefix) {
        return on_request(m, prefix);
    }
    virtual void on_notification(Direction, const rpc::Message&) {}
    virtual void on_invalid(Direction, std::string_view /*line*/, std::string_view /*why*/) {}
    virtual void on_oversize(Direction, size_t /*bytes*/) {}
    virtual void on_diverted(std::string_view /*line*/) {}
};

// The server's stderr as it is read (shim/server_log.hpp keeps it): each read, on the relay's
// thread, before its bytes are queued for our stderr. Must return at once: no disk, no waiting.
class StderrTap {
  public:
    virtual ~StderrTap() = default;
    virtual void on_stderr(std::string_view bytes) = 0;
};

// Hibernation (shim/hibernation.hpp) stands in the relay's path through this; without one
// the relay is exactly as described above.
class RelayGate {
  public:
    virtual ~RelayGate() = default;
    // A client message (not an oversize line) before the sink sees it. True: the gate took it
    // (answered or dropped it): it is neither recorded nor forwarded.
    virtual bool client_message(const rpc::Message& m, std::string_view line) = 0;
    // A server response. True: it answers a request of the gate's own; not forwarded.
    virtual bool server_response(const rpc::Message& m, std::string_view line) = 0;
    // Polled by poll(): true once per event the session must act on (Wake::What::gate).
    virtual bool wants_attention() = 0;
    // A server notification, before it is forwarded (it always is).
    virtual void server_notification(const rpc::Message&) {}
};

struct RelayStats {
    uint64_t client_lines = 0, server_lines = 0;
    uint64_t requests = 0, notifications = 0, responses = 0, client_responses = 0;
    uint64_t server_requests = 0;  // server → client requests (sampling, roots, …)
    uint64_t invalid_client = 0, invalid_server = 0;
    uint64_t oversize_client = 0, oversize_server = 0;
    uint64_t partial_client = 0, partial_server = 0;
    uint64_t diverted = 0, denied = 0;
    // Diverted stdout (see "Stdout guard"), in the server's bytes: bytes of diverted lines; of
    // those, shown on our stderr; lines not shown whole; bytes kept back by each cap.
    uint64_t diverted_bytes = 0, diverted_shown = 0, diverted_dropped = 0;
    uint64_t over_rate = 0, over_total = 0, stderr_full = 0;
    uint64_t unmatched_responses = 0;
    uint64_t scanned = 0;  // lines over the parse limit, scanned instead of parsed
    uint64_t bytes_client_to_server = 0, bytes_server_to_client = 0, bytes_stderr = 0;
};

// Counts what it is told; allows every request. The sink until a journal is wired, and
// the one `--no-journal` uses.
class CountingSink : public ActivitySink {
  public:
    Result<int64_t> on_request(const rpc::Message&, std::string_view) override;
    void on_response(const Answer& a, const Outstanding* req) override;
    void on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) override;
    void on_notification(Direction, const rpc::Message&) override { ++notifications; }
    void on_invalid(Direction, std::string_view, std::string_view) override { ++invalid; }
    void on_oversize(Direction, size_t) override { ++oversize; }
    void on_diverted(std::string_view) override { ++diverted; }

    uint64_t requests = 0, responses = 0, matched = 0, errors = 0, tool_errors = 0;
    uint64_t notifications = 0, invalid = 0, oversize = 0, diverted = 0;
    uint64_t abandoned = 0;
    ClientLoss lost = ClientLoss::none;
    std::vector<std::string> abandoned_ids;  // raw ids, in no particular order
};

// The caps on diverted output ("Stdout guard").
inline constexpr size_t kDivertTotal = size_t{16} << 20;  // per session
inline constexpr size_t kDivertRate = size_t{64} << 10;   // per second
inline constexpr size_t kDivertBurst = size_t{256} << 10;
// Held back from the burst and the total for what says a cap is reached: a line's " [cut]"
// mark and each cap's one notice (relay.cpp, divert_room).
inline constexpr size_t kDivertReserve = 256;

// Lines up to this long are parsed (simdjson, in place); longer ones are scanned.
inline constexpr size_t kDefaultParseLimit = size_t{1} << 20;

struct RelayOptions {
    size_t max_message = rpc::kDefaultMaxMessage;
    size_t read_chunk = rpc::kDefaultReadChunk;
    size_t high_water = rpc::kDefaultReadChunk;  // stop reading a source above this
    size_t stderr_cap = size_t{1} << 20;         // queued for our stderr: divert no more
    size_t divert_total = kDivertTotal;          // 0: no cap (a test fault)
    size_t divert_rate = kDivertRate, divert_burst = kDivertBurst;  // rate 0: no cap
    size_t parse_limit = kDefaultParseLimit;  // longer lines are scanned ("Long lines")
    bool lend = true;     // false: a sink copies what its fd does not take (a test fault)
    bool reclaim = true;  // false: a queue keeps what it wrote until it empties (a test fault)
    StdoutGuard guard = StdoutGuard::Divert;
};

// The six streams. The client side is borrowed (usually 0, 1, 2; never closed by us except
// that our stdout is abandoned after EPIPE); the server side is owned.
struct RelayFds {
    int client_in = 0, client_out = 1, log = 2;
    Fd server_in, server_out, server_err;
};

class Relay {
  public:
    struct Wake {
        enum class What : uint8_t {
            watched,        // a watch()ed fd is ready: `token`
            client_lost,    // `loss` says how; reading the client stopped
            server_closed,  // server stdout and stderr reached EOF and are flushed
            guard_failed,   // --stdout-guard=fail saw a non-JSON line
            gate,           // the gate (set_gate) wants the session's attention
            timeout,
        };
        What what = What::timeout;
        uint32_t token = 0;
        uint32_t events = 0;
        ClientLoss loss = ClientLoss::none;
    };

    static Result<Relay> create(RelayOptions opts, RelayFds fds, ActivitySink& sink);
    Relay(Relay&&) noexcept;
    Relay& operator=(Relay&&) = delete;
    ~Relay();

    // Adds an fd (EPOLLIN) whose readiness ends poll() with What::watched and `token`.
    Status watch(int fd, uint32_t token);
    Status unwatch(int fd);

    // Moves bytes until something the caller must decide on happens, or timeout_ms passes
    // (-1: no limit). Each reason is reported once; after client_lost the relay keeps
    // forwarding the server's output (the client may still read it) but reads no more input.
    Result<Wake> poll(int timeout_ms);

    // Stops reading the client (e.g. on a signal) and reports the loss to the sink with
    // the outstanding requests. Idempotent; the first cause wins.
    void client_lost(ClientLoss cause);
    ClientLoss loss() const { return loss_; }
    // Closes the server's stdin (EOF is the spec's polite shutdown) once every byte queued
    // for it has been written: at once when nothing is queued, else as poll()/drain() move
    // the rest (a server that never reads keeps it until the teardown). Idempotent.
    void close_server_input();
    // Stops watching the caller's fds, then forwards the server's output (stdout and
    // stderr) until both reach EOF and are flushed to the client, for up to timeout_ms.
    void drain(int timeout_ms);

    // ---- Hibernation (shim/hibernation.hpp): small, self-contained additions ----
    void set_gate(RelayGate* gate) { gate_ = gate; }
    // The server's stderr is also handed to `tap` (nullptr: to nobody), every server's.
    void set_stderr_tap(StderrTap* tap) { tap_ = tap; }
    // Writes one line (a newline is added) to the client, after what is queued for it.
    void answer_client(std::string_view line);
    // When the relay became idle: nothing outstanding either way (client requests, server
    // requests), nothing queued or half-read; the time of the last byte read. nullopt: busy.
    std::optional<std::chrono::steady_clock::time_point> idle_since() const;
    // The health check's ping answered (shim/health.hpp): not activity, so idle_since() is
    // put back to what it was before the ping.
    void restore_idle_since(std::chrono::steady_clock::time_point t) { last_activity_ = t; }
    // The server goes to sleep: its stdin is closed now (EOF), and what the client sends
    // from now on is held for the next server (recorded as usual, forwarded on release). The
    // server's stdout and stderr are read to their EOF as before.
    void detach_server();
    // The next server's pipes. Its input stays held until release_server_input().
    Status attach_server(Fd server_in, Fd server_out, Fd server_err);
    // Writes bytes to the new server ahead of everything held (the replayed handshake).
    // False when it cannot take them (gone, or its pipe full for a second).
    bool write_to_server_now(std::string_view bytes);
    // Forwards what was held, in order, and everything after it.
    void release_server_input();
    // The wake failed: every request not answered yet gets a JSON-RPC error (-32000, `why`),
    // recorded as answered with it; held bytes are dropped. `spare_streams`: an open
    // subscriptions/listen stream is left as it is (the session is ending, and the stream's end
    // is recorded with it, closed by the server).
    void fail_held_requests(std::string_view why, bool spare_streams = false);

    bool server_closed() const;
    // Whether the server's stdout may still hold bytes we have not read because the client
    // reads slowly: not at EOF, and reading paused at the client queue's high-water mark.
    bool server_output_held_back() const;
    const RelayStats& stats() const { return stats_; }
    std::span<const Outstanding> outstanding() const { return {slots_.data(), n_outstanding_}; }
    // Bytes currently held in the relay's queues and framers (for memory tests).
    size_t buffered() const;

    struct Stream;
    using Scan = rpc::Scan;

  private:
    Relay(RelayOptions opts, Epoll ep, ActivitySink& sink);
    Status setup(RelayFds fds);
    void on_readable(Stream& s);
    void process_frames(Stream& s, bool eof);
    void handle_client_frame(Stream& s, const rpc::Frame& f);
    void handle_server_frame(Stream& s, const rpc::Frame& f);
    void deny(const rpc::Message& m, const Error& why, size_t answered = SIZE_MAX);
    void track(const rpc::Message& m, int64_t record);
    size_t find_request(const rpc::Id& id) const;
    void answer_read(const rpc::Message& m, std::string_view line);
    void oversize_answer_read(const Scan& scan, size_t bytes);
    void await_delivery(const Answer& a, size_t slot, uint64_t end);
    void deliver_answers();
    void oversize_request_starts(std::string_view prefix);
    void oversize_request_ends();
    void wrote_to_client(bool ok);
    void divert(const rpc::Frame& f);
    enum class Cap : uint8_t { none, rate, total, stderr_full };  // on diverted output
    size_t divert_room(Cap& by);
    void divert_charge_and_write();
    uint64_t& kept_back_by(Cap cap);
    bool wants_input(const Stream& s) const;
    void update_interest();
    void stop_server_output();
    std::optional<Wake> pending_wake();
    Result<std::optional<Wake>> pump(int timeout_ms);
    bool guard_rejects(const rpc::Message& m, std::string_view content) const;
    rpc::Message classify(Scan& scan, const rpc::Frame& f);

    RelayOptions opts_;
    Epoll ep_;
    ActivitySink* sink_;
    rpc::Classifier classifier_;
    std::unique_ptr<Stream> client_, server_out_, server_err_;
    struct Sink;
    std::unique_ptr<Sink> to_server_, to_client_, to_log_;
    std::vector<Outstanding> slots_;
    size_t n_outstanding_ = 0;
    // Answers read and not yet wholly written to the client, in stream order: a FIFO in a
    // vector that keeps its capacity (no allocation per line once warm).
    struct Pending {
        uint64_t end = 0;     // the client sink's accepted-byte count after the line's last byte
        uint64_t ticket = 0;  // Outstanding::answer of the request it answers; 0: none
        Answer answer;
    };
    std::vector<Pending> pending_;
    size_t pending_head_ = 0;
    uint64_t last_ticket_ = 0;
    uint64_t frame_end_ = 0;      // end offset (as Pending::end) of the server frame being handled
    std::unique_ptr<Scan> scan_;  // the oversize server line in progress; error codes
    std::unique_ptr<Scan> client_scan_;  // the oversize client line in progress
    enum class OversizeRequest : uint8_t { none, recorded, refused };
    OversizeRequest oversize_request_ = OversizeRequest::none;
    int64_t oversize_record_ = 0;
    Error oversize_denial_;
    RelayStats stats_;
    ClientLoss loss_ = ClientLoss::none;
    bool loss_reported_ = false;
    bool guard_failed_ = false, guard_reported_ = false;
    bool server_closed_reported_ = false;
    bool divert_oversize_ = false;  // the oversize line in progress is being diverted
    bool forward_ = true;           // set by the frame handlers: forward this frame's bytes
    std::vector<int> watched_;
    std::vector<epoll_event> events_;
    // Diverted output: the rate bucket (bytes, may run into debt by one piece), when it was last
    // filled, the cap that cut the line being diverted, which caps have said so.
    double divert_tokens_ = 0;
    std::chrono::steady_clock::time_point divert_filled_{};
    Cap divert_cut_by_ = Cap::none;  // the line being diverted was cut: by this cap
    bool divert_showing_ = false;    // some of the oversize line being diverted is shown
    uint64_t divert_written_ = 0;    // bytes diverted output wrote (the total cap's count)
    bool said_rate_ = false, said_total_ = false;
    std::string scratch_;  // denial answers, diverted-line prefixes
    RelayGate* gate_ = nullptr;
    StderrTap* tap_ = nullptr;
    std::chrono::steady_clock::time_point last_activity_ = std::chrono::steady_clock::now();
    std::unique_ptr<Stream> make_stream(int fd, Fd owned, uint32_t token, Direction dir,
                                        bool framed, Sink* out);
    Status register_stream(Stream& s);
};

}  // namespace warden::shim
