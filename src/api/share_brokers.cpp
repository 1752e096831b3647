// share_brokers(): the brokers of `run --share` and their trees, for `mcpwarden ps`.
//
// Nothing here scans /proc for brokers by name. A broker is known by what it wrote: a client
// session's relay (the journal's writer of that session) is its broker, and the tree it joined
// is the live session whose id it names. A tree without clients (lingering before its
// teardown) has no client session to name it; its own session's client (the parent its run
// recorded, pid and starttime) is then the broker if that same process is alive and is
// `mcpwarden broker` of the executable that runs the tree.
#include <algorithm>
#include <map>

#include "api/internal.hpp"
#include "mcpwarden/status.hpp"
#include "proc/process.hpp"

namespace warden::api {
namespace {

bool same(const ProcessRef& a, const ProcessRef& b) {
    return a.pid == b.pid && a.starttime == b.starttime;
}

// Whether `who` is alive and is `mcpwarden broker` run from the executable of `run`.
bool is_broker(const ProcessRef& who, const ProcessRef& run) {
    if (who.pid <= 0) return false;
    auto p = read_process(who.pid, kCmdline | kExe);
    auto r = read_process(run.pid, kExe);
    if (!p || !r || p->id.starttime != who.starttime || p->exe.empty() || p->exe != r->exe)
        return false;
    auto argv = p->argv();
    return argv.size() >= 2 && argv[1] == "broker";
}

}  // namespace

std::vector<ShareBroker> share_brokers(const std::vector<LiveSession>& live) {
    std::vector<ShareBroker> out;
    auto broker_of = [&](const ProcessRef& b) -> ShareBroker& {
        for (ShareBroker& sb : out)
            if (same(sb.broker, b)) return sb;
        out.push_back(ShareBroker{b, {}});
        return out.back();
    };
    auto tree_of = [](ShareBroker& sb, const std::string& session) -> SharedTree* {
        for (SharedTree& t : sb.trees)
            if (t.tree.session == session) return &t;
        return nullptr;
    };
    std::map<std::string, const LiveSession*> by_id;
    for (const LiveSession& s : live)
        by_id[s.session] = &s;
    // Client sessions: their relay is the broker, their tree the session they name.
    for (const LiveSession& s : live) {
        if (s.shared_tree.empty()) continue;
        ShareBroker& sb = broker_of(s.relay);
        SharedTree* t = tree_of(sb, s.shared_tree);
        if (!t) {
            sb.trees.push_back(SharedTree{});
            t = &sb.trees.back();
            auto it = by_id.find(s.shared_tree);
            if (it != by_id.end())
                t->tree = *it->second;
            else
                t->tree.session = s.shared_tree;  // its run writes another journal
        }
        t->clients.push_back(s);
    }
    // Trees without clients now: their run's recorded parent is a live broker.
    for (const LiveSession& s : live) {
        if (!s.shared_tree.empty()) continue;
        bool known = false;
        for (ShareBroker& sb : out)
            known = known || tree_of(sb, s.session);
        if (known) continue;
        bool of_known_broker = std::any_of(out.begin(), out.end(), [&](const ShareBroker& sb) {
            return same(sb.broker, s.client);
        });
        if (of_known_broker || is_broker(s.client, s.relay))
            broker_of(s.client).trees.push_back(SharedTree{s, {}});
    }
    return out;
}

}  // namespace warden::api
