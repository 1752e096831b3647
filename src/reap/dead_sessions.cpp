// Sessions whose relay and keeper both died: found by the next `mcpwarden run`, ended on record.
//
// A session is supervised by two processes, the relay and the keeper; each tears the tree down
// if the other dies. Killed together (by PID, or by an OOM killer that takes both), neither can:
// the server dies of its PDEATHSIG, but a helper it started with setsid() keeps its port, and
// the session cgroup stays. Nobody else looks unless a user runs `reap`.
//
// So each `mcpwarden run` looks, off its own critical path (docs/REAP.md, "Sessions nobody
// ended"). What it looks for is decided by the journal alone, cheaply, so that a run on a
// healthy machine pays one query: the sessions of this boot whose end is not on record
// (`running`, `client_lost`) and whose relay (`writer` of session.start) is gone; of those,
// the ones whose keeper is gone too. A session whose keeper lives is the keeper's to end.
//
// For those the run does what `reap --session ID --yes` does — one inventory scan, the session
// cgroup and the trusted session marker name the processes, the plan's safety rules apply
// (never a tree with a live client end outside it, never another user's process), snapshot,
// teardown, cgroup removal — and then ends each session on record (session.orphaned through
// reconcile, also for a session of which nothing was left), so the next run does not find it
// again. One `reap.dead_session` record per session says which run did it.
#include <algorithm>

#include "journal/query.hpp"
#include "reap/reap.hpp"

namespace warden::reap {
namespace {

bool supervisor_gone(const ProcessId& id) {
    return id.pid <= 0 || id.starttime == 0 || !is_alive(id);
}

}  // namespace

Result<std::vector<DeadSession>> dead_sessions(const std::string& journal_path) {
    auto unended = journal::unended_sessions(journal_path, boot_id());
    if (!unended) return unended.error();
    std::vector<DeadSession> dead;
    for (const journal::UnendedSession& u : *unended) {
        if (!u.start.is_object()) continue;
        DeadSession d;
        d.id = u.session;
        d.relay = journal::identity_of(u.start.value("writer", journal::Json()));
        d.keeper = journal::identity_of(u.start.value("keeper", journal::Json()));
        if (supervisor_gone(d.relay) && supervisor_gone(d.keeper)) dead.push_back(std::move(d));
    }
    return dead;
}

DeadSessionReport end_dead_sessions(const std::vector<DeadSession>& sessions,
                                    const EndDeadSessionsOptions& opts) {
    DeadSessionReport out;
    if (sessions.empty() || !opts.act.journal) return out;
    Selection sel;
    for (const DeadSession& d : sessions)
        sel.sessions.push_back(d.id);
    auto p = plan(sel, opts.plan);
    if (!p) {
        out.error = p.error().message;
        return out;
    }
    out.plan = std::move(*p);
    out.act = act(out.plan, opts.act);
    // act() ends the sessions it reaped something of; one with nothing left (its server died
    // of PDEATHSIG, no cgroup) is ended here, or every later run would find it again.
    if (out.act.sessions_ended.empty())
        if (auto rec = journal::reconcile(*opts.act.journal); rec)
            out.act.sessions_ended = rec->orphaned;
    journal::Json by = journal::identity_json(opts.by);
    for (const DeadSession& d : sessions) {
        journal::Json outcomes = journal::Json::object();
        int64_t members = 0;
        std::vector<std::string> cgroup;
        for (size_t i = 0; i < out.plan.trees.size() && i < out.act.trees.size(); ++i) {
            if (out.plan.trees[i].session != d.id) continue;
            const TreeResult& r = out.act.trees[i];
            outcomes[to_string(r.outcome)] = outcomes.value(to_string(r.outcome), 0) + 1;
            members += static_cast<int64_t>(out.plan.trees[i].members.size());
            for (std::string& line : r.cgroup.lines())
                cgroup.push_back(std::move(line));
        }
        for (size_t i = 0; i < out.plan.empty_cgroups.size() && i < out.act.empty_cgroups.size();
             ++i)
            if (out.plan.empty_cgroups[i].session == d.id)
                for (std::string& line : out.act.empty_cgroups[i].lines())
                    cgroup.push_back(std::move(line));
        bool ended = std::find(out.act.sessions_ended.begin(), out.act.sessions_ended.end(),
                               d.id) != out.act.sessions_ended.end();
        (void)opts.act.journal->append(
            journal::Event{"reap.dead_session", d.id, 0,
                           journal::Json{{"by_run", by},
                                         {"relay", journal::identity_json(d.relay)},
                                         {"keeper", journal::identity_json(d.keeper)},
                                         {"outcomes", outcomes},
                                         {"members", members},
                                         {"cgroup", cgroup},
                                         {"ended", ended}}});
    }
    return out;
}

}  // namespace warden::reap
