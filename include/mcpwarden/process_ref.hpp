// libmcpwarden — a process by identity, shared by the inventory and reap headers.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace warden::api {

// A process by identity: a pid alone may name another process once it is recycled.
struct ProcessRef {
    pid_t pid = 0;
    std::uint64_t starttime = 0;  // clock ticks since boot (/proc/PID/stat field 22)
};

}  // namespace warden::api
