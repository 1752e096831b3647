// mcpwarden: keeps MCP stdio servers on a leash. See README.md and `mcpwarden --help`.
#include <algorithm>

#include "command.hpp"
#include "version_text.hpp"

namespace warden::cli {
namespace {
struct Registered {
    int order;
    Command::Setup setup;
};
std::vector<Registered>& registry() {
    static std::vector<Registered> r;
    return r;
}
}  // namespace

Command::Command(int order, Setup setup) {
    registry().push_back({order, std::move(setup)});
}

}  // namespace warden::cli

int main(int argc, char** argv) {
    using namespace warden::cli;
    CLI::App app{"mcpwarden: keeps MCP stdio servers on a leash", "mcpwarden"};
    app.require_subcommand(1);
    app.set_version_flag("--version", version_text());

    auto& reg = registry();
    std::stable_sort(reg.begin(), reg.end(), [](auto& a, auto& b) { return a.order < b.order; });
    std::vector<Bound> bound;
    for (auto& r : reg)
        bound.push_back(r.setup(app));
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        // --help / --version exit 0; every usage error exits 2, whatever CLI11's own code.
        int code = app.exit(e);
        return code == 0 ? 0 : 2;
    }
    for (auto& b : bound)
        if (b.sub->parsed()) return b.run();
    return 2;
}
