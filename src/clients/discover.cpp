#include "clients/discover.hpp"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clients/config_file.hpp"
#include "clients/wrap.hpp"
#include "clients/wrap_record.hpp"

namespace warden::clients {

const std::vector<ClientInfo>& known_clients() {
    static const std::vector<ClientInfo> clients = {
        {"claude-code", "Claude Code"},
        {"claude-desktop", "Claude Desktop"},
        {"cursor", "Cursor"},
        {"vscode", "VS Code"},
        {"windsurf", "Windsurf"},
        {"zed", "Zed"},
        {"codex", "Codex"},
        {"gemini", "Gemini CLI"},
        {"cline", "Cline"},
    };
    return clients;
}

const ClientInfo* find_client(std::string_view id) {
    for (const auto& c : known_clients())
        if (c.id == id) return &c;
    return nullptr;
}

namespace {

std::string env_or(const char* name, std::string fallback) {
    const char* v = ::getenv(name);
    return (v && v[0] == '/') ? std::string(v) : std::move(fallback);
}

bool exists(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0;
}

bool is_regular(const std::string& path) {
    struct stat st;
    return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string canonical(const std::string& path) {
    char buf[PATH_MAX];
    return ::realpath(path.c_str(), buf) ? std::string(buf) : path;
}

struct Candidate {
    Scope scope;
    std::string path;
    Format format;
    Layout layout;
};

struct ClientLayout {
    std::vector<std::string> markers;  // directories whose presence means "installed"
    std::vector<Candidate> files;
};

// Where each client keeps its MCP servers on Linux (docs/CLIENTS.md, "Clients").
ClientLayout layout_of(const std::string& id, const DiscoverOptions& o) {
    const std::string& h = o.home;
    const std::string& cfg = o.config_home;
    auto project = [&](const std::string& rel, Format f, Layout l) -> std::vector<Candidate> {
        if (!o.project_dir) return {};
        return {{Scope::Project, *o.project_dir + "/" + rel, f, l}};
    };
    auto join = [](std::vector<Candidate> a, std::vector<Candidate> b) {
        a.insert(a.end(), b.begin(), b.end());
        return a;
    };
    const auto J = Format::Json;
    if (id == "claude-code")
        return {{h + "/.claude"},
                join({{Scope::User, h + "/.claude.json", J, Layout::ClaudeJson}},
                     project(".mcp.json", J, Layout::McpServers))};
    if (id == "claude-desktop")
        return {{cfg + "/Claude"},
                {{Scope::User, cfg + "/Claude/claude_desktop_config.json", J, Layout::McpServers}}};
    if (id == "cursor")
        return {{h + "/.cursor"},
                join({{Scope::User, h + "/.cursor/mcp.json", J, Layout::McpServers}},
                     project(".cursor/mcp.json", J, Layout::McpServers))};
    if (id == "vscode")
        return {{cfg + "/Code"},
                join({{Scope::User, cfg + "/Code/User/mcp.json", J, Layout::Servers}},
                     project(".vscode/mcp.json", J, Layout::Servers))};
    if (id == "windsurf")
        return {{h + "/.codeium/windsurf"},
                {{Scope::User, h + "/.codeium/windsurf/mcp_config.json", J, Layout::McpServers}}};
    if (id == "zed")
        return {{cfg + "/zed"},
                join({{Scope::User, cfg + "/zed/settings.json", J, Layout::ContextServers}},
                     project(".zed/settings.json", J, Layout::ContextServers))};
    if (id == "codex")
        return {
            {o.codex_home},
            join({{Scope::User, o.codex_home + "/config.toml", Format::Toml, Layout::CodexToml}},
                 project(".codex/config.toml", Format::Toml, Layout::CodexToml))};
    if (id == "gemini")
        return {{h + "/.gemini"},
                join({{Scope::User, h + "/.gemini/settings.json", J, Layout::McpServers}},
                     project(".gemini/settings.json", J, Layout::McpServers))};
    if (id == "cline") {
        std::string dir = cfg + "/Code/User/globalStorage/saoudrizwan.claude-dev";
        return {{dir},
                {{Scope::User, dir + "/settings/cline_mcp_settings.json", J, Layout::McpServers}}};
    }
    return {};
}

}  // namespace

Result<DiscoverOptions> DiscoverOptions::from_environment(std::optional<std::string> project_dir) {
    const char* home = ::getenv("HOME");
    if (!home || home[0] != '/') return Error::msg("HOME is not set to an absolute path");
    DiscoverOptions o;
    o.home = home;
    while (o.home.size() > 1 && o.home.back() == '/')
        o.home.pop_back();
    o.config_home = env_or("XDG_CONFIG_HOME", o.home + "/.config");
    o.codex_home = env_or("CODEX_HOME", o.home + "/.codex");
    o.state_dir = state_dir_from_environment(o.home);
    if (project_dir) {
        char buf[PATH_MAX];
        if (!::realpath(project_dir->c_str(), buf))
            return Error::sys("realpath", *project_dir, errno);
        struct stat st;
        if (::stat(buf, &st) < 0 || !S_ISDIR(st.st_mode))
            return Error::msg("--project " + *project_dir + ": not a directory");
        o.project_dir = buf;
    }
    return o;
}

std::string display_path(const std::string& path, const std::string& home) {
    if (!home.empty() && home != "/" && path.size() > home.size() && path.starts_with(home) &&
        path[home.size()] == '/')
        return "~" + path.substr(home.size());
    return path;
}

std::vector<ClientConfigs> discover(const DiscoverOptions& o) {
    std::vector<ClientConfigs> out;
    std::vector<std::string> seen;  // canonical paths already listed
    for (const auto& info : known_clients()) {
        ClientLayout layout = layout_of(info.id, o);
        ClientConfigs c{info, false, {}};
        for (const auto& m : layout.markers)
            if (exists(m)) c.detected = true;
        for (const auto& f : layout.files) {
            if (!is_regular(f.path)) continue;
            c.detected = true;
            std::string canon = canonical(f.path);
            bool dup = false;
            for (const auto& s : seen)
                dup = dup || s == canon;
            if (dup) continue;
            seen.push_back(canon);
            c.files.push_back(
                {info.id, f.scope, f.path, display_path(f.path, o.home), f.format, f.layout});
        }
        out.push_back(std::move(c));
    }
    return out;
}

Result<ConfigFileRef> config_file_at(const std::string& path, DiscoverOptions o) {
    char buf[PATH_MAX];
    if (!::realpath(path.c_str(), buf)) return Error::sys("realpath", path, errno);
    std::string real = buf;
    // A project file sits one or two levels below its project (.mcp.json, .cursor/mcp.json).
    std::string dir = real.substr(0, real.rfind('/'));
    std::vector<std::string> projects = {dir.empty() ? "/" : dir};
    if (size_t up = dir.rfind('/'); up != std::string::npos && up > 0)
        projects.push_back(dir.substr(0, up));
    for (const auto& p : projects) {
        o.project_dir = p;
        for (const auto& c : discover(o))
            for (const auto& f : c.files)
                if (canonical(f.path) == real) return f;
    }
    return Error::msg(path + ": not where any known client keeps its MCP servers");
}

Result<std::vector<DeclaredServer>> declared_servers_here(std::optional<std::string> project_dir) {
    auto o = DiscoverOptions::from_environment(std::move(project_dir));
    if (!o) return o.error();
    return declared_servers(*o);
}

std::vector<DeclaredServer> declared_servers(const DiscoverOptions& o) {
    std::vector<DeclaredServer> out;
    for (const auto& client : discover(o)) {
        for (const auto& file : client.files) {
            auto entries = list_file(file);
            if (!entries) continue;
            for (const auto& e : *entries) {
                if (e.remote || !e.problem.empty()) continue;
                DeclaredServer d;
                d.client = client.client.id;
                d.file = file.path;
                d.scope = e.scope;
                d.project = e.scope == Scope::Local     ? e.project
                            : e.scope == Scope::Project ? o.project_dir.value_or("")
                                                        : "";
                d.name = e.name;
                d.command = e.program.value;
                for (const auto& a : e.args)
                    d.args.push_back(a.value);
                d.wrapped = is_wrapped(e);
                d.disabled = e.disabled;
                auto inner = d.wrapped ? inner_command(e) : std::nullopt;
                d.inner_command = inner ? inner->command : d.command;
                d.inner_args = inner ? inner->args : d.args;
                out.push_back(std::move(d));
            }
        }
    }
    return out;
}

}  // namespace warden::clients
