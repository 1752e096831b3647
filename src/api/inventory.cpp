// scan_inventory(), inventory_scan() (its summary) and inspect(): the public face of
// src/inventory (mcpwarden/inventory.hpp, mcpwarden.hpp's ServerSummary scan). The value types
// are the scan's own (mcpwarden/inventory_types.hpp); what is converted is the trees and the
// process table, whose library types point into the scan. The JSON and text documents come
// from the inventory layer itself, so `ps --json` / `inspect` and a host read the same bytes.
#include <unistd.h>

#include <cmath>
#include <ctime>
#include <deque>
#include <exception>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "api/internal.hpp"
#include "clients/discover.hpp"
#include "inventory/inventory.hpp"
#include "journal/journal.hpp"
#include "mcpwarden/inventory.hpp"
#include "proc/process_table.hpp"

namespace warden::api {
namespace {

std::string inventory_user_name(uid_t uid, std::unordered_map<uid_t, std::string>& cache) {
    if (auto it = cache.find(uid); it != cache.end()) return it->second;
    std::string name = uid == static_cast<uid_t>(-1) ? "?" : user_name(uid);
    return cache.emplace(uid, name).first->second;
}

std::string inventory_iso_now() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    tm utc{};
    ::gmtime_r(&ts.tv_sec, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
    return fmt::format("{}.{:03}Z", buf, ts.tv_nsec / 1000000);
}

// The scan's capabilities as they are, with the JSON `ps --json` prints for them.
Capabilities pub_caps(const Capabilities& c) {
    Capabilities out = c;
    out.json = inventory::capabilities_json(c).dump();
    return out;
}

std::vector<Evidence> pub_evidence(const std::vector<inventory::Evidence>& ev) {
    std::vector<Evidence> out;
    for (const auto& e : ev)
        out.push_back({inventory::evidence_name(e.kind), e.pid, e.detail, e.strong()});
    return out;
}

ServerTree pub_tree(const inventory::ServerTree& t) {
    ServerTree out;
    static_cast<ServerTreeFacts&>(out) = t;
    for (const auto& m : t.members)
        out.members.push_back(
            {m.proc->id, inventory::role_name(m.role), m.depth, pub_caps(m.caps)});
    out.evidence = pub_evidence(t.evidence);
    out.proven = t.proven();
    if (!out.proven && (t.state == inventory::State::LogicalOrphan || t.os_orphan))
        out.suspect = t.suspect_reason();
    out.json = inventory::tree_json(t).dump();
    return out;
}

inventory::ScanOptions internal_options(const ScanOptions& o) {
    inventory::ScanOptions so;
    so.all_users = o.all_users;
    so.use_journal = o.use_journal;
    so.journal_path = o.journal_path;
    if (o.use_client_configs) so.declared = clients::declared_servers_here(o.project_dir);
    so.wedged_after = o.wedged_after;
    return so;
}

Inventory pub_inventory(const inventory::Inventory& inv, std::string observed_at) {
    Inventory out;
    out.observed_at = std::move(observed_at);
    out.boot_id = boot_id();
    out.clock_ticks = ::sysconf(_SC_CLK_TCK);
    out.warnings = inv.warnings();
    std::unordered_map<const inventory::ServerTree*, int> index;
    for (const inventory::ServerTree& t : inv.servers()) {
        index.emplace(&t, static_cast<int>(out.servers.size()));
        out.servers.push_back(pub_tree(t));
    }
    std::unordered_map<uid_t, std::string> users;
    const ProcessTable& table = inv.table();
    out.processes.reserve(table.all().size());
    for (const Process& p : table.all()) {
        ProcessInfo i;
        i.pid = p.id.pid;
        i.starttime = p.id.starttime;
        i.ppid = p.ppid;
        i.pgid = p.pgid;
        i.sid = p.sid;
        i.tty_nr = p.tty_nr;
        i.tpgid = p.tpgid;
        if (p.uid != static_cast<uid_t>(-1)) i.uid = p.uid;
        i.user = inventory_user_name(p.uid, users);
        i.state = p.state;
        i.comm = p.comm;
        i.argv = p.argv();
        i.command = p.display_command();
        i.rss_kb = p.rss_kb;
        i.threads = p.threads;
        i.elapsed_seconds = p.elapsed_seconds();
        for (const Process* c : table.children(p.id.pid))
            i.children.push_back(c->id.pid);
        if (const inventory::ServerTree* t = inv.tree_of(p.id.pid); t && t->member(p.id.pid))
            i.server_tree = index.at(t);
        out.processes.push_back(std::move(i));
    }
    return out;
}

}  // namespace

std::vector<const ProcessInfo*> Inventory::descendants(pid_t pid) const {
    std::vector<const ProcessInfo*> out;
    const ProcessInfo* root = find(pid);
    if (!root) return out;
    std::unordered_set<pid_t> seen{pid};
    std::deque<const ProcessInfo*> queue{root};
    while (!queue.empty()) {
        const ProcessInfo* p = queue.front();
        queue.pop_front();
        for (pid_t c : p->children) {
            const ProcessInfo* child = find(c);
            if (!child || !seen.insert(c).second) continue;
            out.push_back(child);
            queue.push_back(child);
        }
    }
    return out;
}

Result<Inventory> scan_inventory(const ScanOptions& options) {
    try {
        std::string observed_at = inventory_iso_now();
        auto inv = inventory::Inventory::scan(internal_options(options));
        if (!inv) return inv.error();
        return pub_inventory(*inv, std::move(observed_at));
    } catch (const std::exception& e) {
        return internal_error("inventory", e);
    }
}

// scan_inventory(), summed up: a row per server tree, and the trees' JSON as `ps --json`'s
// "servers" holds them.
Result<InventoryResult> inventory_scan(const InventoryOptions& options) {
    auto inv = scan_inventory(options);
    if (!inv) return inv.error();
    try {
        InventoryResult out;
        std::string servers;
        for (const ServerTree& t : inv->servers) {
            out.servers.push_back({t.root.pid, t.server.pid, t.name, t.state, t.session,
                                   static_cast<int>(t.members.size())});
            servers += (servers.empty() ? "" : ",") + t.json;
        }
        out.warnings = std::move(inv->warnings);
        out.json = R"({"servers":[)" + servers + R"(],"warnings":)" +
                   nlohmann::json(out.warnings).dump() + "}";
        return out;
    } catch (const std::exception& e) {
        return internal_error("inventory", e);
    }
}

std::string display_bytes(std::string_view bytes) {
    try {
        return escape_bytes(bytes);
    } catch (...) {
        return {};
    }
}

Result<Incident> inspect(pid_t pid, const InspectOptions& options) {
    try {
        inventory::ScanOptions so;
        so.all_users = true;
        so.journal_path = options.journal_path;
        so.declared = clients::declared_servers_here(std::nullopt);
        auto inv = inventory::Inventory::scan(so);
        if (!inv) return inv.error();
        if (options.on_warning)
            for (const auto& w : inv->warnings())
                options.on_warning(w);
        if (!inv->table().find(pid)) return Error{fmt::format("no process {}", pid), ESRCH};
        auto rec = inventory::incident_record(*inv, pid);
        if (!rec) return rec.error();

        Incident out;
        out.warnings = inv->warnings();
        if (options.record) {
            auto ev = inventory::snapshot_event(*inv, pid, "inspect");
            if (!ev) return ev.error();
            auto j = journal::Journal::open({.path = options.journal_path});
            if (!j)
                return Error{"cannot record the snapshot: " + j.error().message, j.error().code};
            auto a = (*j)->append(*ev);
            if (!a)
                return Error{"cannot record the snapshot: " + a.error().message, a.error().code};
            out.recorded_seq = a->seq;
            out.recorded_in = (*j)->paths().db;
            if (auto st = (*j)->close(); !st) return st.error();
        }

        const inventory::IncidentRecord& r = *rec;
        static_cast<IncidentFacts&>(out) = r;
        out.evidence = pub_evidence(r.evidence);
        out.caps = pub_caps(r.caps);

        nlohmann::json doc = inventory::incident_json(r);
        doc["recorded"] = out.recorded_seq ? nlohmann::json{{"seq", *out.recorded_seq},
                                                            {"journal", out.recorded_in}}
                                           : nlohmann::json(nullptr);
        out.json = doc.dump(2) + "\n";
        out.text = inventory::incident_text(r);
        if (out.recorded_seq)
            out.text += fmt::format("{:<22}process.snapshot seq {} in {}\n",
                                    "recorded:", *out.recorded_seq, out.recorded_in);
        return out;
    } catch (const std::exception& e) {
        return internal_error("inventory", e);
    }
}

}  // namespace warden::api
