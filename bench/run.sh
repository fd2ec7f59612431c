#!/usr/bin/env bash
# Measures cumemtrace's cost per event side by side with heaptrack's, on bench/alloc_workload.cc.
#
# Why this exists: performance.md sets targets (hook cost per event under half of heaptrack's at stack depth 32,
# under 8 bytes per event on long runs) that must be checked with numbers, repeatably, on any machine. For each
# stack depth these runs are interleaved, REPS times each:
#   cuda              the workload's cuda mode (fake libcuda.so.1), untraced
#   cumem             the same under LD_PRELOAD=libcumemtrace.so
#   cumem_nostack     the same with CUMEMTRACE_STACK_DEPTH=0 (what the hook costs without unwinding/interning)
#   malloc            the workload's malloc mode, untraced
#   heaptrack         the same under `heaptrack -o FILE` (as users run it: interpreter + zstd in other processes)
#   heaptrack_inproc  the same with only heaptrack's preload writing its raw data to a file (its in-process cost)
# Costs come from the workload's own timing of its steady-state loop, after WARMUP_MS of untimed churn (start-up and
# shutdown of both tools are excluded); per-event overhead = median traced - median untraced. Also: trace bytes per
# event (cumemtrace raw and zstd-compressed as heaptrack's is; heaptrack's .zst), and how fast cumem-analyze and
# heaptrack_print read them. Writes bench/results/<date>[-N].json and prints markdown tables.
#
# Usage: bench/run.sh   (env: BUILD_DIR, DEPTHS="8 32 64", REPS=5, PAIRS=400000, WARMUP_MS=1000, KEEP=1 keeps traces)
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-perf}
DEPTHS=${DEPTHS:-"8 32 64"}
REPS=${REPS:-5}
PAIRS=${PAIRS:-400000}
WARMUP_MS=${WARMUP_MS:-1000}
RESULTS=$ROOT/bench/results/$(date -u +%Y-%m-%d).json
for i in 2 3 4 5 6 7 8 9; do [[ -e $RESULTS ]] && RESULTS=$ROOT/bench/results/$(date -u +%Y-%m-%d)-$i.json; done
WORK=$(mktemp -d /tmp/cumemtrace-bench.XXXXXX)
[[ ${KEEP:-0} == 1 ]] && echo "traces kept in $WORK" >&2 || trap 'rm -rf "$WORK"' EXIT

# ---- Build ----
if [[ ! -f $BUILD/build.ninja ]]; then
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCUMEMTRACE_BUILD_TESTS=ON \
    -DCUMEMTRACE_BUILD_ANALYZER=ON -DCUMEMTRACE_BUILD_BENCH=ON >/dev/null
fi
build() { ninja -C "$BUILD" "$@" >"$WORK/build.log" 2>&1 || { cat "$WORK/build.log" >&2; exit 1; }; }
build cumemtrace fake_cuda fake_cudart cumem-analyze
if ninja -C "$BUILD" -t query alloc_workload >/dev/null 2>&1; then
  build alloc_workload
  WORKLOAD=$BUILD/bench/alloc_workload
else
  # Configured without CUMEMTRACE_BUILD_BENCH: build the workload the same way by hand.
  WORKLOAD=$BUILD/bench-standalone/alloc_workload
  cuda_bin=$(sed -n 's/^CUDAToolkit_BIN_DIR:PATH=//p' "$BUILD/CMakeCache.txt")
  fakes=$BUILD/tests/fakes
  mkdir -p "$(dirname "$WORKLOAD")"
  c++ -std=c++20 -O2 -g -Wall -Wextra -isystem "${cuda_bin%/bin}/include" "$ROOT/bench/alloc_workload.cc" \
    -o "$WORKLOAD" "$fakes/libcuda.so.1" -Wl,-rpath,"$fakes"
fi
PRELOAD=$BUILD/preload/libcumemtrace.so
ANALYZE=$BUILD/analyzer/cumem-analyze
for tool in heaptrack heaptrack_print python3 zstd; do
  command -v $tool >/dev/null || { echo "run.sh needs $tool" >&2; exit 1; }
done
HEAPTRACK_PRELOAD=$(dirname "$(readlink -f "$(command -v heaptrack)")")/../lib/heaptrack/libheaptrack_preload.so
[[ -f $HEAPTRACK_PRELOAD ]] || { echo "no libheaptrack_preload.so at $HEAPTRACK_PRELOAD" >&2; exit 1; }

