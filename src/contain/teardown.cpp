// The teardown engine.
//
// An MCP server is not one process. It is a tree that the server grows as it likes:
// `sh -c` and `npx` wrappers, language runtimes, helpers that hold ports, and now and then
// a helper that wants to outlive it. Ending a session means ending that whole tree, and
// every obvious way of doing so has a known hole:
//
//  - setsid(). A process-group kill (killpg) reaches only the group; a helper that called
//    setsid() is in a group of its own and survives. So membership is never "the group":
//    it is the cgroup when we have one, else the ppid tree walked from the root.
//  - Double fork. A daemon's parent exits at once and the daemon is reparented — to PID 1,
//    where no tree walk from the server finds it. We are a child subreaper, so it is
//    reparented to *us* instead, and every process whose parent is us is a member. With a
//    cgroup it never left: members are read from cgroup.procs.
//  - PID reuse. Between reading /proc and calling kill(pid), the process may die and its
//    PID go to a stranger. A target is therefore (pid, starttime), bound to a pidfd by
//    read starttime → pidfd_open → read starttime again; every signal goes through the
//    pidfd, which the kernel refuses (ESRCH) once that process is gone, whoever holds the
//    number now. Before each signal the recorded identity is checked again, so an identity
//    that does not match (the PID-reuse test seam feeds one) is recorded and never signalled.
//  - Zombies. A zombie keeps its /proc entry, so "exists(/proc/PID)" calls it alive. Here
//    liveness is pidfd readiness (readable once the process has terminated), cgroup.events
//    `populated 0` (defined over live processes), and waitid reaping — never /proc presence.
//  - Fork during teardown. Anything forked after the snapshot is not in the plan. With a
//    cgroup, the cgroup is frozen before the kill and cgroup.kill is atomic against forks;
//    without one, the plan is repeated until a pass finds nothing new (systemd does the same),
//    and as subreaper we inherit the orphans of the processes we killed, so they are found.
//  - SIGTERM ignored, or stopped processes. SIGTERM is followed by SIGCONT (a stopped process
//    cannot act on SIGTERM), and after the grace window whatever is left gets SIGKILL.
//  - Misdelivered signals hidden by grace. A grace window makes any strategy look fine: if
//    SIGTERM reached the wrong process, the right one is simply killed 500 ms later. The
//    report therefore counts separately what exited in the EOF window, what exited in the
//    grace window after SIGTERM, and what had to be killed, so a "polite" teardown that in
//    fact kills everything is visible.
//  - The wrong process. Never ourselves, our ancestors, PID 1, kernel threads, or a process
//    of another user than the server's; and never by name.
//
// The steps, as Teardown::run() calls them: plan_members (the snapshot, announced to the
// observer before any signal) → wait_in_eof_window (the caller closed the server's stdin;
// a well-behaved server exits here and nothing needs a signal) → send_term_leaves_first
// (deepest first, so a parent does not respawn a child it sees die; then SIGCONT) →
// wait_for_grace (pidfd readiness and cgroup.events in one poll, reaping as they go, re-
// planning for late forks) → kill_what_remains (freeze, cgroup.kill or a SIGKILL through
// each pidfd; the namespace init when there is one) → sweep_until_nothing_new (bounded
// rounds) → verify_from_outside (every pidfd readable, waitpid ECHILD, populated 0, and each
// port the tree listened on can be bound again) → the report.
//
//
// Each step is a file of its own: the plan (teardown_plan.cpp: who is in the tree, bound by
// identity), the plan made ahead (teardown_ahead.cpp), the ports a member listens on
// (teardown_ports.cpp), the signals and the waits (teardown_signals.cpp), the verification
// from outside and the report (teardown_verify.cpp, teardown_report.cpp).
#include "contain/teardown.hpp"

#include <unistd.h>

#include "contain/teardown_state.hpp"

namespace warden {

const char* to_string(Role r) {
    switch (r) {
        case Role::Root:
            return "root";
        case Role::Descendant:
            return "descendant";
        case Role::Inherited:
            return "inherited";
        case Role::CgroupMember:
            return "cgroup-member";
        case Role::Marker:
            return "session-marker";
        case Role::NamespaceInit:
            return "namespace-init";
    }
    return "?";
}

const char* to_string(Outcome o) {
    switch (o) {
        case Outcome::Pending:
            return "alive";
        case Outcome::ExitedInEof:
            return "exited in EOF window";
        case Outcome::ExitedAfterTerm:
            return "exited after SIGTERM";
        case Outcome::Killed:
            return "killed";
        case Outcome::AlreadyGone:
            return "already gone";
        case Outcome::IdentityChanged:
            return "identity changed";
    }
    return "?";
}

const char* exit_phase(Outcome o) {
    switch (o) {
        case Outcome::ExitedInEof:
            return "eof_window";
        case Outcome::ExitedAfterTerm:
            return "grace_window";
        case Outcome::Killed:
            return "after_kill";
        case Outcome::AlreadyGone:
            return "before_signal";
        case Outcome::IdentityChanged:
            return "identity_changed";
        case Outcome::Pending:
            break;
    }
    return "unknown";
}

Teardown::Teardown(TeardownScope scope, TeardownOptions opts) : s_(new State) {
    s_->scope = std::move(scope);
    s_->opts = std::move(opts);
}

Teardown::~Teardown() {
    delete s_;
}

void Teardown::prepare() {
    State& s = *s_;
    if (s.too_large_ahead) return;
    s.start_clock();
    s.plan_ahead();
}

TeardownReport Teardown::run(TeardownOptions opts) {
    s_->opts = std::move(opts);
    return run();
}

// Teardown::run() reads as the algorithm; each step is a State member below.
TeardownReport Teardown::run() {
    State& s = *s_;
    if (s.ahead) {
        // The report is of this teardown: what the plan ahead noted and left alone is
        // judged again by its walk.
        s.skipped.clear();
        s.report.notes.clear();
    }
    s.start_clock();
    s.plan_members(0);
    s.report.phases.plan_cpu_ms = State::thread_cpu_ms() - s.cpu0_ms;
    if (s.opts.after_plan) s.opts.after_plan(s.targets);
    s.report.phases.plan_ms = s.now_ms();

    s.wait_in_eof_window();
    double t = s.now_ms();
    s.report.phases.eof_ms = t - s.report.phases.plan_ms;

    s.send_term_leaves_first(s.pending());
    s.wait_for_grace();
    s.report.phases.grace_ms = s.now_ms() - t;
    t = s.now_ms();

    s.kill_what_remains();
    s.sweep_until_nothing_new();
    s.report.phases.kill_ms = s.now_ms() - t;
    t = s.now_ms();

    s.verify_from_outside();
    s.report.phases.verify_ms = s.now_ms() - t;
    s.build_report();
    return std::move(s.report);
}

void Teardown::State::start_clock() {
    t0 = Clock::now();
    cpu0_ms = thread_cpu_ms();
    self = ::getpid();
    if (scope.uid) {
        uid = *scope.uid;
        uid_known = true;
    }
    // Read again when needed: since a plan made ahead, an ancestor may have gone and its PID
    // have passed to a member.
    ancestors.reset();
    if (scope.cgroup && !cg_events.valid())
        if (auto ev = scope.cgroup->open_events(); ev) cg_events = std::move(*ev);
    report.layers = scope.layers;
}

std::vector<size_t> Teardown::State::pending() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < targets.size(); ++i)
        if (targets[i].how == Outcome::Pending) out.push_back(i);
    return out;
}

}  // namespace warden
