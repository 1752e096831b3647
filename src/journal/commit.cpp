// One transaction of the chain: the records a commit was given, appended under the append lock.
//
// Everything a transaction needs to know about the log it reads inside `BEGIN IMMEDIATE`,
// never from memory (journal.cpp, "Two writers that both think they are at the head"): the
// head's seq and chain, and the last checkpoint's seq and time. Then, record by record:
//
// * A record that names its request by a ticket (an intent written on the relay's path,
//   journal.cpp, "Intents") gets the request's seq now: from this transaction, when the
//   request is in it, or from the intents committed before. A record whose request never
//   committed has no seq to give, and one that names request_seq 0 answers nothing: both are
//   left out and counted as lost, with their ids, once the transaction commits; a gap is never
//   written as a record that names the wrong request.
// * The body is the prepared text with the seq spliced in, hashed exactly as stored: leaf =
//   SHA-256(0x00 ‖ body), chain = SHA-256(0x10 ‖ prev ‖ leaf). The row and its projection
//   (sessions, activity: caches rebuilt from the records by `audit verify`) go in together.
// * A checkpoint signs the chain every `checkpoint_every` records, after `checkpoint_interval`
//   and at a session's end, inside the same transaction. On the relay's hot path (a request
//   waiting to be forwarded) a checkpoint due by cadence or interval is owed instead: the
//   writer thread signs right after, so no request waits for a signature and three fsyncs.
//
// The head is updated last and COMMIT makes all of it visible at once. Only then does what
// lives outside the database move: tickets settled, losses counted, the WAL synced (or left to
// the next writer), and the checkpoint's file written, still under the lock so that files
// appear in seq order, and never naming a seq the database did not commit.
#include <sqlite3.h>

#include <cstring>

#include <fmt/format.h>

#include "journal/checkpoint.hpp"
#include "journal/journal_impl.hpp"

