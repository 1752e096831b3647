// act(): per target tree, identity → snapshot → revoke → teardown → verify → record.
//
// Each step that can act is preceded by a durable journal record, so an interrupted reap
// still leaves the evidence of what it was about to do: the snapshot is appended before the
// hook runs, the hook's result before the first signal, every signal before it is sent
// (the observer appends synchronously), and the exits as they are seen. Records written
// here (field lists in docs/REAP.md): process.snapshot (reason "reap"), reap.revoke,
// authorization.revoked (when the hook succeeded), process.signal, process.exit,
// reap.target; and reap.pass once per run (pass_event()).
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "contain/layers.hpp"
#include "journal/intents.hpp"
#include "journal/query.hpp"
#include "journal/redact.hpp"
#include "proc/process_table.hpp"
#include "reap/reap.hpp"
#include "record/teardown_record.hpp"
#include "sys/cgroup.hpp"

namespace warden::reap {

const char* to_string(TreeOutcome o) {
    switch (o) {
        case TreeOutcome::Reaped:
            return "reaped";
        case TreeOutcome::Survivors:
            return "survivors";
        case TreeOutcome::RevokeFailed:
            return "revoke-failed";
        case TreeOutcome::IdentityChanged:
            return "identity-changed";
        case TreeOutcome::Gone:
            return "gone";
        case TreeOutcome::NotRecorded:
            return "not-recorded";
    }
    return "?";
}

std::vector<std::string> CgroupCleanup::lines() const {
    std::vector<std::string> out;
    for (const std::string& p : removed)
        out.push_back("cgroup " + p + " removed");
    for (const std::string& l : left)
        out.push_back("cgroup " + l);
    return out;
}

nlohmann::json CgroupCleanup::to_json() const {
    return nlohmann::json{{"removed", removed}, {"left", left}};
}

CgroupCleanup remove_session_cgroups(const std::string& session,
                                     const std::vector<std::string>& dirs,
                                     const std::vector<ProcessId>& supervisors) {
    CgroupCleanup c;
    c.session = session;
    if (dirs.empty()) return c;
    // A supervisor of the tree still alive: the session is not an orphan, and its keeper
    // (or relay) removes its own cgroup when it ends.
    for (const ProcessId& s : supervisors)
        if (is_alive(s)) {
            for (const std::string& d : dirs)
                c.left.push_back(fmt::format(
                    "{} left: mcpwarden supervisor {} of the session is alive", d, s.pid));
            return c;
        }
    // A process holding a directory open is its keeper (Containment keeps both open for
    // the session's life), or someone else who is using it: either way not ours to remove.
    std::set<std::string> paths;
    for (const std::string& d : dirs) {
        paths.insert(d);
        paths.insert(d + "/payload");
    }
    std::map<std::string, std::string> held;
    const pid_t self = ::getpid();
    const ProcessTable table = ProcessTable::scan(kFds);
    for (const Process& p : table.all()) {
        if (p.id.pid == self || p.zombie()) continue;
        for (const FdInfo& f : p.fds)
            if (paths.count(f.target) && !held.count(f.target))
                held[f.target] = fmt::format("{} ({})", p.id.pid, p.comm);
    }
    const std::string want = "/mcpwarden-" + session;
    for (const std::string& d : dirs) {
        if (session.empty() || !d.ends_with(want)) {
            c.left.push_back(d + " left: not named for session " + session);
            continue;
        }
        bool blocked = false;
        for (const std::string& g : {d + "/payload", d}) {
            if (blocked) {
                c.left.push_back(g + " left: " + d + "/payload is still there");
                break;
            }
            if (auto h = held.find(g); h != held.end()) {
                c.left.push_back(g + " left: held open by " + h->second);
                blocked = true;
                continue;
            }
            if (::rmdir(g.c_str()) == 0) {
                c.removed.push_back(g);
                continue;
            }
            const int err = errno;
            if (err == ENOENT) continue;  // already gone (the session removed it)
            std::string why = fmt::format("{} left: rmdir: {}", g, std::strerror(err));
            if (err == EBUSY)
                if (auto procs = read_file(g + "/cgroup.procs"); procs && !procs->empty()) {
                    std::string list = *procs;
                    std::replace(list.begin(), list.end(), '\n', ' ');
                    while (!list.empty() && list.back() == ' ')
                        list.pop_back();
                    why += " (cgroup.procs: " + list + ")";
                }
            c.left.push_back(std::move(why));
            blocked = true;
        }
    }
    return c;
}

bool ActReport::ok() const {
    for (const TreeResult& t : trees)
        if (t.outcome != TreeOutcome::Reaped && t.outcome != TreeOutcome::Gone) return false;
    return true;
}

namespace {

using journal::Json;

Json pid_json(const ProcessId& id) {
    return Json{{"pid", static_cast<int64_t>(id.pid)}, {"starttime", id.starttime}};
}

// Folds a sweep pass's report into the tree's: a target seen again takes its new outcome,
// a new one is appended (its round after the passes before), counts and times add up, a
// port checked again keeps the later answer.
void fold_pass(TeardownReport& into, TeardownReport&& pass) {
    const int offset = into.rounds + 1;
    for (Target& t : pass.targets) {
        t.round += offset;
        auto same = std::find_if(into.targets.begin(), into.targets.end(), [&](const Target& o) {
            return o.id == t.id && o.how == Outcome::Pending;
        });
        if (same == into.targets.end()) {
            into.targets.push_back(std::move(t));
            continue;
        }
        same->how = t.how;
        same->ended_ms = t.ended_ms;
        same->signals.insert(same->signals.end(), t.signals.begin(), t.signals.end());
    }
    into.exited_in_eof += pass.exited_in_eof;
    into.exited_in_grace += pass.exited_in_grace;
    into.killed += pass.killed;
    into.already_gone += pass.already_gone;
    into.identity_changed += pass.identity_changed;
    into.survivors.insert(into.survivors.end(), pass.survivors.begin(), pass.survivors.end());
    into.rounds = offset + pass.rounds;
    into.phases.kill_ms += pass.phases.total_ms;
    into.phases.total_ms += pass.phases.total_ms;
    for (PortCheck& p : pass.ports) {
        auto same = std::find_if(into.ports.begin(), into.ports.end(), [&](const PortCheck& o) {
            return o.proto == p.proto && o.address == p.address && o.port == p.port;
        });
        if (same != into.ports.end())
            *same = p;
        else
            into.ports.push_back(p);
    }
    for (SensitiveText& n : pass.notes)
        into.notes.push_back(std::move(n));
}

class TreeAct {
  public:
    TreeAct(const TargetTree& t, const ActOptions& o) : t_(t), o_(o), j_(*o.journal) {
        r_.root = t.root();
        if (const Member* m = t.member(t.root().pid)) r_.command = m->command;
    }

