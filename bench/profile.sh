#!/usr/bin/env bash
# Where cumemtrace's time per event goes, in instructions (callgrind) and in samples (perf), next to heaptrack.
#
# Why this exists: wall time on a shared machine is noisy and says nothing about which part of the hook costs.
# Instruction counts are deterministic: each configuration runs under callgrind at two loop lengths, and the
# difference divided by the extra events is the steady-state cost of one event (start-up, warm-up and shutdown
# cancel out). The same difference per function attributes cumemtrace's recording path (unwinding, interning,
# encoding and writing, locking, clocks, device query). heaptrack cannot be run under valgrind here (its preload
# loads into valgrind's launcher and takes itself out of LD_PRELOAD before the program starts), so for both tools
# `perf record -e cpu-clock` gives the share of samples per library as a time-based cross-check.
#
# Usage: bench/profile.sh   (env: KEEP=1, BUILD_DIR, DEPTH=32, PAIRS1=10000, PAIRS2=30000, PERF_PAIRS=300000)
# Needs bench/run.sh's build (run it first, or set BUILD_DIR). Prints a report and writes it to
# bench/results/<date>-profile-depth<DEPTH>.txt.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-perf}
DEPTH=${DEPTH:-32}
PAIRS1=${PAIRS1:-10000}
PAIRS2=${PAIRS2:-30000}
PERF_PAIRS=${PERF_PAIRS:-300000}
WORKLOAD=$BUILD/bench/alloc_workload
[[ -x $WORKLOAD ]] || WORKLOAD=$BUILD/bench-standalone/alloc_workload
PRELOAD=$BUILD/preload/libcumemtrace.so
OUT=$ROOT/bench/results/$(date -u +%Y-%m-%d)-profile-depth$DEPTH.txt
WORK=$(mktemp -d /tmp/cumemtrace-profile.XXXXXX)
[[ ${KEEP:-0} == 1 ]] && echo "profiles kept in $WORK" >&2 || trap 'rm -rf "$WORK"' EXIT
[[ -x $WORKLOAD && -f $PRELOAD ]] || { echo "build first: bench/run.sh" >&2; exit 1; }

# callgrind NAME MODE PAIRS [env...]: writes $WORK/NAME.PAIRS.cg and its calling-tree annotation.
callgrind() {
  local name=$1 mode=$2 pairs=$3
  shift 3
  env "$@" valgrind --tool=callgrind --callgrind-out-file="$WORK/$name.$pairs.cg" \
    "$WORKLOAD" "$mode" "$pairs" "$DEPTH" >/dev/null 2>"$WORK/$name.$pairs.log"
  callgrind_annotate --inclusive=yes --tree=calling --threshold=100 "$WORK/$name.$pairs.cg" \
    >"$WORK/$name.$pairs.txt" 2>/dev/null
}

for pairs in "$PAIRS1" "$PAIRS2"; do
  callgrind cuda cuda "$pairs"
  callgrind malloc malloc "$pairs"
  rm -f "$WORK/trace.pb"
  callgrind cumem cuda "$pairs" LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/trace.pb"
  [[ -s $WORK/trace.pb ]] || { echo "profile.sh: the traced callgrind run wrote no trace" >&2; exit 1; }
done

# perf: share of cpu-clock samples per process and library: cumemtrace (cuda mode), heaptrack as users run it and
# heaptrack's preload alone (malloc mode). perf follows heaptrack's child processes (interpreter, zstd).
HEAPTRACK_PRELOAD=$(dirname "$(readlink -f "$(command -v heaptrack)")")/../lib/heaptrack/libheaptrack_preload.so
perf_ok=1
rm -f "$WORK/trace.pb"
args=("$PERF_PAIRS" "$DEPTH" 1000)
# Through env, after perf: with LD_PRELOAD set on perf itself, perf is the first process to load the preload and
# the workload it starts stays passive (only the first process traces), so perf would sample an untraced run and
# nothing would say so. The trace file proves the run was traced.
perf record -q -e cpu-clock -o "$WORK/cumem.perf" -- env LD_PRELOAD="$PRELOAD" CUMEMTRACE_OUTPUT="$WORK/trace.pb" \
  "$WORKLOAD" cuda "${args[@]}" >/dev/null 2>&1 || perf_ok=0
[[ -s $WORK/trace.pb ]] || { echo "profile.sh: the traced perf run wrote no trace" >&2; exit 1; }
perf record -q -e cpu-clock -o "$WORK/heaptrack.perf" -- heaptrack -o "$WORK/ht" "$WORKLOAD" malloc "${args[@]}" \
  >/dev/null 2>&1 || perf_ok=0
perf record -q -e cpu-clock -o "$WORK/inproc.perf" -- env LD_PRELOAD="$HEAPTRACK_PRELOAD" \
  DUMP_HEAPTRACK_OUTPUT="$WORK/ht.raw" "$WORKLOAD" malloc "${args[@]}" >/dev/null 2>&1 || perf_ok=0
for p in cumem heaptrack inproc; do
  [[ $perf_ok == 1 ]] || break
  perf report -i "$WORK/$p.perf" --no-children --sort comm,dso --stdio 2>/dev/null | grep '%' >"$WORK/$p.perf.txt"
  perf report -i "$WORK/$p.perf" --no-children --sort dso,sym --stdio 2>/dev/null | grep '%' >"$WORK/$p.perf.sym.txt"
