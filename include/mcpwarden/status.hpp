// libmcpwarden — the sessions running now (`mcpwarden status`): what the journal knows of
// each open session whose relay is still alive, with what /proc says of its tree today.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/process_ref.hpp"
#include "mcpwarden/result.hpp"
#include "mcpwarden/types.hpp"

namespace warden::api {

using warden::SessionState;  // types.hpp
using warden::state_name;

struct LiveSession {
    std::string session;
    std::string name;  // the server's display name
    // state_name() has its word; while it sleeps, server is pid 0.
    SessionState state = SessionState::Running;
    ProcessRef relay;            // `mcpwarden run`, the journal's writer
    ProcessRef client;           // the MCP client (the relay's parent at start); pid 0: unknown
    std::string client_command;  // its executable (/proc/PID/exe), else its argv[0]
    ProcessRef keeper, server;
    std::vector<std::string> server_argv;
    double uptime_seconds = 0;   // since session.start
    std::int64_t calls = 0;      // requests on record
    std::int64_t in_flight = 0;  // of which not answered yet
    std::string last_call;       // "tools/call echo", "" when none
    std::optional<double> last_call_age_seconds;
    std::int64_t processes = 0;       // the server and its descendants alive now
    std::uint64_t rss_kb = 0;         // their resident memory, summed
    std::vector<std::string> layers;  // containment layers active (session.start)
    // A client session of `run --share` (docs/SHARING.md): the session of the shared tree that
    // serves it ("" otherwise); its relay is then the user's broker, its server the tree's.
    std::string shared_tree;
    // Records of the session the journal could not write: counted in its journal.degraded
    // records, or kept in the journal's lock file until a writer records them.
    std::int64_t journal_lost = 0;
    // --memory-max, --tasks-max, --cpu-max: each with what the tree holds now ("mem
    // 12.3MiB/64MiB tasks 3/32 cpu 50%"); "" when none were asked for.
    std::string limits;
    // --restart on-failure, while the session is restarting or held: what ended the last
    // server (session.crash's summary), the starts the limit counts within its interval, and
    // when the next start is due (ns since the epoch; 0: as soon as the dead tree is torn
    // down). The limit itself: --restart-burst starts within --restart-interval.
    std::string restart_cause;
    std::int64_t restart_due_ns = 0;
    std::int64_t restart_starts = 0;
    std::int64_t restart_burst = 0, restart_interval_ms = 0;
    // Calls the sandbox's filter refused the server so far (its newest sandbox.denied record:
    // docs/SANDBOX.md, "Denials counted"), and by call ("socket" → 2); 0 and empty when none
    // were, or they are not counted.
    std::int64_t sandbox_denied = 0;
    std::map<std::string, std::int64_t> sandbox_denied_by_call;
};

// The user's broker of `run --share` (docs/SHARING.md) and the shared trees it runs now, read
// from the live sessions: a client session names its tree (shared_tree) and its relay is the
// broker; a tree's own session is that of a `run` whose client is the broker. A tree that has
// no client now (lingering) is found through its run's parent, when that is `mcpwarden broker`
// of this same executable, the same process (starttime) the session recorded.
struct SharedTree {
    LiveSession tree;                  // the tree's own session: its run, keeper, server
    std::vector<LiveSession> clients;  // the client sessions joined to it now
};
struct ShareBroker {
    ProcessRef broker;
    std::vector<SharedTree> trees;
};
MCPW_API std::vector<ShareBroker> share_brokers(const std::vector<LiveSession>& live);

// Records that could not be written and whose count is not on record yet either: kept in the
// journal's lock file (a writer running on a full disk, or one gone before it could record
// them) until the next writer records it. Also those of sessions live_sessions cannot list
// (their session.start itself was not written).
MCPW_API std::int64_t journal_losses_pending(const std::string& journal_path = {});

// Sessions of the journal (path empty: the default one) that have no session.end and whose
// relay (pid, starttime, boot) still runs, oldest first. A journal that does not exist yet
// has none.
MCPW_API Result<std::vector<LiveSession>> live_sessions(const std::string& journal_path = {});

}  // namespace warden::api
