#!/usr/bin/env node
// A real MCP client for end-to-end tests: the official SDK's Client over StdioClientTransport.
//
//   node sdk_client.mjs [--call NAME [--args JSON]]... [--hold] [--step] [--timeout MS]
//                       [--rounds N [--pause MS]] -- COMMAND [ARGS...]
//
// Connects (initialize + notifications/initialized), lists the tools, makes each requested
// tools/call, prints ONE JSON object on stdout, then close()s the transport the way the SDK
// does (stdin end, 2 s, SIGTERM, 2 s, SIGKILL) and exits 0. Any failure prints
// {"ok":false,"error":...} and exits 1.
//
// With --rounds N, the listing and the calls are made N times on the one connection, with
// --pause MS between rounds (a server under `mcpwarden run --idle-stop` sleeps meanwhile), and
// ONE JSON object is printed per round, as soon as it is done.
//
// With --step, the first listing is printed on its own ({"listed":[NAMES]}) and the client
// waits for a line on its stdin before it makes the calls: a test can look at the processes
// between the two (under `mcpwarden run --lazy`: no server yet).
//
// With --hold, the result is printed first and the client then waits for its own stdin to
// reach EOF before closing: a test can kill this client mid-session (the crash case) or
// close its stdin (the clean case).
//
// The server gets this process's whole environment (the SDK default would keep only
// HOME, PATH, ...), so markers like WARDEN_TEST_TAG and MCPWARDEN_SESSION reach it.
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

function usage(message) {
  process.stderr.write(`sdk_client: ${message}\n` +
    "usage: sdk_client.mjs [--call NAME [--args JSON]]... [--hold] [--step] [--timeout MS] -- COMMAND [ARGS...]\n");
  process.exit(2);
}

function parseArgs(argv) {
  const opts = { calls: [], hold: false, timeout: 30000, rounds: 1, pause: 0, command: null, args: [] };
  let i = 0;
  for (; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--") break;
    if (a === "--hold") opts.hold = true;
    else if (a === "--step") opts.step = true;
    else if (a === "--call") {
      if (i + 1 >= argv.length) usage("--call needs a tool name");
      opts.calls.push({ name: argv[++i], arguments: {} });
    } else if (a === "--args") {
      if (i + 1 >= argv.length) usage("--args needs a JSON object");
      if (opts.calls.length === 0) usage("--args must follow --call");
      try {
        opts.calls[opts.calls.length - 1].arguments = JSON.parse(argv[++i]);
      } catch (e) {
        usage(`--args: ${e.message}`);
      }
    } else if (a === "--timeout") {
      opts.timeout = Number(argv[++i]);
      if (!Number.isFinite(opts.timeout) || opts.timeout <= 0) usage("--timeout needs milliseconds");
    } else if (a === "--rounds" || a === "--pause") {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n < 0) usage(`${a} needs a whole number`);
      opts[a.slice(2)] = n;
    } else usage(`unknown option ${a}`);
  }
  if (i >= argv.length - 1) usage("missing -- COMMAND");
  opts.command = argv[i + 1];
  opts.args = argv.slice(i + 2);
  return opts;
}

function stdinLine() {
  return new Promise((resolve) => {
    const done = () => {
      process.stdin.off("data", onData);
      process.stdin.pause();
      resolve();
    };
    const onData = (chunk) => {
      if (chunk.includes("\n")) done();
    };
    process.stdin.on("data", onData);
    process.stdin.once("end", done);
    process.stdin.resume();
  });
}

// One line on stdout, resolved once it is all written. Writes to a pipe are asynchronous in
// Node on POSIX: a line longer than the pipe's buffer (a 300 kB result) is only partly out
// when write() returns, and process.exit() right after would lose the rest.
function emit(object) {
  return new Promise((resolve) => process.stdout.write(JSON.stringify(object) + "\n", resolve));
}

function stdinClosed() {
  return new Promise((resolve) => {
    process.stdin.on("end", resolve);
    process.stdin.on("close", resolve);
    process.stdin.on("error", resolve);
    process.stdin.resume();
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const transport = new StdioClientTransport({
    command: opts.command,
    args: opts.args,
    env: { ...process.env },
    stderr: "inherit",
  });
  const client = new Client({ name: "mcpwarden-e2e-sdk-client", version: "0.1.0" });
  const requestOptions = { timeout: opts.timeout };

  try {
    await client.connect(transport, requestOptions);
    for (let round = 0; round < opts.rounds; round++) {
      if (round > 0) await new Promise((resolve) => setTimeout(resolve, opts.pause));
      const out = { ok: true };
      out.pid = transport.pid ?? null;
      out.serverInfo = client.getServerVersion() ?? null;
      out.capabilities = client.getServerCapabilities() ?? null;
      const listed = await client.listTools({}, requestOptions);
      out.tools = listed.tools.map((t) => t.name);
      if (opts.step && round === 0) {
        await emit({ listed: out.tools });
        await stdinLine();
      }
      out.calls = [];
      for (const call of opts.calls) {
        try {
          const result = await client.callTool(call, undefined, requestOptions);
          out.calls.push({ name: call.name, result });
        } catch (e) {
          out.calls.push({ name: call.name, error: { code: e.code ?? null, message: e.message } });
        }
      }
      await emit(out);
    }
  } catch (e) {
    await emit({ ok: false, error: e.message });
    await client.close().catch(() => {});
    process.exit(1);
  }

  if (opts.hold) await stdinClosed();
  await client.close();
  process.exit(0);
}

main();