done

DEPTH=$DEPTH PAIRS1=$PAIRS1 PAIRS2=$PAIRS2 PERF_OK=$perf_ok python3 - "$WORK" <<'EOF' | tee "$OUT"
import os, re, sys

work = sys.argv[1]
p1, p2 = int(os.environ["PAIRS1"]), int(os.environ["PAIRS2"])
events = 2 * (p2 - p1)  # the extra events of the longer run

def total(name, pairs):
    return int(re.search(r"([\d,]+) \(100.0%\)\s+PROGRAM TOTALS", open(f"{work}/{name}.{pairs}.txt").read())
               .group(1).replace(",", ""))

def blocks(name, pairs):
    """callgrind_annotate's calling tree: [(function, inclusive Ir, {callee: Ir})]."""
    out = []
    for line in open(f"{work}/{name}.{pairs}.txt").read().splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+([*>]) +(.*)", line)
        if m is None:
            continue
        cost, kind, rest = int(m.group(1).replace(",", "")), m.group(2), m.group(3)
        fn = re.sub(r"\s*(\(\d[\d,]*x\))?\s*(\[.*\])?$", "", rest.split(":", 1)[-1])
        fn = re.sub(r"\(.*", "", fn.replace("cumemtrace::preload::", "").replace("(anonymous namespace)::", ""))
        if kind == "*":
            out.append((fn, cost, {}))
        elif out:
            out[-1][2][fn] = out[-1][2].get(fn, 0) + cost
    return out

def inclusive(name, pairs, function):
    # A function may be listed once per source file name its code came from (inlining): the largest is the whole.
    return max([cost for fn, cost, _ in blocks(name, pairs) if fn == function] or [0])

def called_from(name, pairs, function):
    calls = {}
    for fn, _, callees in blocks(name, pairs):
        if fn == function:
            for callee, cost in callees.items(): calls[callee] = calls.get(callee, 0) + cost
    return calls

def delta(f):  # per extra event, between the two run lengths
    return (f(p2) - f(p1)) / events

print(f"Instructions per event (callgrind, depth {os.environ['DEPTH']}, ({p2} - {p1}) pairs = {events} events)\n")
ir = {n: delta(lambda p: total(n, p)) for n in ("cuda", "cumem", "malloc")}
overhead = ir["cumem"] - ir["cuda"]
print(f"  cuda untraced            {ir['cuda']:8.0f}")
print(f"  cuda + cumemtrace        {ir['cumem']:8.0f}   overhead {overhead:6.0f}")
print(f"  malloc untraced          {ir['malloc']:8.0f}")

# Where the overhead goes. Encoding and writing (FlushLocked) runs on the recording thread when a batch fills and
# on cumemtrace's flush thread every CUMEMTRACE_FLUSH_MS: all of it is counted, wherever it ran.
parts = {
    "unwinding: CaptureStack (libunwind's unw_backtrace + dropping own frames)":
        delta(lambda p: inclusive("cumem", p, "CaptureStack")),
    "  of which unw_backtrace": delta(lambda p: called_from("cumem", p, "CaptureStack").get("backtrace", 0)),
    "interning: StackTable::Intern": delta(lambda p: inclusive("cumem", p, "StackTable::Intern")),
    "encoding + write: FlushLocked (all threads)": delta(lambda p: inclusive("cumem", p, "FlushLocked")),
    "locking: pthread_mutex_lock/unlock in Record":
        delta(lambda p: sum(c for f, c in called_from("cumem", p, "Record").items() if f.startswith("pthread_mutex"))),
    "device query: CurrentDevice (cuCtxGetDevice)": delta(lambda p: called_from("cumem", p, "Record")
                                                          .get("CurrentDevice", 0)),
    "clock_gettime x2 (vDSO time is not counted by valgrind)":
        delta(lambda p: sum(c for f, c in called_from("cumem", p, "Record").items() if f.startswith("clock_gettime"))),
}
print(f"\n  where the {overhead:.0f} instructions of overhead per event go:")
for label, cost in parts.items():
    print(f"    {cost:7.0f}  {cost / overhead:5.1%}  {label}")
rest = overhead - sum(c for l, c in parts.items() if not l.startswith("  "))
print(f"    {rest:7.0f}  {rest / overhead:5.1%}  the rest: hook entry/exit, Record's own code, batch append")

if os.environ["PERF_OK"] == "1":
    for p, title in (("cumem", "cuda + cumemtrace"), ("heaptrack", "malloc + heaptrack, all its processes"),
                     ("inproc", "malloc + heaptrack's preload alone")):
        print(f"\nperf record -e cpu-clock, {title}: share of samples by process and library")
        for line in open(f"{work}/{p}.perf.txt").read().splitlines()[:12]:
            print("  " + line.strip())
        print(f"  top symbols:")
        for line in open(f"{work}/{p}.perf.sym.txt").read().splitlines()[:15]:
            print("    " + line.strip())
else:
    print("\nperf record did not work here")
EOF
echo "written: $OUT" >&2
