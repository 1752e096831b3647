// The rounds of signals: SIGTERM leaves first and SIGCONT, the waits on pidfds and
// cgroup.events (the EOF window, the grace), the kill of what remains and the sweep until a
// round finds nothing new. Every signal goes through a pidfd bound by identity, checked again
// right before it is sent.
#include <poll.h>
#include <sys/wait.h>

#include <algorithm>
#include <csignal>
#include <cstring>

#include <fmt/format.h>

#include "contain/spawner.hpp"
#include "contain/teardown_state.hpp"

namespace warden {

// ---------------------------------------------------------------------------------------
// Deliver and observe

// Records that t's PID now names another process: never signalled from here on.
void Teardown::State::identity_changed(Target& t, uint64_t now_starttime) {
    t.how = Outcome::IdentityChanged;
    t.ended_ms = now_ms();
    t.pidfd.reset();
    report.notes.push_back(
        fmt::format("{} ({}): identity changed (starttime {} now {}), not "
                    "signalled",
                    t.id.pid, t.command.unredacted(), t.id.starttime, now_starttime));
    if (opts.observer) opts.observer->on_exit(t, t.how);
}

// A target bound to a pidfd is the process that pidfd names for as long as it lives, whoever
// holds its PID: its record must still be the identity it was bound with (the PID-reuse seam
// rewrites the record), which needs no read of /proc — one before each SIGTERM and SIGCONT
// was a third of the syscalls before the first signal. Without a pidfd, /proc says.
bool Teardown::State::identity_holds(Target& t) {
    if (t.pidfd) {
        if (t.id == t.bound) return true;
        identity_changed(t, t.bound.starttime);
        return false;
    }
    auto now = read_identity(t.id.pid);
    if (now && now->starttime == t.id.starttime) return true;
    if (!now && t.pidfd) return true;  // gone from /proc: the pidfd answers ESRCH safely
    if (!now) {
        mark_gone(t);
        return false;
    }
    identity_changed(t, now->starttime);
    return false;
}

Status Teardown::State::signal(Target& t, int sig) {
    if (t.how != Outcome::Pending) return {};
    if (!identity_holds(t)) return {};
    if (opts.observer) opts.observer->on_signalling(t, sig);
    Status st;
    if (t.pidfd) {
        st = t.pidfd.send_signal(sig);
    } else if (::kill(t.id.pid, sig) != 0) {
        // No pidfd: the starttime check just above narrows, but cannot close, the window.
        st = Error::sys("kill", std::to_string(t.id.pid), errno);
    }
    // Only what the kernel accepted was sent: a refused signal (ESRCH: the process had
    // already ended) never reached anyone, and the outcome must not say "after SIGTERM".
    if (st) {
        t.signals.push_back(sig);
        if (sig == SIGTERM) ++terms_delivered;
    }
    if (opts.observer) opts.observer->on_signal(t, sig, st);
    return st;
}

void Teardown::State::mark_gone(Target& t) {
    if (t.how != Outcome::Pending) return;
    bool termed = std::count(t.signals.begin(), t.signals.end(), SIGTERM) > 0;
    bool killed = std::count(t.signals.begin(), t.signals.end(), SIGKILL) > 0;
    // Before any SIGTERM was delivered the Term phase has asked nothing yet: what ended
    // then (e.g. a planned process whose PID was recycled, seen through its pidfd) left on
    // its own, in the EOF window if there was one.
    const bool asked = termed || (phase == Phase::Term && terms_delivered > 0);
    if (killed || phase == Phase::Kill || phase == Phase::Verify)
        t.how = Outcome::Killed;
    else if (asked)
        t.how = Outcome::ExitedAfterTerm;
    else if (phase == Phase::Eof || (phase == Phase::Term && opts.eof_window.count() > 0))
        t.how = Outcome::ExitedInEof;
    else
        t.how = Outcome::AlreadyGone;
    t.ended_ms = now_ms();
    if (opts.observer) opts.observer->on_exit(t, t.how);
}

// Terminated? pidfd readiness when we have one (zombie-aware by definition), else the
// starttime-checked, zombie-aware /proc read.
bool Teardown::State::ended(Target& t) {
    if (t.how != Outcome::Pending) return true;
    if (t.pidfd) {
        if (!t.pidfd.is_exited()) return false;
        mark_gone(t);
        return true;
    }
    auto p = read_process(t.id.pid, kStat);
    if (p && p->id.starttime != t.id.starttime) {
        identity_changed(t, p->id.starttime);
        return true;
    }
    if (p && !p->zombie()) return false;
    mark_gone(t);
    return true;
}

// Collects the exit status of our dead children so none lingers as a zombie. As the sole
// parent (the keeper) anything may be reaped; otherwise only members known to be our
// children, whose PIDs cannot be recycled before we reap them.
void Teardown::State::reap_children() {
    auto record = [&](pid_t pid, int st) {
        for (const ProcessId& r : scope.roots)
            if (r.pid == pid && r.pid != scope.ns_init) {
                report.root_status = st;
                if (scope.child) scope.child->set_status(st);
            }
    };
    if (scope.sole_parent) {
        for (int i = 0; i < 100000; ++i) {
            int st = 0;
            pid_t w = ::waitpid(-1, &st, WNOHANG);
            if (w <= 0) break;
            record(w, st);
        }
        return;
    }
    for (Target& t : targets) {
        if (t.ppid != self || !t.pidfd || !t.pidfd.is_exited()) continue;
        int st = 0;
        if (::waitpid(t.id.pid, &st, WNOHANG) == t.id.pid) record(t.id.pid, st);
    }
}

// Populated by something the teardown must still end. The namespace init stays in the
// cgroup until the kill step (it never leaves by itself, by design), so before that step
// the cgroup counts as busy only while a process other than the init is in it: else every
// grace under --isolate=pidns would last its whole length. cgroup.events cannot tell the
// init from the rest, cgroup.procs can.
bool Teardown::State::cgroup_populated() {
    if (!scope.cgroup) return false;
    auto p = scope.cgroup->populated();
    if (!p.ok() || !*p) return false;
    if (!init_holds_cgroup()) return true;
    auto procs = scope.cgroup->procs();
    return !procs || std::any_of(procs->begin(), procs->end(),
                                 [&](pid_t member) { return member != scope.ns_init; });
}

// Before the kill step, the namespace init keeps the cgroup populated: cgroup.events will
// not say when the rest has gone.
bool Teardown::State::init_holds_cgroup() const {
    return scope.ns_init > 0 && phase != Phase::Kill && !scope.faults.pidns_grace;
}

// Waits until every pending target has ended (or only the root, for the EOF window), or
// until the deadline. One poll over the pending pidfds and cgroup.events; a wakeup means
// something changed, never a timer tick — except for targets without a pidfd (pidfd layer
// off), which can only be re-read, every 5 ms.
bool Teardown::State::wait_for_exits(Clock::time_point deadline, bool root_only) {
    for (;;) {
        reap_children();
        std::vector<pollfd> fds;
        bool blind = false;
        bool any_pending = false;
        for (Target& t : targets) {
            if (root_only && t.role != Role::Root) continue;
            // The namespace init never leaves by itself (by design); only the kill step's
            // SIGKILL ends it, so waiting for it before that would only burn the grace.
            if (t.role == Role::NamespaceInit && phase != Phase::Kill) continue;
            if (ended(t)) continue;
            any_pending = true;
            if (t.pidfd)
                fds.push_back({t.pidfd.get(), POLLIN, 0});
            else
                blind = true;
        }
        bool cg_busy = !root_only && cgroup_populated();
        if (!any_pending && !cg_busy) return true;
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        if (left.count() <= 0) return false;
        const bool cg_watchable = cg_events && !init_holds_cgroup();
        if (cg_busy && cg_watchable) {
            // Arm the notification: kernfs wakes POLLPRI readers that read the file first.
            char buf[128];
            ssize_t n = ::pread(cg_events.get(), buf, sizeof buf, 0);
            (void)n;
            fds.push_back({cg_events.get(), POLLPRI, 0});
        }
        int timeout = static_cast<int>(left.count()) + 1;
        if (blind || (cg_busy && !cg_watchable)) timeout = std::min(timeout, 5);
        if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
            report.notes.push_back(std::string("poll: ") + std::strerror(errno));
            return false;
        }
        if (!any_pending && cg_busy) {
            // Something is in the cgroup that the plan does not know: a late fork.
            if (plan_members(report.rounds + 1) > 0) return false;
        }
    }
}

