// What a command line says, by the conventions of the MCP ecosystem: the package a runner
// (`npx`, `uvx`, `npm exec`, …) was asked for, whether an argument names an MCP server,
// whether a process only launches another (`sh -c`, `env`, a runner), and the command a
// launch ends up running, reduced to words that a process's argv and a client config's
// command + args both reduce to, so that the two sides meet.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "proc/process.hpp"

namespace warden::inventory {

std::string lower(std::string_view s);
std::string_view basename(std::string_view p);
bool starts_with(std::string_view s, std::string_view p);
bool ends_with(std::string_view s, std::string_view p);

// "@scope/pkg@1.2.3" -> "pkg"; "mcp-server-git==0.6" -> "mcp-server-git".
std::string package_name(std::string_view a);
// An argument that names an MCP server by the conventions of the ecosystem.
bool mcp_name(std::string_view arg);
// Runner that fetches and starts a package; its display name ("npx", "uv run") or "".
std::string runner(const std::vector<std::string>& argv);
bool is_shell(std::string_view a0);
// A process that launches another and otherwise does nothing of its own.
bool is_wrapper(const std::vector<std::string>& argv);
// `mcpwarden run …`: a relay or a keeper, which supervises a tree and is none of its members.
bool is_supervisor(const Process& p);

std::string join_argv(const std::vector<std::string>& v);   // each word escaped
std::string join_words(const std::vector<std::string>& v);  // as they are

// The command a launch ends up running, as words to compare with a declared one.
std::vector<std::string> normalized_command(std::vector<std::string> argv);
std::vector<std::string> normalized_declared(const std::string& command,
                                             const std::vector<std::string>& args);

}  // namespace warden::inventory
