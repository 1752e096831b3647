// src/journal — the tamper-evident event log.
//
// This folder owns mcpwarden's evidence: one SQLite database per user per host in which
// every session, every tool call (asked, answered, abandoned), every process snapshot taken
// before a signal, every signal and every exit is a record. Records form a SHA-256 hash
// chain; Ed25519 checkpoints over (origin, seq, chain) are kept in the database and as
// files beside it. It also owns the caches projected from the log (`sessions`, `activity`),
// `verify` (verify.hpp), reconcile of sessions whose writer died, argument redaction, and
// export (export.hpp). The essay on what can go wrong and how each step answers it opens
// journal.cpp. Event bodies are documented field by field in docs/JOURNAL.md.
//
// How the shim uses it:
//
//   auto j = journal::Journal::open({.path = flag_or_empty});      // once per session
//   j->append(journal::session_start(info));                      // sync: it names the writer
//   auto r = j->append(journal::activity_request(req));           // sync, BEFORE forwarding
//   if (!r) deny_or_warn(r.error());                              // --on-journal-failure
//   j->post(journal::activity_response(...with r->seq...));       // async, off the hot path
//   j->post(journal::activity_abandoned(...));                    // async
//   j->append(journal::process_snapshot(...));                    // sync before any signal
//   j->append(journal::process_signal(...)); j->post(process_exit(...));
//   j->append(journal::session_end(...));                         // sync; flushes + checkpoints
//
// `append` returns only when the record is committed (Options::sync says when it reaches the
// disk: a commit survives any process death either way). `post` never
// blocks on the disk: a background thread commits queued events in batches under the same
// lock discipline; `flush` waits for them. Records of one Journal keep their order: `append`
// first flushes what was posted before it, so a snapshot → signal → exit teardown, or a
// request's response and the session end, appear in the log in the order they were issued.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "journal/canonical_json.hpp"
#include "journal/crypto.hpp"
#include "mcpwarden/types.hpp"
#include "proc/process.hpp"
#include "sys/result.hpp"

