// `mcpwarden audit verify`: checks the journal offline (include/mcpwarden/audit.hpp). Exit 0
// OK, 1 integrity failure (first bad seq + reason), 2 usage or I/O error, 3 intact but not
// fully anchored with --require-anchored.
#include <cstdio>
#include <string>
#include <vector>

#include "command.hpp"
#include "mcpwarden/audit.hpp"

namespace warden::cli {
namespace {

struct AuditArgs {
    api::AuditOptions opts;
    bool json = false;
};

const Command audit_cmd(310, [](CLI::App& app) {
    static AuditArgs a;
    auto* sub = app.add_subcommand("audit", "Check the journal's integrity offline");
    sub->require_subcommand(1);
    auto* v = sub->add_subcommand("verify", "Verify the hash chain, checkpoints and projections");
    v->add_option("--journal", a.opts.path,
                  "Journal database (default: $MCPWARDEN_JOURNAL or "
                  "$XDG_STATE_HOME/mcpwarden/journal.db)");
    v->add_flag("--require-anchored", a.opts.require_anchored,
                "Exit 3 when no checkpoint covers the newest records");
    v->add_option("--trusted-checkpoint", a.opts.trusted_checkpoints,
                  "A checkpoint file kept off this host (repeatable)");
    v->add_option("--public-key", a.opts.public_key_file,
                  "The journal's public key kept off this host (hex, as in journal.pub)");
    v->add_flag("--json", a.json, "JSON report on stdout");
    return Bound{sub, [v] {
                     if (!v->parsed()) return 2;
                     api::AuditReport r = api::audit_verify(a.opts);
                     const std::string& out = a.json ? r.json : r.text;
                     std::fputs(out.c_str(), r.exit_code == 2 && !a.json ? stderr : stdout);
                     return r.exit_code;
                 }};
});

}  // namespace
}  // namespace warden::cli
