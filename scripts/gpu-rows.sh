#!/usr/bin/env bash
# scripts/gpu-rows.sh: the remaining GPU rows of the coverage issue and the Python-stack stories, each compared with
# an oracle cumemtrace did not compute (tests/gpu/rows/check.py). Runs on the GPU machine from the repository root
# with the bundled build there (scripts/gpu-bundle.sh); needs no network, installs nothing:
#
#   BUILD=gpu-build bash scripts/gpu-rows.sh        # results in $OUT (default ./gpu-out)
#
# Rows, cheapest and most telling first (each run under its own timeout; later ones are skipped, and their rows
# MISSING, once BUDGET is spent):
#   3a tests/gpu/driver_api.cu (nvcc -x c++ -cudart none -lcuda): untraced, traced; its printed ledger vs the events
#   3b tests/gpu/leaky.cu built with -cudart shared: untraced, compute-sanitizer --leak-check full, traced
#   1  rows/pinned_register.py, PyTorch pinned memory with pinned_use_cuda_host_register (8 register threads)
#   7a rows/story_oom.py (validation OOM; `oom --json`, default --group-by user)
#   7c rows/story_leak.py (slow leak; `leaks --json`, default grouping)
#   7b rows/dataloader_pin.py untraced and traced (`pinned --json`); 6: the same traced with CUMEMTRACE_FOLLOW_FORK=1
#   4  rows/ddp_train.py: `scripts/cumemtrace --follow-exec -o DIR/run.%r.pb -- python3 -m torch.distributed.run
#      --standalone --nproc-per-node 2 ...` (skipped, rows SKIP, with fewer than 2 GPUs); `cumem-analyze ranks`
#   5a rows/torch_step.py --profile untraced and traced (torch.profiler beside the preload)
#   5b rows/torch_step.py and coverage/cupy_pool.py traced with CUMEMTRACE_CUPTI=1
#   7d rows/cost_loop.py untraced, traced with CUMEMTRACE_PYTHON=0, traced (PYTORCH_NO_CUDA_MEMORY_CACHING=1)
#   2  rows/graphs_compile.py untraced and traced (cold TorchInductor/Triton caches, compile threads 1)
# Every trace gets `summary --json --group-by stack --top 100000` (health, owners, driver_memory, and the stacks
# check.py resolves event stack ids with) and `events --json`; the stories also get their report in the default
# grouping. The analyzer's --group-by is used only when its --help lists it.
#
# What comes back in $OUT (four files, each under 16 MiB): rows-log.txt (every step with its exit code and output
# tail), rows.md (the table, then the details), rows.tar.gz (truths, outputs, analyzer JSON), rows-traces.tar.gz
# (the traces of rows 4 and 7, for analysis on another machine; the largest left out while it is over 15 MiB).
#
# Exit status: check.py's (0 when every checked relation holds), 2 when it could not run.
# Environment: OUT (default ./gpu-out), BUILD (default gpu-build, relative to the repository root), PYTHON (python3),
# BUDGET (default 420 s: steps that would start later are skipped; the check and the packing come after it),
# STEP_TIMEOUT (default 180 s, the longest any one step may run). NCCL_NVLS_ENABLE, TORCH_SYMM_MEM_DISABLE_MULTICAST
# and NVSHMEM_DISABLE_NVLS keep the caller's values, else 0, 1, 1 (NVLink multicast stays off).
# shellcheck disable=SC2012  # ls on file names this script made
set -u

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 2
OUT=${OUT:-$REPO/gpu-out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cumem-gpu-rows.XXXXXX")
LOG=$OUT/rows-log.txt
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
LAUNCHER=$REPO/scripts/cumemtrace
STEP_TIMEOUT=${STEP_TIMEOUT:-180}
BUDGET=${BUDGET:-420}
START=$SECONDS
PYTHON=${PYTHON:-python3}
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
SANITIZER=$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)
TOP=100000  # stack groups per analyzer list: every one, so check.py can resolve every stack id it needs
ROWS=tests/gpu/rows