namespace warden::journal {

Result<Prepared> Journal::Impl::prepare(const Event& e) const {
    return prepare_record(e, origin);
}

Status Journal::Impl::prepare_into(Prepared& p) const {
    return prepare_record_into(p, origin);
}

Status Journal::Impl::prepare_statements() {
    struct S {
        Stmt* s;
        const char* sql;
    } all[] = {
        // Prepared once, as every statement of a commit: sqlite3_exec() parses its text again
        // each time, twice a commit.
        {&begin_immediate, "BEGIN IMMEDIATE"},
        {&commit_transaction, "COMMIT"},
        {&head_get, "SELECT seq, chain FROM head WHERE id = 1"},
        {&head_set, "UPDATE head SET seq = ?1, chain = ?2 WHERE id = 1"},
        {&insert_record,
         "INSERT INTO records(seq, ts, kind, session, origin, body, leaf, chain) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"},
        {&last_checkpoint, "SELECT seq, ts FROM checkpoints ORDER BY seq DESC LIMIT 1"},
        {&insert_checkpoint,
         "INSERT INTO checkpoints(seq, origin, chain, public_key, signature, ts) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6)"},
        {&session_insert,
         "INSERT OR REPLACE INTO sessions(session, start_seq, started_ns, server, writer_pid, "
         "writer_starttime, writer_boot_id, state, state_seq) "
         "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, 'running', ?2)"},
        {&session_state, "UPDATE sessions SET state = ?2, state_seq = ?3 WHERE session = ?1"},
        {&session_end,
         "UPDATE sessions SET state = 'ended', state_seq = ?2, ended_ns = ?3, end_reason = ?4, "
         "exit_status = ?5 WHERE session = ?1"},
        {&activity_insert,
         "INSERT OR REPLACE INTO activity(request_seq, session, request_id, method, tool, "
         "started_ns, outcome) VALUES(?1, ?2, ?3, ?4, ?5, ?6, 'in_flight')"},
        {&activity_resolve,
         "UPDATE activity SET outcome = ?2, resolved_seq = ?3, ended_ns = ?4, duration_ns = ?5, "
         "bytes = ?6 WHERE request_seq = ?1 AND outcome = 'in_flight'"},
    };
    for (auto& s : all) {
        auto st = db.prepare(s.sql);
        if (!st) return st.error();
        *s.s = std::move(*st);
    }
    return {};
}

namespace {

// A call record's columns read from its data: a record that comes as a Json (read back from
// an intent file) rather than from its builder, as that builder would have given them.
CallColumns call_columns_of(const Json& d) {
    auto text = [&](const char* k) -> std::string_view {
        auto it = d.find(k);
        return it != d.end() && it->is_string()
                   ? std::string_view(it->get_ref<const std::string&>())
                   : std::string_view();
    };
    auto num = [&](const char* k) -> int64_t {
        auto it = d.find(k);
        return it != d.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
    };
    CallColumns c;
    auto id = d.find("id");
    if (!append_canonical(c.id, id != d.end() ? *id : Json())) c.id = "null";
    c.method = text("method");
    c.tool = text("tool");
    c.outcome = text("outcome");
    c.request_seq = num("request_seq");
    c.duration_ns = num("duration_ns");
    c.bytes = num("bytes");
    return c;
}

}  // namespace

// Each text is bound borrowed: `e`, its data and its columns outlive the step() below.
Status Journal::Impl::project(const Event& e, int64_t seq, int64_t ts) {
    const Json& d = e.data;
    auto str = [&](const char* k) -> std::string_view {
        auto it = d.find(k);
        // "" rather than a view of nothing: SQLite binds a null pointer as NULL.
        return it != d.end() && it->is_string()
                   ? std::string_view(it->get_ref<const std::string&>())
                   : std::string_view("");
    };
    auto num = [&](const Json& j, const char* k) -> int64_t {
        auto it = j.find(k);
        return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : 0;
    };
    // A call's record: its builder's columns, or read from its data.
    std::optional<CallColumns> read;
    auto call = [&]() -> const CallColumns& {
        return e.call ? *e.call : read.emplace(call_columns_of(d));
    };
    Stmt* s = nullptr;
    const std::string& k = e.kind;
    if (k == "session.start") {
        static const Json kNoWriter = Json::object();
        auto wit = d.find("writer");
        const Json& w = wit != d.end() && wit->is_object() ? *wit : kNoWriter;
        auto wb = w.find("boot_id");
        std::string boot =
            wb != w.end() && wb->is_string() ? wb->get<std::string>() : std::string();
        s = &session_insert;
        s->bind(1, e.session).bind(2, seq).bind(3, ts).bind(4, str("server_name"));
        s->bind(5, num(w, "pid")).bind(6, num(w, "starttime"));
        s->bind(7, boot);
    } else if (k == "session.client_lost" || k == "session.orphaned") {
        s = &session_state;
        s->bind(1, e.session)
            .bind(2, k == "session.orphaned" ? "orphaned" : "client_lost")
            .bind(3, seq);
    } else if (k == "session.end") {
        s = &session_end;
        s->bind(1, e.session).bind(2, seq).bind(3, ts).bind(4, str("reason"));
        if (auto it = d.find("exit_status"); it != d.end() && it->is_number_integer())
            s->bind(5, it->get<int64_t>());
        else
            s->bind_null(5);
    } else if (k == "activity.request") {
        const CallColumns& c = call();
        s = &activity_insert;
        s->bind(1, seq).bind_borrowed(2, e.session).bind_borrowed(3, c.id);
        s->bind_borrowed(4, c.method).bind_borrowed(5, c.tool).bind(6, ts);
    } else if (k == "activity.response") {
        const CallColumns& c = call();
        s = &activity_resolve;
        s->bind(1, c.request_seq).bind_borrowed(2, c.outcome.empty() ? "" : c.outcome);
        s->bind(3, seq).bind(4, ts).bind(5, c.duration_ns).bind(6, c.bytes);
    } else if (k == "activity.abandoned" || k == "activity.unresolved" ||
               k == "activity.stream_end") {
        s = &activity_resolve;
        // A stream (subscriptions/listen) is settled by its end: no longer in flight.
        std::string_view outcome = k == "activity.abandoned"    ? "abandoned"
                                   : k == "activity.stream_end" ? "stream_end"
                                                                : "unresolved";
        s->bind(1, num(d, "request_seq")).bind_borrowed(2, outcome).bind(3, seq).bind(4, ts);
        s->bind_null(5).bind_null(6);
    } else {
        return {};
    }
    int rc = s->step();
    s->reset();
    if (rc != SQLITE_DONE) return db.error(fmt::format("project {} at seq {}", k, seq), rc);
    return {};
}

namespace {

// True for the records that settle a request: once one of them is committed, the request is
// no longer in flight and its ticket may be let go.
bool settles_request(std::string_view kind) {
    return kind == "activity.response" || kind == "activity.abandoned" ||
           kind == "activity.stream_end";
}

// The state of one commit's transaction (the essay above), from BEGIN IMMEDIATE to COMMIT:
// the head as read inside it and moved on record by record, and what was written that the
// steps after COMMIT act on.
class ChainTransaction {
  public:
    explicit ChainTransaction(Journal::Impl& m) : m_(m) {}
    ChainTransaction(const ChainTransaction&) = delete;
    ChainTransaction& operator=(const ChainTransaction&) = delete;
    ~ChainTransaction() {
        if (open_) (void)m_.db.exec("ROLLBACK");
    }

