// The exporter's loop: read the records after its position, send them, and move the
// position only once the receiver acknowledged them.
//
// Order and completeness come from the journal, not from the exporter: records are read by
// seq, in batches of at most `batch` records and 4 MiB of bodies, and a batch is sent again,
// whole, until it is acknowledged. Nothing but the position survives the process, so a crash
// or a reboot costs at most the batch in flight: sent once more, with the same ids (the
// records' hashes, the spans' ids derived from them), which a receiver drops. The position is
// written after the acknowledgement and before the next batch is read (export_position.hpp).
//
// A failure waits before the next attempt: 1 s, doubling to 60 s (`retry-max`: how long a
// receiver that is back may wait for its first batch), each wait drawn between half and the
// whole of it (jitter: a fleet of machines whose collector comes back does not send
// all at once); a 429 or 503 with Retry-After waits what the receiver asked (at most 10
// minutes). Each failure is written beside the position (`status` shows it), the position
// itself unchanged. A receiver that answers 413 gets the same records in smaller batches.
//
// Records are ordered by seq and nothing else: a clock stepped back makes record times go
// backwards, never the order of sending, and lag is measured by seq as well as by time.
#pragma once

#include <atomic>
#include <cstdint>

#include "export/settings.hpp"
#include "mcpwarden/exporter.hpp"
#include "sys/result.hpp"

namespace warden::exporter {

// Runs until the journal's end (follow false) or `stop`. One exporter per destination: a
// second one for the same name is refused (a lock beside the position).
Result<ExportProgress> follow(const Settings& settings, const std::atomic<bool>& stop);

// What `status` shows for each exporter of the journal.
Result<std::vector<ExporterStatus>> exporters(const std::string& journal_path);

// The wait before attempt n (0-based) after failures: 1 s doubling to `max_ms`, with jitter
// in [half, whole].
int64_t backoff_ms(int attempt, double jitter01, int64_t max_ms = 60000);

}  // namespace warden::exporter
