// src/contain — containment of one launched process tree.
//
// This folder owns everything between "start this command" and "nothing of it is left":
// the containment layers of a session (child subreaper, session cgroup, PID namespace,
// pidfds, CLONE_PIDFD_AUTOKILL), each detected at run time and reported on/off with its
// reason (layers.hpp); the spawner that starts the server inside them (spawner.hpp); and
// the teardown engine — plan → EOF window → SIGTERM → grace → SIGKILL → re-plan → verify —
// with its TeardownReport (teardown.hpp, which opens with the essay on why each step is
// there). Nothing here requires a layer: with no cgroup and no pidfd the engine still works
// through the subreaper and starttime checks.
//
// How the shim's keeper uses it (one session = one Containment):
//
//     // in the keeper: a freshly forked, single-threaded process
//     auto c = Containment::setup(session_id, ContainOptions{...});   // subreaper, cgroup
//     auto child = spawn(*c, SpawnOptions{.argv = cmd});              // server, pipes
//     ... relay until the client leaves; close child->stdin_fd() ...
//     TeardownOptions t{.eof_window = 500ms, .grace = 2s};  // other fields default
//     TeardownReport r = Teardown(c->scope(&*child), t).run();
//     journal(r.to_json()); return r.ok() ? child exit status : error;
//
// The keeper must be the parent of the server and the subreaper of its tree, and should be
// single-threaded: PDEATHSIG follows the forking *thread*.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "contain/limits.hpp"
#include "fault/faults.hpp"
#include "sys/cgroup.hpp"
#include "sys/pidfd.hpp"

namespace warden {

struct ContainOptions {
    LimitRequest limits{};  // --memory-max, --tasks-max, --cpu-max (contain/limits.hpp)
    bool use_subreaper = true;
    bool use_cgroup = true;    // a session cgroup when a writable cgroup2 with cgroup.kill exists
    bool use_pidfd = true;     // pidfds (and CLONE_PIDFD) when the kernel has them
    bool use_pidns = false;    // --isolate=pidns: opt-in, probed, never required
    bool use_autokill = true;  // CLONE_PIDFD_AUTOKILL where the kernel knows it
    // Absolute directory under which the session group `mcpwarden-<session>` is made;
    // empty: our own cgroup (found from /proc/self/cgroup under the cgroup2 mount).
    std::string cgroup_base{};
    Faults faults = Faults::from_env();
};

// One layer: on or off, and why, in words a user can act on.
struct LayerState {
    std::string name{};
    bool on = false;
    std::string reason{};
};

struct LayerReport {
    LayerState subreaper{"subreaper", false, "not set up"};
    LayerState cgroup{"cgroup", false, "not set up"};
    LayerState pidns{"pidns", false, "not asked for (--isolate=pidns)"};
    LayerState pidfd{"pidfd", false, "not set up"};
    LayerState autokill{"pidfd_autokill", false, "not set up"};
    LayerState clone3{"clone3", false, "not set up"};

    std::vector<const LayerState*> all() const;
    // "subreaper  on   read back from PR_GET_CHILD_SUBREAPER\n..." for `run --explain`.
    std::string render_text() const;
    nlohmann::json to_json() const;      // {"subreaper":{"on":true,"reason":"..."},...}
    std::string to_json_string() const;  // to_json(), serialized
};

class Child;
struct TeardownScope;

// How long removing a session's group waits for its last member to leave (event-driven:
// no wait at all when the group is already empty). Generous, because under load a killed
// member's exit can wait its turn for a CPU before the kernel takes it out of the group.
inline constexpr int kSessionGroupLastExitMs = 1000;

// Removes `<dir>/payload` and then `<dir>`, the groups of a session whose keeper is gone
// (the run then tears the tree down itself): the same removal ~Containment does.
void remove_session_cgroup(const std::string& dir);

// The layers of one session, set up in the calling process (the keeper). Owns the session
// cgroup directories and removes them when destroyed (after the teardown emptied them).
class Containment {
  public:
    // Turns on what is asked for and available; a missing layer is reported, not an error.
    // Errors only for an unusable session id (must be [A-Za-z0-9._-], 1..64 chars).
    static Result<std::unique_ptr<Containment>> setup(std::string session_id,
                                                      const ContainOptions& opts);
    ~Containment();

    const std::string& session_id() const { return session_id_; }
    const LayerReport& layers() const { return layers_; }
    LayerReport& layers() { return layers_; }
    const ContainOptions& options() const { return opts_; }
    // The leaf the server is born in (`<base>/mcpwarden-<session>/payload`), or nullptr.
    const Cgroup* cgroup() const { return payload_.valid() ? &payload_ : nullptr; }
    bool pidfd_on() const { return layers_.pidfd.on; }
    // The limits asked for and where each is enforced (none when none were asked for).
    const SessionLimits& limits() const { return limits_; }

    // pidfd_open honouring the layer switch and the fault seam (error code ENOSYS then).
    Result<Pidfd> open_pidfd(pid_t pid) const;
    // What the teardown engine needs to tear down `child`'s tree (child may be null: then
    // only the cgroup, the inherited orphans and the session marker define the tree).
    TeardownScope scope(Child* child) const;

  private:
    Containment() = default;
    void setup_cgroup();
    std::string session_id_{};
    ContainOptions opts_;
    LayerReport layers_{};
    Cgroup session_dir_;    // <base>/mcpwarden-<session>
    Cgroup payload_;        // <session_dir>/payload
    SessionLimits limits_;  // its v1 groups are removed after the v2 ones (member order)
};

}  // namespace warden
