#!/usr/bin/env bash
# Checks `cumem-analyze whatif` against reality on the GPU machine: each workload of whatif_frag.py is traced under
# the defaults, the replay is asked about each setting, and the program is rerun untraced with that setting; the
# rerun's outcome (OOM or not; reserved peak when it ran through) is the oracle. Writes, per mode, the trace, the
# replay's JSON and the reruns' JSON lines under OUT_DIR, one summary line per (mode, setting), and
# whatif_MODE_truth.json: the reruns as the truth of the trace ({"whatif": [{"set", "oom", "reserved_peak"}...]}).
# Usage: tests/gpu/whatif_check.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=$1
out=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
for mode in holes live; do
  CUMEMTRACE_OUTPUT="$out/whatif_$mode.pb" CUMEMTRACE_QUIET=1 LD_PRELOAD="$build/preload/libcumemtrace.so" \
    python3 "$here/workloads/whatif_frag.py" "$mode" >"$out/whatif_${mode}_traced.json"
  for setting in "" "max_split_size_mb:100" "max_split_size_mb:1024" "roundup_power2_divisions:4" \
    "expandable_segments:True"; do
    name=${setting:-defaults}
    name=${name//:/_}
    "$build/analyzer/cumem-analyze" whatif "$out/whatif_$mode.pb" ${setting:+--set "$setting"} --json \
      >"$out/whatif_${mode}_${name}_replay.json"
    PYTORCH_CUDA_ALLOC_CONF="$setting" python3 "$here/workloads/whatif_frag.py" "$mode" \
      >"$out/whatif_${mode}_${name}_rerun.json"
    [ -n "$setting" ] && python3 - "$out/whatif_${mode}_${name}_rerun.json" "$setting" \
      >>"$out/whatif_${mode}_entries.jsonl" <<'PY'
import json, sys
rerun = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
entry = {"set": sys.argv[2], "oom": rerun["oom"]}
if not rerun["oom"]:
    entry["reserved_peak"] = rerun["reserved_peak"]
print(json.dumps(entry))
PY
    python3 - "$out/whatif_${mode}_${name}_replay.json" "$out/whatif_${mode}_${name}_rerun.json" "$mode" "$name" <<'PY'
import json, sys
replay = json.load(open(sys.argv[1]))
rerun = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
agree = replay["oom"] == rerun["oom"] and (rerun["oom"] or replay["reserved_peak"] == rerun["reserved_peak"])
print(f"{sys.argv[3]} {sys.argv[4]}: replay claim={replay['claim']} oom={replay['oom']} "
      f"reserved_peak={replay['reserved_peak']} | rerun oom={rerun['oom']} reserved_peak={rerun['reserved_peak']} "
      f"| fidelity exact={replay['fidelity']['exact']} | {'AGREE' if agree else 'DISAGREE'}")
PY
  done
  python3 - "$out/whatif_${mode}_traced.json" "$out/whatif_${mode}_entries.jsonl" >"$out/whatif_${mode}_truth.json" <<'PY'
import json, sys
traced = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
entries = [json.loads(line) for line in open(sys.argv[2])]
print(json.dumps({"workload": "whatif_frag", "mode": traced["mode"], "oom": traced["oom"],
                  "reserved_peak": traced["reserved_peak"], "whatif": entries}, indent=1))
PY
  rm -f "$out/whatif_${mode}_entries.jsonl"
done
