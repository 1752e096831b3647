// Every process's fd table in one read: a BPF task_file iterator.
//
// Reading fd tables through /proc costs, per process, an open, two getdents and a close of
// fd/, then a readlink per fd: on a machine of 1,000 processes holding pipes and sockets,
// half of a full scan's system calls and half its time. A task_file iterator (Linux 5.8)
// walks the same tables inside the kernel and hands back one fixed-size record per open
// file, in a few milliseconds for the whole machine.
//
// The program is a few dozen instructions assembled here, with the field offsets of the
// running kernel read from its BTF (kernel_btf.hpp): no BPF compiler, no libbpf, nothing of
// this kernel's headers at build time. It reads, per file: the process (tgid, and the pid
// of the thread, so that only the thread-group leader's table counts, as /proc/PID/fd
// shows), the process's start time (its identity), the fd, the file's access mode and its
// inode number, type and filesystem, and the process's real uid (which spares the scan a
// read of /proc/PID/status per process).
//
// It needs CAP_BPF and CAP_PERFMON (root), a kernel with BTF, and the initial pid
// namespace (the iterator reports global pids). Where any of that is missing, take()
// returns an error that says which, and the caller reads /proc as before. The environment
// variable MCPWARDEN_NO_BPF=1 turns it off.
//
// What it cannot give is the path of an ordinary file: those fds get their kind and an empty
// target, which read_more(kStdioTargets) fills for fds 0-2 where a snapshot or a state
// reason shows it. Pipes and sockets get the target /proc would show ("pipe:[INODE]",
// "socket:[INODE]"), and every pipe its access mode, which /proc gives only at one more
// system call per pipe.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "proc/process.hpp"
#include "sys/result.hpp"

namespace warden {

class FdSnapshot {
  public:
    // One record of the iterator, as the BPF program writes it.
    struct Record {
        uint32_t tgid = 0;
        uint32_t pid = 0;  // the thread; only tgid == pid is kept
        uint32_t fd = 0;
        uint32_t f_mode = 0;          // FMODE_READ 0x1, FMODE_WRITE 0x2
        uint64_t start_boottime = 0;  // ns since boot, the process's
        uint64_t inode = 0;
        uint64_t s_magic = 0;  // the filesystem's magic: pipefs, sockfs, anon_inodefs, ...
        uint32_t i_mode = 0;   // S_IFMT bits and permissions of the inode
        uint32_t uid = 0;  // the process's real uid (cred->uid), as the initial namespace sees it
    };
    static_assert(sizeof(Record) == 48);

    // Whether take() can work at all for this caller (root, not turned off, a kernel with
    // BTF, the initial pid namespace): a cheap check before a scan plans around it.
    static bool may_work();
    // Whether the uids of the records are the ones /proc shows: we are in the initial user
    // namespace (identity uid_map), where a kernel uid is the uid.
    static bool uids_as_proc_shows();

    // Runs the iterator once over the whole machine. An error when BPF is not available
    // here, naming why (the caller falls back to /proc).
    static Result<FdSnapshot> take();

    // Builds a snapshot from records (tests).
    static FdSnapshot from_records(std::vector<Record> records);

    // The fd table of `p` (sorted by fd) into p.fds, and its real uid into p.uid when
    // uids_as_proc_shows(): false, p
    // untouched, when the snapshot has no files for that process, or had them for another
    // process under the same pid (the start time differs: the pid was reused between the
    // snapshot and the caller's read of stat).
    bool fill(Process& p) const;

    size_t records() const { return records_.size(); }
    size_t processes() const { return by_tgid_.size(); }

    // The FdInfo /proc would give for one record (kind, inode, target for pipes and
    // sockets, access mode for pipes).
    static FdInfo to_fd_info(const Record& r);

  private:
    std::vector<Record> records_;  // sorted by (tgid, fd)
    struct Span {
        size_t begin = 0, end = 0;
    };
    std::unordered_map<uint32_t, Span> by_tgid_;
};

}  // namespace warden