    // BEGIN IMMEDIATE, then the head and the last checkpoint, read inside the transaction.
    Status begin() {
        if (auto st = step_once(m_.begin_immediate, "BEGIN IMMEDIATE"); !st) return st;
        open_ = true;
        if (auto st = read_head(); !st) return st;
        read_last_checkpoint();
        return {};
    }

    // What `produce` returns, prepared and added to `prepared`; its number.
    Result<size_t> add_produced(const Journal::Producer& produce, std::vector<Prepared>& prepared) {
        auto more = produce(m_.db);
        if (!more) return more.error();
        for (const auto& e : *more) {
            auto p = m_.prepare(e);
            if (!p) return p.error();
            prepared.push_back(std::move(*p));
        }
        return more->size();
    }

    // The records in order, each followed by a checkpoint when the cadence is reached (not on
    // the hot path: owed to the writer thread then).
    Status write_records(std::vector<Prepared>& prepared, bool hot) {
        for (auto& p : prepared) {
            if (auto st = write_record(p); !st) return st;
            last_event_ = Appended{seq_, prev_};
            if (p.event.kind == "session.end") session_ended_ = true;
            if (!hot && cadence_reached()) {
                if (auto st = write_checkpoint("cadence"); !st) return st;
            }
        }
        return {};
    }

    // A checkpoint after the last record when one is asked for, a session ended, or (not on
    // the hot path) the interval has passed; none when nothing is left to sign.
    Status sign_if_due(std::string_view force_checkpoint, bool hot) {
        if (seq_ <= cp_seq_) return {};
        std::string_view reason;
        if (!force_checkpoint.empty())
            reason = force_checkpoint;
        else if (session_ended_)
            reason = "session_end";
        else if (!hot && interval_passed())
            reason = "interval";
        if (reason.empty()) return {};
        return write_checkpoint(reason);
    }

    // A signed checkpoint costs a signature, a WAL fsync and a file written with two fsyncs:
    // milliseconds that a request waiting to be forwarded must not pay. When one is due on
    // the hot path, the writer thread writes it right after this commit.
    bool owes_checkpoint(std::string_view force_checkpoint, bool hot) const {
        return hot && !session_ended_ && force_checkpoint.empty() &&
               (cadence_reached() || interval_passed());
    }

    // The head moved to the last record, and COMMIT.
    Status commit() {
        m_.head_set.bind(1, seq_).bind_blob(2, prev_.data(), prev_.size());
        int rc = m_.head_set.step();
        m_.head_set.reset();
        if (rc != SQLITE_DONE) return m_.db.error("update head", rc);
        if (auto st = step_once(m_.commit_transaction, "COMMIT"); !st) return st;
        open_ = false;
        return {};
    }

