// src/inventory — every MCP server on this machine, classified, with its evidence.
//
// This folder owns `ps` / `inspect`'s model (docs/ARCHITECTURE.md, "The incident practice":
// inventory before any signal): one scan of /proc (fds, environment *names*, network namespaces),
// each /proc/net table parsed once per namespace, pipe peers matched by inode, plus the journal and
// the stdio servers that detected client configs declare. From that it builds *server trees*: the
// wrappers a client launched (`sh -c`, `npx`, `npm exec`, `uvx` …), the server they started and
// everything below it, each member with its capabilities (ports, connections, unix sockets,
// credential-looking env names — never values — cwd, exe, RSS).
//
// Every tree carries the evidence that made it an MCP server, one item per kind that
// matched, and a state with the evidence for that state:
//
//   live            the write end of the server's stdin, or the read end of its stdout, is
//                   held by a live process outside the tree: that process is named as the client
//   logical-orphan  nobody holds either end, the session's relay and keeper are gone, or the
//                   journal says the client went away
//   wedged          client alive, but the journal shows no traffic for longer than a
//                   threshold (or a request without answer that old)
//   unknown         nothing to decide on (stdin not a pipe, no journal session)
//   os-orphan       not a state but a clue beside it: reparented to PID 1, or to a
//                   subreaper that is not its launcher. Never a verdict by itself.
//
// A process outside every tree that a dead server left (stdin /dev/null, re-parented) is a
// tree of its own when its process group holds a server tree: a remnant (docs/INVENTORY.md).
//
// Nothing here signals anything. `reap` consumes Inventory/ServerTree and the incident
// record; docs/INVENTORY.md says how each decision is made and why never by PPID or name.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "clients/declared_server.hpp"
#include "journal/journal.hpp"
#include "mcpwarden/inventory_types.hpp"
#include "mcpwarden/types.hpp"
#include "proc/process_table.hpp"
#include "proc/sockets.hpp"
#include "sys/result.hpp"

