// `mcpwarden wrap` / `mcpwarden unwrap`: route the stdio servers of MCP client configs
// through `mcpwarden run`, or back. Exit codes: 0 ok, 1 a file failed (the others are
// still processed, each reported), 2 usage.
#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "mcpwarden/clients.hpp"

namespace warden::cli {
namespace {

enum class Action { Wrap, Unwrap };

struct WrapOpts {
    Action action = Action::Wrap;
    std::vector<std::string> clients;
    bool all = false;
    bool project_given = false;  // --project, with or without DIR
    std::string project;
    std::vector<std::string> files;
    std::string server;
    bool dry_run = false;
    bool unrecorded = false;
    std::string mcpwarden;
    std::string sandbox;
    bool share = false;
};

std::string entry_label(const api::ClientEntryEdit& r) {
    if (r.scope == "local") return r.name + " (local: " + r.project + ")";
    return r.name;
}

std::string outcome_label(Action action, const std::string& o, bool dry_run) {
    bool wrap = action == Action::Wrap;
    if (o == "changed")
        return dry_run ? (wrap ? "would wrap" : "would unwrap") : (wrap ? "wrapped" : "unwrapped");
    if (o == "already") return wrap ? "already wrapped" : "not wrapped";
    if (o == "remote") return "remote, left alone";
    if (o == "skipped") return "skipped";
    return "?";
}

int usage(const char* verb, const std::string& msg) {
    std::fprintf(stderr, "mcpwarden %s: %s\n", verb, msg.c_str());
    return 2;
}

int run_wrap(const WrapOpts& o) {
    const char* verb = o.action == Action::Wrap ? "wrap" : "unwrap";
    if (!o.files.empty() && (o.all || !o.clients.empty() || o.project_given))
        return usage(verb,
                     "--file names the files itself: give it without --client, --all, --project");
    if (o.files.empty() && o.all == !o.clients.empty())
        return usage(verb, "give --client NAME or --all (not both), or --file PATH");
    for (const auto& c : o.clients) {
        std::string known;
        bool found = false;
        for (const auto& k : api::known_clients()) {
            found |= k.id == c;
            known += (known.empty() ? "" : ", ") + k.id;
        }
        if (!found) return usage(verb, "unknown client '" + c + "' (known: " + known + ")");
    }
    api::EditClientsOptions req;
    req.unwrap = o.action == Action::Unwrap;
    req.dry_run = o.dry_run;
    req.server = o.server;
    req.clients = o.clients;
    if (!o.sandbox.empty()) {
        if (o.action != Action::Wrap) return usage(verb, "--sandbox is for wrap");
        if (o.sandbox != "off" && o.sandbox != "strict" && o.sandbox != "workspace")
            return usage(verb,
                         "--sandbox: cannot parse '" + o.sandbox + "' as off, strict or workspace");
        req.sandbox = o.sandbox;
    }
    req.share = o.share;
    req.files = o.files;
    req.include_project = o.project_given;
    req.unrecorded = o.unrecorded;
    if (!o.mcpwarden.empty()) {
        if (o.mcpwarden[0] != '/') return usage(verb, "--mcpwarden must be an absolute path");
        req.mcpwarden = o.mcpwarden;
    } else if (auto self = api::self_executable()) {
        req.mcpwarden = *self;
    } else {
        return usage(verb, self.error().message + "; give --mcpwarden PATH");
    }

    if (!o.project.empty()) {
        req.project_dir = o.project;
    } else if (char cwd[PATH_MAX]; ::getcwd(cwd, sizeof cwd)) {
        req.project_dir = std::string(cwd);
    }
    auto edits = api::edit_client_configs(req);
    if (!edits) return usage(verb, edits.error().message);

    // With --dry-run, stdout carries only the diff (so it can be fed to patch); the
    // summary goes to stderr.
    FILE* report = o.dry_run ? stderr : stdout;
    int rc = 0;
    for (const auto& f : edits->files) {
        if (!f.error.empty()) {
            rc = 1;
            std::fprintf(stderr, "mcpwarden %s: %s\n", verb, f.error.c_str());
            continue;
        }
        if (o.dry_run) std::fputs(f.diff.c_str(), stdout);
        std::fprintf(report, "%s (%s):", f.display.c_str(), f.client.c_str());
        if (f.entries.empty()) std::fprintf(report, " no servers");
        std::fprintf(report, "\n");
        for (const auto& r : f.entries)
            std::fprintf(report, "  %s: %s%s\n", entry_label(r).c_str(),
                         outcome_label(o.action, r.outcome, o.dry_run).c_str(),
                         r.reason.empty() ? "" : (" (" + r.reason + ")").c_str());
        if (f.backup_written) std::fprintf(report, "  backup: %s\n", f.backup_display.c_str());
        if (f.backup_removed) std::fprintf(report, "  backup removed\n");
        if (!f.legacy_backup_removed.empty())
            std::fprintf(report, "  removed the old backup %s (the file holds its bytes again)\n",
                         f.legacy_backup_removed.c_str());
        if (!f.version_control.empty())
            std::fprintf(stderr,
                         "mcpwarden %s: warning: %s is %s: %s holds this machine's path %s; "
                         "keep the change out of commits (`mcpwarden unwrap --file %s` takes "
                         "it back)\n",
                         verb, f.display.c_str(), f.version_control.c_str(),
                         o.dry_run ? "the wrapped file would hold" : "it now",
                         req.mcpwarden.c_str(), f.path.c_str());
    }
    if (edits->files.empty()) std::fprintf(report, "no client config files found\n");
    if (!o.server.empty() && edits->matched == 0) {
        std::fprintf(stderr, "mcpwarden %s: no server named '%s' in the selected configs\n", verb,
                     o.server.c_str());
        rc = 1;
    }
    return rc;
}

Bound setup(CLI::App& app, Action action) {
    auto opts = std::make_shared<WrapOpts>();
    opts->action = action;
    bool wrap = action == Action::Wrap;
    auto* sub =
        app.add_subcommand(wrap ? "wrap" : "unwrap",
                           wrap ? "Route client-configured stdio servers through `mcpwarden run`"
                                : "Restore client configs wrapped by `mcpwarden wrap`");
    sub->add_option("--client", opts->clients,
                    "Client to edit (repeatable): claude-code, "
                    "claude-desktop, cursor, vscode, windsurf, zed, "
                    "codex, gemini, cline");
    sub->add_flag("--all", opts->all, "Edit every detected client");
    auto* project = sub->add_option("--project", opts->project,
                                    "Also the project-scope files (.mcp.json, .vscode/mcp.json, "
                                    "...) of DIR (default: the current directory)")
                        ->expected(0, 1);
    sub->add_option("--file", opts->files,
                    "Only this config file (repeatable), user or project scope");
    sub->add_option("--server", opts->server, "Only the server with this name");
    if (!wrap)
        sub->add_flag("--unrecorded", opts->unrecorded,
                      "Also unwrap entries that wrap did not record (wrapped by hand)");
    sub->add_flag("--dry-run", opts->dry_run, "Print a unified diff; change nothing");
    sub->add_option("--mcpwarden", opts->mcpwarden,
                    "Absolute path of mcpwarden to write (default: this binary)");
    if (wrap)
        sub->add_option("--sandbox", opts->sandbox,
                        "off|strict|workspace: add `--sandbox PROFILE` to each wrapped entry "
                        "(docs/SANDBOX.md)");
    if (wrap)
        sub->add_flag("--share", opts->share,
                      "Add `--share` to each wrapped entry: every session of the server uses one "
                      "tree (docs/SHARING.md)");
    return Bound{sub, [opts, project] {
                     opts->project_given = project->count() > 0;
                     return run_wrap(*opts);
                 }};
}

const Command wrap_cmd(61, [](CLI::App& app) { return setup(app, Action::Wrap); });
const Command unwrap_cmd(62, [](CLI::App& app) { return setup(app, Action::Unwrap); });

}  // namespace
}  // namespace warden::cli
