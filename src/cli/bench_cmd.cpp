// `mcpwarden bench teardown`: reproduces the teardown study with the fixture (see
// include/mcpwarden/drill.hpp). Progress on stderr, the table (or JSON) on stdout.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "command.hpp"
#include "mcpwarden/drill.hpp"

namespace warden::cli {
namespace {

struct BenchArgs {
    api::TeardownBenchOptions opts;
    bool json = false;
    std::string svg;
};

const Command bench_cmd(900, [](CLI::App& app) {
    static BenchArgs a;
    auto* sub = app.add_subcommand("bench", "Measure mcpwarden against the baselines it replaces");
    sub->require_subcommand(1);
    auto* td = sub->add_subcommand(
        "teardown", "Orphans and port release of each teardown strategy on each tree shape");
    td->add_option("--trials", a.opts.trials, "Trials per strategy and shape")
        ->check(CLI::Range(1, 1000));
    td->add_option("--shapes", a.opts.shapes, "Shapes (default: all)")->delimiter(',');
    td->add_option("--strategies", a.opts.strategies, "Strategies (default: all)")->delimiter(',');
    td->add_option("--grace-ms", a.opts.grace_ms, "Grace window of the graceful strategies")
        ->check(CLI::Range(0, 60000));
    td->add_flag("--json", a.json, "JSON instead of the table");
    td->add_option("--svg", a.svg, "Also draw port-release times into this SVG file");
    td->add_option("--fixture", a.opts.fixture, "Path of mcpwarden-fixture");
    return Bound{
        sub, [td] {
            if (!td->parsed()) return 2;
            a.opts.progress = [](const std::string& line) {
                std::fprintf(stderr, "%s\n", line.c_str());
            };
            a.opts.command = "mcpwarden bench teardown --trials " + std::to_string(a.opts.trials);
            auto r = api::run_teardown_bench(a.opts);
            if (!r) {
                std::fprintf(stderr, "mcpwarden bench teardown: %s\n", r.error().message.c_str());
                return 1;
            }
            std::string out = a.json ? r->json + "\n" : r->table;
            std::fwrite(out.data(), 1, out.size(), stdout);
            if (!a.svg.empty()) {
                std::ofstream f(a.svg);
                f << r->svg;
                if (!f) {
                    std::fprintf(stderr, "mcpwarden bench teardown: cannot write %s\n",
                                 a.svg.c_str());
                    return 1;
                }
            }
            if (int n = r->errors) {
                std::fprintf(stderr,
                             "mcpwarden bench teardown: %d trial(s) could not be measured "
                             "(see the table)\n",
                             n);
                return 1;
            }
            return 0;
        }};
});

}  // namespace
}  // namespace warden::cli
