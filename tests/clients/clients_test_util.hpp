// Helpers for the clients tests: fixture configs, a scratch HOME, and running the CLI.
#pragma once

#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/child.hpp"
#include "common/paths.hpp"
#include "common/util.hpp"

namespace warden::clients::testing {

inline std::string data_path(const std::string& name) {
    return std::string(warden::testing::kSourceDir) + "/tests/clients/data/" + name;
}

inline std::string slurp(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

inline std::string data(const std::string& name) {
    return slurp(data_path(name));
}

inline void spit(const std::string& path, const std::string& content) {
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << content;
}

// Names of the entries directly in `dir` (dot files included), sorted.
inline std::vector<std::string> names_in(const std::string& dir) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(dir))
        out.push_back(e.path().filename().string());
    std::sort(out.begin(), out.end());
    return out;
}

inline mode_t mode_of(const std::string& path) {
    struct stat st {};
    ::stat(path.c_str(), &st);
    return st.st_mode & 07777;
}

struct Stamp {
    std::string bytes;
    struct timespec mtime {};
    mode_t mode = 0;
    bool operator==(const Stamp& o) const {
        return bytes == o.bytes && mtime.tv_sec == o.mtime.tv_sec &&
               mtime.tv_nsec == o.mtime.tv_nsec && mode == o.mode;
    }
};

// Content, mtime and mode: what "the file is unchanged" means.
inline Stamp stamp(const std::string& path) {
    Stamp s;
    s.bytes = slurp(path);
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0) {
        s.mtime = st.st_mtim;
        s.mode = st.st_mode;
    }
    return s;
}

// Where each client fixture goes under a scratch HOME (and project directory), as
// {client, fixture, path}.
struct Installed {
    std::string client;
    std::string fixture;
    std::string path;
};

inline std::vector<Installed> install_fixtures(const std::string& home,
                                               const std::string& project) {
    std::vector<Installed> all = {
        {"claude-code", "claude_code_user.json", home + "/.claude.json"},
        {"claude-code", "claude_code_project.json", project + "/.mcp.json"},
        {"claude-desktop", "claude_desktop.json",
         home + "/.config/Claude/claude_desktop_config.json"},
        {"cursor", "cursor.json", home + "/.cursor/mcp.json"},
        {"vscode", "vscode.json", project + "/.vscode/mcp.json"},
        {"windsurf", "windsurf.json", home + "/.codeium/windsurf/mcp_config.json"},
        {"zed", "zed.json", home + "/.config/zed/settings.json"},
        {"codex", "codex.toml", home + "/.codex/config.toml"},
        {"gemini", "gemini.json", home + "/.gemini/settings.json"},
        {"cline", "cline.json",
         home + "/.config/Code/User/globalStorage/saoudrizwan.claude-dev/settings/"
                "cline_mcp_settings.json"},
    };
    for (const auto& i : all)
        spit(i.path, data(i.fixture));
    return all;
}

struct CliResult {
    int exit_code = -1;
    std::string out;
    std::string err;
};

// Runs `argv` in `cwd` with HOME = `home` (XDG_CONFIG_HOME, XDG_STATE_HOME, CODEX_HOME and
// MCPWARDEN_JOURNAL unset, so every path derives from HOME), stdin closed; `env` on top.
inline CliResult run_program(const std::vector<std::string>& argv, const std::string& home,
                             const std::string& cwd,
                             const std::vector<std::pair<std::string, std::string>>& env = {}) {
    using namespace std::chrono_literals;
    warden::testing::ChildOptions opts;
    opts.env = {{"HOME", home}};
    opts.env.insert(opts.env.end(), env.begin(), env.end());
    opts.unset_env = {"XDG_CONFIG_HOME", "XDG_STATE_HOME", "CODEX_HOME", "MCPWARDEN_JOURNAL"};
    opts.capture_stderr = true;
    opts.cwd = cwd;
    warden::testing::TestChild child(argv, opts);
    CliResult r;
    if (!child.started()) {
        r.err = child.error();
        return r;
    }
    child.close_stdin();
    r.out = child.read_all_stdout(30s);
    r.err = child.read_stderr(30s);
    auto status = child.wait_exit(30s);
    if (status && WIFEXITED(*status)) r.exit_code = WEXITSTATUS(*status);
    return r;
}

// The mcpwarden binary, as run_program runs it.
inline CliResult run_cli(const std::vector<std::string>& args, const std::string& home,
                         const std::string& cwd,
                         const std::vector<std::pair<std::string, std::string>>& env = {}) {
    std::vector<std::string> argv = {warden::testing::kCli};
    argv.insert(argv.end(), args.begin(), args.end());
    return run_program(argv, home, cwd, env);
}

}  // namespace warden::clients::testing
