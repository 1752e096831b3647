#!/bin/sh
# Three real Claude Code sessions (`claude -p` against the fake model endpoint, which asks each
# for the fixture's echo of the last word of its prompt) at once, with one server wrapped
# `mcpwarden wrap --share`: one server tree for the three (Claude Code gives each server its
# session's CLAUDE_CODE_* variables, which the identity leaves out), three client sessions on
# record, each naming that tree, each with its own tools/call on record, and each client quoting
# its own text; every session ended and nothing left once the clients and the linger are over.
# usage: share_claude.sh MCPWARDEN FIXTURE   (exit 77, skipped, before `npm ci` here)
set -eu
cli=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
fixture=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
here=$(cd "$(dirname "$0")" && pwd)
claude=$here/node_modules/.bin/claude
[ -x "$claude" ] || { echo "skipped: the real clients are not installed (cd tests/clients-real && npm ci)"; exit 77; }
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-share.XXXXXX")
models=
stop() { for m in $models; do kill "$m" 2>/dev/null || true; done; }
trap 'stop; rm -rf "$tmp"' EXIT INT TERM
fail=0
home=$tmp/home
mkdir -p "$home/run" && chmod 0700 "$home/run"
printf '{"hasCompletedOnboarding": true, "mcpServers": {"fixture": {"command": "%s", "args": []}}}\n' \
    "$fixture" >"$home/.claude.json"
env="HOME=$home XDG_RUNTIME_DIR=$home/run XDG_CONFIG_HOME= XDG_STATE_HOME= MCPWARDEN_JOURNAL= MCPWARDEN_SHARE_LINGER=1s"
(cd "$home" && env $env "$cli" wrap --client claude-code --share --mcpwarden "$cli" >"$tmp/wrap.out" 2>&1) || {
    echo "wrap failed:"; cat "$tmp/wrap.out"; exit 1
}
grep -q -- '--share' "$home/.claude.json" || { echo "wrap wrote no --share:"; cat "$home/.claude.json"; exit 1; }
MCPW_FAKE_TOOL=mcp__fixture__echo MCPW_FAKE_INPUT_KEY=text \
    python3 "$here/fake_model.py" >"$tmp/model.port" 2>"$tmp/model.log" &
models=$!
i=0
until [ -s "$tmp/model.port" ] || [ $i -ge 100 ]; do i=$((i + 1)); sleep 0.1; done
url=http://127.0.0.1:$(head -n 1 "$tmp/model.port")
clients=
for n in 1 2 3; do
    (cd "$home" && env $env ANTHROPIC_BASE_URL="$url" ANTHROPIC_API_KEY=sk-ant-fake \
        timeout 180 "$claude" -p "echo through the fixture: session-$n" \
        --allowedTools mcp__fixture__echo </dev/null >"$tmp/out$n" 2>&1) &
    clients="$clients $!"
done
for c in $clients; do wait "$c" || true; done
for n in 1 2 3; do
    grep -q "The tool said: .*session-$n" "$tmp/out$n" || {
        echo "claude $n: not its own tool answer:"; cat "$tmp/out$n"; tail -n 5 "$tmp/model.log"; fail=1
    }
done
# The tree lingers 1 s after its last client, then is torn down with its session ended.
i=0
until [ $i -ge 100 ] || ! pgrep -f "$cli (broker|run)" >/dev/null; do i=$((i + 1)); sleep 0.2; done
pgrep -fa "$cli (broker|run)" && { echo "left after the linger"; fail=1; }
journal=$home/.local/state/mcpwarden/journal.db
env $env "$cli" journal export --journal "$journal" >"$tmp/records.jsonl" 2>"$tmp/export.err" || {
    echo "journal export failed:"; cat "$tmp/export.err"; exit 1
}
python3 - "$tmp/records.jsonl" <<'EOF' || fail=1
import json, sys
records = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def data(r): return r.get("data") or {}
starts = [r for r in records if r.get("kind") == "session.start"]
clients = [r for r in starts if "shared_tree" in data(r)]
trees = {data(r)["shared_tree"] for r in clients}
ok = True
def say(text):
    global ok
    ok = False
    print(text)
if len(trees) != 1: say(f"{len(trees)} shared trees for the clients, not one: {trees}")
tree_starts = [r for r in starts if r.get("session") in trees]
if len(tree_starts) != 1: say(f"the tree's own session.start: {len(tree_starts)}")
echoes = {}
for r in records:
    if r.get("kind") == "activity.request" and data(r).get("tool") == "echo":
        echoes.setdefault(r.get("session"), []).append(r)
with_echo = [r["session"] for r in clients if echoes.get(r["session"])]
if len(with_echo) != 3: say(f"{len(with_echo)} client sessions with their echo on record, not 3")
ended = {r.get("session") for r in records if r.get("kind") == "session.end"}
for r in clients + tree_starts:
    if r["session"] not in ended: say(f"session {r['session']} never ended")
print(f"{len(clients)} client session(s) on one tree, {len(with_echo)} with their echo")
sys.exit(0 if ok else 1)
EOF
exit $fail
