// Which MCP clients are on this machine, where their config files are, and which stdio
// servers those files declare. Paths follow docs/CLIENTS.md; everything starts from
// $HOME (plus $XDG_CONFIG_HOME and $CODEX_HOME where the client honours them), so tests
// point HOME at a temporary directory.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "clients/config_doc.hpp"
#include "clients/declared_server.hpp"
#include "sys/result.hpp"

namespace warden::clients {

struct ClientInfo {
    std::string id;       // "claude-code", "cursor", ... (what --client takes)
    std::string display;  // "Claude Code"
};
const std::vector<ClientInfo>& known_clients();
const ClientInfo* find_client(std::string_view id);

struct DiscoverOptions {
    std::string home;         // $HOME
    std::string config_home;  // $XDG_CONFIG_HOME when absolute, else HOME/.config
    std::string codex_home;   // $CODEX_HOME, else HOME/.codex
    std::string state_dir;    // $XDG_STATE_HOME/mcpwarden, else HOME/.local/state/mcpwarden
    std::optional<std::string> project_dir;  // absolute; project-scope files are looked up here

    // From the environment; `project_dir` is made absolute. Fails when HOME is unset.
    static Result<DiscoverOptions> from_environment(std::optional<std::string> project_dir);
};

struct ConfigFileRef {
    std::string client;   // ClientInfo::id
    Scope scope;          // User or Project (a ClaudeJson file also holds Local maps)
    std::string path;     // absolute
    std::string display;  // path with $HOME shown as "~"
    Format format;
    Layout layout;
};

struct ClientConfigs {
    ClientInfo client;
    bool detected = false;             // a config file or the client's own directory exists
    std::vector<ConfigFileRef> files;  // the config files that exist
};

// Every known client, in a fixed order, with its existing config files. A project file
// that is the same file as a user file (project dir = HOME) is listed once, as user.
std::vector<ClientConfigs> discover(const DiscoverOptions& options);

// The client config file at `path` (user or project scope: a project file names its
// project by where it sits, e.g. DIR/.cursor/mcp.json), or an error saying that no known
// client keeps its servers there.
Result<ConfigFileRef> config_file_at(const std::string& path, DiscoverOptions options);

// The stdio servers of every discovered config file; files that fail to read or parse
// are left out (`mcpwarden clients` reports them).
std::vector<DeclaredServer> declared_servers(const DiscoverOptions& options);

// The same for the configs found from the environment (DiscoverOptions::from_environment,
// project-scope files in `project_dir`): what `ps`, `inspect` and `reap` hand the
// inventory's scan. An error only when the environment names no home.
Result<std::vector<DeclaredServer>> declared_servers_here(std::optional<std::string> project_dir);

// `path` with a leading `home` replaced by "~".
std::string display_path(const std::string& path, const std::string& home);

}  // namespace warden::clients
