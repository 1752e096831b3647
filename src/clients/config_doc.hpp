// The MCP servers a client config file declares, and where each one sits in the text.
//
// One format-neutral view over JSON(C) and TOML configs: for every server entry, its name,
// whether it is a stdio server at all, and the byte spans of the two values that wrapping
// touches (the program and its argument list), plus how to spell an `args` member when the
// entry has none. Reading never changes the text; wrap.hpp turns these spans into edits.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "clients/jsonc.hpp"
#include "sys/result.hpp"

namespace warden::clients {

// Where a server is declared: for every user of the machine's account, for one project
// (a file inside the project), or "local" (Claude Code: per project, inside ~/.claude.json).
enum class Scope { User, Project, Local };
std::string_view scope_name(Scope s);

enum class Format { Json, Toml };

// Where the server map lives in a file.
enum class Layout {
    McpServers,      // {"mcpServers": {NAME: entry}}
    Servers,         // VS Code: {"servers": {NAME: entry}}
    ContextServers,  // Zed: {"context_servers": {NAME: entry}}
    ClaudeJson,      // ~/.claude.json: top-level mcpServers + projects[DIR].mcpServers
    CodexToml,       // [mcp_servers.NAME]
};

// A string value: its bytes in the text (quotes included) and what it decodes to.
struct StringToken {
    Span span;
    std::string value;
};

struct ServerEntry {
    Scope scope = Scope::User;
    std::string project;  // Local scope: the projects[] key of ~/.claude.json
    std::string name;
    bool remote = false;    // url / serverUrl / httpUrl, or type http / sse
    bool disabled = false;  // "disabled": true, "enabled": false
    // Why the entry cannot be wrapped or unwrapped (e.g. "args is not an array of strings");
    // empty when it can. Remote entries are never edited and carry no problem.
    std::string problem;

    StringToken program;  // `command` (Zed's older shape: `command.path`)
    bool has_args = false;
    Span args_span;  // the whole array, brackets included
    std::vector<StringToken> args;

    // Adding an `args` member to an entry that has none: insert
    // insert_prefix + args_key + "[...]" + insert_suffix at byte insert_at.
    size_t insert_at = 0;
    std::string insert_prefix;
    std::string insert_suffix;
    std::string args_key;

    // True when the args member stands right before the program member, exactly where
    // wrap inserts one; `args_member` then spans that member and its separator.
    bool args_before_program = false;
    Span args_member;
};

// The layout that precedes a member or element starting at byte `at`: its line break and
// indentation ("\n    ", with "\r\n" when the file uses it) when it starts a line, else
// one space. New members and elements copy it so they look like their neighbours.
std::string separator_before(std::string_view text, size_t at);

// Lists the server entries of a config text. A text that does not parse gives an error
// "LINE:COLUMN: message". `file_scope` is the scope of the file (ClaudeJson files say
// Local themselves for their per-project maps).
Result<std::vector<ServerEntry>> read_entries(std::string_view text, Format format, Layout layout,
                                              Scope file_scope);

}  // namespace warden::clients
