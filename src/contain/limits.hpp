// Resource limits of a session: --memory-max, --tasks-max, --cpu-max.
//
// A limit is only as good as the controller that enforces it, and hosts differ in which one
// they offer. Each limit is placed with the first controller that can hold it here:
//
//   1. cgroup v2: the session's own group (`mcpwarden-<session>`, beside its payload leaf)
//      when the controller is in its cgroup.controllers, i.e. enabled and delegated by
//      whoever owns the group above us. The limit then covers the whole tree, the payload
//      and anything added beside it.
//   2. cgroup v1: a group `mcpwarden-<session>` in the host's v1 hierarchy of the controller
//      (`memory`, `pids`, `cpu`), beneath the group we are in there. The server joins it in
//      the spawner, between clone and exec, so nothing of the server runs outside it; its
//      children inherit it. Hybrid hosts mount v2 with few controllers (often none but
//      hugetlb) and keep the real ones in v1: there, this is the only enforcement there is.
//   3. none: the limit cannot be enforced, and SessionLimits::missing() says why. `run`
//      refuses to start then (exit 125) unless the settings ask for `limits = "best-effort"`:
//      a limit the user asked for is never dropped in silence.
//
// A limit is read back after it is written (a v1 group that silently rounds, a v2 file that
// refuses a value) and the placement is what `--explain`, session.start and `status` show.
//
// What the limits did is read from the same groups: the kernel counts OOM kills (v2
// memory.events `oom_kill`, v1 memory.oom_control `oom_kill`) and forks refused by the
// tasks cap (pids.events `max`), so a death by the memory cap can be told from any other
// SIGKILL, and a refused fork is on record although the server may only log an EAGAIN.
//
// --memory-max caps memory and swap together (memory.swap.max 0 / memory.memsw.limit_in_bytes
// where swap is accounted): a cap that a server can step around by swapping is no cap.
// --cpu-max is a percentage of one CPU (200: two CPUs) over a 100 ms period.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "sys/cgroup.hpp"

namespace warden {

struct Faults;

// What the user asked for; nullopt: no limit of that kind.
struct LimitRequest {
    std::optional<uint64_t> memory_max;  // bytes, memory and swap together
    std::optional<uint64_t> tasks_max;   // processes and threads of the tree
    std::optional<uint32_t> cpu_max;     // percent of one CPU, 1..(100 x CPUs)
    // Start even where a limit cannot be enforced (said on stderr and on record).
    bool best_effort = false;
    bool any() const { return memory_max || tasks_max || cpu_max; }
};

enum class Controller : uint8_t { memory, pids, cpu };
std::string_view to_string(Controller c);

// One limit asked for, and where it is enforced.
struct LimitPlacement {
    Controller controller = Controller::memory;
    std::string option;  // "--memory-max 64MiB"
    int version = 0;     // 2 or 1: the cgroup version enforcing it; 0: none
    uint64_t value = 0;  // bytes, tasks or percent, as read back from the group
    std::string group;   // the group whose files hold it ("" when none)
    std::string why;     // where, in words, or why nothing enforces it
};

// What the groups say now. A value the host does not offer stays nullopt.
struct LimitUsage {
    std::optional<uint64_t> memory_current, memory_peak, tasks_current, cpu_usage_us;
    uint64_t oom_kills = 0;      // OOM kills in the session's group (cumulative)
    uint64_t memory_at_max = 0;  // v2 memory.events max / v1 memory.failcnt
    uint64_t tasks_refused = 0;  // forks refused by the tasks cap (pids.events max)
    uint64_t cpu_throttled = 0;  // periods the CPU cap throttled the tree (cpu.stat)
    nlohmann::json to_json() const;
};

class SessionLimits {
  public:
    SessionLimits() = default;
    SessionLimits(SessionLimits&&) noexcept = default;
    SessionLimits& operator=(SessionLimits&&) noexcept = default;
    ~SessionLimits();  // removes the v1 groups it made (bounded wait for their last exit)

    // In the keeper, once the session's v2 group exists (`v2_session_dir`, "" without one):
    // makes the groups the request needs and writes each limit. Never fails: a limit that
    // cannot be placed is reported by missing().
    static SessionLimits apply(const std::string& session_id, const LimitRequest& req,
                               const std::string& v2_session_dir, const Faults& faults);
    // Anywhere else (the relay, `status`): the groups of the running session `session_id`
    // whose relay or keeper is `pid` (the groups are found beneath that process's own),
    // opened without owning them. Limits not found are left out.
    static SessionLimits find(const std::string& session_id, pid_t pid);

    const std::vector<LimitPlacement>& placements() const { return placements_; }
    // "--memory-max 64MiB: no memory controller: …; …" for what nothing enforces; "" if all.
    std::string missing() const;
    // The cgroup.procs files of the v1 groups, for the spawner's child to join before exec.
    std::vector<std::string> v1_procs_files() const;
    LimitUsage usage() const;
    // "mem 12.3MiB/64MiB tasks 3/32 cpu 50%": each limit with what it holds now (`status`);
    // "" without limits.
    std::string summary() const;
    // Removes the v1 groups of a session whose keeper is gone (they are empty once its tree
    // is): what find() found, by path; the owner's destructor does the same for its own.
    void remove_found();
    // "memory-max  on   64MiB by cgroup v1 memory (/sys/fs/cgroup/memory/…)\n…" (--explain).
    std::string render_text() const;
    nlohmann::json to_json() const;  // [{"limit":"memory-max","value":…,"cgroup":1,…}]

  private:
    std::vector<LimitPlacement> placements_;
    std::vector<Cgroup> v1_groups_;  // owned, made by apply()
};

// "64MiB" style text of a byte count (for messages and --explain).
std::string size_text(uint64_t bytes);

}  // namespace warden
