#!/usr/bin/env bash
# Two builds of the preload on the hook benchmark's workload (bench/alloc_workload.cc), each round running untraced,
# then each build with stacks and without (CUMEMTRACE_STACK_DEPTH=0), so that a shared machine's drift falls on both
# alike. Prints each configuration's median ns per event and its overhead over the untraced median: a difference of
# a few ns between two builds shows here when bench/run.sh's rounds (heaptrack between them) blur it.
#
#   bench/hook_ab.sh DEPTH ROUNDS LIBCUMEMTRACE_A LIBCUMEMTRACE_B    # env: BUILD_DIR (build-perf), PAIRS (400000)
set -euo pipefail
if [[ $# -ne 4 ]]; then
  echo "usage: $0 DEPTH ROUNDS LIBCUMEMTRACE_A LIBCUMEMTRACE_B" >&2
  exit 2
fi
ROOT=$(cd "$(dirname "$0")/.." && pwd)
workload=${BUILD_DIR:-$ROOT/build-perf}/bench/alloc_workload
[[ -x $workload ]] || { echo "$0: no $workload (bench/run.sh builds it)" >&2; exit 2; }
depth=$1 rounds=$2
declare -A lib=([A]=$3 [B]=$4)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
args=("${PAIRS:-400000}" "$depth" 1000)
for _ in $(seq "$rounds"); do
  echo "untraced $("$workload" cuda "${args[@]}")" >>"$work/runs"
  for build in A B; do
    for stacks in "" 0; do
      out=$(env LD_PRELOAD="${lib[$build]}" CUMEMTRACE_OUTPUT="$work/t.pb" CUMEMTRACE_OVERWRITE=1 \
        ${stacks:+CUMEMTRACE_STACK_DEPTH=0} "$workload" cuda "${args[@]}" 2>/dev/null)
      echo "$build${stacks:+, no stacks} $out" >>"$work/runs"
    done
  done
done
DEPTH=$depth python3 - "$work/runs" <<'PY'
import json, os, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, run = line.split(" {", 1)
    runs.setdefault(name, []).append(json.loads("{" + run)["ns_per_event"])
base = statistics.median(runs["untraced"])
print(f"depth {os.environ['DEPTH']}, {len(runs['untraced'])} rounds: ns per event, median (overhead over untraced)")
for name, values in runs.items():
    m = statistics.median(values)
    print(f"  {name:14s} {m:7.1f} ({m - base:+6.1f})   rounds: {', '.join(str(round(v)) for v in values)}")
PY
