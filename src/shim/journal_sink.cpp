#include "shim/journal_sink.hpp"

#include <fcntl.h>

#include <fmt/format.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include <fmt/format.h>

#include "journal/crypto.hpp"
#include "journal/intents.hpp"
#include "journal/losses.hpp"
#include "journal/prune.hpp"
#include "journal/query.hpp"
#include "proc/process.hpp"
#include "record/teardown_record.hpp"
#include "shim/keeper.hpp"

namespace warden::shim {

namespace {

journal::Json typed_id(rpc::IdType type, std::string_view raw) {
    // No id (an oversize request whose id was never found): null, as JSON-RPC answers it.
    if (type == rpc::IdType::none || raw.empty()) raw = "null";
    auto j = journal::rpc_id_from_json_text(raw);
    return j ? std::move(*j) : journal::Json(std::string(raw));
}

// The W3C trace context a client put in params._meta (`traceparent`), so that the exporter
// can make the request's span a child of the client's: kept as the client sent it when it is
// the 55 characters of a version-00 traceparent. Most requests carry none; the search for the
// key is all they cost, and only a request that names it is parsed again.
std::optional<std::string> request_traceparent(std::string_view line) {
    if (line.find("\"traceparent\"") == std::string_view::npos) return std::nullopt;
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || !j.contains("params") || !j["params"].is_object()) return std::nullopt;
    const auto& params = j["params"];
    auto meta = params.find("_meta");
    if (meta == params.end() || !meta->is_object()) return std::nullopt;
    auto tp = meta->find("traceparent");
    if (tp == meta->end() || !tp->is_string() || tp->get_ref<const std::string&>().size() != 55)
        return std::nullopt;
    return tp->get<std::string>();
}

}  // namespace

journal::Json sandbox_record(const sandbox::Plan& plan) {
    journal::Json j{{"profile", std::string(sandbox::to_string(plan.profile()))},
                    {"level", std::string(plan.level())}};
    if (!plan.on()) return j;
    j["landlock_abi"] = plan.landlock_abi();
    j["net"] = std::string(sandbox::to_string(plan.net()));
    journal::Json ports = journal::Json::array();
    for (auto p : plan.connect_ports())
        ports.push_back(static_cast<int>(p));
    j["allow_connect"] = ports;
    j["not_enforced"] = plan.not_enforced();
    return j;
}

Result<std::unique_ptr<journal::Journal>> open_journal(const std::string& path, JournalSync sync,
                                                       std::chrono::milliseconds lock_wait) {
    journal::Options o;
    o.path = path;
    o.busy_timeout = lock_wait;
    o.sync = sync;
    o.checkpoint_off_path = true;  // a request waits for its record: nothing else
    o.intents = true;              // and its record is one write() (journal.cpp, "Intents")
    const Faults faults = Faults::from_env();
    o.hold_intents = faults.journal_hold_intents;
    if (faults.journal_slow_writer) o.slow_writer = std::chrono::milliseconds(500);
    return journal::Journal::open(o);
}

JournalSink::JournalSink(std::unique_ptr<journal::Journal> journal, std::string open_error,
                         std::string session, OnJournalFailure policy, RecordArgs record,
                         int log_fd)
    : journal_(std::move(journal)),
      open_error_(std::move(open_error)),
      session_(std::move(session)),
      policy_(policy),
      record_(record),
      log_fd_(log_fd) {
    // The keeper writes its teardown records to our intent file too, and commits them: the
    // file is ours to remove at close (journal.hpp, adopt_intent_file). One that cannot be
    // opened fails our intents alike, which take the synchronous way.
    if (journal_) (void)journal_->adopt_intent_file(session_);
}

