// `mcpwarden wrap` / `mcpwarden unwrap`: route the stdio servers of MCP client configs
// through `mcpwarden run`, or back. Exit codes: 0 ok, 1 a file failed (the others are
// still processed, each reported), 2 usage.
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
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
    bool force = false;
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

// ---- The dry start before a wrap under a profile ------------------------------------------
//
// A profile that breaks a server is worse found by the user in the client (a server that
// "failed to connect") than by wrap before it writes. So each entry a wrap under strict or
// workspace would change is started once as it will be started, through its wrapped command
// line with `--explain` (which under a profile does a dry start: initialize, tools/list,
// teardown, the denials with their flags; docs/SANDBOX.md) and --no-journal, stdin at EOF. The
// entry's own "env" of the client config is not applied: the dry start runs in wrap's
// environment.

struct DryReport {
    bool failed = false;
    std::string text;  // the dry start's lines, or why it did not run
};

// The dry start's lines of `run --explain`'s stderr: from "mcpwarden: dry start:" to the next
// "mcpwarden:" line. Without one, the run refused to start: its own lines say why.
DryReport dry_report_in(const std::string& err) {
    DryReport r;
    auto at = err.find("mcpwarden: dry start:");
    if (at == std::string::npos) {
        r.failed = true;
        for (size_t i = 0; i < err.size();) {
            size_t nl = err.find('\n', i);
            std::string line = err.substr(i, nl == std::string::npos ? nl : nl - i);
            if (line.rfind("mcpwarden run:", 0) == 0) r.text += "  " + line + "\n";
            if (nl == std::string::npos) break;
            i = nl + 1;
        }
        if (r.text.empty()) r.text = "  the server could not be started for a dry start\n";
        return r;
    }
    auto end = err.find("\nmcpwarden:", at + 1);
    r.text = "  " + err.substr(at + 11, end == std::string::npos ? end : end + 1 - at - 11);
    r.failed = r.text.find("dry start: FAILED") != std::string::npos;
    return r;
}

DryReport dry_start_entry(std::vector<std::string> wrapped) {
    auto run = std::find(wrapped.begin(), wrapped.end(), "run");
    if (run == wrapped.end()) return {true, "  not a `mcpwarden run` line\n"};
    wrapped.insert(run + 1, {"--no-journal", "--explain"});
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return {true, "  pipe2 failed\n"};
    std::vector<char*> argv;
    for (auto& a : wrapped)
        argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_t pid = ::fork();
    if (pid == 0) {
        int null = ::open("/dev/null", O_RDWR);
        ::dup2(null, 0);
        ::dup2(null, 1);
        ::dup2(fds[1], 2);
        ::execv(argv[0], argv.data());
        ::_exit(127);
    }
    ::close(fds[1]);
    std::string err;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
    for (;;) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd p{fds[0], POLLIN, 0};
        if (left.count() <= 0 || ::poll(&p, 1, static_cast<int>(left.count())) <= 0) break;
        char buf[4096];
        ssize_t n = ::read(fds[0], buf, sizeof buf);
        if (n <= 0) break;
        err.append(buf, static_cast<size_t>(n));
    }
    ::close(fds[0]);
    if (pid > 0) {
        if (::waitpid(pid, nullptr, WNOHANG) != pid) {
            ::kill(pid, SIGTERM);  // our child: mcpwarden run, which ends its server's tree
            ::waitpid(pid, nullptr, 0);
        }
    }
    return dry_report_in(err);
}

// 0 when every entry the wrap would change answered its dry start (or --force), else 1,
// with nothing written. The reports go to stdout.
int dry_start_before_wrap(const api::EditClientsOptions& req, bool force) {
    api::EditClientsOptions probe = req;
    probe.dry_run = true;
    auto edits = api::edit_client_configs(probe);
    if (!edits) return 0;  // the wrap itself reports it
    int failed = 0;
    for (const auto& f : edits->files)
        for (const auto& e : f.entries) {
            if (e.outcome != "changed" || e.wrapped.empty()) continue;
            DryReport r = dry_start_entry(e.wrapped);
            failed += r.failed;
            std::printf("%s (%s): %s under --sandbox %s:\n%s", f.display.c_str(), f.client.c_str(),
                        entry_label(e).c_str(), req.sandbox.c_str(), r.text.c_str());
        }
    if (failed == 0) return 0;
    if (force) {
        std::fprintf(stderr,
                     "mcpwarden wrap: %d server(s) failed their dry start; written anyway "
                     "(--force)\n",
                     failed);
        return 0;
    }
    std::fprintf(stderr,
                 "mcpwarden wrap: not written: %d server(s) failed their dry start under "
                 "--sandbox %s; the flags above allow what each was denied (put them in the "
                 "settings file's [server.NAME] section, docs/SANDBOX.md), or --force writes "
                 "the config anyway\n",
                 failed, req.sandbox.c_str());
    return 1;
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
    if (o.action == Action::Wrap && !o.dry_run &&
        (o.sandbox == "strict" || o.sandbox == "workspace"))
        if (int rc = dry_start_before_wrap(req, o.force); rc != 0) return rc;
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
                        "(docs/SANDBOX.md); under strict or workspace each server is started "
                        "once in the profile first, and a config whose server fails is not "
                        "written");
    if (wrap)
        sub->add_flag("--share", opts->share,
                      "Add `--share` to each wrapped entry: every session of the server uses one "
                      "tree (docs/SHARING.md)");
    if (wrap)
        sub->add_flag("--force", opts->force,
                      "With --sandbox: write the config even when a server fails its dry start");
    return Bound{sub, [opts, project] {
                     opts->project_given = project->count() > 0;
                     return run_wrap(*opts);
                 }};
}

const Command wrap_cmd(61, [](CLI::App& app) { return setup(app, Action::Wrap); });
const Command unwrap_cmd(62, [](CLI::App& app) { return setup(app, Action::Unwrap); });

}  // namespace
}  // namespace warden::cli
