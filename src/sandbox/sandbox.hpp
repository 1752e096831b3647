// The sandbox layer: what a confined server may reach, and the kernel objects that enforce it.
//
// A server started by `npx -y some-package` runs as the user: without this it can read
// ~/.ssh and every client's tokens, write ~/.bashrc, connect anywhere and signal the user's
// other processes. A profile (the sandbox fields of RunOptions, mcpwarden/types.hpp, that the
// run flags, their MCPWARDEN_* variables and the settings file fill) becomes a Plan in three
// steps:
//
//   1. rules: the profile's paths (the system, /etc minus its secrets, the command's own
//      installation, a private temporary directory; for `workspace` the directories named
//      in the arguments and the package-manager caches) plus what is allowed explicitly,
//      the TCP ports, the scopes, the refused system calls, the filtered environment;
//   2. enforcement: each rule is mapped to the kernel feature that can enforce it on this
//      kernel (Landlock at the ABI it offers, seccomp), and what no feature here can enforce
//      is written down as a plain sentence (`not_enforced`): never a silent downgrade;
//   3. preparation: the Landlock ruleset fd with its rules and the seccomp program, built
//      and exported here, where allocating is allowed.
//
// In the child the spawner calls apply_in_child(): PR_SET_NO_NEW_PRIVS, landlock_restrict_self
// on the prepared fd, PR_SET_SECCOMP with the prepared program — async-signal-safe calls
// only, right before execve. Both Landlock and seccomp answer a denied call with an errno
// (EACCES for a path, EPERM otherwise), so a confined server sees ordinary failures.
//
// Made in two halves, so that the costly one need not hold up a start. prepare_ahead() makes
// everything a process forked next must hold: the decisions (profile, ABI, what is not
// enforced, the ports, the environment, the private directory's name), the seccomp program
// and the Landlock ruleset, still without its path rules. add_path_rules() then makes the
// private directory and adds the ~170 path rules (one open and one landlock_add_rule each,
// most of the plan's cost), and may run after the fork: a ruleset is a kernel object, and
// the fd a forked process inherited names the same one, so rules added through either fd are
// in it for both. The one rule of the split: no process may apply the plan before
// add_path_rules() returned (the shim's keeper waits for the relay's word). landlock_restrict_self
// takes the rules present at that moment; one applied early confines the server to fewer
// paths, never to more, so a broken order fails closed (the server cannot even exec).
// prepare() is both halves at once.
//
// Landlock sees paths and TCP ports, not addresses: "loopback" cannot be said to it. What
// `--net loopback` enforces is therefore stated in ports: TCP connect only to --allow-connect
// ports, TCP bind only to ports the kernel picks (port 0), no UDP or raw sockets and no
// socket families other than UNIX/INET/INET6 (seccomp). docs/SANDBOX.md has the threat model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "mcpwarden/types.hpp"
#include "sandbox/launcher.hpp"
#include "sandbox/path_rule.hpp"
#include "sys/fd.hpp"
#include "sys/landlock.hpp"
#include "sys/result.hpp"
#include "sys/seccomp.hpp"

namespace warden::sandbox {

std::string_view to_string(Sandbox p);     // "off" | "strict" | "workspace"
std::string_view to_string(SandboxNet n);  // "none" | "loopback" | "any" ("profile")
Result<uint16_t> parse_port(std::string_view text);

// What the server's process is started with.
struct Launch {
    std::vector<std::string> argv;  // argv[0] as the client gave it
    std::string executable;         // argv[0] resolved through PATH
    std::string cwd;
    std::string home;
    std::string session_id;
    std::string tmp_parent;    // where the private temporary directory goes ($TMPDIR or /tmp)
    std::string python_path;   // $PYTHONPATH, where `python -m` looks first (when it is passed)
    bool no_landlock = false;  // test hook (MCPWARDEN_FAULT=landlock): as on a kernel without it
    bool no_runner_store = false;    // test hook (MCPWARDEN_FAULT=runner_store): a missing npx
                                     // or uvx store is not made before confining
    bool no_launcher = false;        // test hook (MCPWARDEN_FAULT=sandbox_launcher)
    bool no_inner_commands = false;  // test hook (MCPWARDEN_FAULT=sandbox_inner_commands)
    bool no_launcher_home = false;   // test hook (MCPWARDEN_FAULT=sandbox_launcher_home_untold)
    // The relay counts what the seccomp filter refuses (src/sandbox/denials.hpp): the plan's
    // refusals are notified to a listener it receives through take_denial_receiver().
    bool count_denials = false;
};

class Plan {
  public:
    Sandbox profile() const { return profile_; }
    bool on() const { return profile_ != Sandbox::Off; }
    SandboxNet net() const { return net_; }  // None, Loopback or Any: the profile's resolved
    int landlock_abi() const { return abi_; }
    const std::vector<PathRule>& paths() const { return paths_; }
    const std::vector<uint16_t>& connect_ports() const { return connect_; }
    bool bind_ephemeral() const { return bind_ephemeral_; }
    const std::vector<std::string>& refused_syscalls() const { return syscalls_; }
    const std::vector<std::string>& env() const { return env_; }  // KEY=VALUE, the whole of it
    const std::vector<std::string>& env_dropped() const { return env_dropped_; }  // names
    // The package launcher the command is (npx, uvx, …), and whether it may fetch: without
    // --allow-fetch it runs from its cache alone (src/sandbox/launcher.hpp).
    const std::optional<Launcher>& launcher() const { return launcher_; }
    bool fetch_allowed() const { return fetch_; }
    const std::string& private_tmp() const { return tmp_; }
    // Plain sentences; empty when every rule of the profile is enforced.
    const std::vector<std::string>& not_enforced() const { return not_enforced_; }
    // "off", "full" (everything enforced) or "partial".
    std::string_view level() const;
    // For --explain: one line per rule with the feature that enforces it.
    std::string render_text() const;

