#!/usr/bin/env bash
# What Python frames cost per event, per CPython version: bench/python_workload.py (ctypes allocation churn at
# Python call depths 5 and 30) untraced, traced with CUMEMTRACE_PYTHON=0 and traced with Python frames, REPS
# interleaved runs each; prints the median ns/event of each and the per-event overhead of Python frames (default
# minus PYTHON=0) as a markdown table, one row per version and depth.
# Usage: bench/python_frames.sh   (env: BUILD_DIR (default build), PAIRS=100000, REPS=5,
#        PYTHONS="python3.10 python3.13" (default: every python3.10 to python3.14 under ~/.pyenv or on PATH))
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
PAIRS=${PAIRS:-100000}
REPS=${REPS:-5}
if [ -z "${PYTHONS:-}" ]; then
  PYTHONS=""
  for minor in 10 11 12 13 14; do
    found=$(ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.$minor.*/bin/python3.$minor 2>/dev/null | head -1 || true)
    [ -z "$found" ] && found=$(command -v "python3.$minor" || true)
    [ -n "$found" ] && PYTHONS="$PYTHONS $found"
  done
fi
WORK=$(mktemp -d /tmp/cumemtrace-pybench.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
export LD_LIBRARY_PATH=$BUILD/tests/fakes
export FAKE_CUDA_TOTAL_BYTES=$((64 << 30))
run() {  # python mode depth -> ns/event
  local py=$1 mode=$2 depth=$3 env=()
  case $mode in
    untraced) ;;
    nopython) env=(LD_PRELOAD=$BUILD/preload/libcumemtrace.so CUMEMTRACE_PYTHON=0) ;;
    python) env=(LD_PRELOAD=$BUILD/preload/libcumemtrace.so) ;;
  esac
  env "${env[@]}" CUMEMTRACE_QUIET=1 CUMEMTRACE_OUTPUT="$WORK/t.%p.pb" "$py" "$ROOT/bench/python_workload.py" "$PAIRS" "$depth" |
    sed -e 's/.*"ns_per_event": \([0-9.]*\).*/\1/'
  rm -f "$WORK"/t.*.pb
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "| Python | depth | untraced ns/event | traced, CUMEMTRACE_PYTHON=0 | traced with Python frames | Python frames cost |"
echo "|---|---|---|---|---|---|"
for py in $PYTHONS; do
  version=$("$py" -c 'import platform; print(platform.python_version())')
  for depth in 5 30; do
    for mode in untraced nopython python; do : >"$WORK/$mode"; done
    for _ in $(seq "$REPS"); do
      for mode in untraced nopython python; do run "$py" $mode $depth >>"$WORK/$mode"; done
    done
    u=$(median <"$WORK/untraced"); n=$(median <"$WORK/nopython"); p=$(median <"$WORK/python")
    printf '| %s | %s | %.0f | %.0f | %.0f | %.0f |\n' "$version" "$depth" "$u" "$n" "$p" "$(echo "$p - $n" | bc -l)"
  done
done
