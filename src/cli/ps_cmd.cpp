// `mcpwarden ps`: the MCP servers on this machine (default, `--mcp`) or every process
// (`--all`, `--pid`, `--descendants-of`), from one inventory scan, as a table sized to the
// terminal or as JSON (schema in docs/ps-json.md).
//
// Rows and columns are kept apart on purpose: a PsRow is one process plus what the command
// derived for it (user name, tree depth), and each column is a (header, text, json) triple
// over a row. Inventory (issue [5]) adds its state and capability columns by extending
// PsRow and appending to the column list; the filters, the tree and both output formats
// stay as they are.
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/table.hpp"
#include "inventory/inventory.hpp"
#include "proc/process_table.hpp"

namespace warden::cli {
namespace {

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
    const Process* proc = nullptr;
    std::string user;
    int depth = 0;  // with --tree: distance from the row's root in the shown forest
    const inventory::ServerTree* tree = nullptr;  // the MCP server tree it belongs to
    const inventory::Member* member = nullptr;
};

bool mcp_mode(const PsOptions& opt) {
    return opt.mcp || opt.orphans || (!opt.all && opt.pids.empty() && !opt.descendants_of);
}

// ---- formatting helpers --------------------------------------------------------------

std::string user_name(uid_t uid) {
    static std::unordered_map<uid_t, std::string> cache;
    if (auto it = cache.find(uid); it != cache.end()) return it->second;
    std::string name;
    if (uid == static_cast<uid_t>(-1)) {
        name = "?";
    } else {
        passwd pw{};
        passwd* found = nullptr;
        char buf[4096];
        if (::getpwuid_r(uid, &pw, buf, sizeof buf, &found) == 0 && found)
            name = found->pw_name;
        else
            name = std::to_string(uid);
    }
    return cache.emplace(uid, name).first->second;
}

// ps-style [[dd-]hh:]mm:ss.
std::string format_etime(double seconds) {
    auto s = static_cast<long long>(seconds);
    long long d = s / 86400, h = s / 3600 % 24, m = s / 60 % 60, sec = s % 60;
    if (d) return fmt::format("{}-{:02}:{:02}:{:02}", d, h, m, sec);
    if (h) return fmt::format("{:02}:{:02}:{:02}", h, m, sec);
    return fmt::format("{:02}:{:02}", m, sec);
}

std::string format_rss(uint64_t kb) {
    if (kb < 1024) return fmt::format("{}K", kb);
    if (kb < 1024 * 1024) return fmt::format("{:.1f}M", static_cast<double>(kb) / 1024);
    return fmt::format("{:.1f}G", static_cast<double>(kb) / (1024 * 1024));
}

// The state letter plus ps's most useful modifiers: s session leader, l multi-threaded,
// + in the foreground process group of its terminal.
std::string format_stat(const Process& p) {
    std::string s(1, p.state);
    if (p.id.pid == p.sid) s += 's';
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

std::string state_cell(const inventory::ServerTree& t) {
    std::string s = inventory::state_name(t.state);
    if (t.os_orphan) s += ",os-orphan";
    return s;
}

std::string evidence_cell(const PsRow& r) {
    std::string s;
    for (const auto& e : r.tree->evidence) {
        if (e.pid != r.proc->id.pid) continue;
        std::string k = inventory::evidence_name(e.kind);
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
    return fmt::format("{}{}{}", c.id.pid, c.alive ? "" : "(gone)", comm.empty() ? "" : " " + comm);
}

std::string ports_cell(const inventory::Capabilities& c) {
    std::string s;
    for (const auto& l : c.listening) {
        if (!s.empty()) s += ',';
        s += fmt::format("{}{}", l.udp ? "u" : "", l.port);
    }
    if (!c.connections.empty())
        s += fmt::format("{}{}>", s.empty() ? "" : " ", c.connections.size());
    return s.empty() ? "-" : s;
}

std::string creds_cell(const inventory::Capabilities& c) {
    if (c.credential_env.empty()) return "-";
    std::string s = c.credential_env.front();
    if (c.credential_env.size() > 1) s += fmt::format("+{}", c.credential_env.size() - 1);
    return s;
}

std::vector<PsColumn> mcp_columns(const PsOptions& opt, bool sessions) {
    using A = Column::Align;
    std::vector<PsColumn> cols = {
        {{"PID", A::Right}, [](const PsRow& r) { return std::to_string(r.proc->id.pid); }},
        {{"PPID", A::Right}, [](const PsRow& r) { return std::to_string(r.proc->ppid); }},
        {{"USER", A::Left}, [](const PsRow& r) { return r.user; }},
        {{"ROLE", A::Left},
         [](const PsRow& r) { return std::string(inventory::role_name(r.member->role)); }},
        {{"STATE", A::Left}, [](const PsRow& r) { return state_cell(*r.tree); }},
        {{"CLIENT", A::Left}, client_cell},
        {{"EVIDENCE", A::Left}, evidence_cell},
    };
    if (sessions)
        cols.push_back({{"SESSION", A::Left}, [](const PsRow& r) {
                            return r.tree->session.empty()
                                       ? std::string("-")
                                       : escape_bytes(r.tree->session.substr(0, 12));
                        }});
    cols.push_back({{"PORTS", A::Left}, [](const PsRow& r) { return ports_cell(r.member->caps); }});
    cols.push_back({{"CREDS", A::Left}, [](const PsRow& r) { return creds_cell(r.member->caps); }});
    cols.push_back({{"RSS", A::Right}, [](const PsRow& r) { return format_rss(r.proc->rss_kb); }});
    cols.push_back({{"ELAPSED", A::Right},
                    [](const PsRow& r) { return format_etime(r.proc->elapsed_seconds()); }});
    bool tree = opt.tree;
    cols.push_back({{"COMMAND", A::Left, /*flexible=*/true}, [tree](const PsRow& r) {
                        std::string cmd = r.proc->display_command();
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
        {{"PID", A::Right}, num([](const Process& p) { return p.id.pid; })},
        {{"PPID", A::Right}, num([](const Process& p) { return p.ppid; })},
        {{"PGID", A::Right}, num([](const Process& p) { return p.pgid; })},
        {{"SID", A::Right}, num([](const Process& p) { return p.sid; })},
        {{"USER", A::Left}, [](const PsRow& r) { return r.user; }},
        {{"STAT", A::Left}, [](const PsRow& r) { return format_stat(*r.proc); }},
        {{"ELAPSED", A::Right},
         [](const PsRow& r) { return format_etime(r.proc->elapsed_seconds()); }},
        {{"RSS", A::Right}, [](const PsRow& r) { return format_rss(r.proc->rss_kb); }},
    };
    if (any_mcp)
        cols.push_back({{"MCP", A::Left}, [](const PsRow& r) {
                            if (!r.tree) return std::string("-");
                            return std::string(inventory::role_name(r.member->role)) + ":" +
                                   state_cell(*r.tree);
                        }});
    bool tree = opt.tree;
    cols.push_back({{"COMMAND", A::Left, /*flexible=*/true}, [tree](const PsRow& r) {
                        std::string cmd = r.proc->display_command();
                        return tree ? tree_prefix(r.depth) + cmd : cmd;
                    }});
    return cols;
}

nlohmann::json row_json(const PsRow& r, bool tree) {
    const Process& p = *r.proc;
    nlohmann::json argv = nlohmann::json::array();
    for (const auto& a : p.argv())
        argv.push_back(escape_bytes(a));
    nlohmann::json j = {
        {"pid", p.id.pid},
        {"starttime", p.id.starttime},
        {"ppid", p.ppid},
        {"pgid", p.pgid},
        {"sid", p.sid},
        {"tty_nr", p.tty_nr},
        {"uid", p.uid == static_cast<uid_t>(-1) ? nlohmann::json(nullptr) : nlohmann::json(p.uid)},
        {"user", r.user},
        {"state", std::string(1, p.state)},
        {"stat", format_stat(p)},
        {"zombie", p.zombie()},
        {"elapsed_seconds", std::round(p.elapsed_seconds() * 100) / 100},
        {"rss_kb", p.rss_kb},
        {"threads", p.threads},
        {"comm", escape_bytes(p.comm)},
        {"command", p.display_command()},
        {"argv", std::move(argv)},
    };
    if (tree) j["depth"] = r.depth;
    if (r.tree) {
        nlohmann::json ev = nlohmann::json::array();
        for (const auto& e : r.tree->evidence)
            if (e.pid == p.id.pid)
                ev.push_back({{"kind", inventory::evidence_name(e.kind)}, {"detail", e.detail}});
        j["mcp"] = {
            {"server_root", r.tree->root.pid},
            {"role", inventory::role_name(r.member->role)},
            {"state", inventory::state_name(r.tree->state)},
            {"os_orphan", r.tree->os_orphan.has_value()},
            {"session",
             r.tree->session.empty() ? nlohmann::json(nullptr) : nlohmann::json(r.tree->session)},
            {"evidence", std::move(ev)},
            {"capabilities", inventory::capabilities_json(r.member->caps)},
        };
    }
    return j;
}

// ---- selection -------------------------------------------------------------------------

struct Selection {
    std::vector<const Process*> procs;
    std::string error;  // non-empty: nothing to show, say why
};

bool tree_selected(const inventory::ServerTree& t, const PsOptions& opt) {
    if (opt.orphans && t.state != inventory::State::logical_orphan && !t.os_orphan) return false;
    return true;
}

Selection select_mcp(const inventory::Inventory& inv, const PsOptions& opt) {
    Selection s;
    uid_t me = ::getuid();
    for (const auto& t : inv.servers()) {
        if (!tree_selected(t, opt)) continue;
        const Process* root = inv.table().find(t.root);
        if (!opt.all && root && root->uid != me) continue;
        for (const auto& m : t.members)
            s.procs.push_back(m.proc);
    }
    if (!opt.pids.empty())
        std::erase_if(s.procs, [&](const Process* p) {
            return std::find(opt.pids.begin(), opt.pids.end(), p->id.pid) == opt.pids.end();
        });
    return s;
}

Selection select(const ProcessTable& t, const PsOptions& opt) {
    Selection s;
    if (opt.descendants_of) {
        const Process* root = t.find(*opt.descendants_of);
        if (!root) {
            s.error = fmt::format("no process {}", *opt.descendants_of);
            return s;
        }
        s.procs = t.descendants(root->id);
    } else {
        for (const Process& p : t.all())
            s.procs.push_back(&p);
    }
    if (!opt.pids.empty()) {
        std::erase_if(s.procs, [&](const Process* p) {
            return std::find(opt.pids.begin(), opt.pids.end(), p->id.pid) == opt.pids.end();
        });
        if (s.procs.empty() && !opt.descendants_of)
            s.error = opt.pids.size() == 1 ? fmt::format("no process {}", opt.pids[0])
                                           : std::string("none of the given processes exist");
    }
    // Naming processes (--pid, --descendants-of) shows them whoever owns them; otherwise
    // only the invoking user's unless --all.
    if (!opt.all && opt.pids.empty() && !opt.descendants_of) {
        uid_t me = ::getuid();
        std::erase_if(s.procs, [me](const Process* p) { return p->uid != me; });
    }
    std::sort(s.procs.begin(), s.procs.end(),
              [](const Process* a, const Process* b) { return a->id.pid < b->id.pid; });
    return s;
}

// Rows in pid order, or with --tree in depth-first order under the shown roots (a process
// whose parent is not shown is a root). Parent links use ProcessTable::children, so a
// "child" older than its parent (a recycled pid) is not drawn under it.
std::vector<PsRow> rows(const inventory::Inventory& inv, const std::vector<const Process*>& procs,
                        bool tree) {
    const ProcessTable& t = inv.table();
    std::vector<PsRow> out;
    out.reserve(procs.size());
    auto add = [&](const Process* p, int depth) {
        PsRow r{p, user_name(p->uid), depth};
        r.tree = inv.tree_of(p->id.pid);
        if (r.tree) r.member = r.tree->member(p->id.pid);
        if (!r.member) r.tree = nullptr;  // a supervisor: not a server row
        out.push_back(std::move(r));
    };
    if (!tree) {
        for (const Process* p : procs)
            add(p, 0);
        return out;
    }
    std::unordered_set<pid_t> shown;
    for (const Process* p : procs)
        shown.insert(p->id.pid);
    std::unordered_set<pid_t> placed;
    std::function<void(const Process*, int)> walk = [&](const Process* p, int depth) {
        if (!placed.insert(p->id.pid).second) return;
        add(p, depth);
        for (const Process* c : t.children(p->id.pid))
            if (shown.count(c->id.pid)) walk(c, depth + 1);
    };
    for (const Process* p : procs) {
        const Process* parent = t.find(p->ppid);
        bool parent_shown = parent && shown.count(parent->id.pid) &&
                            parent->id.starttime <= p->id.starttime && p->ppid != p->id.pid;
        if (!parent_shown) walk(p, 0);
    }
    // Anything not reached (a cycle cannot happen in one consistent snapshot, but a racing
    // scan is not one) is shown at the top level rather than dropped.
    for (const Process* p : procs)
        if (!placed.count(p->id.pid)) walk(p, 0);
    return out;
}

std::string iso_now() {
    timespec ts{};
    ::clock_gettime(CLOCK_REALTIME, &ts);
    tm utc{};
    ::gmtime_r(&ts.tv_sec, &utc);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &utc);
    return fmt::format("{}.{:03}Z", buf, ts.tv_nsec / 1000000);
}

int run_ps(const PsOptions& opt) {
    std::string observed_at = iso_now();
    inventory::ScanOptions so;
    so.all_users = opt.all || !opt.pids.empty() || opt.descendants_of.has_value();
    so.use_journal = !opt.no_journal;
    so.journal_path = opt.journal;
    so.wedged_after = std::chrono::seconds(opt.wedged_after);
    auto inv = inventory::Inventory::scan(so);
    if (!inv) {
        std::fprintf(stderr, "mcpwarden ps: %s\n", inv.error().message.c_str());
        return 1;
    }
    for (const auto& w : inv->warnings())
        std::fprintf(stderr, "mcpwarden ps: warning: %s\n", w.c_str());
    const ProcessTable& table = inv->table();
    const bool mcp = mcp_mode(opt);
    Selection sel = mcp ? select_mcp(*inv, opt) : select(table, opt);
    if (!sel.error.empty()) {
        std::fprintf(stderr, "mcpwarden ps: %s\n", sel.error.c_str());
        return 1;
    }
    std::vector<PsRow> shown = rows(*inv, sel.procs, opt.tree);
    bool any_mcp = false, any_session = false;
    std::vector<const inventory::ServerTree*> trees;
    for (const PsRow& r : shown) {
        if (!r.tree) continue;
        any_mcp = true;
        any_session |= !r.tree->session.empty();
        if (std::find(trees.begin(), trees.end(), r.tree) == trees.end()) trees.push_back(r.tree);
    }

    std::string out;
    if (opt.json) {
        nlohmann::json procs = nlohmann::json::array();
        for (const PsRow& r : shown)
            procs.push_back(row_json(r, opt.tree));
        nlohmann::json doc = {
            {"schema", "mcpwarden.ps"},
            {"schema_version", kSchemaVersion},
            {"observed_at", observed_at},
            {"boot_id", boot_id()},
            {"clock_ticks", ::sysconf(_SC_CLK_TCK)},
            {"mode", mcp ? "mcp" : "processes"},
            {"processes", std::move(procs)},
        };
        nlohmann::json servers = nlohmann::json::array();
        for (const auto* t : trees)
            servers.push_back(inventory::tree_json(*t));
        doc["servers"] = std::move(servers);
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
            out = opt.orphans ? "no orphaned MCP servers found\n" : "no MCP servers found\n";
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
