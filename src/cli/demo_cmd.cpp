// `mcpwarden demo`: the crash drill on servers known to leak, without and with mcpwarden,
// side by side (include/mcpwarden/drill.hpp, docs/DRILL.md). Progress on stderr; the table (or
// --json) on stdout. Exit 0 when mcpwarden left nothing behind in any row and the journal
// verifies; 1 otherwise; 2 on usage errors; 130 when interrupted.
#include <cstdio>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "mcpwarden/drill.hpp"
#include "table.hpp"
#include "temp_journal.hpp"

namespace warden::cli {
namespace {

struct DemoArgs {
    bool json = false, no_node = false;
    std::string journal, from, fixture;
};

DemoArgs& demo_args() {
    static DemoArgs a;
    return a;
}

int print(const api::DemoReport& d, bool as_json) {
    std::string out = as_json ? d.json + "\n" : d.text;
    std::fwrite(out.data(), 1, out.size(), stdout);
    return d.exit_code;
}

int demo_main() {
    auto& a = demo_args();
    if (!a.from.empty()) {
        std::ifstream f(a.from);
        std::stringstream ss;
        ss << f.rdbuf();
        if (!f) {
            std::fprintf(stderr, "mcpwarden demo: cannot read %s\n", a.from.c_str());
            return 2;
        }
        auto d = api::demo_from_json(ss.str(), use_color());
        if (!d) {
            std::fprintf(stderr, "mcpwarden demo: %s: %s\n", a.from.c_str(),
                         d.error().message.c_str());
            return 2;
        }
        return print(*d, a.json);
    }
    api::DemoOptions o;
    o.fixture = a.fixture;
    o.node = !a.no_node;
    std::optional<TempJournal> temp;
    if (a.journal.empty()) temp.emplace("demo");
    o.journal = temp ? temp->path() : a.journal;
    o.journal_temporary = temp.has_value();
    if (o.journal.empty()) {
        std::fprintf(stderr, "mcpwarden demo: cannot create a temporary journal directory\n");
        return 2;
    }
    std::fprintf(stderr, "mcpwarden demo: journal %s%s\n", o.journal.c_str(),
                 temp ? " (temporary: removed afterwards unless the demo fails)" : "");
    o.progress = [](const std::string& line) { std::fprintf(stderr, "  %s\n", line.c_str()); };
    o.handle_interrupts = true;
    o.color = use_color();
    auto d = api::run_demo(o);
    if (!d) {
        std::fprintf(stderr, "mcpwarden demo: %s\n", d.error().message.c_str());
        return 2;
    }
    int rc = print(*d, a.json);
    if (temp && rc == 1) {
        temp->keep();
        std::fprintf(stderr, "mcpwarden demo: temporary journal kept: %s\n", o.journal.c_str());
    }
    return rc;
}

const Command demo_cmd(5, [](CLI::App& app) {
    auto& a = demo_args();
    auto* sub = app.add_subcommand(
        "demo",
        "See what mcpwarden does: SIGKILL an MCP client with a call in flight, without and "
        "with mcpwarden, on servers known to leak (about 20 s)");
    sub->add_flag("--json", a.json, "The same numbers as JSON on stdout");
    sub->add_option("--journal", a.journal,
                    "Journal to record into (default: a new temporary one)");
    sub->add_flag("--no-node", a.no_node, "Skip server-everything even when Node.js is installed");
    sub->add_option("--from", a.from,
                    "Print the table (or --json) of a saved `demo --json` run instead of running");
    sub->add_option("--fixture", a.fixture,
                    "Path of mcpwarden-fixture (default: next to mcpwarden)");
    return Bound{sub, demo_main};
});

}  // namespace
}  // namespace warden::cli
