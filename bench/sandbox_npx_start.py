#!/usr/bin/env python3
# bench/sandbox_npx_start.py: what `--sandbox strict` adds to the start of a cached npx server,
# the commonest configuration there is (`npx -y @modelcontextprotocol/server-everything`).
#
#   python3 bench/sandbox_npx_start.py BUILD_DIR [--starts 21] [--package SPEC]
#                                     [--only fixture,npx,work,calls]
#
# Fills a private npm cache in a scratch HOME the way a first unconfined `npx -y SPEC` does,
# from tests/e2e/node_modules served by tests/e2e/local_registry.py on 127.0.0.1 (no network),
# then stops that registry and measures pairs of starts, one of each profile, in an order
# drawn at random for each pair (so that neither profile always comes second, after the other
# has warmed the page cache):
#   off     `mcpwarden run --no-journal --sandbox off -- npx -y SPEC stdio`, with the switches
#           strict sets for npx in its environment (npm_config_offline=true, no update check,
#           audit or fund): npx from the same cache, offline, as strict runs it (online, npx
#           would ask the registry first: a network round trip, or here, with no registry, a
#           minute of retries);
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
#
# It cannot tell for npx: a Node start's own spread leaves the paired interval tens of
# milliseconds wide, and halving it takes four times the pairs. So two more rows show the
# difference by parts instead of by stopwatch:
#   work   each profile's npx start run under `strace -ff` (--starts of each, interleaved), the
#          system calls of the server's tree alone counted (from the execve of npx on: not
#          mcpwarden's, the keeper's, nor the confinement's own calls before it): in total,
#          the files opened, the calls that failed by errno (EACCES, EPERM, EAFNOSUPPORT: a
#          refusal; ENOSYS: clone3, which libc then makes a clone), futex, the network calls,
#          the processes. The same counts, within the spread of the runs of one profile, are
#          the same work; no INET socket, connect or bind is an npx that tried no registry.
#   calls  what confinement adds to each call the server makes: a Python loop of getppid()
#          (a call through seccomp's entry that the filter always allows, as it does most:
#          the kernel answers those from its cache of the filter's verdicts) and of
#          open()+close() of a file in the npm cache (Landlock checks each open against its
#          rules), run under `mcpwarden run` with each profile, interleaved, in ns of the
#          thread's CPU a call (a loaded machine's preemptions do not count in it).
# With the fixture's row (the set-up, precisely, by CPU), strict - off for npx is then the
# set-up plus (its calls x the filter's cost) plus (its opens x Landlock's cost), each part
# measured.
import collections, glob, json, os, random, re, shutil, statistics, subprocess, sys, tempfile, time

build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
args = sys.argv[2:]
starts = int(args[args.index("--starts") + 1]) if "--starts" in args else 21
spec = args[args.index("--package") + 1] if "--package" in args else \
    "@modelcontextprotocol/server-everything"
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
e2e = os.path.join(root, "tests", "e2e")
cli = os.path.join(build, "mcpwarden")
fixture = os.path.join(build, "mcpwarden-fixture")
# --only ROW[,ROW]: the rows to run (all four by default).
only = set(args[args.index("--only") + 1].split(",")) if "--only" in args else \
    {"fixture", "npx", "work", "calls"}
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


def env_of(home, profile):
    # Only what strict passes on (docs/SANDBOX.md, "The environment"), for both: a variable
    # strict drops would otherwise be measured as the sandbox (NODE_EXTRA_CA_CERTS, say, has
    # every Node start read and parse a CA bundle: ~80 ms of CPU).
    env = {k: v for k, v in os.environ.items() if k in BASE_ENV or k.startswith("LC_")}
    env.update(HOME=home, TMPDIR=home, npm_config_update_notifier="false")
    if profile == "off":
        # The switches strict sets for npx (src/sandbox/launcher.cpp), and no others.
        env.update(npm_config_offline="true", npm_config_update_notifier="false",
                   npm_config_audit="false", npm_config_fund="false")
    return env


