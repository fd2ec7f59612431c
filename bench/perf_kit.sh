#!/usr/bin/env bash
# Bundles this machine's perf with the shared libraries it needs (not the C library, which must be the other
# machine's own) into perfkit/ (git-ignored), for the GPU machine, which has no profiler of its own but lets perf
# sample with the CPU clock (software events; it has no hardware counters). Carry perfkit/ there, then:
#   export LD_LIBRARY_PATH=$PWD/perfkit/lib
#   perfkit/perf record -F 4000 -o /tmp/run.data -- env LD_PRELOAD=$PWD/gpu-build/preload/libcumemtrace.so \
#       python3 tests/gpu/workloads/gpt2_overhead.py /tmp/t.json --steps 800 --layers 6 --embd 128 --batch 2 --seq 64
#   perfkit/perf report -i /tmp/run.data --no-children --sort comm,dso --stdio
# (docs/performance.md, "Where the step's time goes, by library").
set -euo pipefail
cd "$(dirname "$0")/.."
perf=$(command -v perf)
rm -rf perfkit
mkdir -p perfkit/lib
cp "$perf" perfkit/perf
ldd "$perf" | awk '$3 ~ /^\// {print $3}' |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | while read -r lib; do
  cp -L "$lib" perfkit/lib/
done
du -sh perfkit
