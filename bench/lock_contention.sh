#!/usr/bin/env bash
# Several threads allocating at once under the tracer (bench/torch_threads.cc: PyTorch blocks through the fake
# libc10_cuda.so, a device per thread, so the tracer's lock is the only one the threads share), against the same
# untraced, for each thread count in THREADS, ROUNDS rounds interleaved. Prints each configuration's median ns per
# alloc/free pair per thread (each round's slowest thread) and what tracing adds to it.
#
#   bench/lock_contention.sh [LIBCUMEMTRACE]   # env: BUILD_DIR (build-perf), THREADS ("1 2"), ROUNDS (7), PAIRS (1000000)
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$ROOT/build-perf}
program=$build/bench/torch_threads
lib=${1:-$build/preload/libcumemtrace.so}
[[ -x $program ]] || { echo "$0: no $program (ninja -C $build torch_threads)" >&2; exit 2; }
threads=${THREADS:-"1 2"}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for _ in $(seq "${ROUNDS:-7}"); do
  for n in $threads; do
    echo "$n untraced $("$program" "$n" "${PAIRS:-1000000}")" >>"$work/runs"
    out=$(env LD_PRELOAD="$lib" CUMEMTRACE_OUTPUT="$work/t.pb" CUMEMTRACE_OVERWRITE=1 CUMEMTRACE_QUIET=1 \
      "$program" "$n" "${PAIRS:-1000000}")
    echo "$n traced $out" >>"$work/runs"
  done
done
python3 - "$work/runs" <<'PY'
import json, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    n, mode, run = line.split(" ", 2)
    runs.setdefault((int(n), mode), []).append(max(json.loads(run)["ns_per_pair"]))
print("threads | untraced ns per pair | traced ns per pair | tracing adds (ns per pair, per trace row) | traced rounds")
for n in sorted({n for n, _ in runs}):
    u, t = statistics.median(runs[(n, "untraced")]), statistics.median(runs[(n, "traced")])
    print(f"{n} | {u:.1f} | {t:.1f} | {t - u:.1f}, {(t - u) / 2:.1f} | {', '.join(f'{v:.0f}' for v in runs[(n, 'traced')])}")
PY
