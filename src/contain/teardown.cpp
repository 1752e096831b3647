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
// A plan made ahead. Binding a member by identity before its first signal costs ~20 reads of
// /proc and a pidfd_open (its stat, uid, argv, children, the identity again, its fd table, a
// pidfd_getfd per socket): 0.4–0.6 ms for a tree of a few processes, which a blind
// killpg(SIGTERM) does not pay, and which lies between the client's leaving and the first
// SIGTERM. A keeper is idle for nearly all of a session, so it plans then (prepare()): each
// member bound to a pidfd, its ports listed, its /proc directory kept open. run() still takes
// its own snapshot, from the same walk, but a member known from the plan ahead is read once
// more through its open directory (stat, uid, argv: an exec since keeps PID and starttime)
// instead of being planned from nothing, and its pidfd is the one bound ahead. The walk is
// what keeps that safe: what forked since the plan ahead is planned in full, and a member
// whose directory no longer reads has gone, whoever holds its PID now (that PID, if the walk
// lists it, is read afresh). A member the walk no longer finds is dropped, pidfd and all: the
// snapshot is of the tree as the teardown finds it, as without a plan ahead. A known member's
// fd table is listed again too, but of its sockets only those the plan ahead could not settle
// are examined (SettledSockets): a listener stays one until it is closed, and a socket that is
// not inet never becomes one; a port opened since is proven free like any other, and the port
// of a listener closed since is no longer the tree's to prove.
#include "contain/teardown.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstring>
#include <ctime>
#include <functional>
#include <map>
#include <set>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "contain/member_dir.hpp"
#include "contain/spawner.hpp"
#include "proc/children.hpp"
#include "proc/process_table.hpp"
#include "proc/sockets.hpp"

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

namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { Plan, Eof, Term, Kill, Verify };

double thread_cpu_ms() {
    timespec ts{};
    ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<double>(ts.tv_sec) * 1e3 + static_cast<double>(ts.tv_nsec) / 1e6;
}

// A process the plan may take: as read, with the /proc/PID directory it was read through
// while the plan still needs it (`dir` invalid when read by path: a scan),
// and whether it descends from us (`ours`: listed under us or under a member that
// does), which no ancestor of ours can.
struct Candidate : MemberDir {
    Role role = Role::Descendant;
    bool ours = false;
};

// The sockets of a member that a plan made ahead examined for good, by inode: each listening
// one with its port (a listener stays one, on its address, until it is closed), and each of
// another family than inet, with none (a socket's family never changes). Any other socket may
// yet become a port (bound, then listen()) and is examined again by the next plan. A settled
// socket no longer in the fd table was closed: forgotten, port and all.
using SettledSockets = std::map<uint64_t, std::optional<PortCheck>>;

// The plan holds at most this many members' directories open at once; past it, a member is
// read by path, as a scan reads it (a pidfd per target is held already).
constexpr size_t kMaxOpenDirs = 128;

}  // namespace

struct Teardown::State {
    TeardownScope scope;
    TeardownOptions opts;
    Clock::time_point t0;
    double cpu0_ms = 0;  // thread CPU time at t0
    Clock::time_point term_started;
    Phase phase = Phase::Plan;
    int terms_delivered = 0;  // SIGTERMs the kernel accepted: until one is, nothing was asked
    std::vector<Target> targets;
    std::set<std::pair<pid_t, uint64_t>> skipped;  // seen and deliberately left alone
    std::optional<std::set<pid_t>> ancestors;      // read when first needed (protects())
    pid_t self = 0;
    uid_t uid = 0;
    bool uid_known = false;
    std::vector<PortCheck> ports;
    SocketTable inet;  // the tree's inet sockets (one network namespace assumed)
    bool inet_loaded = false;
    bool walked = false;  // a plan came from the children files, not a full /proc scan
    // A plan made ahead (prepare()): the targets it bound, their directories kept open, and
    // what it found of each one's sockets.
    bool ahead = false;
    bool too_large_ahead = false;  // past TeardownOptions::max_planned_ahead once
    std::map<pid_t, MemberDir> open_dirs;
    std::map<std::pair<pid_t, uint64_t>, SettledSockets> sockets_ahead;
    Fd cg_events;
    TeardownReport report;

    double now_ms() const {
        return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
    }

