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
#include <algorithm>
#include <map>

#include "contain/teardown_state.hpp"

namespace warden {

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

}  // namespace warden
