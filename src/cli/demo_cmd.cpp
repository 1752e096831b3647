// `mcpwarden demo`: the crash drill on servers known to leak, without and with mcpwarden,
// side by side (src/drill/demo.hpp, docs/DRILL.md). Progress on stderr; the table (or
// --json) on stdout. Exit 0 when mcpwarden left nothing behind in any row and the journal
// verifies; 1 otherwise; 2 on usage errors; 130 when interrupted.
#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "cli/table.hpp"
#include "cli/temp_journal.hpp"
#include "drill/demo.hpp"

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

int print(const drill::DemoResult& d, bool json) {
    std::string out = json ? d.to_json().dump(2) + "\n" : d.render(use_color());
    std::fwrite(out.data(), 1, out.size(), stdout);
    return d.ok() ? 0 : 1;
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
        auto j = nlohmann::json::parse(ss.str(), nullptr, false);
        auto d = drill::DemoResult::from_json(j);
        if (!d) {
            std::fprintf(stderr, "mcpwarden demo: %s: %s\n", a.from.c_str(),
                         d.error().message.c_str());
            return 2;
        }
        return print(*d, a.json);
    }
    drill::DemoOptions o;
    o.fixture = a.fixture;
    o.node = !a.no_node;
    o.journal = a.journal.empty() ? temp_journal("demo") : a.journal;
    if (o.journal.empty()) {
        std::fprintf(stderr, "mcpwarden demo: cannot create a temporary journal directory\n");
        return 2;
    }
    std::fprintf(stderr, "mcpwarden demo: journal %s%s\n", o.journal.c_str(),
                 a.journal.empty() ? " (temporary)" : "");
    o.progress = [](const std::string& line) { std::fprintf(stderr, "  %s\n", line.c_str()); };
    drill::handle_interrupts();
    auto d = drill::run_demo(o);
    if (!d) {
        std::fprintf(stderr, "mcpwarden demo: %s\n", d.error().message.c_str());
        return 2;
    }
    int rc = print(*d, a.json);
    return drill::interrupted() ? 130 : rc;
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
