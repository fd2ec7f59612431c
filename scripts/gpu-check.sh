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

log() { printf '[%s +%3ds] %s\n' "$(date +%H:%M:%S)" "$((SECONDS - START))" "$*" | tee -a "$LOG"; }

# Seconds a step may still take: its own limit, cut to what is left of the budget.
step_limit() {
  local want=$1 left=$((BUDGET - (SECONDS - START)))
  [ "$want" -gt "$STEP_TIMEOUT" ] && want=$STEP_TIMEOUT
  [ "$left" -lt "$want" ] && want=$left
  echo "$want"
}

# run_step NAME LIMIT OUTFILE CMD...: stdout and stderr to $WORK/OUTFILE, exit code to rc.txt, tail to the log.
run_step() {
  local name=$1 limit out=$3 rc t0=$SECONDS
  limit=$(step_limit "$2")
  shift 3
  if [ "$limit" -lt 5 ]; then
    log "step $name: SKIPPED (budget of ${BUDGET}s spent)"
    echo "$name 125" >>"$WORK/rc.txt"
    return 125
  fi
  log "step $name (limit ${limit}s): $*"
  timeout -k 10 "$limit" "$@" >"$WORK/$out" 2>&1
  rc=$?
  echo "$name $rc" >>"$WORK/rc.txt"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    log "step $name: TIMED OUT after ${limit}s (rc $rc)"
  else
    log "step $name: rc $rc in $((SECONDS - t0))s"
  fi
  tail -n 30 "$WORK/$out" | sed 's/^/      | /' >>"$LOG"
  return "$rc"
}

# run_json NAME OUTFILE CMD...: like run_step, but only stdout goes to OUTFILE (stderr to OUTFILE.err) so that a
# warning cannot break the JSON.
run_json() {
  local name=$1 out=$2 rc t0=$SECONDS limit
  limit=$(step_limit 120)
  shift 2
  if [ "$limit" -lt 5 ]; then
    log "step $name: SKIPPED (budget of ${BUDGET}s spent)"
    echo "$name 125" >>"$WORK/rc.txt"
    return 125
  fi
  timeout -k 10 "$limit" "$@" >"$WORK/$out" 2>"$WORK/$out.err"
  rc=$?
  echo "$name $rc" >>"$WORK/rc.txt"
  log "step $name: rc $rc in $((SECONDS - t0))s, $(wc -c <"$WORK/$out") bytes: $*"
  if [ "$rc" != 0 ] || [ -s "$WORK/$out.err" ]; then
    tail -n 15 "$WORK/$out.err" | sed 's/^/      | /' >>"$LOG"
  fi
  return "$rc"
}

# The trace a run wrote: the output name carries %p, so a child process that exec'd with LD_PRELOAD inherited
# cannot overwrite it. Prefers trace.<pid>.pb when the pid is known, else the largest file; lists them all.
pick_trace() {
  local dir=$1 dest=$2 pid=${3:-} chosen=""
  log "traces in $dir: $(cd "$dir" 2>/dev/null && ls -l 2>/dev/null | tail -n +2 | awk '{print $9" ("$5" B)"}' | tr '\n' ' ')"
  if [ -n "$pid" ] && [ -f "$dir/trace.$pid.pb" ]; then
    chosen=$dir/trace.$pid.pb
  else
    chosen=$(ls -S "$dir"/* 2>/dev/null | head -n 1)
  fi
  if [ -n "$chosen" ] && [ -s "$chosen" ]; then
    cp "$chosen" "$dest"
    log "trace $(basename "$dest") <- $(basename "$chosen") ($(wc -c <"$dest") bytes)"
  else
    log "NO TRACE written in $dir"
  fi
}

analyze() {
  local name=$1 pb=$WORK/$1.pb sub
  if [ ! -s "$pb" ]; then
    log "analyzer on $name: skipped, no trace"
    return
  fi
  if [ ! -x "$ANALYZE" ]; then
    log "analyzer on $name: skipped, $ANALYZE missing"
    return
  fi
  run_step "analyze_${name}_summary" 120 "${name}_summary.txt" "$ANALYZE" "$pb"
  # --top large: every stack group, not the first 10. `events --json` carries stack ids only; compare.py resolves
  # them through the stacks these reports print (every allocation live at some kind's peak or at the end).
  for sub in peak leaks pinned oom; do
    run_json "analyze_${name}_$sub" "${name}_$sub.json" "$ANALYZE" "$sub" "$pb" --json --top "$TOP"
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
log "git: $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'no commit') $(git -C "$REPO" status --porcelain 2>/dev/null | wc -l) changed files"

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
