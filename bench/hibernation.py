#!/usr/bin/env python3
# bench/hibernation.py: what --idle-stop saves and what a wake costs.
#
#   python3 bench/hibernation.py BUILD_DIR [--servers 10] [--wakes 10]
#
# 1. Ten servers (the fixture: a server and its port-holding helper each), one client session
#    each that initializes, lists the tools and calls echo once on the first server; then the
#    client stays connected and idle. Processes and RSS of everything under the ten relays
#    (relay and keeper included) right after the calls and 2 s later, plain vs --idle-stop 500ms
#    (--no-journal), and journaled plain vs --lazy (a journal in a temporary directory, its
#    catalog made by one session first: the nine servers that are initialized and listed but
#    never called start no server at all). The journal costs the relay memory of its own, so
#    --lazy is compared with the journaled plain row.
# 2. The cold start a wake adds: a call that wakes the server (round trip) against the
#    baseline of the server's own start-up (spawned directly, until its initialize answer) plus
#    a warm call's round trip; the difference is what the wake machinery adds. The same for
#    --lazy: the first call of a session whose initialize and tools/list the catalog answered.
# Prints the load average: the figures are only comparable at similar load.
import json, os, signal, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
args = sys.argv[2:]
servers = int(args[args.index("--servers") + 1]) if "--servers" in args else 10
wakes = int(args[args.index("--wakes") + 1]) if "--wakes" in args else 10
cli, fixture = os.path.join(build, "mcpwarden"), os.path.join(build, "mcpwarden-fixture")
INIT = {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}


class Client:
    # own_group: the command starts a process group of its own (the baseline's fixture, run
    # without mcpwarden: nothing else would end its port-holding helper).
    def __init__(self, argv, own_group=False):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, start_new_session=own_group)
        self.own_group = own_group
        self.next = 1

    def call(self, method, params=None):
        msg = {"jsonrpc": "2.0", "id": self.next, "method": method}
        if method == "initialize":
            msg = dict(INIT, id=self.next)
        elif params is not None:
            msg["params"] = params
        self.next += 1
        t = time.monotonic()
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()
        self.p.stdout.readline()
        return (time.monotonic() - t) * 1000

    def notify(self, method):
        self.p.stdin.write((json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode())
        self.p.stdin.flush()

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)
        if self.own_group:
            # The fixture left on EOF; its helper is still in the group it started (which
            # it keeps from being reused): end it, as a client without mcpwarden would have
            # to, or it outlives the benchmark.
            try:
                os.killpg(self.p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def tree(pid):
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for t in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{t}/children") as f:
                    todo += [int(c) for c in f.read().split()]
        except OSError:
            pass
    return out


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def measure(clients):
    pids = [p for c in clients for p in tree(c.p.pid)]
    return len(pids), sum(rss_kb(p) for p in pids) / 1024


def ten_servers(flags):
    journal = [] if "--journal" in flags else ["--no-journal"]
    argv = [cli, "run", *journal, "--eof-grace", "200ms", "--term-grace", "300ms", *flags,
            "--", fixture]
    clients = [Client(argv) for _ in range(servers)]
    for c in clients:
        c.call("initialize")
        c.notify("notifications/initialized")
        c.call("tools/list")
    clients[0].call("tools/call", {"name": "echo", "arguments": {"text": "x"}})
    busy = measure(clients)
    time.sleep(2)
    idle = measure(clients)
    for c in clients:
        c.close()
    return busy, idle


def own_startup():
    c = Client([fixture], own_group=True)
    t = time.monotonic()
    c.call("initialize")
    ms = (time.monotonic() - t) * 1000
    c.close()
    return ms


def wake_costs():
    c = Client([cli, "run", "--no-journal", "--idle-stop", "200ms", "--eof-grace", "200ms", "--",
                fixture])
    c.call("initialize")
    c.notify("notifications/initialized")
    echo = {"name": "echo", "arguments": {"text": "x"}}
    warm = statistics.median([c.call("tools/call", echo) for _ in range(20)])
    waking = []
    for _ in range(wakes):
        time.sleep(0.7)  # asleep: idle 200 ms, EOF window, teardown
        waking.append(c.call("tools/call", echo))
    c.close()
    return warm, statistics.median(waking)


def lazy_first_calls(journal):
    argv = [cli, "run", "--lazy", "--journal", journal, "--eof-grace", "200ms", "--", fixture]
    echo = {"name": "echo", "arguments": {"text": "x"}}
    first = []
    for _ in range(wakes):
        c = Client(argv)
        c.call("initialize")
        c.notify("notifications/initialized")
        c.call("tools/list")
        first.append(c.call("tools/call", echo))
        c.close()
    return statistics.median(first)


def prime_catalog(journal):
    c = Client([cli, "run", "--lazy", "--journal", journal, "--eof-grace", "200ms", "--",
                fixture])
    c.call("initialize")
    c.notify("notifications/initialized")
    c.call("tools/list")
    c.close()


tmp = tempfile.TemporaryDirectory(prefix="mcpw-bench-")
journal = os.path.join(tmp.name, "journal.db")
prime_catalog(journal)
print("load average:", " ".join(open("/proc/loadavg").read().split()[:3]))
for name, flags in (("plain", []), ("--idle-stop 500ms", ["--idle-stop", "500ms"]),
                    ("plain, journaled", ["--journal", journal]),
                    ("--lazy, journaled", ["--lazy", "--journal", journal])):
    (bp, br), (ip, ir) = ten_servers(flags)
    print(f"{servers} servers, {name:18}: after the calls {bp:3d} processes {br:7.1f} MiB; "
          f"idle 2 s later {ip:3d} processes {ir:7.1f} MiB")
base = statistics.median([own_startup() for _ in range(wakes)])
warm, waking = wake_costs()
print(f"baseline: the server's own start-up to its initialize answer {base:.1f} ms "
      f"(median of {wakes}), a warm call {warm:.2f} ms")
print(f"a call that wakes the server: {waking:.1f} ms (median of {wakes}); added by the wake "
      f"over start-up + warm call: {waking - base - warm:+.1f} ms; ratio {waking / (base + warm):.2f}")
lazy = lazy_first_calls(journal)
print(f"--lazy, the first call (starts the server): {lazy:.1f} ms (median of {wakes}); added "
      f"over start-up + warm call: {lazy - base - warm:+.1f} ms; ratio {lazy / (base + warm):.2f}")
# `run` reaps its keeper before it exits (docs/RUN.md, "When run returns"): nothing writes to
# the directory any more.
tmp.cleanup()
