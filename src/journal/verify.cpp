// Offline verification of the journal: one pass over the records in seq order, checkpoints
// read alongside through a second cursor, memory flat (a bitmap of request seqs and one
// entry per session are the only things that grow, and they grow by bits and sessions, not
// by records). See verify.hpp for the list of checks and exit codes.
#include "journal/verify.hpp"

#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <simdjson.h>
#include <nlohmann/json.hpp>

#include "contain/layers.hpp"
#include "journal/checkpoint.hpp"
#include "journal/intents.hpp"
#include "journal/losses.hpp"
#include "journal/prune.hpp"
#include "journal/store.hpp"
#include "sys/fd.hpp"

namespace warden::journal {

namespace {

std::string short_key(const std::string& hex) {
    return hex.substr(0, 16);
}

// A multiset digest: the sum of SHA-256 values of the rows, so order does not matter and
// nothing but 32 bytes is kept.
struct MultisetDigest {
    uint64_t lanes[4] = {0, 0, 0, 0};
    void add(std::string_view row) {
        Hash h = sha256(row);
        for (int i = 0; i < 4; ++i) {
            uint64_t v;
            std::memcpy(&v, h.data() + 8 * i, 8);
            lanes[i] += v;
        }
    }
    bool operator==(const MultisetDigest& o) const {
        return std::equal(std::begin(lanes), std::end(lanes), std::begin(o.lanes));
    }
};

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

struct SessionRow {
    int64_t start_seq = 0, started_ns = 0, writer_pid = 0, writer_starttime = 0, state_seq = 0;
    std::string server, boot_id, state;
    bool ended = false;
    int64_t ended_ns = 0;
    std::string end_reason;
    bool has_exit = false;
    int64_t exit_status = 0;
    std::string text(std::string_view session) const {
        return fmt::format("{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}|{}", session, start_seq, started_ns,
                           server, writer_pid, writer_starttime, boot_id, state, state_seq,
                           opt_int(ended, ended_ns), ended ? end_reason : "NULL",
                           opt_int(has_exit, exit_status));
    }
};

// A growable bitmap over seqs.
struct SeqBits {
    std::vector<uint64_t> words;
    void set(int64_t s) {
        auto i = static_cast<size_t>(s) / 64;
        if (i >= words.size()) words.resize(i + 1 + i / 2, 0);
        words[i] |= uint64_t{1} << (s % 64);
    }
    bool test(int64_t s) const {
        auto i = static_cast<size_t>(s) / 64;
        return i < words.size() && (words[i] >> (s % 64) & 1);
    }
};

struct Anchor {
    std::string where;  // "table", a file path, "trusted FILE"
    CheckpointFile cp;
};

// What a `journal.pruned` record states of the seam it left (prune.cpp): the first seq kept,
// the chain value before it and its own. Absent chain values: an older writer's record.
struct PruneClaim {
    int64_t seq = 0;
    int64_t anchor_seq = 0;
    std::optional<Hash> prev_chain, anchor_chain;
};

std::optional<Hash> hash_field(simdjson::dom::object data, const char* key) {
    std::string_view hex;
    Hash h{};
    if (data[key].get(hex) != simdjson::SUCCESS || !from_hex(hex, h.data(), h.size()))
        return std::nullopt;
    return h;
}

PruneClaim prune_claim(int64_t seq, simdjson::dom::object data) {
    PruneClaim c;
    c.seq = seq;
    if (data["anchor_seq"].get(c.anchor_seq) != simdjson::SUCCESS) c.anchor_seq = 0;
    c.prev_chain = hash_field(data, "prev_chain");
    c.anchor_chain = hash_field(data, "anchor_chain");
    return c;
}

class Verifier {
  public:
    explicit Verifier(const VerifyOptions& o) : opt_(o) {}
    VerifyReport run();

  private:
    // Records a failure at `seq` if it is the first one (smallest seq) seen.
    void fail(int64_t seq, std::string reason) {
        if (r_.exit_code == 1 && r_.first_bad_seq <= seq) return;
        r_.exit_code = 1;
        r_.first_bad_seq = seq;
        r_.reason = std::move(reason);
    }
    void io_error(std::string reason) {
        r_.exit_code = 2;
        r_.reason = std::move(reason);
    }
    // Key, origin and signature of one checkpoint; false (after fail()) when bad.
    bool check_anchor(const Anchor& a);
    void load_outside_anchors();
    void check_intent_files();
    void stream_records();
    void check_prune();
    void check_anchors_before(int64_t anchor);
    void check_tail();
    void check_projections();

