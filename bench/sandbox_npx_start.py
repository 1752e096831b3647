#!/usr/bin/env python3
# bench/sandbox_npx_start.py: what `--sandbox strict` adds to the start of a cached npx server,
# the commonest configuration there is (`npx -y @modelcontextprotocol/server-everything`).
#
#   python3 bench/sandbox_npx_start.py BUILD_DIR [--starts 21] [--package SPEC] [--only npx|fixture]
#
# Fills a private npm cache in a scratch HOME the way a first unconfined `npx -y SPEC` does,
# from tests/e2e/node_modules served by tests/e2e/local_registry.py on 127.0.0.1 (no network),
# then stops that registry and measures pairs of starts, one of each profile, in an order
# drawn at random for each pair (so that neither profile always comes second, after the other
# has warmed the page cache):
#   off     `mcpwarden run --no-journal --sandbox off -- npx -y SPEC stdio`, with the switches
#           strict sets for npx in its environment (npm_config_offline=true, no update check,
#           audit or fund): npx from the same cache, offline, as strict runs it (online, npx would ask the registry first: a network round trip, or
#           here, with no registry, a minute of retries);
#   strict  `mcpwarden run --no-journal --sandbox strict -- npx -y SPEC stdio`, which sets the
#           offline switch itself.
# A second row does the same with the build's mcpwarden-fixture, a native server whose own
# start is ~1 ms and varies little: what strict adds to any server's start (the plan, the
# confinement in the child), without npx's hundreds of milliseconds of Node start-up and their
# variance. What strict adds beyond that for npx is Landlock's check on each path npx opens.
# Each start's time is from the exec of mcpwarden to the first `initialize` answer on its
# stdout; its CPU is the whole tree's (mcpwarden's rusage once reaped: the keeper, the server
# and what each reaped), which a busy machine's run queue does not inflate as it does the
# wall time. Prints, per row and measure, the median and quartiles of each profile, and the
# median of the paired differences (strict - off, pair by pair) with its 95% confidence
# interval (bootstrap of the pairs, 2,000 resamples, fixed seed), and the load average
# before and after: compare only figures taken at similar load. The run says whether the
# interval is narrower than the 2 ms goal; when it is not, the run cannot tell.
import os, random, shutil, statistics, subprocess, sys, tempfile, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
args = sys.argv[2:]
starts = int(args[args.index("--starts") + 1]) if "--starts" in args else 21
spec = args[args.index("--package") + 1] if "--package" in args else \
    "@modelcontextprotocol/server-everything"
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
e2e = os.path.join(root, "tests", "e2e")
cli = os.path.join(build, "mcpwarden")
fixture = os.path.join(build, "mcpwarden-fixture")
only = args[args.index("--only") + 1] if "--only" in args else None
BASE_ENV = {"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "LANG", "LANGUAGE", "TZ"}
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


def one(home, profile, server):
    # Only what strict passes on (docs/SANDBOX.md, "The environment"), for both: a variable
    # strict drops would otherwise be measured as the sandbox (NODE_EXTRA_CA_CERTS, say, has
    # every Node start read and parse a CA bundle: ~80 ms of CPU).
    env = {k: v for k, v in os.environ.items() if k in BASE_ENV or k.startswith("LC_")}
    env.update(HOME=home, TMPDIR=home, npm_config_update_notifier="false")
    if profile == "off":
        # The switches strict sets for npx (src/sandbox/launcher.cpp), and no others.
        env.update(npm_config_offline="true", npm_config_update_notifier="false",
                   npm_config_audit="false", npm_config_fund="false")
    t0 = time.monotonic()
    p = subprocess.Popen([cli, "run", "--no-journal", "--eof-grace", "200ms", "--sandbox",
                          profile, "--"] + server, env=env, cwd=home,
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
    # The CPU of the whole tree (mcpwarden, its keeper, the server and what each reaped):
    # what the scheduler's queue at this load does not add to, unlike the wall time.
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    if not line:
        raise SystemExit("no initialize answer under --sandbox %s" % profile)
    return took, (usage.ru_utime + usage.ru_stime) * 1000


def ci_of_median(diffs):
    boot = random.Random(7)
    meds = sorted(statistics.median(boot.choices(diffs, k=len(diffs))) for _ in range(2000))
    return meds[int(0.025 * len(meds))], meds[int(0.975 * len(meds)) - 1]


def paired(home, server, label):
    one(home, "off", server)  # the first start pays for the page cache
    one(home, "strict", server)
    runs = {"off": [], "strict": []}
    rng = random.Random(41)
    for _ in range(starts):
        order = ["off", "strict"]
        rng.shuffle(order)
        for profile in order:
            runs[profile].append(one(home, profile, server))
    print("%s: %d pairs, order random per pair" % (label, starts))
    for i, what in ((0, "ms to the initialize answer"), (1, "ms of CPU, the whole tree")):
        print("  %s" % what)
        for profile, xs in runs.items():
            v = [x[i] for x in xs]
            q = statistics.quantiles(v, n=4)
            print("    --sandbox %-7s median %8.2f  (quartiles %.2f / %.2f)"
                  % (profile, statistics.median(v), q[0], q[2]))
        diffs = [s[i] - o[i] for s, o in zip(runs["strict"], runs["off"])]
        lo, hi = ci_of_median(diffs)
        verdict = ("interval narrower than the 2 ms goal" if hi - lo < 2 else
                   "interval wider than the 2 ms goal: this run cannot tell")
        print("    strict - off, paired: median %+.2f ms, 95%% CI [%+.2f, %+.2f] (%s)"
              % (statistics.median(diffs), lo, hi, verdict))


def load():
    return " ".join("%.2f" % x for x in os.getloadavg())


home = tempfile.mkdtemp(prefix="bench-npx-")
try:
    print("load average before: %s" % load())
    if only in (None, "fixture"):
        paired(home, [fixture], "mcpwarden-fixture (native, start ~1 ms)")
    if only in (None, "npx"):
        warm(home)
        paired(home, ["npx", "-y", spec, "stdio"], "npx -y %s stdio, cached" % spec)
    print("load average after: %s" % load())
finally:
    shutil.rmtree(home, ignore_errors=True)
