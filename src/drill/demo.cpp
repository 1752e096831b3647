#include "drill/demo.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>

#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "drill/tagged.hpp"
#include "sys/fd.hpp"
#include "sys/pidfd.hpp"

namespace warden::drill {
namespace {

bool executable(const std::string& p) {
    return ::access(p.c_str(), X_OK) == 0;
}

// `name` resolved in PATH, or "".
std::string in_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    std::stringstream ss(path ? path : "/usr/local/bin:/usr/bin:/bin");
    std::string dir;
    while (std::getline(ss, dir, ':'))
        if (!dir.empty() && executable(dir + "/" + name)) return dir + "/" + name;
    return {};
}

// What `npx --offline` resolves server-everything with, without starting it: `-p PKG -- true`
// puts the package's bin on PATH and runs `true`, so that exit 0 means npx found the package
// in the npm cache or a node_modules above the working directory, with no download.
// Bounded: a child still running after kNpxProbeMs is SIGKILLed with its process group.
constexpr int kNpxProbeMs = 30000;

bool npx_resolves_offline(const std::string& npx, const std::string& package) {
    pid_t pid = ::fork();
    if (pid < 0) return false;
    if (pid == 0) {
        ::setpgid(0, 0);
        int null = ::open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            ::dup2(null, STDIN_FILENO);
            ::dup2(null, STDOUT_FILENO);
            ::dup2(null, STDERR_FILENO);
        }
        ::execl(npx.c_str(), "npx", "--offline", "--yes", "-p", package.c_str(), "--", "true",
                static_cast<char*>(nullptr));
        ::_exit(127);
    }
    ::setpgid(pid, pid);
    auto pidfd = Pidfd::open(pid);
    bool exited = pidfd && pidfd->wait_exit(kNpxProbeMs).value_or(false);
    if (!exited) ::kill(-pid, SIGKILL);  // its own group: npx, npm and what they started
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    return exited && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

DemoRow fixture_row(const DemoOptions& o, const std::string& server, const std::string& about,
                    const std::string& shape) {
    DemoRow r;
    r.server = server;
    r.about = about;
    r.command = {o.fixture, "--shape", shape, "--on-eof", "exit"};
    r.call = "tools/call sleep";
    return r;
}

std::string cell_procs(const TrialResult& t) {
    return std::to_string(t.left.size());
}
std::string cell_mb(const TrialResult& t) {
    return t.left.empty() ? "0" : format_mb(t.left_mb);
}
std::string cell_port(const TrialResult& t) {
    return t.ports.empty() ? "-" : t.port_held ? "held" : "free";
}
std::string cell_released(const TrialResult& t) {
    return format_ms(t.released_ms);
}

// Right-aligns `s` in `w` columns, coloured red when `bad`, green when `good`.
std::string cell(bool color, const std::string& s, size_t w, bool bad, bool good) {
    std::string padded = s.size() >= w ? s : std::string(w - s.size(), ' ') + s;
    return bad ? paint(color, "31", padded) : good ? paint(color, "32", padded) : padded;
}

std::string side(bool color, const std::optional<TrialResult>& t) {
    if (!t) return fmt::format("{:>27}", "-");
    if (!t->error.empty()) return paint(color, "31", fmt::format("{:>27}", "error"));
    const bool leak = !t->left.empty();
    return cell(color, cell_procs(*t), 5, leak, !leak) + " " +
           cell(color, cell_mb(*t), 5, leak, !leak) + " " +
           cell(color, cell_port(*t), 5, t->port_held, !t->ports.empty() && !t->port_held) + " " +
           cell(color, cell_released(*t), 9, t->released_ms < 0, t->released_ms >= 0);
}

std::string fate_line(const TrialResult& t) {
    std::string s = "server " + t.server_fate;
    auto add = [&](int n, const char* what) {
        if (n) s += fmt::format("; {} helper{} {}", n, n == 1 ? "" : "s", what);
    };
    add(t.helpers_eof, "ended after EOF");
    add(t.helpers_term, "needed SIGTERM");
    add(t.helpers_kill, "needed SIGKILL");
    return s;
}

}  // namespace

Result<NodeServer> find_server_everything() {
    const std::string package = "@modelcontextprotocol/server-everything";
    if (in_path("node").empty())
        return Error::msg("Node.js (node) is not on PATH; server-everything needs it");
    NodeServer s;
    if (std::string bin = in_path("mcp-server-everything"); !bin.empty()) {
        s.command = {bin, "stdio"};
        return s;
    }
    std::string npx = in_path("npx");
    if (npx.empty())
        return Error::msg(
            "server-everything is not installed: no mcp-server-everything on PATH "
            "and no npx (npm install -g " +
            package + ")");
    if (!npx_resolves_offline(npx, package))
        return Error::msg(
            "server-everything is not installed: no mcp-server-everything on PATH, "
            "and `npx --offline` cannot resolve " +
            package + " (npm install -g " + package + ")");
    // --offline: what npx found without the network is what runs; the demo downloads nothing.
    s.command = {"npx", "--offline", "--yes", package, "stdio"};
    return s;
}