// ---- The journal's start-up ---------------------------------------------------------------
//
// Opening the journal is milliseconds of work before the first record: SQLite's open, the
// lock, OpenSSL's first use reading the signing key, the schema check in a transaction; then
// session.start, a commit. Done before the relay reads its client, as it once was, it held
// back a client that closes stdin at once (one that starts a server, lists its tools and
// goes, as `claude mcp list` does, ends the session in that very window): the EOF was seen
// only after it, and the whole teardown, and the port, waited that long. So it runs on a
// thread of its own, and the relay waits for it only when it has something to record. The
// thread starts as soon as the keeper is forked (Session::open_journal_early, which also
// says why it runs off the keeper's CPU): the opening overlaps the keeper's start of the
// server, which the relay only waits for, and session.start, which names the server, is
// handed to it by begin() once the server is up. Started once the server was up, as it once
// was, the opening was still under way for most clients that left at once, and their `run`
// waited for it after the tree was gone (docs/BENCHMARKS.md, "teardown through the shim").
// A sink destroyed before begin() (the server never started) lets the thread go without a
// record.
// * A request waits (ready()), in either --on-journal-failure mode: on record before its
//   bytes go on means the journal is open and session.start is written first. So does any
//   other record, and whoever asks for the journal itself.
// * The client's leaving does not. Its evidence (session.client_lost; no request can be in
//   flight, since a request would have waited) goes to the session's intent file in one
//   write(), as the relay's evidence always does, and the teardown goes on at once. ready()
//   commits it after session.start, before the relay says "evidence" to the keeper, whose
//   records follow it. A relay that dies before that leaves it in the file for whoever
//   recovers the session (the keeper, the next run, `journal reconcile`). Under
//   --journal-sync always, which promises an fsync'd commit rather than a write(), it waits.
// * The keeper opens its journal only after ours (two openings of a new journal at once can
//   fail one): "journal-started" is written by the start-up's thread when it is over. A
//   teardown asked for before that opens none: the keeper hands its records over in the
//   intent file, and ours commits them with session.end (keeper.cpp, "The keeper's
//   journal").
// The thread touches nothing of the sink but what it is handed (handoff_, under its mutex) and
// what it hands over (opened_, open_error_, start_error_, until it is joined, on the relay's
// thread).

JournalSink::JournalSink(std::string session, OnJournalFailure policy, RecordArgs record,
                         int log_fd)
    : session_(std::move(session)), policy_(policy), record_(record), log_fd_(log_fd) {}

std::unique_ptr<JournalSink> JournalSink::opening(const std::string& path, JournalSync sync,
                                                  std::string session, OnJournalFailure policy,
                                                  RecordArgs record, int log_fd,
                                                  std::optional<CpuSet> cpus) {
    std::unique_ptr<JournalSink> sink(new JournalSink(std::move(session), policy, record, log_fd));
    sink->journal_path_ = path;
    sink->sync_ = sync;
    const bool slow = Faults::from_env().journal_slow_open;
    JournalSink* self = sink.get();
    sink->opening_.emplace(
        "mcpwarden-jopen", [self, path, sync, slow] { self->start_up(path, sync, slow); }, cpus);
    return sink;
}

// On the start-up's thread: the journal opened, then, once begin() hands it over (or never),
// session.start appended and the keeper told.
void JournalSink::start_up(const std::string& path, JournalSync sync, bool slow) {
    if (slow) std::this_thread::sleep_for(std::chrono::seconds(1));
    auto j = open_journal(path, sync);
    trace_phase("journal_opened");
    Fd started;
    auto start = await_begin(started);
    if (!start) return;  // the server never started: no session to record
    if (j) {
        // The keeper's records go to our intent file too (as in the constructor above).
        (void)(*j)->adopt_intent_file(start->session);
        if (auto a = (*j)->append(journal::session_start(*start)); !a) {
            start_error_ = a.error().message;
            journal::Event e = journal::session_start(*start);
            (*j)->count_lost(std::span(&e, 1), a.error());
        } else {
            link_probe(**j, *start);
        }
        opened_ = std::move(*j);
    } else {
        open_error_ = j.error().message;
        unjournaled_start_ = journal::session_start(*start);  // counted by ready()
    }
    trace_phase("journal_started");
    if (started.valid()) (void)write_all(started.get(), "journal-started\n", "keeper control pipe");
}

// The probe a client ran on a copy of the server just before this session (journal/query.hpp,
// probe_session_for), on record right after session.start: here, on the start-up's thread,
// the lookup costs the relay nothing, and `journal sessions` finds the link where it looks.
// A lookup that fails links nothing: the sessions are on record all the same.
void JournalSink::link_probe(journal::Journal& j, const journal::SessionStart& start) {
    if (Faults::from_env().probe_unlinked) return;
    const int64_t now = journal::now_ns();
    auto probe =
        journal::probe_session_for(j.paths().db, start.session, start.client, now, kProbeLinkBound);
    if (!probe || !*probe) return;
    (void)j.append(
        journal::session_probed_by(start.session, (*probe)->session, now - (*probe)->ended_ns));
}