    // --- plan ---------------------------------------------------------------------------
    void start_clock();
    void read_ancestors();
    bool protects(const Candidate& c);
    int plan_members(int round, bool full_scan = false);
    void plan_ahead();
    void keep_what_is_found(const std::vector<Candidate>& cands);
    void learn_uid(const std::vector<Candidate>& cands);
    void take_the_new(const std::vector<Candidate>& cands, int round, std::vector<size_t>& added,
                      bool list_ports = true);
    bool admissible(const Candidate& c);
    std::vector<Candidate> collect(bool full_scan);
    void walk_children(std::vector<Candidate>& out,
                       const std::function<bool(pid_t, pid_t, bool)>& add);
    // `list_ports`: the member's ports are listed now (a plan made ahead settles them itself).
    void bind_and_add(const Candidate& c, int round, std::vector<size_t>& added,
                      bool list_ports = true);
    bool bind_pidfd(Target& t, const Candidate& c);
    std::vector<PortCheck> ports_of(const Target& t, const Candidate& c,
                                    SettledSockets* settled = nullptr);
    bool ports_through_pidfd(const Target& t, const std::vector<std::pair<int, uint64_t>>& socks,
                             std::vector<PortCheck>& out, SettledSockets* settled);
    void ports_through_tables(const Target& t, const std::vector<std::pair<int, uint64_t>>& socks,
                              std::vector<PortCheck>& out, SettledSockets* settled);
    void remember_port(PortCheck pc);
    void compute_depths();
    void announce_snapshot(int round, const std::vector<size_t>& added);
    // --- deliver / observe ----------------------------------------------------------------
    void wait_in_eof_window();
    void send_term_leaves_first(const std::vector<size_t>& which);
    void wait_for_grace();
    bool wait_for_exits(Clock::time_point deadline, bool root_only);
    bool ended(Target& t);
    void mark_gone(Target& t);
    void reap_children();
    Status signal(Target& t, int sig);
    bool identity_holds(Target& t);
    void identity_changed(Target& t, uint64_t now_starttime);
    // --- escalate / sweep / verify --------------------------------------------------------
    void kill_what_remains();
    std::vector<size_t> members_among(const std::vector<size_t>& which);
    void kill_targets(const std::vector<size_t>& which);
    void sweep_until_nothing_new();
    void verify_from_outside();
    void build_report();
    std::vector<size_t> pending() const;
    bool cgroup_populated();
    bool init_holds_cgroup() const;
};

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
    s.report.phases.plan_cpu_ms = thread_cpu_ms() - s.cpu0_ms;
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