bool DemoResult::ok() const {
    bool ran = false;
    for (const auto& r : rows) {
        if (!r.skipped.empty()) continue;
        if (!r.with || !r.with->contained()) return false;
        if (r.without && !r.without->clean_after) return false;
        ran = true;
    }
    return ran && verified && verify_ok;
}

std::string DemoResult::render(bool color) const {
    auto bold = [&](const std::string& s) { return paint(color, "1", s); };
    std::string out;
    out += bold("mcpwarden demo: an MCP client is SIGKILLed with a tool call in flight") + "\n\n";
    out += fmt::format("{:<20}  {:^27}  {:^27}\n", "", "without mcpwarden", "with mcpwarden");
    const std::string head =
        fmt::format("{:>5} {:>5} {:>5} {:>9}", "procs", "MB", "port", "released");
    out += fmt::format("{:<20}  {}  {}\n", "server tree", head, head);
    for (const auto& r : rows) {
        if (!r.skipped.empty()) {
            out += fmt::format("{:<20}  skipped: {}\n", r.server, r.skipped.substr(0, 80 - 31));
            continue;
        }
        out += fmt::format("{:<20}  {}  {}\n", r.server.substr(0, 20), side(color, r.without),
                           side(color, r.with));
    }
    out +=
        "\nprocs/MB/port: what was still running, and whether its TCP port was still\n"
        "held, 3 s after the kill (eof-grace + term-grace: the time mcpwarden gives a\n"
        "tree before SIGKILL); released: every process gone and every port bindable.\n";

    out += "\n" + bold("What happened with mcpwarden") + "\n";
    for (const auto& r : rows) {
        if (!r.skipped.empty() || !r.with) continue;
        if (!r.with->error.empty()) {
            out += fmt::format("  {}: error: {}\n", r.server, r.with->error);
            continue;
        }
        out += fmt::format("  {}: {}\n", r.server, fate_line(*r.with));
    }

    // The journal excerpt of the richest supervised session: the one that needed SIGKILL.
    const DemoRow* shown = nullptr;
    for (const auto& r : rows)
        if (r.with && r.with->journal && !r.with->journal->excerpt.empty() &&
            (!shown || r.with->helpers_kill > shown->with->helpers_kill))
            shown = &r;
    if (shown) {
        out += "\n" +
               bold(fmt::format("Journal, {} (session {})", shown->server,
                                shown->with->tag.substr(0, 16))) +
               "\n";
        for (const auto& line : shown->with->journal->excerpt)
            out += "  " + (line.size() > 76 ? line.substr(0, 75) + "~" : line) + "\n";
    }

    out += "\n" + bold("Checks") + "\n";
    int abandoned = 0, calls = 0, ordered = 0, sessions = 0, cleaned = 0, leftovers = 0;
    bool clean = true;
    for (const auto& r : rows) {
        if (r.with && r.with->journal) {
            ++sessions;
            if (r.with->journal->abandoned) {
                ++calls;
                abandoned += *r.with->journal->abandoned;
            }
            ordered += r.with->journal->order_ok;
        }
        for (const auto* t : {&r.without, &r.with})
            if (*t) {
                cleaned += (*t)->cleaned_up;
                clean = clean && (*t)->clean_after;
                if ((*t)->mode == Mode::direct) leftovers += static_cast<int>((*t)->left.size());
            }
    }
    auto check = [&](bool ok, const std::string& what) {
        out += "  " + (ok ? paint(color, "32", "ok  ") : paint(color, "31", "FAIL")) + " " + what +
               "\n";
    };
    check(
        calls > 0 && abandoned == calls,
        fmt::format("in-flight call on record as abandoned: {} of {} sessions", abandoned, calls));
    check(sessions > 0 && ordered == sessions,
          fmt::format("snapshot -> signal -> exit in order: {} of {} sessions", ordered, sessions));
    check(verified && verify_ok, "audit verify: " + (verified ? verify_summary : "not run"));
    check(clean, fmt::format("nothing left: {} leftover(s) without mcpwarden killed by identity",
                             cleaned));
    (void)leftovers;

    // A temporary journal is kept only when the demo failed: a command to read one that is
    // removed once this text is printed would not work.
    if (journal_temporary && ok()) {
        out += "\njournal: temporary, removed (mcpwarden demo --journal PATH keeps one)\n";
    } else {
        out += "\njournal: " + journal_path + "\n";
        out += "  mcpwarden journal sessions --journal " + journal_path + "\n";
    }
    out += (ok() ? paint(color, "32", "mcpwarden left nothing behind.")
                 : paint(color, "31", "mcpwarden left something behind: see above.")) +
           "\n";
    return out;
}

