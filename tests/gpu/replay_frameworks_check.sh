#!/usr/bin/env bash
# Checks that the allocator replay reproduces fresh GPT-2, Hugging Face Trainer and timm runs exactly: each
# workloads/replay_frameworks.py mode is traced, `cumem-analyze whatif` replays it under its own settings, and the
# replay must be exact (every segment and block address) with PyTorch's max_memory_reserved() as its reserved peak.
# Usage: tests/gpu/replay_frameworks_check.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=$1
out=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
for mode in gpt2 trainer timm; do
  CUMEMTRACE_OUTPUT="$out/replay_$mode.pb" CUMEMTRACE_QUIET=1 LD_PRELOAD="$build/preload/libcumemtrace.so" \
    python3 "$here/workloads/replay_frameworks.py" "$mode" >"$out/replay_${mode}_run.json" 2>"$out/replay_${mode}.err"
  "$build/analyzer/cumem-analyze" whatif "$out/replay_$mode.pb" --json >"$out/replay_${mode}_whatif.json"
  python3 - "$mode" "$out/replay_${mode}_run.json" "$out/replay_${mode}_whatif.json" <<'PY'
import json, sys
mode, run_path, replay_path = sys.argv[1:4]
try:
    run = json.loads(open(run_path).read().strip().splitlines()[-1])
except (IndexError, ValueError):
    print(f"{mode}: the workload did not finish"); sys.exit(0)
r = json.load(open(replay_path))
f = r["fidelity"]
ok = f["exact"] and r["reserved_peak"] == run["reserved_peak"]
print(f"{mode}: fidelity exact={f['exact']} requests={f['requests']} segments={f['segments']} blocks={f['blocks']} "
      f"{f['divergence']} | replay reserved_peak={r['reserved_peak']} PyTorch max_memory_reserved="
      f"{run['reserved_peak']} | {'EXACT' if ok else 'DIFFERS'}")
PY
done
