// libmcpwarden — a process by identity, shared by the inventory and reap headers, and by the
// layers (src/proc) as it is: defined once.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace warden {

// A process by identity: a pid alone may name another process once it is recycled. Two
// processes with the same pid and different starttimes are different.
struct ProcessId {
    pid_t pid = 0;
    std::uint64_t starttime = 0;  // clock ticks since boot (/proc/PID/stat field 22)
    friend bool operator==(const ProcessId&, const ProcessId&) = default;
};

namespace api {
using ProcessRef = warden::ProcessId;
}  // namespace api

}  // namespace warden
