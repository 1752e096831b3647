#include "clients/config_doc.hpp"

#include <algorithm>

#include <fmt/format.h>
#include <toml++/toml.h>

#include "clients/toml_scan.hpp"

namespace warden::clients {

std::string_view scope_name(Scope s) {
    switch (s) {
        case Scope::User:
            return "user";
        case Scope::Project:
            return "project";
        case Scope::Local:
            return "local";
    }
    return "?";
}

std::string separator_before(std::string_view t, size_t at) {
    size_t b = at;
    while (b > 0 && (t[b - 1] == ' ' || t[b - 1] == '\t' || t[b - 1] == '\r' || t[b - 1] == '\n'))
        --b;
    std::string_view run = t.substr(b, at - b);
    size_t nl = run.rfind('\n');
    if (nl == std::string_view::npos) return " ";
    if (nl > 0 && run[nl - 1] == '\r') --nl;
    return std::string(run.substr(nl));
}

namespace {

bool is_blank(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

bool all_blank(std::string_view s) {
    for (char c : s)
        if (!is_blank(c)) return false;
    return true;
}

bool remote_type(std::string_view type) {
    return type == "http" || type == "sse" || type == "streamable-http" ||
           type == "streamableHttp" || type == "streamable_http";
}

// ---- JSON ----

void json_entry(std::string_view t, const std::string& name, const JsonValue& v, Scope scope,
                const std::string& project, std::vector<ServerEntry>& out) {
    if (!v.is_object()) return;
    ServerEntry e;
    e.scope = scope;
    e.project = project;
    e.name = name;
    const JsonValue* type = v.find("type");
    e.remote = v.find("url") || v.find("serverUrl") || v.find("httpUrl") ||
               (type && type->is_string() && remote_type(type->str));
    const JsonValue* disabled = v.find("disabled");
    const JsonValue* enabled = v.find("enabled");
    e.disabled = (disabled && disabled->kind == JsonValue::Kind::Bool && disabled->boolean) ||
                 (enabled && enabled->kind == JsonValue::Kind::Bool && !enabled->boolean);

    const JsonValue* command = v.find("command");
    if (!command) {
        if (e.remote) out.push_back(std::move(e));
        return;  // neither stdio nor remote (e.g. a Zed extension server): not ours
    }
    // The object holding the program and its args: the entry, or Zed's older
    // "command": {"path", "args", "env"}.
    const JsonValue* holder = &v;
    const JsonMember* program = v.member("command");
    if (command->is_object()) {
        holder = command;
        program = command->member("path");
    }
    if (!program || !program->value.is_string()) {
        e.problem =
            command->is_object() ? "command.path is not a string" : "command is not a string";
        out.push_back(std::move(e));
        return;
    }
    e.program = {program->value.span, program->value.str};

    size_t program_index = static_cast<size_t>(program - holder->members.data());
    const JsonMember* args = holder->member("args");
    if (args) {
        if (!args->value.is_array()) {
            e.problem = "args is not an array";
        } else {
            e.has_args = true;
            e.args_span = args->value.span;
            for (const auto& item : args->value.items) {
                if (!item.is_string()) {
                    e.problem = "args holds a value that is not a string";
                    break;
                }
                e.args.push_back({item.span, item.str});
            }
            size_t args_index = static_cast<size_t>(args - holder->members.data());
            std::string_view between =
                t.substr(args->value.span.end, program->key_span.begin - args->value.span.end);
            if (args_index + 1 == program_index && !between.empty() && between[0] == ',' &&
                all_blank(between.substr(1))) {
                e.args_before_program = true;
                e.args_member = {args->key_span.begin, program->key_span.begin};
            }
        }
    }

    // How this file spells a member: the program member's "key: value" gap when it is plain
    // spaces, and its line break and indentation.
    std::string_view gap =
        t.substr(program->key_span.end, program->value.span.begin - program->key_span.end);
    if (gap.empty() || gap[0] != ':' || !all_blank(gap.substr(1)) ||
        gap.find('\n') != std::string_view::npos)
        gap = ": ";
    e.insert_at = program->key_span.begin;
    e.args_key = "\"args\"" + std::string(gap);
    e.insert_suffix = "," + separator_before(t, program->key_span.begin);
    out.push_back(std::move(e));
}

// A key that repeats in one object: JSON parsers keep the last member, so the client never
// reads an earlier one. Returns the member that replaces `m`, or null when `m` is the last.
const JsonMember* replaced_by(const JsonValue& object, const JsonMember& m) {
    const JsonMember* last = object.member(m.key);
    return last == &m ? nullptr : last;
}

std::string defined_again(std::string_view t, std::string_view what, const JsonMember& later) {
    return fmt::format("{} is defined again at line {}: the client reads only that one", what,
                       position_of(t, later.key_span.begin).line);
}

// Every server of one map, in file order. A server whose name repeats later in the map is
// listed with a problem and never edited: wrapping it would change nothing the client runs,
// and telling the two apart by name alone would edit the wrong one.
void json_server_map(std::string_view t, const JsonValue* map, Scope scope,
                     const std::string& project, std::vector<ServerEntry>& out) {
    if (!map || !map->is_object()) return;
    for (const auto& m : map->members) {
        size_t listed = out.size();
        json_entry(t, m.key, m.value, scope, project, out);
        if (const JsonMember* later = replaced_by(*map, m); later && out.size() > listed)
            out.back().problem = defined_again(t, "the name", *later);
    }
}

Result<std::vector<ServerEntry>> read_json(std::string_view t, Layout layout, Scope scope) {
    auto root = parse_jsonc(t);
    if (!root) return root.error();
    std::vector<ServerEntry> out;
    if (!root->is_object()) return out;
    switch (layout) {
        case Layout::McpServers:
            json_server_map(t, root->find("mcpServers"), scope, {}, out);
            break;
        case Layout::Servers:
            json_server_map(t, root->find("servers"), scope, {}, out);
            break;
        case Layout::ContextServers:
            json_server_map(t, root->find("context_servers"), scope, {}, out);
            break;
        case Layout::ClaudeJson: {
            json_server_map(t, root->find("mcpServers"), Scope::User, {}, out);
            const JsonValue* projects = root->find("projects");
            if (projects && projects->is_object())
                for (const auto& p : projects->members) {
                    if (!p.value.is_object()) continue;
                    size_t listed = out.size();
                    json_server_map(t, p.value.find("mcpServers"), Scope::Local, p.key, out);
                    if (const JsonMember* later = replaced_by(*projects, p))
                        for (size_t i = listed; i < out.size(); ++i)
                            out[i].problem = defined_again(t, "its project", *later);
                }
            break;
        }
        case Layout::CodexToml:
            break;
    }
    return out;
}

// ---- TOML ----

size_t offset_of(std::string_view t, const toml::source_position& p) {
    return toml_offset_of(t, p.line, p.column);
}

size_t line_start(std::string_view t, size_t at) {
    size_t nl = t.rfind('\n', at == 0 ? 0 : at - 1);
    if (at == 0 || nl == std::string_view::npos) return 0;
    return nl + 1;
}

// The key object (with its source region) of member `name` of table `tbl`.
const toml::key* find_key(const toml::table& tbl, std::string_view name) {
    for (auto it = tbl.begin(); it != tbl.end(); ++it)
        if (it->first.str() == name) return &it->first;
    return nullptr;
}

bool toml_string_at(std::string_view t, const toml::node& node, StringToken& out) {
    auto value = node.value<std::string>();
    if (!node.is_string() || !value) return false;
    size_t begin = offset_of(t, node.source().begin);
    if (begin >= t.size() || (t[begin] != '"' && t[begin] != '\'')) return false;
    out = {{begin, toml_value_end(t, begin)}, *value};
    return true;
}

void toml_entry(std::string_view t, const std::string& name, const toml::table& tbl, Scope scope,
                std::vector<ServerEntry>& out) {
    ServerEntry e;
    e.scope = scope;
    e.name = name;
    const toml::node* type = tbl.get("type");
    e.remote = tbl.contains("url") ||
               (type && type->value<std::string>() && remote_type(*type->value<std::string>()));
    const toml::node* enabled = tbl.get("enabled");
    e.disabled = enabled && enabled->is_boolean() && !*enabled->value<bool>();
    const toml::node* command = tbl.get("command");
    const toml::key* command_key = find_key(tbl, "command");
    if (!command || !command_key) {
        if (e.remote) out.push_back(std::move(e));
        return;
    }
    if (!toml_string_at(t, *command, e.program)) {
        e.problem = "command is not a string";
        out.push_back(std::move(e));
        return;
    }
    size_t command_at = offset_of(t, command_key->source().begin);

    if (const toml::node* args = tbl.get("args")) {
        const toml::array* arr = args->as_array();
        size_t begin = offset_of(t, args->source().begin);
        if (!arr || begin >= t.size() || t[begin] != '[') {
            e.problem = "args is not an array";
        } else {
            e.has_args = true;
            e.args_span = {begin, toml_value_end(t, begin)};
            auto spans = toml_array_items(t, e.args_span);
            if (spans.size() != arr->size()) {
                e.problem = "cannot locate the elements of args";
            } else {
                for (size_t i = 0; i < spans.size(); ++i) {
                    auto v = arr->get(i)->value<std::string>();
                    if (!arr->get(i)->is_string() || !v) {
                        e.problem = "args holds a value that is not a string";
                        break;
                    }
                    e.args.push_back({spans[i], *v});
                }
            }
            const toml::key* args_key = find_key(tbl, "args");
            size_t args_at = args_key ? offset_of(t, args_key->source().begin) : t.size();
            if (args_at < command_at) {
                size_t from = tbl.is_inline() ? args_at : line_start(t, args_at);
                size_t to = tbl.is_inline() ? command_at : line_start(t, command_at);
                std::string_view between = t.substr(e.args_span.end, to - e.args_span.end);
                bool adjacent = false;
                if (tbl.is_inline())
                    adjacent =
                        !between.empty() && between[0] == ',' && all_blank(between.substr(1));
                else
                    adjacent = all_blank(between) &&
                               std::count(between.begin(), between.end(), '\n') == 1 &&
                               t.substr(from, args_at - from) ==
                                   t.substr(to, command_at - to);  // same indent / dotted path
                if (adjacent) {
                    e.args_before_program = true;
                    e.args_member = {from, to};
                }
            }
        }
    }

    size_t key_end = offset_of(t, command_key->source().end);
    std::string_view gap = t.substr(key_end, e.program.span.begin - key_end);
    if (gap.empty() || gap.find('=') == std::string_view::npos ||
        !all_blank(gap.substr(0, gap.find('='))) || !all_blank(gap.substr(gap.find('=') + 1)) ||
        gap.find('\n') != std::string_view::npos)
        gap = " = ";
    e.args_key = "args" + std::string(gap);
    if (tbl.is_inline()) {
        e.insert_at = command_at;
        e.insert_suffix = ", ";
    } else {
        // Its own line, before the command line, with the same indentation (and dotted
        // path, for `mcp_servers.x.command = ...`).
        e.insert_at = line_start(t, command_at);
        e.insert_prefix = std::string(t.substr(e.insert_at, command_at - e.insert_at));
        size_t eol = t.find('\n', e.program.span.end);
        e.insert_suffix =
            (eol != std::string_view::npos && eol > 0 && t[eol - 1] == '\r') ? "\r\n" : "\n";
    }
    out.push_back(std::move(e));
}

Result<std::vector<ServerEntry>> read_toml(std::string_view t, Scope scope) {
    toml::table root;
    try {
        root = toml::parse(t);
    } catch (const toml::parse_error& err) {
        return Error::msg(fmt::format("{}:{}: {}", err.source().begin.line,
                                      err.source().begin.column, err.description()));
    }
    std::vector<ServerEntry> out;
    const toml::table* servers = root["mcp_servers"].as_table();
    if (!servers) return out;
    // toml++ keeps keys sorted; list the servers in file order, as the other formats do.
    struct Found {
        size_t at;
        std::string name;
        const toml::table* tbl;
    };
    std::vector<Found> found;
    for (auto it = servers->begin(); it != servers->end(); ++it)
        if (const toml::table* tbl = it->second.as_table())
            found.push_back(
                {offset_of(t, it->first.source().begin), std::string(it->first.str()), tbl});
    std::sort(found.begin(), found.end(),
              [](const Found& a, const Found& b) { return a.at < b.at; });
    for (const auto& f : found)
        toml_entry(t, f.name, *f.tbl, scope, out);
    return out;
}

}  // namespace

Result<std::vector<ServerEntry>> read_entries(std::string_view text, Format format, Layout layout,
                                              Scope file_scope) {
    if (format == Format::Toml) return read_toml(text, file_scope);
    return read_json(text, layout, file_scope);
}

}  // namespace warden::clients
