#!/usr/bin/env bash
# Sets up the machine, builds, and runs the whole test suite through ctest: first the
# release build (every test, including the real-process and e2e ones), then the unit and
# integration tests again under AddressSanitizer + UndefinedBehaviorSanitizer.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
"$here/scripts/deps.sh"

jobs=$(nproc)
"$here/scripts/build.sh" "$here/build"
(cd "$here/build" && ctest --output-on-failure -j"$jobs" --timeout 300)

"$here/scripts/build.sh" "$here/build-asan" -DWARDEN_SANITIZE=ON -DWARDEN_BENCH=OFF
(cd "$here/build-asan" && ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
   UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
   ctest --output-on-failure -j"$jobs" --timeout 300 -LE e2e)
