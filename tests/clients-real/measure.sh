#!/bin/sh
# Measures how each real client ends a stdio server: starts `claude mcp list`, `gemini mcp
# list` and `codex mcp list` in a scratch HOME whose configs declare probe_server.py, then
# prints what the probe saw (stdin EOF, signals, with milliseconds since it started) and
# how the processes were grouped. No API key is needed. docs/CLIENTS.md has the results.
# usage: tests/clients-real/measure.sh   (after `npm ci` in tests/clients-real)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/node_modules/.bin
probe=$here/probe_server.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-measure.XXXXXX")
trap 'rm -rf "$tmp" 2>/dev/null || { sleep 2; rm -rf "$tmp"; }' EXIT INT TERM

for client in claude gemini codex; do
    home=$tmp/$client
    mkdir -p "$home/.gemini" "$home/.codex"
    log=$home/probe.log
    : >"$log"
    entry="{\"command\": \"python3\", \"args\": [\"$probe\"], \"env\": {\"MCPW_PROBE_LOG\": \"$log\", \"MCPW_PROBE_LINGER\": \"25\"}}"
    printf '{"hasCompletedOnboarding": true, "mcpServers": {"probe": %s}}\n' "$entry" >"$home/.claude.json"
    printf '{"mcpServers": {"probe": %s}}\n' "$entry" >"$home/.gemini/settings.json"
    printf '{"%s": "TRUST_FOLDER"}\n' "$home" >"$home/.gemini/trustedFolders.json"
    printf '[mcp_servers.probe]\ncommand = "python3"\nargs = ["%s"]\nenv = { MCPW_PROBE_LOG = "%s", MCPW_PROBE_LINGER = "25" }\n' \
        "$probe" "$log" >"$home/.codex/config.toml"
    echo "== $client mcp list"
    start=$(date +%s%N)
    HOME=$home CODEX_HOME=$home/.codex XDG_CONFIG_HOME=$home/.config timeout 60 \
        sh -c 'cd "$1" && shift && exec "$@"' sh "$home" "$bin/$client" mcp list </dev/null \
        >"$home/out" 2>&1 || echo "(exit $?)"
    end=$(date +%s%N)
    sed 's/^/   | /' "$home/out" | head -8
    echo "   client ran $(( (end - start) / 1000000 )) ms; the probe saw:"
    sleep 1
    sed 's/^/   /' "$log"
    [ -s "$log.alive" ] && echo "   last seen alive at $(cat "$log.alive") ms"
done
