// libmcpwarden — the public C++ API.
//
// A host embeds mcpwarden's guarantees without a shim process: it spawns an MCP stdio server
// through a Supervisor, talks to it over the returned pipes, and tears the whole tree down
// — children, setsid() escapees, double-forked daemons, processes that ignore SIGTERM —
// with a report that says how each process ended. It can also scan the machine for MCP
// servers and open, append to and verify the hash-chained journal.
//
//     warden::api::Supervisor sup;
//     auto server = sup.spawn({"my-mcp-server", "--stdio"});
//     if (!server) { fprintf(stderr, "%s\n", server.error().message.c_str()); return 1; }
//     write(server->stdin_fd(), ...); read(server->stdout_fd(), ...);
//     warden::api::TeardownReport r = server->teardown();
//     return r.ok() ? 0 : 1;  // r.json for the full record
//
// Nothing here throws: failures come back as Result<T> values. Only standard-library types
// cross this header, and no internal header is included, so the API is stable across
// internal changes (docs/LIBRARY.md has the rules). The C ABI is mcpwarden/mcpwarden.h.
//
// Process-wide effects of spawn() on the host (documented, not hidden): the host becomes a
// child subreaper (orphans of a server tree reparent to it and are reaped by the teardown),
// and the server gets PDEATHSIG from the *thread* that spawned it: spawn from a thread that
// outlives the server, or set SpawnOptions::pdeathsig = 0.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "mcpwarden/audit.hpp"
#include "mcpwarden/export.h"
#include "mcpwarden/inventory.hpp"
#include "mcpwarden/process_ref.hpp"
#include "mcpwarden/result.hpp"
#include "mcpwarden/types.hpp"
#include "mcpwarden/version.h"

namespace warden::api {

using warden::ServerState;
using warden::state_name;
using warden::Stdio;           // types.hpp
using warden::TeardownCounts;  // types.hpp

struct SpawnOptions {
    Stdio in = Stdio::Pipe, out = Stdio::Pipe, err = Stdio::Inherit;
    bool use_cgroup = true;     // session cgroup when a writable cgroup v2 exists
    bool use_pidfd = true;      // pidfds when the kernel has them
    bool use_pidns = false;     // PID namespace with an init of ours (opt-in, probed)
    bool use_subreaper = true;  // make the host a child subreaper (see above)
    int pdeathsig = 9;          // signal the server gets when the spawning thread dies; 0: none
    std::string session_id{};   // [A-Za-z0-9._-]{1,64}; empty: generated
    std::string cgroup_base{};  // where the session cgroup goes; empty: the host's own cgroup
};

struct TeardownOptions {
    std::chrono::milliseconds eof_window{500};  // after closing stdin, before any signal
    std::chrono::milliseconds grace{2000};      // SIGTERM → SIGKILL
    std::chrono::milliseconds kill_wait{3000};  // bound on waiting after SIGKILL
    bool verify_ports = true;                   // re-bind the ports the tree listened on
};

using Survivor = ProcessRef;  // a process the teardown left alive, by identity

// The counts (exited in the EOF window, in the grace, killed, already gone, identity
// changed) are TeardownCounts (types.hpp), the engine's own.
struct TeardownReport : TeardownCounts {
    int targets = 0;                   // processes of the tree seen by the teardown
    std::vector<Survivor> survivors;   // must be empty
    std::optional<int> server_status;  // the server's wait status if the teardown reaped it
    double total_ms = 0;
    // The full report (targets, phases, layers, ports, notes), its commands and notes
    // redacted as the journal keeps them (credentials replaced by "***").
    std::string json;
    std::string text;  // the same for humans, for a terminal: commands as they were
    bool ok() const { return survivors.empty(); }
};

// One spawned server. Move-only. Destroying a Server that was not torn down tears it down
// with default options (nothing of the tree outlives its handle).
class MCPW_API Server {
  public:
    Server(Server&&) noexcept;
    Server& operator=(Server&&) noexcept;
    ~Server();

