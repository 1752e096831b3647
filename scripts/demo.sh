#!/usr/bin/env bash
# Sets up the machine, builds, and runs the main job on built-in defaults: the crash-drill
# demo (`mcpwarden demo`: a client SIGKILLed mid-call, with and without mcpwarden).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/deps.sh"
"$here/scripts/build.sh" "$here/build" >/dev/null
# The demo runs server-everything as a user has it installed; here, the test peers'.
PATH="$here/tests/e2e/node_modules/.bin:$PATH" exec "$here/build/mcpwarden" demo "$@"