namespace warden::inventory {

// ---- Evidence ------------------------------------------------------------------------

enum class EvidenceKind {
    journal_session,  // a journal session.start names this process exactly (pid+starttime+boot)
    session_marker,   // MCPWARDEN_SESSION=<id> in its environment
    client_config,    // argv matches a stdio server declared in a detected client config
    heuristic,        // stdin+stdout are pipes/socketpairs AND argv matches an MCP launcher/name
    // A process left by a dead server (stdin /dev/null or closed, reparented, no reader of
    // its stdout) in the process group of a server tree. `dead_job`: everything else alive
    // in that group is a proven orphaned server tree, and the group's leader is gone or one
    // of them — the job that launched it is dead (proof, with its dead stdio). `remnant`:
    // the group still has other live processes (weak: a suspect).
    dead_job,
    remnant,
};
const char* evidence_name(EvidenceKind k);  // "journal", "marker", "config", "heuristic",
                                            // "dead-job", "remnant"

struct Evidence {
    EvidenceKind kind = EvidenceKind::heuristic;
    pid_t pid = 0;       // the member on which it matched
    std::string detail;  // "session 9f2c…", "cursor ~/.cursor/mcp.json [filesystem]", …
    // Strong evidence names the process by identity (journal, marker) or by what declared
    // or launched it (config, dead-job). A heuristic or a remnant alone is never proof
    // (ServerTree::proven(), docs/REAP.md).
    bool strong() const { return kind != EvidenceKind::heuristic && kind != EvidenceKind::remnant; }
};

// ---- Capabilities ----------------------------------------------------------------------

// What a process can reach (Capabilities, ListeningPort, Connection, UnixSocket), and the
// ClientRef and OsOrphan of a tree: mcpwarden/inventory_types.hpp, the API's types as they are.

// True for env names of secrets: a word of the name (split at '_', '-', '.') is token,
// secret, password, key, credential, auth, … (GITHUB_TOKEN, OPENAI_API_KEY, PGPASSWORD,
// SSH_AUTH_SOCK), never for certificate bundles (AWS_CA_BUNDLE), nor for names that end in
// a place (…_URL, …_PATH, …_FILE, …_DIR, …_HOST: ANTHROPIC_BASE_URL). Case-insensitive.
bool credential_like(std::string_view env_name);

// ---- Sessions ----------------------------------------------------------------------------

// A session id as `mcpwarden run` makes them: 1 to 64 characters of [A-Za-z0-9._-]. An
// MCPWARDEN_SESSION value of any other shape is nobody's session (it names no journal
// session and no cgroup), whatever else it holds.
bool valid_session_id(std::string_view id);

// ---- Server trees ------------------------------------------------------------------------

enum class Role {
    wrapper,  // sh -c / npx / npm exec / uvx / bunx / pipx run / env … that launched the server
    server,   // the MCP server process itself
    helper,   // anything below the server
};
const char* role_name(Role r);  // "wrapper" | "server" | "helper"

struct Member {
    const Process* proc = nullptr;  // into Inventory::table(); valid while the Inventory lives
    Role role = Role::helper;
    int depth = 0;  // 0 for the tree root
    Capabilities caps;
};

using State = ServerState;  // mcpwarden/types.hpp, with state_name()
using warden::state_name;

// What the journal knows about the tree's session (when it has one).
struct SessionInfo {
    std::string id;
    std::string journal_state;      // the sessions projection: "open", "ended", "orphaned", …
    bool client_lost = false;       // a session.client_lost record exists
    std::string client_lost_cause;  // its cause
    int64_t started_ns = 0;
    int64_t last_traffic_ns = 0;      // last activity.request/response (or start)
    int64_t in_flight = 0;            // requests without answer
    std::optional<ClientRef> client;  // session.start's client identity
    // The session's relay (session.start's writer) and keeper, by identity, with whether each
    // is alive. The session lives as long as one of them does, not as long as its client.
    std::vector<ClientRef> supervisors;
    bool supervisor_alive() const {
        for (const auto& s : supervisors)
            if (s.alive) return true;
        return false;
    }
};

// Root, server, name, state and its reasons, client, os-orphan clue, supervisors, session:
// ServerTreeFacts (mcpwarden/inventory_types.hpp), what the API's ServerTree hands out.
struct ServerTree : ServerTreeFacts {
    std::vector<Member> members;  // root first, depth-first order
    std::vector<Evidence> evidence;
    std::optional<SessionInfo> journal;

    bool has_strong_evidence() const;
    // Proof enough for a destructive selection by --orphans: a journal session or a trusted
    // session marker (identity), or a client-config match on a tree whose stdio is dead (a
    // logical orphan). Anything less — a name heuristic alone, a config match on a process
    // with no client end to follow — makes the tree a suspect: shown, never selected unless
    // asked for (--include-suspects).
    bool proven() const;
    // "" when proven(); else why the tree is only a suspect, one line.
    std::string suspect_reason() const;
    const Member* member(pid_t pid) const;
    // Member identities, leaves first (what a teardown wants).
    std::vector<ProcessId> leaves_first() const;
};

struct ScanOptions {
    bool all_users = false;         // else only the invoking user's processes are candidates
    bool use_journal = true;        // read sessions from the journal (missing journal: none)
    std::string journal_path = {};  // empty: journal::resolve_path()
    // The servers client configs declare, read by the caller (clients::declared_servers_here):
    // a process that runs one's command is a candidate, named after it. The scan reads no
    // config itself. An error (no home to look in) is said among the warnings.
    Result<std::vector<clients::DeclaredServer>> declared = std::vector<clients::DeclaredServer>{};
    std::chrono::seconds wedged_after{900};
    bool unix_peers = true;  // resolve unix socket peers through sock_diag (own netns)
};

class Inventory {
  public:
    // One scan: /proc (stat, uid, cmdline, the MCPWARDEN_SESSION marker, fd links), socket
    // tables once per network namespace, pipe peers, journal sessions, declared servers.
    // Journal or config trouble is not an error: it is reported in warnings() and that
    // evidence is absent. A second, identity-checked pass reads exe, cwd, env names and the
    // network namespace only where used: members' capabilities, `X run …` processes
    // (supervisor check), capabilities() and snapshot_event() targets; in table() they are
    // empty (net_ns 0) for the rest. Pipe access modes (FdInfo::flags) are read only for the
    // holders of a pipe whose writers were asked for (a tree's stdin, stdin_writers()); -1
    // elsewhere. A process gone by its second look keeps those fields empty. Socket tables
    // and unix peers are read on first use. Not for use from several threads at once.
    static Result<Inventory> scan(const ScanOptions& options = {});
    Inventory(Inventory&&) noexcept;
    Inventory& operator=(Inventory&&) noexcept;
    ~Inventory();