// ---------------------------------------------------------------------------------------
// Plan

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
std::vector<Candidate> Teardown::State::collect(bool full_scan) {
    std::vector<Candidate> out;
    std::set<pid_t> seen;
    size_t dirs = 0;
    // A member a plan made ahead kept open is read again through its directory. Gone (its
    // directory no longer reads), its PID, listed here, names a newcomer: read afresh.
    auto read_known = [&](pid_t pid, Candidate& c) {
        auto w = open_dirs.find(pid);
        if (w == open_dirs.end()) return false;
        MemberDir m = std::move(w->second);
        open_dirs.erase(w);
        if (!m.refresh()) return false;
        static_cast<MemberDir&>(c) = std::move(m);
        ++dirs;
        return true;
    };
    // `parent`: the process it was listed under (0: none). A PID that changed hands since
    // its listing has another parent, almost surely; it is not this tree's. `ours`: that
    // parent is us or descends from us.
    auto add = [&](pid_t pid, uint64_t starttime, Role role, pid_t parent = 0, bool ours = false) {
        if (!seen.insert(pid).second) return false;
        Candidate c;
        c.role = role;
        if (read_known(pid, c)) {
            // its stat, uid and argv are this moment's; its pidfd is the one bound ahead
        } else if (dirs < kMaxOpenDirs) {
            auto m = MemberDir::open(pid);
            if (!m) return false;
            static_cast<MemberDir&>(c) = std::move(*m);
            ++dirs;
        } else {
            auto p = read_process(pid, kStatus | kCmdline);
            if (!p) return false;
            c.proc = std::move(*p);
        }
        if (starttime && c.proc.id.starttime != starttime) return false;
        if (parent && c.proc.ppid != parent) return false;
        c.ours = ours || c.proc.ppid == self;
        out.push_back(std::move(c));
        return true;
    };
    // A root or member whose parent is a candidate of ours is ours too (the server below the
    // namespace init; a cgroup member below the server).
    auto ours_by_parent = [&] {
        std::set<pid_t> ours;
        for (bool grew = true; grew;) {
            grew = false;
            for (Candidate& c : out) {
                if (c.ours) grew |= ours.insert(c.proc.id.pid).second;
                if (!c.ours && ours.count(c.proc.ppid)) c.ours = grew = true;
            }
        }
    };
    auto role_of_root = [&](const ProcessId& r) {
        return r.pid == scope.ns_init ? Role::NamespaceInit : Role::Root;
    };
    bool roots_inside = false;
    if (scope.cgroup) {
        auto procs = scope.cgroup->procs();
        if (procs) {
            std::set<pid_t> in(procs->begin(), procs->end());
            // A root that has exited and been reaped (the usual end: the server left on
            // EOF) is not outside the cgroup, it is gone: the cgroup still says who is left.
            // Walking the children lists instead, then confirming with a scan of every
            // process on the machine, cost milliseconds before the first signal and after
            // the last exit. A zombie root still has its identity: it is walked as before.
            roots_inside =
                std::all_of(scope.roots.begin(), scope.roots.end(), [&](const ProcessId& r) {
                    if (in.count(r.pid)) return true;
                    auto now = read_identity(r.pid);
                    return !now || !(*now == r);
                });
            for (const ProcessId& r : scope.roots)
                if (in.count(r.pid)) add(r.pid, r.starttime, role_of_root(r));
            for (pid_t pid : *procs)
                add(pid, 0, Role::CgroupMember);
            ours_by_parent();
        } else {
            report.notes.push_back("cannot list the cgroup: " + procs.error().message);
        }
    }
    if (scope.cgroup && roots_inside && !scope.roots.empty()) return out;

    const bool by_marker = !scope.session_marker.empty() && !scope.subreaper && !scope.cgroup;
    if (!by_marker && !full_scan && !scope.faults.proc_children && proc_children_supported()) {
        walked = true;
        for (const ProcessId& r : scope.roots)
            add(r.pid, r.starttime, role_of_root(r));
        ours_by_parent();
        if (scope.subreaper)
            for (pid_t c : read_children(self))
                add(c, 0, Role::Inherited, self, true);
        walk_children(out, [&](pid_t pid, pid_t parent, bool ours) {
            return add(pid, 0, Role::Descendant, parent, ours);
        });
        return out;
    }
    ProcessTable table = ProcessTable::scan(by_marker ? unsigned(kEnvNames) : unsigned(kStat));
    auto add_tree = [&](const Process* top, Role role) {
        if (!top) return;
        add(top->id.pid, top->id.starttime, role);
        for (const Process* d : table.descendants(top->id))
            add(d->id.pid, d->id.starttime, Role::Descendant);
    };
    // Roots first, so that a root inside another root's tree (the server below the
    // namespace init) keeps its role.
    for (const ProcessId& r : scope.roots)
        if (const Process* p = table.find(r.pid); p && p->id == r)
            add(r.pid, r.starttime, role_of_root(r));
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
    return out;
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

// The plan made ahead, or brought up to date: the same walk and the same choices as a
// teardown's snapshot, nothing announced. What it keeps of each member is what makes a
// target (identity, pidfd) and what must be read while the member lives (its ports);
// the rest is read again by run().
void Teardown::State::plan_ahead() {
    std::vector<Candidate> cands = collect(false);
    learn_uid(cands);
    keep_what_is_found(cands);
    std::vector<size_t> added;
    take_the_new(cands, 0, added, /*list_ports=*/false);  // listed below, settled for later
    std::erase_if(targets, [](const Target& t) { return t.how != Outcome::Pending; });
    std::map<std::pair<pid_t, uint64_t>, SettledSockets> settled;  // of the targets now
    open_dirs.clear();
    for (Candidate& c : cands) {
        auto t = std::find_if(targets.begin(), targets.end(),
                              [&](const Target& x) { return x.id == c.proc.id; });
        if (t == targets.end()) continue;
        const std::pair<pid_t, uint64_t> key{t->id.pid, t->id.starttime};
        SettledSockets& s = settled[key];
        if (auto before = sockets_ahead.find(key); before != sockets_ahead.end())
            s = std::move(before->second);
        if (opts.verify_ports) (void)ports_of(*t, c, &s);
        if (c.dir) open_dirs.emplace(c.proc.id.pid, std::move(static_cast<MemberDir&>(c)));
    }
    sockets_ahead = std::move(settled);
    ahead = true;
    // A pidfd per member and a directory each (up to kMaxOpenDirs), held for as long as the
    // session is idle, in a keeper that needs descriptors of its own (its journal, pipes to
    // the relay): past the bound nothing is kept, and the teardown plans as without a plan
    // ahead. Nor is such a tree planned ahead again: every plan of it would read all of it.
    if (targets.size() > opts.max_planned_ahead) {
        targets.clear();
        open_dirs.clear();
        sockets_ahead.clear();
        ahead = false;
        too_large_ahead = true;
    }
}

// Of the targets a plan made ahead bound, those the walk found again (`cands`) and would
// still take, brought up to date (parent, role, argv); the others are dropped with their
// pidfds: ended, or gone from the tree.
void Teardown::State::keep_what_is_found(const std::vector<Candidate>& cands) {
    std::map<std::pair<pid_t, uint64_t>, const Candidate*> found;
    for (const Candidate& c : cands)
        found[{c.proc.id.pid, c.proc.id.starttime}] = &c;
    std::vector<Target> kept;
    for (Target& t : targets) {
        auto it = found.find({t.id.pid, t.id.starttime});
        if (it == found.end() || skipped.count(it->first) || !admissible(*it->second)) continue;
        const Candidate& c = *it->second;
        t.ppid = c.proc.ppid;
        t.uid = c.proc.uid;
        t.command = c.proc.display_command();
        t.role = c.role;
        t.round = 0;
        kept.push_back(std::move(t));
    }
    targets = std::move(kept);
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

// The TCP/UDP ports a member listens on, found through its fd table: the "socket:[N]"
// entries of /proc/PID/fd. Deliberately minimal (no fdinfo, no unix table): it runs before
// the first SIGTERM, so every microsecond here delays the polite phase. Each socket is asked
// directly where the kernel lets us (pidfd_getfd: a few syscalls per socket, whatever the
// machine holds); else the inet tables of its network namespace are read, once per
// teardown (text of every socket on the box: 25 ms with a thousand listeners).
// `settled` (a plan made ahead, and the teardown after it): a socket examined for good gives
// its port, if any, without being asked again; those this examination settles are added, and
// those no longer in the fd table forgotten.
std::vector<PortCheck> Teardown::State::ports_of(const Target& t, const Candidate& c,
                                                 SettledSockets* settled) {
    std::vector<PortCheck> out;
    // The namespace init is a fork of the keeper that never execs and never opens a socket;
    // its fd table is the keeper's of the moment it was forked (a dozen entries to read).
    if (t.role == Role::NamespaceInit) return out;
    std::vector<std::pair<int, uint64_t>> socks;  // (fd number, inode)
    if (c.dir) {
        socks = c.sockets();  // through its directory: a recycled PID fails, shows nothing
    } else {
        const std::string dir = "/proc/" + std::to_string(t.id.pid);
        Fd d(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
        if (!d.valid()) return out;
        socks = sockets_of(d.get());
        if (socks.empty()) return out;
        // A recycled PID would show a stranger's fds: only keep them if it is still t.
        auto again = read_identity(t.id.pid);
        if (!again || again->starttime != t.id.starttime) return out;
    }
    if (settled) {
        std::erase_if(*settled, [&](const auto& entry) {
            return std::none_of(socks.begin(), socks.end(), [&](const auto& fd_inode) {
                return fd_inode.second == entry.first;
            });
        });
        std::erase_if(socks, [&](const auto& fd_inode) {
            auto known = settled->find(fd_inode.second);
            if (known == settled->end()) return false;
            if (known->second) out.push_back(*known->second);
            return true;
        });
    }
    if (socks.empty()) return out;
    if (!ports_through_pidfd(t, socks, out, settled)) ports_through_tables(t, socks, out, settled);
    return out;
}

void Teardown::State::ports_through_tables(const Target& t,
                                           const std::vector<std::pair<int, uint64_t>>& socks,
                                           std::vector<PortCheck>& out, SettledSockets* settled) {
    if (!inet_loaded) {
        inet_loaded = true;
        const std::string net = "/proc/" + std::to_string(t.id.pid) + "/net/";
        for (auto [file, proto, v6] : {std::tuple{"tcp", SocketEntry::Proto::Tcp, false},
                                       std::tuple{"tcp6", SocketEntry::Proto::Tcp, true},
                                       std::tuple{"udp", SocketEntry::Proto::Udp, false},
                                       std::tuple{"udp6", SocketEntry::Proto::Udp, true}})
            if (auto text = read_file(net + file); text) inet.add_inet(*text, proto, v6);
    }
    for (auto [fd, inode] : socks) {
        (void)fd;
        const SocketEntry* e = inet.lookup(inode);
        if (!e || !e->listening()) continue;
        out.push_back({e->proto_name(), e->local_addr, e->local_port});
        if (settled) settled->emplace(inode, out.back());
    }
}

// Through a duplicate of each socket, closed at once (held, it would keep the port bound).
// False when the kernel does not let us (no pidfd, pidfd_getfd missing, no ptrace rights):
// the caller then reads the tables. The inode is checked: the fd number may have moved on.
bool Teardown::State::ports_through_pidfd(const Target& t,
                                          const std::vector<std::pair<int, uint64_t>>& socks,
                                          std::vector<PortCheck>& out, SettledSockets* settled) {
    if (!t.pidfd || scope.faults.pidfd_getfd) return false;
    for (auto [fd, inode] : socks) {
        auto dup = t.pidfd.get_fd(fd);
        if (!dup) {
            if (dup.error().code == EBADF) continue;  // closed since the listing
            return false;
        }
        struct stat st {};
        int domain = 0, type = 0, listening = 0;
        socklen_t len = sizeof(int);
        if (::fstat(dup->get(), &st) != 0 || st.st_ino != inode) continue;
        if (::getsockopt(dup->get(), SOL_SOCKET, SO_DOMAIN, &domain, &len) != 0) continue;
        if (domain != AF_INET && domain != AF_INET6) {
            if (settled) settled->emplace(inode, std::nullopt);
            continue;
        }
        len = sizeof(int);
        if (::getsockopt(dup->get(), SOL_SOCKET, SO_TYPE, &type, &len) != 0) continue;
        sockaddr_storage local{}, peer{};
        socklen_t alen = sizeof local;
        if (::getsockname(dup->get(), reinterpret_cast<sockaddr*>(&local), &alen) != 0) continue;
        if (type == SOCK_STREAM) {
            len = sizeof(int);
            if (::getsockopt(dup->get(), SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) != 0 ||
                !listening)
                continue;
        } else if (type == SOCK_DGRAM) {
            // An unconnected, bound UDP socket is the "listener" /proc/net/udp would show.
            socklen_t plen = sizeof peer;
            if (::getpeername(dup->get(), reinterpret_cast<sockaddr*>(&peer), &plen) == 0) continue;
        } else {
            continue;
        }
        dup->reset();
        char addr[INET6_ADDRSTRLEN] = {};
        uint16_t port = 0;
        const bool v6 = domain == AF_INET6;
        if (v6) {
            const auto* a = reinterpret_cast<const sockaddr_in6*>(&local);
            ::inet_ntop(AF_INET6, &a->sin6_addr, addr, sizeof addr);
            port = ntohs(a->sin6_port);
        } else {
            const auto* a = reinterpret_cast<const sockaddr_in*>(&local);
            ::inet_ntop(AF_INET, &a->sin_addr, addr, sizeof addr);
            port = ntohs(a->sin_port);
        }
        if (port == 0) continue;
        std::string proto = type == SOCK_STREAM ? "tcp" : "udp";
        if (v6) proto += "6";
        out.push_back({proto, addr, port});
        if (settled) settled->emplace(inode, out.back());
    }
    return true;
}

void Teardown::State::remember_port(PortCheck pc) {
    bool dup = std::any_of(ports.begin(), ports.end(), [&](const PortCheck& o) {
        return o.proto == pc.proto && o.address == pc.address && o.port == pc.port;
    });
    if (!dup) ports.push_back(std::move(pc));
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

std::vector<size_t> Teardown::State::pending() const {
    std::vector<size_t> out;
    for (size_t i = 0; i < targets.size(); ++i)
        if (targets[i].how == Outcome::Pending) out.push_back(i);
    return out;
}

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

// A TCP/UDP bind of the address the tree listened on. SO_REUSEADDR so that TIME_WAIT
// remnants of accepted connections do not count: a listener anywhere still makes it fail.
static bool bindable(const PortCheck& pc) {
    bool v6 = pc.proto.size() > 3;
    int type = pc.proto.rfind("udp", 0) == 0 ? SOCK_DGRAM : SOCK_STREAM;
    int s = ::socket(v6 ? AF_INET6 : AF_INET, type | SOCK_CLOEXEC, 0);
    if (s < 0) return false;
    Fd fd(s);
    int one = 1;
    ::setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (v6) {
        sockaddr_in6 a{};
        a.sin6_family = AF_INET6;
        a.sin6_port = htons(pc.port);
        if (::inet_pton(AF_INET6, pc.address.c_str(), &a.sin6_addr) != 1)
            a.sin6_addr = in6addr_loopback;
        return ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    }
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(pc.port);
    if (::inet_pton(AF_INET, pc.address.c_str(), &a.sin_addr) != 1)
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return ::bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
}

void Teardown::State::verify_from_outside() {
    phase = Phase::Verify;
    reap_children();
    for (Target& t : targets)
        ended(t);
    for (size_t i : pending())
        report.survivors.push_back(targets[i].id);
    if (scope.cgroup) {
        // populated can lag the last exit by a moment; cgroup.events says when it is done.
        auto empty = scope.cgroup->wait_empty(static_cast<int>(opts.kill_wait.count()));
        report.cgroup_empty = empty.ok() && *empty;
        if (!report.cgroup_empty)
            if (auto procs = scope.cgroup->procs(); procs)
                for (pid_t p : *procs)
                    if (auto id = read_identity(p);
                        id && std::none_of(report.survivors.begin(), report.survivors.end(),
                                           [&](const ProcessId& s) { return s == *id; }))
                        report.survivors.push_back(*id);
    }
    if (scope.sole_parent) {
        int st = 0;
        pid_t w;
        while ((w = ::waitpid(-1, &st, WNOHANG)) > 0) {
        }
        report.reaped_all = (w < 0 && errno == ECHILD);
        if (w == 0) report.notes.push_back("waitpid(-1): a child of ours is still alive");
    }
    if (scope.child && !scope.child->exit_status()) {
        if (auto st = scope.child->try_reap(); st) report.root_status = *st;
    } else if (scope.child) {
        report.root_status = scope.child->exit_status();
    }
    // From outside: each port the tree listened on can be bound again. Exit closes a
    // process's sockets before it becomes a zombie, so this normally holds at once; the
    // bounded retry only covers a listener shared with a process still on its way out.
    for (PortCheck& pc : ports) {
        for (int i = 0; i < 40; ++i) {
            if (bindable(pc)) {
                pc.bindable = true;
                pc.released_ms = now_ms();
                break;
            }
            pollfd none{-1, 0, 0};
            ::poll(&none, 0, 5);
        }
    }
}

void Teardown::State::build_report() {
    TeardownReport& r = report;
    r.phases.total_ms = now_ms();
    r.phases.term_ms = 0;
    for (Target& t : targets) {
        t.pidfd.reset();
        // The namespace init is our machinery, not the server's: its SIGKILL is the design,
        // and counting it as "killed" would blur the signal the counts exist to show.
        if (t.role == Role::NamespaceInit) continue;
        switch (t.how) {
            case Outcome::ExitedInEof:
                ++r.exited_in_eof;
                break;
            case Outcome::ExitedAfterTerm:
                ++r.exited_in_grace;
                break;
            case Outcome::Killed:
                ++r.killed;
                break;
            case Outcome::AlreadyGone:
                ++r.already_gone;
                break;
            case Outcome::IdentityChanged:
                ++r.identity_changed;
                break;
            case Outcome::Pending:
                break;
        }
    }
    r.targets = std::move(targets);
    r.ports = std::move(ports);
}

// ---------------------------------------------------------------------------------------
// The report

Status TeardownReport::verdict() const {
    if (survivors.empty()) return {};
    std::string msg = fmt::format("{} process{} survived teardown:", survivors.size(),
                                  survivors.size() == 1 ? "" : "es");
    for (size_t i = 0; i < survivors.size(); ++i) {
        std::string cmd;
        for (const Target& t : targets)
            if (t.id == survivors[i]) cmd = t.command.unredacted();
        if (cmd.empty())
            if (auto p = read_process(survivors[i].pid, kCmdline); p) cmd = p->display_command();
        msg += fmt::format("{} {} ({})", i ? "," : "", survivors[i].pid, cmd);
    }
    return Error::msg(msg);
}

namespace {

// The report's times in the JSON: integer microseconds (journal bodies hold integers only),
// -1 for "not seen".
int64_t whole_us(double ms) {
    return ms < 0 ? -1 : static_cast<int64_t>(std::llround(ms * 1000));
}

}  // namespace

std::string TeardownReport::to_json_string(TextOut text) const {
    using nlohmann::json;
    json j;
    j["ok"] = ok();
    j["counts"] = {{"targets", targets.size()},          {"exited_in_eof", exited_in_eof},
                   {"exited_in_grace", exited_in_grace}, {"killed", killed},
                   {"already_gone", already_gone},       {"identity_changed", identity_changed},
                   {"survivors", survivors.size()}};
    json ts = json::array();
    for (const Target& t : targets)
        ts.push_back({{"pid", t.id.pid},
                      {"starttime", t.id.starttime},
                      {"ppid", t.ppid},
                      {"uid", t.uid},
                      {"command", text(t.command)},
                      {"role", to_string(t.role)},
                      {"how", to_string(t.how)},
                      {"ended_us", whole_us(t.ended_ms)},
                      {"round", t.round},
                      {"signals", t.signals}});
    j["targets"] = ts;
    json sv = json::array();
    for (const ProcessId& s : survivors)
        sv.push_back({{"pid", s.pid}, {"starttime", s.starttime}});
    j["survivors"] = sv;
    j["rounds"] = rounds;
    j["phases_us"] = {
        {"plan", whole_us(phases.plan_ms)},        {"eof", whole_us(phases.eof_ms)},
        {"grace", whole_us(phases.grace_ms)},      {"kill", whole_us(phases.kill_ms)},
        {"verify", whole_us(phases.verify_ms)},    {"total", whole_us(phases.total_ms)},
        {"plan_cpu", whole_us(phases.plan_cpu_ms)}};
    j["layers"] = layers.to_json();
    json ps = json::array();
    for (const PortCheck& p : ports)
        ps.push_back({{"proto", p.proto},
                      {"address", p.address},
                      {"port", p.port},
                      {"bindable", p.bindable},
                      {"released_us", whole_us(p.released_ms)}});
    j["ports"] = ps;
    j["cgroup_empty"] = cgroup_empty;
    j["reaped_all"] = reaped_all;
    if (root_status) j["root_status"] = *root_status;
    json ns = json::array();
    for (const SensitiveText& n : notes)
        ns.push_back(text(n));
    j["notes"] = std::move(ns);
    return j.dump();
}

std::string TeardownReport::render_text() const {
    std::string out = fmt::format(
        "teardown: {} targets, {} exited in EOF window, {} exited after SIGTERM, {} killed, "
        "{} already gone, {} identity changed, {} survivors ({:.1f} ms, {} rounds)\n",
        targets.size(), exited_in_eof, exited_in_grace, killed, already_gone, identity_changed,
        survivors.size(), phases.total_ms, rounds);
    for (const Target& t : targets)
        out += fmt::format("  {:>7} {:<15} {:<22} {:>8.1f} ms  {}\n", t.id.pid, to_string(t.role),
                           to_string(t.how), t.ended_ms, t.command.unredacted());
    for (const PortCheck& p : ports)
        out += fmt::format("  port {}:{}/{} {}\n", p.address, p.port, p.proto,
                           p.bindable ? "released" : "STILL HELD");
    out += fmt::format(
        "  phases: plan {:.1f} ms, EOF {:.1f} ms, grace {:.1f} ms, kill {:.1f} ms, "
        "verify {:.1f} ms\n",
        phases.plan_ms, phases.eof_ms, phases.grace_ms, phases.kill_ms, phases.verify_ms);
    for (const SensitiveText& n : notes)
        out += "  note: " + n.unredacted() + "\n";
    if (auto v = verdict(); !v) out += "  " + v.error().message + "\n";
    return out;
}

}  // namespace warden
