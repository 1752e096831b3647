// `mcpwarden clients`: the MCP clients on this machine, their config files (user and
// project scope) and each server those files declare, wrapped or not. `--check`: every
// wrapped entry must point at an executable mcpwarden (exit 1 naming each that does not).
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "mcpwarden/clients.hpp"

namespace warden::cli {
namespace {

using api::ClientServer;

// A word as a shell would need it, for display only.
std::string shell_word(const std::string& s) {
    if (s.empty()) return "''";
    bool plain = true;
    for (char c : s)
        if (!(isalnum(static_cast<unsigned char>(c)) ||
              std::string_view("-_./:=@%+,${}").find(c) != std::string_view::npos))
            plain = false;
    if (plain) return s;
    std::string out = "'";
    for (char c : s)
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
}

std::string command_line(const std::string& cmd, const std::vector<std::string>& args) {
    std::string out = shell_word(cmd);
    for (const auto& a : args)
        out += " " + shell_word(a);
    return out;
}

std::string state_of(const ClientServer& e) {
    std::string s;
    if (e.remote)
        s = "remote";
    else if (!e.problem.empty())
        s = "unusable";
    else
        s = e.wrapped ? "wrapped" : "not wrapped";
    if (e.disabled) s += ", disabled";
    return s;
}

std::string section_label(const api::ClientConfigFile& f, const std::string& scope,
                          const std::string& project) {
    if (scope == "local") return f.display + " [local: " + project + "]";
    return f.display + " [" + scope + "]";
}

nlohmann::json entry_json(const ClientServer& e) {
    nlohmann::json j;
    j["name"] = e.name;
    j["scope"] = e.scope;
    if (e.scope == "local") j["project"] = e.project;
    j["transport"] = e.remote ? "remote" : "stdio";
    j["disabled"] = e.disabled;
    if (!e.remote) {
        j["command"] = e.command;
        j["args"] = e.args;
        j["wrapped"] = e.wrapped;
        if (e.server_command) {
            j["server_command"] = *e.server_command;
            j["server_args"] = e.server_args;
        }
        if (!e.problem.empty()) j["problem"] = e.problem;
    }
    return j;
}

void print_entries(const api::ClientConfigFile& f, const std::vector<ClientServer>& entries) {
    // One block per scope section of the file (~/.claude.json has user + local ones).
    std::vector<std::pair<std::string, std::string>> sections;
    for (const auto& e : entries) {
        std::pair<std::string, std::string> key{e.scope, e.project};
        if (std::find(sections.begin(), sections.end(), key) == sections.end())
            sections.push_back(key);
    }
    if (sections.empty()) std::printf("  %s: no servers\n", section_label(f, f.scope, {}).c_str());
    for (const auto& [scope, project] : sections) {
        std::printf("  %s\n", section_label(f, scope, project).c_str());
        size_t name_w = 0, state_w = 0;
        for (const auto& e : entries) {
            name_w = std::max(name_w, e.name.size());
            state_w = std::max(state_w, state_of(e).size());
        }
        for (const auto& e : entries) {
            if (e.scope != scope || e.project != project) continue;
            std::string what;
            if (e.remote) {
                what = "(left alone by wrap)";
            } else if (!e.problem.empty()) {
                what = e.problem;
            } else if (e.server_command) {
                what = command_line(*e.server_command, e.server_args);
            } else {
                what = command_line(e.command, e.args);
            }
            std::printf("    %-*s  %-*s  %s\n", static_cast<int>(name_w), e.name.c_str(),
                        static_cast<int>(state_w), state_of(e).c_str(), what.c_str());
        }
    }
}

struct Opts {
    bool json = false;
    bool check = false;
    std::string project;
};

// The file a bare command name (no '/') runs, found as execvp finds it: the first
// executable regular file of that name in the directories of PATH.
std::optional<std::string> resolve_on_path(const std::string& name) {
    const char* path = std::getenv("PATH");
    const std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
    for (size_t at = 0; at <= dirs.size();) {
        const size_t end = std::min(dirs.find(':', at), dirs.size());
        // An empty entry is the current directory, as for execvp.
        const std::string dir = end > at ? dirs.substr(at, end - at) : ".";
        const std::string candidate = dir + "/" + name;
        struct stat st;
        if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
            ::access(candidate.c_str(), X_OK) == 0)
            return candidate;
        at = end + 1;
    }
    return std::nullopt;
}

// --check: what is wrong with each wrapped entry's mcpwarden, one run per distinct command.
// `"command": "mcpwarden"` is what a client runs through its PATH: a bare name is checked as
// the file it resolves to through this PATH, which is said (the client's PATH may differ);
// one that resolves to nothing is a problem. A relative path ("bin/mcpwarden") depends on the
// directory the client starts servers in, and stays refused.
class WrapperCheck {
  public:
    struct Verdict {
        std::string problem;   // "" when the entry is not wrapped or its mcpwarden is fine
        std::string resolved;  // a bare name: the file it resolved to through PATH
    };
    Verdict check(const ClientServer& e) {
        if (!e.wrapped) return {};
        ++checked_;
        for (const auto& [command, verdict] : seen_)
            if (command == e.command) return verdict;
        seen_.emplace_back(e.command, judge(e.command));
        return seen_.back().second;
    }
    size_t checked() const { return checked_; }

