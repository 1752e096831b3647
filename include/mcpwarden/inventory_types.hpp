// libmcpwarden — the inventory's value types, defined once: what a process can reach and the
// incident record of one process. src/proc reads sockets into them, src/inventory fills them
// and builds its records on them, and the API (mcpwarden/inventory.hpp) hands them out as
// they are: warden::api names each of them. Only standard-library types.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mcpwarden/process_ref.hpp"
#include "mcpwarden/types.hpp"

namespace warden {

// ---- What a process can reach ----------------------------------------------------------

struct ListeningPort {
    bool udp = false, ipv6 = false;
    std::string addr;  // local address, "127.0.0.1", "::"
    std::uint16_t port = 0;
    std::uint64_t inode = 0;
    int fd = -1;  // the fd of the process that holds it
};

struct Connection {
    std::string proto;  // "tcp", "tcp6", "udp", "udp6"
    std::string local_addr, remote_addr;
    std::uint16_t local_port = 0, remote_port = 0;
    std::string state;  // "ESTABLISHED", … ("" for udp)
};

struct UnixSocket {
    int fd = -1;
    std::uint64_t inode = 0;
    std::string path;  // bound path, "@name" for abstract, "" for unnamed
    // The process on the other end, when resolvable (sock_diag peer inode, matched against
    // every fd table of the scan): an ssh-agent, a credential helper, the client.
    pid_t peer_pid = 0;
    std::string peer_command;
};

// What a process can reach: what a responder needs before deciding anything.
struct Capabilities {
    std::vector<ListeningPort> listening;
    std::vector<Connection> connections;  // connected TCP/UDP with a remote address
    std::vector<UnixSocket> unix_sockets;
    std::vector<std::string> credential_env;  // credential-looking env *names*, never values
    std::string cwd, exe;
    std::uint64_t rss_kb = 0;
    double elapsed_seconds = 0;
    std::vector<ProcessId> children;
    // The same as the "capabilities" object of `ps --json`: filled where the API hands the
    // capabilities out, empty inside the scan (which writes JSON only for what it prints).
    std::string json;
};

// ---- Clients and orphans -------------------------------------------------------------------

struct ClientRef {
    ProcessId id;
    std::string command;  // its command line, or the journal's client_argv when it is gone
    bool alive = false;
    std::string how;  // "holds stdin write end (fd N)" | "journal session.start"
};

// Not a state but a clue beside it: reparented to PID 1, or to a subreaper not its launcher.
struct OsOrphan {
    pid_t parent = 0;    // 1, or the subreaper's pid
    std::string reason;  // "reparented to PID 1" | "reparented to subreaper 812 (systemd --user)"
};

// ---- Server trees ---------------------------------------------------------------------------

// What the scan says of one MCP server tree, beside its members and evidence (whose library
// types point into the scan): the library's tree (src/inventory) and the API's ServerTree
// both extend it.
struct ServerTreeFacts {
    ProcessId root;    // top of the tree (the outermost wrapper a client launched, or the server)
    ProcessId server;  // the MCP server process itself (first non-wrapper below the root)
    std::string name;  // declared name, or the server's argv basename
    ServerState state = ServerState::Unknown;  // state_name() has its word
    std::vector<std::string> state_reasons;    // why this state, one line each
    std::optional<ClientRef> client;           // named when live (and when the journal knows)
    std::optional<OsOrphan> os_orphan;         // the clue, shown beside the state
    // mcpwarden's own relay/keeper when the tree runs under `mcpwarden run`: they are its
    // supervisor, never listed as servers.
    std::vector<ProcessId> supervisors;
    std::string session;  // from the journal or the MCPWARDEN_SESSION marker; "" if none
};

// ---- The incident record (`mcpwarden inspect`) ------------------------------------------

// What the incident record says of one process, from /proc plus the journal. What nothing
// recorded is empty (text and JSON say "unknown"), never guessed. The library's record
// (src/inventory) and the API's Incident are this, each with what only it carries.
struct IncidentFacts {
    ProcessId target;  // the inspected process
    std::string target_command;
    std::optional<ClientRef> client;
    ProcessId server;
    std::string server_command;
    pid_t ppid = 0, pgid = 0, sid = 0;
    std::string parent_command;
    std::string session;
    ServerState state = ServerState::Unknown;
    std::vector<std::string> state_reasons;  // why this state, one line each
    std::optional<OsOrphan> os_orphan;
    Capabilities caps;
    std::string authorization = "not revoked";  // or "revoked at … by … (scope)"
    // The last process.signal/exit the journal knows for the target, e.g. "SIGTERM -> exited
    // 0", or "".
    std::string termination;
    std::vector<std::string> follow_up;  // what still needs a human
};

}  // namespace warden
