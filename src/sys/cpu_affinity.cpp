#include "sys/cpu_affinity.hpp"

#include <cerrno>
#include <string>

namespace warden {

CpuSet CpuSet::just(int cpu) {
    CpuSet s{};
    CPU_ZERO(&s.cpus);
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &s.cpus);
    return s;
}

std::optional<CpuSet> CpuSet::without(int cpu) const {
    if (!has(cpu) || count() < 2) return std::nullopt;
    CpuSet s = *this;
    CPU_CLR(cpu, &s.cpus);
    return s;
}

Result<CpuSet> cpu_affinity(pid_t pid) {
    CpuSet s{};
    if (::sched_getaffinity(pid, sizeof s.cpus, &s.cpus) != 0)
        return Error::sys("sched_getaffinity", "pid " + std::to_string(pid), errno);
    return s;
}

Status set_cpu_affinity(pid_t pid, const CpuSet& set) {
    if (::sched_setaffinity(pid, sizeof set.cpus, &set.cpus) != 0)
        return Error::sys("sched_setaffinity", "pid " + std::to_string(pid), errno);
    return {};
}

std::optional<int> move_child_off_our_cpu(pid_t child, const CpuSet& allowed) {
    const int ours = ::sched_getcpu();
    auto others = allowed.without(ours);
    if (!others || !set_cpu_affinity(child, *others)) return std::nullopt;
    return ours;
}

}  // namespace warden