    // After COMMIT: the tickets of this transaction's intents known by their seqs until the
    // records that settle them are committed, those settled now let go.
    void settle_tickets() {
        for (auto& c : tickets_)
            if (!c.settled) m_.ticket_seq.emplace(c.ticket, c.seq);
        for (int64_t t : settled_earlier_)
            m_.ticket_seq.erase(t);
        m_.intents_committed += tickets_.size();
    }

    // After COMMIT: the records left out because they name no request on record, counted as
    // lost with their ids.
    void count_unnamed() {
        if (unnamed_.empty()) return;
        std::lock_guard lk(m_.q_mu);
        for (const auto& e : unnamed_)
            m_.count_lost_locked(e, fmt::format("journal {}: {} names a request that is not on "
                                                "record: it cannot name it",
                                                m_.paths.db, e.kind));
    }

    int64_t seq() const { return seq_; }
    bool session_ended() const { return session_ended_; }
    const std::optional<CheckpointFile>& signed_checkpoint() const { return last_cp_file_; }
    // The caller's last record, not a checkpoint written after it; a bare checkpoint's own.
    Appended appended() const { return last_event_.seq == 0 ? Appended{seq_, prev_} : last_event_; }

  private:
    // A request's intent committed in this transaction: its ticket's seq, known to ticket_seq
    // after COMMIT.
    struct Committed {
        int64_t ticket, seq;
        bool settled = false;
    };

    // A statement that returns no rows, run once.
    Status step_once(Stmt& s, std::string_view what) {
        int rc = s.step();
        s.reset();
        return rc == SQLITE_DONE ? Status{} : Status(m_.db.error(what, rc));
    }

    Status read_head() {
        int rc = m_.head_get.step();
        if (rc != SQLITE_ROW) {
            m_.head_get.reset();
            return m_.db.error("read head", rc);
        }
        seq_ = m_.head_get.int64(0);
        auto chain_blob = m_.head_get.blob(1);
        if (chain_blob.size() == prev_.size())
            std::memcpy(prev_.data(), chain_blob.data(), prev_.size());
        m_.head_get.reset();
        return {};
    }

    void read_last_checkpoint() {
        if (m_.last_checkpoint.step() == SQLITE_ROW) {
            cp_seq_ = m_.last_checkpoint.int64(0);
            cp_ts_ = m_.last_checkpoint.int64(1);
        }
        m_.last_checkpoint.reset();
        if (cp_ts_ == 0) cp_ts_ = now_ns();  // no checkpoint yet: the interval counts from now
    }

    bool cadence_reached() const {
        return seq_ - cp_seq_ >= static_cast<int64_t>(m_.options.checkpoint_every);
    }
    bool interval_passed() const {
        return now_ns() - cp_ts_ >= m_.options.checkpoint_interval.count();
    }

    // The seq of the request `ticket` names: from this transaction, or from the intents
    // committed before; 0 when it never committed. Several records may name one request (an
    // oversize request's activity.oversize, then its answer), in one batch or in several; only
    // the record that settles the request lets its ticket go, so ticket_seq holds the requests
    // still in flight and no more.
    int64_t seq_of_ticket(int64_t ticket, bool settles) {
        for (auto& c : tickets_)
            if (c.ticket == ticket) {
                c.settled = c.settled || settles;
                return c.seq;
            }
        auto it = m_.ticket_seq.find(ticket);
        if (it == m_.ticket_seq.end()) return 0;  // never committed: as a request not recorded
        int64_t found = it->second;
        if (settles) settled_earlier_.push_back(ticket);  // let go once this commits
        return found;
    }

