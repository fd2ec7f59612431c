#!/usr/bin/env bash
# Checks the other-process capture against PyTorch's own OOM message: a holder process takes most of the GPU, a
# traced victim allocates until PyTorch raises OutOfMemoryError; the victim's JSON line holds PyTorch's message
# and the processes it names (pid, bytes as printed), written as other_process_truth.json beside the trace.
# Usage: tests/gpu/other_process_check.sh BUILD_DIR OUT_DIR
set -uo pipefail
build=$1
out=$2
mkdir -p "$out"
here=$(cd "$(dirname "$0")" && pwd)
total=$(python3 -c "import torch; print(torch.cuda.get_device_properties(0).total_memory)")
hold=$((total * 3 / 4))
rm -f "$out/holder.ready"
python3 "$here/workloads/other_process.py" holder "$hold" "$out/holder.ready" &
holder=$!
for _ in $(seq 1 120); do [ -f "$out/holder.ready" ] && break; sleep 0.5; done
CUMEMTRACE_OUTPUT="$out/other_process.pb" CUMEMTRACE_QUIET=1 LD_PRELOAD="$build/preload/libcumemtrace.so" \
  python3 "$here/workloads/other_process.py" victim >"$out/other_process_victim.json"
kill "$holder"; wait "$holder" 2>/dev/null
python3 - "$out" "$(cat "$out/holder.ready")" "$hold" <<'PY' >"$out/other_process_truth.json"
import json, sys
out, holder_pid, hold = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
victim = json.loads(open(f"{out}/other_process_victim.json").read().strip().splitlines()[-1])
others = [p for p in victim["processes"] if p["pid"] != victim["pid"]]
print(json.dumps({"workload": "other_process", "oom": True, "message": victim["message"],
                  "holder_pid_in_its_namespace": holder_pid, "holder_tensor_bytes": hold,
                  "victim_pid_in_its_namespace": victim["pid"],
                  "all_processes": victim["processes"],
                  "other_processes": [{"pid": p["pid"], "bytes": p["bytes"], "as_printed": p["as_printed"]}
                                      for p in others]}, indent=1))
PY
cat "$out/other_process_truth.json"
