#!/usr/bin/env python3
# bench/supervise.py: what the server's log and --restart cost (docs/LOGS.md).
#
#   python3 bench/supervise.py BUILD_DIR [--trials 10] [--calls 2000] [--rate 50]
#
# 1. Crash -> next request answered. A session of tests/shim/crashing_server.py under
#    --restart on-failure (no start limit in the way: an interval of 1 ms); per trial the
#    client calls `crash`, and as soon as the error answering it arrives, calls `pid`: the time
#    from that error to the answer of the new server. Baseline in the same run, interleaved with
#    the trials: the server's own cold start (spawned directly, until its initialize answer).
#    Goal: <= start-up + 5 ms.
# 2. Round trips under a stderr flood. The fixture server beside a process that writes RATE MB/s
#    to the same stderr; `--calls` echo calls one after the other, their median round trip:
#    no flood; flood with logs off; flood logged (log-size 1MiB, log-files 4). Goal: logged
#    within 10 % of no flood; the log directory within log-files x log-size.
# Prints the load average: the figures are only comparable at similar load.
import json, os, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
args = sys.argv[2:]
opt = lambda name, d: type(d)(args[args.index(name) + 1]) if name in args else d
trials, calls, rate = opt("--trials", 10), opt("--calls", 2000), opt("--rate", 50)
here = os.path.dirname(os.path.abspath(__file__))
cli, fixture = os.path.join(build, "mcpwarden"), os.path.join(build, "mcpwarden-fixture")
server = ["python3", os.path.join(here, "..", "tests", "shim", "crashing_server.py")]
INIT = {"jsonrpc": "2.0", "method": "initialize", "params": {"protocolVersion": "2025-06-18",
        "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}}
FLOOD = r"""
import os, sys, time
rate = float(sys.argv[1]) * 1e6
chunk = (b"x" * 1023 + b"\n") * 64
start, sent = time.monotonic(), 0
while True:
    os.write(2, chunk)
    sent += len(chunk)
    ahead = sent / rate - (time.monotonic() - start)
    if ahead > 0:
        time.sleep(ahead)
"""


class Client:
    def __init__(self, argv):
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL)
        self.next = 1

    def send(self, method, params=None):
        msg = dict(INIT) if method == "initialize" else {"jsonrpc": "2.0", "method": method}
        msg["id"] = self.next
        if params is not None:
            msg["params"] = params
        self.next += 1
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()

    def call(self, method, params=None):
        t = time.monotonic()
        self.send(method, params)
        line = self.p.stdout.readline()
        return (time.monotonic() - t) * 1000, json.loads(line)

    def handshake(self):
        self.call("initialize")
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)


def cold_start():
    c = Client(server)
    ms, _ = c.call("initialize")
    c.close()
    return ms


def crash_to_next(db):
    c = Client([cli, "run", "--restart", "on-failure", "--restart-burst", "100",
                "--restart-interval", "1", "--journal", db, "--"] + server)
    c.handshake()
    base, out = [], []
    for _ in range(trials):  # interleaved: both see the same load
        base.append(cold_start())
        _, err = c.call("tools/call", {"name": "crash"})
        assert "error" in err, err
        ms, ok = c.call("tools/call", {"name": "pid"})
        assert "result" in ok, ok
        out.append(ms)
    c.close()
    return base, out


def round_trips(flood, logs, state):
    inner = [fixture] if not flood else [
        "sh", "-c", 'python3 -c "$0" "$1" & exec "$2"', FLOOD, str(rate), fixture]
    os.environ["MCPWARDEN_LOGS"] = "true" if logs else "false"
    c = Client([cli, "run", "--journal", os.path.join(state, "journal.db"), "--"] + inner)
    c.handshake()
    time.sleep(0.5)  # the flood under way
    times = [c.call("tools/call", {"name": "echo", "arguments": {"text": "hi"}})[0]
             for _ in range(calls)]
    c.close()
    return statistics.median(times)


def du(path):
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            total += os.path.getsize(os.path.join(root, f))
    return total


with tempfile.TemporaryDirectory() as tmp:
    base, restart = (statistics.median(x) for x in crash_to_next(os.path.join(tmp, "crash.db")))
    print(f"baseline: the server's own start-up to its initialize answer {base:.1f} ms "
          f"(median of {trials})")
    print(f"crash -> next request answered: {restart:.1f} ms (median of {trials}); "
          f"over start-up: {restart - base:+.1f} ms")
    rows = []
    for name, flood, logs in (("no flood", False, True), ("flood, logs off", True, False),
                              ("flood, logged", True, True)):
        state = os.path.join(tmp, name.replace(" ", "_").replace(",", ""))
        os.makedirs(state)
        rows.append((name, round_trips(flood, logs, state), du(os.path.join(state, "logs"))))
    os.environ.pop("MCPWARDEN_LOGS")
    for name, rt, disk in rows:
        print(f"{name:16}: echo round trip {rt * 1000:.0f} us (median of {calls}); "
              f"ratio {rt / rows[0][1]:.2f}; log directory {disk / 1048576:.2f} MiB")
    print(f"flood {rate} MB/s; bound log-files 4 x log-size 1MiB = 4.00 MiB")
print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