    // "request_seq" given as a ticket in `given` (this transaction's own) replaced by the seq
    // of that intent, known now: in place in the prepared text where it was found there, else
    // in `resolved`, prepared again. False: the request is not on record, and `given` is left
    // out (unnamed_).
    Result<bool> resolve_request(Prepared& given, std::optional<Prepared>& resolved) {
        // An answer to a request that is not on record (its record was lost, and counted):
        // stored as request_seq 0 it would answer nothing, so it is counted with it instead.
        const std::string& k = given.event.kind;
        const auto named = named_request(given.event);
        if ((k == "activity.response" || k == "activity.abandoned") && named == 0) {
            unnamed_.push_back(given.event);
            return false;
        }
        if (!named || *named >= 0) return true;
        const int64_t request_seq = seq_of_ticket(*named, settles_request(k));
        if (request_seq == 0) {
            unnamed_.push_back(given.event);
            return false;
        }
        set_named_request(given.event, request_seq);  // for project()
        if (given.ticket_len) {
            given.before_seq.replace(given.ticket_at, given.ticket_len,
                                     std::to_string(request_seq));
            given.ticket_len = 0;
        } else {
            // Never a builder's text (prepare_record_into refused one whose ticket it did not
            // find): `data` is all of the record here.
            Event e = given.event;
            e.ts_ns = given.ts;
            auto again = m_.prepare(e);
            if (!again) return again.error();
            resolved = std::move(*again);
        }
        return true;
    }

    // One record: its request resolved, its seq taken, its body hashed onto the chain, the
    // row and its projection written.
    Status write_record(Prepared& given) {
        std::optional<Prepared> resolved;
        auto named = resolve_request(given, resolved);
        if (!named) return named.error();
        if (!*named) return {};
        const Prepared& p = resolved ? *resolved : given;
        ++seq_;
        if (given.ticket) tickets_.push_back({given.ticket, seq_});
        body_.clear();
        body_.reserve(p.before_seq.size() + p.after_seq.size() + 20);
        body_ += p.before_seq;
        body_ += std::to_string(seq_);
        body_ += p.after_seq;
        Hash leaf = leaf_hash(body_);
        Hash chain = chain_hash(prev_, leaf);
        auto& s = m_.insert_record;
        // Borrowed: all of it outlives the step() below.
        s.bind(1, seq_).bind(2, p.ts).bind_borrowed(3, p.event.kind);
        s.bind_borrowed(4, p.event.session).bind_borrowed(5, m_.origin);
        s.bind_blob_borrowed(6, body_.data(), body_.size());
        s.bind_blob_borrowed(7, leaf.data(), leaf.size());
        s.bind_blob_borrowed(8, chain.data(), chain.size());
        int r = s.step();
        s.reset();
        if (r != SQLITE_DONE)
            return m_.db.error(fmt::format("insert {} at seq {}", p.event.kind, seq_), r);
        if (auto st = m_.project(p.event, seq_, p.ts); !st) return st;
        prev_ = chain;
        return {};
    }

    // A checkpoint record, then its signature over (origin, seq, chain) in the checkpoints
    // table; its file is written after COMMIT (signed_checkpoint).
    Status write_checkpoint(std::string_view reason) {
        const PublicKey& pub = m_.pub;
        Event cp{"checkpoint", "", 0,
                 Json{{"previous_seq", cp_seq_},
                      {"reason", std::string(reason)},
                      {"public_key", to_hex(pub.data(), pub.size())}}};
        auto p = m_.prepare(cp);
        if (!p) return p.error();
        if (auto st = write_record(*p); !st) return st;
        CheckpointFile f{m_.origin, seq_, prev_, pub, {}, p->ts};
        auto sig = m_.key->sign(checkpoint_message(f.origin, f.seq, f.chain));
        if (!sig) return sig.error();
        f.signature = *sig;
        auto& s = m_.insert_checkpoint;
        s.bind(1, f.seq).bind(2, f.origin).bind_blob(3, f.chain.data(), f.chain.size());
        s.bind(4, to_hex(pub.data(), pub.size()))
            .bind_blob(5, f.signature.data(), f.signature.size());
        s.bind(6, f.ts);
        int r = s.step();
        s.reset();
        if (r != SQLITE_DONE) return m_.db.error(fmt::format("insert checkpoint {}", seq_), r);
        cp_seq_ = seq_;
        cp_ts_ = f.ts;
        last_cp_file_ = f;
        return {};
    }