# Settings inherited from the caller would change what a row measures: every run starts without them. NVLink
# multicast stays off (the machine's rule), also in these runs' own environment.
CLEAN_ENV=(env -u PYTORCH_CUDA_ALLOC_CONF -u PYTORCH_ALLOC_CONF -u PYTORCH_NO_CUDA_MEMORY_CACHING
  -u LD_PRELOAD -u CUMEMTRACE_OUTPUT -u CUMEMTRACE_PYTHON -u CUMEMTRACE_FOLLOW_FORK -u CUMEMTRACE_FOLLOW_EXEC
  -u CUMEMTRACE_CUPTI -u CUMEMTRACE_ROOT_PID -u CUMEMTRACE_LIB -u RANK -u LOCAL_RANK -u WORLD_SIZE
  PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"
  TORCH_SYMM_MEM_DISABLE_MULTICAST="${TORCH_SYMM_MEM_DISABLE_MULTICAST:-1}"
  NVSHMEM_DISABLE_NVLS="${NVSHMEM_DISABLE_NVLS:-1}")
PINNED_CONF=pinned_use_cuda_host_register:True,pinned_num_register_threads:8

# The step helpers (log, step_limit, run_step, run_json, pick_trace, analyze_ready, log_git) and what they read.
STEP_TAIL=25  # output lines of a step copied into the log
JSON_LIMIT=60  # run_json's own limit (s)
STEP_TIMES=$WORK/times.txt  # run_step appends "STEP SECONDS" here
# shellcheck source=scripts/gpu-steps.sh
. "$REPO/scripts/gpu-steps.sh" || exit 2

GROUP_BY=()  # set below when the analyzer knows --group-by

# analyze NAME [SUB...]: the summary (grouped by stack, every group) and the events of $WORK/NAME.pb; then each SUB
# report (oom, leaks, pinned) in the analyzer's default grouping as NAME_SUB_user.json.
analyze() {
  local name=$1 pb=$WORK/$1.pb sub
  shift
  analyze_ready "$name" || return 0
  run_json "analyze_${name}_summary" "${name}_summary.json" "$ANALYZE" summary "$pb" --json ${GROUP_BY[@]+"${GROUP_BY[@]}"} \
    --top "$TOP"
  run_json "analyze_${name}_events" "${name}_events.json" "$ANALYZE" events "$pb" --json
  for sub in "$@"; do
    run_json "analyze_${name}_${sub}_user" "${name}_${sub}_user.json" "$ANALYZE" "$sub" "$pb" --json --top 50
  done
}

# split_env SPEC: the VAR=VALUE words of SPEC ("-" for none) into the array ENVS.
split_env() {
  ENVS=()
  [ "$1" != "-" ] && read -r -a ENVS <<<"$1"
  return 0
}

# plain NAME LIMIT SCRIPT ENVSPEC [ARG...]: the untraced run; truth NAME_plain_truth.json, output NAME_plain.out.
plain() {
  local name=$1 limit=$2 script=$3
  split_env "$4"
  shift 4
  run_step "${name}_plain" "$limit" "${name}_plain.out" "${CLEAN_ENV[@]}" ${ENVS[@]+"${ENVS[@]}"} \
    "$PYTHON" "$script" "$WORK/${name}_plain_truth.json" "$@"
}

# traced NAME LIMIT SCRIPT ENVSPEC [ARG...]: the run under the preload (traces in $WORK/tr_NAME, named by pid);
# truth NAME_truth.json, output NAME_traced.out; the workload's own trace (by the truth's pid) becomes NAME.pb.
traced() {
  local name=$1 limit=$2 script=$3 pid
  split_env "$4"
  shift 4
  mkdir -p "$WORK/tr_$name"
  # `timeout` runs `env`, which execs python with the preload: only the workload (and what it starts) is traced.
  run_step "${name}_traced" "$limit" "${name}_traced.out" "${CLEAN_ENV[@]}" ${ENVS[@]+"${ENVS[@]}"} \
    LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/tr_$name/trace.%p.pb" \
    "$PYTHON" "$script" "$WORK/${name}_truth.json" "$@"
  pid=$("$PYTHON" -c 'import json,sys; print(json.load(open(sys.argv[1]))["pid"])' "$WORK/${name}_truth.json" \
    2>/dev/null)
  pick_trace "$WORK/tr_$name" "$WORK/$name.pb" "$pid"
}

