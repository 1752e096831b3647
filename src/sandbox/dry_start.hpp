// The dry start: the server started once in its sandbox plan, asked what a client asks first
// (initialize, tools/list), torn down, and every denial it met reported with the flag that
// would allow it — before a client config is changed, so that a profile is known to hold the
// server rather than found broken by the user.
//
// Denials are not observable to an ordinary user otherwise. Landlock answers EACCES and logs
// only to the kernel's audit subsystem, which is off unless something turns it on and needs
// CAP_AUDIT_READ to read (docs/SANDBOX.md, "On record"); seccomp's RET_ERRNO logs nothing, and
// RET_USER_NOTIF or RET_LOG would change the program the real start runs. What the server
// itself sees is the one place every denial shows: the failed system call. So the dry start
// runs the server under strace(1), attached from outside the sandbox: the server's process
// stops before it confines itself, strace (unconfined: Landlock lets a process outside a
// domain trace one inside it, and the tracee's seccomp filter does not apply to its tracer)
// seizes it and follows every fork, and only then does the process apply the plan and exec
// the server. `strace -Z` writes only failed calls; among them a denial is
//   - EACCES on a path that the same user may reach unconfined (an EACCES the file's own mode
//     causes is no denial of ours): --allow-read DIR, or --allow-write DIR for a write;
//   - EACCES on connect(2) to a TCP port: --allow-connect PORT; on bind(2): --net any;
//   - EACCES/EAFNOSUPPORT on socket(2) (UDP, raw, other families): --net any;
//   - EPERM (ENOSYS for clone3) on a call the profile refuses: no flag allows it.
// Its limits: a denial the server never meets in initialize and tools/list (a path only a tool
// call opens) is not seen; a call strace prints split across threads (<unfinished …>) loses its
// path; the dry start runs the server a first time, with whatever that start does; and it needs
// strace installed (without it the server is still started and asked, and the report says the
// denials could not be observed).
#pragma once

#include <chrono>
#include <string>
#include <vector>

#include "sandbox/sandbox.hpp"
#include "sys/result.hpp"

namespace warden::sandbox {

struct Denial {
    std::string what;    // "read", "write", "connect", "bind", "socket", "call"
    std::string target;  // the path, "TCP port 443", "socket(AF_INET, SOCK_DGRAM)", "ptrace"
    std::string allow;   // the flag that allows it, or "no flag: refused by every profile"
};

struct DryStart {
    bool answered = false;           // initialize and tools/list both answered
    std::vector<std::string> tools;  // the names tools/list gave
    std::vector<Denial> denials;     // each once, in the order first met
    bool traced = false;             // strace followed the server (denials observable)
    std::string failure;             // why the server did not answer, "" when it did
    std::string server_stderr;       // the server's last words on stderr (at most 2 KiB)
};

// Starts `argv` (argv[0] resolved to `executable`) under `plan`, which must be complete, in
// `cwd`; asks initialize, then tools/list, each bounded by `bound`; ends the server's process
// group (stdin closed, then SIGKILL). Errors only for what keeps the dry start from starting
// at all (a pipe, a fork).
Result<DryStart> dry_start(const Plan& plan, const std::vector<std::string>& argv,
                           const std::string& executable, std::chrono::milliseconds bound);

// strace -f -Z output (one line each) read into denials against `plan`; exposed for its test.
std::vector<Denial> denials_in_trace(const std::string& trace, const Plan& plan);

// The report: what answered, then one line per denial with its flag.
std::string render_dry_start(const DryStart& d);

}  // namespace warden::sandbox
