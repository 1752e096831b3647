#!/usr/bin/env bash
# The fault matrix in full (docs/RELIABILITY.md): every cell of tests/fault/matrix_test.cpp
# N times, then a table of counts (cell × pass/fail). CI runs only the sample; this runs
# the built test binary directly because a full pass takes minutes, longer than ctest's
# per-test timeout. Cells failing by a known bug are run too and counted apart.
#
#   scripts/fault-matrix.sh            # every cell once
#   scripts/fault-matrix.sh 5          # every cell five times
#   scripts/fault-matrix.sh 1 build-asan
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
rounds=${1:-1}
build=${2:-$here/build}
case $rounds in
  '' | *[!0-9]*) echo "fault-matrix.sh: N must be a number, got '$rounds'" >&2; exit 2 ;;
esac
if [ ! -x "$build/test_fault" ]; then
  echo "fault-matrix.sh: $build/test_fault not built (cmake --build $build --target test_fault)" >&2
  exit 2
fi
exec env WARDEN_FAULT_FULL="$rounds" "$build/test_fault" --gtest_filter='FaultMatrixFull.*'
