// `mcpwarden bench teardown`: reproduces the teardown study with the fixture (see
// src/drill/teardown_bench.hpp). Progress on stderr, the table (or JSON) on stdout.
#include <limits.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "drill/teardown_bench.hpp"

namespace warden::cli {
namespace {

// mcpwarden-fixture next to this binary (the build tree), else where the install puts it:
// PREFIX/libexec/mcpwarden/ beside PREFIX/bin/.
std::string default_fixture() {
    char buf[PATH_MAX];
    ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n <= 0) return "mcpwarden-fixture";
    std::string self(buf, static_cast<size_t>(n));
    std::string dir = self.substr(0, self.rfind('/') + 1);
    std::string sibling = dir + "mcpwarden-fixture";
    std::string installed = dir + "../libexec/mcpwarden/mcpwarden-fixture";
    if (::access(sibling.c_str(), X_OK) != 0 && ::access(installed.c_str(), X_OK) == 0)
        return installed;
    return sibling;
}

struct BenchArgs {
    drill::TeardownBenchOptions opts;
    bool json = false;
    std::string svg;
    std::string argv_text;
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
            if (a.opts.fixture.empty()) a.opts.fixture = default_fixture();
            a.opts.progress = [](const std::string& line) {
                std::fprintf(stderr, "%s\n", line.c_str());
            };
            auto r = drill::run_teardown_bench(a.opts);
            if (!r) {
                std::fprintf(stderr, "mcpwarden bench teardown: %s\n", r.error().message.c_str());
                return 1;
            }
            r->command = "mcpwarden bench teardown --trials " + std::to_string(a.opts.trials);
            std::string out = a.json ? r->to_json() + "\n" : r->render_table();
            std::fwrite(out.data(), 1, out.size(), stdout);
            if (!a.svg.empty()) {
                std::ofstream f(a.svg);
                f << r->render_svg();
                if (!f) {
                    std::fprintf(stderr, "mcpwarden bench teardown: cannot write %s\n",
                                 a.svg.c_str());
                    return 1;
                }
            }
            if (int n = r->errors()) {
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