    // The second half of the plan (see the top of this file): makes the private temporary
    // directory (0700) and adds the path rules to the ruleset, which a process forked since
    // prepare_ahead() shares. Once; a no-op for a plan that is off or already complete.
    // Errors name the rule ("command /x: landlock_add_rule(...)"); the directory is then gone.
    Status add_path_rules();
    bool complete() const { return !pending_.has_value(); }

    // In the freshly forked child: async-signal-safe. 0, or the errno of the step that failed.
    int apply_in_child() const noexcept;
    // What apply_in_child() hands the kernel, for measuring its steps one by one (-1: none).
    int ruleset_fd() const { return ruleset_ ? ruleset_->fd() : -1; }
    uint32_t restrict_flags() const { return restrict_flags_; }
    const SeccompProgram& seccomp() const { return seccomp_; }

    // Whether the filter's refusals go to a listener the relay counts them on (denials.hpp);
    // when asked for (Launch::count_denials) and not possible, denials_uncounted() says why.
    bool denials_counted() const { return denial_send_.valid(); }
    const std::string& denials_uncounted() const { return denials_uncounted_; }
    // The socket each server started under this plan sends its filter's listener to: the
    // relay's, taken once (invalid when denials are not counted). Whoever forks without being
    // the relay (the keeper) must not keep it (denials.hpp, "A supervisor gone").
    Fd take_denial_receiver() { return std::move(denial_receive_); }

  private:
    std::string launcher_line() const;
    void count_denials();
    // The steps of prepare_ahead() after the rules' paths, in this order (sandbox.cpp).
    Status prepare_landlock(const Launch& l);
    Status prepare_seccomp(const Launch& l);
    void prepare_env(const RunOptions& s, const Launch& l);
    friend Result<Plan> prepare_ahead(const RunOptions&, const Launch&);
    // What add_path_rules() still has to do, kept from prepare_ahead().
    struct Pending {
        Launch launch;
        bool workspace = false;
        std::vector<PathRule> allowed;  // --allow-read/--allow-write, checked and resolved
        std::optional<Launcher> launcher;
    };
    std::optional<Pending> pending_;
    Sandbox profile_ = Sandbox::Off;
    SandboxNet net_ = SandboxNet::Any;
    int abi_ = 0;
    std::string abi_error_;
    std::vector<PathRule> paths_;
    std::vector<std::string> skipped_;  // allowed paths that do not exist
    std::vector<uint16_t> connect_;
    bool bind_ephemeral_ = false;
    bool seccomp_net_ = false;  // socket families/types refused
    bool scoped_ = false;
    std::vector<std::string> syscalls_;
    std::vector<std::string> env_, env_dropped_;
    std::string tmp_;
    std::optional<Launcher> launcher_;
    bool fetch_ = false;
    std::vector<std::string> not_enforced_;
    std::optional<landlock::Ruleset> ruleset_;
    SeccompProgram seccomp_;
    uint32_t restrict_flags_ = 0;
    Fd denial_send_, denial_receive_;
    std::string denials_uncounted_;
};

// Builds the rules of the sandbox fields of `s` (sandbox, allow_read, allow_write, net,
// allow_connect, env_allow) for `l` and prepares their enforcement; creates the private
// temporary directory (0700). With sandbox Off: an empty plan that changes nothing. A port
// outside 1-65535 allows nothing. Errors name the rule that could not be made
// ("--allow-read /x: No such file or directory"). prepare_ahead() followed by
// add_path_rules(); nothing is left behind by a plan that failed.
Result<Plan> prepare(const RunOptions& s, const Launch& l);
// The first half: everything but the private directory and the path rules (which
// add_path_rules() makes, possibly after a fork). A missing --allow-read/--allow-write path
// is refused here, before anything is made.
Result<Plan> prepare_ahead(const RunOptions& s, const Launch& l);

// The plan's seccomp program is one of three: the refused calls alone (--net any), or with
// the socket rules of a restricted network, where TCP is allowed (Landlock restricts its
// ports) or, with no Landlock TCP rules to lean on, refused as well.
struct SeccompPolicy {
    bool restrict_net = false;
    bool inet_allowed = true;  // with restrict_net: TCP sockets allowed
};
// The program, built by libseccomp: the source of truth, and ~0.8 ms of CPU in a fresh
// process (its first use probes the kernel and faults in its tables; the export alone is
// ~0.3 ms), all of it on a start's critical path. So a plan takes it precompiled instead:
Result<SeccompProgram> build_seccomp(SeccompPolicy p);
// the same program as build_seccomp() exported it for x86-64 (src/sandbox/seccomp_programs.inc,
// generated and checked by tests/sandbox/seccomp_program_test.cpp, which runs both on every
// call number and the arguments that matter and refuses any difference); nullopt on another
// architecture, where the plan builds it.
std::optional<SeccompProgram> precompiled_seccomp(SeccompPolicy p);

// Removes the private temporary directory and everything in it (the session is over).
void remove_private_tmp(const std::string& dir);

// The environment variables a confined server keeps without --env-allow.
const std::vector<std::string_view>& base_env_names();

}  // namespace warden::sandbox
