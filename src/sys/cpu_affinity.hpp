// The CPUs a process may run on (sched_setaffinity(2)), for one use: handing a freshly forked
// process to a CPU other than ours while we both have work, then giving it its whole set back.
//
// Why: a forked child usually starts on its parent's CPU. When both then have work (the
// relay adds the sandbox's path rules while the keeper sets up the containment), the two
// share one CPU while the other idles, until the kernel's idle balancing moves one over —
// up to a scheduler tick later (4 ms at HZ=250). Allowing the child every CPU but the
// parent's moves it at once; it runs its part beside the parent's, not after it.
#pragma once

#include <sched.h>
#include <sys/types.h>

#include <optional>

#include "sys/result.hpp"

namespace warden {

struct CpuSet {
    cpu_set_t cpus;
    int count() const { return CPU_COUNT(&cpus); }
    bool has(int cpu) const { return cpu >= 0 && cpu < CPU_SETSIZE && CPU_ISSET(cpu, &cpus); }
    // `cpu` alone.
    static CpuSet just(int cpu);
    // This set without `cpu`, when the set holds it and at least one other; else nullopt.
    std::optional<CpuSet> without(int cpu) const;
};

// The set `pid` (0: the calling thread) may run on.
Result<CpuSet> cpu_affinity(pid_t pid);
Status set_cpu_affinity(pid_t pid, const CpuSet& set);

// Allows `child` every CPU of `allowed` but the one the caller runs on now, when `allowed`
// holds that CPU and at least one other. Returns the CPU it was moved off, or nullopt when
// nothing was changed (a single CPU, the kernel refused). The child must get `allowed` back
// (set_cpu_affinity(0, allowed)) before it starts anything that would inherit the smaller set.
std::optional<int> move_child_off_our_cpu(pid_t child, const CpuSet& allowed);

}  // namespace warden
