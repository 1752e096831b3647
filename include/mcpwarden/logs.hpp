// libmcpwarden — the servers' own logs (`mcpwarden logs`): what each server wrote on stderr,
// kept per server identity beside the journal (docs/LOGS.md).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"

namespace warden::api {

struct LogQuery {
    std::string journal;  // empty: the default journal; its directory holds logs/
    // A server's name (its logs/<name>-<hash> directories), or a session id or a prefix of one
    // of at least 4 characters; empty: every server.
    std::string target;
    std::string since;  // only lines this recent: "10m", "2h", "3d" (as `journal --since`)
};

struct LogEntry {
    std::int64_t ts_ns = 0;
    std::string time;      // as written: "2026-12-06T17:33:51.123456Z"
    std::string server;    // the directory: "<name>-<hash>"
    std::string session;   // the session that wrote it
    std::int64_t pid = 0;  // the server's pid (0: a line of mcpwarden's before any server)
    std::string text;      // display text, redacted; "[mcpwarden] …" for mcpwarden's own lines
};

// The lines kept, oldest first (the rotated files, then the live one), of every log directory
// the target matches. An error when the logs directory cannot be read; an unknown target is an
// error naming the servers there are.
MCPW_API Result<std::vector<LogEntry>> read_logs(const LogQuery& q);

// `logs -f`: its first poll() gives what read_logs() would, each later one the lines written
// since, across rotations, restarts and hibernation (the file is the server identity's, not
// the session's), and from servers of the target whose logs appear later.
class MCPW_API LogFollower {
  public:
    static Result<std::unique_ptr<LogFollower>> open(const LogQuery& q);
    virtual ~LogFollower() = default;
    // What was written since the last call (no waiting), oldest first.
    virtual std::vector<LogEntry> poll() = 0;
};

}  // namespace warden::api
