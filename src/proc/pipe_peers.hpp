// Pipe peers: who holds which end of every pipe, across all processes of one scan.
//
// A stdio MCP server reads requests from a pipe whose write end its client holds. While
// some live process still holds that write end, the server belongs to a connection; when
// none does, it is a logical orphan whatever its ppid says (docs/INVENTORY.md). The
// kernel names a pipe only by inode (`pipe:[N]`) and says which end an fd is through the
// access mode of the /proc/PID/fd/N link (its permission bits), so peers are found by matching
// inodes across the fd tables of one ProcessTable scan read with kFds. Only fd tables we may read
// count: as an unprivileged user, another user's processes are invisible here.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "proc/process_table.hpp"

namespace warden {

struct PipeEnd {
    const Process* process = nullptr;
    int fd = -1;
    bool read = false;   // O_RDONLY or O_RDWR
    bool write = false;  // O_WRONLY or O_RDWR
};

class PipePeers {
  public:
    // `table` must outlive the PipePeers and have been scanned with kFds.
    explicit PipePeers(const ProcessTable& table);

    // Re-reads which end each holder of `inode` has from its FdInfo::flags, after a scan
    // without kPipeModes filled them in later (read_details). The table must be the same one.
    void refresh(uint64_t inode);
    // Every (process, fd) holding the pipe `inode`; empty if none (or unknown inode).
    const std::vector<PipeEnd>& holders(uint64_t inode) const;
    // Distinct live processes holding the write end of `inode`, except `except` (by pid).
    std::vector<const Process*> writers(uint64_t inode, pid_t except = 0) const;
    // The live processes, other than p itself, holding the write end of the pipe on p's
    // fd 0: for an MCP server, its client. Empty if fd 0 is not a pipe or nobody writes.
    std::vector<const Process*> writers_of_stdin(const Process& p) const;
    // The live processes, other than p, holding the read end of the pipe on p's fd 1.
    std::vector<const Process*> readers_of_stdout(const Process& p) const;

  private:
    std::vector<const Process*> holders_with(uint64_t inode, pid_t except, bool want_write) const;
    std::unordered_map<uint64_t, std::vector<PipeEnd>> by_inode_;
};

}  // namespace warden