    pid_t pid() const;
    int pidfd() const;      // -1 without the pidfd layer
    int stdin_fd() const;   // -1 unless Stdio::Pipe (or after close_stdin)
    int stdout_fd() const;  // -1 unless Stdio::Pipe
    int stderr_fd() const;  // -1 unless Stdio::Pipe
    void close_stdin();     // EOF for the server: the spec's polite "please exit"
    const std::string& session_id() const;
    std::string layers_json() const;  // which containment layers are on, and why
    // The wait status once the server exited (non-blocking reap), else nullopt.
    std::optional<int> poll_exit();

    // Closes stdin, waits the EOF window, SIGTERMs the tree leaves first, waits the grace
    // window, SIGKILLs what is left, re-scans until stable, verifies. Idempotent: a second
    // call returns the first report.
    TeardownReport teardown(const TeardownOptions& options = {});
    bool torn_down() const;

    struct Impl;

  private:
    friend class Supervisor;
    explicit Server(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

class MCPW_API Supervisor {
  public:
    explicit Supervisor(SpawnOptions defaults = {});
    // argv[0] is searched in PATH when it has no '/'. env: extra "KEY=VALUE" entries on top
    // of the host's environment. cwd empty: the host's. A missing command is an Error with
    // code ENOENT ("cannot run 'x': command not found"); not executable: EACCES.
    Result<Server> spawn(const std::vector<std::string>& argv,
                         const std::vector<std::string>& env = {}, const std::string& cwd = {});
    Result<Server> spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                         const std::string& cwd, const SpawnOptions& options);
    const SpawnOptions& defaults() const { return defaults_; }

  private:
    SpawnOptions defaults_;
};

// ---- Inventory -------------------------------------------------------------------------

struct ServerSummary {
    pid_t root = 0, server = 0;
    std::string name;
    ServerState state = ServerState::Unknown;  // state_name() has its word
    std::string session;                       // "" when none is known
    int members = 0;
};

// scan_inventory()'s options (mcpwarden/inventory.hpp), every one of them honoured.
using InventoryOptions = ScanOptions;

struct InventoryResult {
    std::vector<ServerSummary> servers;
    std::vector<std::string> warnings;
    std::string json;  // {"servers":[…],"warnings":[…]} with every tree in full
};

MCPW_API Result<InventoryResult> inventory_scan(const InventoryOptions& options = {});

// ---- Journal ---------------------------------------------------------------------------

class MCPW_API Journal {
  public:
    // path empty: --journal's default ($MCPWARDEN_JOURNAL, $XDG_STATE_HOME/mcpwarden/…).
    static Result<Journal> open(const std::string& path = {});
    Journal(Journal&&) noexcept;
    Journal& operator=(Journal&&) noexcept;
    ~Journal();  // flushes and closes

    // Durable append of one record: kind (e.g. "host.note"), session ("" for none) and a
    // JSON object of fields (integers only, no floats). Returns the record's seq.
    Result<std::int64_t> append(const std::string& kind, const std::string& session,
                                const std::string& data_json);
    const std::string& path() const;

    struct Impl;

  private:
    explicit Journal(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

// audit_verify() (mcpwarden/audit.hpp) with a path and require_anchored alone.
using VerifyResult = AuditReport;
MCPW_API VerifyResult journal_verify(const std::string& path = {}, bool require_anchored = false);

// ---- Build ----------------------------------------------------------------------------

struct BuildInfo {
    std::string version;
    bool sanitizers = false, libsystemd = false;
    bool pidfd = false, cgroup = false, pidns = false, clone3 = false;  // compiled in
};
MCPW_API BuildInfo build_info();

}  // namespace warden::api

// The rest of the API, one concept per header (each includes mcpwarden/result.hpp, never
// this umbrella).
#include "mcpwarden/clients.hpp"
#include "mcpwarden/drill.hpp"
#include "mcpwarden/journal_query.hpp"
#include "mcpwarden/logs.hpp"
#include "mcpwarden/reap.hpp"
#include "mcpwarden/session.hpp"
#include "mcpwarden/settings.hpp"
#include "mcpwarden/status.hpp"
