#!/usr/bin/env bash
# scripts/gpu-check.sh: the GPU validation of cumemtrace. Runs on the GPU machine from the repository root with the
# build folder already there (build/preload/libcumemtrace.so, build/analyzer/cumem-analyze); needs no network and
# installs nothing.
#
#   bash scripts/gpu-check.sh            # results in $OUT, or ./gpu-out when OUT is unset
#
# Steps (each under a timeout, each logged to $OUT/log.txt with its exit code and output tail):
#   1. the machine: nvidia-smi, driver, torch/CUDA versions, nvcc, compute-sanitizer, the build's files;
#   2. tests/gpu/leaky.cu built with nvcc's defaults (static cudart) and run plainly, under
#      `compute-sanitizer --leak-check full` (the oracle) and under the preload, with and without cudaDeviceReset;
#   3. tests/gpu/torch_train_pinned.py once under the preload, writing PyTorch's ground truth;
#   4. cumem-analyze on each trace: the text summary and peak/leaks/pinned/oom/events as JSON;
#   5. tests/gpu/compare.py: the table of relations, printed last and written to $OUT/summary.md.
# What comes back in $OUT (few files, each well under 16 MiB): log.txt, summary.md, results.tar.gz (every output,
# JSON and text), and leaky.pb / torch_train.pb when they are small enough.
#
# Exit status: compare.py's (0 when every checked relation holds), 2 when it could not run.
# Environment: OUT, STEP_TIMEOUT (default 240 s, the longest any single step may run), BUDGET (default 480 s: steps
# that would start later are skipped so that the comparison and the packing still happen within 10 minutes).
set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2
OUT=${OUT:-$REPO/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cumem-gpu-check.XXXXXX")
LOG=$OUT/log.txt
: >"$LOG"
: >"$WORK/rc.txt"

BUILD=${BUILD:-$REPO/build}
PRELOAD=$BUILD/preload/libcumemtrace.so
ANALYZE=$BUILD/analyzer/cumem-analyze
STEP_TIMEOUT=${STEP_TIMEOUT:-240}
BUDGET=${BUDGET:-480}
START=$SECONDS
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
PYTHON=${PYTHON:-python3}
TOP=100000  # stack groups per analyzer list (its limit is 1000000)

# The step helpers (log, step_limit, run_step, run_json, pick_trace, analyze_ready, log_git) and what they read.
STEP_TAIL=30  # output lines of a step copied into the log
JSON_LIMIT=120  # run_json's own limit (s)
STEP_TIMES=""  # no times.txt: run_step logs whole seconds
# shellcheck source=scripts/gpu-steps.sh
. "$REPO/scripts/gpu-steps.sh" || exit 2

analyze() {
  local name=$1 pb=$WORK/$1.pb sub
  analyze_ready "$name" || return 0
  run_step "analyze_${name}_summary" 120 "${name}_summary.txt" "$ANALYZE" "$pb"
  # --top large: every stack group, not the first 10. `events --json` carries stack ids only; compare.py resolves
  # them through the stacks these reports print (every allocation live at some kind's peak or at the end), so one
  # group per stack (--group-by stack).
  for sub in peak leaks pinned oom; do
    run_json "analyze_${name}_$sub" "${name}_$sub.json" "$ANALYZE" "$sub" "$pb" --json --top "$TOP" --group-by stack
  done
  run_json "analyze_${name}_events" "${name}_events.json" "$ANALYZE" events "$pb" --json
}

FINISHED=0
finish() {
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  local f size
  for f in leaky.pb torch_train.pb; do
    if [ -s "$WORK/$f" ]; then
      size=$(wc -c <"$WORK/$f")
      if [ "$size" -lt $((15 * 1024 * 1024)) ]; then
        cp "$WORK/$f" "$OUT/$f"
      else
        log "$f is $size bytes: not copied to \$OUT (over the 16 MiB a file may have)"
      fi
    fi
  done
  cp "$LOG" "$WORK/log.txt" 2>/dev/null
  tar -czf "$OUT/results.tar.gz" -C "$WORK" --exclude='*.pb' --exclude='leaky' --exclude='tr_*' . 2>>"$LOG"
  size=$(wc -c <"$OUT/results.tar.gz" 2>/dev/null || echo 0)
  if [ "$size" -ge $((15 * 1024 * 1024)) ]; then
    log "results.tar.gz is $size bytes: packing again without the events JSON"
    tar -czf "$OUT/results.tar.gz" -C "$WORK" --exclude='*.pb' --exclude='leaky' --exclude='tr_*' \
      --exclude='*_events.json' . 2>>"$LOG"
  fi
  log "done in $((SECONDS - START))s; \$OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  log "work directory (not copied back): $WORK"
  if [ -s "$OUT/summary.md" ]; then
    echo
    echo "==================== summary (also in \$OUT/summary.md) ===================="
    cat "$OUT/summary.md"
  fi
}
trap finish EXIT

# ---------------------------------------------------------------------------------------------------------------
log "cumemtrace GPU check: repo $REPO, OUT $OUT, work $WORK"
log_git

# 1. The machine.
run_step env_nvidia_smi 60 env_nvidia_smi.txt sh -c \
  'nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv; nvidia-smi'
run_step env_versions 60 env_versions.txt sh -c "uname -a; $PYTHON --version; '$NVCC' --version; \
'$SANITIZER' --version; ls -l '$PRELOAD' '$ANALYZE'; env | grep -E '^(CUDA|NCCL|PYTORCH|LD_LIBRARY_PATH)' | sort"
run_step env_torch 120 env_torch.txt "$PYTHON" -c \
  'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available(), "device", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)'
[ -f "$PRELOAD" ] || log "MISSING $PRELOAD: the traced runs will write nothing"
[ -x "$ANALYZE" ] || log "MISSING $ANALYZE: no reports"
# The build comes from another machine: shared libraries it links (libunwind, libprotobuf, absl) may be absent here.
run_step env_ldd 30 env_ldd.txt sh -c "ldd '$PRELOAD'; echo; ldd '$ANALYZE'"
if grep -q 'not found' "$WORK/env_ldd.txt"; then
  log "UNRESOLVED SHARED LIBRARIES in the build: $(grep 'not found' "$WORK/env_ldd.txt" | awk '{print $1}' | sort -u | tr '\n' ' ')"
fi

# 2. leaky.cu
run_step build_leaky 180 build_leaky.txt "$NVCC" -o "$WORK/leaky" tests/gpu/leaky.cu
if [ -x "$WORK/leaky" ]; then
  run_step leaky_plain 120 leaky_plain.out "$WORK/leaky"
  run_step leaky_sanitizer 180 leaky_sanitizer.out "$SANITIZER" --leak-check full "$WORK/leaky"
  run_step leaky_sanitizer_noreset 180 leaky_sanitizer_noreset.out "$SANITIZER" --leak-check full "$WORK/leaky" --no-reset
  mkdir -p "$WORK/tr_leaky" "$WORK/tr_leaky_noreset"
  # `timeout` runs `env`, which execs leaky with the preload: only leaky itself is traced.
  run_step leaky_preload 120 leaky_preload.out \
    env LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/tr_leaky/trace.%p.pb" "$WORK/leaky"
  pick_trace "$WORK/tr_leaky" "$WORK/leaky.pb"
  run_step leaky_preload_noreset 120 leaky_preload_noreset.out \
    env LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/tr_leaky_noreset/trace.%p.pb" "$WORK/leaky" --no-reset
  pick_trace "$WORK/tr_leaky_noreset" "$WORK/leaky_noreset.pb"
else
  log "leaky was not built: skipping its runs"
fi

# 3. PyTorch
mkdir -p "$WORK/tr_torch"
run_step torch_preload 240 torch_preload.out \
  env LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/tr_torch/trace.%p.pb" PYTHONUNBUFFERED=1 \
  "$PYTHON" tests/gpu/torch_train_pinned.py "$WORK/torch_truth.json"
TORCH_PID=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$WORK/torch_truth.json" 2>/dev/null)
pick_trace "$WORK/tr_torch" "$WORK/torch_train.pb" "$TORCH_PID"

# 4. The analyzer
analyze leaky
analyze leaky_noreset
analyze torch_train

# 5. The comparison: always runs (outside the budget; it takes a second or two).
log "step compare: $PYTHON tests/gpu/compare.py --dir $WORK --md $OUT/summary.md"
timeout -k 5 60 "$PYTHON" tests/gpu/compare.py --dir "$WORK" --md "$OUT/summary.md" >"$WORK/compare.out" 2>&1
RC=$?
log "step compare: rc $RC"
if [ ! -s "$OUT/summary.md" ]; then
  log "compare.py wrote no summary (rc $RC); its output:"
  sed 's/^/      | /' "$WORK/compare.out" | tee -a "$LOG"
  RC=2
fi
finish
exit "$RC"
