// `mcpwarden uninstall [--purge] [--dry-run]`: take mcpwarden back out of every client
// config that `wrap` changed, then remove its backups and record; with --purge also the
// journal and the settings file. Run it before removing the package: a config that still
// runs mcpwarden stops working when the binary goes. Exit codes: 0 ok, 1 a file could not
// be unwrapped (its backup and record are kept), 2 usage or a state that cannot be read.
#include <cstdio>
#include <memory>
#include <string>

#include "command.hpp"
#include "mcpwarden/clients.hpp"

namespace warden::cli {
namespace {

struct UninstallOpts {
    bool purge = false;
    bool dry_run = false;
};

int run_uninstall(const UninstallOpts& o) {
    auto r = api::uninstall({.purge = o.purge, .dry_run = o.dry_run});
    if (!r) {
        std::fprintf(stderr, "mcpwarden uninstall: %s\n", r.error().message.c_str());
        return 2;
    }
    FILE* report = o.dry_run ? stderr : stdout;
    for (const auto& f : r->files) {
        if (!f.error.empty()) {
            std::fprintf(stderr, "mcpwarden uninstall: %s (its backup is kept)\n", f.error.c_str());
            continue;
        }
        if (o.dry_run) std::fputs(f.diff.c_str(), stdout);
        std::fprintf(report, "%s (%s):\n", f.display.c_str(), f.client.c_str());
        for (const auto& e : f.entries) {
            if (e.outcome != "changed" && e.reason.empty()) continue;
            std::string what = e.outcome == "changed" ? (o.dry_run ? "would unwrap" : "unwrapped")
                                                      : "left wrapped (" + e.reason + ")";
            std::fprintf(report, "  %s: %s\n", e.name.c_str(), what.c_str());
        }
    }
    for (const auto& p : r->removed)
        std::fprintf(report, "%s %s\n", o.dry_run ? "would remove" : "removed", p.c_str());
    for (const auto& w : r->still_wrapped)
        std::fprintf(stderr,
                     "mcpwarden uninstall: warning: %s still runs mcpwarden (not wrapped by "
                     "`mcpwarden wrap`); it stops working when mcpwarden is removed\n",
                     w.c_str());
    if (r->files.empty() && r->removed.empty())
        std::fprintf(report, "nothing to undo: wrap recorded no entry\n");
    return r->ok() ? 0 : 1;
}

const Command uninstall_cmd(63, [](CLI::App& app) {
    auto opts = std::make_shared<UninstallOpts>();
    auto* sub = app.add_subcommand(
        "uninstall", "Unwrap every entry `mcpwarden wrap` changed and remove its backups");
    sub->add_flag("--purge", opts->purge,
                  "Also remove the journal (keys, checkpoints) and the settings file");
    sub->add_flag("--dry-run", opts->dry_run,
                  "Print the diffs and what would be removed; change nothing");
    return Bound{sub, [opts] { return run_uninstall(*opts); }};
});

}  // namespace
}  // namespace warden::cli