    TreeResult run() {
        if (!identity_still_holds()) return finish();
        if (!snapshot_into_journal()) return finish();
        if (!revoke_authority()) return finish();
        tear_down_tree();
        sweep_until_nothing_new();
        observer_->record_exits_no_pass_saw();
        verify_and_record();
        return finish();
    }

  private:
    // Every root must still be the process that was planned; a root that ended is dropped,
    // a root whose PID now names another process stops the whole tree.
    bool identity_still_holds() {
        for (const ProcessId& r : t_.roots) {
            auto now = read_identity(r.pid);
            if (!now) continue;  // ended
            if (now->starttime != r.starttime) return changed(r, now->starttime);
            if (is_alive(r)) roots_.push_back(r);  // else a zombie: its parent reaps it
        }
        // Roots that ended may have left members behind, reparented away from them: those
        // are still the tree (same identity), and the engine starts from them instead.
        if (roots_.empty())
            for (const Member& m : t_.members)
                if (m.uid == t_.uid && is_alive(m.id)) roots_.push_back(m.id);
        if (roots_.empty()) {
            r_.outcome = TreeOutcome::Gone;
            r_.detail = "ended before reap acted";
            return false;
        }
        return true;
    }

    bool changed(const ProcessId& r, uint64_t now_starttime) {
        r_.outcome = TreeOutcome::IdentityChanged;
        r_.detail = fmt::format(
            "{} is no longer the planned process (starttime {} now {}): skipped, not signalled",
            r.pid, r.starttime, now_starttime);
        return false;
    }

    // A session whose relay and keeper were both SIGKILLed before the relay's session.start
    // was durable has no start on record (only a keeper that outlives its relay records one
    // for it). Reap, the first to write for such a session, records it from what it sees:
    // the tree's top process as the server, reap as the writer (`recorded_by: reap`), so that
    // `journal sessions` lists the session and `journal reconcile` can end it.
    std::optional<journal::Event> missing_session_start() {
        if (t_.session.empty()) return std::nullopt;
        auto started = journal::has_session_start(j_.paths().db, t_.session);
        if (!started || *started) return std::nullopt;  // broken journal: the append says so
        journal::SessionStart s;
        s.session = t_.session;
        s.writer = journal::WriterIdentity::self();
        s.server = t_.root();
        if (auto p = read_process(t_.root().pid, kBasic | kCwd); p && p->id == t_.root()) {
            s.server_argv = p->argv();
            s.cwd = p->cwd;
        }
        if (!s.server_argv.empty()) {
            const std::string& a0 = s.server_argv.front();
            s.server_name = a0.substr(a0.rfind('/') == std::string::npos ? 0 : a0.rfind('/') + 1);
        }
        s.extra = Json{{"recorded_by", "reap"}};
        return journal::session_start(s);
    }