void JournalSink::begin(journal::SessionStart start, int started_fd) {
    {
        std::lock_guard lk(handoff_.mu);
        handoff_.start = std::move(start);
        // Its own copy of the pipe: the caller's may be closed before the thread is joined.
        handoff_.started = Fd(started_fd >= 0 ? ::fcntl(started_fd, F_DUPFD_CLOEXEC, 0) : -1);
    }
    handoff_.given_cv.notify_one();
}

std::optional<journal::SessionStart> JournalSink::await_begin(Fd& started) {
    std::unique_lock lk(handoff_.mu);
    handoff_.given_cv.wait(lk, [&] { return handoff_.start || handoff_.abandoned; });
    if (!handoff_.start) return std::nullopt;
    started = std::move(handoff_.started);
    return std::move(handoff_.start);
}

void JournalSink::abandon_start_up() {
    {
        std::lock_guard lk(handoff_.mu);
        if (handoff_.start) return;  // begun: the start-up goes on to its end
        handoff_.abandoned = true;
    }
    handoff_.given_cv.notify_one();
}

void JournalSink::ready() {
    if (!starting()) return;
    abandon_start_up();  // never begun, it would wait forever: nothing to record then
    opening_->join();
    journal_ = std::move(opened_);
    if (!journal_) {
        warn_once(open_error_);
        if (unjournaled_start_) count_unjournaled(*unjournaled_start_);
        unjournaled_start_.reset();
        return;
    }
    if (!start_error_.empty()) warn_once(start_error_);
    if (short_lock_wait_) journal_->set_lock_wait(kTeardownLockWait);
    if (end_sync_left_) journal_->leave_end_sync_to_next_writer();
    if (early_.empty()) return;
    no_intents_ = true;
    auto a = Faults::from_env().early_append_fails
                 ? Result<int64_t>(Error::msg("journal: the early evidence's commit failed "
                                              "(MCPWARDEN_FAULT=early_append_fails)"))
                 : journal::append_missing(*journal_, early_);
    if (!a) {
        warn_once(a.error().message);
        // In the intent file, it is not lost: committed before session.end. Else it is.
        if (early_file_ && early_in_file_)
            early_pending_ = true;
        else
            journal_->count_lost(early_, a.error());
    }
    early_.clear();
}

// The client left during the start-up (see above): its evidence in the intent file now, on
// record once the journal is open. Without the file (it cannot be opened), in memory only
// until then.
void JournalSink::record_early_evidence(std::span<const journal::Event> events) {
    std::vector<journal::Event> timed(events.begin(), events.end());
    for (auto& e : timed)  // the ts its record is committed with, by which recovery finds it
        if (e.ts_ns <= 0) e.ts_ns = journal::now_ns();
    if (!early_file_) {
        auto path = journal::resolve_path(journal_path_);
        if (path)
            if (auto f = journal::IntentFile::open(journal::Paths::for_db(*path), session_))
                early_file_.emplace(std::move(*f));
    }
    if (early_file_ && !early_file_->write(timed)) early_in_file_ = false;
    early_.insert(early_.end(), timed.begin(), timed.end());
}

JournalSink::~JournalSink() {
    if (!starting()) return;
    abandon_start_up();
    opening_->join();
}

// One line for the whole session, however many records fail: `what` already names the
// journal ("journal PATH: insert …: database or disk is full").
void JournalSink::warn_once(const std::string& what) {
    if (warned_.exchange(true)) return;
    (void)write_all(log_fd_,
                    "mcpwarden: " + what +
                        (policy_ == OnJournalFailure::Deny
                             ? "; requests are refused (--on-journal-failure deny)\n"
                             : "; requests are forwarded unrecorded, and what was lost is "
                               "counted in a journal.degraded record once the journal can be "
                               "written (--on-journal-failure warn)\n"),
                    "stderr");
}

