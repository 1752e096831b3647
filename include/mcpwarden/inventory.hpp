// libmcpwarden — the inventory: every MCP server on this machine, classified, with its
// evidence and capabilities (what `mcpwarden ps` shows), and the incident record of one
// process (what `mcpwarden inspect` shows).
//
//     auto inv = warden::api::scan_inventory();
//     if (!inv) return fail(inv.error().message);
//     for (const auto& t : inv->servers)
//         if (t.state == warden::api::ServerState::LogicalOrphan)
//             printf("%d %s\n", t.root.pid, t.name.c_str());
//
// One scan reads /proc once (fds, environment *names* — never values —, network namespaces),
// the socket tables once per namespace, the journal's sessions and the stdio servers that
// detected client configs declare. Nothing here signals anything. docs/INVENTORY.md says how
// each state is decided (never by PPID or name alone). Only standard-library types; nothing
// throws. inventory_scan() of mcpwarden.hpp is the same scan, summed up as ServerSummary rows
// and the trees' JSON; its InventoryOptions are these ScanOptions.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/inventory_types.hpp"
#include "mcpwarden/process_ref.hpp"
#include "mcpwarden/result.hpp"
#include "mcpwarden/types.hpp"

namespace warden::api {

using warden::IncidentFacts;
using warden::ServerState;  // types.hpp
using warden::ServerTreeFacts;
using warden::state_name;

// ---- Capabilities, clients, orphans (mcpwarden/inventory_types.hpp) ---------------------

using warden::Capabilities;
using warden::ClientRef;
using warden::Connection;
using warden::ListeningPort;
using warden::OsOrphan;
using warden::UnixSocket;

// ---- Processes and server trees --------------------------------------------------------

// One process of the scan.
struct ProcessInfo {
    pid_t pid = 0;
    std::uint64_t starttime = 0;
    pid_t ppid = 0, pgid = 0, sid = 0;
    int tty_nr = 0;
    pid_t tpgid = -1;               // foreground process group of its terminal, -1 if none
    std::optional<uid_t> uid;       // nullopt when unreadable
    std::string user;               // user name, the uid when it has none, "?" when unreadable
    char state = '?';               // R S D Z X T t I …
    std::string comm;               // raw bytes, may contain spaces and ')'
    std::vector<std::string> argv;  // raw bytes
    std::string command;            // argv joined for display, control bytes escaped
    std::uint64_t rss_kb = 0;
    int threads = 0;
    double elapsed_seconds = 0;
    // Direct children (by ppid) not older than it (a recycled pid is no child), pid order.
    std::vector<pid_t> children;
    int server_tree = -1;  // index into Inventory::servers of the tree it is a member of
    bool zombie() const { return state == 'Z' || state == 'X'; }
};

struct Evidence {
    std::string kind;     // "journal" | "marker" | "config" | "heuristic"
    pid_t pid = 0;        // the member on which it matched
    std::string detail;   // "session 9f2c…", "cursor ~/.cursor/mcp.json [filesystem]", …
    bool strong = false;  // names the process by identity (every kind but heuristic)
};

struct TreeMember {
    ProcessRef id;
    std::string role;  // "wrapper" | "server" | "helper"
    int depth = 0;     // 0 for the tree root
    Capabilities caps;
};

// ServerTreeFacts (mcpwarden/inventory_types.hpp): root, server, name, state, state_reasons,
// client, os_orphan, supervisors, session; the scan's own, as they are.
struct ServerTree : ServerTreeFacts {
    std::vector<TreeMember> members;  // root first, depth-first
    std::vector<Evidence> evidence;   // what made it an MCP server
    // Proof enough for `reap --orphans`: a journal session, a trusted session marker, or a
    // client-config match with dead stdio. An orphan without it is a suspect: `suspect` says
    // why, and only `reap --orphans --include-suspects` selects it.
    bool proven = false;
    std::string suspect;  // "" when proven, or not an orphan
    std::string json;     // the tree as in the "servers" of `ps --json`

    const TreeMember* member(pid_t pid) const {
        for (const TreeMember& m : members)
            if (m.id.pid == pid) return &m;
        return nullptr;
    }
};

struct ScanOptions {
    bool all_users = false;          // else only the invoking user's processes are candidates
    bool use_journal = true;         // read sessions from the journal (missing: none)
    std::string journal_path{};      // empty: the default journal
    bool use_client_configs = true;  // declared servers of detected client configs ($HOME)
    std::optional<std::string> project_dir{};  // project-scope client configs
    std::chrono::seconds wedged_after{900};    // live, but no traffic for this long
};

struct Inventory {
    std::string observed_at;             // UTC, "2026-11-29T17:30:00.123Z", taken before the scan
    std::string boot_id;                 // the kernel's boot id: starttimes compare within one boot
    long clock_ticks = 0;                // starttime units per second
    std::vector<ProcessInfo> processes;  // every process of the scan, pid order
    std::vector<ServerTree> servers;
    std::vector<std::string> warnings;  // journal or client configs unreadable, …

    const ProcessInfo* find(pid_t pid) const {
        std::size_t lo = 0, hi = processes.size();
        while (lo < hi) {
            std::size_t mid = lo + (hi - lo) / 2;
            if (processes[mid].pid < pid)
                lo = mid + 1;
            else
                hi = mid;
        }
        return lo < processes.size() && processes[lo].pid == pid ? &processes[lo] : nullptr;
    }
    // The server tree `pid` is a member of, nullptr if none.
    const ServerTree* tree_of(pid_t pid) const {
        const ProcessInfo* p = find(pid);
        return p && p->server_tree >= 0 ? &servers[static_cast<std::size_t>(p->server_tree)]
                                        : nullptr;
    }
    // Every descendant of `pid` by the children links (which leave out a "child" older than
    // its parent: a recycled pid), breadth first; empty when `pid` is not in the scan.
    MCPW_API std::vector<const ProcessInfo*> descendants(pid_t pid) const;
};

// One scan. Journal or config trouble is not an error (it is in warnings); an unreadable
// /proc is.
MCPW_API Result<Inventory> scan_inventory(const ScanOptions& options = {});

// Bytes as shown to a human: control bytes and invalid UTF-8 escaped (\n, \x1b, …).
MCPW_API std::string display_bytes(std::string_view bytes);

// ---- The incident record (`mcpwarden inspect`) -----------------------------------------

struct InspectOptions {
    std::string journal_path{};  // empty: the default journal
    // Append a process.snapshot of the process to the journal before returning: evidence
    // preserved before anything acts.
    bool record = false;
    // Called with each warning of the scan as it is known, before any error is returned.
    std::function<void(const std::string&)> on_warning{};
};

// One row per suspicious process: the incident record's facts (mcpwarden/inventory_types.hpp:
// target, client, server, parent, session, state, capabilities, authorization, termination,
// follow-up), and what the API adds to them.
struct Incident : IncidentFacts {
    std::vector<Evidence> evidence;
    std::vector<std::string> warnings;
    std::optional<std::int64_t> recorded_seq;  // with InspectOptions::record
    std::string recorded_in;                   // the journal it went to
    std::string json;  // the record as `inspect --json` prints it ("recorded" included)
    std::string text;  // the human form, one field a line ("recorded:" line included)
};

// Error "no process N" when the pid is not in the scan; "cannot record the snapshot: …"
// when the journal cannot take it.
MCPW_API Result<Incident> inspect(pid_t pid, const InspectOptions& options = {});

}  // namespace warden::api
