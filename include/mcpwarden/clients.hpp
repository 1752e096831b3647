// libmcpwarden — MCP client configs: which clients are on this machine, the files in which
// they declare their servers, and routing those servers through `mcpwarden run` (wrap) or
// back (unwrap). What `mcpwarden clients`, `wrap` and `unwrap` do.
//
//     auto clients = warden::api::discover_clients();
//     for (const auto& c : *clients)
//         for (const auto& f : c.files)
//             for (const auto& s : f.servers)
//                 printf("%s %s %s\n", c.client.id.c_str(), f.display.c_str(), s.name.c_str());
//
// Everything starts from $HOME (and $XDG_CONFIG_HOME, $CODEX_HOME where the client honours
// them). An edit changes only the bytes of a server's command and args, so comments, key
// order and formatting survive; wrap + unwrap gives back the original bytes; a file that
// does not parse is never written; each written file gets a one-time backup, and every
// wrapped entry is recorded, both in the state directory ($XDG_STATE_HOME/mcpwarden), so
// that unwrap takes back what wrap did and nothing the user wrapped by hand.
// docs/CLIENTS.md lists the files per client. Only standard-library types; nothing throws.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "mcpwarden/export.h"
#include "mcpwarden/result.hpp"

namespace warden::api {

struct ClientInfo {
    std::string id;       // "claude-code", "cursor", … (what --client takes)
    std::string display;  // "Claude Code"
};
// Every client mcpwarden knows, in a fixed order.
MCPW_API std::vector<ClientInfo> known_clients();

// One server entry of a config file.
struct ClientServer {
    std::string name;
    std::string scope;    // "user" | "project" | "local" (a ~/.claude.json projects[] entry)
    std::string project;  // local scope: the project directory it belongs to
    bool remote = false;  // url / http / sse: never edited
    bool disabled = false;
    std::string problem;  // why it cannot be wrapped or unwrapped; "" when it can
    std::string command;  // as written: no variable is expanded
    std::vector<std::string> args;
    bool wrapped = false;  // command is mcpwarden and args start with "run"
    // When wrapped: the server itself, what follows "--" (nullopt when args hold no "--").
    std::optional<std::string> server_command;
    std::vector<std::string> server_args;
};

struct ClientConfigFile {
    std::string client;   // ClientInfo::id
    std::string scope;    // "user" | "project"
    std::string path;     // absolute
    std::string display;  // path with $HOME shown as "~"
    std::vector<ClientServer> servers;
    std::string error;  // "" when read; else why not, naming the file and place
};

struct ClientConfigs {
    ClientInfo client;
    bool detected = false;                // a config file or the client's own directory exists
    std::vector<ClientConfigFile> files;  // the config files that exist
};

struct DiscoverClientsOptions {
    std::optional<std::string> project_dir{};  // project-scope files are looked up here
    bool read_files = true;                    // list the servers of each file
};

// Every known client, in a fixed order, with its existing config files. Errors: HOME unset
// or not absolute, a project directory that is not one. A file that cannot be read is no
// error: its `error` says why.
MCPW_API Result<std::vector<ClientConfigs>> discover_clients(
    const DiscoverClientsOptions& options = {});

// ---- wrap / unwrap ---------------------------------------------------------------------

struct EditClientsOptions {
    bool unwrap = false;               // false: wrap
    std::vector<std::string> clients;  // ids; empty: every detected client
    // Project-scope files (a project's .mcp.json, .vscode/mcp.json, …) are edited only when
    // asked for: with `include_project`, those of `project_dir`. By default only the
    // user's own files (which include ~/.claude.json's per-project "local" servers).
    std::optional<std::string> project_dir{};
    bool include_project = false;
    // Explicit config files, user or project scope; when given, only these (and `clients`
    // is not consulted).
    std::vector<std::string> files{};
    std::string server{};     // only the entries with this name; "" for all
    bool dry_run = false;     // compute the diffs, write nothing
    std::string mcpwarden{};  // wrap: an executable mcpwarden, by absolute path
    std::string sandbox{};    // wrap: "strict"/"workspace" adds `--sandbox P`; "" adds nothing
    bool share = false;       // wrap: adds `--share` (docs/SHARING.md)
    bool unrecorded = false;  // unwrap: also entries wrap did not record (hand-written)
};

struct ClientEntryEdit {
    std::string name;
    std::string scope;  // "user" | "project" | "local"
    std::string project;
    std::string outcome;  // "changed" | "already" | "remote" | "skipped"
    std::string reason;   // why skipped
    // A wrap that changed it: the command line it now holds (mcpwarden run … -- CMD ARGS).
    std::vector<std::string> wrapped;
};

struct ClientFileEdit {
    std::string client;   // ClientInfo::id
    std::string scope;    // "user" | "project"
    std::string path;     // absolute
    std::string display;  // path with $HOME shown as "~"
    // "" when the file was handled; else why not, naming the file and place
    // ("~/.cursor/mcp.json:7:3: expected ',' or '}'"); the file is then left as it was.
    std::string error;
    std::vector<ClientEntryEdit> entries;  // the entries the edit selected
    std::string diff;                      // unified diff of the change; "" when none
    bool written = false;
    bool backup_written = false;        // the one-time backup was made now
    std::string backup;                 // its path, while wrapped entries of the file are recorded
    std::string backup_display;         // the same with $HOME shown as "~"
    bool backup_removed = false;        // unwrap took back the last recorded entry: backup gone
    std::string legacy_backup_removed;  // FILE.mcpwarden.bak of an older mcpwarden, removed
    // Wrap of a file under version control: "tracked by git (repository /src/shop)".
    std::string version_control;
};

struct ClientsEditReport {
    std::vector<ClientFileEdit> files;  // the config files of the selected clients, in order
    std::size_t matched = 0;            // entries selected across every file
    bool ok() const {
        for (const ClientFileEdit& f : files)
            if (!f.error.empty()) return false;
        return true;
    }
};

// Wraps or unwraps the stdio servers of the selected clients' configs, file by file: a
// file that fails does not stop the others. Errors: an unknown client ("unknown client 'x'
// (known: …)"), an `mcpwarden` that is not an executable mcpwarden (mcpwarden_problem), HOME
// unset, a bad project directory, a path that is no client's config file, a record in the
// state directory that does not parse.
MCPW_API Result<ClientsEditReport> edit_client_configs(const EditClientsOptions& options);

// "" when `path` is an absolute path to an executable that answers `--version` as
// mcpwarden; else what it is instead ("/opt/x/mcpwarden: No such file or directory").
// What wrap requires of --mcpwarden and `clients --check` of every wrapped entry.
MCPW_API std::string mcpwarden_problem(const std::string& path);

// The absolute path of the running executable: the mcpwarden that `mcpwarden wrap` writes
// when it is not given --mcpwarden. Error: "readlink(/proc/self/exe): …".
MCPW_API Result<std::string> self_executable();

// ---- uninstall ---------------------------------------------------------------------------

struct UninstallOptions {
    bool purge = false;    // also the journal (with its keys and checkpoints) and settings
    bool dry_run = false;  // say what would go; change nothing
};

struct UninstallReport {
    std::vector<ClientFileEdit> files;  // every file wrap recorded, unwrapped
    std::vector<std::string> removed;   // paths removed (backups, record, journal, settings)
    // Entries that still run mcpwarden afterwards, "~/.cursor/mcp.json: NAME (why)": wrapped
    // by hand, or changed since wrap. They stop working once mcpwarden is gone.
    std::vector<std::string> still_wrapped;
    bool ok() const {
        for (const ClientFileEdit& f : files)
            if (!f.error.empty()) return false;
        return true;
    }
};

// Unwraps every entry wrap recorded, in whichever files it did that (project files
// included), removes the backups and the record; with `purge`, the journal and the settings
// file too. A file that fails keeps its backup and record.
MCPW_API Result<UninstallReport> uninstall(const UninstallOptions& options);

}  // namespace warden::api
