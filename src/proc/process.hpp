// src/proc — the process model, read from /proc.
//
// This folder owns what mcpwarden knows about processes: identity (`ProcessId`: pid plus
// starttime, with the boot id when stored), one process read through a single open
// /proc/PID directory fd so a recycled PID fails instead of mixing two processes
// (`Process`), one consistent scan of the machine (`ProcessTable`), socket tables from
// /proc/net/* and pipe peers. Environment *values* never leave this layer, except the one
// marker lookup MCPWARDEN_SESSION. No signals are sent from here.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcpwarden/process_ref.hpp"
#include "sys/result.hpp"

namespace warden {

// A process is (pid, starttime): starttime is field 22 of /proc/PID/stat, in clock ticks
// since boot. ProcessId is the API's ProcessRef too (mcpwarden/process_ref.hpp).

// Whether `a` is known to have started before `b`. starttime counts clock ticks (10 ms at the
// usual USER_HZ of 100), and a fork takes far less: a parent and the children it forks, or two
// siblings, routinely share a tick. Equal start times are never an order, in either
// direction: every decision that rests on "born before" or "born after" asks this, the way
// round whose proof it needs ("the remnant was born after the tree": started_before(tree,
// remnant); "that pid was recycled": started_before(child, parent)).
inline bool started_before(const ProcessId& a, const ProcessId& b) {
    return a.starttime < b.starttime;
}

// /proc/sys/kernel/random/boot_id, read once; goes into anything stored with a ProcessId.
const std::string& boot_id();

struct FdInfo {
    enum class Kind { File, Pipe, Socket, AnonInode, Other };
    int fd = -1;
    Kind kind = Kind::Other;
    std::string target;  // readlink of /proc/PID/fd/N, e.g. "pipe:[1234]"
    uint64_t inode = 0;  // for pipes and sockets
    // Access mode: O_RDONLY, O_WRONLY or O_RDWR (from the mode bits of the fd link, which
    // the kernel sets from the file's FMODE_READ/FMODE_WRITE); read for pipes only, else -1.
    int flags = 0;
};

// What to read; stat is always read (it carries the identity, and rss_kb and threads).
enum ReadWhat : unsigned {
    kStat = 0,
    kStatus = 1u << 0,   // uid (the real uid), VmRSS, threads
    kCmdline = 1u << 1,  // raw argv bytes
    kExe = 1u << 2,
    kCwd = 1u << 3,
    kEnvNames = 1u << 4,  // environment variable names + the MCPWARDEN_SESSION marker
    kFdLinks = 1u << 5,   // fd table with link targets, pipe and socket inodes (flags -1)
    kNetNs = 1u << 6,     // inode of /proc/PID/ns/net
    // uid for less than kStatus costs: the owner of /proc/PID (one fstat) when that is the
    // caller's own uid and not root, else the real uid from status. The owner is the
    // effective uid of a dumpable process; a process whose euid differs from its ruid is
    // made non-dumpable by the kernel (owner root) unless it re-enabled dumping itself.
    kUid = 1u << 7,
    kEnvMarker = 1u << 8,  // the MCPWARDEN_SESSION marker only (environ read, names not kept)
    kPipeModes = 1u << 9,  // with kFdLinks: FdInfo::flags of pipe fds (one lstat each)
    kFds = kFdLinks | kPipeModes,
    kBasic = kStatus | kCmdline,
    kAll = 0xffffffffu,  // everything
};

struct Process {
    ProcessId id;
    pid_t ppid = 0, pgid = 0, sid = 0;
    int tty_nr = 0;
    pid_t tpgid = -1;  // foreground process group of the controlling terminal, -1 if none
    char state = '?';  // R S D Z X T t I ...
    std::string comm;  // may contain spaces and ')'
    uid_t uid = static_cast<uid_t>(-1);
    uint64_t rss_kb = 0;
    int threads = 0;
    std::string cmdline;   // raw bytes, NUL-separated as the kernel gives them
    std::string exe, cwd;  // empty if unreadable
    std::vector<std::string> env_names;
    std::optional<std::string> session_marker;  // value of MCPWARDEN_SESSION, if present
    std::vector<FdInfo> fds;
    uint64_t net_ns = 0;
    unsigned flags = 0;  // field 9 of stat: the kernel's PF_* flags (read with kStat)

    bool zombie() const { return state == 'Z' || state == 'X'; }
    // PF_KTHREAD: told by the kernel, not by PID (PID 2 is kthreadd only in the initial
    // PID namespace; in a container it may be anything, e.g. our keeper).
    bool kernel_thread() const { return (flags & 0x00200000u) != 0; }
    std::vector<std::string> argv() const;
    // argv joined by spaces, non-printable and non-UTF-8 bytes escaped (\xNN); the comm in
    // brackets when the cmdline is empty (kernel threads, zombies).
    std::string display_command() const;
    // Seconds since the process started, from starttime, boot time and clock ticks.
    double elapsed_seconds() const;
};

// Bytes as display text: valid, printable UTF-8 kept; control characters and bytes that
// are not UTF-8 written as \xNN. What display_command() applies to each argument.
std::string escape_bytes(std::string_view bytes);

// The parsers behind read_process, on text already read (exposed for tests and fuzzing).
// parse_proc_stat fills comm, state, ppid, pgid, sid, tty_nr, tpgid, flags, threads and
// starttime from /proc/PID/stat text and returns false when the text is not in that format;
// parse_proc_status fills uid, rss_kb and threads from /proc/PID/status text.
bool parse_proc_stat(std::string_view text, Process& p);
void parse_proc_status(std::string_view text, Process& p);

// Reads one process through one open /proc/PID directory fd. A process that vanished
// gives an Error with code ESRCH or ENOENT ("cannot read /proc/4711/stat: No such process").
// For a kernel thread (PF_KTHREAD) only stat and status are read: cmdline, exe, cwd, env
// and fds stay empty, net_ns 0.
Result<Process> read_process(pid_t pid, unsigned what = kBasic);
// Reads exe and cwd into p now, if p.id still names the same process (same starttime): for
// a scan that left them out (they cost two readlinks and a d_path each) and needs them only
// for a few processes. False when the process is gone or its pid was recycled (the fields
// are then left as they were); a link hidden from us (EACCES) stays empty, as in a scan.
bool read_links(Process& p);
// The same for any of kExe, kCwd, kEnvNames, kNetNs and kPipeModes (the
// others are ignored): what a scan left out, read into p through one identity-checked
// /proc/PID fd. The fields asked for are replaced (a hidden one left empty); kPipeModes re-reads
// the link of each pipe fd of p.fds after its mode and keeps the mode only when the link still
// names the same pipe (else flags stays -1: not known as a reader or writer). False, fields
// untouched, when the process is gone or its pid was recycled.
bool read_details(Process& p, unsigned what);
// Cheap identity read (stat only). Errors as read_process.
Result<ProcessId> read_identity(pid_t pid);
// Reads a small /proc file relative to `dirfd` (a /proc/PID directory) into `out`; 0 or an
// errno. `wipe` clears the bounce buffer afterwards (environ holds secrets).
int slurp_at(int dirfd, const char* name, std::string& out, bool wipe = false);
// True if the pid still names the same process (same starttime) and it is not a zombie.
bool is_alive(const ProcessId& id);
// The login name of `uid` from the password database, or the number when it has none.
std::string user_name(uid_t uid);

}  // namespace warden
