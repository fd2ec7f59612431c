#!/usr/bin/env bash
# scripts/gpu-coverage.sh: does cumemtrace see CUDA memory however a framework reaches the driver? Runs the workloads
# of tests/gpu/coverage/ (PyTorch with expandable segments, with cudaMallocAsync, without caching; CuPy's pools; JAX
# with and without preallocation) on the GPU machine, each once without and once with the preload, analyzes each
# trace and compares it with the framework's own numbers (tests/gpu/coverage/check.py). Needs no network and
# installs nothing; meant to run right after scripts/gpu-check.sh in the same device call:
#
#   BUILD=gpu-build bash scripts/gpu-check.sh; BUILD=gpu-build bash scripts/gpu-coverage.sh
#
# Steps (each under a timeout, each logged to $OUT/coverage-log.txt with its exit code and output tail):
#   1. versions of the frameworks (package metadata only, nothing imported);
#   2. per workload: the untraced run, the traced run (its own environment: see WORKLOADS below), the trace picked by
#      the workload's pid, and cumem-analyze on it (summary text; events, peak, leaks, oom as JSON, --top 100000);
#   3. check.py: the table, written to $OUT/coverage.md and printed last.
# What comes back in $OUT (three files, each under 16 MiB, beside gpu-check.sh's five): coverage-log.txt,
# coverage.md, coverage.tar.gz (truths, analyzer JSON, outputs, and the traces while the archive stays small).
#
# Exit status: check.py's (0 when every checked relation holds), 2 when it could not run.
# Environment: OUT (default ./gpu-out), BUILD (default gpu-build, relative to the repository root), PYTHON (python3),
# BUDGET (default 280 s: steps that would start later are skipped; the check and the packing come after it),
# STEP_TIMEOUT (default 120 s, the longest any one step may run). NCCL and NVLS variables are left as they are.
# shellcheck disable=SC2012  # ls on file names this script made
set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2
OUT=${OUT:-$REPO/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cumem-gpu-coverage.XXXXXX")
LOG=$OUT/coverage-log.txt
: >"$LOG"
: >"$WORK/rc.txt"
: >"$WORK/times.txt"

BUILD=${BUILD:-gpu-build}
case $BUILD in
  /*) ;;
  *) BUILD=$REPO/$BUILD ;;
esac
PRELOAD=$BUILD/preload/libcumemtrace.so
ANALYZE=$BUILD/analyzer/cumem-analyze
STEP_TIMEOUT=${STEP_TIMEOUT:-120}
BUDGET=${BUDGET:-280}
START=$SECONDS
PYTHON=${PYTHON:-python3}
TOP=100000  # stack groups per analyzer list: every one, so check.py can resolve every stack id it needs
COVERAGE=tests/gpu/coverage

# name | step limit (s) | environment of both runs (VAR=VALUE ..., or -). Cheap and most telling first: when
# the budget runs out, the later ones are skipped. PyTorch's allocator settings go in both spellings: newer releases
# read PYTORCH_ALLOC_CONF first and keep PYTORCH_CUDA_ALLOC_CONF as the deprecated fallback.
WORKLOADS="
torch_nocache|90|PYTORCH_NO_CUDA_MEMORY_CACHING=1
torch_expandable|90|PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True PYTORCH_ALLOC_CONF=expandable_segments:True
torch_async|90|PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync PYTORCH_ALLOC_CONF=backend:cudaMallocAsync
cupy_pool|60|-
jax_noprealloc|120|XLA_PYTHON_CLIENT_PREALLOCATE=false
jax_prealloc|120|XLA_PYTHON_CLIENT_MEM_FRACTION=0.2
"
# Allocator settings inherited from the caller would change what a workload measures: every run starts without them.
CLEAN_ENV=(env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_ALLOC_CONF -u PYTORCH_NO_CUDA_MEMORY_CACHING
  -u XLA_PYTHON_CLIENT_PREALLOCATE -u XLA_PYTHON_CLIENT_MEM_FRACTION -u XLA_PYTHON_CLIENT_ALLOCATOR
  -u CUPY_GPU_MEMORY_LIMIT -u LD_PRELOAD -u CUMEMTRACE_OUTPUT PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1)

# The step helpers (log, step_limit, run_step, run_json, pick_trace, analyze_ready, log_git) and what they read.
STEP_TAIL=25  # output lines of a step copied into the log
JSON_LIMIT=60  # run_json's own limit (s)
STEP_TIMES=$WORK/times.txt  # run_step appends "STEP SECONDS" here
# shellcheck source=scripts/gpu-steps.sh
. "$REPO/scripts/gpu-steps.sh" || exit 2

analyze() {
  local name=$1 pb=$WORK/$1.pb sub
  analyze_ready "$name" || return 0
  run_step "analyze_${name}_summary" 60 "${name}_summary.txt" "$ANALYZE" "$pb"
  # `events --json` carries stack ids only: check.py resolves them through the stacks these reports print (every
  # allocation live at some kind's peak or at the end), hence --top large and one group per stack.
  run_json "analyze_${name}_events" "${name}_events.json" "$ANALYZE" events "$pb" --json
  for sub in peak leaks oom; do
    run_json "analyze_${name}_$sub" "${name}_$sub.json" "$ANALYZE" "$sub" "$pb" --json --top "$TOP" --group-by stack
  done
}

# run_workload NAME LIMIT ENVSPEC: untraced, traced, trace, analyzer.
run_workload() {
  local name=$1 limit=$2 spec=$3 pid script=$COVERAGE/$1.py
  local -a envs=()
  [ "$spec" != "-" ] && read -r -a envs <<<"$spec"
  mkdir -p "$WORK/tr_$name"
  log "---- $name: ${envs[*]:-(no extra environment)}"
  run_step "${name}_plain" "$limit" "${name}_plain.out" \
    "${CLEAN_ENV[@]}" ${envs[@]+"${envs[@]}"} "$PYTHON" "$script" "$WORK/${name}_plain_truth.json"
  # `timeout` runs `env`, which execs python with the preload: only the workload (and what it execs) is traced.
  run_step "${name}_traced" "$limit" "${name}_traced.out" \
    "${CLEAN_ENV[@]}" ${envs[@]+"${envs[@]}"} LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/tr_$name/trace.%p.pb" \
    "$PYTHON" "$script" "$WORK/${name}_truth.json"
  pid=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$WORK/${name}_truth.json" \
    2>/dev/null)
  pick_trace "$WORK/tr_$name" "$WORK/$name.pb" "$pid"
  analyze "$name"
}

FINISHED=0
finish() {
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  local size
  cp "$LOG" "$WORK/coverage-log.txt" 2>/dev/null
  # Everything, traces included, while it stays small; then without the traces; then without the events JSON too.
  tar -czf "$OUT/coverage.tar.gz" -C "$WORK" --exclude='tr_*' . 2>>"$LOG"
  size=$(wc -c <"$OUT/coverage.tar.gz" 2>/dev/null || echo 0)
  if [ "$size" -ge $((15 * 1024 * 1024)) ]; then
    log "coverage.tar.gz is $size bytes: packing again without the traces"
    tar -czf "$OUT/coverage.tar.gz" -C "$WORK" --exclude='tr_*' --exclude='*.pb' . 2>>"$LOG"
    size=$(wc -c <"$OUT/coverage.tar.gz" 2>/dev/null || echo 0)
  fi
  if [ "$size" -ge $((15 * 1024 * 1024)) ]; then
    log "coverage.tar.gz is $size bytes: packing again without the traces and the events JSON"
    tar -czf "$OUT/coverage.tar.gz" -C "$WORK" --exclude='tr_*' --exclude='*.pb' --exclude='*_events.json' . \
      2>>"$LOG"
  fi
  log "done in $((SECONDS - START))s; \$OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  log "work directory (not copied back): $WORK"
  if [ -s "$OUT/coverage.md" ]; then
    echo
    echo "==================== coverage (details in \$OUT/coverage.md) ===================="
    sed '/^## Details/,$d' "$OUT/coverage.md"
  fi
}
trap finish EXIT

# ---------------------------------------------------------------------------------------------------------------
log "cumemtrace GPU coverage: repo $REPO, OUT $OUT, work $WORK, build $BUILD, budget ${BUDGET}s"
log_git
[ -f "$PRELOAD" ] || log "MISSING $PRELOAD: the traced runs will write nothing"
[ -x "$ANALYZE" ] || log "MISSING $ANALYZE: no reports"

# 1. Versions, from package metadata (importing the frameworks would take seconds each).
run_step env_versions 30 env_versions.txt "$PYTHON" -c '
import importlib.metadata as md, sys
print("python", sys.version.split()[0])
for name in ("torch", "cupy-cuda13x", "cupy", "jax", "jaxlib", "jax-cuda13-plugin", "jax-cuda13-pjrt", "numpy"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "-")
'

# 2. The workloads.
while IFS='|' read -r name limit spec; do
  [ -n "$name" ] || continue
  run_workload "$name" "$limit" "$spec"
done <<<"$WORKLOADS"

# 3. The comparison: always runs (outside the budget; it takes a second or two).
log "step check: $PYTHON $COVERAGE/check.py --dir $WORK --md $OUT/coverage.md"
timeout -k 5 60 "$PYTHON" "$COVERAGE/check.py" --dir "$WORK" --md "$OUT/coverage.md" --print table \
  >"$WORK/check.out" 2>&1
RC=$?
log "step check: rc $RC"
if [ ! -s "$OUT/coverage.md" ]; then
  log "check.py wrote no table (rc $RC); its output:"
  sed 's/^/      | /' "$WORK/check.out" | tee -a "$LOG"
  RC=2
fi
finish
exit "$RC"