// The session's count of what it could not record, once, at its end: the first failure's
// line (warn_once) said that records are being lost, this one says how many, and where the
// count is. The keeper's own losses are in its journal.degraded (and `status`, `audit verify`).
void JournalSink::report_losses() {
    const journal::LossCount c = journal_ ? journal_->losses() : unjournaled_;
    if (c.events == 0) return;
    std::string kinds;
    for (const auto& [kind, n] : c.kinds)
        kinds += fmt::format("{}{} {}", kinds.empty() ? "" : ", ", n, kind);
    const char* where = c.owed == 0 ? "counted in a journal.degraded record"
                        : journal_ || ledger_
                            ? "counted, and the count kept in the journal's lock file until the "
                              "next writer records it (`mcpwarden journal reconcile`)"
                            : "the journal could not be opened and its lock file cannot keep the "
                              "count: this line is the only account of them";
    (void)write_all(log_fd_,
                    fmt::format("mcpwarden: journal: {} record{} of this session not written ({}); "
                                "{}\n",
                                c.events, c.events == 1 ? "" : "s", kinds, where),
                    "stderr");
}

// With no journal at all (it could not be opened), what is lost is counted all the same, in a
// slot of the journal's lock file when there is one (journal/losses.hpp, LossLedger), for the
// next writer to record.
void JournalSink::count_unjournaled(const journal::Event& e) {
    if (!ledger_tried_) {
        ledger_tried_ = true;
        if (auto path = journal::resolve_path(journal_path_))
            if (auto l = journal::LossLedger::open(*path)) ledger_.emplace(std::move(*l));
    }
    if (ledger_) ledger_->count(e, open_error_);
    ++unjournaled_.events;
    ++unjournaled_.kinds[e.kind];
    unjournaled_.owed = unjournaled_.events;
}

Result<int64_t> JournalSink::on_request(const rpc::Message& m, std::string_view line) {
    auto seq = record_request(m, line, false);
    if (seq && *seq != 0) note_protocol(m, line, *seq);  // a seq, or a ticket (< 0)
    return seq;
}

void JournalSink::on_served(const rpc::Message& m, std::string_view line) {
    if (Faults::from_env().served_protocol_unnoted || !journal()) return;
    note_protocol(m, line, 0);
}

// Which protocol a client speaks is known from its requests alone (rpc/message.hpp, "era"):
// the first of each era and version is parsed once more for what the client says of itself.
// Bounded: a client that names a new version with every request leaves a few records only.
void JournalSink::note_protocol(const rpc::Message& m, std::string_view line, int64_t request_seq) {
    constexpr size_t kMostVersions = 8;
    if (m.era == rpc::Era::none || protocols_seen_.size() >= kMostVersions) return;
    std::string era(rpc::to_string(m.era));
    if (!protocols_seen_.insert(era + " " + std::string(m.protocol_version)).second) return;
    auto j = nlohmann::json::parse(line, nullptr, false);
    auto params = j.is_object() ? j.value("params", nlohmann::json()) : nlohmann::json();
    if (!params.is_object()) params = nlohmann::json::object();
    nlohmann::json caps, info;
    if (m.era == rpc::Era::legacy) {
        caps = params.value("capabilities", nlohmann::json());
        info = params.value("clientInfo", nlohmann::json());
    } else if (auto meta = params.value("_meta", nlohmann::json()); meta.is_object()) {
        caps = meta.value("io.modelcontextprotocol/clientCapabilities", nlohmann::json());
        info = meta.value("io.modelcontextprotocol/clientInfo", nlohmann::json());
    }
    auto text = [](const nlohmann::json& o, const char* key) {
        auto v = o.is_object() ? o.value(key, nlohmann::json()) : nlohmann::json();
        return v.is_string() ? std::optional<std::string>(v.get<std::string>()) : std::nullopt;
    };
    journal::Protocol p;
    p.session = session_;
    p.request_seq = request_seq;
    p.served_from_catalog = request_seq == 0;
    p.era = std::move(era);
    p.protocol_version = std::string(m.protocol_version);
    p.method = std::string(m.method);
    p.client_name = text(info, "name");
    p.client_version = text(info, "version");
    // nlohmann's objects keep their keys sorted: the same capabilities, the same digest.
    if (!caps.is_null())
        p.capabilities_sha256 = journal::to_hex(journal::sha256(caps.dump())).substr(0, 16);
    journal_->post(journal::session_protocol(p));
}

Result<int64_t> JournalSink::on_oversize_request(const rpc::Message& m, std::string_view prefix) {
    return record_request(m, prefix, true);
}

