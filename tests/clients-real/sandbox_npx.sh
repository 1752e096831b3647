#!/bin/sh
# The real clients with `mcpwarden wrap --sandbox strict` on the commonest server
# configuration there is, `npx -y @modelcontextprotocol/server-everything`: in a scratch HOME
# whose npm cache an earlier unconfined npx filled (from tests/e2e/node_modules, served on
# 127.0.0.1 by tests/e2e/local_registry.py, then stopped: no network), wrap does its dry start
# and writes the configs of Claude Code, Gemini CLI and Codex; `claude mcp list` and `gemini
# mcp list` must then report the server connected, each within its own bound (a confined npx
# that tried the registry would hang), and `claude -p`, `codex exec` and `gemini -p`, pointed at
# fake_model.py, must call its `echo` tool through the sandbox and quote the answer, which the
# journal has on record as an answered tools/call of a session confined by strict, one for each.
# The negative control: the same wrap with the launcher unknown to the plan
# (MCPWARDEN_FAULT=sandbox_launcher) fails its dry start and writes nothing.
# usage: sandbox_npx.sh MCPWARDEN   (exit 77, skipped, before `npm ci` here or in tests/e2e)
set -eu
case $1 in /*) cli=$1 ;; *) cli=$(pwd)/$1 ;; esac  # the scratch directory is where it runs
here=$(cd "$(dirname "$0")" && pwd)
e2e=$(cd "$here/../e2e" && pwd)
bin=$here/node_modules/.bin
spec=@modelcontextprotocol/server-everything
[ -x "$bin/claude" ] && [ -x "$bin/gemini" ] && [ -x "$bin/codex" ] && [ -d "$e2e/node_modules/$spec" ] || {
    echo "skipped: the real clients or tests/e2e/node_modules are not installed"
    exit 77
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/mcpw-sandbox-npx.XXXXXX")
model=
trap '[ -z "$model" ] || kill "$model" 2>/dev/null; rm -rf "$tmp"' EXIT INT TERM
home=$tmp/home
mkdir -p "$home/.gemini" "$home/.codex"
export HOME="$home" CODEX_HOME="$home/.codex" XDG_CONFIG_HOME= XDG_STATE_HOME= MCPWARDEN_JOURNAL=
export npm_config_update_notifier=false

# The model the headless clients talk to: it asks for everything's echo tool.
MCPW_FAKE_TOOL=mcp__everything__echo MCPW_FAKE_INPUT='{"message": "through the sandbox"}' \
    python3 "$here/fake_model.py" >"$tmp/model.port" 2>"$tmp/model.log" &
model=$!
i=0
until [ -s "$tmp/model.port" ] || [ $i -ge 100 ]; do i=$((i + 1)); sleep 0.1; done
model_url=http://127.0.0.1:$(head -n 1 "$tmp/model.port")

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
# Gemini CLI: an API key, so that GOOGLE_GEMINI_BASE_URL (the fake model) is where it asks.
printf '{"security": {"auth": {"selectedType": "gemini-api-key"}}, "mcpServers": {"everything": %s}}\n' \
    "$entry" >"$home/.gemini/settings.json"
printf '{"%s": "TRUST_FOLDER"}\n' "$tmp" >"$home/.gemini/trustedFolders.json"
# Codex: `exec` cannot ask for a tool's approval, so this server's tools are approved here;
# and it begins its first turn without a server still starting unless the server is
# `required` (an npx start takes seconds, confined or not, and the tool would not be offered).
sh "$here/codex_fake_provider.sh" "$model_url" >"$home/.codex/config.toml"
printf '\n[mcp_servers.everything]\ncommand = "npx"\nargs = ["-y", "%s"]\ndefault_tools_approval_mode = "approve"\nrequired = true\nstartup_timeout_sec = 60\n' \
    "$spec" >>"$home/.codex/config.toml"
cd "$tmp"
fail=0

before=$(cat "$home/.claude.json")
if MCPWARDEN_FAULT=sandbox_launcher timeout 120 "$cli" wrap --client claude-code --sandbox strict >"$tmp/blind.out" 2>&1; then
    echo "FAIL: negative control: wrap wrote a config whose server fails under strict"; fail=1
fi
[ "$(cat "$home/.claude.json")" = "$before" ] || { echo "FAIL: negative control changed the file"; fail=1; }

timeout 180 "$cli" wrap --client claude-code --client gemini --client codex --sandbox strict >"$tmp/wrap.out" 2>&1 || {
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
grep -q "sandbox.*strict" "$home/.codex/config.toml" || {
    echo "FAIL: codex config not wrapped with the sandbox"; cat "$home/.codex/config.toml"; fail=1
}

# Tools called, not only listed: the headless clients through the confined npx server.
(ANTHROPIC_BASE_URL="$model_url" ANTHROPIC_API_KEY=sk-ant-fake timeout 180 "$bin/claude" -p \
    "echo through the sandbox" --allowedTools mcp__everything__echo </dev/null >"$tmp/claude-p.out" 2>&1) || true
grep -q "The tool said: .*through the sandbox" "$tmp/claude-p.out" || {
    echo "FAIL: claude -p: no tool answer"; cat "$tmp/claude-p.out"; tail -n 20 "$tmp/model.log"; fail=1
}
(MCPW_FAKE_OPENAI_KEY=sk-fake timeout 180 "$bin/codex" exec --skip-git-repo-check \
    "echo through the sandbox" </dev/null >"$tmp/codex.out" 2>&1) || true
grep -q "The tool said: .*through the sandbox" "$tmp/codex.out" || {
    echo "FAIL: codex exec: no tool answer"; cat "$tmp/codex.out"; tail -n 20 "$tmp/model.log"; fail=1
}
# Gemini CLI asks before each tool call; headless, it can only be told to approve them all
# (the fake model asks for echo alone).
(GOOGLE_GEMINI_BASE_URL="$model_url" GEMINI_API_KEY=fake timeout 180 "$bin/gemini" -p \
    "echo through the sandbox" --approval-mode yolo </dev/null >"$tmp/gemini-p.out" 2>&1) || true
grep -q "The tool said: .*through the sandbox" "$tmp/gemini-p.out" || {
    echo "FAIL: gemini -p: no tool answer"; cat "$tmp/gemini-p.out"; tail -n 20 "$tmp/model.log"; fail=1
}
# On record: three answered calls of echo, each in a session confined by strict.
"$cli" journal activity --json >"$tmp/activity.json" 2>/dev/null || true
calls=$(python3 -c '
import json, subprocess, sys
def strict(session):
    records = json.loads(subprocess.run([sys.argv[2], "journal", "show", session, "--json"],
                                        capture_output=True, check=True).stdout)
    return any(r["kind"] == "session.start" and
               r["data"].get("sandbox", {}).get("profile") == "strict" for r in records)
print(sum(1 for r in json.load(open(sys.argv[1]))
          if r["method"] == "tools/call" and r["tool"] == "echo" and r["outcome"] == "ok"
          and strict(r["session"])))' "$tmp/activity.json" "$cli" 2>/dev/null || echo 0)
[ "$calls" -ge 3 ] || { echo "FAIL: $calls answered tools/call echo on record (want 3)"; fail=1; }
[ $fail -eq 0 ] && echo "ok: claude, gemini list and claude -p, codex exec, gemini -p call npx server-everything under --sandbox strict"
exit $fail
