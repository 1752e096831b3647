// libmcpwarden — reap: remove MCP server trees that other clients left behind, safely and
// on record (what `mcpwarden reap` does; docs/REAP.md).
//
//     warden::api::ReapOptions o;
//     o.selection.orphans = true;                      // the orphans `ps` shows
//     auto reaper = warden::api::Reaper::open(o);      // opens the journal: nothing is
//     if (!reaper) return fail(reaper.error().message);   // reaped off the record
//     auto plan = reaper->plan();                      // one inventory scan, safety rules
//     if (!plan) return fail(plan.error().message);
//     warden::api::ReapReport r = reaper->act(*plan);  // snapshot, revoke, teardown, verify
//     return r.ok ? 0 : 1;
//
// Per tree, always in this order: identity re-checked, a process.snapshot of every member
// journaled, the revoke hook (if any), teardown (leaves first, grace, SIGKILL), a sweep for
// what escaped, verification (nothing left, ports bindable), the outcome journaled. A tree
// ps calls live, PID 1, the caller and its ancestors, and other users' processes (unless
// root asked for them) are refused, never signalled; refusals are in the plan with why.
// Only standard-library types; nothing throws.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/process_ref.hpp"
#include "mcpwarden/result.hpp"
#include "mcpwarden/types.hpp"

namespace warden::api {

// "500ms", "30s", "5m", "2h", "1d", and sums like "1h30m". The error names the text and why.
MCPW_API Result<std::chrono::milliseconds> parse_duration(const std::string& text);

// A user name or a numeric uid → the uid. Error "NAME: no such user".
MCPW_API Result<uid_t> user_id(const std::string& name_or_uid);

// What to reap. Nothing is selected by name or by PPID alone: `match` only narrows.
using warden::ReapSelection;  // types.hpp

// The usage rules, with the texts `mcpwarden reap` prints ("nothing selected: give
// --orphans, --session ID or --pid N", …). nullopt when the selection is usable.
MCPW_API std::optional<Error> reap_check(const ReapSelection& selection);

// `reap`'s configuration (types.hpp: where it is read from); a missing file is an empty one.
using warden::ReapConfig;
MCPW_API Result<ReapConfig> reap_config();

struct ReapOptions {
    ReapSelection selection;
    std::string journal_path{};  // empty: $MCPWARDEN_JOURNAL, $XDG_STATE_HOME/mcpwarden/…
    // The scan, as `mcpwarden ps` makes it: the servers detected client configs declare
    // count as evidence.
    bool use_client_configs = true;
    // When the journal cannot be opened: an error (true), or plan without one (false: only
    // for a plan that is never acted on).
    bool journal_required = true;
    std::string revoke_cmd{};  // run via /bin/sh -c before any signal, target JSON on stdin
    std::chrono::milliseconds revoke_timeout{30000};
    bool force = false;                     // go on with the teardown when the revoke hook fails
    std::chrono::milliseconds grace{2000};  // SIGTERM → SIGKILL
    // Block SIGTERM/SIGINT/SIGHUP and receive them through wait_for_stop() (for a repeating
    // reaper). Done before the journal starts its writer thread, so that thread inherits
    // the mask; the mask is restored when the Reaper is destroyed.
    bool stop_signals = false;
};

using warden::ReapMember;     // types.hpp
using warden::ReapTreeFacts;  // types.hpp

// A tree to tear down: its top process(es) and everything below them.
// ReapTreeFacts (types.hpp): roots, selected_as, reasons, session, cgroup, members, uid,
// age_seconds, root(); the plan's own, as it is.
struct ReapTree : ReapTreeFacts {
    std::uint64_t rss_kb = 0;
    std::string capabilities_json;  // ports, sockets, credential env names of the members

