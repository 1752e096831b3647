// `mcpwarden ps`: the processes on this machine from one /proc scan, as a table sized to
// the terminal or as JSON (schema in docs/ps-json.md).
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
#include "proc/process_table.hpp"

namespace warden::cli {
namespace {

constexpr int kSchemaVersion = 1;

struct PsOptions {
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
};

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

std::vector<PsColumn> columns(const PsOptions& opt) {
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
    // Inventory columns (state, ports, client) go here, before the command.
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
    return j;
}

// ---- selection -------------------------------------------------------------------------

struct Selection {
    std::vector<const Process*> procs;
    std::string error;  // non-empty: nothing to show, say why
};

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
std::vector<PsRow> rows(const ProcessTable& t, const std::vector<const Process*>& procs,
                        bool tree) {
    std::vector<PsRow> out;
    out.reserve(procs.size());
    auto add = [&](const Process* p, int depth) { out.push_back({p, user_name(p->uid), depth}); };
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
    ProcessTable table = ProcessTable::scan(kBasic);
    Selection sel = select(table, opt);
    if (!sel.error.empty()) {
        std::fprintf(stderr, "mcpwarden ps: %s\n", sel.error.c_str());
        return 1;
    }
    std::vector<PsRow> shown = rows(table, sel.procs, opt.tree);

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
            {"processes", std::move(procs)},
        };
        out = doc.dump(2);
        out.push_back('\n');
    } else {
        std::vector<PsColumn> cols = columns(opt);
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
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
}

const Command ps_cmd(20, [](CLI::App& app) {
    auto opt = std::make_shared<PsOptions>();
    auto* sub = app.add_subcommand("ps", "List processes from one /proc scan (table or JSON)");
    sub->add_flag("-a,--all", opt->all, "Every user's processes, not only yours");
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
