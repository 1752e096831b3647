#!/usr/bin/env python3
# bench/run_start.py: what a `run` costs to start and to keep, against another build.
#
#   python3 bench/run_start.py BUILD_DIR --base-cli PATH [--pairs 40] [--sessions 7]
#
# 1. Whole runs of a server that exits at once (`run -- /bin/true`), --no-journal and
#    journaled, this build and the base in turns (A B A B …): wall time, and the CPU time of
#    the run and of everything it waited for (RUSAGE_CHILDREN, the keeper included). Medians,
#    and the median of the pairs' ratios: pairing keeps a ratio fair while the load drifts.
# 2. The memory of one session that has answered `initialize` (the fixture as server): RSS,
#    PSS, private of relay + keeper (smaps_rollup), median of --sessions, in turns.
# Prints the load average: the figures are only comparable at similar load.
import os, resource, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
args = sys.argv[2:]
opt = lambda name, d: args[args.index(name) + 1] if name in args else d
base = opt("--base-cli", None)
pairs, sessions = int(opt("--pairs", 40)), int(opt("--sessions", 7))
if not base:
    sys.exit("run_start.py: --base-cli PATH is required (the build to compare with)")
cli, fixture = os.path.join(build, "mcpwarden"), os.path.join(build, "mcpwarden-fixture")
INIT = (b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":'
        b'"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}\n')
tmp = tempfile.mkdtemp(prefix="bench-run-start-")


def journal_flags(journal, who):
    return ["--journal", os.path.join(tmp, who + ".db")] if journal else ["--no-journal"]


def whole_run(exe, journal, who):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    subprocess.run([exe, "run", *journal_flags(journal, who), "--", "/bin/true"],
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, check=True, timeout=60)
    wall = time.monotonic() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall * 1e3, cpu * 1e3


def rollup(pid):
    out = {}
    with open(f"/proc/{pid}/smaps_rollup") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("Rss", "Pss", "Private_Clean", "Private_Dirty"):
                out[key] = int(value.split()[0]) / 1024
    out["Private"] = out.pop("Private_Clean") + out.pop("Private_Dirty")
    return out


def session_memory(exe, journal, who):
    p = subprocess.Popen([exe, "run", *journal_flags(journal, who), "--", fixture],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    try:
        p.stdin.write(INIT)
        p.stdin.flush()
        p.stdout.readline()
        time.sleep(0.3)  # the journal's opening and the keeper's start-up settle
        me = os.readlink(f"/proc/{p.pid}/exe")
        # The keeper: the run's child that is this executable (forked, never exec'd).
        keeper = None
        for k in open(f"/proc/{p.pid}/task/{p.pid}/children").read().split():
            try:
                if os.readlink(f"/proc/{k}/exe") == me:
                    keeper = int(k)
            except OSError:
                pass
        relay = rollup(p.pid)
        kept = rollup(keeper) if keeper else {k: 0.0 for k in relay}
        return {k: relay[k] + kept[k] for k in relay}
    finally:
        p.stdin.close()
        p.wait(timeout=20)


def median(xs):
    return statistics.median(xs)


def in_turns(measure, count, journal):
    a, b = [], []
    for _ in range(count):
        a.append(measure(cli, journal, "a"))
        b.append(measure(base, journal, "b"))
    return "journaled" if journal else "--no-journal", a, b


print(f"this build: {cli}\nbase:       {base}")
for journal in (False, True):
    mode, a, b = in_turns(whole_run, pairs, journal)
    for i, what in ((0, "wall"), (1, "cpu")):
        ratio = median([x[i] / y[i] for x, y in zip(a, b) if y[i] > 0])
        print(f"run -- /bin/true, {mode:12} {what:4}: {median([x[i] for x in a]):7.2f} ms"
              f"  base {median([y[i] for y in b]):7.2f} ms  x{ratio:.2f} (median of {pairs} pairs)")
for journal in (False, True):
    mode, a, b = in_turns(session_memory, sessions, journal)
    for key in ("Rss", "Pss", "Private"):
        x, y = median([m[key] for m in a]), median([m[key] for m in b])
        print(f"relay + keeper, {mode:12} {key:7}: {x:6.2f} MB  base {y:6.2f} MB  {x - y:+.2f}")
print("load average:", open("/proc/loadavg").read().split()[:3])