def one(home, profile, server, tracer=()):
    t0 = time.monotonic()
    p = subprocess.Popen(list(tracer) + [cli, "run", "--no-journal", "--eof-grace", "200ms",
                                         "--sandbox", profile, "--"] + server,
                         env=env_of(home, profile), cwd=home,
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
        # The interval narrows as the square root of the pairs: what a 2 ms-wide one would take.
        need = int(starts * ((hi - lo) / 2) ** 2) + 1
        verdict = ("interval narrower than the 2 ms goal" if hi - lo < 2 else
                   "interval wider than the 2 ms goal: this run cannot tell; ~%d pairs would"
                   % need)
        print("    strict - off, paired: median %+.2f ms, 95%% CI [%+.2f, %+.2f] (%s)"
              % (statistics.median(diffs), lo, hi, verdict))


def load():
    return " ".join("%.2f" % x for x in os.getloadavg())


# --- work: the system calls of the server's tree, counted -------------------------------

CALL = re.compile(r"^(\w+)\((.*)\)\s+= (-?\d+|\?|0x[0-9a-f]+)(?: (E[A-Z0-9]+))?")
SPAWN = {"clone", "clone3", "fork", "vfork"}
OPENS = {"open", "openat", "openat2", "creat"}
NET = {"socket", "connect", "bind", "sendto", "sendmsg", "sendmmsg"}


def traced_calls(prefix, program):
    """[(call, args, errno)] of the tree that execs `program`: from that execve on in the
    process that made it, and everything its descendants called (strace -ff: a file a pid)."""
    lines, children = {}, collections.defaultdict(list)
    for path in glob.glob(prefix + ".*"):
        pid = int(path.rsplit(".", 1)[1])
        with open(path, errors="replace") as f:
            lines[pid] = [m.groups() for m in map(CALL.match, f) if m]
        for name, _, ret, _ in lines[pid]:
            if name in SPAWN and ret.isdigit() and int(ret) > 0:
                children[pid].append(int(ret))
    root = next((pid for pid, calls in lines.items()
                 if any(n == "execve" and program in a and r == "0" for n, a, r, _ in calls)),
                None)
    if root is None:
        raise SystemExit("no execve of %s in the trace" % program)
    first = next(i for i, (n, a, r, _) in enumerate(lines[root])
                 if n == "execve" and program in a and r == "0")
    calls, todo = list(lines[root][first:]), list(children[root])
    while todo:
        pid = todo.pop()
        calls += lines.get(pid, [])
        todo += children[pid]
    return [(n, a, e) for n, a, _, e in calls]


ERRNOS = ("ENOENT", "EAGAIN", "EACCES", "EPERM", "EAFNOSUPPORT", "ENOSYS")


def census(calls):
    failed = collections.Counter(e for _, _, e in calls if e)
    rows = [
        ("calls", len(calls)),
        ("files opened", sum(1 for n, _, e in calls if n in OPENS and not e)),
        ("opens failed", sum(1 for n, _, e in calls if n in OPENS and e)),
        ("calls failed", sum(failed.values())),
    ]
    rows += [("  " + e, failed[e]) for e in ERRNOS]
    rows += [("  other errno", sum(failed.values()) - sum(failed[e] for e in ERRNOS)),
             ("futex", sum(1 for n, _, _ in calls if n == "futex")),
             ("network calls", sum(1 for n, _, _ in calls if n in NET)),
             ("processes", 1 + sum(1 for n, a, e in calls
                                   if n in SPAWN and not e and "CLONE_THREAD" not in a)),
             ("execve", sum(1 for n, _, e in calls if n == "execve" and not e))]
    return collections.OrderedDict(rows)


def work(home, server):
    if not shutil.which("strace"):
        raise SystemExit("work: strace is not installed")
    one(home, "off", server)  # the page cache, as for the pairs
    counts = {"off": [], "strict": []}
    by_name = {"off": [], "strict": []}
    net = {"off": collections.Counter(), "strict": collections.Counter()}
    scratch = tempfile.mkdtemp(prefix="bench-npx-trace-")
    try:
        for i in range(starts):
            for profile in (["off", "strict"] if i % 2 == 0 else ["strict", "off"]):
                prefix = os.path.join(scratch, "%s-%d" % (profile, i))
                one(home, profile, server, ["strace", "-ff", "-qq", "-o", prefix])
                calls = traced_calls(prefix, "/npx")
                for path in glob.glob(prefix + ".*"):
                    os.unlink(path)
                counts[profile].append(census(calls))
                by_name[profile].append(collections.Counter(n for n, _, _ in calls))
                net[profile].update("%s(%s) = %s" % (n, a.split(",")[0] + ", " +
                                                     a.split(",")[1].strip() if "," in a else a,
                                                     e or "ok")
                                    for n, a, e in calls if n in NET)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    print("npx -y %s stdio, cached: the server's system calls, %d traced starts of each"
          % (spec, starts))
    print("    %-16s %-34s %s" % ("", "--sandbox off", "--sandbox strict"))
    for key in counts["off"][0]:
        cell = {p: [c[key] for c in counts[p]] for p in counts}
        print("    %-16s %-34s %s" % (key, " ".join(map(str, cell["off"])),
                                      " ".join(map(str, cell["strict"]))))
    names = set().union(*by_name["off"], *by_name["strict"])
    med = {p: {n: statistics.median(c[n] for c in by_name[p]) for n in names} for p in by_name}
    apart = sorted(names, key=lambda n: -abs(med["strict"][n] - med["off"][n]))[:6]
    print("    the calls most apart (median off -> strict): " +
          ", ".join("%s %g -> %g" % (n, med["off"][n], med["strict"][n]) for n in apart))
    for profile in net:
        for what, n in net[profile].most_common(8):
            print("    network, --sandbox %s: %s, %d times" % (profile, what, n))
    return counts


# --- calls: what confinement adds to one system call, and to one open -------------------

PROBE = r"""
import json, os, sys, time
path, n = sys.argv[1], int(sys.argv[2])
def per_call(f):
    best = None
    for _ in range(5):
        t0 = time.thread_time_ns(); f(); t = time.thread_time_ns() - t0
        best = t if best is None or t < best else best
    return best / n
def getppids():
    for _ in range(n): os.getppid()
def opens():
    for _ in range(n): os.close(os.open(path, os.O_RDONLY))
def loop():
    for _ in range(n): pass
print(json.dumps({"jsonrpc": "2.0", "method": "bench", "params": {
    "loop": per_call(loop), "getppid": per_call(getppids), "open": per_call(opens)}}),
    flush=True)
"""


def calls(home):
    """CPU ns a getppid() and an open()+close() cost under each profile (the best of five loops
    of 20,000 in one start; the median of --starts starts per profile, interleaved)."""
    files = glob.glob(os.path.join(home, ".npm/_npx/*/node_modules/*/*/package.json")) + \
        glob.glob(os.path.join(home, ".npm/_npx/*/node_modules/*/package.json"))
    if not files:
        raise SystemExit("calls: no package.json in the npx cache")
    target = max(files, key=lambda f: f.count("/"))
    probe = os.path.join(home, "probe.py")
    with open(probe, "w") as f:
        f.write(PROBE)
    runs = {"off": [], "strict": []}
    for i in range(starts):
        for profile in (["off", "strict"] if i % 2 == 0 else ["strict", "off"]):
            flags = ["--allow-read", home] if profile == "strict" else []
            # stdin stays open until the answer: at its end mcpwarden would end the probe.
            p = subprocess.Popen([cli, "run", "--no-journal", "--sandbox", profile] + flags +
                                 ["--", "/usr/bin/python3", probe, target, "20000"],
                                 env=env_of(home, "strict"), cwd=home, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            line = p.stdout.readline().decode()
            p.stdin.close()
            err = p.stderr.read().decode()
            p.wait(timeout=60)
            if '"bench"' not in line:
                raise SystemExit("calls: no answer under --sandbox %s: %s" % (profile, err[-400:]))
            runs[profile].append(json.loads(line)["params"])
    print("one call, ns of CPU (the median of %d starts, each the best of five loops of 20,000):"
          % starts)
    print("    file opened: %s (%d components)" % (target, target.count("/")))
    cost = {}
    for what in ("getppid", "open"):
        off = statistics.median((r[what] - r["loop"]) for r in runs["off"])
        strict = statistics.median((r[what] - r["loop"]) for r in runs["strict"])
        cost[what] = strict - off
        print("    %-8s off %7.0f  strict %7.0f  added %+6.0f ns" % (what, off, strict, strict - off))
    return cost


def by_parts(counts, cost):
    """strict - off for npx, by its parts: each call's filter, each open's Landlock check."""
    n_calls = statistics.median(c["calls"] for c in counts["strict"])
    # Landlock checks an open once the path is found: a failed lookup (ENOENT) costs it nothing.
    n_opens = statistics.median(c["files opened"] for c in counts["strict"])
    filt = n_calls * cost["getppid"] / 1e6
    ll = n_opens * (cost["open"] - cost["getppid"]) / 1e6
    print("npx by parts: %d calls x %+.0f ns (the filter) = %+.2f ms; %d opens x %+.0f ns "
          "(Landlock, past the filter) = %+.2f ms; plus the set-up (the fixture's row)"
          % (n_calls, cost["getppid"], filt, n_opens, cost["open"] - cost["getppid"], ll))


home = tempfile.mkdtemp(prefix="bench-npx-")
try:
    print("load average before: %s" % load())
    if "fixture" in only:
        paired(home, [fixture], "mcpwarden-fixture (native, start ~1 ms)")
    npx = ["npx", "-y", spec, "stdio"]
    if only & {"npx", "work", "calls"}:
        warm(home)
    if "npx" in only:
        paired(home, npx, "npx -y %s stdio, cached" % spec)
    counts = work(home, npx) if "work" in only else None
    cost = calls(home) if "calls" in only else None
    if counts and cost:
        by_parts(counts, cost)
    print("load average after: %s" % load())
finally:
    shutil.rmtree(home, ignore_errors=True)