now_ns() { date +%s%N; }
health() { "$ANALYZE" --json "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['health']['$2'])"; }
# record CONFIG DEPTH REP WORKLOAD_JSON [more JSON fields]: one line of $WORK/runs.jsonl
record() { echo "{\"config\": \"$1\", \"depth\": $2, \"rep\": $3, \"run\": $4${5:+, $5}}" >>"$WORK/runs.jsonl"; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for depth in $DEPTHS; do
  args=("$PAIRS" "$depth" "$WARMUP_MS")
  for rep in $(seq "$REPS"); do
    echo "depth $depth, round $rep of $REPS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    record cuda "$depth" "$rep" "$("$WORKLOAD" cuda "${args[@]}")"

    trace=$WORK/cumem.$depth.$rep.pb
    out=$(LD_PRELOAD=$PRELOAD CUMEMTRACE_OUTPUT=$trace "$WORKLOAD" cuda "${args[@]}")
    t0=$(now_ns); "$ANALYZE" "$trace" >/dev/null; t1=$(now_ns)
    record cumem "$depth" "$rep" "$out" "\"trace_bytes\": $(stat -c %s "$trace"), \
\"trace_zstd_bytes\": $(zstd -q -c "$trace" | wc -c), \"trace_events\": $(health "$trace" events), \
\"recorder_time_ns\": $(health "$trace" recorder_time_ns), \"read_ns\": $((t1 - t0))"

    trace=$WORK/cumem0.$depth.$rep.pb
    out=$(LD_PRELOAD=$PRELOAD CUMEMTRACE_OUTPUT=$trace CUMEMTRACE_STACK_DEPTH=0 "$WORKLOAD" cuda "${args[@]}")
    record cumem_nostack "$depth" "$rep" "$out" "\"trace_bytes\": $(stat -c %s "$trace")"

    record malloc "$depth" "$rep" "$("$WORKLOAD" malloc "${args[@]}")"

    ht=$WORK/heaptrack.$depth.$rep
    out=$(heaptrack -o "$ht" "$WORKLOAD" malloc "${args[@]}" 2>"$WORK/heaptrack.log" | grep '^{')
    file=$(ls "$ht".*)
    t0=$(now_ns); heaptrack_print "$file" >/dev/null; t1=$(now_ns)
    record heaptrack "$depth" "$rep" "$out" "\"trace_bytes\": $(stat -c %s "$file"), \"read_ns\": $((t1 - t0))"

    raw=$WORK/heaptrack-raw.$depth.$rep
    # Through env: heaptrack's preload takes itself out of LD_PRELOAD, so it must not load into a wrapper first.
    out=$(env LD_PRELOAD="$HEAPTRACK_PRELOAD" DUMP_HEAPTRACK_OUTPUT="$raw" "$WORKLOAD" malloc "${args[@]}")
    record heaptrack_inproc "$depth" "$rep" "$out" "\"trace_bytes\": $(stat -c %s "$raw")"
    rm -f "$raw"
  done
done
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- Summary ----
mkdir -p "$(dirname "$RESULTS")"
MACHINE="$(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) CPUs" \
GIT="$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo unknown)" \
HEAPTRACK="$(heaptrack --version 2>&1 | head -1)" LOAD="$load_before -> $load_after" \
PAIRS=$PAIRS REPS=$REPS WARMUP_MS=$WARMUP_MS python3 - "$WORK/runs.jsonl" "$RESULTS" <<'EOF'
import datetime, json, os, statistics, sys

runs = [json.loads(line) for line in open(sys.argv[1])]
CONFIGS = ("cuda", "cumem", "cumem_nostack", "malloc", "heaptrack", "heaptrack_inproc")

def get(config, depth, key):
    return [r["run"][key] if key in r["run"] else r[key]
            for r in runs if r["config"] == config and r["depth"] == depth]
def stat(xs):
    return {"median": statistics.median(xs), "min": min(xs), "max": max(xs), "values": xs}
def per(config, depth, num, den):
    return stat([n / d for n, d in zip(get(config, depth, num), get(config, depth, den))])

summary = {}
for depth in sorted({r["depth"] for r in runs}):
    s = {c: stat(get(c, depth, "ns_per_event")) for c in CONFIGS}
    s["cpu_ns_per_event"] = {c: stat(get(c, depth, "cpu_ns_per_event")) for c in CONFIGS}  # thread CPU time
    s["frames"] = get("cuda", depth, "frames")[0]
    med = {c: s[c]["median"] for c in CONFIGS}
    s["overhead_ns"] = {"cumem": med["cumem"] - med["cuda"], "cumem_nostack": med["cumem_nostack"] - med["cuda"],
                        "heaptrack": med["heaptrack"] - med["malloc"],
                        "heaptrack_inproc": med["heaptrack_inproc"] - med["malloc"]}
    # The same differences taken within each round (runs next to each other in time), for their spread.
    pairs = {"cumem": "cuda", "cumem_nostack": "cuda", "heaptrack": "malloc", "heaptrack_inproc": "malloc"}
    s["overhead_per_round_ns"] = {t: stat([a - b for a, b in zip(get(t, depth, "ns_per_event"),
                                                                  get(u, depth, "ns_per_event"))])
                                  for t, u in pairs.items()}
    o = s["overhead_ns"]
    s["ratio_vs_heaptrack"] = o["cumem"] / o["heaptrack"]
    s["ratio_vs_heaptrack_inproc"] = o["cumem"] / o["heaptrack_inproc"]
    s["cumem_recorder_ns_per_event"] = per("cumem", depth, "recorder_time_ns", "trace_events")
    s["cumem_bytes_per_event"] = per("cumem", depth, "trace_bytes", "trace_events")
    s["cumem_zstd_bytes_per_event"] = per("cumem", depth, "trace_zstd_bytes", "trace_events")
    s["cumem_nostack_bytes_per_event"] = per("cumem_nostack", depth, "trace_bytes", "total_events")
    # heaptrack counts no frees: its events are the workload's allocations + frees (libc's own few are ignored).
    s["heaptrack_zst_bytes_per_event"] = per("heaptrack", depth, "trace_bytes", "total_events")
    s["heaptrack_raw_bytes_per_event"] = per("heaptrack_inproc", depth, "trace_bytes", "total_events")
    s["cumem_analyze_events_per_s"] = stat([e / t * 1e9 for e, t in zip(get("cumem", depth, "trace_events"),
                                                                         get("cumem", depth, "read_ns"))])
    s["heaptrack_print_events_per_s"] = stat([e / t * 1e9 for e, t in zip(get("heaptrack", depth, "total_events"),
                                                                           get("heaptrack", depth, "read_ns"))])
    summary[depth] = s

out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
       "machine": os.environ["MACHINE"], "git": os.environ["GIT"], "heaptrack": os.environ["HEAPTRACK"],
       "loadavg": os.environ["LOAD"], "pairs": int(os.environ["PAIRS"]), "reps": int(os.environ["REPS"]),
       "warmup_ms": int(os.environ["WARMUP_MS"]), "summary": summary, "runs": runs}
