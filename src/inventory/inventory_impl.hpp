// Inventory::Impl: what the scan has read and built so far, shared by the files of its steps
// (inventory.cpp says the order): trees.cpp finds the candidates and builds the trees,
// details.cpp reads the second look and answers the on-demand queries, classify.cpp decides
// the states and finds the remnants. Internal to src/inventory/.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "fault/faults.hpp"
#include "inventory/inventory.hpp"
#include "journal/query.hpp"
#include "proc/pipe_peers.hpp"

namespace warden::inventory {

inline const FdInfo* fd_of(const Process& p, int fd) {
    for (const auto& f : p.fds)
        if (f.fd == fd) return &f;
    return nullptr;
}

inline bool stream_fd(const FdInfo* f) {
    return f && (f->kind == FdInfo::Kind::Pipe || f->kind == FdInfo::Kind::Socket);
}

struct Candidate {
    std::vector<Evidence> evidence;
    std::string name;     // declared name, when a config matched
    std::string session;  // from the marker or the journal
};

struct JournalSession {
    journal::SessionRow row;
    nlohmann::json start;  // session.start data
    bool client_lost = false;
    std::string client_lost_cause;
};

// What classify() decides on, read by read_details() so that classify() reads nothing: the
// process the client talks to (the root, or the relay of a supervised tree) and the live
// processes outside the tree holding the other end of its stdin (writers) and its stdout
// (readers), the launcher first.
struct ClientEnds {
    const Process* front = nullptr;
    std::vector<const Process*> writers, readers;
};

struct Inventory::Impl {
    explicit Impl(const ScanOptions& o) : opt(o) {}
    ScanOptions opt;
    int64_t observed_at_ns = 0;
    uid_t me = 0;  // the user scanning

    // ---- The scan, in order (Inventory::scan) ----
    Status read_processes();
    void load_journal();
    std::map<pid_t, Candidate> find_candidates() const;
    void build_trees(const std::map<pid_t, Candidate>& candidates);
    void read_details();
    void attach_capabilities();
    void classify_trees();
    void find_remnants();
    // find_remnants(), in its steps.
    using TreesByGroup = std::unordered_map<pid_t, std::vector<size_t>>;
    TreesByGroup trees_by_group() const;
    std::unordered_map<pid_t, std::vector<const Process*>> left_behind(
        const TreesByGroup& trees_in_group, const Faults& faults);
    void plant_remnants(pid_t pgid, const std::vector<const Process*>& procs,
                        const std::vector<size_t>& group_trees, const Faults& faults);
    std::string alive_in_group(pid_t pgid, const std::unordered_set<pid_t>& left) const;
    std::string live_in_tree(const Process& top);

    // ---- What the steps read and build ----
    // Two passes. read_processes() reads what finding and classifying needs of every process
    // (stat, the uid, cmdline, the MCPWARDEN_SESSION marker, fd links); what only capabilities
    // need (exe, cwd, env names, netns) is read later, identity-checked, for the processes
    // that need it (`mcpwarden run` candidates for supervisors, members, inspect's target):
    // `details_read` holds those. Which end of a pipe an fd holds is read only for the
    // holders of a pipe whose writers are asked for (a server's stdin): `modes_read`.
    // A process gone (or its pid recycled) by then keeps these empty: no capability, and
    // not a writer of any pipe.
    ProcessTable table;
    std::unique_ptr<PipePeers> pipes;
    std::unordered_set<pid_t> details_read;
    std::unordered_set<pid_t> modes_read;
    std::unordered_set<uint64_t> pipes_refreshed;
    // What only a member's capabilities or a socket on a stdin need is read on first use,
    // not by every scan: the /proc/net tables of every namespace, the sock_diag dump of unix
    // peers, and the socket inode -> holders index. A machine without MCP servers (or whose
    // servers hold no sockets) never pays for them. Loaded once; the Inventory is not shared
    // between threads.
    std::unique_ptr<SocketTables> socket_tables;
    using Peers = std::unordered_map<uint64_t, uint64_t>;  // inode -> peer inode (own netns)
    using Holders = std::unordered_map<uint64_t, std::vector<std::pair<const Process*, int>>>;
    std::optional<Peers> unix_peers_loaded;
    std::optional<Holders> socket_holders_loaded;
    std::vector<std::string> warnings;
    std::string journal_path;
    std::map<std::string, JournalSession> sessions;  // by id, when read
    std::optional<uid_t> journal_owner;              // owner of the journal read (sessions' owner)
    std::vector<ServerTree> trees;
    std::vector<ClientEnds> client_ends;           // per tree, by read_details()
    std::unordered_map<pid_t, size_t> tree_index;  // member or supervisor pid -> tree

    // build_trees(), in its steps.
    struct Launch;  // the candidates that one root launched, climbed to
    std::map<pid_t, Launch> climb_to_roots(const std::map<pid_t, Candidate>& candidates) const;
    std::vector<pid_t> outermost_first(const std::map<pid_t, Launch>& launches) const;
    void plant_tree(pid_t root, Launch& launch, const std::map<pid_t, Launch>& launches);
    const Process* launch_server(const Launch& launch) const;

    // Decisions on what was read: no I/O.
    void classify(ServerTree& t, const ClientEnds& ends) const;
    std::unordered_set<pid_t> inside_of(const ServerTree& t) const;
    const Process* facing_client(const ServerTree& t) const;

    // On demand (the steps above, and the public queries on any process of the scan): each
    // reads /proc at most once per process, pipe or table.
    // `inside`: processes whose end of the pipe does not matter (the tree's own members):
    // their pipe modes are not read for this.
    std::vector<const Process*> stdin_writers(const Process& p,
                                              const std::unordered_set<pid_t>* inside = nullptr);
    std::vector<const Process*> stdout_readers(const Process& p,
                                               const std::unordered_set<pid_t>* inside = nullptr);
    // The live holders of the other end of p's fd 0 (writers) or fd 1 (readers).
    std::vector<const Process*> stdio_peers(const Process& p, int fd,
                                            const std::unordered_set<pid_t>* inside);
    ClientEnds find_client_ends(const ServerTree& t);
    std::optional<std::string> trusted_marker(const Process& p) const;
    Capabilities capabilities(const Process& p);
    std::optional<SessionInfo> session_info(const std::string& id) const;
    const SocketEntry* socket(const Process& p, uint64_t inode);
    const Process& read_details_of(const Process& p);
    void read_pipe_modes(uint64_t inode, const std::unordered_set<pid_t>* inside = nullptr);
    const Peers& unix_peer();
    const Holders& socket_holders();
};

// The JSON of a tree's parts that the incident record shows too (inventory_json.cpp).
nlohmann::json client_json(const ClientRef& c);
nlohmann::json evidence_json(const std::vector<Evidence>& ev);

}  // namespace warden::inventory
