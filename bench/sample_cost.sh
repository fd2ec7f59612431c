#!/usr/bin/env bash
# What driver memory samples (CUMEMTRACE_SAMPLE_MS) cost per event, on bench/alloc_workload.cc in cuda mode.
#
# Why this exists: the sampling check runs on every allocation (one relaxed atomic load and a compare per event;
# a cuMemGetInfo and a 45-byte packet only when a device's sample is due), and docs/performance.md must say what that
# costs with a number, not a guess. Two measurements:
#   instructions  callgrind at two loop lengths, SAMPLE_MS=0 against the default 100 and against 1 (a sample due
#                 almost every millisecond); the difference of the two lengths divided by the extra events is the
#                 steady-state cost of one event, deterministic whatever else runs on the machine
#   wall time     the three settings interleaved, REPS rounds, median ns per event (noisy on a shared machine)
#
# Usage: bench/sample_cost.sh   (env: BUILD_DIR (default build), DEPTH=32, PAIRS1=10000, PAIRS2=30000, REPS=5,
#                                PAIRS=200000)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
DEPTH=${DEPTH:-32}
PAIRS1=${PAIRS1:-10000}
PAIRS2=${PAIRS2:-30000}
REPS=${REPS:-5}
PAIRS=${PAIRS:-200000}
PRELOAD=$BUILD/preload/libcumemtrace.so
WORK=$(mktemp -d /tmp/cumemtrace-samples.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
[[ -f $PRELOAD ]] || { echo "no $PRELOAD: build the cumemtrace target first" >&2; exit 1; }
WORKLOAD=$BUILD/bench/alloc_workload
if [[ ! -x $WORKLOAD ]]; then
  WORKLOAD=$WORK/alloc_workload
  include=$(sed -n 's/^CUDAToolkit_INCLUDE_DIR:PATH=//p' "$BUILD/CMakeCache.txt")
  fakes=$BUILD/tests/fakes
  c++ -std=c++20 -O2 -g -isystem "${include:-/usr/local/cuda/include}" "$ROOT/bench/alloc_workload.cc" -o "$WORKLOAD" \
    "$fakes/libcuda.so.1" -Wl,-rpath,"$fakes"
fi

instructions() {  # SAMPLE_MS PAIRS -> total instructions of the run
  env LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/t.$1.$2.pb" CUMEMTRACE_OVERWRITE=1 CUMEMTRACE_SAMPLE_MS="$1" \
    valgrind --tool=callgrind --callgrind-out-file="$WORK/cg.$1.$2" \
    "$WORKLOAD" cuda "$2" "$DEPTH" >/dev/null 2>"$WORK/cg.$1.$2.log"
  callgrind_annotate "$WORK/cg.$1.$2" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,
}
samples_in() { python3 - "$1" <<'PY'
import sys
data = open(sys.argv[1], "rb").read()
pos = count = 0
while pos < len(data) and data[pos] == 0x0a:  # Trace.packet: tag, varint length, Packet
  pos += 1; n = shift = 0
  while True:
    b = data[pos]; pos += 1; n |= (b & 0x7f) << shift; shift += 7
    if b < 0x80: break
  count += data[pos] == (11 << 3 | 2)  # Packet.memory_sample
  pos += n
print(count)
PY
}

echo "instructions per event (callgrind, ($PAIRS2 - $PAIRS1) pairs, depth $DEPTH):"
declare -A per_event
for ms in 0 100 1; do
  a=$(instructions $ms "$PAIRS1"); b=$(instructions $ms "$PAIRS2")
  per_event[$ms]=$(python3 -c "print(f'{($b - $a) / (2 * ($PAIRS2 - $PAIRS1)):.1f}')")
  echo "  SAMPLE_MS=$ms: ${per_event[$ms]} (samples in the longer run: $(samples_in "$WORK/t.$ms.$PAIRS2.pb"))"
done
python3 -c "print(f'  sampling on (100) - off (0): {${per_event[100]} - ${per_event[0]}:+.1f} instructions/event; '
             f'every ms (1) - off: {${per_event[1]} - ${per_event[0]}:+.1f}')"

echo "wall time, ns per event, median of $REPS interleaved rounds ($PAIRS pairs, depth $DEPTH):"
for rep in $(seq "$REPS"); do
  for ms in 0 100 1; do
    LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/w.pb" CUMEMTRACE_OVERWRITE=1 CUMEMTRACE_SAMPLE_MS=$ms \
      "$WORKLOAD" cuda "$PAIRS" "$DEPTH" 200 | python3 -c "import json,sys; print($ms, json.load(sys.stdin)['ns_per_event'])" \
      >>"$WORK/wall.txt"
  done
done
python3 - "$WORK/wall.txt" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
  ms, ns = line.split(); runs.setdefault(int(ms), []).append(float(ns))
for ms in (0, 100, 1):
  xs = runs[ms]
  print(f"  SAMPLE_MS={ms}: {statistics.median(xs):.0f} ({min(xs):.0f}-{max(xs):.0f})")
PY
