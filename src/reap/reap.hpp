// src/reap — `mcpwarden reap`: remove what other clients left behind, safely and on record.
//
// This folder owns the path from "these processes should not be here" to "they are gone,
// and the journal says what they were, who revoked what, which signal ended each, and that
// their ports are free again". Per target tree, always in this order (the incident practice
// of docs/ARCHITECTURE.md: identify, prove, preserve — then terminate):
//
//   plan()   one inventory scan (src/inventory, the one `mcpwarden ps` shows) → the trees the
//            selection names (--orphans: the trees ps calls orphans; --session, --pid;
//            narrowed by --older-than, --match, --user), each checked against the safety
//            rules, for the whole tree a teardown would signal: never a tree with a member of
//            a tree ps calls live whose client does not go with it, nor one in which a live
//            process outside the tree holds the write end of a member's stdin or the read end
//            of its stdout; never PID 1, ourselves or an ancestor, never another user's
//            process unless root asked with --all-users. What safety refuses is kept in the
//            plan, with the reason, so the user sees it.
//   act()    per tree: identity re-checked (a changed process is skipped and recorded) →
//            process.snapshot of every member into the journal (durable, before anything
//            else) → the revoke hook, if configured (its exit status and output journaled as
//            reap.revoke; a failure stops that tree unless --force) → teardown through the
//            contain engine (leaves first, pidfds, grace, SIGKILL) with a journal observer,
//            so signal and exit records follow the snapshot → sweep: re-plan by true identity
//            (every planned and every torn-down (pid, starttime), and the tree's session
//            marker) for what the engine's walk from the roots could not reach — a member
//            reparented away between plan and signal, one whose identity check failed — and
//            tear that down too, until a pass finds nothing new → verify (nothing of the tree
//            left, ports bindable) → reap.target with the teardown report.
//
// Nothing is selected by name or by PPID alone: --match only narrows another selector.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "contain/teardown.hpp"
#include "journal/journal.hpp"
#include "mcpwarden/types.hpp"
#include "proc/process.hpp"
#include "sys/result.hpp"
#include "sys/sensitive_text.hpp"

namespace warden::reap {

// "500ms", "30s", "5m", "2h", "1d", and sums like "1h30m". Error names the text and why.
Result<std::chrono::milliseconds> parse_duration(std::string_view text);
// The shortest of the forms above that parse_duration reads back ("10m", "1h30m", "250ms").
std::string format_duration(std::chrono::milliseconds d);

// ---- Selection ---------------------------------------------------------------------------

using Selection = ReapSelection;  // mcpwarden/types.hpp

// The usage rules, with the texts the CLI prints:
//   no selector             "nothing selected: give --orphans, --session ID or --pid N"
//   --match alone           "--match only narrows a selection: give --orphans, --session ID
//                            or --pid N as well"
//   other user, not root    "--user NAME: only root may reap another user's processes
//                            (with --all-users)"
Status validate(const Selection& sel);

struct PlanOptions {
    bool use_cgroup = true;      // look for session cgroups under the cgroup2 mount
    std::string cgroup_mount{};  // empty: cgroup2_mount()
    // The inventory scan, as `mcpwarden ps` makes it: the journal's sessions (empty path:
    // journal::resolve_path()) and the servers declared in detected client configs.
    std::string journal_path{};
    bool use_client_configs = true;
};

using Member = ReapMember;  // mcpwarden/types.hpp

// A tree to tear down: its top process(es) and everything below them.
// Roots, selection, reasons, session, cgroup, members, uid and age: ReapTreeFacts
// (mcpwarden/types.hpp), what the API's ReapTree hands out.
struct TargetTree : ReapTreeFacts {
    // The session's cgroup directories (`…/mcpwarden-<session>`, payload below): for
    // --session the ones named for this exact id on the cgroup2 mount; for any tree with a
    // session, the ones a member sat in (its /proc/PID/cgroup). Removed once empty.
    std::vector<std::string> cgroup_dirs;
    // The tree's `mcpwarden run` relay/keeper at plan time (inventory's supervisors): while
    // one is alive the session's cgroup is its own, never reap's to remove.
    std::vector<ProcessId> supervisors;
    // The MCPWARDEN_SESSION value the post-teardown sweep may follow: set when every process
    // that carried it at plan time is a member, so a carrier found later can only have come
    // from this tree. "" when the tree has no session or shares it with processes outside.
    std::string marker;
    nlohmann::json capabilities = nlohmann::json::object();  // ports, sockets, credential env

