#!/bin/sh
# The demo of the installed package (mcpwarden_*.deb unpacked as dpkg would install it)
# shows all four rows where node and npx are present, with server-everything as a user
# who once ran `npx -y @modelcontextprotocol/server-everything` has it: in the npm cache.
# The cache is filled from the test peers of tests/e2e (tests/e2e/local_registry.py serves them on
# 127.0.0.1), that registry is stopped, and the demo runs in an empty directory with npm
# offline: nothing comes from the network, nothing from the source tree.
# usage: demo.sh SOURCE_DIR DEB_DIR
set -eu
src=$1 debs=$2
modules=$src/tests/e2e/node_modules
if ! command -v node >/dev/null 2>&1 || ! command -v npx >/dev/null 2>&1 ||
   [ ! -d "$modules/@modelcontextprotocol/server-everything" ]; then
    echo "node, npx or tests/e2e/node_modules missing: skipped"
    exit 77
fi
if command -v mcp-server-everything >/dev/null 2>&1; then
    echo "mcp-server-everything is on PATH: this test is about npx --offline; skipped"
    exit 77
fi
run=$(ls "$debs"/mcpwarden_*.deb 2>/dev/null | head -n1)
[ -n "$run" ] || { echo "no mcpwarden_*.deb in $debs (packaging.deb_contents makes it)"; exit 1; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-demo.XXXXXX")
registry=
cleanup() {
    [ -z "$registry" ] || kill "$registry" 2>/dev/null || true
    rm -rf "$tmp"
}
trap cleanup EXIT INT TERM
mkdir -p "$tmp/home" "$tmp/empty"
export HOME="$tmp/home" npm_config_cache="$tmp/npm-cache" npm_config_update_notifier=false \
       npm_config_audit=false npm_config_fund=false

# The cache, as `npx -y` fills it, from the test peers served on 127.0.0.1.
# It serves until its stdin (fd 3 here) closes.
mkfifo "$tmp/registry.in"
python3 "$src/tests/e2e/local_registry.py" "$(readlink -f "$modules")" <"$tmp/registry.in" >"$tmp/port" &
registry=$!
exec 3>"$tmp/registry.in"
for _ in $(seq 100); do [ -s "$tmp/port" ] && break; sleep 0.1; done
[ -s "$tmp/port" ] || { echo "the test registry did not start"; exit 1; }
export npm_config_registry="http://127.0.0.1:$(head -n 1 "$tmp/port")/"
(cd "$tmp/empty" && timeout 300 npx --yes -p @modelcontextprotocol/server-everything -- true) \
    >"$tmp/npx.log" 2>&1 || { cat "$tmp/npx.log"; echo "filling the npm cache failed"; exit 1; }
exec 3>&-
wait "$registry" 2>/dev/null || true
registry=

dpkg-deb -x "$run" "$tmp/root"
libdir=$(dirname "$(find "$tmp/root/usr/lib" -name 'libmcpwarden.so.0' | head -n1)")
cd "$tmp/empty"
TMPDIR=$tmp npm_config_offline=true NO_COLOR=1 LD_LIBRARY_PATH=$libdir \
    timeout 300 "$tmp/root/usr/bin/mcpwarden" demo --json </dev/null >"$tmp/demo.json" 2>"$tmp/demo.err" ||
    { cat "$tmp/demo.err" "$tmp/demo.json"; echo "the installed demo failed"; exit 1; }
python3 - "$tmp/demo.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
bad = [r["server"] + ": " + r["skipped"] for r in rows if "skipped" in r]
assert len(rows) == 4, "rows: %d" % len(rows)
assert not bad, "skipped rows: %s" % bad
ev = [r for r in rows if r["server"] == "server-everything"][0]
assert ev["command"][:2] == ["npx", "--offline"], ev["command"]
assert ev["with"]["processes_left"] == 0, ev["with"]
assert d["ok"], "the demo is not ok"
print("demo of the installed package: 4 rows; server-everything through", " ".join(ev["command"]))
EOF