    VerifyOptions opt_;
    VerifyReport r_;
    Paths paths_;
    Db db_;
    PublicKey trusted_key_{};
    std::string trusted_key_hex_, trusted_key_source_;
    std::multimap<int64_t, Anchor> outside_;  // files and --trusted-checkpoint, by seq
    std::map<std::string, int64_t> file_seq_;
    int64_t last_row_ = 0;
    Hash last_chain_{};
    int64_t anchored_ = 0;  // newest seq whose chain a valid checkpoint confirmed
    bool any_anchor_ = false;
    bool streamed_ = false;  // every record read, none failed
    // The seam of a prune: the anchor row's leaf and stored chain, and the newest
    // journal.pruned record.
    Hash anchor_leaf_{}, anchor_chain_{};
    std::optional<PruneClaim> newest_prune_;
    size_t trusted_before_anchor_ = 0;  // --trusted-checkpoint files for pruned seqs
    std::vector<int64_t> checkpoint_records_without_anchor_;
    std::unordered_map<std::string, SessionRow> sessions_;
    MultisetDigest activity_expected_;
    SeqBits requests_, resolved_;
};

bool Verifier::check_anchor(const Anchor& a) {
    const auto& cp = a.cp;
    std::string key_hex = to_hex(cp.public_key.data(), cp.public_key.size());
    if (cp.public_key != trusted_key_) {
        fail(cp.seq,
             fmt::format("key mismatch at checkpoint {} ({}): signed by key {}, the pinned key is "
                         "{} ({})",
                         cp.seq, a.where, short_key(key_hex), short_key(trusted_key_hex_),
                         trusted_key_source_));
        return false;
    }
    if (cp.origin != r_.origin) {
        fail(cp.seq,
             fmt::format(
                 "checkpoint {} ({}) belongs to another journal: origin {}, this journal is {}",
                 cp.seq, a.where, cp.origin, r_.origin));
        return false;
    }
    if (!checkpoint_signature_valid(cp)) {
        fail(cp.seq, fmt::format("bad signature on checkpoint {} ({})", cp.seq, a.where));
        return false;
    }
    return true;
}

// Requests written on a relay's path and not chained yet (journal.cpp, "Intents"). A running
// session's file is how its requests are on record until its writer thread chains them:
// normal, not worth a word. One whose writer died holds requests the log lacks until
// `journal reconcile` (a warning, not a gap in the chain); one that is not the journal
// owner's is never recovered (intents.hpp) and is named as such.
void Verifier::check_intent_files() {
    const auto sessions = intent_sessions(paths_);
    if (sessions.empty()) return;
    if (auto st = check_intents_dir(paths_); !st) {
        r_.warnings.push_back(st.error().message + " (its intent files are not recovered)");
        return;
    }
    for (const auto& s : sessions) {
        const std::string file = paths_.intent_file(s);
        struct stat st {};
        if (::lstat(file.c_str(), &st) != 0) continue;  // recovered meanwhile
        Status trusted =
            S_ISLNK(st.st_mode)
                ? Status(Error::msg(fmt::format(
                      "journal intent file {}: is a symbolic link; refusing to follow it", file)))
                : check_intent_file(file, st);
        if (!trusted) {
            r_.warnings.push_back(trusted.error().message + " (not recovered)");
            continue;
        }
        if (session_writer_alive(db_, s) == true || intent_file_held(file))
            continue;  // in use by the running session
        r_.warnings.push_back(fmt::format(
            "uncommitted intents: {} (session {}): requests forwarded but not yet in the log, "
            "and the session's writer is gone; `mcpwarden journal reconcile` records them",
            file, s));
    }
}

void Verifier::load_outside_anchors() {
    auto dir = read_checkpoint_dir(paths_.checkpoints);
    if (!dir) {
        r_.warnings.push_back(dir.error().message);
    } else {
        for (auto& [path, bad] : dir->bad)
            r_.warnings.push_back(fmt::format("unreadable checkpoint file: {}", bad));
        for (auto& [path, cp] : dir->files)
            outside_.emplace(cp.seq, Anchor{path, cp});
    }
    check_intent_files();
    for (const auto& t : opt_.trusted_checkpoints) {
        auto text = read_file(t);
        if (!text) {
            io_error(fmt::format("--trusted-checkpoint {}: {}", t, text.error().message));
            return;
        }
        auto cp = parse_checkpoint(*text, t);
        if (!cp) {
            io_error(cp.error().message);
            return;
        }
        outside_.emplace(cp->seq, Anchor{"trusted " + t, *cp});
    }
}

void Verifier::stream_records() {
    auto recs = db_.prepare(
        "SELECT seq, ts, kind, session, origin, body, leaf, chain FROM records ORDER BY seq");
    auto cps = db_.prepare(
        "SELECT seq, origin, chain, public_key, signature, ts FROM checkpoints ORDER BY seq");
    if (!recs || !cps) {
        io_error(!recs ? recs.error().message : cps.error().message);
        return;
    }
    // Table checkpoints, read alongside the records (merge by seq).
    std::optional<Anchor> next_cp;
    auto advance_cp = [&]() {
        next_cp.reset();
        if (cps->step() != SQLITE_ROW) return;
        Anchor a{"table", {}};
        a.cp.seq = cps->int64(0);
        a.cp.origin = std::string(cps->text(1));
        auto chain = cps->blob(2);
        if (chain.size() == 32) std::memcpy(a.cp.chain.data(), chain.data(), 32);
        (void)from_hex(cps->text(3), a.cp.public_key.data(), a.cp.public_key.size());
        auto sig = cps->blob(4);
        if (sig.size() == 64) std::memcpy(a.cp.signature.data(), sig.data(), 64);
        a.cp.ts = cps->int64(5);
        next_cp = std::move(a);
    };
    advance_cp();

    Hasher hasher;
    simdjson::dom::parser parser;
    Hash prev{};
    // After a prune (prune.hpp) the log starts at a checkpoint record whose chain value its
    // signature vouches for; its link to the removed records cannot be checked.
    const int64_t anchor = pruned_before(db_);
    r_.anchor_seq = anchor;
    int64_t expected = anchor > 0 ? anchor : 1;
    std::string id_text;
    auto confirm = [&](const Anchor& a, int64_t seq, const Hash& chain) {
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
    };

    int rc;
    while ((rc = recs->step()) == SQLITE_ROW) {
        int64_t seq = recs->int64(0);
        ++r_.records;
        if (seq != expected) {
            if (seq < expected && seq < anchor)
                fail(seq, fmt::format("seq {} precedes the prune anchor (seq {}): the anchor in "
                                      "the meta table was altered",
                                      seq, anchor));
            else if (seq > expected)
                fail(expected,
                     fmt::format("sequence gap: seq {} is missing (the next row is seq {})",
                                 expected, seq));
            else
                fail(seq, fmt::format("sequence out of order at seq {}", seq));
            return;
        }
        std::string_view body = recs->blob(5);
        Hash leaf = hasher.leaf(body);
        auto leaf_col = recs->blob(6);
        auto chain_col = recs->blob(7);
        if (leaf_col.size() != 32 || std::memcmp(leaf.data(), leaf_col.data(), 32) != 0) {
            fail(seq,
                 fmt::format("leaf mismatch at seq {}: the body does not hash to the stored leaf",
                             seq));
            return;
        }
        Hash chain = hasher.chain(prev, leaf);
        if (seq == anchor && chain_col.size() == 32) {
            // Vouched for below by its checkpoint, and by the journal.pruned record's seam
            // (check_prune), or failed.
            std::memcpy(chain.data(), chain_col.data(), 32);
            anchor_leaf_ = leaf;
            anchor_chain_ = chain;
        }
        if (chain_col.size() != 32 || std::memcmp(chain.data(), chain_col.data(), 32) != 0) {
            fail(seq,
                 fmt::format("link broken at seq {}: its chain hash does not follow from seq {}",
                             seq, seq - 1));
            return;
        }
        // Body ↔ index columns.
        simdjson::dom::element doc;
        if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS ||
            !doc.is_object()) {
            fail(seq, fmt::format("body of seq {} is not a JSON object", seq));
            return;
        }
        std::string_view kind, session, origin;
        int64_t bseq = -1, bts = -1, v = -1;
        simdjson::dom::object data;
        bool shape =
            doc["kind"].get(kind) == simdjson::SUCCESS &&
            doc["session"].get(session) == simdjson::SUCCESS &&
            doc["origin"].get(origin) == simdjson::SUCCESS &&
            doc["seq"].get(bseq) == simdjson::SUCCESS && doc["ts"].get(bts) == simdjson::SUCCESS &&
            doc["v"].get(v) == simdjson::SUCCESS && doc["data"].get(data) == simdjson::SUCCESS;
        if (!shape) {
            fail(seq, fmt::format("body of seq {} lacks data/kind/origin/seq/session/ts/v", seq));
            return;
        }
        const char* col = nullptr;
        if (bseq != seq)
            col = "seq";
        else if (bts != recs->int64(1))
            col = "ts";
        else if (kind != recs->text(2))
            col = "kind";
        else if (session != recs->text(3))
            col = "session";
        else if (origin != recs->text(4))
            col = "origin";
        if (col) {
            fail(seq, fmt::format("body of seq {} does not match its index column `{}`", seq, col));
            return;
        }
        if (origin != r_.origin) {
            fail(seq, fmt::format("seq {} belongs to another journal (origin {})", seq, origin));
            return;
        }
        if (v != 1) r_.warnings.push_back(fmt::format("seq {}: unknown body version {}", seq, v));

        // Checkpoints at this seq.
        bool table_anchor = false;
        while (next_cp && next_cp->cp.seq < seq) {
            // A table checkpoint for a seq that has no row: impossible unless rows were removed;
            // the sequence check above already failed then. Skip defensively.
            advance_cp();
        }
        if (next_cp && next_cp->cp.seq == seq) {
            table_anchor = true;
            if (!confirm(*next_cp, seq, chain)) return;
            advance_cp();
        }
        auto [lo, hi] = outside_.equal_range(seq);
        bool outside_anchor = lo != hi;
        for (auto it = lo; it != hi; ++it)
            if (!confirm(it->second, seq, chain)) return;
        if (kind == "checkpoint" && !table_anchor && !outside_anchor)
            checkpoint_records_without_anchor_.push_back(seq);
        if (seq == anchor && anchored_ != seq) {
            fail(seq, fmt::format("prune anchor seq {} is not a signed checkpoint: the records "
                                  "before it were removed and nothing vouches for its chain value",
                                  seq));
            last_row_ = seq - 1;  // what follows is unchecked: the tail checks start here
            return;
        }

        // Projections, rebuilt as the writer builds them (journal.cpp, Impl::project).
        auto str = [&](const char* k) {
            std::string_view s;
            return data[k].get(s) == simdjson::SUCCESS ? std::string(s) : std::string();
        };
        auto num = [&](simdjson::dom::element e, const char* k) {
            int64_t n = 0;
            return e[k].get(n) == simdjson::SUCCESS ? n : 0;
        };
        if (kind == "session.start") {
            SessionRow row;
            row.start_seq = row.state_seq = seq;
            row.started_ns = bts;
            row.server = str("server_name");
            simdjson::dom::element w;
            if (data["writer"].get(w) == simdjson::SUCCESS && w.is_object()) {
                row.writer_pid = num(w, "pid");
                row.writer_starttime = num(w, "starttime");
                std::string_view b;
                if (w["boot_id"].get(b) == simdjson::SUCCESS) row.boot_id = std::string(b);
            }
            row.state = "running";
            sessions_[std::string(session)] = std::move(row);
        } else if (kind == "session.client_lost" || kind == "session.orphaned" ||
                   kind == "session.end") {
            auto it = sessions_.find(std::string(session));
            if (it != sessions_.end()) {
                auto& row = it->second;
                row.state_seq = seq;
                if (kind == "session.end") {
                    row.state = "ended";
                    row.ended = true;
                    row.ended_ns = bts;
                    row.end_reason = str("reason");
                    int64_t ex = 0;
                    row.has_exit = data["exit_status"].get(ex) == simdjson::SUCCESS;
                    row.exit_status = ex;
                } else {
                    row.state = kind == "session.orphaned" ? "orphaned" : "client_lost";
                }
            }
        } else if (kind == "activity.request") {
            id_text.clear();
            simdjson::dom::element id;
            if (data["id"].get(id) == simdjson::SUCCESS)
                (void)canonical_of(id_text, id);
            else
                id_text = "null";
            activity_expected_.add(
                activity_request_row(seq, session, id_text, str("method"), str("tool"), bts));
            requests_.set(seq);
        } else if (kind == "journal.degraded") {
            int64_t n = 0;
            if (data["lost_events"].get(n) == simdjson::SUCCESS) r_.lost_records += n;
            ++r_.degraded_records;
        } else if (kind == "activity.response" || kind == "activity.abandoned" ||
                   kind == "activity.unresolved" || kind == "activity.stream_end") {
            int64_t rs = 0;
            if (data["request_seq"].get(rs) != simdjson::SUCCESS) rs = 0;
            if (rs > 0 && requests_.test(rs) && !resolved_.test(rs)) {
                resolved_.set(rs);
                bool response = kind == "activity.response";
                std::string outcome = response                        ? str("outcome")
                                      : kind == "activity.abandoned"  ? "abandoned"
                                      : kind == "activity.stream_end" ? "stream_end"
                                                                      : "unresolved";
                int64_t dur = 0, bytes = 0;
                if (data["duration_ns"].get(dur) != simdjson::SUCCESS) dur = 0;
                if (data["bytes"].get(bytes) != simdjson::SUCCESS) bytes = 0;
                activity_expected_.add(activity_resolve_row(
                    rs, outcome, seq, bts, opt_int(response, dur), opt_int(response, bytes)));
            }
        } else if (kind == "journal.pruned") {
            newest_prune_ = prune_claim(seq, data);
        }

        prev = chain;
        last_row_ = seq;
        last_chain_ = chain;
        expected = seq + 1;
    }
    if (rc != SQLITE_DONE) {
        io_error(db_.error("read records", rc).message);
        return;
    }
    streamed_ = true;
}

// Pruned, and proven. A prune removes the oldest records; what is kept must show that the
// journal's own writer pruned it and where it cut, or whoever can write the file removes
// evidence by deleting rows and setting one meta value. So the pruning writer states the
// seam in a `journal.pruned` record of the chain that remains (the anchor, the first seq
// kept and a signed checkpoint; the chain value of the record before it, from which the
// anchor's link follows; the anchor's own chain value) and signs that record with a
// checkpoint in the transaction that removes the rows. A log that starts past seq 1 then
// passes only if
//   - the newest journal.pruned record names the seq it starts at: rows removed by hand
//     leave no such record or one naming an older anchor ("unexplained prune", "prune
//     anchor moved");
//   - the anchor's chain value is the one stated and follows, by the anchor's leaf, from the
//     one stated before it ("prune seam broken");
//   - a valid signed checkpoint covers the record ("not covered by a signed checkpoint"):
//     a record appended to the unanchored tail proves nothing;
//   - every checkpoint kept elsewhere for a seq before the anchor names the chain value of
//     the journal's signed checkpoint at that seq (the table keeps every checkpoint). Its
//     records are gone, so it vouches for none that are kept; a trusted one says so.
// Whoever holds the private key can write and sign such a record too: docs/JOURNAL.md
// ("What an attacker can do") says what is left then.
void Verifier::check_prune() {
    const int64_t anchor = r_.anchor_seq;
    if (anchor == 0) return;
    check_anchors_before(anchor);
    if (Faults::from_env().prune_unproven) return;  // the guard off (a negative control)
    if (!newest_prune_) {
        fail(anchor, fmt::format("unexplained prune: the log starts at seq {0} but no "
                                 "journal.pruned record in it names seq {0} as its anchor",
                                 anchor));
        return;
    }
    const PruneClaim& p = *newest_prune_;
    if (p.anchor_seq != anchor) {
        fail(anchor, fmt::format("prune anchor moved: the log starts at seq {} but the newest "
                                 "journal.pruned record (seq {}) names anchor seq {}",
                                 anchor, p.seq, p.anchor_seq));
        return;
    }
    if (!p.prev_chain || !p.anchor_chain) {
        r_.warnings.push_back(fmt::format(
            "the journal.pruned record at seq {} states no chain values (an older mcpwarden "
            "wrote it): the anchor's link rests on its checkpoint's signature alone",
            p.seq));
    } else if (*p.anchor_chain != anchor_chain_ ||
               Hasher().chain(*p.prev_chain, anchor_leaf_) != anchor_chain_) {
        fail(anchor, fmt::format("prune seam broken at seq {}: its chain value does not follow "
                                 "from the one the journal.pruned record (seq {}) states",
                                 anchor, p.seq));
        return;
    }
    if (p.seq > anchored_) {
        fail(p.seq, fmt::format("the journal.pruned record at seq {} is not covered by a signed "
                                "checkpoint: nothing shows the journal's key signed it",
                                p.seq));
        return;
    }
    r_.prune_record_seq = p.seq;
}

void Verifier::check_anchors_before(int64_t anchor) {
    auto table = db_.prepare("SELECT chain FROM checkpoints WHERE seq = ?1");
    if (!table) {
        io_error(table.error().message);
        return;
    }
    for (auto it = outside_.begin(); it != outside_.end() && it->first < anchor; ++it) {
        const Anchor& a = it->second;
        if (!check_anchor(a)) continue;
        table->bind(1, a.cp.seq);
        std::optional<Hash> kept;
        if (table->step() == SQLITE_ROW && table->blob(0).size() == 32) {
            kept.emplace();
            std::memcpy(kept->data(), table->blob(0).data(), 32);
        }
        table->reset();
        if (kept != a.cp.chain) {
            fail(a.cp.seq,
                 fmt::format("checkpoint mismatch at seq {0}: checkpoint ({1}) signed chain {2}, "
                             "the journal's checkpoint at seq {0} (pruned) has {3}",
                             a.cp.seq, a.where, to_hex(a.cp.chain).substr(0, 16),
                             kept ? to_hex(*kept).substr(0, 16) : "none"));
            continue;
        }
        ++r_.checkpoints;
        if (a.where.rfind("trusted ", 0) != 0) continue;
        ++trusted_before_anchor_;
        r_.warnings.push_back(fmt::format(
            "checkpoint {} ({}) is older than the prune anchor (seq {}): it matches the "
            "journal's signed checkpoint at seq {}, but its records were pruned, so it "
            "vouches for none that are kept; keep a newer one (`mcpwarden audit anchor`)",
            a.cp.seq, a.where, anchor, a.cp.seq));
    }
}

void Verifier::check_tail() {
    // Checkpoints beyond the last row: the log was cut below them.
    for (auto it = outside_.upper_bound(last_row_); it != outside_.end(); ++it) {
        if (!check_anchor(it->second)) continue;
        fail(last_row_ + 1,
             fmt::format("truncated: checkpoint {} ({}) covers seq {} but the log ends at seq {}",
                         it->first, it->second.where, it->first, last_row_));
        break;
    }
    auto beyond = db_.prepare("SELECT min(seq) FROM checkpoints WHERE seq > ?1");
    if (beyond) {
        beyond->bind(1, last_row_);
        if (beyond->step() == SQLITE_ROW && !beyond->is_null(0))
            fail(last_row_ + 1,
                 fmt::format(
                     "truncated: checkpoint {} (table) covers seq {} but the log ends at seq {}",
                     beyond->int64(0), beyond->int64(0), last_row_));
    }
    auto head = db_.prepare("SELECT seq, chain FROM head WHERE id = 1");
    if (!head || head->step() != SQLITE_ROW) {
        fail(last_row_ + 1, "head row missing");
        return;
    }
    r_.head = head->int64(0);
    auto hc = head->blob(1);
    if (r_.head > last_row_) {
        fail(last_row_ + 1,
             fmt::format("truncated: the head says seq {} but the log ends at seq {}", r_.head,
                         last_row_));
    } else if (r_.head < last_row_) {
        fail(r_.head + 1,
             fmt::format("head mismatch: the head says seq {} but the log goes on to seq {}",
                         r_.head, last_row_));
    } else if (hc.size() != 32 || std::memcmp(hc.data(), last_chain_.data(), 32) != 0) {
        fail(last_row_,
             fmt::format("head mismatch: the head's chain hash differs from seq {}", last_row_));
    }
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

VerifyReport Verifier::run() {
    auto t0 = std::chrono::steady_clock::now();
    auto path = resolve_path(opt_.path);
    if (!path) {
        io_error(path.error().message);
        return r_;
    }
    paths_ = Paths::for_db(*path);
    r_.private_key_path = paths_.key;
    if (auto st = check_location(paths_, /*create=*/false); !st) {
        io_error(st.error().message);
        return r_;
    }
    auto db = Db::open(paths_.db, Db::Mode::read, 10000);
    if (!db) {
        io_error(db.error().message);
        return r_;
    }
    db_ = std::move(*db);
    // One read transaction: a consistent snapshot even while writers append.
    if (auto st = db_.exec("BEGIN"); !st) {
        io_error(st.error().message);
        return r_;
    }
    auto origin = read_meta(db_, "origin");
    auto pinned = read_meta(db_, "public_key");
    if (!origin || !pinned) {
        io_error(!origin ? origin.error().message : pinned.error().message);
        return r_;
    }
    r_.origin = *origin;
    r_.pinned_key = *pinned;
    trusted_key_hex_ = *pinned;
    trusted_key_source_ = "pinned in the journal";

    // Outside pin: --public-key, else NAME.pub beside the database.
    std::string pin_file = !opt_.public_key_file.empty() ? opt_.public_key_file : paths_.pub;
    auto pin_text = read_file(pin_file);
    if (!pin_text && !opt_.public_key_file.empty()) {
        io_error(fmt::format("--public-key {}: {}", pin_file, pin_text.error().message));
        return r_;
    }
    if (pin_text) {
        std::string t = *pin_text;
        while (!t.empty() && (t.back() == '\n' || t.back() == ' '))
            t.pop_back();
        PublicKey k{};
        if (!from_hex(t, k.data(), k.size())) {
            io_error(fmt::format("public key file {}: not 64 hex digits", pin_file));
            return r_;
        }
        trusted_key_hex_ = to_hex(k.data(), k.size());
        trusted_key_source_ = pin_file;
        if (trusted_key_hex_ != *pinned)
            fail(0, fmt::format("key mismatch: the journal pins key {} but {} pins key {}",
                                short_key(*pinned), pin_file, short_key(trusted_key_hex_)));
    } else {
        r_.warnings.push_back(
            fmt::format("no outside copy of the public key ({} missing): a journal regenerated "
                        "with a new key cannot be told "
                        "apart",
                        paths_.pub));
    }
    if (!from_hex(trusted_key_hex_, trusted_key_.data(), trusted_key_.size())) {
        io_error(fmt::format("journal {}: pinned key is not 64 hex digits", paths_.db));
        return r_;
    }

    load_outside_anchors();
    if (r_.exit_code == 2) return r_;
    // A key mismatch against the outside pin is reported at the first checkpoint it concerns.
    if (r_.exit_code == 1 && r_.first_bad_seq == 0) {
        std::string reason = r_.reason;
        r_.exit_code = 0;
        auto first = db_.prepare("SELECT min(seq) FROM checkpoints");
        int64_t at = 0;
        if (first && first->step() == SQLITE_ROW && !first->is_null(0)) at = first->int64(0);
        if (!outside_.empty() && (at == 0 || outside_.begin()->first < at))
            at = outside_.begin()->first;
        fail(at, reason);
    }
    stream_records();
    if (r_.exit_code == 2) return r_;
    if (streamed_) check_prune();
    if (r_.exit_code == 2) return r_;
    check_tail();
    check_projections();
    r_.lost_pending = pending_losses_total(paths_.lock);
    (void)db_.exec("COMMIT");

    for (int64_t s : checkpoint_records_without_anchor_)
        r_.warnings.push_back(fmt::format(
            "checkpoint record at seq {} has no signed checkpoint in the table or in {} (deleted?)",
            s, paths_.checkpoints));
    r_.last_checkpoint_seq = anchored_;
    r_.unanchored = last_row_ - anchored_;
    if (!any_anchor_)
        r_.warnings.insert(
            r_.warnings.begin(),
            "NO CHECKPOINT: nothing anchors this journal; a rewritten or truncated log would pass "
            "unnoticed");
    else if (r_.unanchored > 0)
        r_.warnings.push_back(
            fmt::format("{} unanchored records after checkpoint {}: a truncation there would go "
                        "unnoticed",
                        r_.unanchored, anchored_));
    // Checkpoints kept off the host that all predate the prune anchor vouch for no record kept.
    const bool trusted_all_pruned = !opt_.trusted_checkpoints.empty() &&
                                    trusted_before_anchor_ == opt_.trusted_checkpoints.size();
    if (r_.exit_code == 0 && opt_.require_anchored &&
        (!any_anchor_ || r_.unanchored > 0 || trusted_all_pruned))
        r_.exit_code = 3;
    r_.ok = r_.exit_code == 0 || r_.exit_code == 3;
    r_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return r_;
}

}  // namespace

VerifyReport verify(const VerifyOptions& options) {
    return Verifier(options).run();
}

Result<std::string> anchor_line(const std::string& flag_path) {
    auto path = resolve_path(flag_path);
    if (!path) return path.error();
    Paths paths = Paths::for_db(*path);
    if (auto st = check_location(paths, /*create=*/false); !st) return st.error();
    auto db = Db::open(paths.db, Db::Mode::read, 10000);
    if (!db) return db.error();
    auto origin = read_meta(*db, "origin");
    if (!origin) return origin.error();
    auto pinned = read_meta(*db, "public_key");
    if (!pinned) return pinned.error();
    auto s = db->prepare(
        "SELECT seq, origin, chain, public_key, signature, ts FROM checkpoints ORDER BY seq DESC "
        "LIMIT 1");
    if (!s) return s.error();
    if (s->step() != SQLITE_ROW)
        return Error::msg(fmt::format("journal {}: no checkpoint yet", paths.db));
    CheckpointFile cp;
    cp.seq = s->int64(0);
    cp.origin = std::string(s->text(1));
    auto chain = s->blob(2);
    auto sig = s->blob(4);
    if (chain.size() != 32 || sig.size() != 64 || s->text(3) != *pinned ||
        !from_hex(s->text(3), cp.public_key.data(), cp.public_key.size()))
        return Error::msg(
            fmt::format("journal {}: checkpoint {} is malformed or not signed by "
                        "the pinned key; run audit verify",
                        paths.db, cp.seq));
    std::memcpy(cp.chain.data(), chain.data(), 32);
    std::memcpy(cp.signature.data(), sig.data(), 64);
    cp.ts = s->int64(5);
    if (cp.origin != *origin || !checkpoint_signature_valid(cp))
        return Error::msg(fmt::format(
            "journal {}: checkpoint {} has a bad signature; run audit verify", paths.db, cp.seq));
    return checkpoint_text(cp);
}

std::string format_report(const VerifyReport& r) {
    std::string out;
    if (r.exit_code == 2) return fmt::format("verify: {}\n", r.reason);
    if (r.exit_code == 1) {
        out += fmt::format("INTEGRITY FAILURE at seq {}: {}\n", r.first_bad_seq, r.reason);
    } else {
        if (r.anchor_seq > 0)
            out += fmt::format(
                "OK: verified from anchor seq {} (records before it pruned, as the signed "
                "journal.pruned record at seq {} states): {} records, head at seq {}, chain "
                "intact\n",
                r.anchor_seq, r.prune_record_seq, r.records, r.head);
        else
            out += fmt::format("OK: {} records, head at seq {}, chain intact\n", r.records, r.head);
    }
    out += fmt::format("origin: {}\n", r.origin);
    if (r.checkpoints > 0)
        out +=
            fmt::format("checkpoints: {} verified, newest at seq {}; unanchored tail: {} records\n",
                        r.checkpoints, r.last_checkpoint_seq, r.unanchored);
    else
        out += "checkpoints: none verified\n";
    out += fmt::format("pinned key: {}\n", r.pinned_key);
    out += fmt::format(
        "private key: {} (anyone who can read it, i.e. this user or root, can re-sign a rewritten "
        "log; keep "
        "journal.pub or a checkpoint file off this host and pass it back with --public-key or "
        "--trusted-checkpoint)\n",
        r.private_key_path);
    if (r.lost_records > 0 || r.lost_pending > 0)
        out += fmt::format(
            "not recorded: {} records counted in {} journal.degraded records; {} counted in the "
            "lock file, recorded by the next writer (`mcpwarden journal reconcile`)\n",
            r.lost_records, r.degraded_records, r.lost_pending);
    for (const auto& w : r.warnings)
        out += fmt::format("warning: {}\n", w);
    if (r.seconds > 0)
        out += fmt::format("verified {} records in {:.3f} s ({:.0f} records/s)\n", r.records,
                           r.seconds, r.records / r.seconds);
    if (r.exit_code == 3)
        out += "exit 3: the journal is intact but not fully anchored (--require-anchored)\n";
    return out;
}

std::string report_json(const VerifyReport& r) {
    nlohmann::json j{{"schema", "mcpwarden.audit.verify"},
                     {"schema_version", 1},
                     {"ok", r.ok},
                     {"exit_code", r.exit_code},
                     {"records", r.records},
                     {"head", r.head},
                     {"origin", r.origin},
                     {"checkpoints", r.checkpoints},
                     {"last_checkpoint_seq", r.last_checkpoint_seq},
                     {"unanchored", r.unanchored},
                     {"lost_records", r.lost_records},
                     {"degraded_records", r.degraded_records},
                     {"lost_pending", r.lost_pending},
                     {"anchor_seq", r.anchor_seq},
                     {"prune_record_seq", r.prune_record_seq},
                     {"pinned_key", r.pinned_key},
                     {"private_key_path", r.private_key_path},
                     {"warnings", r.warnings},
                     {"seconds", r.seconds}};
    if (r.exit_code == 1) {
        j["first_bad_seq"] = r.first_bad_seq;
        j["reason"] = r.reason;
    } else if (r.exit_code == 2) {
        j["error"] = r.reason;
    }
    return j.dump() + "\n";
}

}  // namespace warden::journal