  private:
    static Verdict judge(const std::string& command) {
        if (command.empty() || command.find('/') != std::string::npos)
            return {api::mcpwarden_problem(command), {}};
        auto found = resolve_on_path(command);
        if (!found)
            return {"'" + command + "' is not found in any directory of PATH (" +
                        std::string(std::getenv("PATH") ? std::getenv("PATH") : "unset") + ")",
                    {}};
        // The absolute file, so that mcpwarden_problem's test applies to it as to a path.
        std::string file = *found;
        if (file[0] != '/')
            if (char cwd[4096]; ::getcwd(cwd, sizeof cwd)) file = std::string(cwd) + "/" + file;
        std::string why = api::mcpwarden_problem(file);
        return {why.empty() ? "" : "'" + command + "' resolves through PATH, and " + why, file};
    }
    std::vector<std::pair<std::string, Verdict>> seen_;
    size_t checked_ = 0;
};

int run_clients(const Opts& o) {
    std::optional<std::string> project;
    if (!o.project.empty()) {
        project = o.project;
    } else if (char cwd[4096]; ::getcwd(cwd, sizeof cwd)) {
        project = std::string(cwd);
    }
    auto discovered = api::discover_clients({.project_dir = project});
    if (!discovered) {
        std::fprintf(stderr, "mcpwarden clients: %s\n", discovered.error().message.c_str());
        return 2;
    }
    int rc = 0;
    nlohmann::json out = nlohmann::json::array();
    std::vector<std::string> absent;
    WrapperCheck check;
    std::vector<std::string> broken;    // "FILE: NAME: why"
    std::vector<std::string> resolved;  // "FILE: NAME: 'mcpwarden' resolves through PATH to …"
    for (const auto& c : *discovered) {
        nlohmann::json jc{
            {"id", c.client.id}, {"name", c.client.display}, {"detected", c.detected}};
        jc["files"] = nlohmann::json::array();
        if (!c.detected) {
            absent.push_back(c.client.id);
            if (o.json) out.push_back(jc);
            continue;
        }
        if (!o.json) {
            std::printf("%s (%s)\n", c.client.display.c_str(), c.client.id.c_str());
            if (c.files.empty()) std::printf("  no config file\n");
        }
        for (const auto& f : c.files) {
            nlohmann::json jf{{"path", f.path}, {"scope", f.scope}};
            jf["servers"] = nlohmann::json::array();
            if (!f.error.empty()) {
                rc = 1;
                jf["error"] = f.error;
                if (!o.json)
                    std::printf("  %s\n    error: %s\n", f.display.c_str(), f.error.c_str());
            } else {
                for (const auto& e : f.servers) {
                    auto j = entry_json(e);
                    const auto verdict = o.check ? check.check(e) : WrapperCheck::Verdict{};
                    if (!verdict.resolved.empty()) {
                        j["wrapper_resolved"] = verdict.resolved;
                        resolved.push_back(f.display + ": " + e.name + ": '" + e.command +
                                           "' resolves through PATH to " + verdict.resolved);
                    }
                    if (!verdict.problem.empty()) {
                        j["wrapper_problem"] = verdict.problem;
                        broken.push_back(f.display + ": " + e.name + ": " + verdict.problem);
                    }
                    jf["servers"].push_back(j);
                }
                if (!o.json) print_entries(f, f.servers);
            }
            jc["files"].push_back(jf);
        }
        out.push_back(jc);
    }
    if (!broken.empty()) rc = 1;
    if (o.json) {
        nlohmann::json doc{
            {"schema", "mcpwarden.clients"}, {"schema_version", 1}, {"clients", out}};
        if (o.check) doc["check"] = {{"wrapped", check.checked()}, {"broken", broken.size()}};
        std::printf("%s\n", doc.dump(2).c_str());
    } else if (!absent.empty()) {
        std::string list;
        for (const auto& a : absent)
            list += (list.empty() ? "" : ", ") + a;
        std::printf("not found: %s\n", list.c_str());
    }
    if (o.check && !o.json) {
        for (const auto& r : resolved)
            std::printf("check: %s (the client's own PATH decides which it runs)\n", r.c_str());
        for (const auto& b : broken)
            std::fprintf(stderr, "mcpwarden clients: %s\n", b.c_str());
        std::printf("check: %zu of %zu wrapped entries point at an executable mcpwarden\n",
                    check.checked() - broken.size(), check.checked());
    }
    return rc;
}

const Command clients_cmd(60, [](CLI::App& app) {
    auto opts = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("clients", "List MCP clients, their config files and servers");
    sub->add_flag("--json", opts->json, "Print JSON");
    sub->add_flag("--check", opts->check,
                  "Verify that every wrapped entry points at an executable mcpwarden (exit 1 if "
                  "not)");
    sub->add_option("--project", opts->project,
                    "Project directory for project-scope files (default: the current one)");
    return Bound{sub, [opts] { return run_clients(*opts); }};
});

}  // namespace
}  // namespace warden::cli
