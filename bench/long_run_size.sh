#!/usr/bin/env bash
# A long PyTorch run traced at several time resolutions (CUMEMTRACE_TIME_RESOLUTION), the same program making the
# same allocations each time (tests/gpu/workloads/long_run_oom.py with a step count and a slow leak, then an OOM):
# each trace, its size, and its peak, leaks and oom reports (text and JSON), to be compared report by report
# (bench/compare_reports.py) and per row (docs/performance.md, "Runs of hours").
# Usage, on the GPU machine with gpu-build/ carried: bench/long_run_size.sh OUT_DIR STEPS [RESOLUTION...]
# (default resolutions: 1ns 10us). OUT_DIR gets run-R.pb for each, and reports.tar.gz with every report. PARALLEL=1
# runs the resolutions' processes side by side (one GPU holds them all: the step is bound by each one's CPU).
set -euo pipefail
out=$1
steps=$2
shift 2
resolutions=("$@")
[ ${#resolutions[@]} -gt 0 ] || resolutions=(1ns 10us)
analyze=gpu-build/analyzer/cumem-analyze
mkdir -p "$out"
run() {
  local r=$1 start
  start=$(date +%s%N)
  CUMEMTRACE_TIME_RESOLUTION=$r CUMEMTRACE_OUTPUT="$out/run-$r.pb" CUMEMTRACE_OVERWRITE=1 \
    LD_PRELOAD=gpu-build/preload/libcumemtrace.so \
    python3 tests/gpu/workloads/long_run_oom.py 1e9 "$steps" 10 > "$out/run-$r.json" 2> "$out/run-$r.err"
  echo "$r: $(cat "$out/run-$r.json") in $(( ($(date +%s%N) - start) / 1000000 )) ms, $(stat -c %s "$out/run-$r.pb") bytes"
}
for r in "${resolutions[@]}"; do
  if [ "${PARALLEL:-0}" = 1 ]; then run "$r" & else run "$r"; fi
done
wait
for r in "${resolutions[@]}"; do
  for command in peak leaks oom; do
    "$analyze" "$command" "$out/run-$r.pb" > "$out/$command-$r.txt" 2>&1 || true
    "$analyze" "$command" --json "$out/run-$r.pb" > "$out/$command-$r.json" 2>&1 || true
  done
  "$analyze" summary --json "$out/run-$r.pb" > "$out/summary-$r.json" 2>&1 || true
done
(cd "$out" && tar czf reports.tar.gz ./*.txt ./*.json ./*.err && rm -f ./*.txt ./*.json ./*.err)