nlohmann::json DemoResult::to_json() const {
    nlohmann::json rs = nlohmann::json::array();
    for (const auto& r : rows) {
        nlohmann::json j{
            {"server", r.server}, {"about", r.about}, {"command", r.command}, {"call", r.call}};
        if (!r.skipped.empty()) j["skipped"] = r.skipped;
        if (r.without) j["without"] = drill::to_json(*r.without);
        if (r.with) j["with"] = drill::to_json(*r.with);
        rs.push_back(j);
    }
    // "demo": 1 is what saved runs of before the schema fields carry; kept for their readers.
    return {{"schema", "mcpwarden.demo"},
            {"schema_version", 1},
            {"demo", 1},
            {"rows", rs},
            {"journal",
             {{"path", journal_path},
              {"temporary", journal_temporary},
              {"verify",
               {{"ran", verified},
                {"ok", verify_ok},
                {"exit_code", verify_exit},
                {"records", verify_records},
                {"summary", verify_summary}}}}},
            {"ok", ok()}};
}

Result<DemoResult> DemoResult::from_json(const nlohmann::json& j) {
    if (!j.is_object() || j.value("demo", 0) != 1 || !j.contains("rows"))
        return Error::msg("not the JSON of `mcpwarden demo --json` (no \"demo\": 1 and rows)");
    DemoResult d;
    for (const auto& r : j["rows"]) {
        DemoRow row;
        row.server = r.value("server", "");
        row.about = r.value("about", "");
        row.command = r.value("command", std::vector<std::string>{});
        row.call = r.value("call", "");
        row.skipped = r.value("skipped", "");
        if (r.contains("without")) row.without = trial_from_json(r["without"]);
        if (r.contains("with")) row.with = trial_from_json(r["with"]);
        d.rows.push_back(std::move(row));
    }
    const auto& jr = j.value("journal", nlohmann::json::object());
    d.journal_path = jr.value("path", "");
    d.journal_temporary = jr.value("temporary", false);
    const auto& v = jr.value("verify", nlohmann::json::object());
    d.verified = v.value("ran", false);
    d.verify_ok = v.value("ok", false);
    d.verify_exit = v.value("exit_code", 0);
    d.verify_records = v.value("records", int64_t{0});
    d.verify_summary = v.value("summary", "");
    return d;
}

Result<DemoResult> run_demo(const DemoOptions& in) {
    DemoOptions o = in;
    if (o.fixture.empty()) o.fixture = sibling_binary("mcpwarden-fixture");
    if (!executable(o.fixture))
        return Error::msg("the fixture server " + o.fixture +
                          " is missing or not executable (it is built and installed next to "
                          "mcpwarden)");
    if (o.journal.empty()) return Error::msg("demo: no journal path");

    DemoResult d;
    d.journal_path = o.journal;
    d.journal_temporary = o.journal_temporary;
    d.rows.push_back(
        fixture_row(o, "setsid helper", "a helper that called setsid(), holding a port", "setsid"));
    d.rows.push_back(fixture_row(o, "double-forked daemon",
                                 "a daemon that double-forked away, holding a port", "doublefork"));
    d.rows.push_back(fixture_row(o, "helper ignores TERM",
                                 "a helper that ignores SIGTERM, holding a port", "ignore-term"));
    DemoRow everything;
    everything.server = "server-everything";
    everything.about = "the reference npm server, a long operation in flight";
    everything.call = "tools/call trigger-long-running-operation";
    if (!o.node) {
        everything.skipped = "not asked for (--no-node)";
    } else if (auto s = find_server_everything(); !s) {
        everything.skipped = s.error().message;
    } else {
        everything.command = s->command;
    }
    d.rows.push_back(everything);

    for (auto& row : d.rows) {
        if (row.skipped.empty() && interrupted()) row.skipped = "interrupted";
        if (!row.skipped.empty()) {
            if (o.progress) o.progress(row.server + ": skipped: " + row.skipped);
            continue;
        }
        DrillOptions dopt;
        dopt.command = row.command;
        dopt.crash_at = CrashAt::InFlight;
        dopt.compare_direct = true;
        dopt.journal = o.journal;
        dopt.verify = false;
        dopt.mcpwarden = o.mcpwarden;
        dopt.eof_grace = o.eof_grace;
        dopt.term_grace = o.term_grace;
        dopt.label = row.server;
        dopt.progress = o.progress;
        if (row.server == "server-everything") {
            // Read-only (readOnlyHint): the drill fires no writes.
            dopt.tool = "trigger-long-running-operation";
            dopt.args_json = R"({"duration":60,"steps":2})";
            dopt.label = "server-everything";
        } else {
            dopt.tool = "sleep";
            dopt.args_json = R"({"seconds":60})";
        }
        auto r = run_drill(dopt);
        if (!r) {
            row.skipped = r.error().message;
            continue;
        }
        for (auto& t : r->trials)
            (t.mode == Mode::shim ? row.with : row.without) = t;
    }

    verify_journal(o.journal, d);
    return d;
}

}  // namespace warden::drill
