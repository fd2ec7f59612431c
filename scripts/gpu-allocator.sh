#!/usr/bin/env bash
# The GPU validation of PyTorch's caching-allocator layer (block events), in one device call: run from the
# repository root on the GPU machine with the bundle (scripts/gpu-bundle.sh) carried as gpu-build/.
#   BUILD=gpu-build OUT=/some/dir bash scripts/gpu-allocator.sh
# Writes to $OUT: results.txt (PASS/FAIL rows, oracle / measured), overhead.jsonl, and the traces worth keeping.
set -uo pipefail
BUILD=${BUILD:-gpu-build}
OUT=${OUT:-gpu-out}
PYTHON=${PYTHON:-python3}
ANALYZE=$PWD/$BUILD/analyzer/cumem-analyze
PRELOAD=$PWD/$BUILD/preload/libcumemtrace.so
WORK=$(mktemp -d)
mkdir -p "$OUT"
RESULTS=$OUT/results.txt
: >"$RESULTS"
export PYTHONPATH=$PWD/tests/gpu/allocator:$PWD/tests/gpu/rows
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
note() { echo "$*" | tee -a "$RESULTS"; }

# traced NAME SCRIPT [ENV=VALUE...] -- [ARG...]: the workload under the preload; its trace becomes $WORK/NAME.pb.
traced() {
  local name=$1 script=$2 envs=() rc
  shift 2
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift || true
  mkdir -p "$WORK/tr_$name"
  # `timeout` first: the preload traces only the first process that loads it, which must be the workload.
  timeout 300 env ${envs[@]+"${envs[@]}"} LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/tr_$name/trace.%p.pb" \
    "$PYTHON" "$script" "$@" >"$WORK/$name.out" 2>&1
  rc=$?
  # The workload's trace is the largest one (helpers such as compile workers write small ones or none).
  cp "$(ls -S "$WORK/tr_$name"/*.pb 2>/dev/null | head -1)" "$WORK/$name.pb" 2>/dev/null
  echo "$rc"
}

check() {  # check NAME TRUTH: the block-layer relations
  "$ANALYZE" events "$WORK/$1.pb" --json >"$WORK/$1.events.json" 2>"$WORK/$1.events.err" || note "FAIL $1 events --json"
  "$PYTHON" tests/gpu/allocator/check_blocks.py "$2" "$WORK/$1.events.json" "$1" | tee -a "$RESULTS"
  "$ANALYZE" summary "$WORK/$1.pb" --json >"$WORK/$1.summary.json" 2>/dev/null
  "$PYTHON" - "$WORK/$1.summary.json" "$1" <<'PY' | tee -a "$RESULTS"
import json, sys
s = json.load(open(sys.argv[1]))
h = s.get("health", {}); t = h.get("trailer", h)
notices = [n.get("code") for n in s.get("process", {}).get("notices", h.get("notices", []))]
print(f"INFO {sys.argv[2]} trailer: events {t.get('events')}, allocator_events {t.get('allocator_events')}, "
      f"allocator_ignored {t.get('allocator_ignored')}, dropped {t.get('dropped_events')}, "
      f"recorder_time_ns {t.get('recorder_time_ns')}, bytes {t.get('bytes_written')}; notices {notices}")
PY
}

nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | sed 's/^/INFO device: /' | tee -a "$RESULTS"
"$PYTHON" -c "import torch, sys; print('INFO torch', torch.__version__, 'python', sys.version.split()[0])" | tee -a "$RESULTS"

# 1. Checkpoints during GPT-2 training, default allocator and expandable segments.
rc=$(traced blocks_default tests/gpu/allocator/blocks_train.py -- "$WORK/blocks_default.json")
note "INFO blocks_default exit $rc"; check blocks_default "$WORK/blocks_default.json"
rc=$(traced blocks_expandable tests/gpu/allocator/blocks_train.py PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True \
  -- "$WORK/blocks_expandable.json")
note "INFO blocks_expandable exit $rc"; check blocks_expandable "$WORK/blocks_expandable.json"

# 2. A fragmentation OOM.
rc=$(traced frag_oom tests/gpu/allocator/frag_oom.py -- "$WORK/frag_oom.json")
note "INFO frag_oom exit $rc"; check frag_oom "$WORK/frag_oom.json"
"$ANALYZE" oom "$WORK/frag_oom.pb" >"$OUT/frag_oom.oom.txt" 2>&1