json.dump(out, open(sys.argv[2], "w"), indent=1)

def cell(x, digits=0): return f'{x["median"]:.{digits}f} ({x["min"]:.{digits}f}–{x["max"]:.{digits}f})'
print(f'ns per event, median of {out["reps"]} (min–max); {out["pairs"]} timed alloc/free pairs after '
      f'{out["warmup_ms"]} ms warm-up; {out["machine"]}; load {out["loadavg"]}; git {out["git"]}\n')
print("| depth | cuda | + cumemtrace | + cumemtrace, no stacks | malloc | + heaptrack | + heaptrack in-process "
      "| cumemtrace overhead | heaptrack overhead | heaptrack in-process overhead | ratio (vs in-process) |")
print("|---" * 11 + "|")
for s in summary.values():
    o, r = s["overhead_ns"], s["overhead_per_round_ns"]
    spread = lambda k: f'{o[k]:.0f} ({r[k]["min"]:.0f}–{r[k]["max"]:.0f})'
    print(f'| {s["frames"]} | {cell(s["cuda"])} | {cell(s["cumem"])} | {cell(s["cumem_nostack"])} '
          f'| {cell(s["malloc"])} | {cell(s["heaptrack"])} | {cell(s["heaptrack_inproc"])} '
          f'| {spread("cumem")} | {spread("heaptrack")} | {spread("heaptrack_inproc")} '
          f'| {s["ratio_vs_heaptrack"]:.2f} ({s["ratio_vs_heaptrack_inproc"]:.2f}) |')
print("\noverhead = difference of the medians; in brackets the range of the same difference within each round")
print("\n| depth | cumemtrace recorder ns/event | cumemtrace B/event | zstd | no stacks | heaptrack .zst B/event "
      "| heaptrack raw B/event | cumem-analyze Mevents/s | heaptrack_print Mevents/s |")
print("|---" * 9 + "|")
for s in summary.values():
    print(f'| {s["frames"]} | {cell(s["cumem_recorder_ns_per_event"])} | {cell(s["cumem_bytes_per_event"], 2)} '
          f'| {cell(s["cumem_zstd_bytes_per_event"], 2)} | {cell(s["cumem_nostack_bytes_per_event"], 2)} '
          f'| {cell(s["heaptrack_zst_bytes_per_event"], 2)} | {cell(s["heaptrack_raw_bytes_per_event"], 2)} '
          f'| {s["cumem_analyze_events_per_s"]["median"] / 1e6:.2f} '
          f'| {s["heaptrack_print_events_per_s"]["median"] / 1e6:.2f} |')
print(f'\nresults: {sys.argv[2]}')
EOF
