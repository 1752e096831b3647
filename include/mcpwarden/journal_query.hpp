// libmcpwarden — reading the journal: its sessions and requests (the projections, with
// filters), every record of one session, export as OTLP-JSON or NDJSON lines, and the
// reconcile that marks sessions whose writer died. What `mcpwarden journal …` prints.
// Reads are read-only connections; only reconcile appends. docs/JOURNAL.md has the records.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"
#include "mcpwarden/types.hpp"

namespace warden::api {

struct JournalFilter {
    // Only what started within this long ("30m", "2h", "1d", "45s") or after these Unix
    // seconds; empty: all.
    std::string since;
    std::string server;   // substring of the server name
    std::string tool;     // exact tool name
    std::string outcome;  // ok | jsonrpc_error | tool_error | in-flight | abandoned | unresolved
    std::string session;  // exact session id
};

struct JournalSession {
    std::string session, server, state, end_reason;
    std::int64_t start_seq = 0, started_ns = 0, writer_pid = 0;
    std::optional<std::int64_t> ended_ns, exit_status;
    std::int64_t requests = 0, in_flight = 0;
    // The session a client ran just before this one on a copy of the server, for
    // `server/discover` alone (its probe of the protocol era); "" when none.
    std::string probed_by;
};

struct JournalRequest {
    std::string session, request_id, method, tool, outcome;
    std::int64_t request_seq = 0, started_ns = 0;
    std::optional<std::int64_t> resolved_seq, duration_ns, bytes;
};

struct JournalRecord {
    std::int64_t seq = 0, ts = 0;  // ts: nanoseconds since the epoch
    std::string kind, session, origin;
    std::string body;  // the record as stored (canonical JSON)
};

struct ReconcileResult {
    std::vector<std::string> orphaned;  // sessions marked orphaned now
    std::int64_t unresolved = 0;        // requests marked unresolved now
    std::int64_t alive = 0;             // open sessions whose writer still runs (left alone)
    std::vector<std::string> problems;  // intent files not (wholly) recovered, one line each
};

// What `journal prune` removes: records older than `older_than` ("90d", "12h", "30m") and/or
// the oldest records beyond `max_size` ("64MiB", "1GiB"), up to the newest signed checkpoint
// that leaves them all behind (that checkpoint is the anchor `audit verify` starts from).
struct PruneRequest {
    std::string older_than;
    std::string max_size;
    std::string export_to;  // write the removed records here first (NDJSON, a new file)
    bool compact = true;    // VACUUM afterwards so the file shrinks
    // "hold" (default): records an exporter has not delivered stay (docs/EXPORT.md);
    // "allow": they go too, and the journal.pruned record names them.
    std::string export_gap;
};

struct PruneResult {
    std::int64_t anchor_seq = 0;  // 0: nothing removed
    std::int64_t removed = 0, kept = 0;
    std::string exported;  // export_to, when records were written there
    // Records kept for an exporter ("NAME: N records after seq P"), or removed undelivered
    // with export_gap "allow".
    std::vector<std::string> held, unexported;
};

using warden::ExportFormat;  // types.hpp

// path empty: the default journal. Sessions newest last; requests in seq order.
MCPW_API Result<std::vector<JournalSession>> journal_sessions(const std::string& path,
                                                              const JournalFilter& filter = {});
MCPW_API Result<std::vector<JournalRequest>> journal_activity(const std::string& path,
                                                              const JournalFilter& filter = {});
MCPW_API Result<std::vector<JournalRecord>> journal_session_records(const std::string& path,
                                                                    const std::string& session);
MCPW_API Result<ReconcileResult> journal_reconcile(const std::string& path = {});
MCPW_API Result<PruneResult> journal_prune(const std::string& path, const PruneRequest& request);

// "otlp-json" | "ndjson".
MCPW_API Result<ExportFormat> parse_export_format(const std::string& text);
// Every record after since_seq in seq order, one line each (ending in '\n') handed to
// `sink`; stops early when the sink returns false. Argument previews are left out unless
// include_content. Returns how many lines the sink took.
MCPW_API Result<std::int64_t> journal_export(const std::string& path, std::int64_t since_seq,
                                             ExportFormat format, bool include_content,
                                             const std::function<bool(const std::string&)>& sink);

}  // namespace warden::api