# 5. Overhead: GPT-2 steps untraced, traced (blocks + Python frames), PyTorch's history; interleaved twice.
for round in 1 2; do
  timeout 200 "$PYTHON" bench/gpu_step_overhead.py >>"$OUT/overhead.jsonl" 2>"$WORK/ovh_plain.err"
  rc=$(traced overhead_$round bench/gpu_step_overhead.py -- ); tail -1 "$WORK/overhead_$round.out" | sed 's/"plain"/"cumemtrace"/' >>"$OUT/overhead.jsonl"
  "$ANALYZE" summary "$WORK/overhead_$round.pb" --json >"$WORK/overhead_$round.summary.json" 2>/dev/null
  "$PYTHON" - "$WORK/overhead_$round.summary.json" "$WORK/overhead_$round.pb" <<'PY' >>"$OUT/overhead.jsonl"
import json, os, sys
s = json.load(open(sys.argv[1])); h = s.get("health", {}); t = h.get("trailer", h)
ev = t.get("events") or 0
print(json.dumps({"mode": "cumemtrace_trailer", "events": ev, "allocator_events": t.get("allocator_events"),
                  "recorder_ns_per_event": (t.get("recorder_time_ns") or 0) / max(ev, 1),
                  "file_bytes": os.path.getsize(sys.argv[2]), "bytes_per_event": os.path.getsize(sys.argv[2]) / max(ev, 1)}))
PY
  timeout 200 "$PYTHON" bench/gpu_step_overhead.py --history >>"$OUT/overhead.jsonl" 2>"$WORK/ovh_hist.err"
done
cat "$OUT/overhead.jsonl"

# 3. The stories (traces kept for the analyzer's golden tests).
rc=$(traced story_oom tests/gpu/rows/story_oom.py -- "$WORK/story_oom.json"); note "INFO story_oom exit $rc"
rc=$(traced story_leak tests/gpu/rows/story_leak.py -- "$WORK/story_leak.json"); note "INFO story_leak exit $rc"

# 4. Unchanged programs with the tracker attached: DataLoader workers forked after the attach, torch.compile and
#    CUDA graphs: same exit status and results as untraced.
for w in dataloader_pin graphs_compile; do
  env TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_CACHE_DIR="$WORK/ind_plain_$w" TRITON_CACHE_DIR="$WORK/tri_plain_$w" \
    timeout 300 "$PYTHON" tests/gpu/rows/$w.py "$WORK/${w}_plain.json" >"$WORK/${w}_plain.out" 2>&1
  prc=$?
  trc=$(traced "$w" tests/gpu/rows/$w.py TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_CACHE_DIR="$WORK/ind_tr_$w" \
    TRITON_CACHE_DIR="$WORK/tri_tr_$w" -- "$WORK/${w}_traced.json")
  note "$([ "$prc" = "$trc" ] && echo PASS || echo FAIL) $w exit status untraced $prc / traced $trc"
  "$PYTHON" - "$WORK/${w}_plain.json" "$WORK/${w}_traced.json" "$w" <<'PY' | tee -a "$RESULTS"
import json, sys
def results(node, path=""):  # every checksum and loss list in the truth, by where it sits
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            if k in ("checksum", "losses"):
                out[path + k] = v
            else:
                out.update(results(v, path + k + "."))
        return out
    return {}
a, b = (results(json.load(open(p))) for p in sys.argv[1:3])
print(f"{'PASS' if a == b and a else 'FAIL'} {sys.argv[3]} results ({', '.join(sorted(a))}): untraced {a} / traced {b}")
PY
  check "$w" "$WORK/${w}_traced.json" >/dev/null 2>&1
  grep -h "INFO $w trailer" "$RESULTS" >/dev/null || true
done


# Keep what the analyzer's tests and docs need (few files come back: traces and truths in one archive).
keep=()
for f in blocks_default frag_oom story_oom story_leak blocks_expandable; do
  [ -f "$WORK/$f.pb" ] && keep+=("$f.pb")
  [ -f "$WORK/$f.json" ] && keep+=("$f.json")
done
tar czf "$OUT/traces.tgz" -C "$WORK" ${keep[@]+"${keep[@]}"}
tar czf "$OUT/logs.tgz" -C "$WORK" $(cd "$WORK" && ls *.out *.err 2>/dev/null) 2>/dev/null
grep -c '^PASS' "$RESULTS" | sed 's/^/PASS rows: /'; grep -c '^FAIL' "$RESULTS" | sed 's/^/FAIL rows: /'
grep '^FAIL' "$RESULTS"
