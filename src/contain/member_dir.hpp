// One member of a tree being planned, read through one open /proc/PID directory.
//
// The plan reads each member several times before its first SIGTERM: its stat, uid and
// argv; its children; its identity again once a pidfd is bound; its fd table, for the ports
// to prove free. By path, each of those reads looks /proc/PID up afresh and names whoever
// holds the number by then, so each had to be followed by another read of the identity. A
// read through a directory fd opened once fails (ESRCH, ENOENT) as soon as the process that
// directory named is gone, whoever holds the number now (procps' readproc.c relies on the
// same): the identity read when the directory is opened holds for every read through it.
// On this VM a /proc lookup with its open, read and close costs 16 µs of CPU with warm
// caches and several times that cold, as in a keeper woken for its teardown: the plan of a
// two-process tree made 142 system calls before its first SIGTERM, 76 now.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "proc/process.hpp"
#include "sys/fd.hpp"
#include "sys/result.hpp"

namespace warden {

struct MemberDir {
    Fd dir;        // /proc/PID, open: reads through it fail once that process is gone
    Process proc;  // stat (identity, ppid, state, flags, threads), the real uid, cmdline

    // Opens /proc/PID and reads what the plan decides by: stat, the uid (status, unless
    // the owner of the directory answers as in read_process's kUid) and cmdline.
    static Result<MemberDir> open(pid_t pid);
    // Reads all of that again through the open directory, for a plan made ahead of its
    // teardown (Teardown::prepare): false once the process it was opened on is gone, whoever
    // holds its PID now. A zombie is still there. Its argv is read again too: an exec since
    // (`sh -c` replacing itself with the server) keeps the PID and the starttime.
    bool refresh();

    // The process is still there (a zombie is) with the starttime read at open: a read of
    // its stat through the directory.
    bool still_there() const;
    // Its children now: each thread's task/TID/children (of the only thread, when stat
    // said it has one: one open instead of a listing of task/).
    std::vector<pid_t> children() const;
    // (fd number, inode) of each socket in its fd table.
    std::vector<std::pair<int, uint64_t>> sockets() const;

  private:
    Result<Process> read(pid_t pid) const;
};

// (fd number, inode) of each socket in the fd table of the process whose /proc/PID
// directory is `proc_dir`.
std::vector<std::pair<int, uint64_t>> sockets_of(int proc_dir);

}  // namespace warden
