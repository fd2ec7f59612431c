#!/usr/bin/env bash
# Checks the graph-retention diagnosis against reality on the GPU machine: each workloads/graph_retention.py mode is
# traced as written (it keeps autograd's graph alive), then run untraced as written and untraced with the fix the
# report names (--fix: torch.no_grad() / .item()). The fixed run's outcome (no OOM, PyTorch's allocated peak) is
# the oracle for "the change works". Writes the traces, each run's JSON line and graph_retention_MODE_truth.json.
# Usage: tests/gpu/graph_retention_check.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=$1
out=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
# mode, the fix, batches (steps), rows per batch: each unfixed run must run out of memory on an 80 GiB or 141 GiB card.
for spec in "eval_outputs no_grad 400 2048" "train_metric item 1000 8192"; do
  read -r mode fix batches rows <<<"$spec"
  CUMEMTRACE_OUTPUT="$out/retention_$mode.pb" CUMEMTRACE_QUIET=1 LD_PRELOAD="$build/preload/libcumemtrace.so" \
    python3 "$here/workloads/graph_retention.py" "$mode" --batches "$batches" --batch "$rows" >"$out/retention_${mode}_traced.json"
  python3 "$here/workloads/graph_retention.py" "$mode" --batches "$batches" --batch "$rows" >"$out/retention_${mode}_untraced.json"
  python3 "$here/workloads/graph_retention.py" "$mode" --batches "$batches" --batch "$rows" --fix >"$out/retention_${mode}_fixed.json"
  python3 - "$out" "$mode" "$fix" "$batches" >"$out/retention_${mode}_truth.json" <<'PY'
import json, sys
out, mode, fix, batches = sys.argv[1:5]
load = lambda kind: json.loads(open(f"{out}/retention_{mode}_{kind}.json").read().strip().splitlines()[-1])
traced, untraced, fixed = load("traced"), load("untraced"), load("fixed")
print(json.dumps({"workload": "graph_retention", "mode": mode, "batches": int(batches), "fix": fix,
                  "oom": traced["oom"], "message": traced.get("message", ""),
                  "allocated_peak": traced["allocated_peak"], "untraced": untraced,
                  "with_fix": {"oom": fixed["oom"], "allocated_peak": fixed["allocated_peak"]}}, indent=1))
PY
  echo "$mode: traced oom=$(grep -o '"oom": [a-z]*' "$out/retention_${mode}_traced.json")" \
       "untraced $(grep -o '"oom": [a-z]*' "$out/retention_${mode}_untraced.json")" \
       "fixed $(grep -o '"oom": [a-z]*, \|"allocated_peak": [0-9]*' "$out/retention_${mode}_fixed.json" | tr '\n' ' ')"
done
