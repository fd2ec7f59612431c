#!/usr/bin/env bash
# Instructions the preload spends per PyTorch block alloc/free pair, by part (callgrind, deterministic).
#
# Why this exists: on the GPU machine a step's time drifts between processes, and the preload's own time there
# (trailer recorder_time_ns) says nothing about which part of the hook costs. Here bench/torch_workload.py drives
# the fake libc10_cuda.so (tests/fakes) the way PyTorch drives its tracker: a block allocated from Python through a
# chain of native frames, then freed. It runs under callgrind at two loop lengths; the difference divided by the
# extra pairs is the steady-state cost of one pair (start-up and shutdown cancel out), in total and for each part
# of the recording path (inclusive counts of the functions named below).
#
# Usage: bench/torch_instructions.sh   (env: BUILD_DIR (default build), PAIRS1=5000, PAIRS2=15000,
#        PYTHON_DEPTH=20, NATIVE_DEPTH=30, KEEP=1 keeps the profiles)
# Needs valgrind, python3 and the default build (scripts/test.sh builds it).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build}
PAIRS1=${PAIRS1:-5000}
PAIRS2=${PAIRS2:-15000}
PYTHON_DEPTH=${PYTHON_DEPTH:-20}
NATIVE_DEPTH=${NATIVE_DEPTH:-30}
PRELOAD=$BUILD/preload/libcumemtrace.so
FAKES=$BUILD/tests/fakes
[[ -f $PRELOAD && -f $FAKES/torch/libc10_cuda.so ]] || { echo "build first: scripts/test.sh" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "needs valgrind" >&2; exit 1; }
PYTHON=$(python3 -c "import sys; print(sys.executable)")  # the interpreter itself: valgrind does not follow a launcher script
WORK=$(mktemp -d /tmp/cumemtrace-torch-instr.XXXXXX)
[[ ${KEEP:-0} == 1 ]] && echo "profiles kept in $WORK" >&2 || trap 'rm -rf "$WORK"' EXIT

# The parts: a pattern of callgrind_annotate's lines and a label. The build inlines across files (LTO), so most parts
# are code of one source file inlined into another function: callgrind lists such code as "FILE:FUNCTION", with the
# inclusive cost of that file's lines there. A function also appears once per file its inlined code came from; a
# part's cost is the largest of the lines that hold its pattern. A pattern that matches no line fails the script
# (the names moved: a part must never read as zero because it was not found).
PARTS=(
  "::OnTraceEntry(|the tracker callback, all of it (the recorder below)"
  ":cumemtrace::preload::Record(|the recorder, all of it"
  ":cumemtrace::preload::CaptureStack(|  native unwinding (libunwind, the unwind memo and our frame filter)"
  "preload/python_frames.cc:cumemtrace::preload::Record(|  Python frames read from the interpreter"
  "preload/torch_grad_mode.cc:cumemtrace::preload::(anonymous namespace)::OnTraceEntry(|  autograd's grad mode (one call into libc10, on each block handed out)"
  "preload/python_stack_memo.cc:cumemtrace::preload::Record(|  Python frames matched to the thread's previous stack"
  "preload/python_splice.cc:cumemtrace::preload::Record(|  Python frames spliced into the native stack"
  ":cumemtrace::preload::SealLocked(|  sealing full batches, and writing them when both queue slots wait (valgrind runs one thread at a time, so such stalls can land here; read the recorder less this line)"
  ":cumemtrace::preload::WriteSealedIoLocked(|the writer: interning, encoding, writing (the flush thread, or a recording thread that must)"
  "preload/stack_table.cc:cumemtrace::preload::WriteSealedIoLocked(|  stack interning (the writer's since the output queue)"
)

for pairs in "$PAIRS1" "$PAIRS2"; do
  rm -f "$WORK/trace.pb"
  env LD_LIBRARY_PATH="$FAKES:$FAKES/torch" LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/trace.pb" \
    valgrind --tool=callgrind --callgrind-out-file="$WORK/$pairs.cg" \
    "$PYTHON" "$ROOT/bench/torch_workload.py" "$pairs" "$PYTHON_DEPTH" "$NATIVE_DEPTH" 0 \
    >"$WORK/$pairs.out" 2>"$WORK/$pairs.log" || { cat "$WORK/$pairs.log" >&2; exit 1; }
  callgrind_annotate --inclusive=yes --threshold=100 "$WORK/$pairs.cg" >"$WORK/$pairs.txt" 2>/dev/null
done

# Inclusive instructions of the lines holding $1 in profile $2: the largest count (empty when no line holds it).
inclusive() {
  awk -v name="$1" 'index($0, name) > 0 { c = $1; gsub(",", "", c); if (c + 0 > best) best = c + 0; found = 1 }
                     END { if (found) print best + 0 }' "$2"
}
total() { awk '/PROGRAM TOTALS/ { c = $1; gsub(",", "", c); print c; exit }' "$1"; }

extra=$((PAIRS2 - PAIRS1))
echo "preload instructions per PyTorch block alloc/free pair (callgrind; $PAIRS1 and $PAIRS2 pairs, Python depth" \
  "$PYTHON_DEPTH, $NATIVE_DEPTH native frames between binding and allocator; $(git -C "$ROOT" rev-parse --short HEAD))"
t1=$(total "$WORK/$PAIRS1.txt")
t2=$(total "$WORK/$PAIRS2.txt")
printf '%8d  whole process (the workload itself included)\n' $(((t2 - t1) / extra))
for part in "${PARTS[@]}"; do
  name=${part%%|*}
  a=$(inclusive "$name" "$WORK/$PAIRS1.txt")
  b=$(inclusive "$name" "$WORK/$PAIRS2.txt")
  if [[ -z $a || -z $b ]]; then
    echo "$0: no line of the profile holds '$name': the function moved or was renamed; update PARTS" >&2
    exit 1
  fi
  printf '%8d  %s\n' $(((b - a) / extra)) "${part#*|}"
done
