// The classification: each tree's state and its reasons from what the second look found
// (classify reads nothing), and the remnants a dead server left that nothing names.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>

#include <fmt/format.h>

#include "fault/faults.hpp"
#include "inventory/argv.hpp"
#include "inventory/inventory_impl.hpp"

namespace warden::inventory {

namespace {

// Where `p` went when its parent died: PID 1, or a subreaper (systemd --user, tini, …) older
// than it. nullopt for a process whose parent is anything else.
std::optional<OsOrphan> reparented(const Process& p, const ProcessTable& table) {
    if (p.ppid == 1) return OsOrphan{1, "reparented to PID 1"};
    const Process* parent = table.find(p.ppid);
    if (!parent || !started_before(parent->id, p.id)) return std::nullopt;
    if (parent->comm == "systemd" || parent->comm == "init" || parent->comm == "tini" ||
        parent->comm == "dumb-init")
        return OsOrphan{parent->id.pid, fmt::format("reparented to subreaper {} ({})",
                                                    parent->id.pid, escape_bytes(parent->comm))};
    return std::nullopt;
}

// What the front's fd 0 or 1 is, for a reason: its target, or "closed".
std::string stdio_desc(const Process& front, int fd) {
    const FdInfo* f = fd_of(front, fd);
    return f ? f->target : std::string("closed");
}

// os-orphan: a clue beside the state. A subreaper that writes the root's stdin launched it.
void note_os_orphan(ServerTree& t, const Process& root, const ClientEnds& ends,
                    const ProcessTable& table) {
    if (auto o = reparented(root, table)) {
        bool launcher_known = !ends.writers.empty() && ends.writers.front()->id.pid == o->parent;
        if (o->parent == 1 || (!launcher_known && t.supervisors.empty())) t.os_orphan = o;
    }
}

// The client: the journal's, then the live process that holds the other end of the front's
// stdin (or, when none does, of its stdout). A server whose stdin writer is gone but whose
// output a live process still reads (`… | cat >log`) is somebody's, not an orphan.
void name_client(ServerTree& t, const ClientEnds& ends, const SessionInfo* js) {
    if (js && js->client) t.client = js->client;
    if (ends.writers.empty() && ends.readers.empty()) return;
    const Process* front = ends.front;
    bool writes = !ends.writers.empty();
    const Process* w = writes ? ends.writers.front() : ends.readers.front();
    ClientRef c;
    c.id = w->id;
    c.command = w->display_command();
    c.alive = true;
    c.how = writes ? fmt::format("holds the write end of {} (stdin of pid {})",
                                 stdio_desc(*front, 0), front->id.pid)
                   : fmt::format("holds the read end of {} (stdout of pid {})",
                                 stdio_desc(*front, 1), front->id.pid);
    t.client = c;
}

// What the journal knows that the pipes cannot (the client died, the session ended): true
// when that makes the tree a logical orphan.
bool orphaned_by_journal(ServerTree& t, const SessionInfo* js) {
    if (!js) return false;
    // A session lives as long as its relay or its keeper, whose identities session.start
    // recorded; not as long as its client. With both gone nothing supervises what is left:
    // it is an orphan at once, whatever the client or the pipes say (a client that lives on
    // may still hold a pipe to the dead relay; nobody relays it anything).
    if (!js->supervisors.empty() && !js->supervisor_alive()) {
        t.state = State::LogicalOrphan;
        std::string who;
        for (const auto& s : js->supervisors)
            who += fmt::format("{}{} {}", who.empty() ? "" : " and ", s.how, s.id.pid);
        t.state_reasons.push_back(fmt::format("journal: session {} is over: its {} {} gone", js->id,
                                              who, js->supervisors.size() > 1 ? "are" : "is"));
        return true;
    }
    if (js->client_lost) {
        t.state = State::LogicalOrphan;
        t.state_reasons.push_back(
            "journal: session " + js->id + " lost its client" +
            (js->client_lost_cause.empty() ? std::string() : " (" + js->client_lost_cause + ")"));
    } else if (js->journal_state == "ended" || js->journal_state == "orphaned") {
        t.state = State::LogicalOrphan;
        t.state_reasons.push_back("journal: session " + js->id + " is " + js->journal_state +
                                  " but its processes remain");
    } else if (js->client && !js->client->alive) {
        t.state = State::LogicalOrphan;
        t.state_reasons.push_back(fmt::format("journal: client pid {} of session {} is gone",
                                              js->client->id.pid, js->id));
    }
    return t.state == State::LogicalOrphan;
}

// Then the pipes: live while a process outside the tree holds the other end of either, an
// orphan when none does; without a pipe to follow, live while its supervisor is, else unknown.
void state_from_stdio(ServerTree& t, const ClientEnds& ends, const SessionInfo* js) {
    const Process* front = ends.front;
    const FdInfo* in = fd_of(*front, 0);
    const FdInfo* out = fd_of(*front, 1);
    if (stream_fd(in) || stream_fd(out)) {
        if (!ends.writers.empty() || !ends.readers.empty()) {
            t.state = State::Live;
            t.state_reasons.push_back(
                fmt::format("pid {} ({}) {}", t.client->id.pid, t.client->command, t.client->how));
        } else {
            t.state = State::LogicalOrphan;
            t.state_reasons.push_back(
                fmt::format("no live process outside the tree holds the write end of {} (stdin "
                            "of pid {}) or the read end of {} (stdout)",
                            stdio_desc(*front, 0), front->id.pid, stdio_desc(*front, 1)));
        }
    } else if (js && js->supervisor_alive()) {
        t.state = State::Live;
        for (const auto& s : js->supervisors)
            if (s.alive) {
                t.state_reasons.push_back(
                    fmt::format("journal: the {} (pid {}) of session {} is "
                                "alive",
                                s.how, s.id.pid, js->id));
                break;
            }
    } else {
        t.state = State::Unknown;
        t.state_reasons.push_back("stdin is " + stdio_desc(*front, 0) +
                                  ", not a pipe: no client end to follow");
    }
}

// A live session whose journal shows no traffic for longer than the threshold is wedged.
void mark_if_wedged(ServerTree& t, const SessionInfo& js, int64_t observed_at_ns,
                    std::chrono::seconds wedged_after) {
    int64_t idle = observed_at_ns - js.last_traffic_ns;
    // In seconds, as given: a threshold of centuries must not overflow into a negative.
    int64_t limit = std::min<int64_t>(wedged_after.count(), INT64_MAX / 1000000000) * 1000000000;
    if (idle > limit) {
        t.state = State::Wedged;
        t.state_reasons.push_back(fmt::format(
            "journal: no traffic for {} s (threshold {} s), {} request(s) without answer",
            idle / 1000000000, wedged_after.count(), js.in_flight));
    }
}

}  // namespace

void Inventory::Impl::classify_trees() {
    for (size_t i = 0; i < trees.size(); ++i) {
        ServerTree& t = trees[i];
        classify(t, client_ends[i]);
        if ((t.state == State::LogicalOrphan || t.os_orphan) && !t.proven())
            t.state_reasons.push_back(t.suspect_reason());
    }
}

// The state and its reasons, from what read_details() found: the journal first, then the
// pipes. Reads nothing.
void Inventory::Impl::classify(ServerTree& t, const ClientEnds& ends) const {
    const Process* root = table.find(t.root);
    if (!root || !ends.front) return;
    note_os_orphan(t, *root, ends, table);
    const SessionInfo* js = t.journal ? &*t.journal : nullptr;
    name_client(t, ends, js);
    if (orphaned_by_journal(t, js)) return;
    state_from_stdio(t, ends, js);
    if (t.state == State::Live && js && js->last_traffic_ns > 0)
        mark_if_wedged(t, *js, observed_at_ns, opt.wedged_after);
}

// Remnants: what a dead server left that nothing names. A helper started with stdin /dev/null
// carries no evidence of its own; once its server died it is re-parented, and outside
// `mcpwarden run` (no marker, no session cgroup) only one thing still ties it to where it came
// from: its process group, which it shares with the client that launched the server and the
// client's other servers. So a process outside every tree is a remnant when
//
//   - nothing can talk to it: stdin /dev/null or closed, and no live process outside it
//     reads its stdout;
//   - it was left: re-parented to PID 1 or a subreaper;
//   - its process group holds a server tree that started before it (it cannot be a helper
//     of a server born after it). Before, not in the same clock tick: equal start times are
//     never an order (started_before), and a job's subshell is forked in the very tick of
//     the `npx` it then forks, which is no server it outlived but the one it runs.
//
// Every daemon has the first two; the third is what makes it a server's. It proves the
// remnant (`dead-job`) only when the whole job is dead and so is everything a teardown of
// the remnant would signal:
//
//   - the group's leader is gone (or is a member of an orphaned tree) and every other live
//     process of the group is a proven orphaned server tree or another remnant's;
//   - the remnant's own tree — it and every descendant, whatever their group — is proven not
//     live by the same rules (live_in_tree): each member of a server tree in it is of a
//     proven orphaned one, and no live process outside it writes the stdin or reads the
//     stdout of any of the rest. A subshell whose `npx` still has a `cat` reading it is the
//     job, alive, however dead the subshell's own stdio looks.
//
// A group or a tree with anything else alive (a live client, its live servers, a shell, a
// live reader below) makes it a suspect (`remnant`): shown, never reaped without
// --include-suspects, and reap refuses a tree with a live member even then.
void Inventory::Impl::find_remnants() {
    const TreesByGroup trees_in_group = trees_by_group();
    if (trees_in_group.empty()) return;
    const Faults faults = Faults::from_env();
    for (auto& [pgid, procs] : left_behind(trees_in_group, faults))
        plant_remnants(pgid, procs, trees_in_group.at(pgid), faults);
}

// The server trees of each process group, by index, in order.
Inventory::Impl::TreesByGroup Inventory::Impl::trees_by_group() const {
    TreesByGroup trees_in_group;
    for (size_t i = 0; i < trees.size(); ++i)
        for (const Member& m : trees[i].members)
            if (m.proc->pgid > 1) {
                auto& v = trees_in_group[m.proc->pgid];
                if (v.empty() || v.back() != i) v.push_back(i);
            }
    return trees_in_group;
}

// The processes outside every tree that nothing can talk to, that were left (re-parented),
// in a process group with a server tree that started before them: by process group.
std::unordered_map<pid_t, std::vector<const Process*>> Inventory::Impl::left_behind(
    const TreesByGroup& trees_in_group, const Faults& faults) {
    auto no_client_end = [&](const Process& p) {
        const FdInfo* in = fd_of(p, 0);
        if (in && in->target != "/dev/null") return false;
        const FdInfo* out = fd_of(p, 1);
        if (out && out->kind == FdInfo::Kind::Socket) return false;
        if (!out || out->kind != FdInfo::Kind::Pipe) return true;
        const std::unordered_set<pid_t> self{p.id.pid};
        return stdout_readers(p, &self).empty();
    };
    std::unordered_map<pid_t, std::vector<const Process*>> remnants;  // by process group
    for (const Process& p : table.all()) {
        if (tree_index.count(p.id.pid) || p.zombie() || is_supervisor(p) || p.id.pid == 1) continue;
        if (!opt.all_users && p.uid != me) continue;
        auto group = trees_in_group.find(p.pgid);
        if (group == trees_in_group.end()) continue;
        bool born_after = std::any_of(group->second.begin(), group->second.end(), [&](size_t i) {
            return started_before(trees[i].root, p.id) ||
                   (faults.equal_ticks_ordered && trees[i].root.starttime == p.id.starttime);
        });
        if (born_after && reparented(p, table) && no_client_end(p)) remnants[p.pgid].push_back(&p);
    }
    return remnants;
}

// The remnants of one process group, each a tree of its own: proven (dead-job) when its own
// tree is not live and nothing else of the group is alive, else a suspect (remnant).
void Inventory::Impl::plant_remnants(pid_t pgid, const std::vector<const Process*>& procs,
                                     const std::vector<size_t>& group_trees, const Faults& faults) {
    // Each remnant's whole tree, and why something of it is live ("": nothing is).
    std::unordered_set<pid_t> left;  // the trees proven not live
    std::unordered_map<pid_t, std::string> live_below;
    for (const Process* p : procs) {
        std::string why = faults.remnant_tree_unchecked ? std::string() : live_in_tree(*p);
        if (why.empty()) {
            left.insert(p->id.pid);
            for (const Process* d : table.descendants(p->id))
                left.insert(d->id.pid);
        }
        live_below[p->id.pid] = std::move(why);
    }
    const std::string alive = alive_in_group(pgid, left);
    std::string names;
    for (size_t i : group_trees)
        names +=
            fmt::format("{}{} ({})", names.empty() ? "" : ", ", trees[i].root.pid, trees[i].name);
    for (const Process* p : procs) {
        ServerTree t;
        t.root = t.server = p->id;
        auto argv = p->argv();
        t.name = argv.empty() ? p->comm : std::string(basename(argv[0]));
        t.os_orphan = reparented(*p, table);
        std::string why =
            fmt::format("stdin {}, {}, in process group {} with server tree(s) {}",
                        fd_of(*p, 0) ? "/dev/null" : "closed", t.os_orphan->reason, pgid, names);
        const std::string& below = live_below[p->id.pid];
        if (!below.empty())
            t.evidence.push_back(
                {EvidenceKind::remnant, p->id.pid, why + "; but in its own tree " + below});
        else if (alive.empty())
            t.evidence.push_back(
                {EvidenceKind::dead_job, p->id.pid, why + "; nothing else of that group is alive"});
        else
            t.evidence.push_back(
                {EvidenceKind::remnant, p->id.pid, why + "; " + alive + " of that group is alive"});
        std::function<void(const Process*, int)> walk = [&](const Process* q, int depth) {
            if (tree_index.count(q->id.pid) || depth > 256) return;
            tree_index[q->id.pid] = trees.size();
            t.members.push_back({q, Role::helper, depth, capabilities(*q)});
            for (const Process* c : table.children(q->id.pid))
                walk(c, depth + 1);
        };
        walk(p, 0);
        t.state = State::LogicalOrphan;
        t.state_reasons.push_back(
            fmt::format("its server is gone: stdin {} and {}; no live process reads its stdout",
                        fd_of(*p, 0) ? "/dev/null" : "closed", t.os_orphan->reason));
        if (!t.proven()) t.state_reasons.push_back(t.suspect_reason());
        trees.push_back(std::move(t));
    }
}

// The whole job dead: its live processes are proven orphans, remnants (`left`), or below
// them. Else the first that is not ("PID (command)"); "" when none.
std::string Inventory::Impl::alive_in_group(pid_t pgid,
                                            const std::unordered_set<pid_t>& left) const {
    for (const Process& q : table.all()) {
        if (q.pgid != pgid || q.zombie() || left.count(q.id.pid) || left.count(q.ppid)) continue;
        auto it = tree_index.find(q.id.pid);
        const ServerTree* t = it == tree_index.end() ? nullptr : &trees[it->second];
        if (t && t->state == State::LogicalOrphan && t->proven()) continue;
        return fmt::format("{} ({})", q.id.pid, q.display_command());
    }
    return {};
}

// Why something of `top`'s whole tree (it and every descendant: what a teardown of it would
// signal) is live by this inventory's rules, or "" when nothing is. A member of a server tree
// must be of a proven logical orphan, as the rest of a dead job must; any other process must
// have no live holder outside the tree of the write end of its stdin or the read end of its
// stdout (a process inside the tree talking to another inside it is no client).
std::string Inventory::Impl::live_in_tree(const Process& top) {
    std::vector<const Process*> tree{&top};
    for (const Process* d : table.descendants(top.id))
        if (!d->zombie()) tree.push_back(d);
    std::unordered_set<pid_t> inside;
    for (const Process* q : tree)
        inside.insert(q->id.pid);
    for (const Process* q : tree) {
        if (auto it = tree_index.find(q->id.pid); it != tree_index.end()) {
            const ServerTree& t = trees[it->second];
            if (t.state == State::LogicalOrphan && t.proven()) continue;
            std::string what =
                t.state != State::LogicalOrphan
                    ? fmt::format("{}{}", state_name(t.state),
                                  t.state_reasons.empty() ? "" : ": " + t.state_reasons.front())
                    : "an orphan not proven (" + t.suspect_reason() + ")";
            return fmt::format("{} ({}) is of server tree {} ({}), which is {}", q->id.pid,
                               q->display_command(), t.root.pid, escape_bytes(t.name), what);
        }
        for (int fd : {0, 1})
            for (const Process* w : stdio_peers(*q, fd, &inside))
                if (!w->zombie() && !inside.count(w->id.pid))
                    return fmt::format("{} ({}) holds the {} end of the {} of {} ({})", w->id.pid,
                                       w->display_command(), fd == 0 ? "write" : "read",
                                       fd == 0 ? "stdin" : "stdout", q->id.pid,
                                       q->display_command());
    }
    return {};
}

}  // namespace warden::inventory