Result<int64_t> JournalSink::record_request(const rpc::Message& m, std::string_view line,
                                            bool oversize) {
    ready();
    if (calls_to_clients_ && journal_) return int64_t{0};
    journal::Request r;
    r.session = session_;
    r.id = typed_id(m.id.type, m.id.raw);
    const std::string call = m.era == rpc::Era::stateless ? logical_call(m) : std::string();
    r.input_responses_json = m.input_responses;
    if (!m.input_responses.empty()) {
        if (auto it = awaiting_.find(call); it != awaiting_.end()) {
            r.retry_of_id = it->second;
            awaiting_.erase(it);
        }
    }
    r.stream = m.method == "subscriptions/listen";
    r.method = std::string(m.method);
    r.tool = std::string(m.tool);
    r.arguments_json = m.arguments;
    r.record = record_;
    r.bytes = static_cast<int64_t>(line.size());
    if (!oversize) r.traceparent = request_traceparent(line);
    // Longer than --max-message: recorded from its first `bytes` (the id is null when it comes
    // later in the line); activity.oversize, posted at its end, gives its size.
    r.oversize = oversize;
    r.id_in_prefix = oversize && m.id.type != rpc::IdType::none;
    journal::Event e = journal::activity_request(r);
    if (!journal_) {
        warn_once(open_error_);
        if (policy_ == OnJournalFailure::Deny)
            return Error::msg("journal unavailable: " + open_error_);
        count_unjournaled(e);
        return int64_t{0};
    }
    // One write() to the intent file (`e` moved into the queue); the synchronous append when
    // that cannot be done (`e` left to us then).
    if (auto ticket = no_intents_ ? Result<int64_t>(Error::msg("intents off"))
                                  : journal_->append_intent(std::move(e))) {
        if (oversize) oversize_seq_ = *ticket;
        remember_call(*ticket, call);
        return *ticket;
    }
    auto a = journal_->append(e);
    if (!a) {
        warn_once(a.error().message);
        if (policy_ == OnJournalFailure::Warn) {
            journal_->count_lost(std::span(&e, 1), a.error());
            return int64_t{0};
        }
        return Error::msg("cannot record it in the journal: " + a.error().message);
    }
    if (oversize) oversize_seq_ = a->seq;
    remember_call(a->seq, call);
    return a->seq;
}

// ---- One call, several rounds ------------------------------------------------------------
//
// A 2026-07-28 server that needs the client's input first answers `input_required`; the
// client then sends the same request again, with params.inputResponses, under a new id. The
// journal keeps both rounds as requests, and links the retry to the round it answers
// (`retry_of_id`): the same method, tool and arguments (the call), answered input_required
// last.
// Both maps stay small: a stateless request's call is kept until it is answered, and only an
// input_required answer is kept past that, until its retry.

// In memory only, for one session: a plain hash of the arguments is enough to tell calls
// apart, and costs a stateless request less than the digest its record already carries.
std::string JournalSink::logical_call(const rpc::Message& m) {
    return fmt::format("{}\n{}\n{:x}", m.method, m.tool,
                       std::hash<std::string_view>{}(m.arguments));
}

void JournalSink::remember_call(int64_t record, const std::string& call) {
    constexpr size_t kMostCalls = 1024;  // answers that never come (abandoned) leave these
    if (call.empty() || record == 0) return;
    if (calls_.size() >= kMostCalls) calls_.clear();
    calls_[record] = call;
}

// Called once the answer is wholly written to the client (relay.hpp, "Answered means
// delivered"): the duration is request forwarded → answer delivered.
void JournalSink::on_response(const Answer& a, const Outstanding* req) {
    if (!req) return;
    if (!journal()) {
        // Its request was counted: so is its answer.
        count_unjournaled(journal::Event{"activity.response", session_, 0,
                                         journal::Json{{"id", typed_id(req->type, req->raw)}}});
        return;
    }
    if (calls_to_clients_) return;
    journal::Response r;
    r.session = session_;
    r.request_seq = req->record;
    r.id = typed_id(req->type, req->raw);
    r.outcome = a.outcome == rpc::Outcome::rpc_error    ? journal::Outcome::jsonrpc_error
                : a.outcome == rpc::Outcome::tool_error ? journal::Outcome::tool_error
                                                        : journal::Outcome::ok;
    if (a.outcome == rpc::Outcome::input_required) r.outcome = journal::Outcome::input_required;
    if (a.outcome == rpc::Outcome::rpc_error) r.error_code = a.error_code;
    if (auto it = calls_.find(req->record); it != calls_.end()) {
        constexpr size_t kMostAwaiting = 1024;
        if (a.outcome == rpc::Outcome::input_required && awaiting_.size() < kMostAwaiting)
            awaiting_[it->second] = r.id;
        calls_.erase(it);
    }
    r.bytes = static_cast<int64_t>(a.bytes);
    r.duration_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - req->sent)
                        .count();
    post_paced(journal::activity_response(r));
}

