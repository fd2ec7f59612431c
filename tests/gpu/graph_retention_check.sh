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
# name, mode, the fix, batches (steps), rows per batch: the first two run out of memory unfixed on an 80 GiB or 141 GiB
# card; the third fits, and its fixed rerun shows the lower peak the report promises.
for spec in "eval_outputs eval_outputs no_grad 400 2048" "train_metric train_metric item 1000 8192" \
            "eval_peak eval_outputs no_grad 40 2048"; do
  read -r name mode fix batches rows <<<"$spec"
  CUMEMTRACE_OUTPUT="$out/retention_$name.pb" CUMEMTRACE_QUIET=1 LD_PRELOAD="$build/preload/libcumemtrace.so" \
    python3 "$here/workloads/graph_retention.py" "$mode" --batches "$batches" --batch "$rows" >"$out/retention_${name}_traced.json"
  python3 "$here/workloads/graph_retention.py" "$mode" --batches "$batches" --batch "$rows" >"$out/retention_${name}_untraced.json"
  python3 "$here/workloads/graph_retention.py" "$mode" --batches "$batches" --batch "$rows" --fix >"$out/retention_${name}_fixed.json"
  python3 - "$out" "$name" "$fix" "$batches" >"$out/retention_${name}_truth.json" <<'PY'
import json, sys
out, name, fix, batches = sys.argv[1:5]
load = lambda kind: json.loads(open(f"{out}/retention_{name}_{kind}.json").read().strip().splitlines()[-1])
traced, untraced, fixed = load("traced"), load("untraced"), load("fixed")
print(json.dumps({"workload": "graph_retention", "mode": traced["mode"], "batches": int(batches), "fix": fix,
                  "oom": traced["oom"], "message": traced.get("message", ""),
                  "allocated_peak": traced["allocated_peak"], "untraced": untraced,
                  "with_fix": {"oom": fixed["oom"], "allocated_peak": fixed["allocated_peak"]}}, indent=1))
PY
  echo "$name: traced oom=$(grep -o '"oom": [a-z]*' "$out/retention_${name}_traced.json")" \
       "untraced $(grep -o '"oom": [a-z]*' "$out/retention_${name}_untraced.json")" \
       "fixed $(grep -o '"oom": [a-z]*, \|"allocated_peak": [0-9]*' "$out/retention_${name}_fixed.json" | tr '\n' ' ')"
done
