// src/clients — MCP client configs: discover, wrap, unwrap.
//
// This folder owns everything mcpwarden knows about the files in which MCP clients
// (Claude Code, Claude Desktop, Cursor, VS Code, Windsurf, Zed, Codex, Gemini CLI, Cline)
// declare their servers: where those files are (discover.hpp), which servers they declare
// and where each sits in the text (config_doc.hpp over jsonc.hpp and toml_scan.hpp), and
// how to route a stdio server through `mcpwarden run` and back (wrap.hpp) by editing only
// the bytes of its command and args, so comments, key order and formatting survive.
// config_file.hpp applies that to files on disk: atomic replace, one-time backup
// (atomic_file.hpp), `--dry-run` diffs (line_diff.hpp). It never expands a variable, never
// touches a remote server, and never writes a file it could not parse. docs/CLIENTS.md
// lists the files and hazards per client. The inventory's callers hand its scan
// declared_servers_here().
#pragma once

#include "clients/config_doc.hpp"
#include "clients/config_file.hpp"
#include "clients/discover.hpp"
#include "clients/wrap.hpp"
