// `mcpwarden ps`: the MCP servers on this machine (default, `--mcp`) or every process
// (`--all`, `--pid`, `--descendants-of`), from one inventory scan, as a table sized to the
// terminal or as JSON (schema in docs/ps-json.md).
//
// Rows and columns are kept apart on purpose: a PsRow is one process plus what the command
// derived for it (user name, tree depth), and each column is a (header, text, json) triple
// over a row. Inventory (issue [5]) adds its state and capability columns by extending
// PsRow and appending to the column list; the filters, the tree and both output formats
// stay as they are.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "mcpwarden/inventory.hpp"
#include "mcpwarden/status.hpp"
#include "table.hpp"

namespace warden::cli {
namespace {

using api::ProcessInfo;

constexpr int kSchemaVersion = 1;

struct PsOptions {
    bool mcp = false;  // explicit --mcp; also the default when no process selection is given
    bool orphans = false;
    std::string journal;
    bool no_journal = false;
    int64_t wedged_after = 900;
    bool all = false;
    bool tree = false;
    bool json = false;
    bool wide = false;
    std::vector<pid_t> pids;
    std::optional<pid_t> descendants_of;
};

// One line of output: the process and what `ps` derived for it.
struct PsRow {
    const ProcessInfo* proc = nullptr;
    int depth = 0;  // with --tree: distance from the row's root in the shown forest
    const api::ServerTree* tree = nullptr;  // the MCP server tree it belongs to
    const api::TreeMember* member = nullptr;
};

bool mcp_mode(const PsOptions& opt) {
    return opt.mcp || opt.orphans || (!opt.all && opt.pids.empty() && !opt.descendants_of);
}

// ---- formatting helpers --------------------------------------------------------------

// ps-style [[dd-]hh:]mm:ss.
std::string format_etime(double seconds) {
    auto s = static_cast<long long>(seconds);
    long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
    char buf[96];
    if (d)
        std::snprintf(buf, sizeof buf, "%lld-%02lld:%02lld:%02lld", d, h, m, sec);
    else if (h)
        std::snprintf(buf, sizeof buf, "%02lld:%02lld:%02lld", h, m, sec);
    else
        std::snprintf(buf, sizeof buf, "%02lld:%02lld", m, sec);
    return buf;
}

std::string format_rss(uint64_t kb) {
    if (kb < 1024) return std::to_string(kb) + "K";
    char buf[64];
    if (kb < 1024 * 1024)
        std::snprintf(buf, sizeof buf, "%.1fM", static_cast<double>(kb) / 1024);
    else
        std::snprintf(buf, sizeof buf, "%.1fG", static_cast<double>(kb) / (1024 * 1024));
    return buf;
}

// The state letter plus ps's most useful modifiers: s session leader, l multi-threaded,
// + in the foreground process group of its terminal.
std::string format_stat(const ProcessInfo& p) {
    std::string s(1, p.state);
    if (p.pid == p.sid) s += 's';
    if (p.threads > 1) s += 'l';
    if (p.tty_nr != 0 && p.tpgid == p.pgid) s += '+';
    return s;
}

std::string tree_prefix(int depth) {
    if (depth == 0) return {};
    return std::string(static_cast<size_t>(depth - 1) * 2 + 1, ' ') + "\\_ ";
}

// ---- columns ---------------------------------------------------------------------------

struct PsColumn {
    Column layout;
    std::function<std::string(const PsRow&)> text;
};

// ---- inventory cells --------------------------------------------------------------------

std::string state_cell(const api::ServerTree& t) {
    std::string s = api::state_name(t.state);
    if (t.os_orphan) s += ",os-orphan";
    if (!t.suspect.empty()) s += ",suspect";  // an orphan without proof: reap leaves it
    return s;
}

std::string evidence_cell(const PsRow& r) {
    std::string s;
    for (const auto& e : r.tree->evidence) {
        if (e.pid != r.proc->pid) continue;
        const std::string& k = e.kind;
        if (s.find(k) != std::string::npos) continue;
        if (!s.empty()) s += ',';
        s += k;
    }
    return s.empty() ? "-" : s;
}

std::string client_cell(const PsRow& r) {
    if (r.member->depth != 0 || !r.tree->client) return "-";
    const auto& c = *r.tree->client;
    std::string comm;
    auto space = c.command.find(' ');
    comm = c.command.substr(0, space);
    comm = comm.substr(comm.rfind('/') == std::string::npos ? 0 : comm.rfind('/') + 1);
    return std::to_string(c.id.pid) + (c.alive ? "" : "(gone)") + (comm.empty() ? "" : " " + comm);
}

std::string ports_cell(const api::Capabilities& c) {
    std::string s;
    for (const auto& l : c.listening) {
        if (!s.empty()) s += ',';
        s += (l.udp ? "u" : "") + std::to_string(l.port);
    }
    if (!c.connections.empty())
        s += (s.empty() ? "" : " ") + std::to_string(c.connections.size()) + ">";
    return s.empty() ? "-" : s;
}

std::string creds_cell(const api::Capabilities& c) {
    if (c.credential_env.empty()) return "-";
    std::string s = c.credential_env.front();
    if (c.credential_env.size() > 1) s += "+" + std::to_string(c.credential_env.size() - 1);
    return s;
}

std::vector<PsColumn> mcp_columns(const PsOptions& opt, bool sessions) {
    using A = Column::Align;
    std::vector<PsColumn> cols = {
        {{"PID", A::Right}, [](const PsRow& r) { return std::to_string(r.proc->pid); }},
        {{"PPID", A::Right}, [](const PsRow& r) { return std::to_string(r.proc->ppid); }},
        {{"USER", A::Left}, [](const PsRow& r) { return r.proc->user; }},
        {{"ROLE", A::Left}, [](const PsRow& r) { return r.member->role; }},
        {{"STATE", A::Left}, [](const PsRow& r) { return state_cell(*r.tree); }},
        {{"CLIENT", A::Left}, client_cell},
        {{"EVIDENCE", A::Left}, evidence_cell},
    };
    if (sessions)
        cols.push_back({{"SESSION", A::Left}, [](const PsRow& r) {
                            return r.tree->session.empty()
                                       ? std::string("-")
                                       : api::display_bytes(r.tree->session.substr(0, 12));
                        }});
    cols.push_back({{"PORTS", A::Left}, [](const PsRow& r) { return ports_cell(r.member->caps); }});
    cols.push_back({{"CREDS", A::Left}, [](const PsRow& r) { return creds_cell(r.member->caps); }});
    cols.push_back({{"RSS", A::Right}, [](const PsRow& r) { return format_rss(r.proc->rss_kb); }});
    cols.push_back({{"ELAPSED", A::Right},
                    [](const PsRow& r) { return format_etime(r.proc->elapsed_seconds); }});
    bool tree = opt.tree;
    cols.push_back({{"COMMAND", A::Left, /*flexible=*/true}, [tree](const PsRow& r) {
                        std::string cmd = r.proc->command;
                        return tree ? tree_prefix(r.depth) + cmd : cmd;
                    }});
    return cols;
}

std::vector<PsColumn> columns(const PsOptions& opt, bool any_mcp) {
    using A = Column::Align;
    auto num = [](auto field) {
        return [field](const PsRow& r) { return std::to_string(field(*r.proc)); };
    };
    std::vector<PsColumn> cols = {
        {{"PID", A::Right}, num([](const ProcessInfo& p) { return p.pid; })},
        {{"PPID", A::Right}, num([](const ProcessInfo& p) { return p.ppid; })},
        {{"PGID", A::Right}, num([](const ProcessInfo& p) { return p.pgid; })},
        {{"SID", A::Right}, num([](const ProcessInfo& p) { return p.sid; })},
        {{"USER", A::Left}, [](const PsRow& r) { return r.proc->user; }},
        {{"STAT", A::Left}, [](const PsRow& r) { return format_stat(*r.proc); }},
        {{"ELAPSED", A::Right},
         [](const PsRow& r) { return format_etime(r.proc->elapsed_seconds); }},
        {{"RSS", A::Right}, [](const PsRow& r) { return format_rss(r.proc->rss_kb); }},
    };
    if (any_mcp)
        cols.push_back({{"MCP", A::Left}, [](const PsRow& r) {
                            if (!r.tree) return std::string("-");
                            return r.member->role + ":" + state_cell(*r.tree);
                        }});
    bool tree = opt.tree;
    cols.push_back({{"COMMAND", A::Left, /*flexible=*/true}, [tree](const PsRow& r) {
                        std::string cmd = r.proc->command;
                        return tree ? tree_prefix(r.depth) + cmd : cmd;
                    }});
    return cols;
}

nlohmann::json row_json(const PsRow& r, bool tree) {
    const ProcessInfo& p = *r.proc;
    nlohmann::json argv = nlohmann::json::array();
    for (const auto& a : p.argv)
        argv.push_back(api::display_bytes(a));
    nlohmann::json j = {
        {"pid", p.pid},
        {"starttime", p.starttime},
        {"ppid", p.ppid},
        {"pgid", p.pgid},
        {"sid", p.sid},
        {"tty_nr", p.tty_nr},
        {"uid", p.uid ? nlohmann::json(*p.uid) : nlohmann::json(nullptr)},
        {"user", p.user},
        {"state", std::string(1, p.state)},
        {"stat", format_stat(p)},
        {"zombie", p.zombie()},
        {"elapsed_seconds", std::round(p.elapsed_seconds * 100) / 100},
        {"rss_kb", p.rss_kb},
        {"threads", p.threads},
        {"comm", api::display_bytes(p.comm)},
        {"command", p.command},
        {"argv", std::move(argv)},
    };
    if (tree) j["depth"] = r.depth;
    if (r.tree) {
        nlohmann::json ev = nlohmann::json::array();
        for (const auto& e : r.tree->evidence)
            if (e.pid == p.pid) ev.push_back({{"kind", e.kind}, {"detail", e.detail}});
        j["mcp"] = {
            {"server_root", r.tree->root.pid},
            {"role", r.member->role},
            {"state", api::state_name(r.tree->state)},
            {"os_orphan", r.tree->os_orphan.has_value()},
            {"session",
             r.tree->session.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.tree->session)},
            {"evidence", std::move(ev)},
            {"capabilities", nlohmann::json::parse(r.member->caps.json)},
        };
    }
    return j;
}

// ---- sleeping sessions -------------------------------------------------------------------

// Sessions whose server --idle-stop has put to sleep: no server tree to list, but a session
// that will start one on its next request. From the journal (mcp mode only; --orphans and
// --no-journal show none).
std::vector<api::LiveSession> live_sessions(const PsOptions& opt, bool mcp) {
    if (!mcp || opt.orphans || opt.no_journal) return {};
    auto live = api::live_sessions(opt.journal);
    if (!live) return {};  // the scan already warned about an unreadable journal
    return std::move(*live);
}

std::vector<api::LiveSession> sleeping_sessions(const std::vector<api::LiveSession>& live) {
    std::vector<api::LiveSession> out;
    for (const auto& s : live)
        if (s.state == api::SessionState::Sleeping) out.push_back(s);
    return out;
}

nlohmann::json sleeping_json(const api::LiveSession& s) {
    auto ref = [](const api::ProcessRef& r) {
        return nlohmann::json{{"pid", r.pid}, {"starttime", r.starttime}};
    };
    return {{"session", s.session},
            {"name", s.name},
            {"relay", ref(s.relay)},
            {"keeper", ref(s.keeper)},
            {"server_argv", s.server_argv}};
}

std::string sleeping_text(const std::vector<api::LiveSession>& sleeping) {
    std::string out;
    for (const auto& s : sleeping)
        out += "sleeping: " + api::display_bytes(s.name) + " (session " + s.session.substr(0, 12) +
               ", relay " + std::to_string(s.relay.pid) + ", keeper " +
               std::to_string(s.keeper.pid) + "): no server runs until its next request\n";
    return out;
}

// The brokers of `run --share` and their trees (docs/SHARING.md): the broker is a live
// session's client (for a tree) or relay (for a client session), never a server tree of its
// own, so its table row would be missing; these lines say which sessions share which tree.
nlohmann::json brokers_json(const std::vector<api::ShareBroker>& brokers) {
    auto ref = [](const api::ProcessRef& r) {
        return nlohmann::json{{"pid", r.pid}, {"starttime", r.starttime}};
    };
    nlohmann::json out = nlohmann::json::array();
    for (const auto& b : brokers) {
        nlohmann::json trees = nlohmann::json::array();
        for (const auto& t : b.trees) {
            nlohmann::json clients = nlohmann::json::array();
            for (const auto& c : t.clients)
                clients.push_back({{"session", c.session}, {"client", ref(c.client)}});
            trees.push_back({{"session", t.tree.session},
                             {"name", t.tree.name},
                             {"relay", ref(t.tree.relay)},
                             {"server", ref(t.tree.server)},
                             {"clients", std::move(clients)}});
        }
        out.push_back({{"broker", ref(b.broker)}, {"trees", std::move(trees)}});
    }
    return out;
}

std::string brokers_text(const std::vector<api::ShareBroker>& brokers) {
    std::string out;
    for (const auto& b : brokers) {
        out += "broker " + std::to_string(b.broker.pid) +
               " (run --share): " + std::to_string(b.trees.size()) + " shared tree(s)\n";
        for (const auto& t : b.trees) {
            out += "  tree " + t.tree.session.substr(0, 12) + " " +
                   api::display_bytes(t.tree.name) + " (run " + std::to_string(t.tree.relay.pid) +
                   ", server " + std::to_string(t.tree.server.pid) + "): ";
            if (t.clients.empty()) out += "no client joined, lingering";
            for (size_t i = 0; i < t.clients.size(); ++i)
                out += (i ? ", " : "") + std::string("session ") +
                       t.clients[i].session.substr(0, 12) + " (client " +
                       std::to_string(t.clients[i].client.pid) + ")";
            out += "\n";
        }
    }
    return out;
}

// ---- selection -------------------------------------------------------------------------

struct Selection {
    std::vector<const ProcessInfo*> procs;
    std::string error;  // non-empty: nothing to show, say why
};

bool tree_selected(const api::ServerTree& t, const PsOptions& opt) {
    if (opt.orphans && t.state != api::ServerState::LogicalOrphan && !t.os_orphan) return false;
    return true;
}

// The same process as `id`: the pid and its starttime (a recycled pid is another process).
const ProcessInfo* find_exact(const api::Inventory& inv, const api::ProcessRef& id) {
    const ProcessInfo* p = inv.find(id.pid);
    return p && p->starttime == id.starttime ? p : nullptr;
}

Selection select_mcp(const api::Inventory& inv, const PsOptions& opt) {
    Selection s;
    uid_t me = ::getuid();
    for (const auto& t : inv.servers) {
        if (!tree_selected(t, opt)) continue;
        const ProcessInfo* root = find_exact(inv, t.root);
        if (!opt.all && root && root->uid.value_or(static_cast<uid_t>(-1)) != me) continue;
        for (const auto& m : t.members)
            if (const ProcessInfo* p = inv.find(m.id.pid)) s.procs.push_back(p);
    }
    if (!opt.pids.empty())
        std::erase_if(s.procs, [&](const ProcessInfo* p) {
            return std::find(opt.pids.begin(), opt.pids.end(), p->pid) == opt.pids.end();
        });
    return s;
}

Selection select(const api::Inventory& inv, const PsOptions& opt) {
    Selection s;
    if (opt.descendants_of) {
        if (!inv.find(*opt.descendants_of)) {
            s.error = "no process " + std::to_string(*opt.descendants_of);
            return s;
        }
        s.procs = inv.descendants(*opt.descendants_of);
    } else {
        for (const ProcessInfo& p : inv.processes)
            s.procs.push_back(&p);
    }
    if (!opt.pids.empty()) {
        std::erase_if(s.procs, [&](const ProcessInfo* p) {
            return std::find(opt.pids.begin(), opt.pids.end(), p->pid) == opt.pids.end();
        });
        if (s.procs.empty() && !opt.descendants_of)
            s.error = opt.pids.size() == 1 ? "no process " + std::to_string(opt.pids[0])
                                           : std::string("none of the given processes exist");
    }
    // Naming processes (--pid, --descendants-of) shows them whoever owns them; otherwise
    // only the invoking user's unless --all.
    if (!opt.all && opt.pids.empty() && !opt.descendants_of) {
        uid_t me = ::getuid();
        std::erase_if(s.procs, [me](const ProcessInfo* p) {
            return p->uid.value_or(static_cast<uid_t>(-1)) != me;
        });
    }
    std::sort(s.procs.begin(), s.procs.end(),
              [](const ProcessInfo* a, const ProcessInfo* b) { return a->pid < b->pid; });
    return s;
}

// Rows in pid order, or with --tree in depth-first order under the shown roots (a process
// whose parent is not shown is a root). Parent links are the scan's children links, so a
// "child" older than its parent (a recycled pid) is not drawn under it.
std::vector<PsRow> rows(const api::Inventory& inv, const std::vector<const ProcessInfo*>& procs,
                        bool tree) {
    std::vector<PsRow> out;
    out.reserve(procs.size());
    auto add = [&](const ProcessInfo* p, int depth) {
        PsRow r{p, depth};
        r.tree = inv.tree_of(p->pid);
        if (r.tree) r.member = r.tree->member(p->pid);
        if (!r.member) r.tree = nullptr;  // a supervisor: not a server row
        out.push_back(std::move(r));
    };
    if (!tree) {
        for (const ProcessInfo* p : procs)
            add(p, 0);
        return out;
    }
    std::unordered_set<pid_t> shown;
    for (const ProcessInfo* p : procs)
        shown.insert(p->pid);
    std::unordered_set<pid_t> placed;
    std::function<void(const ProcessInfo*, int)> walk = [&](const ProcessInfo* p, int depth) {
        if (!placed.insert(p->pid).second) return;
        add(p, depth);
        for (pid_t c : p->children)
            if (shown.count(c))
                if (const ProcessInfo* child = inv.find(c)) walk(child, depth + 1);
    };
    for (const ProcessInfo* p : procs) {
        const ProcessInfo* parent = inv.find(p->ppid);
        // Its parent's children leave out one older than the parent (a recycled pid).
        bool parent_shown = parent && shown.count(parent->pid) &&
                            std::find(parent->children.begin(), parent->children.end(), p->pid) !=
                                parent->children.end();
        if (!parent_shown) walk(p, 0);
    }
    // Anything not reached (a cycle cannot happen in one consistent snapshot, but a racing
    // scan is not one) is shown at the top level rather than dropped.
    for (const ProcessInfo* p : procs)
        if (!placed.count(p->pid)) walk(p, 0);
    return out;
}

int run_ps(const PsOptions& opt) {
    // A negative threshold would call every live session with a journal wedged.
    if (opt.wedged_after < 0) {
        std::fprintf(stderr,
                     "mcpwarden ps: --wedged-after %lld: expected seconds of 0 or more (how long "
                     "a live session may go without traffic before it counts as wedged)\n",
                     static_cast<long long>(opt.wedged_after));
        return 2;
    }
    api::ScanOptions so;
    so.all_users = opt.all || !opt.pids.empty() || opt.descendants_of.has_value();
    so.use_journal = !opt.no_journal;
    so.journal_path = opt.journal;
    so.wedged_after = std::chrono::seconds(opt.wedged_after);
    auto inv = api::scan_inventory(so);
    if (!inv) {
        std::fprintf(stderr, "mcpwarden ps: %s\n", inv.error().message.c_str());
        return 1;
    }
    for (const auto& w : inv->warnings)
        std::fprintf(stderr, "mcpwarden ps: warning: %s\n", w.c_str());
    const bool mcp = mcp_mode(opt);
    Selection sel = mcp ? select_mcp(*inv, opt) : select(*inv, opt);
    if (!sel.error.empty()) {
        std::fprintf(stderr, "mcpwarden ps: %s\n", sel.error.c_str());
        return 1;
    }
    std::vector<PsRow> shown = rows(*inv, sel.procs, opt.tree);
    bool any_mcp = false, any_session = false;
    std::vector<const api::ServerTree*> trees;
    for (const PsRow& r : shown) {
        if (!r.tree) continue;
        any_mcp = true;
        any_session |= !r.tree->session.empty();
        if (std::find(trees.begin(), trees.end(), r.tree) == trees.end()) trees.push_back(r.tree);
    }

    const auto live = live_sessions(opt, mcp);
    const auto sleeping = sleeping_sessions(live);
    const auto brokers = api::share_brokers(live);
    std::string out;
    if (opt.json) {
        nlohmann::json procs = nlohmann::json::array();
        for (const PsRow& r : shown)
            procs.push_back(row_json(r, opt.tree));
        nlohmann::json doc = {
            {"schema", "mcpwarden.ps"},        {"schema_version", kSchemaVersion},
            {"observed_at", inv->observed_at}, {"boot_id", inv->boot_id},
            {"clock_ticks", inv->clock_ticks}, {"mode", mcp ? "mcp" : "processes"},
            {"processes", std::move(procs)},
        };
        nlohmann::json servers = nlohmann::json::array();
        for (const auto* t : trees)
            servers.push_back(nlohmann::json::parse(t->json));
        doc["servers"] = std::move(servers);
        if (mcp) {
            nlohmann::json asleep = nlohmann::json::array();
            for (const auto& s : sleeping)
                asleep.push_back(sleeping_json(s));
            doc["sleeping"] = std::move(asleep);
            doc["brokers"] = brokers_json(brokers);
        }
        out = doc.dump(2);
        out.push_back('\n');
    } else {
        std::vector<PsColumn> cols = mcp ? mcp_columns(opt, any_session) : columns(opt, any_mcp);
        std::vector<Column> layout;
        for (const auto& c : cols)
            layout.push_back(c.layout);
        Table tbl(std::move(layout));
        for (const PsRow& r : shown) {
            std::vector<std::string> cells;
            cells.reserve(cols.size());
            for (const auto& c : cols)
                cells.push_back(c.text(r));
            tbl.add_row(std::move(cells));
        }
        out = tbl.render(opt.wide ? 0 : output_width(STDOUT_FILENO));
        if (mcp && shown.empty())
            out = opt.orphans        ? "no orphaned MCP servers found\n"
                  : sleeping.empty() ? "no MCP servers found\n"
                                     : "no MCP servers running\n";
        out += sleeping_text(sleeping);
        out += brokers_text(brokers);
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

const Command ps_cmd(20, [](CLI::App& app) {
    auto opt = std::make_shared<PsOptions>();
    auto* sub = app.add_subcommand(
        "ps", "List MCP servers (default) or every process, from one scan (table or JSON)");
    sub->add_flag("--mcp", opt->mcp, "MCP server trees only, with state and evidence (default)");
    sub->add_flag("-a,--all", opt->all,
                  "Every process of every user (with --mcp: every user's MCP servers)");
    sub->add_flag("--orphans", opt->orphans,
                  "Only MCP trees that are logical orphans or carry the os-orphan clue");
    sub->add_option("--journal", opt->journal, "Journal to read sessions from");
    sub->add_flag("--no-journal", opt->no_journal, "Do not read the journal");
    sub->add_option("--wedged-after", opt->wedged_after,
                    "Seconds without traffic after which a live session counts as wedged")
        ->default_val(900);
    sub->add_flag("-t,--tree", opt->tree, "Indent children under their parents");
    sub->add_flag("--json", opt->json, "JSON output (schema: docs/ps-json.md)");
    sub->add_flag("-w,--wide", opt->wide, "Never cut the command column");
    sub->add_option("-p,--pid", opt->pids, "Only these processes (any user)")->delimiter(',');
    sub->add_option("--descendants-of", opt->descendants_of,
                    "Only the descendants of this process, by ppid links (any user)");
    return Bound{sub, [opt] { return run_ps(*opt); }};
});

}  // namespace
}  // namespace warden::cli
