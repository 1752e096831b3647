#!/bin/sh
# The real clients with `mcpwarden wrap --sandbox strict` on the commonest server
# configuration there is, `npx -y @modelcontextprotocol/server-everything`: in a scratch HOME
# whose npm cache an earlier unconfined npx filled (from tests/e2e/node_modules, served on
# 127.0.0.1 by tests/e2e/local_registry.py, then stopped: no network), wrap does its dry start
# and writes the configs; `claude mcp list` and `gemini mcp list` must then report the server
# connected, each within its own bound (a confined npx that tried the registry would hang).
# The negative control: the same wrap with the launcher unknown to the plan
# (MCPWARDEN_FAULT=sandbox_launcher) fails its dry start and writes nothing.
# usage: sandbox_npx.sh MCPWARDEN   (exit 77, skipped, before `npm ci` here or in tests/e2e)
set -eu
case $1 in /*) cli=$1 ;; *) cli=$(pwd)/$1 ;; esac  # the scratch directory is where it runs
here=$(cd "$(dirname "$0")" && pwd)
e2e=$(cd "$here/../e2e" && pwd)
bin=$here/node_modules/.bin
spec=@modelcontextprotocol/server-everything
[ -x "$bin/claude" ] && [ -x "$bin/gemini" ] && [ -d "$e2e/node_modules/$spec" ] || {
    echo "skipped: the real clients or tests/e2e/node_modules are not installed"
    exit 77
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-sandbox-npx.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
home=$tmp/home
mkdir -p "$home/.gemini"
export HOME="$home"
export npm_config_update_notifier=false

# The cache, as a first unconfined `npx -y` leaves it.
mkfifo "$tmp/registry.in"
python3 "$e2e/local_registry.py" "$e2e/node_modules" <"$tmp/registry.in" >"$tmp/registry.port" &
registry=$!
exec 3>"$tmp/registry.in"
i=0
until [ -s "$tmp/registry.port" ] || [ $i -ge 100 ]; do i=$((i + 1)); sleep 0.1; done
printf 'registry=http://127.0.0.1:%s/\n' "$(head -n 1 "$tmp/registry.port")" >"$home/.npmrc"
timeout 200 npm exec --yes --package="$spec" -- node -e 0
exec 3>&-
wait "$registry" || true

entry="{\"command\": \"npx\", \"args\": [\"-y\", \"$spec\"]}"
printf '{"hasCompletedOnboarding": true, "mcpServers": {"everything": %s}}\n' "$entry" >"$home/.claude.json"
printf '{"mcpServers": {"everything": %s}}\n' "$entry" >"$home/.gemini/settings.json"
printf '{"%s": "TRUST_FOLDER"}\n' "$tmp" >"$home/.gemini/trustedFolders.json"
cd "$tmp"
fail=0

before=$(cat "$home/.claude.json")
if MCPWARDEN_FAULT=sandbox_launcher timeout 120 "$cli" wrap --client claude-code --sandbox strict >"$tmp/blind.out" 2>&1; then
    echo "FAIL: negative control: wrap wrote a config whose server fails under strict"; fail=1
fi
[ "$(cat "$home/.claude.json")" = "$before" ] || { echo "FAIL: negative control changed the file"; fail=1; }

timeout 120 "$cli" wrap --client claude-code --client gemini --sandbox strict >"$tmp/wrap.out" 2>&1 || {
    echo "FAIL: wrap --sandbox strict"; cat "$tmp/wrap.out"; fail=1
}
grep -q "initialize and tools/list answered" "$tmp/wrap.out" || { echo "FAIL: no dry start"; fail=1; }
timeout 120 "$bin/claude" mcp list >"$tmp/claude.out" 2>&1 || true
grep -q "everything: .*--sandbox strict.*Connected" "$tmp/claude.out" || {
    echo "FAIL: claude mcp list"; cat "$tmp/claude.out"; fail=1
}
timeout 120 "$bin/gemini" mcp list >"$tmp/gemini.out" 2>&1 || true
grep -q "everything: .*--sandbox strict.*Connected" "$tmp/gemini.out" || {
    echo "FAIL: gemini mcp list"; cat "$tmp/gemini.out"; fail=1
}
[ $fail -eq 0 ] && echo "ok: claude and gemini list npx server-everything under --sandbox strict"
exit $fail
