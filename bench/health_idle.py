#!/usr/bin/env python3
# bench/health_idle.py: what --health costs an idle session.
#
#   python3 bench/health_idle.py BUILD_DIR [--seconds 30] [--every 1s]
#
# Two sessions of the fixture side by side, both --no-journal, both initialized and then left
# idle by their client for the same window: one plain, one with --health EVERY. The relay's
# CPU time over the window (all its threads, from /proc/PID/task/*/schedstat: nanoseconds,
# not clock ticks) is the cost; the plain session is the baseline, measured in the same
# window under the same load. Goal: --health 1s costs an idle session <= 0.1 % of one core.
# Prints the load average: the figures are only comparable at similar load.
import json, os, subprocess, sys, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
args = sys.argv[2:]
seconds = float(args[args.index("--seconds") + 1]) if "--seconds" in args else 30.0
every = args[args.index("--every") + 1] if "--every" in args else "1s"
cli, fixture = os.path.join(build, "mcpwarden"), os.path.join(build, "mcpwarden-fixture")
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "bench", "version": "1"}}}


def cpu_ns(pid):
    total = 0
    for tid in os.listdir("/proc/%d/task" % pid):
        with open("/proc/%d/task/%s/schedstat" % (pid, tid)) as f:
            total += int(f.read().split()[0])
    return total


def session(extra):
    p = subprocess.Popen([cli, "run", "--no-journal"] + extra + ["--", fixture],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    p.stdin.write((json.dumps(INIT) + "\n").encode())
    p.stdin.flush()
    p.stdout.readline()
    return p


plain = session([])
health = session(["--health", every])
time.sleep(1)  # both settled: the first ping is out
before = {s: cpu_ns(s.pid) for s in (plain, health)}
t0 = time.monotonic()
time.sleep(seconds)
window = time.monotonic() - t0
after = {s: cpu_ns(s.pid) for s in (plain, health)}
# A server that did not answer its pings would have been ended as wedged: the window would
# then measure a session that was gone.
alive = health.poll() is None
for s in (plain, health):
    s.stdin.close()
    s.wait(30)

load = open("/proc/loadavg").read().split()[:3]
share = lambda s: (after[s] - before[s]) / (window * 1e9) * 100
print("load average %s; idle window %.1f s" % (" ".join(load), window))
print("relay CPU, plain            : %8.3f ms  %.4f %% of one core" %
      ((after[plain] - before[plain]) / 1e6, share(plain)))
print("relay CPU, --health %-7s: %8.3f ms  %.4f %% of one core" %
      (every, (after[health] - before[health]) / 1e6, share(health)))
print("the --health session was up through the window: %s" % ("yes" if alive else "NO (invalid)"))
print("added by the health checks  : %.4f %% of one core (goal <= 0.1 %%)" %
      (share(health) - share(plain)))
