// Bounded on disk, still verifiable: pruning the oldest records of the journal.
//
// A journal that only grows is a reason to remove the tool (about 9.5 KB a session, several
// sessions per client launch, forever). Pruning removes the oldest records, but only up to a
// signed checkpoint: the oldest record kept is always a `checkpoint` record whose chain value
// a signature covers, so `audit verify` starts there (the removed records no longer show its
// link, but the signature vouches for its chain value) and says so: "verified from anchor seq
// N, records before it pruned". The anchor seq is kept in the database's meta
// table, which anyone who can write the file can set, so the prune is also proven in the chain
// that remains: a `journal.pruned` record states the anchor, the chain value before it and its
// own, and a checkpoint signs that record in the transaction that removes the rows. Verify
// refuses a log that starts past seq 1 without such a record naming its first seq
// (verify.cpp, "Pruned, and proven").
//
// What pruning gives up: the removed records, and the proof that nothing before the anchor
// was altered. Export them first (`export_to`, or `journal export`) if they must be kept. A
// whole-directory rollback is caught only by a checkpoint kept off the machine (`audit
// anchor`, checked with `verify --trusted-checkpoint`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "journal/journal.hpp"
#include "sys/result.hpp"

namespace warden::journal {

struct PruneOptions {
    int64_t older_than_ns = 0;  // remove records older than now - this (0: not by age)
    int64_t max_bytes = 0;      // keep the newest records within about this size (0: no bound)
    std::string export_to{};    // write the removed records here first (NDJSON, fsync'd)
    bool compact = true;        // VACUUM afterwards, so the file shrinks
    // Whether records an exporter has not delivered yet may go (`export-gap = "allow"`).
    // Otherwise the prune stops at the newest checkpoint at or before the first of them and
    // says so: a `journal.export_held` record (once per exporter position) and the report.
    bool export_gap_allow = false;
};

// An exporter whose position kept records from going, or (export_gap_allow) whose records
// went undelivered.
struct ExportHold {
    std::string destination{};
    int64_t position = 0;  // the last record its receiver acknowledged
    int64_t records = 0;   // records after it that the prune would have removed (or removed)
};

struct PruneReport {
    int64_t anchor_seq = 0;          // the oldest record kept (a checkpoint); 0: nothing removed
    int64_t removed = 0;             // records removed now
    int64_t kept = 0;                // records left
    std::string exported{};          // the export_to file, when records were written there
    std::vector<ExportHold> held{};  // records kept for an exporter (not removed)
    std::vector<ExportHold> unexported{};  // records removed undelivered (export_gap_allow)
};

// Removes the oldest records that `options` selects, up to the newest signed checkpoint that
// leaves them all behind, under the append lock. Nothing is removed (anchor_seq 0) when no
// checkpoint lies past what would go.
Result<PruneReport> prune(Journal& journal, const PruneOptions& options);

// The seq before which records were pruned (the anchor), or 0.
int64_t pruned_before(Db& db);

// Whether the journal at `path` holds a record older than `older_than_ns` past its anchor:
// one read-only lookup by key, so that what runs at every start (the retention) takes the
// append lock only when there may be something to prune.
Result<bool> prune_due(const std::string& path, int64_t older_than_ns);

}  // namespace warden::journal