// A post is not free: the event waits in the journal's queue, in memory, until the writer
// thread commits it, and the queue takes up to 100,000 events (Journal::Options::queue_limit)
// before it drops and counts them. What the relay posts comes as fast as the server writes
// (an oversize line each, an answer each) and can outrun the commits: a server flooding
// its stdout with lines past --max-message queued 90 MB of them. So every kPostsPerWait
// posts the relay waits until the writer has caught up (Journal::flush), and reads nothing
// meanwhile: the server's stdout pipe fills and holds it back, as a client that reads
// slowly does. Nothing is dropped for it, and the queue holds at most kPostsPerWait of
// the relay's events.
void JournalSink::post_paced(journal::Event e) {
    static const bool paced = !Faults::from_env().journal_unpaced;  // the control's switch
    journal_->post(std::move(e));
    if (!paced || ++posts_since_wait_ < kPostsPerWait) return;
    posts_since_wait_ = 0;
    if (auto s = journal_->flush(); !s) warn_once(s.error().message);
}

void JournalSink::on_client_lost(ClientLoss cause, std::span<const Outstanding> outstanding) {
    yield_start_up();  // the session ends: its teardown comes next
    // A stream open at the end (subscriptions/listen) ends with the session: not a call the
    // client left unanswered.
    auto stream = [](const Outstanding& o) { return o.method == "subscriptions/listen"; };
    if (calls_to_clients_) outstanding = {};  // on the records of the clients that made them
    std::vector<journal::Json> ids;
    for (auto& o : outstanding)
        if (!stream(o)) ids.push_back(typed_id(o.type, o.raw));
    std::string c(to_string(cause));
    std::vector<journal::Event> evidence{journal::session_client_lost(session_, c, ids)};
    for (auto& o : outstanding)
        evidence.push_back(stream(o) ? journal::activity_stream_end(
                                           session_, o.record, typed_id(o.type, o.raw), c, "client")
                                     : journal::activity_abandoned(session_, o.record,
                                                                   typed_id(o.type, o.raw), c));
    record_evidence(evidence);
}

// The teardown that follows signals at once (docs/ARCHITECTURE.md, "Teardown"): what it must
// find on record is on record the way a forwarded request is, by one write() to the intent
// file, and committed by the writer thread while the keeper signals. Where intents cannot be
// written (JournalSync::Always promises an fsync; a full disk), the synchronous append.
void JournalSink::record_evidence(std::span<const journal::Event> events) {
    if (events.empty()) return;
    // --journal-sync always promises a commit made durable, not a write(): it waits.
    if (starting() && sync_ != JournalSync::Always) return record_early_evidence(events);
    ready();
    if (!journal_) {
        for (const auto& e : events)
            count_unjournaled(e);
        return;
    }
    if (!no_intents_ && journal_->append_intents(events)) return;
    if (auto a = journal_->append_all(events); !a) {
        warn_once(a.error().message);
        journal_->count_lost(events, a.error());
    }
}

void JournalSink::recover_keepers_records() {
    if (!journal()) return;
    (void)journal_->flush();  // ours first: only the keeper's lines are recovered
    auto r = journal::recover_keepers_intents(*journal_, session_);
    if (!r) {
        warn_once(r.error().message);
        return;
    }
    for (const auto& p : r->problems)
        warn_once(p);
}