    Journal::Impl& m_;
    bool open_ = false;  // BEGIN'd and not yet committed: rolled back when left
    int64_t seq_ = 0;    // the head: the last record written
    Hash prev_{};        // and its chain value
    int64_t cp_seq_ = 0, cp_ts_ = 0;
    std::optional<CheckpointFile> last_cp_file_;
    bool session_ended_ = false;
    Appended last_event_;
    std::vector<Committed> tickets_;
    std::vector<int64_t> settled_earlier_;
    // Records that name a request whose intent never committed (its batch failed; it waits
    // in its file for recovery at close): no seq to give them. Written as request_seq 0 they
    // would answer nothing, and the recovered request would stay in flight on record; so
    // they are counted as lost, with their ids, once this transaction commits.
    std::vector<Event> unnamed_;
    std::string body_;  // each record's, in one buffer: no allocation per record
};

}  // namespace

Result<Appended> Journal::Impl::commit(std::vector<Prepared>& prepared,
                                       std::string_view force_checkpoint, const Producer* produce,
                                       bool hot) {
    AppendLock guard(&turns, &timing);
    if (auto st = guard.acquire(lock_fd.get(), paths.lock, lock_wait_ms); !st) return st.error();
    ChainTransaction tx(*this);
    if (auto st = tx.begin(); !st) return st.error();
    if (produce) {
        auto n = tx.add_produced(*produce, prepared);
        if (!n) return n.error();
        if (*n == 0) force_checkpoint = {};  // nothing produced: nothing to sign
    }
    if (auto st = tx.write_records(prepared, hot); !st) return st.error();
    if (auto st = tx.sign_if_due(force_checkpoint, hot); !st) return st.error();
    const bool owe_checkpoint = tx.owes_checkpoint(force_checkpoint, hot);
    if (auto st = tx.commit(); !st) return st.error();
    tx.settle_tickets();
    tx.count_unnamed();
    const bool left_to_next = sync_committed(tx.session_ended(), tx.signed_checkpoint());
    // The file only after COMMIT: a file naming a seq the database never committed would
    // look like truncation. Still under the flock, so files appear in seq order.
    if (tx.signed_checkpoint() && !left_to_next) write_checkpoint_file_of(*tx.signed_checkpoint());
    dirty_since_checkpoint = !tx.signed_checkpoint() || tx.signed_checkpoint()->seq != tx.seq();
    if (owe_checkpoint) owe_checkpoint_to_writer();
    return tx.appended();
}

// Under JournalSync::Periodic, a checkpoint and a session end reach the disk now: a signed
// checkpoint file must never name a seq an OS crash could still take from the log. Left to
// the next writer (a session's end, and any checkpoint signed on the way to it), both wait
// for it, in that order; the WAL's writeback is started now, not waited for
// (journal.cpp, "Durability"). True: left to the next writer.
bool Journal::Impl::sync_committed(bool session_ended,
                                   const std::optional<CheckpointFile>& signed_checkpoint) {
    const bool left_to_next = leave_end_sync && (session_ended || signed_checkpoint);
    if (left_to_next) {
        end_left = true;
        unsynced = false;  // the writer thread's periodic fsync would only hold up the exit
        start_wal_writeback(paths);
    } else if (options.sync == JournalSync::Periodic) {
        if (signed_checkpoint || session_ended) {
            sync_wal();
        } else if (!unsynced.exchange(true)) {
            std::lock_guard lk(q_mu);
            start_worker_locked();  // it syncs within sync_interval
        }
    }
    return left_to_next;
}

void Journal::Impl::write_checkpoint_file_of(const CheckpointFile& signed_checkpoint) {
    if (auto st = write_checkpoint_file(paths.checkpoints, signed_checkpoint); !st) {
        // The signed row is in the database; a missing file weakens truncation
        // detection only. Report through the async path.
        std::lock_guard lk(q_mu);
        if (!async_error) async_error = st.error();
    } else {
        prune_checkpoint_files(paths.checkpoints, options.checkpoint_files_kept);
    }
}

void Journal::Impl::owe_checkpoint_to_writer() {
    if (checkpoint_owed.exchange(true)) return;
    std::lock_guard lk(q_mu);
    start_worker_locked();
    q_cv.notify_one();
}

}  // namespace warden::journal
