// `mcpwarden config show [--name N] [--json] [-- CMD...]` and `mcpwarden config check`: the
// effective settings and where each came from, and what is wrong with the settings files
// (docs/SETTINGS.md; the JSON schema is docs/config-json.md).
#include <unistd.h>

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "mcpwarden/settings.hpp"
#include "table.hpp"

namespace warden::cli {
namespace {

using nlohmann::json;

struct ConfigArgs {
    std::string name;
    std::string destination;  // `export --name`: its [export.NAME] section
    std::vector<std::string> command;
    bool json_out = false;
};

json settings_as_json(const std::vector<api::Setting>& settings) {
    json out = json::array();
    for (const api::Setting& s : settings)
        out.push_back({{"section", s.section},
                       {"key", s.key},
                       {"value", s.value},
                       {"origin", s.origin},
                       {"where", s.where}});
    return out;
}

json problems_as_json(const std::vector<api::SettingsProblem>& problems) {
    json out = json::array();
    for (const api::SettingsProblem& p : problems)
        out.push_back({{"file", p.file},
                       {"line", p.line},
                       {"column", p.column},
                       {"message", p.message},
                       {"text", p.text}});
    return out;
}

void print_settings_problems(const std::vector<api::SettingsProblem>& problems) {
    for (const api::SettingsProblem& p : problems)
        std::fprintf(stderr, "%s\n", p.text.c_str());
}

int config_show(const ConfigArgs& a) {
    std::vector<std::pair<std::string, std::string>> flags;
    if (!a.name.empty()) flags.emplace_back("name", a.name);
    auto run = api::run_settings(flags, a.command);
    if (!run) {
        std::fprintf(stderr, "mcpwarden config: %s\n", run.error().message.c_str());
        return 2;
    }
    api::ReapSettings reap = api::reap_settings();
    std::vector<api::Setting> all = run->settings;
    all.insert(all.end(), reap.settings.begin(), reap.settings.end());
    // The exporter's keys that a file gives (its flags and variables are `export`'s own).
    api::ExportSettings exp = api::export_settings(a.destination);
    all.insert(all.end(), exp.settings.begin(), exp.settings.end());
    const api::SettingsFiles files = api::default_settings_files();
    if (a.json_out) {
        std::puts(json{{"schema", "mcpwarden.config"},
                       {"schema_version", 1},
                       {"files", {{"user", files.user}, {"system", files.system}}},
                       {"read", run->files},
                       {"servers", run->servers},
                       {"problems", problems_as_json(run->problems)},
                       {"ignored", !run->problems.empty()},
                       {"settings", settings_as_json(all)}}
                      .dump(2)
                      .c_str());
        return 0;
    }
    std::printf("settings files: %s (user), %s (system)\n", files.user.c_str(),
                files.system.c_str());
    for (const std::string& s : run->servers)
        std::printf("server section: %s\n", s.c_str());
    if (!run->problems.empty())
        std::printf("`run` refuses to start: %s\n", run->options.settings_error.c_str());
    Table t({{"SETTING"}, {"VALUE"}, {"FROM"}, {"WHERE", Column::Align::Left, true}});
    for (const api::Setting& s : all)
        t.add_row({s.section + "." + s.key, s.value.empty() ? "-" : s.value, s.origin, s.where});
    std::fputs(t.render(output_width(STDOUT_FILENO)).c_str(), stdout);
    return 0;
}

int config_check(const ConfigArgs& a) {
    api::SettingsCheck c = api::check_settings();
    if (a.json_out) {
        std::puts(json{{"schema", "mcpwarden.config.check"},
                       {"schema_version", 1},
                       {"read", c.files},
                       {"ok", c.problems.empty()},
                       {"problems", problems_as_json(c.problems)}}
                      .dump(2)
                      .c_str());
    } else {
        print_settings_problems(c.problems);
        if (c.problems.empty())
            std::printf("ok: %zu settings file(s) read%s\n", c.files.size(),
                        c.files.empty() ? "" : ":");
        for (const std::string& f : c.files)
            if (c.problems.empty()) std::printf("  %s\n", f.c_str());
    }
    return c.problems.empty() ? 0 : 1;
}

const Command config_cmd(70, [](CLI::App& app) {
    static ConfigArgs a;
    auto* sub = app.add_subcommand(
        "config", "The settings file: effective values and where each came from; validate it");
    sub->require_subcommand(1);
    auto* show = sub->add_subcommand(
        "show",
        "Every setting of run and reap, and those of export a file gives: the effective value "
        "and where it came from");
    show->add_option("--name", a.name, "As for `mcpwarden run --name N` (its [server.N] section)");
    show->add_option("--destination", a.destination,
                     "As for `mcpwarden export --name D` (its [export.D] section)");
    show->add_flag("--json", a.json_out, "JSON output (docs/config-json.md)");
    show->add_option("command", a.command, "As for `mcpwarden run -- CMD...`, after --")
        ->expected(-1);
    auto* check = sub->add_subcommand(
        "check", "Validate the settings files: unknown keys, wrong types, bad values");
    check->add_flag("--json", a.json_out, "JSON output (docs/config-json.md)");
    return Bound{sub, [=] {
                     if (show->parsed()) return config_show(a);
                     if (check->parsed()) return config_check(a);
                     return 2;
                 }};
});

}  // namespace
}  // namespace warden::cli
