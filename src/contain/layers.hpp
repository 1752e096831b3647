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

#include "sys/cgroup.hpp"
#include "sys/pidfd.hpp"

namespace warden {

// Failure injection for the fallback paths (tests, `MCPWARDEN_FAULT=pidfd_open,clone3,
// cgroup,cgroup_kill,pidfd_getfd,proc_children,landlock` for whole-binary runs): each flag makes
// that call fail as if the kernel or the machine refused it, so the weaker path runs for real.
// The `keeper_*` flags switch off one guard of the shim's keeper (src/shim/keeper.hpp), so that
// a test can show what goes wrong without it (the negative controls).
struct Faults {
    bool pidfd_open = false;     // pidfd_open fails (ENOSYS): starttime checks + kill(2)
    bool clone3 = false;         // clone3 fails: fork(), child moves itself into the cgroup
    bool cgroup = false;         // creating the session cgroup fails: no cgroup layer
    bool cgroup_kill = false;    // writing cgroup.kill/cgroup.freeze fails: per-pid SIGKILL
    bool pidfd_getfd = false;    // pidfd_getfd refused: the tree's ports from /proc/net tables
    bool proc_children = false;  // no /proc/PID/task/TID/children: members by a /proc scan
    bool landlock = false;       // no Landlock (the sandbox's "not enforced" path; not in any())
    bool runner_store =
        false;  // a missing npx/uvx store is not made before confining (not in any())
    bool sandbox_ready_early = false;  // the relay tells the keeper to start the server before
                                       // the plan's path rules are in (not in any())
    bool keeper_pgrp = false;          // the keeper stays in the client's process group
    // The relay leaves the keeper on its own CPU while it adds the path rules (keeper_same_cpu,
    // a benchmark's comparison); the keeper keeps the smaller set of CPUs it was given for that
    // time, and the server inherits it (keeper_cpus_kept). Neither in any().
    bool keeper_same_cpu = false;
    bool keeper_cpus_kept = false;
    bool keeper_client_watch = false;  // the keeper does not watch the client itself
    bool keeper_session_end = false;   // the keeper never writes session.end for the relay
    // --isolate=pidns (not in any()): pidns_exit_notice: the keeper hears of the server's exit
    // only by SIGCHLD, which the namespace init's child never sends it; pidns_grace: the
    // grace waits for an empty cgroup, which the namespace init keeps populated.
    bool pidns_exit_notice = false;
    bool pidns_grace = false;
    bool keeper_stderr = false;        // the keeper logs to fd 2 itself, where the server's stderr
                                       // pipe is put to be handed over (not in any())
    bool keeper_journal_late = false;  // the keeper opens its journal when the teardown begins
                                       // and, if it cannot, leaves the teardown unrecorded
    // The keeper's opening of its journal takes 2 s longer (a slow disk; keeper_journal_slow,
    // a test condition, not a guard), and runs in its wait loop rather than on a thread of its
    // own (keeper_journal_inline). Neither in any().
    bool keeper_journal_slow = false;
    bool keeper_journal_inline = false;
    bool journal_lock_wait = false;  // the relay's teardown waits for the journal lock as
                                     // long as a request may (its bound switched off)
    // Intents (journal.cpp): the relay's writer thread never chains them (journal_hold_intents,
    // as if the relay always died first); the keeper does not recover them (keeper_intents).
    bool journal_hold_intents = false;
    bool keeper_intents = false;
    // The teardown signals first and records after (shim/keeper.cpp, "The keeper's journal").
    // keeper_records_first: the keeper finishes its journal's opening and commits the
    // snapshot and each signal before the signal, as it once did; keeper_evidence_wait: it
    // writes its records without waiting for the relay's evidence to be committed. Test
    // conditions (not guards): journal_slow_writer: each commit of a journal's writer thread
    // comes 500 ms late (a slow disk); relay_dies_at_teardown: the relay exits right after
    // asking for the teardown. None in any().
    bool keeper_records_first = false;
    // keeper_no_intents: the keeper's teardown records are in its memory only until their
    // commit, not in the session's intent file before what they precede (a guard off);
    // keeper_dies_after_signal: the keeper SIGKILLs itself right after its first signal (a
    // test condition: a death between the signal and the records' commit).
    bool keeper_no_intents = false;
    bool keeper_dies_after_signal = false;
    bool keeper_evidence_wait = false;
    bool journal_slow_writer = false;
    bool relay_dies_at_teardown = false;
    // The end of `run` (shim/session.cpp, release_keeper): relay_leaves_keeper: the relay
    // returns without reaping its keeper (a guard off); journal_owed_file: the next writer
    // does not write the checkpoint file a session.end left to it (a guard off). Neither in
    // any().
    bool relay_leaves_keeper = false;
    bool journal_owed_file = false;
    // The keeper's teardown records after a teardown the relay asked for (shim/keeper.cpp,
    // "The keeper's journal"): keeper_commits_records: the keeper commits them itself before
    // its report, as it once did (the benchmark's A/B); relay_drops_keepers_records: the
    // relay, handed them in the intent file, does not commit them before its session.end
    // and removes the file at its close (a guard off); relay_dies_at_report: the relay exits
    // once it has the report, before it commits anything (a test condition). None in any().
    bool keeper_commits_records = false;
    bool relay_drops_keepers_records = false;
    bool relay_dies_at_report = false;
    // records_reparsed: those records are handed over as they once were: serialized again by
    // the keeper once the tree is gone, each line parsed into a Json by the relay and
    // serialized once more (the benchmark's A/B; not in any()).
    bool records_reparsed = false;
    // records_with_report: the keeper sends them with its report, once its cgroup is removed,
    // as it once did, not before (the benchmark's A/B; not in any()).
    bool records_with_report = false;
    // report_reparsed: the relay parses the keeper's report into a Json for its session.end,
    // which serializes it again, as it once did (the benchmark's A/B; not in any()).
    bool report_reparsed = false;
    // keeper_dies_before_report: the keeper SIGKILLs itself once it has sent them, before
    // its report (a test condition); recovery_appends_all: a recovery appends every line of
    // an intent file, whether its record is on record already or not (a guard off). Neither
    // in any().
    bool keeper_dies_before_report = false;
    bool recovery_appends_all = false;
    // The relay's records that could not be committed when they were due wait in the
    // session's intent file; they are recovered before its session.end, not after it
    // (shim/journal_sink.cpp, recover_uncommitted). early_append_fails: the commit of a
    // client's loss seen during the journal's start-up fails, as under a lock held past its
    // wait (a test condition); end_before_recovery: session.end goes first (a guard off).
    // Neither in any().
    bool early_append_fails = false;
    bool end_before_recovery = false;
    // The journal's accounting of what it could not record (journal/losses.hpp): loss_slot_off:
    // counts are kept in memory only, and die with a writer that never gets to record them;
    // answers_without_request: an answer to a request not on record is stored with
    // request_seq 0 instead of counted; intents_left_unstarted: reconcile leaves the intent file
    // of a session with no session.start, as it once did. Guards off, not in any().
    bool loss_slot_off = false;
    bool answers_without_request = false;
    bool intents_left_unstarted = false;
    // The relay's journal start-up (shim/journal_sink.cpp, "The journal's start-up"):
    // journal_start_inline: it is done before the relay reads the client, as it once was, so
    // a client's EOF waits for it (a guard off); journal_slow_open: it takes 1 s longer (a
    // slow disk, a lock held: a test condition). Neither in any().
    bool journal_start_inline = false;
    bool journal_slow_open = false;
    // journal_opens_after_spawn: the start-up begins once the server is up, as it once did,
    // not as soon as the keeper is forked and the sandbox complete (shim/session.cpp,
    // open_journal_early; an A/B for bench_shim_teardown, not in any()).
    bool journal_opens_after_spawn = false;
    // journal_opening_beside_keeper: the early start-up's thread may run on the CPU the keeper
    // starts on (shim/session.cpp, opening_cpus; an A/B for bench_shim_teardown and a test's
    // negative control, not in any()).
    bool journal_opening_beside_keeper = false;
    // A journal's opening still under way when the session ends (the relay's start-up, the
    // keeper's attempt ahead) keeps its priority instead of yielding the cores to the
    // teardown (sys/background_thread.hpp; a guard off, not in any()).
    bool journal_opening_not_yielded = false;
    // After cgroup.kill, the members it ended get a SIGKILL through their pidfds too, as
    // they once did: a member still dying then has two on record (a guard off, not in any()).
    bool cgroup_kill_members_again = false;
    bool dead_sessions = false;  // `run` does not end the sessions whose relay and keeper died
    // `run`'s background worker (api/dead_sessions.cpp) waits 1.5 s before its work: a test
    // condition, so that a test can see it beside the session (not in any()).
    bool sweep_linger = false;
    // The run's background worker left to itself (api/dead_sessions.cpp; a guard off, not in
    // any()): no PDEATHSIG, and the session neither ends nor reaps it before `run` returns.
    bool sweep_left = false;
    // `reap` acts on a session whose relay died without first putting what the relay left in
    // its intent file on record (reap/act.cpp; a guard off, not in any()).
    bool reap_intents_late = false;
    // A remnant's proof (inventory/inventory.cpp, find_remnants), two guards off (not in
    // any()): equal_ticks_ordered takes a tree that started in the remnant's own clock tick
    // as born before it; remnant_tree_unchecked looks at the remnant alone, not at what
    // else of its tree a teardown would signal.
    bool equal_ticks_ordered = false;
    bool remnant_tree_unchecked = false;
    // The relay's bounds off (not in any(): no containment layer changes): relay_copy parses a
    // line whole and copies what its reader has not taken; divert_uncapped diverts without cap;
    // relay_queue_unreclaimed: a queue keeps the bytes it wrote until it empties;
    // journal_unpaced: the relay posts to the journal without waiting for its writer.
    bool relay_copy = false;
    bool divert_uncapped = false;
    bool relay_queue_unreclaimed = false;
    bool journal_unpaced = false;
    // A woken server gets only the replayed initialize: not notifications/initialized,
    // logging/setLevel or resources/subscribe (shim/hibernation.hpp; not in any()).
    bool wake_replay = false;
    // --lazy serves a catalog whatever makes it stale (shim/catalog.hpp; not in any()).
    bool lazy_stale = false;
    // A woken --lazy server is not asked the lists served from its catalog again, so a list
    // that changed is never announced to the client (shim/hibernation.hpp; not in any()).
    bool lazy_recheck = false;
    // The catalog keys an answer on its method alone, whatever the era and protocol version
    // of the request (shim/catalog.hpp, answer_key), and serves its legacy lists whatever
    // version the session initialized with (same_legacy_version; not in any()).
    bool catalog_era = false;
    // --idle-stop waits for an initialize handshake before a session may sleep, as if every
    // session were of the legacy era (shim/hibernation.hpp; not in any()).
    bool sleep_needs_handshake = false;
    // `bench teardown` SIGKILLs each trial's keeper as soon as its report is in, as it once
    // did (bench_keeper_killed: a guard off); Containment's destructor waits 300 ms before
    // it removes its cgroups (slow_release: a test condition, the window that kill hit).
    // Neither in any().
    bool bench_keeper_killed = false;
    bool slow_release = false;
    // The teardown's plan reads each member as it once did (contain/member_dir.hpp): our
    // ancestors first, every /proc file by path with the identity read again after each
    // step, and again before every signal a pidfd would deliver anyway. The benchmark's A/B
    // (`bench teardown`, `bench_shim_teardown --ab slow_plan`); not in any().
    bool slow_plan = false;
    // A plan made ahead (contain/teardown.cpp, "A plan made ahead"): cold_plan: the keeper
    // and `bench teardown` make none, each teardown plans from nothing (the benchmark's A/B);
    // plan_ahead_only: the teardown takes the plan made ahead as it stands, without walking
    // the tree for what forked since (a guard off). Neither in any().
    bool cold_plan = false;
    bool plan_ahead_only = false;
    // The plan takes an ancestor of ours when a scope names one (a guard off, not in any()).
    bool ancestors_unprotected = false;
    // `audit verify` takes a prune anchor without the signed journal.pruned record that must
    // explain it (journal/verify.cpp, "Pruned, and proven"; a guard off, not in any()).
    bool prune_unproven = false;
    // The journal writes a SensitiveText (a teardown target's command, a note) as it stands,
    // not redacted (journal/redact.hpp; a guard off for a test's negative control, not in
    // any()).
    bool record_unredacted = false;
    // The relay's scan of an answer longer than --max-message reads no result.resultType,
    // so an input_required one is recorded ok (shim/relay.cpp, Relay::Scan; a guard off,
    // not in any()).
    bool oversize_outcome_unscanned = false;
    // A subscriptions/listen stream still open when the session ends without the client's
    // leaving (the server exited) is recorded abandoned, as a call would be (shim/session.cpp,
    // SettlingSink; a guard off, not in any()).
    bool stream_abandoned = false;
    // A session is never linked to the probe session the same client ran just before it
    // (shim/probe_link.hpp; a guard off, not in any()).
    bool probe_unlinked = false;
    // A request answered from the --lazy catalog leaves no session.protocol (shim/
    // hibernation.hpp; a guard off, not in any()).
    bool served_protocol_unnoted = false;
    // MCPWARDEN_FAULT, comma-separated names of the flags below ("none": no fault); a name
    // that is none of them is ignored, and from_env says so once on stderr.
    static Faults from_env();
    static Faults parse(std::string_view spec);
    static std::vector<std::string> unknown(std::string_view spec);  // the names that are none
    bool any() const {
        return pidfd_open || clone3 || cgroup || cgroup_kill || pidfd_getfd || proc_children ||
               keeper_pgrp || keeper_client_watch || keeper_session_end || keeper_journal_late ||
               journal_lock_wait;
    }
};

struct ContainOptions {
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
    Cgroup session_dir_;  // <base>/mcpwarden-<session>
    Cgroup payload_;      // <session_dir>/payload
};

}  // namespace warden
