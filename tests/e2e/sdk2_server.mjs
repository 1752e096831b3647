#!/usr/bin/env node
// A dual-era MCP server on the official SDK v2 (@modelcontextprotocol/server, serveStdio): it
// answers a 2026-07-28 client (server/discover, _meta on every request) and a legacy one
// (initialize) from the same factory, the way a server moved to SDK v2 does.
//
//   node sdk2_server.mjs [--ttl-ms N] [--cache-scope public|private]
//
// What it serves, so a conformance run touches each part of the protocol:
//   tool `echo` {text}      -> "echo: TEXT"
//   tool `confirm` {action} -> on the 2026 era an input_required result (an elicitation);
//                              the retry with inputResponses answers "confirmed ACTION" or
//                              "declined ACTION" (on the legacy era the SDK asks with an
//                              elicitation/create request instead)
//   resource `memo://note`  -> the text "a note"
//   subscriptions/listen    -> served by serveStdio itself (acknowledged, left open)
// Cache hints (ttlMs, cacheScope) ride on the list and discover results when given.
import { McpServer, inputRequired, acceptedContent } from "@modelcontextprotocol/server";
import { serveStdio } from "@modelcontextprotocol/server/stdio";
import * as z from "zod/v4";

function parseArgs(argv) {
  const opts = { ttlMs: undefined, cacheScope: undefined };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === "--ttl-ms") opts.ttlMs = Number(argv[++i]);
    else if (argv[i] === "--cache-scope") opts.cacheScope = argv[++i];
    else {
      process.stderr.write(`sdk2_server: unknown option ${argv[i]}\n`);
      process.exit(2);
    }
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
const confirmation = z.object({ ok: z.boolean() });

function cacheHints() {
  const hint = {};
  if (opts.ttlMs !== undefined) hint.ttlMs = opts.ttlMs;
  if (opts.cacheScope !== undefined) hint.cacheScope = opts.cacheScope;
  if (Object.keys(hint).length === 0) return undefined;
  const methods = ["server/discover", "tools/list", "resources/list", "resources/templates/list", "resources/read", "prompts/list"];
  return Object.fromEntries(methods.map((m) => [m, hint]));
}

function build() {
  const server = new McpServer(
    { name: "mcpwarden-sdk2-test-server", version: "1.0.0" },
    { capabilities: { tools: {}, resources: { subscribe: true } }, cacheHints: cacheHints() },
  );
  server.registerTool(
    "echo",
    { description: "Echoes its text", inputSchema: z.object({ text: z.string() }) },
    async ({ text }) => ({ content: [{ type: "text", text: `echo: ${text}` }] }),
  );
  server.registerTool(
    "confirm",
    { description: "Asks the client to confirm an action", inputSchema: z.object({ action: z.string() }) },
    async ({ action }, ctx) => {
      // Written once for both eras: on a legacy connection the SDK turns the input_required
      // result into a server->client elicitation/create request and re-enters the handler.
      const answer = acceptedContent(ctx.mcpReq.inputResponses, "confirm", confirmation);
      if (answer === undefined) {
        return inputRequired({
          inputRequests: {
            confirm: inputRequired.elicit({ message: `Confirm ${action}?`, requestedSchema: confirmation }),
          },
        });
      }
      return { content: [{ type: "text", text: `${answer.ok ? "confirmed" : "declined"} ${action}` }] };
    },
  );
  server.registerResource(
    "note",
    "memo://note",
    { description: "A short note", mimeType: "text/plain" },
    async (uri) => ({ contents: [{ uri: uri.href, mimeType: "text/plain", text: "a note" }] }),
  );
  return server;
}

serveStdio(build);
