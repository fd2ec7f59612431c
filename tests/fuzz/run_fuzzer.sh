#!/usr/bin/env bash
# Builds the libFuzzer target (tests/fuzz/trace_fuzzer.cc) in its own build tree with clang++, ASan and UBSan, makes
# a seed corpus of the real traces in examples/ and damaged copies of them, runs every command on each seed, then
# fuzzes for --runs mutated inputs (at most FUZZ_MAX_SECONDS, default 150).
# Exit 0: no finding; 77: skipped (no clang++, or no libFuzzer runtime); anything else: a finding or a failed build
# (the crashing input is left in the work folder, named crash-*, leak-*, timeout-* or oom-*). libFuzzer's own
# error exit code is 77 too, hence -error_exitcode=1 below: a finding must never read as a skip.
#
#   tests/fuzz/run_fuzzer.sh [--runs N] [--build DIR] [--work DIR] [--jobs N] [--clangxx PATH] [--clang PATH]
#                            [-- extra libFuzzer flags]
# The CTest test fuzz_trace_reports runs it with --runs 20000; docs/fuzzing.md has the long run.
set -euo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
runs=20000
build=$src/build-fuzz
work=$src/build-fuzz/work
jobs=2
clangxx=
clang=
while [[ $# -gt 0 ]]; do
  case $1 in
    --runs) runs=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --work) work=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --clangxx) clangxx=$2; shift 2 ;;
    --clang) clang=$2; shift 2 ;;
    --) shift; break ;;
    *) echo "run_fuzzer.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
extra=("$@")
# The fuzzer runs from the work folder: relative --build and --work are resolved here, against the caller's folder.
build=$(realpath -m "$build")
work=$(realpath -m "$work")

[[ -n $clangxx && $clangxx != *NOTFOUND ]] || clangxx=$(command -v clang++ || true)
[[ -n $clang && $clang != *NOTFOUND ]] || clang=$(command -v clang || true)
if [[ -z $clangxx || -z $clang ]]; then
  echo "SKIPPED: fuzz_trace_reports needs clang and clang++ (apt-get install clang); none found" >&2
  exit 77
fi
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'extern "C" int LLVMFuzzerTestOneInput(const unsigned char*, unsigned long) { return 0; }' >"$probe/p.cc"
if ! "$clangxx" -fsanitize=fuzzer,address,undefined "$probe/p.cc" -o "$probe/p" 2>"$probe/log"; then
  echo "SKIPPED: $clangxx cannot link a libFuzzer target (libclang_rt.fuzzer missing? on Debian it comes with" \
       "the clang package's libclang-rt-dev / libclang-common-dev):" >&2
  cat "$probe/log" >&2
  exit 77
fi

# The analyzer with sanitizers, linked against the system's libprotobuf and Abseil (built with g++ and libstdc++,
# which clang uses too). Only the fuzzer's target is built.
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if [[ ! -f $build/CMakeCache.txt ]]; then
  cmake -S "$src" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$clangxx" \
        -DCMAKE_C_COMPILER="$clang" -DCUMEMTRACE_FUZZ=ON >/dev/null
fi
cmake --build "$build" --target cumem_fuzz -j "$jobs"

# Seeds: the regression inputs, every real trace, and for each a copy cut in the middle, one with a byte flipped a third of the way in, and
# its first 1 KiB (the header and the first metadata). libFuzzer mutates from there; the corpus it grows stays in
# the work folder for the next run.
mkdir -p "$work/corpus" "$work/seeds"
rm -f "$work/seeds"/*
for pb in "$src"/examples/*.pb; do
  name=$(basename "$pb" .pb)
  size=$(stat -c %s "$pb")
  cp "$pb" "$work/seeds/$name.pb"
  head -c $((size / 2)) "$pb" >"$work/seeds/$name.cut.pb"
  python3 - "$pb" "$work/seeds/$name" <<'PY'
import sys
data = bytearray(open(sys.argv[1], "rb").read())
flipped = bytearray(data)
flipped[len(data) // 3] ^= 0x5A
open(sys.argv[2] + ".flip.pb", "wb").write(flipped)
open(sys.argv[2] + ".small.pb", "wb").write(data[:1024])
PY
done
# Inputs that once were findings (docs/fuzzing.md): each runs through every command below, every time.
for r in "$src"/tests/fuzz/regressions/*.pb; do
  if [[ -f $r ]]; then cp "$r" "$work/seeds/"; fi
done

cd "$work"
fuzzer=$build/tests/fuzz/cumem_fuzz
# 1. Every seed whole (the full real traces too), each through all ~30 commands: libFuzzer runs the files it is
#    given by name once each, without mutating them.
echo "fuzz: every command on each of the $(ls seeds | wc -l) seeds" >&2
"$fuzzer" -error_exitcode=1 -timeout=60 -rss_limit_mb=4096 seeds/*
# 2. Mutation: --runs inputs, each running one command (CUMEM_FUZZ_ONE=1, ~30 times the inputs per second), the
#    command picked by the input's length. -timeout: an input over 25 s is a hang. -rss_limit_mb: a trace's declared
#    sizes are capped, so a small input must not need gigabytes. -max_len 4096 (libFuzzer cuts the seeds there):
#    a header, the first metadata packets and event batches, damaged every way the mutators know; -max_total_time
#    bounds a slow machine.
echo "fuzz: $runs mutated inputs, corpus $work/corpus" >&2
CUMEM_FUZZ_ONE=1 "$fuzzer" -runs="$runs" -max_total_time=${FUZZ_MAX_SECONDS:-150} -error_exitcode=1 -timeout=25 \
    -rss_limit_mb=4096 -max_len=4096 -print_final_stats=1 "${extra[@]}" corpus seeds