namespace warden::journal {

class Db;          // store.hpp
struct LossCount;  // losses.hpp

// ---- Where the journal lives -----------------------------------------------------------

// The database and its sidecars. For DIR/NAME.db: DIR/NAME.lock (the append flock),
// DIR/NAME.key (Ed25519 seed, 0600, the *private* key: whoever can read it can re-sign),
// DIR/NAME.pub (public key, for pinning out of band), and the checkpoint files in
// DIR/checkpoints/ when NAME is "journal" (the default), else DIR/NAME.checkpoints/.
struct Paths {
    std::string db, dir, lock, key, pub, checkpoints;
    std::string intents;  // directory of the sessions' intent files (journal.cpp, "Intents")
    static Paths for_db(const std::string& db);
    // The intent file of `session`; "" for a session id that cannot name a file.
    std::string intent_file(std::string_view session) const;
};

// `--journal PATH` if given, else $MCPWARDEN_JOURNAL, else
// $XDG_STATE_HOME/mcpwarden/journal.db, else HOME/.local/state/mcpwarden/journal.db, where
// HOME is $HOME or, when that is unset, the user's home in the password database.
Result<std::string> resolve_path(std::string_view flag = {});
// $HOME if absolute, else the effective user's home from the password database; "" if none.
std::string home_directory();

// Linux statfs magic numbers of network and cluster filesystems the journal refuses (its
// flock and fsync guarantees do not hold there). Returns the name ("nfs", "cifs", …) or
// nullptr for a local filesystem.
const char* network_filesystem_name(int64_t f_type);

struct Options {
    std::string path{};  // empty: resolve_path()
    // When a commit reaches the disk. Periodic (the default): a commit is a write() to the
    // WAL, which survives the death of any process, the threat mcpwarden exists for; the WAL
    // is fsync'd at most every `sync_interval`, at every checkpoint and at session end, so an
    // OS crash or power loss costs at most that window. Always: an fsync per commit (SQLite
    // synchronous=FULL), for OS-crash durability at about 0.3 ms a request.
    JournalSync sync = JournalSync::Periodic;
    std::chrono::milliseconds sync_interval{1000};
    size_t checkpoint_every = 256;  // records
    std::chrono::nanoseconds checkpoint_interval = std::chrono::seconds(60);
    std::chrono::milliseconds busy_timeout{10000};  // flock wait and SQLite busy_timeout
    size_t queue_limit = 100000;        // posted events beyond this are dropped + counted
    size_t batch_limit = 1024;          // events per background transaction
    size_t checkpoint_files_kept = 64;  // older checkpoint files are pruned (table keeps all)
    // Writers take turns in arrival order (a ticket queue in the lock file, append_lock.hpp);
    // false: the flock alone, first come not first served (the benchmark's baseline).
    bool fair_lock = true;
    // A checkpoint that falls due (cadence or interval) inside a synchronous append is signed
    // by the writer thread right after it, not inside it: a signature and three fsyncs off
    // the caller's path (the shim's requests). The tail stays unanchored that much longer.
    bool checkpoint_off_path = false;
    // Requests go through append_intent(): one write() to the session's intent file on the
    // caller's path, the transaction on the writer thread (journal.cpp, "Intents").
    // Only under JournalSync::Periodic; Always keeps the synchronous append.
    bool intents = false;
    // Test hook (MCPWARDEN_FAULT=journal_hold_intents): the writer thread never chains an
    // intent, as if the process always died first; they stay in their file for recovery.
    bool hold_intents = false;
    // Test hook (MCPWARDEN_FAULT=journal_slow_writer): each turn of the writer thread commits
    // this much later, as on a slow disk.
    std::chrono::milliseconds slow_writer{0};
    // Test hook: a ticket of the turn queue given up by a writer whose wait ran out is passed
    // only by the 20 ms check for stalled ones, as before it was passed at once (append_lock.hpp).
    bool keep_given_up_turns = false;
};

// How long this Journal's most recent transaction waited for the append lock and held it.
struct LockTiming {
    int64_t wait_ns = 0;
    int64_t hold_ns = 0;
};

// ---- Events ----------------------------------------------------------------------------

// One record to append. `data` holds the kind's fields (docs/JOURNAL.md); it is serialized
// canonically (canonical_json.hpp): integers only, snake_case keys, non-UTF-8 strings as
// {"b64":…}. The stored body is
//   {"data":DATA,"kind":KIND,"origin":ORIGIN,"seq":SEQ,"session":SESSION,"ts":TS,"v":1}
// where seq and origin are filled in under the lock. ts_ns = 0 means "now" (taken when the
// event is appended or posted, not when a batch is committed).
//
// A call's two records (activity.request, activity.response, once a call each: events.cpp)
// are written as text by their builders, and what the journal reads of them before the
// commit comes as plain values (CallColumns): a Json object of them, built on the relay's
// path and freed on the writer's, was a tenth of what a journaled call cost.
struct CallColumns {
    std::string id{};              // the typed id's canonical text: {"n":17}, {"s":"17"}, null
    std::string method{}, tool{};  // a request's
    std::string_view outcome{};    // an answer's: outcome_name()
    // An answer's request: its seq, or while that is not known the ticket of its intent (< 0).
    int64_t request_seq = 0;
    int64_t duration_ns = 0, bytes = 0;  // an answer's
};
struct Event {
    std::string kind{};
    std::string session{};  // "" for events that belong to no session
    int64_t ts_ns = 0;
    Json data = Json::object();
    // The data's canonical text, when its builder wrote it as text: then that is the
    // record's data, and `data` is null (or, when the text could not be written, what makes
    // the record fail).
    std::string data_text{};
    // With a text: what is read back before the commit (project(), a ticket to resolve, the
    // id a loss is counted by).
    std::optional<CallColumns> call{};
};

// A member of an event's data given as its canonical text (canonical_json.hpp, canonical_with).
struct CanonicalMember {
    std::string_view key;
    std::string_view text;
};

struct Appended {
    int64_t seq = 0;  // seq of the caller's last event (checkpoint records after it not counted)
    Hash chain{};
};

int64_t now_ns();  // CLOCK_REALTIME in nanoseconds

// ---- The writer ------------------------------------------------------------------------

class Journal {
  public:
    // Opens (creating on first use) the database, its directory (0700), file (0600), lock
    // file and signing key. Refuses symlinked paths and network filesystems. Thread-safe
    // after open. Not to be used across fork(): open a new one in the child.
    static Result<std::unique_ptr<Journal>> open(const Options& options = {});
    ~Journal();  // flushes posted events and stops the writer thread
    Journal(const Journal&) = delete;
    Journal& operator=(const Journal&) = delete;