void Teardown::State::wait_in_eof_window() {
    if (opts.eof_window.count() <= 0) return;
    phase = Phase::Eof;
    wait_for_exits(Clock::now() + opts.eof_window, /*root_only=*/true);
    // Whatever the root's exit took with it (e.g. helpers on its pipes) also counts here.
    for (Target& t : targets)
        ended(t);
}

// SIGTERM, deepest first, then SIGCONT to each: a stopped process would hold SIGTERM
// pending for ever. The namespace init is skipped: from outside the namespace only SIGKILL
// reaches it, which is the kill step's job.
void Teardown::State::send_term_leaves_first(const std::vector<size_t>& which) {
    if (phase != Phase::Term) term_started = Clock::now();  // the grace runs from here
    phase = Phase::Term;
    std::vector<size_t> order = which;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return targets[a].depth > targets[b].depth; });
    for (size_t i : order) {
        Target& t = targets[i];
        if (t.role == Role::NamespaceInit) continue;
        if (ended(t)) continue;
        auto st = signal(t, SIGTERM);
        if (!st && st.error().code == ESRCH) mark_gone(t);
    }
    for (size_t i : order) {
        Target& t = targets[i];
        if (t.role == Role::NamespaceInit || t.how != Outcome::Pending) continue;
        (void)signal(t, SIGCONT);
    }
}

