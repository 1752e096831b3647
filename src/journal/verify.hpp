// `audit verify`: checks a journal offline, in one streaming pass with flat memory.
//
// Checks, in the order a reader meets them:
//   - the pinned public key (database meta) against the outside pins (`journal.pub`,
//     --public-key), and every checkpoint's key and signature (table, files, --trusted);
//   - records in seq order: seq contiguous from 1, or from the prune anchor, a signed
//     checkpoint that a signed journal.pruned record names, its link following from the
//     chain value that record states ("verified from anchor seq N"), ("sequence gap"), each leaf
//     ("leaf mismatch"), each link ("link broken"), body parses and matches its index
//     columns, every checkpoint's chain value at its seq ("checkpoint mismatch");
//   - the newest checkpoint found anywhere is not beyond the log ("truncated"), head = last
//     row ("head mismatch");
//   - the projections (sessions, activity) rebuilt and compared: a mismatch is a warning
//     (they are caches, not evidence);
//   - the unanchored tail: records after the newest valid checkpoint.
// Exit codes: 0 OK, 1 integrity failure (first bad seq + reason), 2 usage or I/O error,
// 3 OK but unanchored (no checkpoint, or an unanchored tail) when require_anchored is set.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "journal/journal.hpp"
#include "sys/result.hpp"

namespace warden::journal {

struct VerifyOptions {
    std::string path{};                              // empty: resolve_path()
    std::vector<std::string> trusted_checkpoints{};  // checkpoint files kept elsewhere
    std::string public_key_file{};                   // an outside pin (hex); default NAME.pub
    bool require_anchored = false;
};

struct VerifyReport {
    int exit_code = 0;          // 0, 1, 2, 3 as above
    bool ok = false;            // no integrity failure (exit 0 or 3)
    int64_t records = 0;        // rows read
    int64_t head = 0;           // seq the head row names
    int64_t first_bad_seq = 0;  // with exit 1
    std::string reason{};       // with exit 1 or 2: one line
    std::vector<std::string> warnings{};
    int64_t checkpoints = 0;  // valid checkpoints checked (table + files + trusted)
    int64_t last_checkpoint_seq = 0;
    int64_t unanchored = 0;        // records after the newest checkpoint
    int64_t anchor_seq = 0;        // after a prune: the checkpoint the log starts at (prune.hpp)
    int64_t prune_record_seq = 0;  // the signed journal.pruned record that states that anchor
    // Records not written and counted instead (journal.degraded: their lost_events, and how
    // many such records), and counts not on record yet, kept in the lock file (losses.hpp).
    int64_t lost_records = 0;
    int64_t degraded_records = 0;
    int64_t lost_pending = 0;
    std::string origin{};
    std::string pinned_key{};        // hex
    std::string private_key_path{};  // where the signing key lives (and who can re-sign)
    double seconds = 0;
};

VerifyReport verify(const VerifyOptions& options);

// The newest checkpoint of the table, its signature checked against the pinned key, as its
// one-line file text (checkpoint.hpp) with '\n': an anchor to keep off this host.
Result<std::string> anchor_line(const std::string& path);

// Human-readable lines and the JSON form printed by the CLI.
std::string format_report(const VerifyReport& r);
std::string report_json(const VerifyReport& r);

}  // namespace warden::journal