    const ProcessTable& table() const;
    const std::vector<ServerTree>& servers() const;
    // The tree that has `pid` as a member (or as its supervisor); nullptr if none.
    const ServerTree* tree_of(pid_t pid) const;
    // Capabilities of any process of the scan (members have them precomputed).
    Capabilities capabilities(const Process& p) const;
    // The writers of p's stdin pipe (or socketpair peer), other than p.
    std::vector<const Process*> stdin_writers(const Process& p) const;
    // The readers of p's stdout pipe (or the holders of its socketpair peer), other than p.
    std::vector<const Process*> stdout_readers(const Process& p) const;
    // p's MCPWARDEN_SESSION value when it counts: a valid session id, on a process of the
    // session owner's uid (the owner of the journal that knows the session, else the user
    // scanning) or inside the session's own cgroup (`…/mcpwarden-ID/…`). Session ids are
    // world-readable (cgroup directory names): another user's planted marker neither joins
    // a session nor blocks its reap. nullopt otherwise.
    std::optional<std::string> trusted_marker(const Process& p) const;
    const std::vector<std::string>& warnings() const;
    int64_t observed_at_ns() const;
    const std::string& journal_path() const;  // "" when no journal was read

    struct Impl;

  private:
    explicit Inventory(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

nlohmann::json capabilities_json(const Capabilities& c);
nlohmann::json tree_json(const ServerTree& t);

// ---- The incident record (docs/ARCHITECTURE.md, "The incident practice") ----------------

// The incident record of one process: its facts (mcpwarden/inventory_types.hpp, what the API's
// Incident hands out), the evidence that made its tree an MCP server, and what the journal
// adds for `inspect`'s text and JSON.
struct IncidentRecord : IncidentFacts {
    int64_t observed_at_ns = 0;
    std::vector<Evidence> evidence;
    std::optional<int64_t> revoked_ns;
    std::string revoked_by;
    std::optional<int64_t> last_success_ns, last_attempt_ns;
    std::string action_target, action_operation;  // tool name, method of the last attempt
    std::string action_result;                    // outcome, or "no answer" / remote id
};

// Builds the record for `pid` (any process of the scan; inside a tree it takes the tree's
// client, session and state). Error when pid is not in the scan.
Result<IncidentRecord> incident_record(const Inventory& inv, pid_t pid);
nlohmann::json incident_json(const IncidentRecord& r);
std::string incident_text(const IncidentRecord& r);  // the human form, one field a line

// The process.snapshot event for `pid` (reason e.g. "inspect", "reap"), children from the
// same scan. Error when pid is not in the scan.
Result<journal::Event> snapshot_event(const Inventory& inv, pid_t pid, std::string_view reason);

// The record `reap` appends when it revokes a session's authority; inspect reads it back.
// kind "authorization.revoked", data {pid, starttime, scope, operator, reason}.
inline constexpr const char* kRevokeKind = "authorization.revoked";
journal::Event revoke_event(std::string session, ProcessId target, std::string_view scope,
                            std::string_view operator_name, std::string_view reason);

}  // namespace warden::inventory
