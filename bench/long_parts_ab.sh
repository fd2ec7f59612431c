#!/usr/bin/env bash
# Where the preload's time goes in long processes, for two builds of the preload side by side: runs
# tests/gpu/workloads/long_run_oom.py (CPU-bound GPT-2, then an OOM) under each preload in turn, ROUNDS times, and
# prints one JSON line per process with its rows and, per row, the trailer's recorder time, its six parts and the
# flush thread's writer time (ns). Long processes spread each thread's first, clocked-one-by-one events thin, so the
# per-row figures are steadier than bench/torch_overhead.py's short ones. Run on the GPU machine from the
# repository root with gpu-build carried (scripts/gpu-bundle.sh).
#
#   bench/long_parts_ab.sh SECONDS ROUNDS PRELOAD_A PRELOAD_B     # e.g. 25 2 gpu-build/preload gpu-build/preload-old
set -euo pipefail
if [[ $# -ne 4 ]]; then
  echo "usage: $0 SECONDS ROUNDS PRELOAD_DIR_A PRELOAD_DIR_B" >&2
  exit 2
fi
seconds=$1 rounds=$2
analyze=gpu-build/analyzer/cumem-analyze
export LD_LIBRARY_PATH=$PWD/gpu-build/analyzer/lib
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for round in $(seq "$rounds"); do
  for preload in "$3" "$4"; do
    trace=$work/run.pb
    LD_PRELOAD=$(readlink -f "$preload")/libcumemtrace.so CUMEMTRACE_OUTPUT=$trace \
      python3 tests/gpu/workloads/long_run_oom.py "$seconds" >"$work/out.txt" 2>&1
    "$analyze" summary --json "$trace" | PRELOAD=$preload ROUND=$round python3 -c '
import json, os, sys
health = json.load(sys.stdin)["health"]
rows = health["events_read"]
parts = ["recorder_time_ns", "recorder_prologue_ns", "recorder_python_ns", "recorder_unwind_ns",
         "recorder_lock_wait_ns", "recorder_stack_ns", "recorder_append_ns", "writer_time_ns"]
print(json.dumps({"preload": os.environ["PRELOAD"], "round": int(os.environ["ROUND"]), "rows": rows,
                  **{p: round(health[p] / rows, 1) for p in parts}}))'
    rm -f "$trace"
  done
done
