#!/usr/bin/env python3
# bench/isolation_start.py: what `--isolate pidns` costs a server's start, against the default
# layers (`--isolate auto`: subreaper + session cgroup + pidfds), in one run.
#
#   python3 bench/isolation_start.py BUILD_DIR [--starts 15] [--node]
#
# Each start is a whole `mcpwarden run --no-journal --isolate X -- SERVER` as a client sees it:
# spawn, send initialize, read its answer (the start-up), then close stdin and wait for the
# run to exit (the end). Starts alternate between the two settings so that drift in the load
# hits both alike. SERVER is the fixture; with --node, also the reference server-everything
# (node, tests/e2e/node_modules, installed by scripts/deps.sh), whose start is dominated by
# node's own. Medians, and the difference pidns - auto. Prints the load average: compare only
# figures taken at similar load.
import json, os, statistics, subprocess, sys, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
args = sys.argv[2:]
starts = int(args[args.index("--starts") + 1]) if "--starts" in args else 15
cli = os.path.join(build, "mcpwarden")
here = os.path.dirname(os.path.abspath(__file__))
servers = {"fixture": [os.path.join(build, "mcpwarden-fixture")]}
everything = os.path.join(here, "..", "tests", "e2e", "node_modules", "@modelcontextprotocol",
                          "server-everything", "dist", "index.js")
if "--node" in args:
    if not os.path.exists(everything):
        sys.exit(f"isolation_start: {everything} is missing: run scripts/deps.sh first")
    servers["server-everything"] = ["node", everything]
INIT = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "bench", "version": "1"}}}) + "\n"


def one(isolate, server):
    t0 = time.monotonic()
    p = subprocess.Popen([cli, "run", "--no-journal", "--isolate", isolate, "--"] + server,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(INIT.encode())
    p.stdin.flush()
    line = p.stdout.readline()
    t1 = time.monotonic()
    p.stdin.close()
    p.wait(30)
    t2 = time.monotonic()
    if b'"result"' not in line:
        sys.exit(f"isolation_start: --isolate {isolate} {server[0]}: no initialize answer: {line!r}")
    return (t1 - t0) * 1000, (t2 - t1) * 1000


def load():
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


print(f"isolation_start: {starts} starts of each, interleaved; load average {load()}")
for name, server in servers.items():
    got = {"auto": [], "pidns": []}
    one("auto", server)  # warm the page cache and node's compile cache
    for _ in range(starts):
        for iso in ("auto", "pidns"):
            got[iso].append(one(iso, server))
    med = {iso: (statistics.median(s for s, _ in r), statistics.median(e for _, e in r))
           for iso, r in got.items()}
    print(f"{name}")
    for iso in ("auto", "pidns"):
        print(f"  --isolate {iso:<6} start {med[iso][0]:8.2f} ms   end {med[iso][1]:8.2f} ms")
    print(f"  pidns - auto   start {med['pidns'][0] - med['auto'][0]:+8.2f} ms   "
          f"end {med['pidns'][1] - med['auto'][1]:+8.2f} ms")
print(f"load average after: {load()}")
