#!/usr/bin/env python3
"""A stdio MCP server for the crash, restart and log tests (tests/shim/supervise_test.cpp).

Tools: `pid` answers with its process id; `crash` writes a line to stderr and dies with a
Python traceback whose last line is a ValueError; `kill` SIGKILLs itself; `leak` writes credential-shaped lines to
stderr and answers; `flood N` writes N MiB to stderr as fast as it can, then answers.
Every start says so on stderr ("crashing_server started, pid N"). With `--hold-while FILE`,
a start waits (at most 30 s) while FILE exists before it reads its input: a restart that is
still under way, for as long as a test needs to look at it.
"""
import json
import os
import signal
import sys
import time


def answer(req, text):
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"],
                                 "result": {"content": [{"type": "text", "text": text}]}}) + "\n")
    sys.stdout.flush()


def open_keys(path):
    raise ValueError("OAuth keys file not found: " + path)


def call(req):
    name = req["params"]["name"]
    args = req["params"].get("arguments") or {}
    if name == "pid":
        answer(req, str(os.getpid()))
    elif name == "crash":
        sys.stderr.write("loading the keys\n")
        sys.stderr.flush()
        open_keys("/nonexistent/gcp-oauth.keys.json")
    elif name == "kill":
        sys.stderr.write("about to be killed\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
    elif name == "leak":
        sys.stderr.write("connecting with Authorization: Bearer abcdefghijklmnop0123456789\n")
        sys.stderr.write("token ghp_0123456789abcdefghijklmnopqrstuvwxyzAB in use\n")
        sys.stderr.write("-----BEGIN RSA PRIVATE KEY-----\n")
        sys.stderr.write("MIIEowIBAAKCAQEAsecretsecretsecretsecret\n")
        sys.stderr.write("-----END RSA PRIVATE KEY-----\n")
        sys.stderr.write("after the key\n")
        sys.stderr.flush()
        answer(req, "leaked")
    elif name == "flood":
        chunk = ("x" * 1023 + "\n").encode() * 64
        for _ in range(int(args.get("mib", 1)) * 16):
            sys.stderr.buffer.write(chunk)
        sys.stderr.flush()
        answer(req, "flooded")
    else:
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"],
                                     "error": {"code": -32602, "message": "no tool " + name}}) + "\n")
        sys.stdout.flush()


def main():
    sys.stderr.write("crashing_server started, pid %d\n" % os.getpid())
    sys.stderr.flush()
    if "--hold-while" in sys.argv:
        hold, deadline = sys.argv[sys.argv.index("--hold-while") + 1], time.monotonic() + 30
        while os.path.exists(hold) and time.monotonic() < deadline:
            time.sleep(0.02)
    for line in sys.stdin:
        req = json.loads(line)
        method = req.get("method")
        if "id" not in req:
            continue
        if method == "initialize":
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
                "protocolVersion": req["params"].get("protocolVersion", "2025-06-18"),
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "crashing_server", "version": "1"}}}) + "\n")
            sys.stdout.flush()
        elif method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}}
                     for n in ("pid", "crash", "kill", "leak", "flood")]
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"],
                                         "result": {"tools": tools}}) + "\n")
            sys.stdout.flush()
        elif method == "tools/call":
            call(req)
        else:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {}}) + "\n")
            sys.stdout.flush()


main()