# The traces of rows 4 and 7, most telling first; the archive drops the last ones while it is over 15 MiB.
pack_traces() {
  local -a have=()
  local f n size
  for f in story_oom.pb story_leak.pb dataloader.pb ddp_r0.pb ddp_r1.pb cost_py.pb cost_nopy.pb; do
    [ -s "$WORK/$f" ] && have+=("$f")
  done
  n=${#have[@]}
  while [ "$n" -gt 0 ]; do
    tar -czf "$OUT/rows-traces.tar.gz" -C "$WORK" "${have[@]:0:$n}" 2>>"$LOG"
    size=$(wc -c <"$OUT/rows-traces.tar.gz" 2>/dev/null || echo 0)
    [ "$size" -lt $((15 * 1024 * 1024)) ] && break
    log "rows-traces.tar.gz with ${have[*]:0:$n} is $size bytes: leaving ${have[$((n - 1))]} out"
    n=$((n - 1))
  done
  if [ "$n" = 0 ]; then
    rm -f "$OUT/rows-traces.tar.gz"
    log "no trace of rows 4 and 7 to pack (or none small enough)"
  else
    log "rows-traces.tar.gz: ${have[*]:0:$n} ($(wc -c <"$OUT/rows-traces.tar.gz") bytes)"
  fi
}

FINISHED=0
finish() {
  [ "$FINISHED" = 1 ] && return
  FINISHED=1
  local size
  cp "$LOG" "$WORK/rows-log.txt" 2>/dev/null
  pack_traces
  # Everything but traces, binaries and compiler caches; without the events JSON when that is too big.
  tar -czf "$OUT/rows.tar.gz" -C "$WORK" --exclude='tr_*' --exclude='*.pb' --exclude='cache_*' \
    --exclude='./driver_api' --exclude='./leaky_shared' . 2>>"$LOG"
  size=$(wc -c <"$OUT/rows.tar.gz" 2>/dev/null || echo 0)
  if [ "$size" -ge $((15 * 1024 * 1024)) ]; then
    log "rows.tar.gz is $size bytes: packing again without the events JSON"
    tar -czf "$OUT/rows.tar.gz" -C "$WORK" --exclude='tr_*' --exclude='*.pb' --exclude='cache_*' \
      --exclude='./driver_api' --exclude='./leaky_shared' --exclude='*_events.json' . 2>>"$LOG"
  fi
  log "done in $((SECONDS - START))s; \$OUT: $(cd "$OUT" && ls | tr '\n' ' ')"
  log "work directory (not copied back): $WORK"
  if [ -s "$OUT/rows.md" ]; then
    echo
    echo "==================== rows (details in \$OUT/rows.md) ===================="
    sed '/^## Details/,$d' "$OUT/rows.md"
  fi
}
trap finish EXIT

# ---------------------------------------------------------------------------------------------------------------
log "cumemtrace GPU rows: repo $REPO, OUT $OUT, work $WORK, build $BUILD, budget ${BUDGET}s"
log_git
[ -f "$PRELOAD" ] || log "MISSING $PRELOAD: the traced runs will write nothing"
[ -x "$ANALYZE" ] || log "MISSING $ANALYZE: no reports"
if "$ANALYZE" --help 2>/dev/null | grep -q -- '--group-by'; then
  GROUP_BY=(--group-by stack)
else
  log "the analyzer's --help does not list --group-by: its reports are per stack already; running without it"
fi

# 0. The machine: how many GPUs (row 4 needs 2), versions from package metadata.
run_step env_gpus 30 env_gpus.txt sh -c 'nvidia-smi -L; nvidia-smi --query-gpu=index,name,memory.total,memory.used --format=csv'
grep -c '^GPU ' "$WORK/env_gpus.txt" >"$WORK/gpus.txt" 2>/dev/null
GPUS=$(cat "$WORK/gpus.txt" 2>/dev/null || echo 0)
log "GPUs: $GPUS"
run_step env_versions 30 env_versions.txt "$PYTHON" -c '
import importlib.metadata as md, sys
print("python", sys.version.split()[0])
for name in ("torch", "triton", "cupy-cuda13x", "numpy", "nvidia-nccl-cu13", "nvidia-nccl-cu12"):
    try:
        print(name, md.version(name))
    except md.PackageNotFoundError:
        print(name, "-")
'

# 3. The native programs, both built at once.
# shellcheck disable=SC2016  # the inner script expands its own positional parameters
run_step build_cu 150 build_cu.txt bash -c '
"$1" -x c++ -cudart none -o "$2/driver_api" tests/gpu/driver_api.cu -lcuda & a=$!
"$1" -cudart shared -o "$2/leaky_shared" tests/gpu/leaky.cu & b=$!
wait $a; ra=$?; wait $b; rb=$?
echo "driver_api: nvcc rc $ra; leaky_shared: nvcc rc $rb"
[ "$ra" = 0 ] && [ "$rb" = 0 ]' _ "$NVCC" "$WORK"
if [ -x "$WORK/driver_api" ]; then
  run_step driver_api_plain 30 driver_api_plain.out "$WORK/driver_api"
  mkdir -p "$WORK/tr_driver_api"
  run_step driver_api_traced 30 driver_api_traced.out \
    env LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/tr_driver_api/trace.%p.pb" "$WORK/driver_api"
  pick_trace "$WORK/tr_driver_api" "$WORK/driver_api.pb"
  analyze driver_api
fi
if [ -x "$WORK/leaky_shared" ]; then
  ldd "$WORK/leaky_shared" >"$WORK/leaky_shared_ldd.txt" 2>&1
  run_step leaky_shared_plain 30 leaky_shared_plain.out "$WORK/leaky_shared"
  run_step leaky_shared_sanitizer 120 leaky_shared_sanitizer.out "$SANITIZER" --leak-check full "$WORK/leaky_shared"
  mkdir -p "$WORK/tr_leaky_shared"
  run_step leaky_shared_traced 30 leaky_shared_traced.out \
    env LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/tr_leaky_shared/trace.%p.pb" "$WORK/leaky_shared"
  pick_trace "$WORK/tr_leaky_shared" "$WORK/leaky_shared.pb"
  analyze leaky_shared
fi

# 1. Pinned memory in cudaHostRegister mode (both spellings of the variable, as gpu-coverage.sh does).
PIN_ENV="PYTORCH_CUDA_ALLOC_CONF=$PINNED_CONF PYTORCH_ALLOC_CONF=$PINNED_CONF"
plain pinned_register 90 "$ROWS/pinned_register.py" "$PIN_ENV"
traced pinned_register 90 "$ROWS/pinned_register.py" "$PIN_ENV"
analyze pinned_register

# 7a, 7c: the stories, traced only (the oracle is the script's own source and counters).
traced story_oom 120 "$ROWS/story_oom.py" -
analyze story_oom oom
traced story_leak 90 "$ROWS/story_leak.py" -
analyze story_leak leaks

# 7b and 6: the DataLoader untraced, traced, traced following forks.
plain dataloader 90 "$ROWS/dataloader_pin.py" -
traced dataloader 90 "$ROWS/dataloader_pin.py" -
analyze dataloader pinned
traced dataloader_fork 90 "$ROWS/dataloader_pin.py" CUMEMTRACE_FOLLOW_FORK=1
analyze dataloader_fork
"$PYTHON" - "$WORK/tr_dataloader_fork" "$WORK/dataloader_fork.pb" >"$WORK/dataloader_fork_traces.json" <<'EOF'
import json, os, sys
d, parent = sys.argv[1], sys.argv[2]
files = sorted(os.listdir(d)) if os.path.isdir(d) else []
print(json.dumps({"files": [[f, os.path.getsize(os.path.join(d, f))] for f in files]}))
EOF
i=0
for f in "$WORK"/tr_dataloader_fork/*.pb; do
  [ -s "$f" ] || continue
  if [ -s "$WORK/dataloader_fork.pb" ] && cmp -s "$f" "$WORK/dataloader_fork.pb"; then continue; fi
  [ "$i" -ge 4 ] && break
  cp "$f" "$WORK/dataloader_fork_child$i.pb"
  run_json "analyze_dataloader_fork_child${i}_summary" "dataloader_fork_child${i}_summary.json" \
    "$ANALYZE" summary "$WORK/dataloader_fork_child$i.pb" --json
  i=$((i + 1))
done

# 4. Two ranks over NCCL, one trace each.
if [ "$GPUS" -ge 2 ] 2>/dev/null; then
  mkdir -p "$WORK/tr_ddp"
  run_step ddp_traced 180 ddp_traced.out "${CLEAN_ENV[@]}" CUMEMTRACE_LIB="$PRELOAD" \
    bash "$LAUNCHER" --follow-exec -o "$WORK/tr_ddp/run.%r.pb" -- \
    "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node 2 "$ROWS/ddp_train.py" "$WORK/tr_ddp"
  log "traces in $WORK/tr_ddp: $(cd "$WORK/tr_ddp" && ls -l | tail -n +2 | awk '{print $9" ("$5" B)"}' | tr '\n' ' ')"
  for r in 0 1; do
    cp "$WORK/tr_ddp/truth.$r.json" "$WORK/ddp_truth.$r.json" 2>/dev/null
    [ -s "$WORK/tr_ddp/run.$r.pb" ] && cp "$WORK/tr_ddp/run.$r.pb" "$WORK/ddp_r$r.pb"
    analyze "ddp_r$r"
  done
  if [ -x "$ANALYZE" ] && ls "$WORK"/tr_ddp/run.*.pb >/dev/null 2>&1; then
    run_json analyze_ddp_ranks ddp_ranks.json "$ANALYZE" ranks "$WORK"/tr_ddp/run.*.pb --json
  fi
else
  log "row 4 (two ranks): $GPUS GPU(s), skipped"
fi

# 5. CUPTI: torch.profiler beside the preload; cumemtrace's own CUPTI source on PyTorch and on CuPy.
plain profiler 90 "$ROWS/torch_step.py" - --profile
traced profiler 90 "$ROWS/torch_step.py" - --profile
analyze profiler
traced cupti_torch 90 "$ROWS/torch_step.py" CUMEMTRACE_CUPTI=1
analyze cupti_torch
traced cupti_cupy 60 tests/gpu/coverage/cupy_pool.py CUMEMTRACE_CUPTI=1
analyze cupti_cupy

# 7d. Cost per event, without caching (two events per iteration).
plain cost 60 "$ROWS/cost_loop.py" PYTORCH_NO_CUDA_MEMORY_CACHING=1
traced cost_nopy 60 "$ROWS/cost_loop.py" "PYTORCH_NO_CUDA_MEMORY_CACHING=1 CUMEMTRACE_PYTHON=0"
analyze cost_nopy
traced cost_py 60 "$ROWS/cost_loop.py" PYTORCH_NO_CUDA_MEMORY_CACHING=1
analyze cost_py

# 2. CUDA graphs and torch.compile: the costliest (a cold compile each), last.
plain graphs_compile 180 "$ROWS/graphs_compile.py" \
  "TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_CACHE_DIR=$WORK/cache_inductor_plain TRITON_CACHE_DIR=$WORK/cache_triton_plain"
traced graphs_compile 180 "$ROWS/graphs_compile.py" \
  "TORCHINDUCTOR_COMPILE_THREADS=1 TORCHINDUCTOR_CACHE_DIR=$WORK/cache_inductor_traced TRITON_CACHE_DIR=$WORK/cache_triton_traced"
analyze graphs_compile

# The comparison: always runs (outside the budget; it takes a second or two).
log "step check: $PYTHON $ROWS/check.py --dir $WORK --md $OUT/rows.md"
timeout -k 5 60 "$PYTHON" "$ROWS/check.py" --dir "$WORK" --md "$OUT/rows.md" --print table >"$WORK/check.out" 2>&1
RC=$?
log "step check: rc $RC"
if [ ! -s "$OUT/rows.md" ]; then
  log "check.py wrote no table (rc $RC); its output:"
  sed 's/^/      | /' "$WORK/check.out" | tee -a "$LOG"
  RC=2
fi
finish
exit "$RC"
