#!/usr/bin/env python3
# bench/sandbox_npx_start.py: what `--sandbox strict` adds to the start of a cached npx server,
# the commonest configuration there is (`npx -y @modelcontextprotocol/server-everything`).
#
#   python3 bench/sandbox_npx_start.py BUILD_DIR [--starts 21] [--package SPEC]
#
# Fills a private npm cache in a scratch HOME the way a first unconfined `npx -y SPEC` does,
# from tests/e2e/node_modules served by tests/e2e/local_registry.py on 127.0.0.1 (no network),
# then stops that registry and alternates, start by start:
#   off     `mcpwarden run --no-journal --sandbox off -- npx -y SPEC stdio`, with
#           npm_config_offline=true in its environment: npx from the same cache, offline, as
#           strict runs it (online, npx would ask the registry first: a network round trip, or
#           here, with no registry, a minute of retries);
#   strict  `mcpwarden run --no-journal --sandbox strict -- npx -y SPEC stdio`, which sets the
#           offline switch itself.
# Each start's time is from the exec of mcpwarden to the first `initialize` answer on its
# stdout. Prints the median and the quartiles of each, the difference of the medians, and the
# load average: compare only figures taken at similar load.
import os, shutil, statistics, subprocess, sys, tempfile, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
args = sys.argv[2:]
starts = int(args[args.index("--starts") + 1]) if "--starts" in args else 21
spec = args[args.index("--package") + 1] if "--package" in args else \
    "@modelcontextprotocol/server-everything"
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
e2e = os.path.join(root, "tests", "e2e")
cli = os.path.join(build, "mcpwarden")
INIT = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        b'"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n')


def warm(home):
    registry = subprocess.Popen(["python3", os.path.join(e2e, "local_registry.py"),
                                 os.path.join(e2e, "node_modules")],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        port = registry.stdout.readline().decode().strip()
        with open(os.path.join(home, ".npmrc"), "w") as f:
            f.write("registry=http://127.0.0.1:%s/\n" % port)
        env = dict(os.environ, HOME=home, npm_config_update_notifier="false")
        subprocess.run(["npm", "exec", "--yes", "--package=" + spec, "--", "node", "-e", "0"],
                       env=env, check=True, timeout=300, capture_output=True)
    finally:
        registry.stdin.close()
        registry.wait(timeout=10)


def one(home, profile):
    env = dict(os.environ, HOME=home, TMPDIR=home, npm_config_update_notifier="false")
    for k in ("MCPWARDEN_FAULT", "MCPWARDEN_JOURNAL", "MCPWARDEN_SESSION"):
        env.pop(k, None)
    if profile == "off":
        env["npm_config_offline"] = "true"
    t0 = time.monotonic()
    p = subprocess.Popen([cli, "run", "--no-journal", "--eof-grace", "200ms", "--sandbox",
                          profile, "--", "npx", "-y", spec, "stdio"], env=env, cwd=home,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)
    p.stdin.write(INIT)
    p.stdin.flush()
    while True:
        line = p.stdout.readline()
        if not line or b'"id":1' in line:
            break
    took = (time.monotonic() - t0) * 1000
    p.stdin.close()
    p.wait(timeout=30)
    if not line:
        raise SystemExit("no initialize answer under --sandbox %s" % profile)
    return took


home = tempfile.mkdtemp(prefix="bench-npx-")
try:
    warm(home)
    runs = {"off": [], "strict": []}
    one(home, "off")  # the first start pays for the page cache
    for _ in range(starts):
        for profile in ("off", "strict"):
            runs[profile].append(one(home, profile))
    print("npx -y %s stdio, cached; %d starts each, alternating; ms to the initialize answer"
          % (spec, starts))
    for profile, xs in runs.items():
        q = statistics.quantiles(xs, n=4)
        print("  --sandbox %-7s median %7.1f  (quartiles %.1f / %.1f)"
              % (profile, statistics.median(xs), q[0], q[2]))
    print("  strict added %+.1f ms (goal <= 2)"
          % (statistics.median(runs["strict"]) - statistics.median(runs["off"])))
    print("  load average %s" % " ".join("%.2f" % x for x in os.getloadavg()))
finally:
    shutil.rmtree(home, ignore_errors=True)