    // The command of the first root ("?" when unknown).
    std::string command() const {
        for (const ReapMember& m : members)
            if (m.id.pid == root().pid) return m.command;
        return "?";
    }
};

using warden::ReapRefusal;  // types.hpp

struct ReapPlanState;  // the library's; keeps what act() needs

struct ReapPlan {
    std::vector<ReapTree> trees;
    std::vector<ReapRefusal> refused;
    std::size_t scanned = 0;            // processes in the scan
    std::vector<std::string> warnings;  // the inventory's (journal or client configs unreadable)
    // --session cgroup directories (`…/mcpwarden-ID`) with no process of the session left:
    // act() removes them once empty (nothing to signal).
    std::vector<std::string> empty_cgroups;
    std::shared_ptr<const ReapPlanState> state{};
};

struct ReapProcess {
    ProcessRef id;
    std::string command;
    std::string outcome;  // how it ended: "exited-eof", "exited-grace", "killed", …
};

struct ReapTreeResult {
    ProcessRef root;
    std::string command;
    // "reaped" | "survivors" | "revoke-failed" | "identity-changed" | "gone" | "not-recorded"
    std::string outcome;
    std::string detail;  // one line for humans
    bool ports_free = true;
    bool revoke_ran = false;  // the hook ran: revoke_ok, revoke_result, revoke_output
    bool revoke_ok = false;
    std::string revoke_result;  // "exited 0", "killed by signal 9", "timed out …"
    std::string revoke_output;  // its stdout + stderr (at most 64 KiB)
    bool torn_down = false;     // the teardown ran: processes, survivors
    std::vector<ReapProcess> processes;
    std::size_t survivors = 0;
    // The session's cgroup directories after the tree was reaped: "cgroup PATH removed" or
    // "cgroup PATH left: why" (also at the end of detail).
    std::vector<std::string> cgroup;
};

struct ReapReport {
    std::vector<ReapTreeResult> trees;
    // ReapPlan::empty_cgroups, one line per directory: "cgroup PATH removed" or
    // "cgroup PATH left: why". Not removing one does not make ok false.
    std::vector<std::string> cgroups;
    bool ok = true;  // every tree reaped (or gone before we acted)
};

// What `mcpwarden run` does before its session starts: the sessions of this boot in the
// journal `journal_path` (empty: the default) whose relay and keeper both died, and whose end
// nobody recorded, are reaped as `reap --session ID --yes` would (their remnants, their
// session cgroups), ended on record, and each gets a `reap.dead_session` record naming this
// process as `by_run`; then, with `retention` above zero, records older than it are pruned
// as `journal prune --older-than` would, without compacting. In a child process of the
// caller, niced, killed by the kernel should the caller die first: returns after one fork,
// whatever it finds, with the child's pid (0: none started) (docs/REAP.md, "Sessions nobody
// ended"). The child must not outlive the caller's session: hand it to run_session(), which
// ends it (SIGKILL, if it is still at work) and reaps it before the session returns; what it
// had not done by then, the next run does. MCPWARDEN_FAULT=dead_sessions turns it off (a
// test's negative control).
MCPW_API pid_t end_dead_sessions_in_background(const std::string& journal_path,
                                               std::chrono::seconds retention = {});

class MCPW_API Reaper {
  public:
    // Loads nothing but the journal (and the signal fd with stop_signals). Errors: an
    // unusable selection (reap_check), a journal that cannot be opened (when required).
    static Result<Reaper> open(const ReapOptions& options);
    Reaper(Reaper&&) noexcept;
    Reaper& operator=(Reaper&&) noexcept;
    ~Reaper();  // closes the journal, restores the signal mask

    // One inventory scan (as `mcpwarden ps`) and the session cgroups → the plan.
    Result<ReapPlan> plan();
    // Acts on every tree of the plan, in order, then journals the pass record.
    ReapReport act(const ReapPlan& plan);
    // Journals the pass record of a plan that is not acted on (a dry run, nothing to do).
    void record_plan(const ReapPlan& plan, bool dry_run);
    bool has_journal() const;
    // With stop_signals: waits up to `timeout` for SIGTERM/SIGINT/SIGHUP and returns its
    // number (0 when it could not be read); nullopt when the time ran out.
    std::optional<int> wait_for_stop(std::chrono::milliseconds timeout);
    // Flushes and closes the journal; the error says why it could not.
    std::optional<Error> close();

    struct Impl;

  private:
    explicit Reaper(std::unique_ptr<Impl> impl);
    std::unique_ptr<Impl> impl_;
};

}  // namespace warden::api