// The grace window: wait for the SIGTERMed members; a member forked meanwhile (found by
// re-planning when the known ones are gone but the tree is not empty) gets its SIGTERM too.
void Teardown::State::wait_for_grace() {
    const auto deadline = term_started + opts.grace;
    for (int round = 1; round <= opts.max_rounds; ++round) {
        size_t before = targets.size();
        bool done = wait_for_exits(deadline, false);
        if (Clock::now() >= deadline) return;
        if (done) {
            // Known members ended; is anything left that the first snapshot missed?
            if (plan_members(round) == 0) return;
        }
        std::vector<size_t> fresh;
        for (size_t i = before; i < targets.size(); ++i)
            fresh.push_back(i);
        report.rounds = std::max(report.rounds, round);
        send_term_leaves_first(fresh);
    }
}

// ---------------------------------------------------------------------------------------
// Escalate, sweep, verify

void Teardown::State::kill_targets(const std::vector<size_t>& which) {
    // Top-down for SIGKILL: a killed parent cannot fork replacements for its children.
    std::vector<size_t> order = which;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return targets[a].depth < targets[b].depth; });
    for (size_t i : order) {
        Target& t = targets[i];
        if (ended(t)) continue;
        auto st = signal(t, SIGKILL);
        if (!st && st.error().code == ESRCH) mark_gone(t);
    }
}

