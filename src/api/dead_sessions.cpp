// end_dead_sessions_in_background(): what `mcpwarden run` does for the sessions before it whose
// relay and keeper both died (src/reap/dead_sessions.cpp), and for the journal's retention,
// off its own critical path: a client waits for neither, at a server's start or at its end.
//
// The run must not wait for it: a client starting its servers waits for each. So the run
// forks the worker and goes on. Nor may the worker outlive the run: when `run` returns,
// nothing it started is alive (docs/RUN.md, "When run returns"), and a process left behind
// by a tool whose purpose is to leave none is the very fault it exists to end. So the worker
// is the run's own child, killed by the kernel should the run die first (PDEATHSIG, checked
// against a parent that died before it was set), and the session ends it and reaps it before
// it returns (run_session's `helper`): usually long done by then; if not, SIGKILL. Nothing it
// does can be torn by that: the journal's transactions are atomic, a reap records its
// snapshot and signal before it signals, and the next run finds whatever is left to do.
// It runs at a lower priority, with its stdio on /dev/null and no other fd of the client: a
// client waiting for EOF on a pipe does not wait for it. It carries the client's environment,
// and so any session marker in it (a run nested in a session is a member of that session,
// and its worker with it); it is told from the session's own processes by its name,
// "mcpwarden-sweep", set before it does anything. Several runs starting at once would all
// find the same dead sessions: the worker holds an exclusive flock on the journal's
// directory, and one that cannot take it leaves the work to the one that did.
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <exception>
#include <string_view>

#include "api/internal.hpp"
#include "fault/faults.hpp"
#include "journal/intents.hpp"
#include "journal/journal.hpp"
#include "journal/prune.hpp"
#include "mcpwarden/reap.hpp"
#include "mcpwarden/settings.hpp"
#include "reap/reap.hpp"
#include "sys/fd.hpp"

namespace warden::api {
namespace {

// The worker's stdio on /dev/null, every other inherited fd closed.
void detach_stdio() {
    int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null >= 0) {
        for (int fd = 0; fd <= 2; ++fd)
            (void)::dup2(null, fd);
    }
    (void)::syscall(SYS_close_range, 3U, ~0U, 0U);
}

// The worker: finds the dead sessions of the run's journal and ends them, then applies the
// retention. Never returns.
[[noreturn]] void end_dead_sessions_worker(const std::string& journal_flag, ProcessId by,
                                           std::chrono::seconds retention, bool linger) {
    detach_stdio();
    (void)::setpriority(PRIO_PROCESS, 0, 10);
    if (linger) ::usleep(1500 * 1000);
    try {
        auto path = journal::resolve_path(journal_flag);
        if (!path || ::access(path->c_str(), R_OK) != 0) ::_exit(0);
        const std::string dir = path->substr(0, path->rfind('/') + 1);
        Fd lock(::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!lock.valid() || ::flock(lock.get(), LOCK_EX | LOCK_NB) != 0) ::_exit(0);
        auto dead = reap::dead_sessions(*path);
        const bool ending = dead && !dead->empty();
        const int64_t keep_ns =
            std::chrono::duration_cast<std::chrono::nanoseconds>(retention).count();
        bool pruning = false;
        if (keep_ns > 0)
            if (auto due = journal::prune_due(*path, keep_ns)) pruning = *due;
        if (!ending && !pruning) ::_exit(0);
        auto j = journal::Journal::open({.path = *path});
        if (!j) ::_exit(0);
        if (ending) {
            reap::EndDeadSessionsOptions o;
            o.plan.journal_path = *path;
            o.plan.use_client_configs = false;  // the session cgroup and marker name them
            o.act.journal = j->get();
            o.by = by;
            // Requests their relays forwarded but had not chained: on record before the ends.
            for (const auto& d : *dead)
                (void)journal::recover_session_intents(**j, d.id);
            (void)reap::end_dead_sessions(*dead, o);
        }
        if (pruning) {
            journal::PruneOptions p;
            p.older_than_ns = keep_ns;
            p.compact = false;
            // Records an exporter has not delivered are kept unless the user let them go
            // (MCPWARDEN_EXPORT_GAP, else config.toml's [export] export-gap).
            const char* gap = std::getenv("MCPWARDEN_EXPORT_GAP");
            p.export_gap_allow =
                (gap && *gap ? std::string(gap) : export_settings().value("export-gap")) == "allow";
            (void)journal::prune(**j, p);
        }
        (void)(*j)->close();
    } catch (const std::exception&) {
    }
    ::_exit(0);
}

}  // namespace

pid_t end_dead_sessions_in_background(const std::string& journal_path,
                                      std::chrono::seconds retention) {
    const Faults faults = Faults::from_env();
    if (faults.dead_sessions) return 0;
    const ProcessId self{::getpid(), journal::process_starttime(::getpid()).value_or(0)};
    const pid_t worker = ::fork();
    if (worker < 0) return 0;  // nothing lost: the next run (or `reap`) looks again
    if (worker == 0) {
        (void)::prctl(PR_SET_NAME, "mcpwarden-sweep", 0UL, 0UL, 0UL);  // the worker's from birth
        if (!faults.sweep_left) (void)::prctl(PR_SET_PDEATHSIG, SIGKILL, 0UL, 0UL, 0UL);
        if (::getppid() != self.pid) ::_exit(0);  // the run died before PDEATHSIG was set
        end_dead_sessions_worker(journal_path, self, retention, faults.sweep_linger);
    }
    return worker;
}

}  // namespace warden::api
