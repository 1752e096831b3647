// The children of one process, asked of the kernel: /proc/PID/task/TID/children.
//
// A tree walk through these files costs a few reads per member, where finding children by
// ppid costs a read of every process on the machine: 1 ms against 30 on a box with a
// thousand processes, and the teardown engine pays it before its first SIGTERM. The files
// exist only with CONFIG_PROC_CHILDREN, and proc(5) warns that a list read while children
// are forked or exit may miss one (the kernel resumes its walk by position). A caller that
// must not miss anything confirms with a full scan once the tree holds still.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace warden {

// Whether this kernel has /proc/PID/task/TID/children (probed once, on ourselves).
bool proc_children_supported();

// The children of `pid` now: the union of the children files of all its threads (a child
// is listed under the thread that forked it). Empty when the process is gone.
std::vector<pid_t> read_children(pid_t pid);

// Appends the pids of one children file's text ("12 34 ") to `out`.
void append_children(const std::string& text, std::vector<pid_t>& out);

}  // namespace warden
