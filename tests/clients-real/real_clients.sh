#!/bin/sh
# The real clients through `mcpwarden wrap`: `claude mcp list` and `gemini mcp list` start
# and health-check every configured server without an API key, then end it their own way
# (docs/CLIENTS.md, "Stop sequences"); `claude -p` and `codex exec`, pointed at
# fake_model.py, make a real tool call. In a scratch HOME, each client's user config declares the fixture server with
# a double-forked daemon on a port; `mcpwarden wrap` routes it through `mcpwarden run`. The
# client must report it connected (claude -p, codex exec: quote the tool's answer, and the
# journal must hold the tools/call, answered); afterwards the port must bind again, every session in the
# journal must have ended, and no process may carry one of those sessions' MCPWARDEN_SESSION.
# usage: real_clients.sh MCPWARDEN FIXTURE   (exit 77, skipped, before `npm ci` here)
set -eu
# The paths as absolute ones, taken from where the script was started: every client below
# runs in a scratch directory of its own, and a client config needs an absolute command.
absolute() {
    case $1 in
        /*) p=$1 ;;
        */*) p=$(pwd)/$1 ;;
        *) if [ -e "$1" ]; then p=$(pwd)/$1; else p=$(command -v "$1" || true); fi ;;
    esac
    [ -f "$p" ] && [ -x "$p" ] || { echo "real_clients.sh: $1: not an executable file (${p:-not in PATH})" >&2; exit 2; }
    printf '%s\n' "$p"
}
cli=$(absolute "$1")
fixture=$(absolute "$2")
here=$(cd "$(dirname "$0")" && pwd)
bin=$here/node_modules/.bin
[ -x "$bin/claude" ] && [ -x "$bin/gemini" ] && [ -x "$bin/codex" ] || {
    echo "skipped: the real clients are not installed (cd tests/clients-real && npm ci)"
    exit 77
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-real.XXXXXX")
fail=0

port_free() {  # PORT: bindable on 127.0.0.1
    python3 -c "import socket,sys; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(('127.0.0.1', int(sys.argv[1])))" "$1" 2>/dev/null
}

model=
stop_model() { [ -z "$model" ] || kill "$model" 2>/dev/null || true; }
trap 'stop_model; rm -rf "$tmp"' EXIT INT TERM
MCPW_FAKE_TOOL=mcp__fixture__echo MCPW_FAKE_INPUT='{"text": "through mcpwarden"}' \
    python3 "$here/fake_model.py" >"$tmp/model.port" 2>"$tmp/model.log" &
model=$!
i=0
until [ -s "$tmp/model.port" ] || [ $i -ge 100 ]; do i=$((i + 1)); sleep 0.1; done
model_url=http://127.0.0.1:$(head -n 1 "$tmp/model.port")

for client in claude gemini claude-p codex-exec; do
    home=$tmp/$client
    mkdir -p "$home/.gemini" "$home/.codex"
    ports=$home/port
    entry="{\"command\": \"$fixture\", \"args\": [\"--shape\", \"doublefork\", \"--port-file\", \"$ports\"]}"
    case $client in
        claude | claude-p)
            printf '{"hasCompletedOnboarding": true, "mcpServers": {"fixture": %s}}\n' "$entry" \
                >"$home/.claude.json"
            id=claude-code ;;
        gemini)
            printf '{"mcpServers": {"fixture": %s}}\n' "$entry" >"$home/.gemini/settings.json"
            printf '{"%s": "TRUST_FOLDER"}\n' "$home" >"$home/.gemini/trustedFolders.json"
            id=gemini ;;
        codex-exec)
            # Codex speaks the Responses API only (wire_api "chat" is gone); its MCP tools
            # need approval, which `exec` cannot ask for: approve this server's tools.
            sh "$here/codex_fake_provider.sh" "$model_url" >"$home/.codex/config.toml"
            cat >>"$home/.codex/config.toml" <<EOF

[mcp_servers.fixture]
command = "$fixture"
args = ["--shape", "doublefork", "--port-file", "$ports"]
default_tools_approval_mode = "approve"
EOF
            id=codex ;;
    esac
    env="HOME=$home CODEX_HOME=$home/.codex XDG_CONFIG_HOME= XDG_STATE_HOME= MCPWARDEN_JOURNAL="
    (cd "$home" && env $env "$cli" wrap --client "$id" --mcpwarden "$cli" >"$home/wrap.out" 2>&1) || {
        echo "$client: wrap failed:"; cat "$home/wrap.out"; fail=1; continue
    }
    journal=$home/.local/state/mcpwarden/journal.db
    if [ "$client" = claude-p ] || [ "$client" = codex-exec ]; then
        if [ "$client" = claude-p ]; then
            (cd "$home" && env $env ANTHROPIC_BASE_URL="$model_url" ANTHROPIC_API_KEY=sk-ant-fake \
                timeout 120 "$bin/claude" -p "echo through the fixture" \
                --allowedTools mcp__fixture__echo </dev/null >"$home/out" 2>&1) || true
        else
            (cd "$home" && env $env MCPW_FAKE_OPENAI_KEY=sk-fake timeout 120 "$bin/codex" exec \
                --skip-git-repo-check "echo through the fixture" </dev/null >"$home/out" 2>&1) ||
                true
        fi
        if ! grep -q "The tool said: .*through mcpwarden" "$home/out"; then
            echo "$client: no tool answer:"; cat "$home/out"; tail -n 20 "$tmp/model.log"; fail=1
            continue
        fi
        calls=$(env $env "$cli" journal activity --json --journal "$journal" | python3 -c '
import json, sys
print(sum(1 for r in json.load(sys.stdin)
          if r["method"] == "tools/call" and r["tool"] == "echo" and r["outcome"] == "ok"))')
        [ "$calls" = 1 ] || { echo "$client: $calls answered tools/call echo on record"; fail=1; }
    else
        (cd "$home" && env $env timeout 120 "$bin/$client" mcp list </dev/null >"$home/out" 2>&1) ||
            true
        if ! grep -q "fixture.*Connected" "$home/out"; then
            echo "$client: the wrapped server did not connect:"; cat "$home/out"; fail=1; continue
        fi
    fi
    port=$(tail -n 1 "$ports" 2>/dev/null || true)
    i=0
    until port_free "$port"; do
        i=$((i + 1)); [ $i -lt 100 ] || break; sleep 0.1
    done
    port_free "$port" || { echo "$client: port $port still held after the client exited"; fail=1; }
    sessions=$(env $env "$cli" journal sessions --json --journal "$journal")
    ended=$(printf '%s' "$sessions" | python3 -c '
import json, sys
rows = json.load(sys.stdin)
print(len(rows), sum(1 for r in rows if "ended_ns" in r))
for r in rows: print(r["session"], file=sys.stderr)' 2>"$home/ids")
    set -- $ended
    if [ "$1" -eq 0 ] || [ "$1" -ne "$2" ]; then
        echo "$client: $1 sessions in the journal, $2 ended:"; echo "$sessions"; fail=1
    fi
    for id in $(cat "$home/ids"); do
        left=$(grep -l "MCPWARDEN_SESSION=$id" /proc/[0-9]*/environ 2>/dev/null || true)
        [ -z "$left" ] || { echo "$client: session $id left $left"; fail=1; }
    done
    echo "$client: $1 session(s), all ended, port $port free"
done
exit $fail
