#!/usr/bin/env python3
# bench/stateless.py: what a 2026-07-28 (stateless) client costs through mcpwarden run.
#
#   python3 bench/stateless.py BUILD_DIR [--connects 5] [--window 3] [--base OTHER_BUILD_DIR]
#
# With --base, every measurement is made with the other build's mcpwarden too (a previous
# commit's build: the figures before a change, in the same run).
#
# 1. Connect through --lazy with a warm catalog. The official SDK v2 client pinned to 2026-07-28
#    (tests/e2e/sdk2_client.mjs, no calls: its connect is a server/discover probe on a copy of
#    the server command, then tools/list on the real one) against the dual-era SDK v2 server
#    (tests/e2e/sdk2_server.mjs, answers cacheable for a minute by anyone), through
#    `run --lazy` with one journal: the first connect meets a cold catalog, the next ones a warm
#    one. Per connect: the server processes started (session.wake records with lazy_start, for
#    the probe's session and the real one) and the connect's wall time. Baseline in the same
#    run: the same connects direct, and the same server with cacheScope private (its answers
#    may not be kept: every connect starts a server for the probe and one for the list).
#    Needs node and tests/e2e/node_modules.
# 2. The relay of an idle stateless session under --idle-stop. The fixture, one 2026-07-28
#    request (tools/list with _meta), then the client idles: the relay's voluntary context
#    switches (/proc/PID/status) and CPU time (/proc/PID/stat) over a window of --window
#    seconds, starting 1 s after the answer, for no --idle-stop (the baseline), --idle-stop 0,
#    500ms and 1h, a legacy session (initialize) under --idle-stop 500ms beside it, and a
#    stateless session with a subscriptions/listen stream open (activity: the server stays
#    awake, and the relay has no idle timer to run until the stream ends). The
#    relay sleeps in epoll_wait the whole window once the server is asleep: its own idle timer
#    is the only wake-up there is to have, and it has fired before the window.
# Prints the load average: the figures are only comparable at similar load.
import json, os, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
args = sys.argv[2:]
connects = int(args[args.index("--connects") + 1]) if "--connects" in args else 5
window = float(args[args.index("--window") + 1]) if "--window" in args else 3.0
base = args[args.index("--base") + 1] if "--base" in args else None
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
cli, fixture = os.path.abspath(os.path.join(build, "mcpwarden")), os.path.abspath(
    os.path.join(build, "mcpwarden-fixture"))
e2e = os.path.join(root, "tests", "e2e")
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "1"}}


def journal_rows(cli, db, kind):
    out = subprocess.run([cli, "journal", "sessions", "--journal", db, "--json"],
                         capture_output=True, text=True, check=True).stdout
    rows = []
    for s in json.loads(out):
        show = subprocess.run([cli, "journal", "show", "--journal", db, "--jsonl", s["session"]],
                              capture_output=True, text=True, check=True).stdout
        for line in show.splitlines():
            r = json.loads(line)
            if r.get("kind") == kind:
                rows.append(r)
    return rows


def sdk2_connect(server):
    t = time.monotonic()
    out = subprocess.run(["node", os.path.join(e2e, "sdk2_client.mjs"), "--mode", "pin", "--"] +
                         server, capture_output=True, text=True, timeout=60, cwd=e2e)
    ms = (time.monotonic() - t) * 1000
    answer = json.loads(out.stdout.splitlines()[0]) if out.stdout else {}
    if not answer.get("ok"):
        sys.exit(f"stateless.py: the SDK v2 client failed: {out.stdout} {out.stderr}")
    return ms


def lazy_connects(cli, scope):
    server = ["node", os.path.join(e2e, "sdk2_server.mjs"), "--ttl-ms", "60000",
              "--cache-scope", scope]
    direct = [sdk2_connect(server) for _ in range(connects)]
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "journal.db")
        lazy = [cli, "run", "--journal", db, "--lazy", "--"] + server
        times, starts, seen = [], [], 0
        for _ in range(connects):
            times.append(sdk2_connect(lazy))
            wakes = [r for r in journal_rows(cli, db, "session.wake")
                     if r.get("data", {}).get("lazy_start")]
            starts.append(len(wakes) - seen)
            seen = len(wakes)
    return direct, times, starts


def status_field(pid, name):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    return 0


def cpu_ms(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def idle_relay(cli, idle_stop, stateless=True, listen=False):
    argv = [cli, "run", "--no-journal"]
    if idle_stop is not None:
        argv += ["--idle-stop", idle_stop]
    p = subprocess.Popen(argv + ["--", fixture], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL)

    def ask(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        p.stdin.flush()
        p.stdout.readline()

    if stateless:
        ask({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": META}})
        if listen:  # the fixture leaves it open: no answer to wait for
            p.stdin.write((json.dumps({"jsonrpc": "2.0", "id": "listen-1",
                                       "method": "subscriptions/listen",
                                       "params": {"_meta": META}}) + "\n").encode())
            p.stdin.flush()
    else:
        ask({"jsonrpc": "2.0", "id": 1, "method": "initialize",
             "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                        "clientInfo": {"name": "bench", "version": "1"}}})
        p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        ask({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    time.sleep(1.0)  # the idle timer of 0 and 500ms has fired: the server is asleep
    v0, c0 = status_field(p.pid, "voluntary_ctxt_switches"), cpu_ms(p.pid)
    time.sleep(window)
    v1, c1 = status_field(p.pid, "voluntary_ctxt_switches"), cpu_ms(p.pid)
    p.stdin.close()
    p.wait(30)
    return v1 - v0, c1 - c0


def measure(label, cli):
    print(f"== {label}: {cli}")
    if os.path.isdir(os.path.join(e2e, "node_modules", "@modelcontextprotocol", "client")):
        for scope in ("public", "private"):
            direct, times, starts = lazy_connects(cli, scope)
            print(f"SDK v2 pinned connect, cacheScope {scope}: direct "
                  f"{statistics.median(direct):.0f} ms (median of {connects}); through --lazy: "
                  f"cold {times[0]:.0f} ms, {starts[0]} servers started; warm "
                  f"{statistics.median(times[1:]):.0f} ms (median of {connects - 1}), servers "
                  f"started per connect {starts[1:]}")
    else:
        print("SDK v2 connect: skipped (tests/e2e/node_modules absent)")
    print(f"relay of an idle session, {window:.0f} s window 1 s after its answer:")
    for label, idle_stop, stateless, listen in (
            ("stateless, no --idle-stop (baseline)", None, True, False),
            ("stateless, --idle-stop 0", "0", True, False),
            ("stateless, --idle-stop 500ms", "500ms", True, False),
            ("stateless, --idle-stop 1h", "1h", True, False),
            ("legacy, --idle-stop 500ms", "500ms", False, False),
            ("stateless, a listen stream open, no --idle-stop", None, True, True),
            ("stateless, a listen stream open, --idle-stop 0", "0", True, True)):
        switches, ms = idle_relay(cli, idle_stop, stateless, listen)
        print(f"  {label:48}: {switches} voluntary context switches, {ms:.0f} ms CPU")


def main():
    print(f"load average: {open('/proc/loadavg').read().split()[:3]}")
    measure("this build", cli)
    if base:
        measure("base", os.path.abspath(os.path.join(base, "mcpwarden")))


main()