    bool snapshot_into_journal() {
        // What the session's dead relay left in its intent file (the requests it forwarded,
        // the evidence of a teardown it had begun) goes on record first: a reader then finds
        // the calls and their fate before what reap did to the tree, as if the relay had
        // lived to commit them. A failed recovery leaves the file to the next reader.
        if (!t_.session.empty() && !Faults::from_env().reap_intents_late)
            (void)journal::recover_dead_writers_session(j_, t_.session);
        ProcessTable table = ProcessTable::scan(kStat);
        std::vector<journal::Event> events;
        if (auto start = missing_session_start()) events.push_back(std::move(*start));
        for (const Member& m : t_.members) {
            auto p = read_process(m.id.pid, kBasic | kExe | kCwd | kFds);
            if (!p || p->id != m.id || p->zombie()) continue;
            std::vector<ProcessId> kids;
            for (const Process* c : table.children(m.id.pid))
                kids.push_back(c->id);
            events.push_back(journal::process_snapshot(t_.session, *p, "reap", kids));
            snapshotted_.insert({m.id.pid, m.id.starttime});
        }
        auto st = j_.append_all(events);
        if (!st) {
            r_.outcome = TreeOutcome::NotRecorded;
            r_.detail =
                "process.snapshot could not be journaled, nothing signalled: " + st.error().message;
            return false;
        }
        return true;
    }

    bool revoke_authority() {
        if (!o_.revoke || o_.revoke->command.empty()) return true;
        RevokeResult rv = run_revoke_hook(*o_.revoke, t_);
        Json d{{"target", pid_json(t_.root())},
               {"command", SensitiveText(o_.revoke->command)},
               {"ok", rv.ok()},
               {"timed_out", rv.timed_out},
               {"duration_ns", rv.duration_ns},
               {"output", SensitiveText(rv.output.substr(0, 4096))},
               {"output_bytes", static_cast<int64_t>(rv.output_bytes)},
               {"force", o_.force}};
        if (rv.exit_status) d["exit_status"] = *rv.exit_status;
        if (rv.term_signal) d["term_signal"] = *rv.term_signal;
        if (!rv.error.empty()) d["error"] = SensitiveText(rv.error);
        auto st = j_.append(journal::Event{"reap.revoke", t_.session, 0, std::move(d)});
        if (rv.ok()) {
            std::string op = o_.operator_name.empty() ? user_name(::geteuid()) : o_.operator_name;
            (void)j_.append(journal::Event{"authorization.revoked", t_.session, 0,
                                           Json{{"pid", static_cast<int64_t>(t_.root().pid)},
                                                {"starttime", t_.root().starttime},
                                                {"scope", "revoke-cmd"},
                                                {"operator", op},
                                                {"reason", "reap"}}});
        }
        r_.revoke = rv;
        if (!st && !o_.force) {
            r_.outcome = TreeOutcome::NotRecorded;
            r_.detail = "reap.revoke could not be journaled: " + st.error().message;
            return false;
        }
        if (!rv.ok() && !o_.force) {
            r_.outcome = TreeOutcome::RevokeFailed;
            r_.detail = "revoke hook " + rv.describe() + ": nothing signalled (--force goes on)";
            return false;
        }
        return true;
    }

    // One run of the contain engine from `roots`; `first_round` > 0 for a sweep pass.
    TeardownReport run_engine(std::vector<ProcessId> roots, int first_round) {
        TeardownScope scope;
        scope.roots = std::move(roots);
        scope.uid = t_.uid;
        scope.subreaper = false;
        if (cgroup_.valid()) scope.cgroup = &cgroup_;
        if (t_.selected_as == "session") scope.session_marker = t_.session;
        observer_->set_first_round(first_round);
        TeardownOptions opts;
        opts.grace = o_.grace;
        opts.observer = &*observer_;
        if (first_round == 0) opts.after_plan = o_.after_plan;
        TeardownReport rep = Teardown(std::move(scope), std::move(opts)).run();
        (void)j_.flush();
        return rep;
    }