    // Synchronous append: returns once the record is committed (in the WAL; fsync'd too under
    // JournalSync::Always, and always for a session.end or a checkpoint). For events that can act:
    // session.start, activity.request, process.snapshot, process.signal, session.end.
    // Flushes this Journal's posted events first so the log keeps the caller's order.
    Result<Appended> append(const Event& event);
    // As append(event), with `member` set in its data: its text spliced into the body as it
    // stands when it is canonical, else parsed and serialized like the rest of the data.
    // Error when the text is not JSON (nothing appended).
    Result<Appended> append(const Event& event, CanonicalMember member);
    // Several records in one transaction (one fsync), contiguous seqs.
    Result<Appended> append_all(std::span<const Event> events);

    // The request path with Options::intents: `event` is written with one write() to its
    // session's intent file (process-crash durable, like a committed transaction under
    // JournalSync::Periodic) and queued; the writer thread chains it in order. Returns a
    // ticket (< 0) that stands for the record's seq: a later event whose data has
    // "request_seq": ticket gets the seq when it is committed. An error (no intents, the
    // file cannot be written, the queue is full) means nothing was written: append instead.
    Result<int64_t> append_intent(const Event& event);
    // The same, `event` moved into the queue when it is written (not copied: a request's
    // record is most of a kilobyte); on an error it is left as it was.
    Result<int64_t> append_intent(Event&& event);
    // The same for several records of one session, in one write(): the evidence the relay
    // leaves before a teardown (the client's loss, the requests it abandoned) is on record in
    // the sense a forwarded request is, without a transaction. One ticket per event.
    Result<std::vector<int64_t>> append_intents(std::span<const Event> events);
    // Makes `session`'s intent file this writer's (created if missing), to be removed at
    // close with its own intents even if it writes none: a second writer may (the keeper's
    // teardown records, intents.hpp IntentFile), and commits what it writes itself.
    Status adopt_intent_file(const std::string& session);

    // Counts events the caller could not append and went on without (a request forwarded
    // under --on-journal-failure warn, a session record): with the losses of posted events,
    // they are reported by kind, with the ids of the requests concerned, in one
    // journal.degraded record written first thing the next time the journal can be written
    // (the next append, or the writer thread's retry, once a second).
    void count_lost(std::span<const Event> events, const Error& why);
    // What this writer counted as lost since it opened, and how much of it is not on record
    // yet (kept in its loss slot for the next writer meanwhile: losses.hpp).
    LossCount losses() const;

    // Queued append, never blocks on the disk. For activity.response, activity.abandoned,
    // process.exit, session.client_lost. Failures are counted by kind and recorded later in
    // one journal.degraded record; flush() reports them.
    void post(Event event);
    // The same for a teardown record (intents.hpp, is_teardown_record) of `session` that
    // another writer of this journal prepared and wrote to the session's intent file: the
    // line as intent_lines made it (without its newline), committed with this writer's
    // origin, its data not parsed into a Json again. A line that is not exactly such a
    // record is refused, and says why; nothing is queued then.
    Status post_intent_line(std::string_view line, std::string_view session);
    // Waits until everything posted so far is committed or failed; returns the first failure
    // since the previous flush.
    Status flush();
    // The same, waiting at most `bound` (nullopt: as long as it takes): what is not committed
    // then stays queued for the next commit, and an error says so.
    Status flush_within(std::optional<std::chrono::milliseconds> bound);

    // Signs the current head now (also done every checkpoint_every records, after
    // checkpoint_interval, and after every session.end).
    Status checkpoint(std::string_view reason = "explicit");

    // Flushes and stops the writer thread; reports what failed. A writer normally signs what
    // it wrote after its last checkpoint and syncs it (Tail::anchor); Tail::to_next_writer
    // leaves both to a writer known to follow at once with a session.end, which does both
    // for everything before it (the keeper, whose report the relay's session.end follows).
    enum class Tail { anchor, to_next_writer };
    Status close(Tail tail = Tail::anchor);
    // As close(Tail::anchor) for a process about to exit: what is posted and owed is
    // committed and the intent file settled, but the writer thread (idle) is not joined and
    // the connection not closed; the process's exit ends both (a millisecond or two fewer on
    // the way to it). Nothing may be appended after it.
    Status close_at_exit();

    // From now on a commit that carries a session.end is in the WAL through write() when it
    // returns, as every commit, signed as before, and its writeback started, but it neither
    // fsyncs the WAL nor writes its checkpoint file, and close() leaves the WAL as it is (no
    // fsync, no copy into the database): the next writer to open the journal does all three
    // (journal.cpp, "Durability"), and no periodic fsync of the writer thread starts any more.
    // For a writer whose exit someone waits for (`run`, from its teardown on): no wait for
    // the disk on the way to it. A SIGKILL loses nothing that way; a power loss can take
    // the session's last records, as it can the last second of any session under Periodic.
    void leave_end_sync_to_next_writer();
    // Some intent this writer wrote is not chained yet (its batch failed, or is still to be
    // committed): it waits in its file.
    bool intents_pending() const;

