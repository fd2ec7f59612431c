#!/usr/bin/env bash
# Checks the allocator replay's garbage collection against PyTorch: gc_threshold.py traced under a memory fraction
# F without garbage_collection_threshold (gc_off), then rerun with garbage_collection_threshold:G (gc_on, traced too);
# and again with the fraction given in PYTORCH_CUDA_ALLOC_CONF (per_process_memory_fraction, when this PyTorch knows
# it), so that the gc_on trace itself can be replayed exactly. Writes the traces, each run's JSON line, and the
# analyzer's whatif JSON next to them. Usage: tests/gpu/gc_threshold_check.sh BUILD_DIR OUT_DIR [F] [G]
set -uo pipefail
build=$1
out=$2
fraction=${3:-0.25}
threshold=${4:-0.5}
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
analyze="$build/analyzer/cumem-analyze"
run() {  # NAME CONF ARGS...: a traced run of gc_threshold.py
  local name=$1 conf=$2
  shift 2
  PYTORCH_CUDA_ALLOC_CONF="$conf" CUMEMTRACE_OUTPUT="$out/$name.pb" CUMEMTRACE_QUIET=1 \
    LD_PRELOAD="$build/preload/libcumemtrace.so" python3 "$here/workloads/gc_threshold.py" "$@" \
    >"$out/$name.json" 2>"$out/$name.err"
  echo "$name rc=$? $(cat "$out/$name.json")"
}
run gc_off "" "$fraction"
run gc_on "garbage_collection_threshold:$threshold" "$fraction"
"$analyze" whatif "$out/gc_off.pb" --json --set "per_process_memory_fraction:$fraction" \
  --set "garbage_collection_threshold:$threshold" >"$out/whatif_gc_on.json"
"$analyze" whatif "$out/gc_off.pb" --json --set "per_process_memory_fraction:$fraction" >"$out/whatif_gc_off.json"
"$analyze" whatif "$out/gc_on.pb" --json >"$out/whatif_gc_on_trace.json"
if run conf_on "per_process_memory_fraction:$fraction,garbage_collection_threshold:$threshold" "$fraction" --conf; then
  "$analyze" whatif "$out/conf_on.pb" --json >"$out/whatif_conf_on_trace.json"
fi
python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
def load(name):
    try:
        return json.load(open(f"{out}/{name}"))
    except Exception as e:
        return {"error": str(e)}
for run in ("gc_off", "gc_on", "conf_on"):
    try:
        print(run, json.loads(open(f"{out}/{run}.json").read().strip().splitlines()[-1]))
    except Exception as e:
        print(run, "no result:", e, open(f"{out}/{run}.err").read()[-500:])
for name in ("whatif_gc_off", "whatif_gc_on", "whatif_gc_on_trace", "whatif_conf_on_trace"):
    d = load(name + ".json")
    print(name, {k: d.get(k) for k in ("claim", "oom", "reserved_peak", "whatif_memory_cap", "notes")},
          "fidelity", d.get("fidelity"))
PY