// The intent file holds what could not be committed when it was due: the early evidence
// whose commit failed in ready(), an intent whose batch failed (the append lock held past
// the teardown's 250 ms wait by another writer; a full disk then freed). Left there, it
// would be recovered at our close or by the next writer: after session.end, which
// says that nothing of the session follows it. So it is recovered first, in file order:
// before the keeper's records are queued (they follow the client's loss), or right before
// session.end when those did not come. The file goes with it: nothing writes to it after
// the keeper's report. When every commit succeeded, the check is two comparisons and
// nothing is read on the exit path.
void JournalSink::recover_uncommitted() {
    journal::Journal* j = journal();
    if (!j || recovered_ || (!early_pending_ && !j->intents_pending())) return;
    if (Faults::from_env().end_before_recovery) return;
    // An intent still queued (the evidence of a teardown we do ourselves) is not a failed
    // one: the queue is committed first, and what is still pending after it failed.
    if (auto st = j->flush(); !st) warn_once(st.error().message);
    if (!early_pending_ && !j->intents_pending()) return;
    auto r = journal::recover_session_intents(*j, session_);
    if (!r) {
        warn_once(r.error().message);
        return;
    }
    early_pending_ = false;
    recovered_ = true;
    for (const auto& p : r->problems)
        warn_once(p);
}

void JournalSink::queue_keepers_records(std::span<const std::string> lines) {
    if (lines.empty()) return;
    journal::Journal* j = journal();
    if (!j) return;
    recover_uncommitted();  // the client's loss before the teardown it caused
    for (const std::string& line : lines) {
        if (auto st = j->post_intent_line(line, session_); !st)
            warn_once(fmt::format("keeper report pipe: {}: not recorded", st.error().message));
    }
}

void JournalSink::on_oversize(Direction d, size_t bytes) {
    if (!journal()) return;
    journal::Event e;
    e.kind = "activity.oversize";
    e.session = session_;
    e.data = journal::Json{
        {"direction", d == Direction::client_to_server ? "client_to_server" : "server_to_client"},
        {"bytes", static_cast<int64_t>(bytes)}};
    if (d == Direction::client_to_server && oversize_seq_ != 0)
        e.data["request_seq"] = oversize_seq_;
    oversize_seq_ = 0;
    post_paced(std::move(e));
}

void JournalSink::append(const journal::Event& e, std::optional<journal::CanonicalMember> member) {
    if (!journal()) return count_unjournaled(e);
    if (auto a = member ? journal_->append(e, *member) : journal_->append(e); !a) {
        warn_once(a.error().message);
        journal_->count_lost(std::span(&e, 1), a.error());
    }
}

bool JournalSink::flush(std::optional<std::chrono::milliseconds> bound) {
    if (!journal()) return true;
    auto s = journal_->flush_within(bound);
    if (!s) warn_once(s.error().message);
    return s.ok();
}

void JournalSink::close() {
    ready();
    if (journal_) (void)journal_->close();
    report_losses();
    journal_.reset();
}

void JournalSink::close_at_exit() {
    ready();
    if (journal_) (void)journal_->close_at_exit();
    report_losses();
    // Its thread and connection end with the process, which exits next: not destroyed here
    // (that would join and close them).
    (void)journal_.release();
}

void JournalSink::tearing_down(bool leave_end_sync) {
    short_lock_wait_ = true;  // for a journal still opening, applied by ready()
    end_sync_left_ = leave_end_sync;
    if (journal_) journal_->set_lock_wait(kTeardownLockWait);
    if (journal_ && leave_end_sync) journal_->leave_end_sync_to_next_writer();
    yield_start_up();
}

// A start-up still under way yields the cores to the teardown (sys/background_thread.hpp):
// what it does is needed only once the tree is gone.
void JournalSink::yield_start_up() {
    if (starting() && !Faults::from_env().journal_opening_not_yielded) opening_->yield();
}

// ---- Teardown observer ------------------------------------------------------------------

Result<std::unique_ptr<TeardownObserver>> make_teardown_journal(
    const std::string& session, const std::string& path,
    const journal::SessionStart* start_if_missing, JournalSync sync) {
    auto j = open_journal(path, sync, kTeardownLockWait);
    if (!j) return j.error();
    // Best effort: a journal that cannot say whether the start is there, or take it, still
    // gets the teardown's rows (their own appends report what fails).
    if (start_if_missing) {
        auto started = journal::has_session_start((*j)->paths().db, session);
        if (started && !*started) (void)(*j)->append(journal::session_start(*start_if_missing));
    }
    return std::unique_ptr<TeardownObserver>(std::make_unique<journal::TeardownRecorder>(
        std::move(*j), session, journal::TeardownRecorder::Reasons{}));
}

}  // namespace warden::shim