    const Paths& paths() const;
    const std::string& origin() const;
    const PublicKey& public_key() const;
    LockTiming last_lock_timing() const;  // benchmarks and diagnostics
    // From now on, each wait for the append lock (and SQLite's busy timeout) is bounded by
    // `wait` instead of Options::busy_timeout: a teardown must not wait on another writer as
    // long as a request may.
    void set_lock_wait(std::chrono::milliseconds wait);

    // VACUUM under the append lock: after a prune, gives the freed pages back to the
    // filesystem (prune.hpp).
    Status compact();

    // Internal (reconcile, tests): runs `produce` inside the append transaction, after the
    // head was read under the lock, and appends the events it returns. `seqs_in_order`: no
    // checkpoint among them (one due is signed right after), so the producer knows the seq
    // each gets: the head's + 1, + 2, …; `sign_as`: a checkpoint with that reason signs what
    // `produce` returned, in the same transaction (none when it returned nothing).
    using Producer = std::function<Result<std::vector<Event>>(Db&)>;
    Result<Appended> append_produced(const Producer& produce, bool seqs_in_order = false,
                                     std::string_view sign_as = {});

    struct Impl;

  private:
    explicit Journal(std::unique_ptr<Impl> impl);
    Status close_impl(Tail tail, bool at_exit);
    std::unique_ptr<Impl> impl_;
};

// ---- Typed event builders (field lists in docs/JOURNAL.md) ------------------------------

// RecordArgs and RecordArgv are mcpwarden/types.hpp's. Command lines in session.start:
// credentials redacted and the client's argv bounded (redact.hpp), or Full: as they were.

// Argument recording for activity.request. `none`: empty. `full`: the text itself. `preview`
// (default): the JSON re-serialized compactly with the value of every secret-named key
// replaced by "***" (redact.hpp's secret_name: the key case- and Unicode-folded, zero-width
// characters and separators dropped) and credentials by shape masked in every other string
// (redact_text), then cut to `limit` bytes on a UTF-8 boundary with "…" appended when cut.
// Text that does not parse is never previewed raw: "<unparsed: N bytes>".
std::string redacted_preview(std::string_view json_text, RecordArgs mode, size_t limit = 256);
// "sha256:<hex>" of the raw argument bytes: proves later which arguments were sent.
std::string argument_digest(std::string_view bytes);

struct WriterIdentity {
    ProcessId process;      // pid + starttime (field 22 of /proc/PID/stat)
    std::string boot_id{};  // /proc/sys/kernel/random/boot_id
    static WriterIdentity self();
};
// starttime of a live pid from /proc/PID/stat; nullopt if gone, zombie or unreadable.
std::optional<uint64_t> process_starttime(pid_t pid);
const std::string& current_boot_id();
// True while the process (pid, starttime) of this boot is alive and not a zombie.
bool writer_alive(const WriterIdentity& w);

struct SessionStart {
    std::string session{};
    std::string server_name{};               // display name ("filesystem", or argv[0] basename)
    WriterIdentity writer;                   // the relay; defaults to this process when pid == 0
    ProcessId client{};                      // the MCP client (our parent), 0 if unknown
    std::vector<std::string> client_argv{};  // kept as executable + flags, bounded (redact.hpp)
    ProcessId keeper{}, server{};
    std::vector<std::string> server_argv{};         // credentials redacted; non-UTF-8 argv as b64
    RecordArgv record_argv = RecordArgv::Redacted;  // Full: both argv as they are
    std::string cwd{};
    std::vector<std::string> env_names{};  // names only: values are never stored
    std::vector<std::string> layers{};     // containment layers really active
    Json extra = Json::object();           // any further snake_case fields, merged in
};
Event session_start(const SessionStart& s);

// cause: "stdin_eof" | "client_exit" | "epipe" | "signal" …; outstanding: typed ids.
Event session_client_lost(std::string session, std::string cause, std::vector<Json> outstanding);

struct SessionEnd {
    std::string session{};
    std::string reason{};            // "client_lost", "server_exit", "signal", …
    std::optional<int> exit_status;  // the server's, when it exited
    std::optional<int> term_signal;  // the server's, when killed by a signal
    Json teardown = Json::object();  // the TeardownReport as JSON (integers only)
};
Event session_end(SessionEnd e);

struct Request {
    std::string session{};
    Json id;               // typed: rpc_id_number / rpc_id_string / rpc_id_from_json_text
    std::string method{};  // "tools/call", …
    std::string tool{};    // params.name for tools/call, else ""
    std::string_view arguments_json;  // raw params.arguments (or params) text, may be empty
    RecordArgs record = RecordArgs::Preview;
    int64_t bytes = 0;  // size of the request line
    // The id of the request answered input_required that this one retries (the same call,
    // now with params.inputResponses); null: not a retry. An id, not a seq: that request may
    // still be an intent whose seq is not known yet (its answer's request_seq names it).
    Json retry_of_id{};
    bool stream = false;  // subscriptions/listen: answered by notifications until it ends
    // raw params.inputResponses text (a 2026-07-28 retry): recorded as the arguments are
    std::string_view input_responses_json{};
    // The client's W3C trace context (params._meta.traceparent), as it sent it.
    std::optional<std::string> traceparent{};
    // Longer than --max-message: recorded from its first bytes, and whether the id was
    // among them ("oversize": true, "id_in_prefix").
    bool oversize = false;
    bool id_in_prefix = false;
};
Event activity_request(const Request& r);

// session.protocol: the first request of a protocol version in a session (docs/JOURNAL.md).
struct Protocol {
    std::string session{};
    int64_t request_seq = 0;       // the activity.request that showed it
    std::string era{};             // "legacy" (initialize) | "stateless" (2026-07-28 _meta)
    std::string protocol_version;  // "" when the request named none
    std::string method{};
    std::optional<std::string> client_name, client_version;
    std::optional<std::string> capabilities_sha256;  // short hex of the canonical capabilities
    bool served_from_catalog = false;  // answered by --lazy's catalog: no request record (seq 0)
};
Event session_protocol(const Protocol& p);
// The session is the one `probe_session` probed for: the same client ran that one first, for
// `server/discover` alone, and it ended `gap_ns` before this one started (query.hpp,
// probe_session_for).
Event session_probed_by(std::string session, std::string probe_session, int64_t gap_ns);

enum class Outcome { ok, jsonrpc_error, tool_error, input_required };
// "ok" | "jsonrpc_error" | "tool_error" | "input_required"
const char* outcome_name(Outcome o);

struct Response {
    std::string session{};
    int64_t request_seq = 0;  // Appended::seq of the activity.request
    Json id;
    Outcome outcome = Outcome::ok;
    int64_t bytes = 0;                  // size of the response line
    int64_t duration_ns = 0;            // request forwarded → answer delivered to the client
    std::optional<int64_t> error_code;  // JSON-RPC error.code when outcome == jsonrpc_error
};
Event activity_response(const Response& r);

// A request still outstanding when the client went away: in flight when the client died.
Event activity_abandoned(std::string session, int64_t request_seq, Json id, std::string cause);
// A stream (subscriptions/listen) still open when the client went away: it ended with the
// session, as streams do; nothing was abandoned.
// `closed_by`: "client" (it left), "server" (it exited with the stream open) or "mcpwarden"
// (the session ended for another reason: the keeper died, the stdout guard).
Event activity_stream_end(std::string session, int64_t request_seq, Json id, std::string cause,
                          std::string closed_by);

// Before any signal. `children` are the pids seen as its children in the same scan.
Event process_snapshot(std::string session, const Process& p, std::string_view reason,
                       std::span<const ProcessId> children = {});
// via: "pidfd" | "kill" | "cgroup.kill"; err: 0 or errno of the failed send.
Event process_signal(std::string session, ProcessId target, int signal, std::string_view via,
                     int err = 0);
// phase: "eof_window" | "grace_window" | "after_kill" | "before_signal" |
// "identity_changed" (warden::exit_phase); status as from waitid.
Event process_exit(std::string session, ProcessId target, std::optional<int> exit_status,
                   std::optional<int> term_signal, std::string_view phase);

// ---- Reconcile ------------------------------------------------------------------------

struct ReconcileReport {
    std::vector<std::string> orphaned{};  // sessions marked session.orphaned now
    int64_t unresolved = 0;               // activity.unresolved records written
    int64_t alive = 0;                    // open sessions whose writer still runs (left alone)
    std::vector<std::string> problems{};  // intent files not (wholly) recovered, and why
};
// Sessions with a session.start, no session.end / session.orphaned, and a dead writer get a
// session.orphaned record and one activity.unresolved per request that has no response and
// was not abandoned. Decided and written under the append lock, so two concurrent
// reconciles never double-write.
Result<ReconcileReport> reconcile(Journal& journal);

}  // namespace warden::journal
