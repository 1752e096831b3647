// The records in seq order (Verifier::stream_records, verifier.hpp): each checked as it
// comes, and what it adds to the projections, which are then compared with the tables the
// writer keeps (check_projections).
#include <sqlite3.h>

#include <fmt/format.h>

#include "journal/canonical_json.hpp"
#include "journal/prune.hpp"
#include "journal/verifier.hpp"

namespace warden::journal::verification {

std::string opt_int(bool present, int64_t v) {
    return present ? std::to_string(v) : "NULL";
}

std::string activity_request_row(int64_t seq, std::string_view session, std::string_view id,
                                 std::string_view method, std::string_view tool, int64_t ts) {
    return fmt::format("R|{}|{}|{}|{}|{}|{}", seq, session, id, method, tool, ts);
}
std::string activity_resolve_row(int64_t request_seq, std::string_view outcome,
                                 int64_t resolved_seq, int64_t ended, const std::string& duration,
                                 const std::string& bytes) {
    return fmt::format("S|{}|{}|{}|{}|{}|{}", request_seq, outcome, resolved_seq, ended, duration,
                       bytes);
}

namespace {

std::optional<Hash> hash_field(simdjson::dom::object data, const char* key) {
    std::string_view hex;
    Hash h{};
    if (data[key].get(hex) != simdjson::SUCCESS || !from_hex(hex, h.data(), h.size()))
        return std::nullopt;
    return h;
}

}  // namespace

PruneClaim prune_claim(int64_t seq, simdjson::dom::object data) {
    PruneClaim c;
    c.seq = seq;
    if (data["anchor_seq"].get(c.anchor_seq) != simdjson::SUCCESS) c.anchor_seq = 0;
    c.prev_chain = hash_field(data, "prev_chain");
    c.anchor_chain = hash_field(data, "anchor_chain");
    return c;
}

void TableCheckpoints::advance() {
    next.reset();
    if (rows.step() != SQLITE_ROW) return;
    Anchor a{"table", {}};
    a.cp.seq = rows.int64(0);
    a.cp.origin = std::string(rows.text(1));
    auto chain = rows.blob(2);
    if (chain.size() == 32) std::memcpy(a.cp.chain.data(), chain.data(), 32);
    (void)from_hex(rows.text(3), a.cp.public_key.data(), a.cp.public_key.size());
    auto sig = rows.blob(4);
    if (sig.size() == 64) std::memcpy(a.cp.signature.data(), sig.data(), 64);
    a.cp.ts = rows.int64(5);
    next = std::move(a);
}

// One pass over the records in seq order, each checked as it comes: its place in the
// sequence, its leaf and link, its body against the index columns, the checkpoints at its
// seq; then what it adds to the projections. The first failure ends the pass.
void Verifier::stream_records() {
    auto recs = db_.prepare(
        "SELECT seq, ts, kind, session, origin, body, leaf, chain FROM records ORDER BY seq");
    auto cps = db_.prepare(
        "SELECT seq, origin, chain, public_key, signature, ts FROM checkpoints ORDER BY seq");
    if (!recs || !cps) {
        io_error(!recs ? recs.error().message : cps.error().message);
        return;
    }
    TableCheckpoints table{*cps, std::nullopt};
    table.advance();
    // After a prune (prune.hpp) the log starts at a checkpoint record whose chain value its
    // signature vouches for; its link to the removed records cannot be checked.
    stream_.anchor = pruned_before(db_);
    r_.anchor_seq = stream_.anchor;
    stream_.expected = stream_.anchor > 0 ? stream_.anchor : 1;
    int rc;
    while ((rc = recs->step()) == SQLITE_ROW) {
        ++r_.records;
        RecordRow row;
        row.seq = recs->int64(0);
        if (!in_sequence(row) || !linked(*recs, row) || !body_matches(*recs, row) ||
            !anchored(table, row))
            return;
        project(row);
        stream_.prev = row.chain;
        last_row_ = row.seq;
        last_chain_ = row.chain;
        stream_.expected = row.seq + 1;
    }
    if (rc != SQLITE_DONE) {
        io_error(db_.error("read records", rc).message);
        return;
    }
    streamed_ = true;
}

// The row's seq is the one that follows: no gap, no disorder, nothing before the prune anchor.
bool Verifier::in_sequence(const RecordRow& row) {
    const int64_t seq = row.seq, expected = stream_.expected, anchor = stream_.anchor;
    if (seq == expected) return true;
    if (seq < expected && seq < anchor)
        fail(seq, fmt::format("seq {} precedes the prune anchor (seq {}): the anchor in the meta "
                              "table was altered",
                              seq, anchor));
    else if (seq > expected)
        fail(expected, fmt::format("sequence gap: seq {} is missing (the next row is seq {})",
                                   expected, seq));
    else
        fail(seq, fmt::format("sequence out of order at seq {}", seq));
    return false;
}

// The body hashes to the stored leaf, and the stored chain follows from the one before (the
// anchor's, which nothing before it vouches for, is taken as stored: anchored() checks it).
bool Verifier::linked(Stmt& recs, RecordRow& row) {
    const int64_t seq = row.seq;
    row.body = recs.blob(5);
    const Hash leaf = stream_.hasher.leaf(row.body);
    auto leaf_col = recs.blob(6);
    auto chain_col = recs.blob(7);
    if (leaf_col.size() != 32 || std::memcmp(leaf.data(), leaf_col.data(), 32) != 0) {
        fail(seq, fmt::format("leaf mismatch at seq {}: the body does not hash to the stored leaf",
                              seq));
        return false;
    }
    row.chain = stream_.hasher.chain(stream_.prev, leaf);
    if (seq == stream_.anchor && chain_col.size() == 32) {
        // Vouched for below by its checkpoint, and by the journal.pruned record's seam
        // (check_prune), or failed.
        std::memcpy(row.chain.data(), chain_col.data(), 32);
        anchor_leaf_ = leaf;
        anchor_chain_ = row.chain;
    }
    if (chain_col.size() != 32 || std::memcmp(row.chain.data(), chain_col.data(), 32) != 0) {
        fail(seq, fmt::format("link broken at seq {}: its chain hash does not follow from seq {}",
                              seq, seq - 1));
        return false;
    }
    return true;
}

// The body is an object of the record's shape, says what the index columns say, and is of
// this journal.
bool Verifier::body_matches(Stmt& recs, RecordRow& row) {
    const int64_t seq = row.seq;
    simdjson::dom::element doc;
    if (stream_.parser.parse(row.body.data(), row.body.size()).get(doc) != simdjson::SUCCESS ||
        !doc.is_object()) {
        fail(seq, fmt::format("body of seq {} is not a JSON object", seq));
        return false;
    }
    std::string_view origin;
    int64_t bseq = -1, v = -1;
    const bool shape =
        doc["kind"].get(row.kind) == simdjson::SUCCESS &&
        doc["session"].get(row.session) == simdjson::SUCCESS &&
        doc["origin"].get(origin) == simdjson::SUCCESS &&
        doc["seq"].get(bseq) == simdjson::SUCCESS && doc["ts"].get(row.ts) == simdjson::SUCCESS &&
        doc["v"].get(v) == simdjson::SUCCESS && doc["data"].get(row.data) == simdjson::SUCCESS;
    if (!shape) {
        fail(seq, fmt::format("body of seq {} lacks data/kind/origin/seq/session/ts/v", seq));
        return false;
    }
    const char* col = nullptr;
    if (bseq != seq)
        col = "seq";
    else if (row.ts != recs.int64(1))
        col = "ts";
    else if (row.kind != recs.text(2))
        col = "kind";
    else if (row.session != recs.text(3))
        col = "session";
    else if (origin != recs.text(4))
        col = "origin";
    if (col) {
        fail(seq, fmt::format("body of seq {} does not match its index column `{}`", seq, col));
        return false;
    }
    if (origin != r_.origin) {
        fail(seq, fmt::format("seq {} belongs to another journal (origin {})", seq, origin));
        return false;
    }
    if (v != 1) r_.warnings.push_back(fmt::format("seq {}: unknown body version {}", seq, v));
    return true;
}

// Every checkpoint at the row's seq (the table's, the files', the trusted ones) signs its
// chain; a prune anchor must be one of them.
bool Verifier::anchored(TableCheckpoints& table, const RecordRow& row) {
    const int64_t seq = row.seq;
    bool table_anchor = false;
    while (table.next && table.next->cp.seq < seq) {
        // A table checkpoint for a seq that has no row: impossible unless rows were removed;
        // the sequence check already failed then. Skipped defensively.
        table.advance();
    }
    if (table.next && table.next->cp.seq == seq) {
        table_anchor = true;
        if (!confirm(*table.next, seq, row.chain)) return false;
        table.advance();
    }
    auto [lo, hi] = outside_.equal_range(seq);
    const bool outside_anchor = lo != hi;
    for (auto it = lo; it != hi; ++it)
        if (!confirm(it->second, seq, row.chain)) return false;
    if (row.kind == "checkpoint" && !table_anchor && !outside_anchor)
        checkpoint_records_without_anchor_.push_back(seq);
    if (seq == stream_.anchor && anchored_ != seq) {
        fail(seq, fmt::format("prune anchor seq {} is not a signed checkpoint: the records "
                              "before it were removed and nothing vouches for its chain value",
                              seq));
        last_row_ = seq - 1;  // what follows is unchecked: the tail checks start here
        return false;
    }
    return true;
}

// A checkpoint that signs `chain` at `seq`, its key, origin and signature good.
bool Verifier::confirm(const Anchor& a, int64_t seq, const Hash& chain) {
    if (!check_anchor(a)) return false;
    if (a.cp.chain != chain) {
        fail(seq, fmt::format("checkpoint mismatch at seq {}: checkpoint ({}) signed chain {}, "
                              "the log has {}",
                              seq, a.where, to_hex(a.cp.chain).substr(0, 16),
                              to_hex(chain).substr(0, 16)));
        return false;
    }
    ++r_.checkpoints;
    any_anchor_ = true;
    anchored_ = seq;
    return true;
}

// What the row adds to the projections, rebuilt as the writer builds them (commit.cpp,
// Impl::project).
void Verifier::project(const RecordRow& row) {
    const std::string_view kind = row.kind;
    if (kind == "session.start")
        project_session_start(row);
    else if (kind == "session.client_lost" || kind == "session.orphaned" || kind == "session.end")
        project_session_state(row);
    else if (kind == "activity.request")
        project_request(row);
    else if (kind == "activity.response" || kind == "activity.abandoned" ||
             kind == "activity.unresolved" || kind == "activity.stream_end")
        project_resolution(row);
    else if (kind == "journal.degraded")
        project_degraded(row);
    else if (kind == "journal.pruned")
        newest_prune_ = prune_claim(row.seq, row.data);
}

std::string text_of(simdjson::dom::object data, const char* key) {
    std::string_view s;
    return data[key].get(s) == simdjson::SUCCESS ? std::string(s) : std::string();
}

int64_t int_of(simdjson::dom::element e, const char* key) {
    int64_t n = 0;
    return e[key].get(n) == simdjson::SUCCESS ? n : 0;
}

void Verifier::project_session_start(const RecordRow& row) {
    SessionRow s;
    s.start_seq = s.state_seq = row.seq;
    s.started_ns = row.ts;
    s.server = text_of(row.data, "server_name");
    simdjson::dom::element w;
    if (row.data["writer"].get(w) == simdjson::SUCCESS && w.is_object()) {
        s.writer_pid = int_of(w, "pid");
        s.writer_starttime = int_of(w, "starttime");
        std::string_view b;
        if (w["boot_id"].get(b) == simdjson::SUCCESS) s.boot_id = std::string(b);
    }
    s.state = "running";
    sessions_[std::string(row.session)] = std::move(s);
}

void Verifier::project_session_state(const RecordRow& row) {
    auto it = sessions_.find(std::string(row.session));
    if (it == sessions_.end()) return;
    SessionRow& s = it->second;
    s.state_seq = row.seq;
    if (row.kind != "session.end") {
        s.state = row.kind == "session.orphaned" ? "orphaned" : "client_lost";
        return;
    }
    s.state = "ended";
    s.ended = true;
    s.ended_ns = row.ts;
    s.end_reason = text_of(row.data, "reason");
    int64_t ex = 0;
    s.has_exit = row.data["exit_status"].get(ex) == simdjson::SUCCESS;
    s.exit_status = ex;
}

void Verifier::project_request(const RecordRow& row) {
    std::string& id_text = stream_.id_text;
    id_text.clear();
    simdjson::dom::element id;
    if (row.data["id"].get(id) == simdjson::SUCCESS)
        (void)canonical_of(id_text, id);
    else
        id_text = "null";
    activity_expected_.add(activity_request_row(row.seq, row.session, id_text,
                                                text_of(row.data, "method"),
                                                text_of(row.data, "tool"), row.ts));
    requests_.set(row.seq);
}

// An answer, an abandoned or an unresolved call resolves its request once, if that is on
// record.
void Verifier::project_resolution(const RecordRow& row) {
    int64_t rs = 0;
    if (row.data["request_seq"].get(rs) != simdjson::SUCCESS) rs = 0;
    if (rs <= 0 || !requests_.test(rs) || resolved_.test(rs)) return;
    resolved_.set(rs);
    const bool response = row.kind == "activity.response";
    // A stream (subscriptions/listen) is settled by its end: no longer in flight.
    const std::string outcome = response                            ? text_of(row.data, "outcome")
                                : row.kind == "activity.abandoned"  ? "abandoned"
                                : row.kind == "activity.stream_end" ? "stream_end"
                                                                    : "unresolved";
    int64_t dur = 0, bytes = 0;
    if (row.data["duration_ns"].get(dur) != simdjson::SUCCESS) dur = 0;
    if (row.data["bytes"].get(bytes) != simdjson::SUCCESS) bytes = 0;
    activity_expected_.add(activity_resolve_row(rs, outcome, row.seq, row.ts,
                                                opt_int(response, dur), opt_int(response, bytes)));
}

void Verifier::project_degraded(const RecordRow& row) {
    int64_t n = 0;
    if (row.data["lost_events"].get(n) == simdjson::SUCCESS) r_.lost_records += n;
    ++r_.degraded_records;
}

void Verifier::check_projections() {
    // sessions
    auto s = db_.prepare(
        "SELECT session, start_seq, started_ns, server, writer_pid, writer_starttime, "
        "writer_boot_id, state, "
        "state_seq, ended_ns, end_reason, exit_status FROM sessions");
    int64_t session_mismatches = 0;
    std::string first_session;
    size_t seen = 0;
    if (s) {
        while (s->step() == SQLITE_ROW) {
            std::string name(s->text(0));
            SessionRow row;
            row.start_seq = s->int64(1);
            row.started_ns = s->int64(2);
            row.server = std::string(s->text(3));
            row.writer_pid = s->int64(4);
            row.writer_starttime = s->int64(5);
            row.boot_id = std::string(s->text(6));
            row.state = std::string(s->text(7));
            row.state_seq = s->int64(8);
            row.ended = !s->is_null(9);
            row.ended_ns = s->int64(9);
            row.end_reason = std::string(s->text(10));
            row.has_exit = !s->is_null(11);
            row.exit_status = s->int64(11);
            auto it = sessions_.find(name);
            if (it == sessions_.end() || it->second.text(name) != row.text(name)) {
                if (!session_mismatches++) first_session = name;
            } else {
                ++seen;
            }
        }
    }
    if (session_mismatches > 0 || seen != sessions_.size())
        r_.warnings.push_back(
            fmt::format("projection mismatch: the sessions table differs from the log{} (it is a "
                        "cache; the log is the "
                        "evidence)",
                        first_session.empty() ? "" : " (first: session " + first_session + ")"));

    auto a = db_.prepare(
        "SELECT request_seq, session, request_id, method, tool, started_ns, outcome, resolved_seq, "
        "ended_ns, "
        "duration_ns, bytes FROM activity");
    MultisetDigest actual;
    if (a) {
        while (a->step() == SQLITE_ROW) {
            actual.add(activity_request_row(a->int64(0), a->text(1), a->text(2), a->text(3),
                                            a->text(4), a->int64(5)));
            if (!a->is_null(7))
                actual.add(activity_resolve_row(a->int64(0), a->text(6), a->int64(7), a->int64(8),
                                                opt_int(!a->is_null(9), a->int64(9)),
                                                opt_int(!a->is_null(10), a->int64(10))));
        }
    }
    if (!(actual == activity_expected_))
        r_.warnings.push_back(
            "projection mismatch: the activity table differs from the log (it is a cache; the log "
            "is the "
            "evidence)");
}

}  // namespace warden::journal::verification
