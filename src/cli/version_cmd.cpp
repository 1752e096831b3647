// `mcpwarden version`: version and build options, also available as --version.
#include <cstdio>

#include "command.hpp"
#include "mcpwarden/mcpwarden.hpp"
#include "version_text.hpp"

namespace warden::cli {

// "mcpwarden 0.1.0\nbuild: sanitizers=off libsystemd=on\nlayers: ..." — the same text for
// `version` and `--version`, from the library's build_info() so the two cannot disagree.
std::string version_text() {
    api::BuildInfo b = api::build_info();
    auto on = [](bool v) { return v ? "on" : "off"; };
    std::string s = "mcpwarden " + b.version + "\n";
    s += std::string("build: sanitizers=") + (b.sanitizers ? "asan+ubsan" : "off") +
         " libsystemd=" + on(b.libsystemd) + "\n";
    s += std::string("layers compiled in: subreaper=on pidfd=") + on(b.pidfd) +
         " clone3=" + on(b.clone3) + " cgroup=" + on(b.cgroup) + " pidns=" + on(b.pidns) +
         " (each is probed at run time: `mcpwarden run --explain`)";
    return s;
}

namespace {
const Command version_cmd(1000, [](CLI::App& app) {
    auto* sub = app.add_subcommand("version", "Print version and build options");
    return Bound{sub, [] {
                     std::printf("%s\n", version_text().c_str());
                     return 0;
                 }};
});
}  // namespace
}  // namespace warden::cli
