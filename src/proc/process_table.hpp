// ProcessTable: one scan of /proc, with children and descendant walks.
#pragma once

#include <functional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "proc/process.hpp"

namespace warden {

class ProcessTable {
  public:
    // One pass over /proc; processes that vanish mid-scan are skipped, not errors.
    // `threads`: how many threads read the processes (each process is still read whole by
    // one of them, through its own /proc/PID fd); 0 picks 2 on a machine with 2 or more
    // CPUs when there are enough processes to pay for the thread, else 1.
    static ProcessTable scan(unsigned what = kBasic, int threads = 0);
    // A table over processes read elsewhere (tests, a filtered scan). Sorted by pid.
    static ProcessTable from_processes(std::vector<Process> procs);

    // Sorted by pid.
    const std::vector<Process>& all() const { return procs_; }
    const Process* find(pid_t pid) const;
    // The process only if its starttime matches too (same process, not a recycled pid).
    const Process* find(const ProcessId& id) const;
    // read_links() on the process of this table with that pid (see process.hpp): the one
    // change a table allows after its scan, for a scan without kExe | kCwd.
    bool read_links(pid_t pid);
    // read_details() (process.hpp) on the process of this table with that pid: what a scan left
    // out (exe, cwd, env names, netns, pipe modes), read later for the few that need it.
    bool read_details(pid_t pid, unsigned what);
    // The same for many processes at once (pid, what), on up to `threads` threads (0: 2 on
    // a machine with 2 or more CPUs when there are enough of them, as scan()). Each process
    // is read by one thread; pids not in the table are skipped.
    void read_details(const std::vector<std::pair<pid_t, unsigned>>& which, int threads = 0);
    // Direct children (by ppid) that are not older than their parent (PID reuse guard).
    std::vector<const Process*> children(pid_t pid) const;
    // Every descendant of `root` by ppid links, whatever the process group or session,
    // leaves first (a process always comes before its parent). Drops a "child" that
    // started before its parent (a recycled PID). Empty if root is gone or its starttime
    // differs.
    std::vector<const Process*> descendants(const ProcessId& root) const;

  private:
    std::vector<Process> procs_;
    std::unordered_map<pid_t, size_t> by_pid_;
    std::unordered_multimap<pid_t, size_t> by_ppid_;
};

}  // namespace warden
