// `mcpwarden audit verify`: checks the journal offline (include/mcpwarden/audit.hpp). Exit 0
// OK, 1 integrity failure (first bad seq + reason), 2 usage or I/O error, 3 intact but not
// fully anchored with --require-anchored. `mcpwarden audit anchor`: the newest signed
// checkpoint as one line, to keep off this host and pass back with --trusted-checkpoint.
#include <cstdio>
#include <string>
#include <vector>

#include "command.hpp"
#include "journal_path.hpp"
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
                  "$XDG_STATE_HOME/mcpwarden/journal.db)")
        ->check(journal_path_given());
    v->add_flag("--require-anchored", a.opts.require_anchored,
                "Exit 3 when no checkpoint covers the newest records, or every trusted "
                "checkpoint is older than the prune anchor");
    v->add_option("--trusted-checkpoint", a.opts.trusted_checkpoints,
                  "A checkpoint file kept off this host (repeatable)");
    v->add_option("--public-key", a.opts.public_key_file,
                  "The journal's public key kept off this host (hex, as in journal.pub)");
    v->add_flag("--json", a.json, "JSON report on stdout");
    auto* an = sub->add_subcommand(
        "anchor",
        "Print the newest signed checkpoint as one line: store it off this host, check it later "
        "with verify --trusted-checkpoint FILE");
    an->add_option("--journal", a.opts.path, "Journal database")->check(journal_path_given());
    return Bound{sub, [v, an] {
                     if (an->parsed()) {
                         auto line = api::audit_anchor(a.opts.path);
                         if (!line) {
                             std::fprintf(stderr, "mcpwarden audit anchor: %s\n",
                                          line.error().message.c_str());
                             return 2;
                         }
                         std::fputs(line->c_str(), stdout);
                         return 0;
                     }
                     if (!v->parsed()) return 2;
                     api::AuditReport r = api::audit_verify(a.opts);
                     const std::string& out = a.json ? r.json : r.text;
                     std::fputs(out.c_str(), r.exit_code == 2 && !a.json ? stderr : stdout);
                     return r.exit_code;
                 }};
});

}  // namespace
}  // namespace warden::cli
