#!/usr/bin/env python3
# bench/share.py: what `run --share` saves and costs.
#
#   python3 bench/share.py BUILD_DIR [--sessions 5] [--calls 300] [--everything] [--base-cli PATH]
#
# Five client sessions of one server (the fixture; with --everything, server-everything from
# tests/e2e/node_modules too), each `mcpwarden run -- SERVER` (unshared) against
# `mcpwarden run --share -- SERVER` (one tree through the user's broker), in the same run, each
# mode with a journal and a runtime directory of its own in a temporary directory:
#   - server processes, and the total PSS of everything of the sessions (the clients' runs, the
#     broker, the trees' runs and keepers, the servers), after every session initialized and
#     made its calls, and the anonymous part of it (what the sessions make, not their share of
#     the libraries' pages); the whole --share against one unshared session run on its own;
#   - a round trip (tools/call echo) p50 and p90 over --calls calls per session, one session at a
#     time; the shared p50 minus the unshared p50 is what the broker adds;
#   - join to initialize: from the spawn of a session's `run` to its initialize answer (the
#     first session of --share starts the broker and the tree; the later ones join it), and
#     the initialize round trip alone (written at the spawn, so it includes the `run`'s own
#     start);
#   - the same join split in two, by one more session that sends a `ping` first: from the spawn
#     to the ping's answer (the `run` started, connected, and its session on record: the broker
#     answers a ping once the request is), then the initialize round trip on that session.
# With --base-cli (another build's mcpwarden), its --share is measured too, in the same run, after
# ours: a change's A/B at the same load. With --rounds R, the round trip again on its own: one
# session of each mode, --calls calls, R times in turns; the median of the R p50s and their
# range, so that a difference is told from the run's noise.
# Prints the load average: the figures are only comparable at similar load.
import json, os, shutil, statistics, subprocess, sys, tempfile, time

build = sys.argv[1] if len(sys.argv) > 1 else "build"
args = sys.argv[2:]
sessions = int(args[args.index("--sessions") + 1]) if "--sessions" in args else 5
calls = int(args[args.index("--calls") + 1]) if "--calls" in args else 300
cli, fixture = os.path.join(build, "mcpwarden"), os.path.join(build, "mcpwarden-fixture")
base_cli = args[args.index("--base-cli") + 1] if "--base-cli" in args else None
rounds = int(args[args.index("--rounds") + 1]) if "--rounds" in args else 0
src = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
everything = os.path.join(src, "tests/e2e/node_modules/@modelcontextprotocol/server-everything/dist/index.js")
INIT = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}


