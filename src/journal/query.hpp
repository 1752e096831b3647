// Reading the journal: the session and activity projections with filters, the records of one
// session, and export as OTLP-JSON or NDJSON lines. Read-only (query_only connections).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "journal/journal.hpp"
#include "sys/result.hpp"

namespace warden::journal {

struct Filter {
    int64_t since_ns = 0;   // started at or after
    std::string server{};   // substring of the server name
    std::string tool{};     // exact tool name
    std::string outcome{};  // ok | jsonrpc_error | tool_error | in-flight | abandoned | unresolved
    std::string session{};  // exact session id
};

struct SessionRow {
    std::string session, server, state, end_reason, writer_boot_id;
    int64_t start_seq = 0, started_ns = 0, state_seq = 0, writer_pid = 0;
    std::optional<int64_t> ended_ns, exit_status;
    int64_t requests = 0, in_flight = 0;
    std::string probed_by;  // the probe session that came before it (session.probed_by), if any
};

struct ActivityRow {
    std::string session, request_id, method, tool, outcome;
    int64_t request_seq = 0, started_ns = 0;
    std::optional<int64_t> resolved_seq, ended_ns, duration_ns, bytes;
};

struct Record {
    int64_t seq = 0, ts = 0;
    std::string kind, session, origin, body;
};

// The probe session a client ran just before `session` (journal/journal.hpp,
// session_probed_by): one the same client (`client`, as session.start names it) started, that
// ended no more than `bound` before `started_ns`, and that asked server/discover and nothing
// else; nullopt when there is none.
struct ProbeSession {
    std::string session;
    int64_t ended_ns = 0;
};
Result<std::optional<ProbeSession>> probe_session_for(const std::string& path,
                                                      const std::string& session,
                                                      const ProcessId& client, int64_t started_ns,
                                                      std::chrono::milliseconds bound);

Result<std::vector<SessionRow>> list_sessions(const std::string& path, const Filter& f);
Result<std::vector<ActivityRow>> list_activity(const std::string& path, const Filter& f);
Result<std::vector<Record>> session_records(const std::string& path, const std::string& session);
// A process as records store it, {"pid":…,"starttime":…}, and back (zero when `j` is not
// such an object).
Json identity_json(const ProcessId& p);
ProcessId identity_of(const Json& j);

// The sessions of boot `boot_id` whose end is not on record (state running or client_lost),
// each with the `data` of its session.start (writer, keeper, server…), in start order. One
// query over the sessions projection: what every `mcpwarden run` asks (reap/dead_sessions.cpp).
struct UnendedSession {
    std::string session;
    Json start;  // session.start data; null when its body does not parse
};
Result<std::vector<UnendedSession>> unended_sessions(const std::string& path,
                                                     const std::string& boot_id);
// Whether `session` has its session.start on record (one indexed lookup, not its records).
Result<bool> has_session_start(const std::string& path, const std::string& session);
// The newest `server.catalog` record whose body holds `key` (a server identity hash, 64 hex
// digits: nothing else in a catalog's body holds it by chance); nullopt when there is none.
// A partial index on the catalogs (store.cpp) keeps this from reading the other records.
Result<std::optional<Record>> newest_server_catalog(const std::string& path, std::string_view key);
// Streams records with seq > since_seq in seq order; stops early when `fn` returns false.
Status for_each_record(const std::string& path, int64_t since_seq,
                       const std::function<bool(const Record&)>& fn);

// A read-only connection kept open for a follower of the journal (the exporter): records
// after a seq in bounded batches, each with its leaf hash, and single lookups.
class RecordReader {
  public:
    static Result<RecordReader> open(const std::string& path);
    RecordReader(RecordReader&&) noexcept;
    RecordReader& operator=(RecordReader&&) noexcept;
    ~RecordReader();

    struct Row {
        Record record;
        std::string leaf_hex;
    };
    // Up to `max_records` records with seq > since_seq, in seq order, stopping early once
    // their bodies add up to `max_bytes`.
    Status read_after(int64_t since_seq, size_t max_records, size_t max_bytes,
                      std::vector<Row>& out);
    Result<std::optional<Row>> at(int64_t seq);
    // The session.start of `session` (the projection's start_seq), if on record.
    Result<std::optional<Row>> session_start(const std::string& session);
    // The newest seq (0 for an empty journal) and the first seq kept (after a prune).
    Result<int64_t> head();
    Result<int64_t> first_seq();

  private:
    RecordReader();
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

Result<ExportFormat> parse_export_format(std::string_view text);  // "otlp-json" | "ndjson"
// One line (with '\n') for a record. Argument previews ("arguments" in activity.request) are
// left out unless include_content: content never leaves by default.
std::string export_line(const Record& r, ExportFormat format, bool include_content = false);

// "1h", "30m", "2d", "45s" → nanoseconds before now as an absolute time; or a plain integer
// of Unix seconds.
Result<int64_t> parse_since(std::string_view text, int64_t now);

}  // namespace warden::journal
