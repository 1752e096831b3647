// spawn(): start the server inside a session's containment.
//
// The child gets: pipes (or our fds, or /dev/null) for stdin/stdout/stderr; its own process
// group (so a terminal's ^C reaches us, not it, and the relay decides); the environment plus
// MCPWARDEN_SESSION=<id> (the marker `reap` finds remnants by); PDEATHSIG (SIGKILL by
// default) with the parent pid captured before the fork re-checked after prctl, so a parent
// that died in between is noticed; birth inside the session cgroup (clone3
// CLONE_INTO_CGROUP, else the child moves itself before exec); a pidfd from birth
// (CLONE_PIDFD); CLONE_PIDFD_AUTOKILL when the kernel has it.
//
// With the pidns layer on, the direct child is a tiny namespace init (PID 1 of a new PID
// namespace, itself a reaper by definition) that forks the server as PID 2 and then only
// reaps; when the init dies — even by SIGKILL of every mcpwarden process — the kernel kills
// every process of the namespace. The init dies with us through PDEATHSIG and is SIGKILLed
// by the teardown after the polite phase.
//
// With a sandbox plan (src/sandbox) the environment is the plan's instead of ours, and right
// before execve the child applies it: no_new_privs, the prepared Landlock ruleset, the
// prepared seccomp program (async-signal-safe calls only). A failure there is reported
// through the error pipe like a failed execve, and the server never runs unconfined.
//
// PATH lookup happens before the fork, so a missing command is an ordinary Error:
// code ENOENT ("cannot run 'foo': command not found") → the caller exits 127 like a shell;
// EACCES/ENOEXEC → 126. An execve that fails later in the child is reported the same way
// through a close-on-exec error pipe.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>
#include <vector>

#include "contain/layers.hpp"
#include "mcpwarden/types.hpp"
#include "proc/process.hpp"
#include "sandbox/sandbox.hpp"
#include "sys/pidfd.hpp"

namespace warden {

struct SpawnOptions {
    std::vector<std::string> argv{};     // argv[0] searched in PATH when it has no '/'
    std::vector<std::string> env_add{};  // extra "KEY=VALUE" entries (override ours)
    Stdio in = Stdio::Pipe, out = Stdio::Pipe, err = Stdio::Inherit;
    int pdeathsig = 9;  // SIGKILL; 0 for none
    bool own_process_group = true;
    std::string cwd{};                       // empty: ours
    const sandbox::Plan* sandbox = nullptr;  // must outlive spawn(); null or off: unconfined
};

// The exit code a shell would use for a spawn error (127 not found, 126 not executable).
int spawn_error_exit_code(const Error& e);

// A started server. Move-only; destroying it does not kill anything (the teardown does).
class Child {
  public:
    pid_t pid() const { return id_.pid; }
    const ProcessId& id() const { return id_; }    // the server, as seen from our namespace
    const Pidfd& pidfd() const { return pidfd_; }  // may be invalid (no pidfd layer)
    Fd& stdin_fd() { return in_; }                 // valid with Stdio::Pipe; close it for EOF
    Fd& stdout_fd() { return out_; }
    Fd& stderr_fd() { return err_; }

    bool in_cgroup() const { return in_cgroup_; }
    bool via_clone3() const { return via_clone3_; }
    bool autokill() const { return autokill_; }
    // PID namespace: the init we forked (our direct child) and its pidfd; pid 0 otherwise.
    const ProcessId& ns_init() const { return init_id_; }
    const Pidfd& ns_init_pidfd() const { return init_pidfd_; }

    // Reaps the server if it has exited (WNOHANG; for pidns the init reports its status
    // through a pipe). Returns the wait status (WIFEXITED etc.) once known, cached.
    std::optional<int> try_reap();
    // Blocks up to timeout_ms (-1 forever) for the server to exit; wait status if it did.
    std::optional<int> wait(int timeout_ms);
    std::optional<int> exit_status() const { return status_; }
    // PID namespace: readable once the init has written the server's wait status, -1 without
    // a namespace. The server is the init's child there, so its exit sends us no SIGCHLD:
    // whoever waits for it polls this beside its SIGCHLD.
    int exit_notice_fd() const { return init_status_.valid() ? init_status_.get() : -1; }
    // Called by the teardown when it reaped the server itself.
    void set_status(int status) { status_ = status; }

  private:
    friend Result<Child> spawn(const Containment&, const SpawnOptions&);
    ProcessId id_{};
    Pidfd pidfd_{};
    Fd in_, out_, err_;
    bool in_cgroup_ = false, via_clone3_ = false, autokill_ = false;
    ProcessId init_id_{};
    Pidfd init_pidfd_{};
    Fd init_status_{};  // pidns: the init writes the server's wait status here
    std::optional<int> status_{};
};

Result<Child> spawn(const Containment& c, const SpawnOptions& opts);

}  // namespace warden
