#!/usr/bin/env python3
"""A stdio MCP server that writes down how its client ends it.

Every event goes to the file named by MCPW_PROBE_LOG as one line "MS EVENT": milliseconds
since the server started, then what happened: "start pid=P pgid=G sid=S ppid=Q", each JSON-RPC
method received, "stdin-eof", "signal SIGINT", ... It ignores SIGINT, SIGTERM and SIGHUP (so
that the whole sequence shows) and EOF (it keeps running after it), and exits only when
killed or after MCPW_PROBE_LINGER seconds (default 30). A SIGKILL cannot be logged: the
file MCPW_PROBE_LOG.alive holds the last millisecond the server was seen alive (rewritten
every 5 ms), which dates it. Used by the clients-real tests to
measure each client's stop sequence (docs/CLIENTS.md); not a test peer of the default suite.
"""
import json
import os
import signal
import sys
import threading
import time

T0 = time.monotonic()
LOG = open(os.environ.get("MCPW_PROBE_LOG", "/dev/stderr"), "a", buffering=1)


def log(event):
    LOG.write("%d %s\n" % (round((time.monotonic() - T0) * 1000), event))


def on_signal(sig, _frame):
    log("signal " + signal.Signals(sig).name)


for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
    signal.signal(s, on_signal)

log("start pid=%d pgid=%d sid=%d ppid=%d" % (os.getpid(), os.getpgrp(), os.getsid(0), os.getppid()))

TOOL = {
    "name": "probe",
    "description": "Answers with the word it is given",
    "inputSchema": {"type": "object", "properties": {"word": {"type": "string"}}},
}


def answer(msg):
    method = msg.get("method")
    if method == "initialize":
        version = msg.get("params", {}).get("protocolVersion", "2025-06-18")
        return {"protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "mcpwarden-probe", "version": "1"}}
    if method == "tools/list":
        return {"tools": [TOOL]}
    if method == "tools/call":
        word = msg.get("params", {}).get("arguments", {}).get("word", "")
        log("tool-call " + json.dumps(word))
        return {"content": [{"type": "text", "text": "probe says " + word}]}
    if method in ("resources/list", "prompts/list"):
        return {method.split("/")[0]: []}
    return {}


def serve():
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if "method" in msg:
            log("method " + msg["method"])
        if "id" in msg and "method" in msg:
            sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": answer(msg)}) + "\n")
            sys.stdout.flush()
    log("stdin-eof")


threading.Thread(target=serve, daemon=True).start()
deadline = T0 + float(os.environ.get("MCPW_PROBE_LINGER", "30"))
alive_path = os.environ.get("MCPW_PROBE_LOG", "/dev/null") + ".alive"
while time.monotonic() < deadline:
    with open(alive_path, "w") as alive:
        alive.write("%d\n" % round((time.monotonic() - T0) * 1000))
    time.sleep(0.005)
log("linger-over")
