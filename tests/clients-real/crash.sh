#!/bin/sh
# What a real client does when its stdio server dies in the middle of a tool call, without
# mcpwarden (docs/CLIENTS.md, "When a server dies"): `claude -p` and `codex exec`, pointed at
# fake_model.py, call the `crash` tool of tests/shim/crashing_server.py, which dies with a
# Python traceback; each prints what the tool call returned to the model, and how many times
# the client started the server. With MCPWARDEN, each client runs the server through
# `MCPWARDEN run --restart on-failure` too. A measurement, not a test.
# usage: crash.sh [MCPWARDEN]   (after `npm ci` here)
set -u
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/node_modules/.bin
srv=$here/../shim/crashing_server.py
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-crash.XXXXXX")
MCPW_FAKE_TOOL=mcp__crashy__crash MCPW_FAKE_INPUT='{}' \
    python3 "$here/fake_model.py" >"$tmp/model.port" 2>"$tmp/model.log" &
model=$!
# A session still ending (its journal, its log) may write into $tmp for a moment.
trap 'kill $model 2>/dev/null; sleep 1; rm -rf "$tmp"' EXIT INT TERM
i=0
until [ -s "$tmp/model.port" ] || [ $i -ge 100 ]; do i=$((i + 1)); sleep 0.1; done
url=http://127.0.0.1:$(head -n 1 "$tmp/model.port")
via="direct${1:+ mcpwarden}"
for run in $(for c in claude-p codex-exec; do for v in $via; do echo "$c:$v"; done; done); do
    client=${run%%:*}
    wrap=
    [ "${run#*:}" = mcpwarden ] && wrap="$1 run --restart on-failure --journal $tmp/$run.db --"
    home=$tmp/$client-${run#*:}
    mkdir -p "$home/.codex"
    starts=$home/starts
    case $client in
        claude-p)
            printf '{"hasCompletedOnboarding": true, "mcpServers": {"crashy": {"command": "sh", "args": ["-c", "echo start >> %s; exec %s python3 %s"]}}}\n' \
                "$starts" "$wrap" "$srv" >"$home/.claude.json"
            (cd "$home" && HOME=$home ANTHROPIC_BASE_URL=$url ANTHROPIC_API_KEY=sk-ant-fake \
                timeout 100 "$bin/claude" -p "crash it" --allowedTools mcp__crashy__crash \
                </dev/null >"$home/out" 2>&1) ;;
        codex-exec)
            sh "$here/codex_fake_provider.sh" "$url" >"$home/.codex/config.toml"
            cat >>"$home/.codex/config.toml" <<EOT

[mcp_servers.crashy]
command = "sh"
args = ["-c", "echo start >> $starts; exec $wrap python3 $srv"]
default_tools_approval_mode = "approve"
EOT
            (cd "$home" && HOME=$home CODEX_HOME=$home/.codex MCPW_FAKE_OPENAI_KEY=sk-fake \
                timeout 100 "$bin/codex" exec --skip-git-repo-check "crash it" \
                </dev/null >"$home/out" 2>&1) ;;
    esac
    echo "$client (${run#*:}): the server was started $(wc -l <"$starts" 2>/dev/null || echo 0) time(s)"
    grep "The tool said" "$home/out" | tail -n 1 | cut -c 1-200
done
