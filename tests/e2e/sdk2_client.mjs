#!/usr/bin/env node
// A real MCP client on the official SDK v2 (@modelcontextprotocol/client): the conformance
// driver for the 2026-07-28 protocol, run against a server directly and through `mcpwarden run`.
//
//   node sdk2_client.mjs --mode legacy|auto|pin [--call NAME [--args JSON]]... [--read URI]...
//                        [--listen URI] [--rounds N [--pause MS]] [--timeout MS] -- COMMAND [ARGS...]
//
// How the SDK chooses the era (ClientOptions.versionNegotiation):
//   legacy  no negotiation: initialize + notifications/initialized, byte-identical to SDK v1.
//   auto    server/discover first, on a short-lived SIBLING copy of the server command (spawned
//           from the same parameters, stderr discarded, reaped before connect() goes on); a
//           modern answer makes the session 2026-07-28 (no initialize, _meta on every request),
//           anything else falls back to initialize on the real, second, process.
//   pin     as auto, pinned to 2026-07-28: no fallback, a legacy server fails connect().
//
// Prints ONE JSON object per round (listing, calls, reads, the listen stream's honoured filter)
// and closes the transport the SDK's way. Cache hints and the era appear in the output as the
// client saw them, so a relay that altered them shows. A failed connect prints
// {"ok":false,"error":...} and exits 1: the same failure through the shim is the same answer.
import { Client } from "@modelcontextprotocol/client";
import { StdioClientTransport } from "@modelcontextprotocol/client/stdio";

function usage(message) {
  process.stderr.write(`sdk2_client: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { mode: "legacy", calls: [], reads: [], listen: null, rounds: 1, pause: 0, timeout: 30000 };
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") break;
    if (a === "--mode") opts.mode = argv[++i];
    else if (a === "--call") opts.calls.push({ name: argv[++i], arguments: {} });
    else if (a === "--args") {
      if (opts.calls.length === 0) usage("--args must follow --call");
      try {
        opts.calls[opts.calls.length - 1].arguments = JSON.parse(argv[++i]);
      } catch (e) {
        usage(`--args: ${e.message}`);
      }
    } else if (a === "--read") opts.reads.push(argv[++i]);
    else if (a === "--listen") opts.listen = argv[++i];
    else if (a === "--rounds" || a === "--pause" || a === "--timeout") {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n < 0) usage(`${a} needs a whole number`);
      opts[a.slice(2)] = n;
    } else usage(`unknown option ${a}`);
  }
  if (!["legacy", "auto", "pin"].includes(opts.mode)) usage(`--mode ${opts.mode}: legacy, auto or pin`);
  if (i >= argv.length - 1) usage("missing -- COMMAND");
  return { ...opts, command: argv[i + 1], args: argv.slice(i + 2) };
}

function negotiation(mode) {
  if (mode === "auto") return { mode: "auto" };
  if (mode === "pin") return { mode: { pin: "2026-07-28" } };
  return { mode: "legacy" };
}

function emit(object) {
  return new Promise((resolve) => process.stdout.write(JSON.stringify(object) + "\n", resolve));
}

// An error as the user of the SDK sees it: its code and message, nothing of the stack.
function failure(e) {
  return { code: e.code ?? null, message: e.message };
}

async function round(client, opts, requestOptions, out) {
  const listed = await client.listTools({}, { ...requestOptions, cacheMode: "bypass" });
  out.tools = listed.tools.map((t) => t.name);
  out.listHints = { ttlMs: listed.ttlMs ?? null, cacheScope: listed.cacheScope ?? null };
  out.calls = [];
  for (const call of opts.calls) {
    try {
      out.calls.push({ name: call.name, result: await client.callTool(call, requestOptions) });
    } catch (e) {
      out.calls.push({ name: call.name, error: failure(e) });
    }
  }
  out.reads = [];
  for (const uri of opts.reads) {
    try {
      out.reads.push({ uri, result: await client.readResource({ uri }, requestOptions) });
    } catch (e) {
      out.reads.push({ uri, error: failure(e) });
    }
  }
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const transport = new StdioClientTransport({
    command: opts.command,
    args: opts.args,
    env: { ...process.env },
    stderr: "inherit",
  });
  const client = new Client(
    { name: "mcpwarden-e2e-sdk2-client", version: "0.2.0" },
    { capabilities: { elicitation: {} }, versionNegotiation: negotiation(opts.mode) },
  );
  // The confirm tool's question, on either era: accepted, so both halves of the call happen.
  client.setRequestHandler("elicitation/create", async () => ({ action: "accept", content: { ok: true } }));
  const requestOptions = { timeout: opts.timeout };

  let listening = null;
  try {
    await client.connect(transport, requestOptions);
    for (let r = 0; r < opts.rounds; r++) {
      if (r > 0) await new Promise((resolve) => setTimeout(resolve, opts.pause));
      const out = { ok: true, protocolVersion: client.getNegotiatedProtocolVersion() ?? null };
      out.serverInfo = client.getServerVersion() ?? null;
      await round(client, opts, requestOptions, out);
      if (opts.listen !== null && r === 0) {
        try {
          listening = await client.listen({ resourceSubscriptions: [opts.listen] }, requestOptions);
          out.listen = { honoredFilter: listening.honoredFilter };
        } catch (e) {
          out.listen = { error: failure(e) };
        }
      }
      await emit(out);
    }
  } catch (e) {
    await emit({ ok: false, error: failure(e) });
    await client.close().catch(() => {});
    process.exit(1);
  }
  if (listening !== null) await listening.close().catch(() => {});
  await client.close();
  process.exit(0);
}

main();
