#!/bin/sh
# Measures how each real client ends a stdio server: starts `claude mcp list`, `gemini mcp
# list` and `codex exec` (`codex mcp list` starts no server; `exec` runs one turn against
# fake_model.py, which answers at once) in a scratch HOME whose configs declare
# probe_server.py, then prints what the probe saw (stdin EOF, signals, with milliseconds
# since it started) and how the processes were grouped. No API key is needed.
# docs/CLIENTS.md has the results.
# usage: tests/clients-real/measure.sh [CLIENT...]   (claude gemini codex; after `npm ci` here)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/node_modules/.bin
probe=$here/probe_server.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-measure.XXXXXX")
model=
trap '[ -z "$model" ] || kill "$model"; rm -rf "$tmp" 2>/dev/null || { sleep 2; rm -rf "$tmp"; }' EXIT INT TERM
python3 "$here/fake_model.py" >"$tmp/model.port" 2>"$tmp/model.log" &
model=$!
i=0
until [ -s "$tmp/model.port" ] || [ $i -ge 100 ]; do i=$((i + 1)); sleep 0.1; done
model_url=http://127.0.0.1:$(head -n 1 "$tmp/model.port")

[ $# -gt 0 ] || set -- claude gemini codex
for client in "$@"; do
    home=$tmp/$client
    mkdir -p "$home/.gemini" "$home/.codex"
    log=$home/probe.log
    : >"$log"
    entry="{\"command\": \"python3\", \"args\": [\"$probe\"], \"env\": {\"MCPW_PROBE_LOG\": \"$log\", \"MCPW_PROBE_LINGER\": \"25\"}}"
    printf '{"hasCompletedOnboarding": true, "mcpServers": {"probe": %s}}\n' "$entry" >"$home/.claude.json"
    printf '{"mcpServers": {"probe": %s}}\n' "$entry" >"$home/.gemini/settings.json"
    printf '{"%s": "TRUST_FOLDER"}\n' "$home" >"$home/.gemini/trustedFolders.json"
    printf 'model = "fake"\nmodel_provider = "fake"\n[model_providers.fake]\nname = "fake"\nbase_url = "%s/v1"\nenv_key = "MCPW_FAKE_OPENAI_KEY"\nwire_api = "responses"\n' \
        "$model_url" >"$home/.codex/config.toml"
    printf '[mcp_servers.probe]\ncommand = "python3"\nargs = ["%s"]\nenv = { MCPW_PROBE_LOG = "%s", MCPW_PROBE_LINGER = "25" }\ndefault_tools_approval_mode = "approve"\n' \
        "$probe" "$log" >>"$home/.codex/config.toml"
    how="mcp list"
    [ "$client" != codex ] || how="exec --skip-git-repo-check probe"
    echo "== $client $how"
    start=$(date +%s%N)
    HOME=$home CODEX_HOME=$home/.codex XDG_CONFIG_HOME=$home/.config MCPW_FAKE_OPENAI_KEY=fake \
        timeout 60 sh -c 'cd "$1" && shift && exec "$@"' sh "$home" "$bin/$client" $how </dev/null \
        >"$home/out" 2>&1 || echo "(exit $?)"
    end=$(date +%s%N)
    sed 's/^/   | /' "$home/out" | head -8
    echo "   client ran $(( (end - start) / 1000000 )) ms; the probe saw:"
    sleep 1
    sed 's/^/   /' "$log"
    [ -s "$log.alive" ] && echo "   last seen alive at $(cat "$log.alive") ms"
done
