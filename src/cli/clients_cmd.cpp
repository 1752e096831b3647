// `mcpwarden clients`: the MCP clients on this machine, their config files (user and
// project scope) and each server those files declare, wrapped or not.
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "clients/clients.hpp"

namespace warden::cli {
namespace {

using namespace warden::clients;

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

std::string state_of(const ServerEntry& e) {
    std::string s;
    if (e.remote)
        s = "remote";
    else if (!e.problem.empty())
        s = "unusable";
    else
        s = is_wrapped(e) ? "wrapped" : "not wrapped";
    if (e.disabled) s += ", disabled";
    return s;
}

std::string section_label(const ConfigFileRef& f, Scope scope, const std::string& project) {
    if (scope == Scope::Local) return f.display + " [local: " + project + "]";
    return f.display + " [" + std::string(scope_name(scope)) + "]";
}

nlohmann::json entry_json(const ServerEntry& e) {
    nlohmann::json j;
    j["name"] = e.name;
    j["scope"] = scope_name(e.scope);
    if (e.scope == Scope::Local) j["project"] = e.project;
    j["transport"] = e.remote ? "remote" : "stdio";
    j["disabled"] = e.disabled;
    if (!e.remote) {
        j["command"] = e.program.value;
        nlohmann::json args = nlohmann::json::array();
        for (const auto& a : e.args)
            args.push_back(a.value);
        j["args"] = args;
        j["wrapped"] = is_wrapped(e);
        if (auto inner = is_wrapped(e) ? inner_command(e) : std::nullopt) {
            j["server_command"] = inner->command;
            j["server_args"] = inner->args;
        }
        if (!e.problem.empty()) j["problem"] = e.problem;
    }
    return j;
}

void print_entries(const ConfigFileRef& f, const std::vector<ServerEntry>& entries) {
    // One block per scope section of the file (~/.claude.json has user + local ones).
    std::vector<std::pair<Scope, std::string>> sections;
    for (const auto& e : entries) {
        std::pair<Scope, std::string> key{e.scope, e.project};
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
            } else if (auto inner = is_wrapped(e) ? inner_command(e) : std::nullopt) {
                what = command_line(inner->command, inner->args);
            } else {
                std::vector<std::string> args;
                for (const auto& a : e.args)
                    args.push_back(a.value);
                what = command_line(e.program.value, args);
            }
            std::printf("    %-*s  %-*s  %s\n", static_cast<int>(name_w), e.name.c_str(),
                        static_cast<int>(state_w), state_of(e).c_str(), what.c_str());
        }
    }
}

struct Opts {
    bool json = false;
    std::string project;
};

int run_clients(const Opts& o) {
    std::optional<std::string> project;
    if (!o.project.empty()) {
        project = o.project;
    } else if (char cwd[4096]; ::getcwd(cwd, sizeof cwd)) {
        project = std::string(cwd);
    }
    auto options = DiscoverOptions::from_environment(project);
    if (!options) {
        std::fprintf(stderr, "mcpwarden clients: %s\n", options.error().message.c_str());
        return 2;
    }
    int rc = 0;
    nlohmann::json out = nlohmann::json::array();
    std::vector<std::string> absent;
    for (const auto& c : discover(*options)) {
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
            nlohmann::json jf{{"path", f.path}, {"scope", scope_name(f.scope)}};
            jf["servers"] = nlohmann::json::array();
            auto entries = list_file(f);
            if (!entries) {
                rc = 1;
                jf["error"] = entries.error().message;
                if (!o.json)
                    std::printf("  %s\n    error: %s\n", f.display.c_str(),
                                entries.error().message.c_str());
            } else {
                for (const auto& e : *entries)
                    jf["servers"].push_back(entry_json(e));
                if (!o.json) print_entries(f, *entries);
            }
            jc["files"].push_back(jf);
        }
        out.push_back(jc);
    }
    if (o.json) {
        std::printf("%s\n", nlohmann::json{{"clients", out}}.dump(2).c_str());
    } else if (!absent.empty()) {
        std::string list;
        for (const auto& a : absent)
            list += (list.empty() ? "" : ", ") + a;
        std::printf("not found: %s\n", list.c_str());
    }
    return rc;
}

const Command clients_cmd(60, [](CLI::App& app) {
    auto opts = std::make_shared<Opts>();
    auto* sub = app.add_subcommand("clients", "List MCP clients, their config files and servers");
    sub->add_flag("--json", opts->json, "Print JSON");
    sub->add_option("--project", opts->project,
                    "Project directory for project-scope files (default: the current one)");
    return Bound{sub, [opts] { return run_clients(*opts); }};
});

}  // namespace
}  // namespace warden::cli
