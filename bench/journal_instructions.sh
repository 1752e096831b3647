#!/usr/bin/env bash
# Instructions per journaled call, by callgrind (docs/BENCHMARKS.md, "journal per call"):
# `run` over the fixture fed `initialize` and then N pipelined 1 KiB tools/call echoes, for
# N = LOW and N = HIGH; the difference of the two runs' totals over HIGH - LOW is the cost of
# one call with start-up and end taken out. Printed per thread of the relay's process (1: the
# relay's loop, then the journal's threads in the order they started) and summed, and the sum
# over every traced process of the run (the server is not traced).
# Usage: bench/journal_instructions.sh MCPWARDEN FIXTURE [LOW HIGH] [-- run options...]
# (`-- --no-journal`: the same calls through the relay alone, the baseline.)
set -euo pipefail
cli=$1 fixture=$2
shift 2
low=1000 high=3000
if [ $# -ge 2 ] && [ "$1" != "--" ]; then low=$1 high=$2; shift 2; fi
[ "${1:-}" = "--" ] && shift
work=$(mktemp -d)
trap '[ -n "${KEEP_WORK:-}" ] || rm -rf "$work"' EXIT
text=$(printf 'a%.0s' $(seq 924))
requests() {
  printf '%s\n' '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}'
  for ((i = 1; i <= $1; i++)); do
    printf '{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"echo","arguments":{"text":"%s"}}}\n' "$i" "$text"
  done
}
total() {  # N [run options] -> the totals of the relay process's threads
  local n=$1 dir=$work/$1
  shift
  mkdir -p "$dir"
  local journal=(--journal "$dir/journal.db")
  [[ " $* " == *" --no-journal "* ]] && journal=()
  requests "$n" > "$dir/req"
  (cd "$dir" && valgrind --tool=callgrind --separate-threads=yes --trace-children=yes \
    --trace-children-skip='*fixture*' --callgrind-out-file="$dir/cg.%p" \
    "$cli" run "${journal[@]}" "$@" -- "$fixture" < "$dir/req" > "$dir/out" 2> "$dir/err")
  local answers
  answers=$(grep -c '"id":' "$dir/out" || true)
  [ "$answers" -eq $((n + 1)) ] || { echo "N=$n: $answers answers of $((n + 1))" >&2; exit 1; }
  # The run's own process (the relay's): the one with the most threads (the journal's are
  # among them), of those the one whose main thread (part -01) ran the most instructions; its
  # threads' totals in the order of their numbers.
  local best=0 bestparts=0 bestpid= f r parts
  for f in "$dir"/cg.*-01; do
    r=$(awk '/^totals:/ {print $2; exit}' "$f")
    parts=$(ls "${f%-01}"-* | wc -l)
    if [ "$parts" -gt "$bestparts" ] || { [ "$parts" -eq "$bestparts" ] && [ "$r" -gt "$best" ]; }; then
      best=$r bestparts=$parts bestpid=${f%-01}
    fi
  done
  # Then the whole run's sum, every traced process (the keeper's journal, which commits what
  # the relay left in its intent file when the relay's writer did not get to it first): work
  # moved out of the relay's process is counted all the same.
  { for f in "$bestpid"-*; do awk '/^totals:/ {print $2; exit}' "$f"; done
    cat "$dir"/cg.*-* | awk '/^totals:/ {s += $2} END {print s}'; } | paste -sd' '
}
low_totals=($(total "$low" "$@"))
high_totals=($(total "$high" "$@"))
awk -v low="${low_totals[*]}" -v high="${high_totals[*]}" -v n=$((high - low)) 'BEGIN {
  nl = split(low, l, " "); nh = split(high, h, " ");
  if (nl != nh) { print "the runs have " nl " and " nh " threads" > "/dev/stderr"; exit 1 }
  printf "instructions per journaled call (N = %d):", n
  for (i = 1; i < nh; i++) { d = (h[i] - l[i]) / n; sum += d; printf " thread %d %.1f k,", i, d / 1000
                             if (d < -1000) bad = 1 }
  printf " process %.1f k; whole run %.1f k\n", sum / 1000, (h[nh] - l[nh]) / n / 1000
  # A thread that ran fewer instructions for more calls: the two runs are not alike (another
  # process of the run taken for the relay); no figure then.
  if (bad) { print "a thread ran fewer instructions for more calls: run again" > "/dev/stderr"; exit 1 } }'
