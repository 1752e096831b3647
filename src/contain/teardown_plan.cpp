// The plan: who is in the tree (collect), which of them the plan takes (admissible), each
// bound to a pidfd by identity before anything is sent, their depths, and the snapshot
// announced to the observer. Teardown::run() plans once; the sweep plans again until a round
// finds nothing new.
#include <unistd.h>

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "contain/teardown_state.hpp"
#include "proc/children.hpp"
#include "proc/process_table.hpp"

namespace warden {

// Our ancestors, by ppid links from /proc: a tree that somehow contains one of them (a reused
// pid, a confused scope: `reap` run from a shell inside the session it ends) must not take us
// down with it. Read only when a candidate does not descend from us (protects()): a keeper's
// ancestors are the relay, the client and theirs, half a dozen reads, and its plan had made
// them before its first SIGTERM.
void Teardown::State::read_ancestors() {
    ancestors.emplace();
    pid_t p = ::getppid();
    for (int guard = 0; p > 1 && guard < 4096; ++guard) {
        ancestors->insert(p);
        auto proc = read_process(p, kStat);
        if (!proc) break;
        p = proc->ppid;
    }
}

// Never ourselves, PID 1 (or 0), nor an ancestor of ours. A process listed under us or under
// one of our descendants is younger than we are, and an ancestor is older, so only the
// others are compared with the ancestors.
bool Teardown::State::protects(const Candidate& c) {
    const pid_t pid = c.proc.id.pid;
    if (pid <= 1 || pid == self) return true;
    if (scope.faults.ancestors_unprotected || c.ours) return false;
    if (!ancestors) read_ancestors();
    return ancestors->count(pid) > 0;
}

// Who is in the tree. With a cgroup, cgroup.procs is the member list: complete (forks
// stay inside) and cheap (no scan of the machine), once every root is in it or gone. Without one,
// the roots' descendants whatever their group or session, plus — as subreaper — every process whose
// parent is us (orphans, double-fork daemons) and its subtree, plus (only when neither a cgroup nor
// the subreaper holds the tree) processes carrying the session marker. The descendants come from
// the kernel's children lists where it has them (a few reads per member, before the first SIGTERM),
// else from one /proc scan of stat lines (a read of every process on the machine); the sweep
// confirms a walked plan with one full scan (see proc/children.hpp).
auto Teardown::State::collect(bool full_scan) -> std::vector<Candidate> {
    Collection found;
    if (scope.cgroup && collect_from_cgroup(found) && !scope.roots.empty())
        return std::move(found.out);
    const bool by_marker = !scope.session_marker.empty() && !scope.subreaper && !scope.cgroup;
    if (!by_marker && !full_scan && !scope.faults.proc_children && proc_children_supported())
        collect_by_walk(found);
    else
        collect_by_scan(found, by_marker);
    return std::move(found.out);
}

// A member a plan made ahead kept open is read again through its directory. Gone (its
// directory no longer reads), its PID, listed here, names a newcomer: read afresh.
bool Teardown::State::read_known(pid_t pid, Collection& found, Candidate& c) {
    auto w = open_dirs.find(pid);
    if (w == open_dirs.end()) return false;
    MemberDir m = std::move(w->second);
    open_dirs.erase(w);
    if (!m.refresh()) return false;
    static_cast<MemberDir&>(c) = std::move(m);
    ++found.dirs;
    return true;
}

// Reads `pid` as a candidate, once. `parent`: the process it was listed under (0: none). A
// PID that changed hands since its listing has another parent, almost surely; it is not this
// tree's. `ours`: that parent is us or descends from us.
bool Teardown::State::take(Collection& found, pid_t pid, uint64_t starttime, Role role,
                           pid_t parent, bool ours) {
    if (!found.seen.insert(pid).second) return false;
    Candidate c;
    c.role = role;
    if (read_known(pid, found, c)) {
        // its stat, uid and argv are this moment's; its pidfd is the one bound ahead
    } else if (found.dirs < kMaxOpenDirs) {
        auto m = MemberDir::open(pid);
        if (!m) return false;
        static_cast<MemberDir&>(c) = std::move(*m);
        ++found.dirs;
    } else {
        auto p = read_process(pid, kStatus | kCmdline);
        if (!p) return false;
        c.proc = std::move(*p);
    }
    if (starttime && c.proc.id.starttime != starttime) return false;
    if (parent && c.proc.ppid != parent) return false;
    c.ours = ours || c.proc.ppid == self;
    found.out.push_back(std::move(c));
    return true;
}

// A root or member whose parent is a candidate of ours is ours too (the server below the
// namespace init; a cgroup member below the server).
void Teardown::State::ours_by_parent(std::vector<Candidate>& out) {
    std::set<pid_t> ours;
    for (bool grew = true; grew;) {
        grew = false;
        for (Candidate& c : out) {
            if (c.ours) grew |= ours.insert(c.proc.id.pid).second;
            if (!c.ours && ours.count(c.proc.ppid)) c.ours = grew = true;
        }
    }
}

Role Teardown::State::role_of_root(const ProcessId& r) const {
    return r.pid == scope.ns_init ? Role::NamespaceInit : Role::Root;
}

// The members cgroup.procs lists, the roots first. True when every root is in it or gone:
// the cgroup then says who is left, and nothing else is read.
bool Teardown::State::collect_from_cgroup(Collection& found) {
    auto procs = scope.cgroup->procs();
    if (!procs) {
        report.notes.push_back("cannot list the cgroup: " + procs.error().message);
        return false;
    }
    std::set<pid_t> in(procs->begin(), procs->end());
    // A root that has exited and been reaped (the usual end: the server left on
    // EOF) is not outside the cgroup, it is gone: the cgroup still says who is left.
    // Walking the children lists instead, then confirming with a scan of every
    // process on the machine, cost milliseconds before the first signal and after
    // the last exit. A zombie root still has its identity: it is walked as before.
    const bool roots_inside =
        std::all_of(scope.roots.begin(), scope.roots.end(), [&](const ProcessId& r) {
            if (in.count(r.pid)) return true;
            auto now = read_identity(r.pid);
            return !now || !(*now == r);
        });
    for (const ProcessId& r : scope.roots)
        if (in.count(r.pid)) take(found, r.pid, r.starttime, role_of_root(r));
    for (pid_t pid : *procs)
        take(found, pid, 0, Role::CgroupMember);
    ours_by_parent(found.out);
    return roots_inside;
}

// The roots, and (as subreaper) our children, then breadth first below them through the
// kernel's children lists.
void Teardown::State::collect_by_walk(Collection& found) {
    walked = true;
    for (const ProcessId& r : scope.roots)
        take(found, r.pid, r.starttime, role_of_root(r));
    ours_by_parent(found.out);
    if (scope.subreaper)
        for (pid_t c : read_children(self))
            take(found, c, 0, Role::Inherited, self, true);
    walk_children(found.out, [&](pid_t pid, pid_t parent, bool ours) {
        return take(found, pid, 0, Role::Descendant, parent, ours);
    });
}

// One scan of /proc: the roots' trees, (as subreaper) the trees of our children, and (by
// marker) the trees of the processes that carry the session marker.
void Teardown::State::collect_by_scan(Collection& found, bool by_marker) {
    ProcessTable table = ProcessTable::scan(by_marker ? unsigned(kEnvNames) : unsigned(kStat));
    auto add_tree = [&](const Process* top, Role role) {
        if (!top) return;
        take(found, top->id.pid, top->id.starttime, role);
        for (const Process* d : table.descendants(top->id))
            take(found, d->id.pid, d->id.starttime, Role::Descendant);
    };
    // Roots first, so that a root inside another root's tree (the server below the
    // namespace init) keeps its role.
    for (const ProcessId& r : scope.roots)
        if (const Process* p = table.find(r.pid); p && p->id == r)
            take(found, r.pid, r.starttime, role_of_root(r));
    for (const ProcessId& r : scope.roots) {
        const Process* p = table.find(r.pid);
        if (p && p->id == r) add_tree(p, role_of_root(r));
    }
    if (scope.subreaper)
        for (const Process& p : table.all())
            if (p.ppid == self) add_tree(&p, Role::Inherited);
    if (by_marker)
        for (const Process& p : table.all())
            if (p.session_marker && *p.session_marker == scope.session_marker)
                add_tree(&p, Role::Marker);
}

// Breadth first below the candidates in `out`: `add` appends each child it takes to `out`,
// where it is walked in turn. A candidate read through its directory is asked through it.
// Bounded: a tree of more than 65536 members is walked that far, the rest left to the scan.
void Teardown::State::walk_children(std::vector<Candidate>& out,
                                    const std::function<bool(pid_t, pid_t, bool)>& add) {
    for (size_t i = 0; i < out.size() && out.size() < 65536; ++i) {
        const pid_t parent = out[i].proc.id.pid;
        const bool ours = out[i].ours;
        const std::vector<pid_t> kids = out[i].dir ? out[i].children() : read_children(parent);
        for (pid_t c : kids)
            add(c, parent, ours);
    }
}

int Teardown::State::plan_members(int round, bool full_scan) {
    // The guard off (plan_ahead_only): the plan made ahead is taken as it stands, without a
    // walk, and what forked since waits for a later round.
    const bool as_it_stands = ahead && scope.faults.plan_ahead_only;
    std::vector<Candidate> cands = as_it_stands ? std::vector<Candidate>{} : collect(full_scan);
    learn_uid(cands);
    std::vector<size_t> added;
    if (ahead) {
        // run()'s first snapshot: what the plan made ahead bound and the walk finds again
        // opens it, with the ports it holds now: its sockets are listed again through its
        // directory, and those not settled ahead examined. As it stands, the ports it held.
        if (!as_it_stands) keep_what_is_found(cands);
        for (size_t i = 0; i < targets.size(); ++i) {
            const Target& t = targets[i];
            SettledSockets& settled = sockets_ahead[{t.id.pid, t.id.starttime}];
            auto c = std::find_if(cands.begin(), cands.end(),
                                  [&](const Candidate& x) { return x.proc.id == t.id; });
            if (as_it_stands) {
                for (const auto& [inode, port] : settled)
                    if (port) remember_port(*port);
            } else if (opts.verify_ports && c != cands.end()) {
                for (PortCheck& pc : ports_of(t, *c, &settled))
                    remember_port(std::move(pc));
            }
            added.push_back(i);
        }
        sockets_ahead.clear();
        open_dirs.clear();  // members gone since: their directories
        ahead = false;
    }
    take_the_new(cands, round, added);
    compute_depths();
    announce_snapshot(round, added);
    return static_cast<int>(added.size());
}

// Binds and adds each candidate the plan takes that no target is yet. Known = a target
// carries this identity now; a target whose recorded identity was found to be wrong no
// longer does, so the real process is planned afresh.
void Teardown::State::take_the_new(const std::vector<Candidate>& cands, int round,
                                   std::vector<size_t>& added, bool list_ports) {
    for (const Candidate& c : cands) {
        const Process& p = c.proc;
        if (skipped.count({p.id.pid, p.id.starttime})) continue;
        if (std::any_of(targets.begin(), targets.end(),
                        [&](const Target& t) { return t.id == p.id; }))
            continue;
        if (!admissible(c)) continue;
        bind_and_add(c, round, added, list_ports);
    }
}

// The tree's uid, when the scope did not name one: the root's, as first read.
void Teardown::State::learn_uid(const std::vector<Candidate>& cands) {
    if (uid_known) return;
    for (const Candidate& c : cands)
        if (c.role == Role::Root || c.role == Role::NamespaceInit) {
            uid = c.proc.uid;
            uid_known = true;
            return;
        }
    uid = ::geteuid();
    uid_known = true;
}

// Would the plan take this candidate? Never one it protects or a kernel thread, nor a
// zombie but the root, nor a process of another uid than the tree's (noted, once).
bool Teardown::State::admissible(const Candidate& c) {
    const Process& p = c.proc;
    if (protects(c)) return false;
    // Told by PF_KTHREAD, not by PID: PID 2 is kthreadd only in the initial namespace;
    // where `mcpwarden run` is a container's PID 1, PID 2 is our keeper.
    if (p.kernel_thread()) return false;
    // A dead member needs no signal; reaping collects it. A dead *root* stays in the
    // plan: it is how the report knows the server left in the EOF window.
    if (p.zombie() && c.role != Role::Root) return false;
    if (p.uid != uid) {
        skipped.insert({p.id.pid, p.id.starttime});
        report.notes.push_back(fmt::format("skipped {} ({}): uid {} is not the tree's uid {}",
                                           p.id.pid, p.display_command(), p.uid, uid));
        return false;
    }
    return true;
}

void Teardown::State::bind_and_add(const Candidate& c, int round, std::vector<size_t>& added,
                                   bool list_ports) {
    const Process& p = c.proc;
    Target t;
    t.id = p.id;
    t.ppid = p.ppid;
    t.uid = p.uid;
    t.command = p.display_command();
    t.role = c.role;
    t.round = round;
    const bool gone = !bind_pidfd(t, c);
    if (gone) {
        // Announced with the snapshot like any member, and its exit right after it
        // (announce_snapshot): a process on record without an exit looks like a survivor.
        t.how = Outcome::AlreadyGone;
        t.ended_ms = now_ms();
    }
    // Every member's ports, whichever round found it: a helper whose parent was exiting
    // while the first plan read the children lists is found in the next round (reparented
    // to us by then), and its port must still be proven free at the end.
    if (opts.verify_ports && !gone && list_ports)
        for (PortCheck& pc : ports_of(t, c))
            remember_port(std::move(pc));
    targets.push_back(std::move(t));
    added.push_back(targets.size() - 1);
}

// Binds (pid, starttime) to a pidfd: read (the plan's read) → pidfd_open → still the same
// process? Then the pidfd names that very process. "Still the same" is a read through the
// directory the plan read it through, which fails once that process is gone; without one,
// a read of the starttime again. False when it is gone (the PID moved on, or ESRCH).
bool Teardown::State::bind_pidfd(Target& t, const Candidate& c) {
    if (!scope.use_pidfd || scope.faults.pidfd_open) return true;
    auto fd = Pidfd::open(t.id.pid);
    if (!fd) return fd.error().code != ESRCH;
    bool same = false;
    if (c.dir) {
        same = c.still_there();
    } else {
        auto again = read_identity(t.id.pid);
        same = again && again->starttime == t.id.starttime;
    }
    if (!same) return false;
    t.pidfd = std::move(*fd);
    t.bound = t.id;
    return true;
}

// Depth below the top of each member's branch, by ppid links inside the member set.
void Teardown::State::compute_depths() {
    std::map<pid_t, size_t> by_pid;
    for (size_t i = 0; i < targets.size(); ++i)
        by_pid[targets[i].id.pid] = i;
    for (Target& t : targets) {
        int d = 0;
        pid_t p = t.ppid;
        for (int guard = 0; guard < 4096; ++guard) {
            auto it = by_pid.find(p);
            if (it == by_pid.end() || p == t.id.pid) break;
            ++d;
            p = targets[it->second].ppid;
        }
        t.depth = d;
    }
}

void Teardown::State::announce_snapshot(int round, const std::vector<size_t>& added) {
    if (!opts.observer || added.empty()) return;
    std::vector<const Target*> snap;
    for (size_t i : added)
        snap.push_back(&targets[i]);
    opts.observer->on_snapshot(round, snap);
    // Members found gone while binding their pidfd (bind_and_add) end here, on the record.
    for (const Target* t : snap)
        if (t->how != Outcome::Pending) opts.observer->on_exit(*t, t->how);
}

}  // namespace warden
