#!/usr/bin/env python3
# bench/sandbox_phases.py: where a confined start's time goes inside `mcpwarden run`, phase by
# phase, against `--sandbox off`. bench_relay_latency --startup-only gives the
# whole; bench_sandbox_start the sandbox's own parts measured alone; this, the same parts in a
# real run, where the relay and the keeper run side by side.
#
#   python3 bench/sandbox_phases.py BUILD_DIR [--starts 21] [--profile strict] [--base-cli PATH]
#
# Each start is `mcpwarden run --no-journal --sandbox P -- FIXTURE` with MCPWARDEN_PHASES=1
# and one initialize line on stdin, alternating off and P start by start. The relay and the
# keeper print each phase with the wall clock and the CPU time of the thread that reached it;
# for each interval this prints the median wall time and CPU time under both settings. Wall
# well above CPU in an interval is waiting (for the other process, or for a core); a wait that
# only P has is the handshake ("sandbox-ready") or scheduling around it. Prints the load
# average: compare only figures taken at similar load. With --base-cli PATH the baseline is not
# `off` but the same profile run by another mcpwarden binary (a previous build): what a change
# moved, interval by interval.
import os, statistics, subprocess, sys

# Absolute: the runs below start in /tmp, away from the checkout.
build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
args = sys.argv[2:]
starts = int(args[args.index("--starts") + 1]) if "--starts" in args else 21
profile = args[args.index("--profile") + 1] if "--profile" in args else "strict"
base_cli = args[args.index("--base-cli") + 1] if "--base-cli" in args else None
baseline = "base" if base_cli else "off"
cli = os.path.join(build, "mcpwarden")
fixture = os.path.join(build, "mcpwarden-fixture")
INIT = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}\n'

# (from, to, who): the relay's and the keeper's intervals up to the server's start.
INTERVALS = [("run_start", "keeper_forked", "relay: sandbox plan (first half), fork"),
             ("keeper_forked", "sandbox_complete", "relay: path rules (second half)"),
             ("keeper_forked", "keeper_start", "keeper: from the fork to its first step"),
             ("keeper_start", "keeper_contained", "keeper: containment set-up"),
             ("keeper_contained", "keeper_spawning", "keeper: wait for sandbox-ready"),
             ("keeper_spawning", "keeper_spawned", "keeper: spawn (apply, exec)"),
             ("keeper_spawned", "spawned_received", "relay: wait for spawned"),
             ("run_start", "relay_started", "relay: run_start to relaying")]
KEEPER = {"keeper_start", "keeper_contained", "keeper_spawning", "keeper_spawned"}


def one(p):
    env = dict(os.environ, MCPWARDEN_PHASES="1")
    env.pop("MCPWARDEN_FAULT", None)
    binary = cli
    if p == "base":
        binary, p = base_cli, profile
    r = subprocess.run([binary, "run", "--no-journal", "--sandbox", p, "--", fixture], input=INIT,
                       capture_output=True, env=env, cwd="/tmp", timeout=30)
    phases = {}
    for line in r.stderr.decode(errors="replace").splitlines():
        w = line.split()
        if len(w) == 4 and w[0] == "mcpwarden-phase":
            phases.setdefault(w[1], (int(w[2]) / 1e6, int(w[3]) / 1e6))
    return phases


runs = {baseline: [], profile: []}
for _ in range(starts):
    for p in runs:
        runs[p].append(one(p))

print(f"load average {os.getloadavg()[0]:.2f}; median of {starts} starts each, ms")
print(f"{'interval':44} {baseline + ' wall':>13} {'cpu':>7} {profile + ' wall':>12} {'cpu':>7} "
      f"{'+wall':>7}")
for a, b, what in INTERVALS:
    row = []
    for p in runs:
        d = [(r[b][0] - r[a][0], r[b][1] - r[a][1]) for r in runs[p] if a in r and b in r]
        # CPU only where both phases are the same process's (an interval across the two has
        # no CPU time of its own).
        same = (a in KEEPER) == (b in KEEPER)
        wall = statistics.median(x for x, _ in d) if d else float("nan")
        cpu = statistics.median(y for _, y in d) if d and same else float("nan")
        row += [wall, cpu]
    print(f"{what:44} {row[0]:13.3f} {row[1]:7.3f} {row[2]:12.3f} {row[3]:7.3f} "
          f"{row[2] - row[0]:+7.3f}")
