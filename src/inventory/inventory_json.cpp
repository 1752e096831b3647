// The inventory as JSON (`ps --json`, `inspect --json`): a tree, its members' capabilities.
#include <cmath>

#include "inventory/inventory_impl.hpp"

namespace warden::inventory {

nlohmann::json capabilities_json(const Capabilities& c) {
    nlohmann::json listening = nlohmann::json::array();
    for (const auto& l : c.listening)
        listening.push_back({{"proto", std::string(l.udp ? "udp" : "tcp") + (l.ipv6 ? "6" : "")},
                             {"addr", l.addr},
                             {"port", l.port},
                             {"fd", l.fd},
                             {"inode", l.inode}});
    nlohmann::json conns = nlohmann::json::array();
    for (const auto& x : c.connections)
        conns.push_back({{"proto", x.proto},
                         {"local_addr", x.local_addr},
                         {"local_port", x.local_port},
                         {"remote_addr", x.remote_addr},
                         {"remote_port", x.remote_port},
                         {"state", x.state}});
    nlohmann::json unix_socks = nlohmann::json::array();
    for (const auto& u : c.unix_sockets) {
        nlohmann::json j = {{"fd", u.fd}, {"inode", u.inode}, {"path", u.path}};
        if (u.peer_pid) {
            j["peer_pid"] = u.peer_pid;
            j["peer_command"] = u.peer_command;
        }
        unix_socks.push_back(std::move(j));
    }
    nlohmann::json kids = nlohmann::json::array();
    for (const auto& k : c.children)
        kids.push_back({{"pid", k.pid}, {"starttime", k.starttime}});
    return {{"listening", std::move(listening)},
            {"connections", std::move(conns)},
            {"unix_sockets", std::move(unix_socks)},
            {"credential_env", c.credential_env},
            {"cwd", escape_bytes(c.cwd)},
            {"exe", escape_bytes(c.exe)},
            {"rss_kb", c.rss_kb},
            {"elapsed_seconds", std::round(c.elapsed_seconds * 100) / 100},
            {"children", std::move(kids)}};
}

nlohmann::json client_json(const ClientRef& c) {
    return {{"pid", c.id.pid},
            {"starttime", c.id.starttime},
            {"command", c.command},
            {"alive", c.alive},
            {"how", c.how}};
}
nlohmann::json evidence_json(const std::vector<Evidence>& ev) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& e : ev)
        a.push_back({{"kind", evidence_name(e.kind)},
                     {"pid", e.pid},
                     {"detail", e.detail},
                     {"strong", e.strong()}});
    return a;
}

nlohmann::json tree_json(const ServerTree& t) {
    nlohmann::json members = nlohmann::json::array();
    for (const auto& m : t.members)
        members.push_back({{"pid", m.proc->id.pid},
                           {"starttime", m.proc->id.starttime},
                           {"role", role_name(m.role)},
                           {"depth", m.depth},
                           {"command", m.proc->display_command()},
                           {"capabilities", capabilities_json(m.caps)}});
    nlohmann::json sup = nlohmann::json::array();
    for (const auto& s : t.supervisors)
        sup.push_back({{"pid", s.pid}, {"starttime", s.starttime}});
    nlohmann::json j = {
        {"name", escape_bytes(t.name)},
        {"root", {{"pid", t.root.pid}, {"starttime", t.root.starttime}}},
        {"server", {{"pid", t.server.pid}, {"starttime", t.server.starttime}}},
        {"state", state_name(t.state)},
        {"state_reasons", t.state_reasons},
        {"os_orphan", t.os_orphan ? nlohmann::json{{"parent", t.os_orphan->parent},
                                                   {"reason", t.os_orphan->reason}}
                                  : nlohmann::json(nullptr)},
        {"client", t.client ? client_json(*t.client) : nlohmann::json(nullptr)},
        {"session", t.session.empty() ? nlohmann::json(nullptr) : nlohmann::json(t.session)},
        {"supervisors", std::move(sup)},
        {"evidence", evidence_json(t.evidence)},
        {"strong_evidence", t.has_strong_evidence()},
        {"proven", t.proven()},
        {"suspect", !t.proven() && (t.state == State::LogicalOrphan || t.os_orphan)
                        ? nlohmann::json(t.suspect_reason())
                        : nlohmann::json(nullptr)},
        {"members", std::move(members)},
    };
    if (t.journal)
        j["journal"] = {{"state", t.journal->journal_state},
                        {"client_lost", t.journal->client_lost},
                        {"started_ns", t.journal->started_ns},
                        {"last_traffic_ns", t.journal->last_traffic_ns},
                        {"in_flight", t.journal->in_flight}};
    return j;
}

}  // namespace warden::inventory
