// The verifier's pass over a journal (verify.hpp): its state and its steps, shared by
// verify.cpp (the snapshot, the keys and checkpoints, the prune proof, the tail, the verdict)
// and verify_records.cpp (the records in seq order, and the projections they rebuild). Not
// for use outside those two.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "journal/checkpoint.hpp"
#include "journal/crypto.hpp"
#include "journal/store.hpp"
#include "journal/verify.hpp"

namespace warden::journal::verification {

std::string short_key(const std::string& hex);  // the first 16 hex digits of a key

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

std::string opt_int(bool present, int64_t v);  // the value, or NULL as a projection has it
// The rows of the activity projection, as text for the multiset digest.
std::string activity_request_row(int64_t seq, std::string_view session, std::string_view id,
                                 std::string_view method, std::string_view tool, int64_t ts);
std::string activity_resolve_row(int64_t request_seq, std::string_view outcome,
                                 int64_t resolved_seq, int64_t ended, const std::string& duration,
                                 const std::string& bytes);

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

// The claim of the `journal.pruned` record at `seq`.
PruneClaim prune_claim(int64_t seq, simdjson::dom::object data);

// One record as stream_records reads it: its row's seq, body and chain, and what its body says.
struct RecordRow {
    int64_t seq = 0;
    std::string_view body;
    Hash chain{};
    std::string_view kind, session;
    int64_t ts = -1;
    simdjson::dom::object data;
};

// The table's checkpoints, read alongside the records (merged by seq): `next` is the first one
// not yet passed, or none.
struct TableCheckpoints {
    Stmt& rows;
    std::optional<Anchor> next;
    void advance();
};

class Verifier {
  public:
    explicit Verifier(const VerifyOptions& o) : opt_(o) {}
    VerifyReport run();

  private:
    bool open_snapshot();
    bool pin_key();
    void place_key_mismatch();
    void conclude();
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
    bool in_sequence(const RecordRow& row);
    bool linked(Stmt& recs, RecordRow& row);
    bool body_matches(Stmt& recs, RecordRow& row);
    bool anchored(TableCheckpoints& table, const RecordRow& row);
    bool confirm(const Anchor& a, int64_t seq, const Hash& chain);
    void project(const RecordRow& row);
    void project_session_start(const RecordRow& row);
    void project_session_state(const RecordRow& row);
    void project_request(const RecordRow& row);
    void project_resolution(const RecordRow& row);
    void project_degraded(const RecordRow& row);
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
    // What stream_records carries from one record to the next.
    struct Stream {
        Hasher hasher;
        simdjson::dom::parser parser;
        Hash prev{};
        int64_t anchor = 0;    // the prune anchor (0: none)
        int64_t expected = 1;  // the seq the next row must have
        std::string id_text;   // a request's id, canonical (reused)
    } stream_;
};

}  // namespace warden::journal::verification