    void tear_down_tree() {
        if (!t_.cgroup.empty())
            if (auto c = Cgroup::open(t_.cgroup); c) cgroup_ = std::move(*c);
        // The members reap snapshotted already are not recorded again; a process the engine
        // finds beyond them (a late fork) gets its own snapshot before any signal.
        observer_.emplace(j_, t_.session,
                          journal::TeardownRecorder::Reasons{"reap_teardown", "reap_rescan"},
                          snapshotted_);
        r_.report = run_engine(roots_, 0);
    }

    // Every identity of the tree that is still a live process: the planned members, every
    // target a pass saw under its own identity (one whose record named another process is
    // not its identity), and the carriers of the tree's own marker. Never by name.
    std::vector<ProcessId> left_of_tree() const {
        std::vector<ProcessId> out;
        auto take = [&](const ProcessId& id) {
            if (id.pid > 1 && id.pid != self_ && is_alive(id) &&
                std::find(out.begin(), out.end(), id) == out.end())
                out.push_back(id);
        };
        for (const Member& m : t_.members)
            if (m.uid == t_.uid) take(m.id);  // the engine leaves another uid alone (noted)
        for (const Target& t : r_.report->targets)
            if (t.how != Outcome::IdentityChanged) take(t.id);
        for (const ProcessId& id : r_.report->survivors)
            take(id);
        if (!t_.marker.empty()) {
            ProcessTable table = ProcessTable::scan(kStatus | kEnvNames);
            for (const Process& p : table.all())
                if (!p.zombie() && p.uid == t_.uid && p.session_marker == t_.marker) take(p.id);
        }
        return out;
    }

    // Re-plan by identity until a pass finds nothing new; each find is torn down (with its
    // descendants) by the engine. Something found again after its own pass is not new: it
    // survived a SIGKILL, and the verification names it.
    void sweep_until_nothing_new() {
        std::set<std::pair<pid_t, uint64_t>> handed;
        for (int round = 1; round <= o_.sweep_rounds; ++round) {
            std::vector<ProcessId> found = left_of_tree();
            std::erase_if(found, [&](const ProcessId& id) {
                return !handed.insert({id.pid, id.starttime}).second;
            });
            if (found.empty()) return;
            std::string names;
            for (const ProcessId& id : found)
                names +=
                    fmt::format("{}{} ({})", names.empty() ? "" : ", ", id.pid, command_of(id));
            r_.report->notes.push_back(
                fmt::format("sweep {}: {} process(es) of the tree the teardown did not end: {}",
                            round, found.size(), names));
            fold_pass(*r_.report, run_engine(std::move(found), r_.report->rounds + 1));
        }
        if (o_.sweep_rounds > 0 && !left_of_tree().empty())
            r_.report->notes.push_back(
                fmt::format("sweep stopped after {} passes", o_.sweep_rounds));
    }

    std::string command_of(const ProcessId& id) const {
        if (const Member* m = t_.member(id.pid); m && m->id == id) return m->command;
        for (const Target& t : r_.report->targets)
            if (t.id == id) return t.command.unredacted();  // for a note, itself sensitive
        auto p = read_process(id.pid, kCmdline);
        return p && p->id == id ? p->display_command() : std::string("?");
    }

    void verify_and_record() {
        TeardownReport& rep = *r_.report;
        // Nothing of the tree is left: the engine's survivors and anything else the sweep
        // would look for, as they are now.
        rep.survivors = left_of_tree();
        for (const PortCheck& p : rep.ports)
            if (!p.bindable) r_.ports_free = false;
        if (rep.ok() && r_.ports_free) {
            r_.outcome = TreeOutcome::Reaped;
            r_.detail =
                fmt::format("{} processes: {} after SIGTERM, {} killed, {} already gone",
                            rep.targets.size(), rep.exited_in_grace, rep.killed, rep.already_gone);
            if (rep.identity_changed)
                r_.detail += fmt::format(", {} skipped (identity changed)", rep.identity_changed);
            if (!rep.ports.empty())
                r_.detail += fmt::format("; {} port(s) bindable again", rep.ports.size());
        } else {
            r_.outcome = TreeOutcome::Survivors;
            r_.detail = rep.ok() ? "a port the tree listened on is still not bindable"
                                 : rep.verdict().error().message;
        }
    }

    // Once nothing of the tree is left, its session's cgroup directories go too: nobody
    // else removes them when the relay and the keeper were killed.
    void remove_cgroup() {
        if (t_.cgroup_dirs.empty()) return;
        if (r_.outcome != TreeOutcome::Reaped && r_.outcome != TreeOutcome::Gone) return;
        cgroup_ = Cgroup{};  // our own fd on payload is no hold
        r_.cgroup = remove_session_cgroups(t_.session, t_.cgroup_dirs, t_.supervisors);
        for (const std::string& l : r_.cgroup.lines())
            r_.detail += "; " + l;
    }

