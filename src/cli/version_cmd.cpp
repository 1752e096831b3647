// `mcpwarden version`: version and build options, also available as --version.
#include <cstdio>

#include "cli/command.hpp"

namespace warden::cli {
namespace {
const Command version_cmd(1000, [](CLI::App& app) {
    auto* sub = app.add_subcommand("version", "Print version and build options");
    return Bound{sub, [] {
                     std::printf("mcpwarden %s\n", WARDEN_VERSION);
#ifdef WARDEN_SANITIZED
                     std::printf("build: asan+ubsan\n");
#endif
                     return 0;
                 }};
});
}  // namespace
}  // namespace warden::cli