void Teardown::State::kill_what_remains() {
    phase = Phase::Kill;
    auto left = pending();
    bool cg_busy = cgroup_populated();
    if (left.empty() && !cg_busy) return;
    // The targets cgroup.kill ends. Only those: a target outside the group (moved out,
    // inherited from before, found by its marker) gets its SIGKILL through its pidfd below,
    // and a member does not get a second one there. Sent right after cgroup.kill, while the
    // members were still dying, that second SIGKILL reached about half of them, and each
    // such target had two on record.
    std::vector<size_t> by_cgroup;
    if (scope.cgroup) {
        // Freeze first: nothing in the group can fork or leave while we kill, so who is in
        // it now is who cgroup.kill ends, which the kernel applies to every member
        // atomically (forks included).
        if (scope.faults.cgroup_kill) {
            report.notes.push_back(
                "cgroup.kill: injected fault (MCPWARDEN_FAULT): SIGKILL "
                "through each pidfd instead");
        } else {
            if (auto st = scope.cgroup->freeze(true); !st)
                report.notes.push_back("cgroup.freeze: " + st.error().message);
            by_cgroup = members_among(left);
            for (size_t i : by_cgroup)
                targets[i].cgroup_killed = true;
            if (opts.observer)
                for (size_t i : by_cgroup)
                    opts.observer->on_signalling(targets[i], SIGKILL);
            if (auto st = scope.cgroup->kill(); !st) {
                report.notes.push_back("cgroup.kill: " + st.error().message +
                                       ": SIGKILL through each pidfd instead");
                for (size_t i : by_cgroup)
                    targets[i].cgroup_killed = false;
                by_cgroup.clear();
            }
        }
        for (size_t i : by_cgroup) {
            if (opts.observer) opts.observer->on_signal(targets[i], SIGKILL, Status{});
            targets[i].signals.push_back(SIGKILL);
            targets[i].cgroup_killed = false;  // a later SIGKILL (the sweep's) is a pidfd's
        }
    }
    if (scope.ns_init > 0) {
        // The namespace's end takes every process in it, forks included.
        for (size_t i : left)
            if (targets[i].role == Role::NamespaceInit) (void)signal(targets[i], SIGKILL);
    }
    // Members outside the cgroup (moved out, inherited from before) and the no-cgroup path.
    std::vector<size_t> rest;
    for (size_t i : pending())
        if (scope.faults.cgroup_kill_members_again ||
            std::find(by_cgroup.begin(), by_cgroup.end(), i) == by_cgroup.end())
            rest.push_back(i);
    kill_targets(rest);
    wait_for_exits(Clock::now() + opts.kill_wait, false);
    if (scope.cgroup && !scope.faults.cgroup_kill) (void)scope.cgroup->freeze(false);
}

// Of `which`, the targets in the session cgroup (or below it) now. A target whose group
// cannot be read is left to its pidfd: it has ended (its SIGKILL then fails harmlessly) or
// is not ours to judge.
std::vector<size_t> Teardown::State::members_among(const std::vector<size_t>& which) {
    std::vector<size_t> members;
    for (size_t i : which) {
        if (ended(targets[i])) continue;
        if (auto in = scope.cgroup->holds(targets[i].id.pid); in && *in) members.push_back(i);
    }
    return members;
}

// Re-plan until a pass finds nothing new: forks that raced the kill, orphans that
// reparented to us while their parents died.
void Teardown::State::sweep_until_nothing_new() {
    bool confirmed = false;
    for (int round = report.rounds + 1; round <= opts.max_rounds; ++round) {
        int fresh = plan_members(round);
        if (fresh == 0 && walked && !confirmed) {
            // Children lists can miss a process forked or orphaned while they were read:
            // the last word is a scan of every process, once, now that the tree is still.
            confirmed = true;
            fresh = plan_members(round, /*full_scan=*/true);
        }
        bool cg_busy = cgroup_populated();
        report.rounds = round;
        if (fresh == 0 && pending().empty() && !cg_busy) return;
        if (scope.cgroup && cg_busy && !scope.faults.cgroup_kill) (void)scope.cgroup->kill();
        kill_targets(pending());
        wait_for_exits(Clock::now() + opts.kill_wait, false);
    }
    report.notes.push_back(fmt::format("sweep stopped after {} rounds", opts.max_rounds));
}

}  // namespace warden
