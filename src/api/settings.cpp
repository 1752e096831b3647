// The settings file (include/mcpwarden/settings.hpp, docs/SETTINGS.md).
//
// A file is read whole and checked whole before any of it is used: every key must be one the
// option table (src/shim/options.cpp) or the reap table below knows, of the TOML type its
// kind takes, with a value its setter accepts. What comes out is a list of entries per
// section, each with its line, and the problems, each with its line and column. The merge
// then walks the option table once and takes, for each key, the first source that has it:
// flag, MCPWARDEN_* variable, the matching [server.NAME] section (user's, then system's),
// [run] (user's, then system's), the built-in default. A problem in either file drops both
// files from that list — a half-applied file would be a configuration nobody wrote — and
// `run` refuses to start: the file may have been the one place a sandbox, a limit or a
// redaction was asked for, and a file that does not parse cannot say whether it was.
//
// The merged options are checked once more as a whole: an option that only a sandbox profile
// gives a meaning (--allow-read, --net, --require-sandbox, …) without a profile is an error,
// wherever it came from. Ignored, it would leave the user believing the server confined.
#include <fnmatch.h>
#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <exception>
#include <iterator>
#include <map>
#include <optional>
#include <string_view>

#include <toml++/toml.h>

#include "api/internal.hpp"
#include "export/settings.hpp"
#include "journal/export_position.hpp"
#include "mcpwarden/settings.hpp"
#include "reap/reap.hpp"
#include "shim/options.hpp"
#include "sys/fd.hpp"

