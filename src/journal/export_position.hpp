// Where each exporter stands: the last record a receiver acknowledged, per destination, kept
// beside the journal (`export/NAME.json` for journal.db, `NAME.export/` for other names).
//
// The journal is the exporter's buffer: nothing is copied anywhere while a receiver is down,
// and the position is the only state an exporter keeps. It is written after the receiver's
// acknowledgement, whole (temp file, fsync, rename, fsync of the directory), so after a crash
// or a power loss it names a record that was acknowledged, never one that was not: what was
// sent after it is sent again, with the same ids (the record's hash), and a receiver drops
// what it already has. The retention reads every position before it prunes (prune.cpp), so a
// record no exporter has delivered yet is not removed without saying so.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sys/result.hpp"

namespace warden::journal {

struct ExportPosition {
    std::string destination;  // the exporter's name (a file name: [A-Za-z0-9._-])
    std::string target;    // what it sends to, for status ("otlp http://…", "syslog tls://…")
    int64_t seq = 0;       // the last record acknowledged (0: none yet)
    std::string hash{};    // that record's leaf hash (hex): its id at the receiver
    int64_t acked_ns = 0;  // when the receiver acknowledged it
    int64_t acked_ts = 0;  // that record's own time
    std::string last_error{};   // the last failure, "" after a success
    int64_t last_error_ns = 0;  // when
    int64_t pid = 0;            // the exporter that wrote it
    // The exporter's cumulative metrics as of `seq` (JSON; the exporter's own format), written
    // in the same file so that a batch read after `seq` starts from the totals of `seq`.
    std::string metrics{};
};

// The directory of the positions of the journal at `db`.
std::string export_dir(const std::string& db);
// Whether `name` can name a destination (and so a file): 1–64 of [A-Za-z0-9._-], not ".…".
bool valid_destination_name(std::string_view name);

// The position of `destination`, or a zero position (seq 0) when it has none yet.
Result<ExportPosition> read_export_position(const std::string& db, const std::string& destination);
// Every destination's position, sorted by name; a file that does not parse is an error that
// names it (a prune must not take an unreadable position for "nothing to keep").
Result<std::vector<ExportPosition>> read_export_positions(const std::string& db);
// Written whole: temp + fsync + rename + fsync(dir); the directory is created 0700.
Status write_export_position(const std::string& db, const ExportPosition& p);

}  // namespace warden::journal