class Session:
    def __init__(self, argv, env):
        self.t0 = time.monotonic()
        self.p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, env=env)
        self.next = 1

    def call(self, method, params):
        msg = {"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}
        self.next += 1
        t = self.t_sent = time.monotonic()
        self.p.stdin.write((json.dumps(msg) + "\n").encode())
        self.p.stdin.flush()
        while True:
            line = self.p.stdout.readline()
            if not line:
                raise RuntimeError("session ended")
            if json.loads(line).get("id") == msg["id"]:
                return (time.monotonic() - t) * 1e6  # µs

    def initialize(self):
        rt = self.call("initialize", INIT)
        joined = (time.monotonic() - self.t0) * 1e3  # ms
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.p.stdin.flush()
        return joined, rt

    def close(self):
        self.p.stdin.close()
        self.p.wait(30)


def tagged(tag):
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if f"BENCH_SHARE_TAG={tag}".encode() in f.read().split(b"\0"):
                    out.append(int(d))
        except OSError:
            pass
    return out


def pss_kb(pid, field="Pss:"):
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for l in f:
                if l.startswith(field):
                    return int(l.split()[1])
    except OSError:
        pass
    return 0


def closure(path):
    """The shared libraries `path` loads, by file name (ldd)."""
    out = subprocess.run(["ldd", path], capture_output=True, text=True).stdout
    return {os.path.basename(os.path.realpath(l.split()[2])) for l in out.splitlines()
            if "=>" in l and "/" in l}


def curl_only():
    """The libraries only libcurl brings into mcpwarden (only `export` uses it)."""
    out = subprocess.run(["ldd", cli], capture_output=True, text=True).stdout
    paths = {l.split()[0]: l.split()[2] for l in out.splitlines() if "=>" in l and "/" in l}
    direct = subprocess.run(["readelf", "-d", cli], capture_output=True, text=True).stdout
    needed = [l.split("[")[1].rstrip("]") for l in direct.splitlines() if "(NEEDED)" in l]
    curl = next((n for n in needed if n.startswith("libcurl")), None)
    if not curl or curl not in paths:
        return set()
    others = set()
    for n in needed:
        if n != curl and n in paths:
            others |= closure(paths[n]) | {os.path.basename(os.path.realpath(paths[n]))}
    return (closure(paths[curl]) | {os.path.basename(os.path.realpath(paths[curl]))}) - others


def private_kb(pid, curl_libs):
    """What one process maps privately (Private_Dirty, kB), grouped, and its PSS."""
    groups, cur = {}, "other"
    try:
        with open(f"/proc/{pid}/smaps") as f:
            for l in f:
                parts = l.split()
                if "-" in parts[0] and not parts[0].endswith(":"):
                    name = os.path.basename(parts[5]) if len(parts) >= 6 else "[anon]"
                    cur = ("heap and anonymous" if name in ("[heap]", "[anon]", "[stack]") else
                           "libraries only libcurl brings" if name in curl_libs else
                           "libcrypto, libssl" if name.startswith(("libcrypto", "libssl")) else
                           "mcpwarden" if name == "mcpwarden" else "other libraries")
                elif parts[0] in ("Private_Dirty:", "Pss:"):
                    key = (cur, parts[0][:-1])
                    groups[key] = groups.get(key, 0) + int(parts[1])
    except OSError:
        pass
    return groups


def argv0(pid):
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")
    except OSError:
        return [b""]


def measure(server, share, server_word, cli=cli, n=None):
    tmp = tempfile.mkdtemp(prefix="bench-share-")
    tag = f"{os.getpid()}-{share}-{time.monotonic_ns()}"
    env = dict(os.environ, XDG_RUNTIME_DIR=tmp, MCPWARDEN_JOURNAL=os.path.join(tmp, "j.db"),
               BENCH_SHARE_TAG=tag)
    argv = [cli, "run"] + (["--share", "--share-linger", "1s"] if share else []) + ["--"] + server
    ss, joins, inits = [], [], []
    for _ in range(n or sessions):
        s = Session(argv, env)
        j, rt = s.initialize()
        joins.append(j)
        inits.append(rt)
        ss.append(s)
    rts = []
    for s in ss:
        for _ in range(calls):
            rts.append(s.call("tools/call", {"name": "echo", "arguments": {"text": "x", "message": "x"}}))
    time.sleep(0.3)
    pids = tagged(tag)
    servers = [p for p in pids if server_word in argv0(p)[0].decode(errors="replace") or
               (argv0(p)[0].endswith(b"node") and b"mcpwarden" not in b" ".join(argv0(p)))]
    total = sum(pss_kb(p) for p in pids)
    # Of it, the anonymous memory (heaps, stacks, the libraries' relocated data): what the
    # sessions make; the rest is their share of files' pages, which moves with how many other
    # processes on the machine map the same libraries.
    anon = sum(pss_kb(p, "Pss_Anon:") for p in pids)
    one_client = private_kb(ss[-1].p.pid, curl_only())  # a later session's own `run`
    # One more session, measured after the others' memory: ping first, then initialize.
    extra = Session(argv, env)
    ping_ms = extra.call("ping", {}) / 1e3 + (extra.t_sent - extra.t0) * 1e3
    init_after_ping = extra.initialize()[1]
    ss.append(extra)
    for s in ss:
        s.close()
    deadline = time.monotonic() + 20
    while tagged(tag) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = len(tagged(tag))
    if not left:
        shutil.rmtree(tmp, ignore_errors=True)
    rts.sort()
    return {"servers": len(servers), "processes": len(pids), "pss_mb": total / 1024,
            "pss_anon_mb": anon / 1024,
            "p50_us": statistics.median(rts), "p90_us": rts[int(len(rts) * 0.9)],
            "join_first_ms": joins[0], "join_later_ms": statistics.median(joins[1:]) if len(joins) > 1 else 0,
            "init_later_us": statistics.median(inits[1:]) if len(inits) > 1 else 0,
            "ping_first_ms": ping_ms, "init_after_ping_us": init_after_ping, "left": left,
            "one_client": one_client}


def report(name, server, word):
    plain = measure(server, False, word)
    shared = measure(server, True, word)
    base = measure(server, True, word, base_cli) if base_cli else None
    print(f"\n{name}: {sessions} sessions, {calls} calls each")
    print(f"{'':22}{'unshared':>12}{'--share':>12}" + (f"{'base --share':>14}" if base else ""))
    for key, fmt in [("servers", "{:.0f}"), ("processes", "{:.0f}"), ("pss_mb", "{:.1f}"), ("pss_anon_mb", "{:.1f}"),
                     ("p50_us", "{:.0f}"), ("p90_us", "{:.0f}"), ("join_first_ms", "{:.1f}"),
                     ("join_later_ms", "{:.1f}"), ("init_later_us", "{:.0f}"), ("ping_first_ms", "{:.1f}"),
                     ("init_after_ping_us", "{:.0f}"), ("left", "{:.0f}")]:
        print(f"{key:22}{fmt.format(plain[key]):>12}{fmt.format(shared[key]):>12}" +
              (f"{fmt.format(base[key]):>14}" if base else ""))
    groups = sorted({g for g, _ in shared["one_client"]})
    print("one later client's `run --share`, by mapping (kB): Pss / Private_Dirty")
    for g in groups:
        print(f"  {g:32}{shared['one_client'].get((g, 'Pss'), 0):>8}"
              f"{shared['one_client'].get((g, 'Private_Dirty'), 0):>8}")
    print(f"  {'total':32}{sum(v for (g, k), v in shared['one_client'].items() if k == 'Pss'):>8}"
          f"{sum(v for (g, k), v in shared['one_client'].items() if k == 'Private_Dirty'):>8}")
    # One unshared session on its own, with the same calls: its PSS counts the whole of its
    # libraries' pages, as the sessions' together do; a fifth of five unshared sessions counts a
    # fifth of them, and is not what one session costs.
    alone = measure(server, False, word, n=1)["pss_mb"]
    print(f"whole --share / one unshared session alone ({alone:.1f} MB): "
          f"{shared['pss_mb'] / alone:.2f}x (against a {sessions}th of {sessions} unshared: "
          f"{shared['pss_mb'] / (plain['pss_mb'] / sessions):.2f}x); "
          f"round trip added p50: {shared['p50_us'] - plain['p50_us']:+.0f} µs" +
          (f" (base: {base['p50_us'] - plain['p50_us']:+.0f} µs)" if base else ""))


def round_trips(server):
    """The p50 of --calls calls of one session, per mode, --rounds times in turns."""
    modes = [("unshared", cli, False), ("--share", cli, True)] + (
        [("base --share", base_cli, True)] if base_cli else [])
    p50s = {name: [] for name, _, _ in modes}
    for _ in range(rounds):
        for name, exe, share in modes:
            tmp = tempfile.mkdtemp(prefix="bench-share-")
            env = dict(os.environ, XDG_RUNTIME_DIR=tmp, MCPWARDEN_JOURNAL=os.path.join(tmp, "j.db"))
            argv = [exe, "run"] + (["--share", "--share-linger", "1s"] if share else []) + ["--"] + server
            s = Session(argv, env)
            s.initialize()
            rts = sorted(s.call("tools/call", {"name": "echo", "arguments": {"text": "x", "message": "x"}})
                         for _ in range(calls))
            s.close()
            time.sleep(1.2)  # the broker's linger (1s): its socket and journal go with the directory
            shutil.rmtree(tmp, ignore_errors=True)
            p50s[name].append(statistics.median(rts))
    print(f"round trip, {rounds} rounds of {calls} calls: median p50 (range of the p50s), added over unshared")
    plain = statistics.median(p50s["unshared"])
    for name, xs in p50s.items():
        m = statistics.median(xs)
        print(f"  {name:14}{m:8.1f} us ({min(xs):.0f}-{max(xs):.0f})  {m - plain:+7.1f} us")


print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
if rounds:
    round_trips([fixture])
    print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
    sys.exit(0)
report("fixture", [fixture], "mcpwarden-fixture")
if "--everything" in args and os.path.exists(everything):
    report("server-everything", ["node", everything, "stdio"], "server-everything")
print("load average:", " ".join(f"{x:.2f}" for x in os.getloadavg()))
