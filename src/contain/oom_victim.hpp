// Which process the kernel's OOM killer ended in a session's memory group.
//
// The group's own counters (v2 memory.events, v1 memory.oom_control) say that the memory cap
// killed something, and how often, but never what. When the server itself is the victim its
// wait status shows it (SIGKILL); when the victim is deeper in the tree — the child of a
// `sh -c` wrapper, a worker of a server that goes on without it — the server reaps it, and a
// wrapper turns its death into an ordinary exit status (137). The one place that names the
// victim is the kernel's own report of the kill, which it writes to its log before the
// victim is gone:
//
//   oom-kill:constraint=CONSTRAINT_MEMCG,…,oom_memcg=/…/mcpwarden-<session>,
//            task_memcg=/…/mcpwarden-<session>,task=python3,pid=4711,uid=1000
//
// The last such line whose task_memcg is this session's group (or beneath it) is the victim.
// Reading the log takes CAP_SYSLOG where kernel.dmesg_restrict is set; without it the victim
// stays unnamed, and the error says why rather than guessing.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

#include "sys/result.hpp"

namespace warden {

struct OomVictim {
    pid_t pid = 0;
    std::string comm;  // the kernel's name of its command (at most 15 characters)
};

// From one kernel log line: the victim, when it is an oom-kill report whose task_memcg is
// `group_name` (its last component, "mcpwarden-<session>") or beneath it.
std::optional<OomVictim> parse_oom_kill_line(std::string_view line, std::string_view group_name);

// The last victim the kernel log (/dev/kmsg) names in `group_name`; nullopt when it names
// none; an error when the log cannot be read ("/dev/kmsg: Operation not permitted").
Result<std::optional<OomVictim>> find_oom_victim(std::string_view group_name);

}  // namespace warden
