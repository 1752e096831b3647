// Trees found by identity: the processes carrying MCPWARDEN_SESSION=<tag>.
//
// The drill and the teardown bench start trees whose members escape every other handle a
// client keeps (setsid helpers, double-forked daemons reparented to PID 1), so they find
// them again by the marker the spawner — or they themselves — put into the environment, and
// clean up by identity: (pid, starttime) re-checked, then a pidfd, never a name or a bare
// pid. Also here: the external port probe, and where the binaries shipped next to
// mcpwarden live.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "proc/process.hpp"

namespace warden::drill {

// Live (non-zombie) processes of this uid carrying MCPWARDEN_SESSION=tag, wherever they
// went (other groups, sessions, reparented to PID 1). With `doomed_too` false a process
// with SIGKILL already pending is left out: a kill that has been delivered is not a
// survivor, only not finished yet.
std::vector<ProcessId> live_tagged(const std::string& tag, bool doomed_too = true);

// Whether SIGKILL is pending for the process (thread-group or thread queue).
bool kill_pending(pid_t pid);

// SIGKILLs every live process carrying the tag, by identity (starttime checked, then a
// pidfd), until a scan finds none; bounded (50 rounds, 1 s wait each). Returns how many
// were signalled.
int kill_tagged(const std::string& tag);

// Whether 127.0.0.1:port (or the wildcard, for `addr` "0.0.0.0" / "::") can be bound right
// now with SO_REUSEADDR: only a live listener makes it fail (TIME_WAIT does not).
bool port_bindable(uint16_t port, std::string_view addr = "127.0.0.1");

// The path of this executable (/proc/self/exe), and of a binary installed next to it
// ("mcpwarden-fixture": the build tree and the packages put it there).
std::string self_exe();
std::string sibling_binary(std::string_view name);

}  // namespace warden::drill
