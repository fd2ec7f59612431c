#!/usr/bin/env bash
# Checks `cumem-analyze whatif --without-outside` and `--capacity` against reruns on the GPU machine, with
# workloads/whatif_steps.py: its "other" run (a second process holds most of the card) is traced and replayed
# without the outside memory, and the oracle is the "alone" run; its "alone" run is traced and replayed on smaller
# cards, and the oracle is the program rerun with torch.cuda.set_per_process_memory_fraction set to what that card
# would leave PyTorch (the card less the memory the trace saw outside PyTorch). Writes the traces, truth files
# (whatif_steps_MODE_truth.json, "whatif" entries) and one summary line per check under OUT_DIR.
# Usage: tests/gpu/whatif_card_check.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=$1
out=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
analyze="$build/analyzer/cumem-analyze"
last_json() { tail -n 1 "$1"; }
for mode in alone other; do
  CUMEMTRACE_OUTPUT="$out/whatif_steps_$mode.pb" CUMEMTRACE_QUIET=1 CUMEMTRACE_SAMPLE_MS=10 \
    LD_PRELOAD="$build/preload/libcumemtrace.so" python3 "$here/workloads/whatif_steps.py" "$mode" \
    >"$out/whatif_steps_${mode}_traced.json"
done
"$analyze" whatif "$out/whatif_steps_other.pb" --without-outside --json >"$out/other_without.json"
"$analyze" whatif "$out/whatif_steps_alone.pb" --json >"$out/alone_recorded.json"
python3 - "$out" "$analyze" "$here" <<'PY'
import json, os, subprocess, sys
out, analyze, here = sys.argv[1:4]
MiB = 1 << 20
last = lambda path: json.loads(open(path).read().strip().splitlines()[-1])
alone, other = last(f"{out}/whatif_steps_alone_traced.json"), last(f"{out}/whatif_steps_other_traced.json")
total = alone["total_memory"]

def report(name, replay, rerun):
    agree = replay["oom"] == rerun["oom"] and (rerun["oom"] or replay["reserved_peak"] == rerun["reserved_peak"])
    print(f"{name}: replay claim={replay['claim']} oom={replay['oom']} reserved_peak={replay['reserved_peak']} | "
          f"rerun oom={rerun['oom']} reserved_peak={rerun['reserved_peak']} | fidelity exact="
          f"{replay['fidelity']['exact']} | {'AGREE' if agree else 'DISAGREE'}")

def entry(key, value, rerun):
    e = {key: value, "oom": rerun["oom"]}
    if not rerun["oom"]:
        e["reserved_peak"] = rerun["reserved_peak"]
    return e

# Without the other process: the alone run is the rerun.
without = json.load(open(f"{out}/other_without.json"))
report("other --without-outside", without, alone)
json.dump({"workload": "whatif_steps", "mode": "other", "oom": other["oom"], "other_bytes": other["other_bytes"],
           "reserved_peak": other["reserved_peak"], "whatif": [entry("without_outside", True, alone)]},
          open(f"{out}/whatif_steps_other_truth.json", "w"), indent=1)

# Smaller cards: what the card leaves PyTorch is the card less what the trace saw outside PyTorch.
recorded = json.load(open(f"{out}/alone_recorded.json"))
outside = recorded["outside_max"]
peak = alone["reserved_peak"]
entries = []
for cut in (700, 2300):
    capacity = (peak + outside - cut * MiB) // MiB * MiB + MiB // 2
    replay = json.loads(subprocess.run([analyze, "whatif", f"{out}/whatif_steps_alone.pb", "--capacity",
                                        str(capacity), "--json"], capture_output=True, text=True).stdout)
    fraction = (capacity - outside) / total
    rerun = json.loads(subprocess.run([sys.executable, f"{here}/workloads/whatif_steps.py", "alone", "--fraction",
                                       repr(fraction)], capture_output=True, text=True).stdout.strip()
                       .splitlines()[-1])
    report(f"alone --capacity {capacity} (fraction {fraction:.6f})", replay, rerun)
    entries.append(entry("capacity_bytes", capacity, rerun))
json.dump({"workload": "whatif_steps", "mode": "alone", "oom": alone["oom"], "reserved_peak": peak,
           "outside_bytes": outside, "whatif": entries}, open(f"{out}/whatif_steps_alone_truth.json", "w"), indent=1)
PY