    const Member* member(pid_t pid) const;
    uint64_t rss_kb() const;
};

using Refusal = ReapRefusal;  // mcpwarden/types.hpp

// A --session whose cgroup directories were found with no process of the session left in
// them nor carrying its marker (the relay and keeper were SIGKILLed and the server died by
// PDEATHSIG): nothing to signal, only the empty directories to remove.
struct EmptySessionCgroup {
    std::string session;
    std::vector<std::string> dirs;  // `…/mcpwarden-<session>`
};

struct Plan {
    std::vector<TargetTree> trees;
    std::vector<EmptySessionCgroup> empty_cgroups;
    std::vector<Refusal> refused;
    size_t scanned = 0;                 // processes in the scan
    std::vector<std::string> warnings;  // the inventory's (journal or client configs unreadable)
};

// One inventory scan (/proc with fds, env names and sockets, pipe peers, journal sessions,
// declared servers) and session cgroups → the plan. Errors only for an unusable selection
// (validate()) or an unreadable /proc.
Result<Plan> plan(const Selection& sel, const PlanOptions& opts = {});

// ---- Acting ------------------------------------------------------------------------------

struct RevokeHook {
    std::string command;  // run as /bin/sh -c COMMAND, target JSON on stdin
    std::chrono::milliseconds timeout{30000};
};

// What the hook did. ok() = it ran and exited 0 within the timeout.
struct RevokeResult {
    std::optional<int> exit_status;
    std::optional<int> term_signal;
    bool timed_out = false;
    std::string output;       // stdout + stderr, at most 64 KiB
    size_t output_bytes = 0;  // everything it wrote
    int64_t duration_ns = 0;
    std::string error;  // it could not be started, or its stdin could not be written
    bool ok() const { return error.empty() && !timed_out && exit_status && *exit_status == 0; }
    std::string describe() const;  // "exited 0", "exited 3", "killed by signal 9", "timed out …"
};

// The JSON the hook reads on stdin: target identity, session, members and capabilities.
nlohmann::json revoke_input(const TargetTree& t);
// Runs the hook once for `t` (posix_spawn; own process group; killed at the timeout).
RevokeResult run_revoke_hook(const RevokeHook& hook, const TargetTree& t);

struct ActOptions {
    journal::Journal* journal = nullptr;  // required: nothing is signalled off the record
    std::optional<RevokeHook> revoke;
    bool force = false;  // continue past a failed revoke hook
    std::chrono::milliseconds grace{2000};
    std::string operator_name;  // for authorization.revoked; empty: our user name
    // Test seam, passed to the engine: rewrite a target's identity after its plan.
    std::function<void(std::vector<Target>&)> after_plan{};
    // Bound on the re-plan passes after the teardown (each tears down what it found).
    // 0 is a test seam: the first pass alone, so a test can show what it misses; the
    // verification still looks for everything of the tree.
    int sweep_rounds = 4;
};

enum class TreeOutcome {
    Reaped,           // every member gone, ports bindable
    Survivors,        // something of the tree is still alive (or a port is still held)
    RevokeFailed,     // the hook failed; nothing signalled
    IdentityChanged,  // a root is no longer the planned process; nothing signalled
    Gone,             // every root ended before we acted
    NotRecorded,      // the snapshot could not be journaled; nothing signalled
};
const char* to_string(TreeOutcome o);  // "reaped", "survivors", "revoke-failed", …

// What became of a session's cgroup directories after its tree was reaped (or for an
// EmptySessionCgroup): `payload` first, then `mcpwarden-<session>`, each rmdir'ed only when
// the kernel agrees it is empty (EBUSY otherwise), and never while a process holds the
// directory open (a live keeper does) or a supervisor of the tree is alive.
struct CgroupCleanup {
    std::string session;
    std::vector<std::string> removed;  // paths rmdir'ed, in order
    std::vector<std::string> left;     // "PATH: why" (rmdir's strerror, or the guard that held)
    bool empty() const { return removed.empty() && left.empty(); }
    // "cgroup PATH removed" / "cgroup PATH left: why", one per directory.
    std::vector<std::string> lines() const;
    nlohmann::json to_json() const;  // {"removed":[…],"left":[…]}
};

// Removes the session's cgroup directories `dirs` (each must be named `mcpwarden-<session>`)
// once empty; `supervisors` alive, or any process but us holding a directory open, leaves
// them. Never fails: what could not be removed is in `left` with the reason.
CgroupCleanup remove_session_cgroups(const std::string& session,
                                     const std::vector<std::string>& dirs,
                                     const std::vector<ProcessId>& supervisors = {});

struct TreeResult {
    ProcessId root;
    SensitiveText command;  // display form; reap.target holds it redacted
    TreeOutcome outcome = TreeOutcome::Gone;
    std::string detail;  // one line for humans (it may name commands: recorded redacted)
    std::optional<RevokeResult> revoke;    // when a hook ran
    std::optional<TeardownReport> report;  // when teardown ran
    bool ports_free = true;
    CgroupCleanup cgroup;  // the session's cgroup directories, after a reaped tree
};

struct ActReport {
    std::vector<TreeResult> trees;
    std::vector<CgroupCleanup> empty_cgroups;  // one per Plan::empty_cgroups entry
    // Sessions this pass ended on record (session.orphaned): a reaped tree's session whose
    // relay and keeper were gone. No `journal reconcile` step is needed after a reap.
    std::vector<std::string> sessions_ended;
    bool ok() const;  // every tree reaped (or gone)
};

// Acts on every tree of the plan, in order. Never throws.
ActReport act(const Plan& plan, const ActOptions& opts);

// The pass record appended after each run (and each --watch pass): counts and selection.
journal::Event pass_event(const Selection& sel, const Plan& plan, const ActReport* report,
                          bool dry_run);

// ---- Sessions nobody ended ---------------------------------------------------------------

// A session whose relay and keeper are both gone (dead_sessions.cpp says why and how).
struct DeadSession {
    std::string id;
    ProcessId relay, keeper;  // from session.start (`writer`, `keeper`)
};

// The sessions of this boot whose end is not on record and whose relay and keeper are both
// gone. One journal query and a liveness check of two identities per unended session.
Result<std::vector<DeadSession>> dead_sessions(const std::string& journal_path);

struct EndDeadSessionsOptions {
    PlanOptions plan;  // plan.journal_path: the journal the sessions were found in
    ActOptions act;    // act.journal: required
    ProcessId by;      // the `mcpwarden run` (its relay) that does it, for the record
};

struct DeadSessionReport {
    Plan plan;
    ActReport act;
    std::string error;  // the plan could not be made (nothing was signalled)
};

// What `reap --session ID --yes` does for each of `sessions` (one plan, the same safety
// rules), then ends them on record (session.orphaned, also for a session of which nothing
// was left), and appends one `reap.dead_session` record per session: by_run, relay, keeper,
// outcomes, members, cgroup lines, ended.
DeadSessionReport end_dead_sessions(const std::vector<DeadSession>& sessions,
                                    const EndDeadSessionsOptions& opts);

// ---- Configuration -----------------------------------------------------------------------

using Config = ReapConfig;  // mcpwarden/types.hpp
// $XDG_CONFIG_HOME/mcpwarden/reap.toml (else ~/.config/…), or reap.json beside it. Keys:
// revoke_cmd (string), revoke_timeout (duration string). Missing file: an empty Config.
Result<Config> load_config();

}  // namespace warden::reap
