// Socket tables from /proc/net/{tcp,tcp6,udp,udp6,unix}, keyed by inode.
//
// A process's fd table names its sockets only as `socket:[INODE]`; what a socket *is*
// (protocol, local and remote address, TCP state, unix path) lives in the per-network-
// namespace tables under /proc/PID/net/. As lsof and psutil do, each table is parsed once
// into an inode-keyed map and the fds are matched against it; unlike them, the tables are
// read once per network namespace (through a pid inside it), so a process in a container
// or `unshare -n` is attributed against its own namespace, not ours.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "mcpwarden/inventory_types.hpp"
#include "proc/process.hpp"
#include "sys/result.hpp"

namespace warden {

class ProcessTable;

struct SocketEntry {
    enum class Proto { Tcp, Udp, Unix };
    Proto proto = Proto::Tcp;
    bool ipv6 = false;
    uint64_t inode = 0;
    std::string local_addr, remote_addr;  // "127.0.0.1", "::1"; empty for unix
    uint16_t local_port = 0, remote_port = 0;
    int state = 0;      // kernel TCP state number (1 ESTABLISHED … 10 LISTEN); unix: SS_*
    std::string path;   // unix: bound path ("@name" for abstract), may be empty
    int unix_type = 0;  // unix: SOCK_STREAM, SOCK_DGRAM, SOCK_SEQPACKET

    // TCP in LISTEN, or UDP bound to a local port with no peer.
    bool listening() const;
    // TCP ESTABLISHED, or UDP connected to a peer.
    bool connected() const;
    // "tcp", "tcp6", "udp", "udp6", "unix".
    std::string proto_name() const;
    // "LISTEN", "ESTABLISHED", … for TCP; "" otherwise.
    std::string state_name() const;
};

// The sockets of one network namespace.
class SocketTable {
  public:
    // Reads /proc/<pid>/net/{tcp,tcp6,udp,udp6,unix}, i.e. the tables of pid's network
    // namespace. Tables the kernel lacks (no IPv6) are skipped; an error only if pid is gone
    // or none could be read.
    static Result<SocketTable> load_for(pid_t pid);
    // Parses one table's text (exposed for tests).
    void add_inet(std::string_view text, SocketEntry::Proto proto, bool ipv6);
    void add_unix(std::string_view text);

    const SocketEntry* lookup(uint64_t inode) const;
    size_t size() const { return by_inode_.size(); }

  private:
    std::unordered_map<uint64_t, SocketEntry> by_inode_;
};

// One SocketTable per network namespace of the processes in a table. Needs a scan with
// kFds | kNetNs; a process whose ns/net was unreadable is matched against our namespace.
class SocketTables {
  public:
    static SocketTables load(const ProcessTable& table);
    // Only our own namespace's tables, without a scan (other namespaces come with cover()).
    static SocketTables own_namespace();
    // Adds the table of p's namespace if it is not loaded yet: for a process whose net_ns
    // was read after load() (read_details).
    void cover(const Process& p);
    // The socket behind one of p's fds, from p's namespace; nullptr if unknown.
    const SocketEntry* lookup(const Process& p, uint64_t inode) const;
    size_t namespaces() const { return by_ns_.size(); }

  private:
    std::unordered_map<uint64_t, SocketTable> by_ns_;
    uint64_t own_ns_ = 0;
};

// ListeningPort: mcpwarden/inventory_types.hpp (the API hands it out as it is).

// The TCP LISTEN and bound-UDP sockets among p's fds (p read with kFds), against `table`.
std::vector<ListeningPort> listening_ports(const Process& p, const SocketTable& table);
// Convenience: loads p's namespace tables itself. Empty when p has no socket fds or is gone.
std::vector<ListeningPort> listening_ports(const Process& p);

}  // namespace warden
