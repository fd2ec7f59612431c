#!/usr/bin/env bash
# What Python frames cost per event: bench/python_workload.py (ctypes allocation churn at Python call depths 5 and
# 30) untraced, traced with CUMEMTRACE_PYTHON=0 and traced with Python frames, REPS interleaved runs each; prints the
# median ns/event of each and the per-event overhead of Python frames (default minus PYTHON=0) as a markdown table.
# Usage: bench/python_frames.sh   (env: BUILD_DIR (default build), PAIRS=100000, REPS=5, PYTHON=python3)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
PAIRS=${PAIRS:-100000}
REPS=${REPS:-5}
PY=${PYTHON:-python3}
WORK=$(mktemp -d /tmp/cumemtrace-pybench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export LD_LIBRARY_PATH=$BUILD/tests/fakes
export FAKE_CUDA_TOTAL_BYTES=$((64 << 30))
run() {  # mode depth -> ns/event
  local mode=$1 depth=$2 env=()
  case $mode in
    untraced) ;;
    nopython) env=(LD_PRELOAD=$BUILD/preload/libcumemtrace.so CUMEMTRACE_PYTHON=0) ;;
    python) env=(LD_PRELOAD=$BUILD/preload/libcumemtrace.so) ;;
  esac
  env "${env[@]}" CUMEMTRACE_OUTPUT="$WORK/t.%p.pb" "$PY" "$ROOT/bench/python_workload.py" "$PAIRS" "$depth" |
    sed -e 's/.*"ns_per_event": \([0-9.]*\).*/\1/'
  rm -f "$WORK"/t.*.pb
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| Python depth | untraced ns/event | traced, CUMEMTRACE_PYTHON=0 | traced with Python frames | Python frames cost |"
echo "|---|---|---|---|---|"
for depth in 5 30; do
  for mode in untraced nopython python; do : >"$WORK/$mode"; done
  for _ in $(seq "$REPS"); do
    for mode in untraced nopython python; do run $mode $depth >>"$WORK/$mode"; done
  done
  u=$(median <"$WORK/untraced"); n=$(median <"$WORK/nopython"); p=$(median <"$WORK/python")
  printf '| %s | %.0f | %.0f | %.0f | %.0f |\n' "$depth" "$u" "$n" "$p" "$(echo "$p - $n" | bc -l)"
done