namespace warden::api {
namespace {

using shim::OptionKind;
using shim::OptionSpec;

// The keys of [reap], the defaults of `mcpwarden reap`'s flags of the same names.
struct ReapKey {
    std::string_view key;
    std::string_view fallback;
    bool duration;  // else any string
};
constexpr ReapKey kReapKeys[] = {
    {"grace", "2s", true},
    {"interval", "5m", true},
    {"revoke-cmd", "", false},
    {"revoke-timeout", "30s", true},
};

// One key = value of a file, as the texts a flag would carry (a list: one per item).
struct Entry {
    std::string key;
    std::vector<std::string> values;
    int line = 0;
};

struct ServerSection {
    std::string name;
    std::string command_glob;  // `command = "…"`: matched against the server's command line
    int line = 0;
    std::vector<Entry> entries;
};

struct FileSettings {
    std::string path;
    bool exists = false;
    std::vector<Entry> run, reap;
    std::vector<ServerSection> servers;              // in file order
    std::vector<Entry> export_defaults;              // [export]
    std::vector<ServerSection> export_destinations;  // [export.NAME]: one destination each
    std::vector<SettingsProblem> problems;
};

SettingsProblem problem(const std::string& file, int line, int column, std::string message) {
    SettingsProblem p{file, line, column, std::move(message), {}};
    p.text = file.empty() ? p.message
                          : file + ":" + std::to_string(line) + ":" + std::to_string(column) +
                                ": " + p.message;
    return p;
}

SettingsProblem problem_at(const std::string& file, const toml::source_region& at,
                           std::string message) {
    return problem(file, static_cast<int>(at.begin.line), static_cast<int>(at.begin.column),
                   std::move(message));
}

std::string did_you_mean(const std::string& word, const std::vector<std::string>& candidates) {
    std::string best = closest_word(word, candidates);
    return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

std::string_view toml_type(const toml::node& n) {
    switch (n.type()) {
        case toml::node_type::string:
            return "a string";
        case toml::node_type::integer:
            return "an integer";
        case toml::node_type::floating_point:
            return "a float";
        case toml::node_type::boolean:
            return "a boolean";
        case toml::node_type::array:
            return "an array";
        case toml::node_type::table:
            return "a table";
        default:
            return "a date or time";
    }
}

std::string_view expected(OptionKind kind) {
    switch (kind) {
        case OptionKind::duration:
            return "a duration as a string (\"250ms\", \"2s\") or an integer of milliseconds";
        case OptionKind::size:
            return "a size as a string (\"64MiB\") or an integer of bytes";
        case OptionKind::boolean:
            return "true or false";
        case OptionKind::list:
            return "an array of strings";
        case OptionKind::integer:
            return "an integer (5) or its text (\"5\")";
        case OptionKind::text:
        case OptionKind::choice:
            break;
    }
    return "a string";
}

// The texts of a TOML value, when it is of a type `kind` takes.
std::optional<std::vector<std::string>> texts_of(const toml::node& n, OptionKind kind) {
    if (kind == OptionKind::list) {
        const toml::array* a = n.as_array();
        if (!a) return std::nullopt;
        std::vector<std::string> out;
        for (const toml::node& item : *a) {
            if (!item.is_string()) return std::nullopt;
            out.push_back(**item.as_string());
        }
        return out;
    }
    if (kind == OptionKind::boolean) {
        if (!n.is_boolean()) return std::nullopt;
        return std::vector<std::string>{**n.as_boolean() ? "true" : "false"};
    }
    if (n.is_string()) return std::vector<std::string>{**n.as_string()};
    if (n.is_integer() &&
        (kind == OptionKind::duration || kind == OptionKind::size || kind == OptionKind::integer))
        return std::vector<std::string>{std::to_string(**n.as_integer())};
    return std::nullopt;
}

std::vector<std::string> run_keys(bool in_run_section) {
    std::vector<std::string> out;
    for (const OptionSpec& row : shim::option_table())
        if (row.in_run_section || !in_run_section) out.emplace_back(row.key);
    return out;
}

// One key = value of [run] or [server.NAME] (`section` is how the messages name it).
void read_run_entry(FileSettings& f, const std::string& section, bool is_server, const toml::key& k,
                    const toml::node& v, std::vector<Entry>& into) {
    const std::string key(k.str());
    const OptionSpec* row = shim::find_option(key);
    if (!row || (!is_server && !row->in_run_section)) {
        std::string why = row ? "names one server: set it in a [server.NAME] section"
                              : "unknown key" + did_you_mean(key, run_keys(!is_server));
        f.problems.push_back(problem_at(f.path, k.source(), section + " " + key + ": " + why));
        return;
    }
    auto texts = texts_of(v, row->kind);
    if (!texts) {
        f.problems.push_back(problem_at(f.path, v.source(),
                                        section + " " + key + ": expected " +
                                            std::string(expected(row->kind)) + ", not " +
                                            std::string(toml_type(v))));
        return;
    }
    RunOptions scratch;
    for (const std::string& t : *texts) {
        if (auto st = row->set(scratch, t); !st) {
            f.problems.push_back(
                problem_at(f.path, v.source(), section + " " + key + ": " + st.error().message));
            return;
        }
    }
    into.push_back({key, std::move(*texts), static_cast<int>(k.source().begin.line)});
}

void read_reap_entry(FileSettings& f, const toml::key& k, const toml::node& v) {
    const std::string key(k.str());
    auto row = std::find_if(std::begin(kReapKeys), std::end(kReapKeys),
                            [&](const ReapKey& r) { return r.key == key; });
    if (row == std::end(kReapKeys)) {
        std::vector<std::string> keys;
        for (const ReapKey& r : kReapKeys)
            keys.emplace_back(r.key);
        f.problems.push_back(problem_at(
            f.path, k.source(), "[reap] " + key + ": unknown key" + did_you_mean(key, keys)));
        return;
    }
    if (!v.is_string()) {
        f.problems.push_back(problem_at(
            f.path, v.source(),
            "[reap] " + key + ": expected " +
                (row->duration ? "a duration as a string (\"2s\", \"5m\")" : "a string") +
                ", not " + std::string(toml_type(v))));
        return;
    }
    std::string text = **v.as_string();
    if (row->duration)
        if (auto d = reap::parse_duration(text); !d) {
            f.problems.push_back(
                problem_at(f.path, v.source(), "[reap] " + key + ": " + d.error().message));
            return;
        }
    f.reap.push_back({key, {text}, static_cast<int>(k.source().begin.line)});
}

void read_server_section(FileSettings& f, const toml::key& name, const toml::node& node) {
    const std::string section = "[server." + std::string(name.str()) + "]";
    const toml::table* t = node.as_table();
    if (!t) {
        f.problems.push_back(
            problem_at(f.path, node.source(),
                       section + ": expected a table, not " + std::string(toml_type(node))));
        return;
    }
    ServerSection s{std::string(name.str()), {}, static_cast<int>(name.source().begin.line), {}};
    for (auto&& [k, v] : *t) {
        if (k.str() == "command") {
            if (!v.is_string()) {
                f.problems.push_back(
                    problem_at(f.path, v.source(),
                               section +
                                   " command: expected a string (a pattern of the command line, "
                                   "as for a shell: \"npx -y @scope/server*\"), not " +
                                   std::string(toml_type(v))));
                continue;
            }
            s.command_glob = **v.as_string();
            continue;
        }
        read_run_entry(f, section, true, k, v, s.entries);
    }
    f.servers.push_back(std::move(s));
}

std::string value_of(const std::vector<Setting>& settings, const std::string& key) {
    for (const Setting& s : settings)
        if (s.key == key) return s.value;
    return {};
}

const Entry* find_entry(const std::vector<Entry>& entries, std::string_view key) {
    for (const Entry& e : entries)
        if (e.key == key) return &e;
    return nullptr;
}

// The text of an [export] value, when it is of a type its kind takes.
std::optional<std::string> export_text(const exporter::ConfigKey& row, const toml::node& v) {
    using exporter::ConfigKind;
    if (row.kind == ConfigKind::boolean) {
        if (!v.is_boolean()) return std::nullopt;
        return **v.as_boolean() ? "true" : "false";
    }
    if ((row.kind == ConfigKind::count || row.kind == ConfigKind::millis) && v.is_integer())
        return std::to_string(**v.as_integer());
    if (row.kind == ConfigKind::signals && v.is_array()) {
        std::string out;
        for (const toml::node& item : *v.as_array()) {
            if (!item.is_string()) return std::nullopt;
            out += (out.empty() ? "" : ",") + **item.as_string();
        }
        return out;
    }
    if (row.kind == ConfigKind::count || !v.is_string()) return std::nullopt;
    return **v.as_string();
}

std::string_view expected(exporter::ConfigKind kind) {
    switch (kind) {
        case exporter::ConfigKind::boolean:
            return "true or false";
        case exporter::ConfigKind::count:
            return "an integer";
        case exporter::ConfigKind::millis:
            return "a duration as a string (\"10s\") or an integer of milliseconds";
        case exporter::ConfigKind::signals:
            return "a string (\"traces,logs\") or an array of strings";
        default:
            return "a string";
    }
}

// [export] (destination empty) or one [export.NAME] section: each key one the exporter
// knows (export/settings.hpp), of a type its kind takes, with a value it accepts. A section
// that names both receivers is refused: one exporter sends to one receiver.
void read_export_entries(FileSettings& f, const std::string& destination, const toml::table& t,
                         std::vector<Entry>& into) {
    const std::string section = destination.empty() ? "[export]" : "[export." + destination + "]";
    for (auto&& [k, v] : t) {
        const std::string key(k.str());
        if (destination.empty() && v.is_table()) {
            if (!journal::valid_destination_name(key)) {
                f.problems.push_back(problem_at(
                    f.path, k.source(),
                    "[export." + key + "]: a destination's name is 1-64 of A-Z a-z 0-9 . _ -"));
                continue;
            }
            ServerSection d{key, {}, static_cast<int>(k.source().begin.line), {}};
            read_export_entries(f, key, *v.as_table(), d.entries);
            f.export_destinations.push_back(std::move(d));
            continue;
        }
        const exporter::ConfigKey* row = exporter::find_config_key(key);
        if (!row || (!destination.empty() && !row->per_destination)) {
            std::vector<std::string> keys;
            for (const exporter::ConfigKey& c : exporter::config_keys())
                if (c.per_destination || destination.empty()) keys.emplace_back(c.key);
            std::string why = row ? "applies to every destination: set it in [export]"
                                  : "unknown key" + did_you_mean(key, keys);
            f.problems.push_back(problem_at(f.path, k.source(), section + " " + key + ": " + why));
            continue;
        }
        auto text = export_text(*row, v);
        if (!text) {
            f.problems.push_back(problem_at(f.path, v.source(),
                                            section + " " + key + ": expected " +
                                                std::string(expected(row->kind)) + ", not " +
                                                std::string(toml_type(v))));
            continue;
        }
        if (std::string why = exporter::config_value_problem(*row, *text); !why.empty()) {
            f.problems.push_back(problem_at(f.path, v.source(), section + " " + why));
            continue;
        }
        into.push_back({key, {*text}, static_cast<int>(k.source().begin.line)});
    }
    if (find_entry(into, "otlp") && find_entry(into, "syslog"))
        f.problems.push_back(problem(
            f.path, find_entry(into, "syslog")->line, 1,
            section + " otlp and syslog name two receivers: one exporter sends to one (give "
                      "the other its own [export.NAME] section)"));
}

const toml::table* table_or_problem(FileSettings& f, const toml::key& k, const toml::node& v) {
    const toml::table* t = v.as_table();
    if (!t)
        f.problems.push_back(problem_at(f.path, v.source(),
                                        std::string(k.str()) + ": expected a table [" +
                                            std::string(k.str()) + "], not " +
                                            std::string(toml_type(v))));
    return t;
}

FileSettings load(const std::string& path) {
    FileSettings f;
    f.path = path;
    auto text = read_file(path);
    if (!text) {
        if (text.error().code != ENOENT && text.error().code != ENOTDIR)
            f.problems.push_back(problem(path, 0, 0, "cannot read: " + text.error().message));
        f.exists = text.error().code != ENOENT && text.error().code != ENOTDIR;
        return f;
    }
    f.exists = true;
    toml::table root;
    try {
        root = toml::parse(*text, path);
    } catch (const toml::parse_error& err) {
        f.problems.push_back(problem_at(path, err.source(), std::string(err.description())));
        return f;
    }
    for (auto&& [k, v] : root) {
        if (k.str() == "run") {
            if (const toml::table* t = table_or_problem(f, k, v))
                for (auto&& [rk, rv] : *t)
                    read_run_entry(f, "[run]", false, rk, rv, f.run);
        } else if (k.str() == "reap") {
            if (const toml::table* t = table_or_problem(f, k, v))
                for (auto&& [rk, rv] : *t)
                    read_reap_entry(f, rk, rv);
        } else if (k.str() == "server") {
            if (const toml::table* t = table_or_problem(f, k, v))
                for (auto&& [name, section] : *t)
                    read_server_section(f, name, section);
        } else if (k.str() == "export") {
            if (const toml::table* t = table_or_problem(f, k, v))
                read_export_entries(f, "", *t, f.export_defaults);
        } else {
            f.problems.push_back(problem_at(
                path, k.source(),
                std::string(k.str()) +
                    ": unknown key (the file has [run], [reap], [server.NAME], [export] and "
                    "[export.NAME] sections)" +
                    did_you_mean(std::string(k.str()), {"run", "reap", "server", "export"})));
        }
    }
    // toml++ keeps a table's keys sorted by name; the file's order is the order of lines.
    auto by_line = [](const auto& a, const auto& b) { return a.line < b.line; };
    std::sort(f.servers.begin(), f.servers.end(), by_line);
    std::sort(f.export_destinations.begin(), f.export_destinations.end(), by_line);
    std::sort(f.problems.begin(), f.problems.end(), [](const auto& a, const auto& b) {
        return std::pair(a.line, a.column) < std::pair(b.line, b.column);
    });
    return f;
}

// The user's file, then the system's (the order of precedence); empty paths are skipped.
// Adds the files that exist and the problems of both to `exist` and `problems`.
std::vector<FileSettings> load_all(const SettingsFiles& files, std::vector<std::string>& exist,
                                   std::vector<SettingsProblem>& problems) {
    std::vector<FileSettings> out;
    for (const std::string* p : {&files.user, &files.system}) {
        if (p->empty()) continue;
        FileSettings& f = out.emplace_back(load(*p));
        if (f.exists) exist.push_back(f.path);
        problems.insert(problems.end(), f.problems.begin(), f.problems.end());
    }
    return out;
}

std::string origin_of(const SettingsFiles& files, const FileSettings& f) {
    return f.path == files.user ? "user" : "system";
}

std::string join(const std::vector<std::string>& items, std::string_view sep) {
    std::string out;
    for (const std::string& i : items)
        out += (out.empty() ? "" : std::string(sep)) + i;
    return out;
}

// The items of a MCPWARDEN_* variable that is set and not empty (a list: split at the row's
// separator).
std::optional<std::vector<std::string>> env_values(const OptionSpec& row) {
    const char* v = std::getenv(shim::env_name(row.key).c_str());
    if (!v || !*v) return std::nullopt;
    std::string_view text(v);
    if (row.kind != OptionKind::list) return std::vector<std::string>{std::string(text)};
    std::vector<std::string> out;
    for (size_t pos = 0;;) {
        size_t colon = text.find(row.separator, pos);
        out.emplace_back(text.substr(pos, colon - pos));
        if (colon == std::string_view::npos) break;
        pos = colon + 1;
    }
    return out;
}

// The section of `f` for this server: by name first, else the first whose command pattern
// matches the command line (its words joined by spaces).
const ServerSection* matching_server(const FileSettings& f, const std::string& name,
                                     const std::vector<std::string>& command) {
    for (const ServerSection& s : f.servers)
        if (s.name == name) return &s;
    const std::string line = join(command, " ");
    for (const ServerSection& s : f.servers)
        if (!s.command_glob.empty() && !command.empty() &&
            ::fnmatch(s.command_glob.c_str(), line.c_str(), 0) == 0)
            return &s;
    return nullptr;
}

std::string basename_of(const std::string& path) {
    size_t slash = path.rfind('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

std::string where_in(const FileSettings& f, const Entry& e) {
    return f.path + ":" + std::to_string(e.line);
}

// The options that mean something only under a sandbox profile.
constexpr std::string_view kSandboxOnly[] = {"allow-read",    "allow-write", "net",
                                             "allow-connect", "env-allow",   "require-sandbox",
                                             "allow-fetch"};

// What is wrong when one of them is given (by a flag, a variable or a file) and no sandbox
// profile is: it would confine nothing, silently. "" when nothing is. A sandbox turned off
// on purpose (`--sandbox off`, `sandbox = "off"` in a [server.NAME] section under a [run]
// that confines) leaves the lists unused, as asked; --require-sandbox is refused even then,
// since nothing could meet it. The message names where the option came from.
std::string sandbox_option_without_profile(const RunOptions& o,
                                           const std::vector<Setting>& settings) {
    if (o.sandbox != Sandbox::Off) return {};
    std::string off_from;  // where `sandbox = off` was said, when it was
    for (const Setting& s : settings)
        if (s.key == "sandbox" && s.origin != "built-in") off_from = s.where;
    for (const Setting& s : settings) {
        if (std::find(std::begin(kSandboxOnly), std::end(kSandboxOnly), s.key) ==
                std::end(kSandboxOnly) ||
            s.origin == "built-in" || s.value.empty())
            continue;
        const bool require = s.key == "require-sandbox";
        if (s.key == "allow-fetch" && !o.allow_fetch) continue;  // `allow-fetch = false`
        if (require ? !o.require_sandbox : !off_from.empty()) continue;
        const bool in_file = s.origin != "flag" && s.origin != "env";
        const std::string what = in_file ? s.where + ": " + s.key : s.where;
        const std::string fix = in_file ? "set sandbox = \"strict\" or \"workspace\" beside it"
                                        : "add --sandbox strict or --sandbox workspace";
        const std::string why = require ? "without a profile there is no sandbox to require"
                                        : "without a profile it confines nothing";
        return what + " needs a sandbox profile, and " +
               (off_from.empty() ? "none is set" : "the sandbox is off (" + off_from + ")") + ": " +
               fix + ", or leave it out (" + why + ")";
    }
    return {};
}

}  // namespace

SettingsFiles default_settings_files() {
    std::string dir;
    if (const char* x = std::getenv("XDG_CONFIG_HOME"); x && *x == '/') {
        dir = x;
    } else if (const char* h = std::getenv("HOME"); h && *h) {
        dir = std::string(h) + "/.config";
    } else {
        passwd pw{};
        passwd* found = nullptr;
        char buf[4096];
        if (::getpwuid_r(::getuid(), &pw, buf, sizeof buf, &found) == 0 && found && found->pw_dir &&
            *found->pw_dir)
            dir = std::string(found->pw_dir) + "/.config";
    }
    return SettingsFiles{dir.empty() ? "" : dir + "/mcpwarden/config.toml",
                         "/etc/mcpwarden/config.toml"};
}

Result<RunSettings> run_settings(const std::vector<std::pair<std::string, std::string>>& flags,
                                 std::vector<std::string> command, const SettingsFiles& files) {
    try {
        RunSettings out;
        std::map<std::string, std::vector<std::string>> given;
        for (const auto& [key, value] : flags) {
            if (!shim::find_option(key)) return Error{"unknown option --" + key, EINVAL};
            given[key].push_back(value);
        }
        std::vector<FileSettings> loaded = load_all(files, out.files, out.problems);
        if (!out.problems.empty()) loaded.clear();  // the built-in defaults, not half a file

        // The name a [server.NAME] section is matched by: --name, MCPWARDEN_NAME, or the
        // basename of the command (what the journal shows when no name is given).
        std::string name = command.empty() ? "" : basename_of(command[0]);
        if (auto it = given.find("name"); it != given.end())
            name = it->second.back();
        else if (auto env = env_values(*shim::find_option("name")))
            name = env->back();
        // The layers below the variables, highest first.
        struct Layer {
            const FileSettings* file;
            const std::vector<Entry>* entries;
            std::string origin;
        };
        std::vector<Layer> layers;
        for (const FileSettings& f : loaded)
            if (const ServerSection* s = matching_server(f, name, command)) {
                layers.push_back({&f, &s->entries, "server"});
                out.servers.push_back(f.path + ":" + std::to_string(s->line) + " [server." +
                                      s->name + "]");
            }
        for (const FileSettings& f : loaded)
            layers.push_back({&f, &f.run, origin_of(files, f)});

        RunOptions o;
        for (const OptionSpec& row : shim::option_table()) {
            const std::string key(row.key), env = shim::env_name(row.key);
            Setting s{"run", key, std::string(row.fallback), "built-in", "built-in"};
            std::optional<std::vector<std::string>> values;
            if (auto it = given.find(key); it != given.end()) {
                values = it->second;
                s.origin = "flag";
                s.where = "--" + key;
            } else if ((values = env_values(row))) {
                s.origin = "env";
                s.where = env;
            } else {
                for (const Layer& l : layers)
                    if (const Entry* e = find_entry(*l.entries, key)) {
                        values = e->values;
                        s.origin = l.origin;
                        s.where = where_in(*l.file, *e);
                        break;
                    }
            }
            if (values) {
                s.value = join(*values, ":");
                for (const std::string& v : *values)
                    if (auto st = shim::set_option(o, key, v); !st)
                        return Error{
                            st.error().message + (s.origin == "env" ? " (from " + env + ")" : ""),
                            EINVAL};
            }
            out.settings.push_back(std::move(s));
        }
        if (std::string why = sandbox_option_without_profile(o, out.settings); !why.empty())
            return Error{why, EINVAL};
        o.command = std::move(command);
        o.settings_files = out.files;
        if (!out.problems.empty())
            o.settings_error = out.problems.front().text +
                               (out.problems.size() > 1
                                    ? " (and " + std::to_string(out.problems.size() - 1) + " more)"
                                    : "");
        out.options = std::move(o);
        return out;
    } catch (const std::exception& e) {
        return internal_error("settings", e);
    }
}

ReapSettings reap_settings(const SettingsFiles& files) {
    ReapSettings out;
    try {
        std::vector<FileSettings> loaded = load_all(files, out.files, out.problems);
        auto legacy = reap::load_config();
        if (!legacy) out.problems.push_back(problem("", 0, 0, legacy.error().message));
        for (const ReapKey& row : kReapKeys) {
            Setting s{"reap", std::string(row.key), std::string(row.fallback), "built-in",
                      "built-in"};
            const Entry* found = nullptr;
            for (const FileSettings& f : loaded)
                if ((found = find_entry(f.reap, row.key))) {
                    s.value = found->values.front();
                    s.origin = origin_of(files, f);
                    s.where = where_in(f, *found);
                    break;
                }
            if (!found && legacy && !legacy->source.empty()) {
                if (row.key == "revoke-cmd" && legacy->revoke_cmd)
                    s.value = *legacy->revoke_cmd;
                else if (row.key == "revoke-timeout" && legacy->revoke_timeout)
                    s.value = reap::format_duration(*legacy->revoke_timeout);
                else
                    s.value = std::string(row.fallback);
                if (s.value != row.fallback) {
                    s.origin = "reap.toml";
                    s.where = legacy->source;
                }
            }
            out.settings.push_back(std::move(s));
        }
    } catch (const std::exception& e) {
        out.problems.push_back(problem("", 0, 0, internal_error("settings", e).message));
    }
    return out;
}

std::string ReapSettings::value(const std::string& key) const {
    return value_of(settings, key);
}

bool ReapSettings::from_file(const std::string& key) const {
    for (const Setting& s : settings)
        if (s.key == key) return s.origin != "built-in";
    return false;
}

ExportSettings export_settings(const std::string& destination, const SettingsFiles& files) {
    ExportSettings out;
    try {
        std::vector<FileSettings> loaded = load_all(files, out.files, out.problems);
        if (!out.problems.empty()) return out;  // neither file: not half of one
        out.destination = destination;
        for (const FileSettings& f : loaded)
            if (const Entry* e = find_entry(f.export_defaults, "name");
                e && out.destination.empty())
                out.destination = e->values.front();
        struct Layer {
            const FileSettings* file;
            const std::vector<Entry>* entries;
            std::string section;
        };
        std::vector<Layer> layers;
        for (const FileSettings& f : loaded)
            for (const ServerSection& d : f.export_destinations)
                if (d.name == out.destination)
                    layers.push_back({&f, &d.entries, "export." + d.name});
        for (const FileSettings& f : loaded)
            layers.push_back({&f, &f.export_defaults, "export"});
        for (const exporter::ConfigKey& row : exporter::config_keys())
            for (const Layer& l : layers)
                if (const Entry* e = find_entry(*l.entries, row.key)) {
                    out.settings.push_back({l.section, e->key, e->values.front(),
                                            origin_of(files, *l.file), where_in(*l.file, *e)});
                    break;
                }
    } catch (const std::exception& e) {
        out.problems.push_back(problem("", 0, 0, internal_error("settings", e).message));
    }
    return out;
}

std::string ExportSettings::value(const std::string& key) const {
    return value_of(settings, key);
}

SettingsCheck check_settings(const SettingsFiles& files) {
    SettingsCheck out;
    try {
        (void)load_all(files, out.files, out.problems);
        for (const OptionSpec& row : shim::option_table())
            if (auto values = env_values(row)) {
                RunOptions scratch;
                for (const std::string& v : *values)
                    if (auto st = row.set(scratch, v); !st) {
                        out.problems.push_back(
                            problem("", 0, 0, shim::env_name(row.key) + ": " + st.error().message));
                        break;
                    }
            }
        if (auto legacy = reap::load_config(); !legacy)
            out.problems.push_back(problem("", 0, 0, legacy.error().message));
    } catch (const std::exception& e) {
        out.problems.push_back(problem("", 0, 0, internal_error("settings", e).message));
    }
    return out;
}

std::string closest_word(const std::string& word, const std::vector<std::string>& candidates) {
    // Optimal string alignment distance: insertions, deletions, substitutions and swaps of
    // two neighbours ("rnu" → "run") cost 1 each.
    auto distance = [](std::string_view a, std::string_view b) {
        std::vector<std::vector<size_t>> d(a.size() + 1, std::vector<size_t>(b.size() + 1));
        for (size_t i = 0; i <= a.size(); ++i)
            d[i][0] = i;
        for (size_t j = 0; j <= b.size(); ++j)
            d[0][j] = j;
        for (size_t i = 1; i <= a.size(); ++i)
            for (size_t j = 1; j <= b.size(); ++j) {
                size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
                d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
                if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                    d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
            }
        return d[a.size()][b.size()];
    };
    // Close enough to be a typo: one edit in a short word, two in a longer one.
    const size_t allowed = word.size() <= 4 ? 1 : 2;
    std::string best;
    size_t best_distance = allowed + 1;
    for (const std::string& c : candidates)
        if (size_t d = distance(word, c); d < best_distance) {
            best = c;
            best_distance = d;
        }
    return best;
}

}  // namespace warden::api
