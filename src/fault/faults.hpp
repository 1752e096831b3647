// src/fault — the fault injections the tests use to prove a guard.
//
// A guard that nothing can switch off is proven only by the scenario that needs it, and a
// test of that scenario passes whether the guard works or the scenario never arose. Each
// switch here turns one guard off, makes one call fail as the kernel or the machine may make
// it fail, or sets a test condition (a slow disk, a death at a given moment), so that a test
// can show what goes wrong without the guard: its negative control. A switch that would keep
// an old algorithm alive beside the new one does not belong here: a benchmark compares with
// the previous build (`--base-cli`), and the old version is in git.
//
// A leaf below every layer: the journal, the engine and the shim read their switches here,
// and none of them includes another's headers for them. Adding a switch: a bool at the end
// of Faults, its name at the end of kFaultNames (faults.cpp, whose static_assert fails the
// build when one is missing), and the test that uses it.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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
    // The keeper keeps the smaller set of CPUs it was given while the relay adds the path
    // rules, and the server inherits it (a guard off, not in any()).
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
    // The keeper's opening of its journal hangs for a minute (a hung disk; a test condition),
    // and the keeper waits for an opening still under way before it exits, as it once did
    // (keeper_waits_for_opening, a guard off). Neither in any().
    bool keeper_journal_stuck = false;
    bool keeper_waits_for_opening = false;
    // A journal's writer thread counts as its work what is not: a WAL checkpoint once the
    // end's sync is left to the next writer, a flush with nothing queued (another thread
    // commits it, or it is done and the flusher has yet to run). Its wait then returns at
    // once, every time, and it spins (a guard off, not in any()).
    bool writer_spins = false;
    // The broker records its clients' sessions under warn whatever their policy: a request
    // of a --on-journal-failure=deny client that the journal cannot take reaches the shared
    // server (share/broker_clients.cpp, refuse_request; a guard off, not in any()).
    bool share_deny_ignored = false;
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
    // "The keeper's journal"): relay_drops_keepers_records: the relay, handed them in the
    // intent file, does not commit them before its session.end and removes the file at its
    // close (a guard off); relay_dies_at_report: the relay exits once it has the report,
    // before it commits anything (a test condition). Neither in any().
    bool relay_drops_keepers_records = false;
    bool relay_dies_at_report = false;
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
    // intents_left_unstarted: reconcile leaves the intent file of a session with no
    // session.start, as it once did. Guards off, not in any().
    bool loss_slot_off = false;
    bool intents_left_unstarted = false;
    // The relay's journal start-up (shim/journal_sink.cpp, "The journal's start-up"):
    // journal_start_inline: it is done before the relay reads the client, as it once was, so
    // a client's EOF waits for it (a guard off); journal_slow_open: it takes 1 s longer (a
    // slow disk, a lock held: a test condition). Neither in any().
    bool journal_start_inline = false;
    bool journal_slow_open = false;
    // journal_opening_beside_keeper: the early start-up's thread may run on the CPU the keeper
    // starts on (shim/session_start.cpp, opening_cpus; a guard off, not in any()).
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
    // A remnant's proof (inventory/classify.cpp, find_remnants), two guards off (not in
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
    // A plan made ahead (contain/teardown_ahead.cpp, "A plan made ahead"): plan_ahead_only: the
    // teardown takes the plan made ahead as it stands, without walking the tree for what
    // forked since (a guard off, not in any()).
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
    // `run --share` (src/share/): share_peer_unchecked: the broker serves a connection
    // whatever uid is at its other end (a guard off; the multiplexer's own guards, ids mapped
    // and responses checked, are switched off by its tests directly). share_dir_open: the broker's
    // directory is 0711 (a test condition: another user reaches the socket, and the peer check is
    // what refuses it). None in any().
    bool share_peer_unchecked = false;
    bool share_dir_open = false;
    // The exporter (export/follower.cpp), not in any(): export_ack_window is a test condition
    // (after a receiver acknowledged a batch, the exporter waits 30 s before it writes its
    // position: a window for a SIGKILL); export_prune_unheld, a guard off: the retention
    // prunes records no exporter has delivered, silently (journal/prune.cpp);
    // export_ids_random, a guard off: a record's id at the receiver is drawn anew at each
    // send instead of being its hash, so a receiver cannot tell a resent record.
    bool export_ack_window = false;
    bool export_prune_unheld = false;
    bool export_ids_random = false;
    // The server's log and its crash (shim/server_log.hpp, shim/restart.hpp), guards off for
    // their negative controls (not in any()): log_unredacted writes stderr lines as they came;
    // log_blocking makes the relay wait for the log's writer when its queue is full instead of
    // dropping; crash_unexplained leaves the requests in flight when the server dies
    // unanswered; restart_unlimited starts a failing server again without a start limit.
    bool log_unredacted = false;
    bool log_blocking = false;
    bool crash_unexplained = false;
    bool restart_unlimited = false;
    // The sandbox's plan (src/sandbox): sandbox_launcher: a package launcher (npx, uvx, …) is
    // planned as any other command, without its cache or its offline switch, and a package
    // missing from its cache is not refused up front; sandbox_inner_commands: the commands
    // named inside the command line (`sh -c '…'`, `env … CMD`) get no rules.
    // Guards off; neither in any().
    bool sandbox_launcher = false;
    bool sandbox_inner_commands = false;
    // Limits (contain/limits.hpp), none in any(): limits_v1_absent: the host's cgroup v1
    // hierarchies are as if not mounted (a test condition: a host with v2 alone);
    // limits_unwritten: the limit groups are made and joined, but no limit is written (a
    // guard off); limits_unchecked: `run` starts although a limit cannot be enforced, as if
    // limits = "best-effort" (a guard off); oom_untold: the relay does not read the OOM
    // counters, so an OOM kill reads as any other death (a guard off).
    bool limits_v1_absent = false;
    bool limits_unwritten = false;
    bool limits_unchecked = false;
    bool oom_untold = false;
    // --health / --request-timeout (shim/health.hpp): the relay pings and times requests but
    // never calls the server wedged (a guard off, not in any()).
    bool wedged_unjudged = false;
    // The relay, tearing down for a dead keeper, leaves the keeper's cgroup v1 limit groups
    // behind (shim/session_events.cpp, tear_down_ourselves; a guard off, not in any()).
    bool limit_groups_left = false;
    // A health ping's answer counts as activity, so --idle-stop never finds the session idle
    // (shim/health.hpp; a guard off, not in any()).
    bool ping_is_activity = false;
    // The relay's scan of an answer longer than --max-message reads no result.resultType,
    // so an input_required one is recorded ok (rpc/scan.cpp, Scan::outcome; a guard off,
    // not in any()).
    bool oversize_outcome_unscanned = false;
    // A subscriptions/listen stream still open when the session ends without the client's
    // leaving (the server exited) is recorded abandoned, as a call would be
    // (shim/settling_sink.cpp; a guard off, not in any()).
    bool stream_abandoned = false;
    // A session is never linked to the probe session the same client ran just before it
    // (shim/probe_link.hpp; a guard off, not in any()).
    bool probe_unlinked = false;
    // A request answered from the --lazy catalog leaves no session.protocol (shim/
    // hibernation.hpp; a guard off, not in any()).
    bool served_protocol_unnoted = false;
    // The OOM killer's victim is not looked for in the kernel log: named only when it is the
    // server, by its SIGKILL (shim/supervision.cpp; a guard off, not in any()).
    bool oom_victim_unnamed = false;
    // A confined server's refused calls are not counted: the plan's filter answers them by
    // errno itself, as on a kernel without seccomp user notification (sandbox/denials.hpp;
    // a guard off, not in any()).
    bool denials_uncounted = false;
    // The relay's denial counter closes each listener as it arrives, as a relay that crashed
    // would: the refused calls must stay refused (sandbox/denials.hpp; not in any()).
    bool denials_supervisor_gone = false;
    // The broker queues whatever a shared tree answers a client that does not read, without
    // bound (share/broker_clients.cpp, the client queue; a guard off, not in any()).
    bool share_client_queue_unbounded = false;
    // broker.log is never rotated: it grows with every line the broker says (share/broker.cpp,
    // BrokerLog; a guard off, not in any()).
    bool share_log_unrotated = false;
    // A client's per-session variables (CLAUDE_CODE_SESSION_ID …) count in a shared tree's
    // identity, so no two sessions of that client share one (share/client.cpp; a guard off,
    // not in any()).
    bool share_session_vars_kept = false;
    // The exporter starts its cumulative metrics from zero instead of from the totals kept
    // with its position (export/metric_totals.hpp), so a batch sent again after a restart
    // counts differently from the first time (a guard off, not in any()).
    bool export_metric_totals_lost = false;
    // The exporter reads every record after its position at once, whatever --batch and the
    // 4 MiB bound say, so its memory grows with the backlog (export/follower.cpp; a guard
    // off, not in any()).
    bool export_batch_unbounded = false;
    // A package launcher is not told where its cache is (PIPX_HOME): pipx picks its home by its
    // version, which may be one the plan gave no rule (sandbox/launcher.cpp, pipx_home_in; a
    // guard off, not in any()).
    bool sandbox_launcher_home_untold = false;
    // A shared tree takes clients and requests of either protocol era, whatever era its
    // server's connection took (share/mux.hpp, "Eras"; a guard off, not in any()).
    bool share_eras_mixed = false;
    // `run --share` answers every request the dying broker was sent with an error, those it
    // never took included, instead of sending those to the next broker (share/client.cpp,
    // Link; a guard off, not in any()).
    bool share_untaken_failed = false;
    // A journal's database is opened before its lock is taken, so writers opening a new
    // journal at once race its conversion to WAL (journal/journal.cpp, Impl::init; a guard
    // off, not in any()).
    bool journal_opened_unlocked = false;
    // MCPWARDEN_FAULT, comma-separated names of the flags above ("none": no fault); a name
    // that is none of them is ignored, and from_env says so once on stderr.
    static Faults from_env();
    static Faults parse(std::string_view spec);
    static std::vector<std::string> unknown(std::string_view spec);  // the names that are none
    bool any() const {
        return pidfd_open || clone3 || cgroup || cgroup_kill || pidfd_getfd || proc_children ||
               keeper_pgrp || keeper_client_watch || keeper_session_end || keeper_journal_late;
    }
};

}  // namespace warden