    TreeResult finish() {
        remove_cgroup();
        Json d{{"root", pid_json(t_.root())},
               {"command", r_.command},
               {"selected_as", t_.selected_as},
               {"outcome", to_string(r_.outcome)},
               {"detail", SensitiveText(r_.detail)},
               {"members", static_cast<int64_t>(t_.members.size())},
               {"ports_free", r_.ports_free}};
        if (r_.report) {
            auto j = Json::parse(journal::teardown_report_json(*r_.report), nullptr, false);
            if (!j.is_discarded()) d["teardown"] = std::move(j);
        }
        if (r_.revoke) d["revoke"] = r_.revoke->describe();
        if (!r_.cgroup.empty()) d["cgroup"] = r_.cgroup.to_json();
        (void)j_.append(journal::Event{"reap.target", t_.session, 0, std::move(d)});
        return std::move(r_);
    }

    const TargetTree& t_;
    const ActOptions& o_;
    journal::Journal& j_;
    TreeResult r_;
    std::vector<ProcessId> roots_;
    std::set<std::pair<pid_t, uint64_t>> snapshotted_;
    Cgroup cgroup_;
    std::optional<journal::TeardownRecorder> observer_;
    const pid_t self_ = ::getpid();
};

}  // namespace

ActReport act(const Plan& plan, const ActOptions& opts) {
    ActReport report;
    if (!opts.journal) {
        for (const TargetTree& t : plan.trees) {
            TreeResult r;
            r.root = t.root();
            r.outcome = TreeOutcome::NotRecorded;
            r.detail = "no journal: nothing is signalled off the record";
            report.trees.push_back(std::move(r));
        }
        return report;
    }
    bool session_reaped = false;
    for (const TargetTree& t : plan.trees) {
        report.trees.push_back(TreeAct(t, opts).run());
        TreeOutcome o = report.trees.back().outcome;
        session_reaped |=
            !t.session.empty() && (o == TreeOutcome::Reaped || o == TreeOutcome::Gone);
    }
    // A session whose remnants are gone is over: end it on record now (session.orphaned,
    // and activity.unresolved for what it left unanswered), as `journal reconcile` would,
    // for every session whose relay is dead. A live session is left alone by reconcile.
    if (session_reaped || !plan.empty_cgroups.empty()) {
        if (auto rec = journal::reconcile(*opts.journal); rec)
            report.sessions_ended = rec->orphaned;
    }
    // Sessions with nothing left but their cgroup directories: removed and recorded
    // (reap.cgroup) after the trees, so a tree of the same pass cannot still be in them.
    for (const EmptySessionCgroup& e : plan.empty_cgroups) {
        CgroupCleanup c = remove_session_cgroups(e.session, e.dirs);
        (void)opts.journal->append(
            journal::Event{"reap.cgroup", e.session, 0,
                           Json{{"dirs", e.dirs}, {"removed", c.removed}, {"left", c.left}}});
        report.empty_cgroups.push_back(std::move(c));
    }
    return report;
}

journal::Event pass_event(const Selection& sel, const Plan& plan, const ActReport* report,
                          bool dry_run) {
    Json selection{{"orphans", sel.orphans},
                   {"sessions", sel.sessions},
                   {"pids", sel.pids},
                   {"match", sel.match},
                   {"all_users", sel.all_users}};
    if (sel.older_than) selection["older_than_ms"] = static_cast<int64_t>(sel.older_than->count());
    if (sel.user) selection["user"] = static_cast<int64_t>(*sel.user);
    Json counts = Json::object();
    if (report)
        for (const TreeResult& r : report->trees)
            counts[std::string(to_string(r.outcome))] =
                counts.value(std::string(to_string(r.outcome)), 0) + 1;
    Json outcomes = Json::object();
    for (auto& [k, v] : counts.items()) {
        std::string key = k;
        for (char& c : key)
            if (c == '-') c = '_';
        outcomes[key] = v;
    }
    return journal::Event{"reap.pass", "", 0,
                          Json{{"selection", selection},
                               {"dry_run", dry_run},
                               {"scanned", static_cast<int64_t>(plan.scanned)},
                               {"planned", static_cast<int64_t>(plan.trees.size())},
                               {"refused", static_cast<int64_t>(plan.refused.size())},
                               {"empty_cgroups", static_cast<int64_t>(plan.empty_cgroups.size())},
                               {"outcomes", outcomes}}};
}

}  // namespace warden::reap
