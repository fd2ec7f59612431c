#!/usr/bin/env bash
# Builds cumemtrace here for a machine that has a GPU but no package registry (the validation machine): the
# preload gets libunwind.so.8 beside it, and libdw.so.1 + libelf.so.1 (which it dlopens at exit for file:line), the analyzer gets its shared libraries (protobuf, Abseil, libstdc++) in
# build/analyzer/lib, found through its RUNPATH $ORIGIN/lib. The glibc of that machine must be at least this one's.
# Usage: scripts/gpu-bundle.sh [build-dir [bundle-dir]]
# The bundle (default gpu-build/, git-ignored) holds only what runs there, small enough to carry:
#   preload/libcumemtrace.so, preload/libunwind.so.8, preload/libdw.so.1, preload/libelf.so.1,
#   analyzer/cumem-analyze, analyzer/analyzer_benchmark (how fast the analyzer reads a trace on that machine's cores:
#   docs/performance.md), analyzer/lib/*.so, fakes/libcuda.so.1 and fakes/libe2e_native_thread_plugin.so (the fake
#   driver and a plugin that allocates from a C thread, for the suite's Python-frame tests), fakes/libe2e_slow_write.so
#   (a slow disk for bench/torch_overhead.py --slow-disk-ms)
# Then on that machine, carrying gpu-build: python3 -m pytest tests/gpu --build gpu-build --md $OUT/gpu-suite.md
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build-gpu}
bundle=${2:-gpu-build}
scripts/setup.sh "$build_dir" -DCUMEMTRACE_BUNDLE_LIBUNWIND=ON
cmake --build "$build_dir" --target cumemtrace cumem-analyze analyzer_benchmark fake_cuda e2e_native_thread_plugin \
  e2e_slow_write
rm -rf "$bundle"
mkdir -p "$bundle/preload" "$bundle/analyzer/lib" "$bundle/fakes"
cp "$build_dir/tests/fakes/libcuda.so.1" "$build_dir/tests/e2e/programs/libe2e_native_thread_plugin.so" \
  "$build_dir/tests/e2e/programs/libe2e_slow_write.so" "$bundle/fakes/"
cp "$build_dir/preload/libcumemtrace.so" "$build_dir/preload/libunwind.so.8" "$bundle/preload/"
# Found through the preload's RUNPATH $ORIGIN when it dlopens them (libelf first, so libdw's need is met by it).
for lib in libdw.so.1 libelf.so.1; do
  cp -L "$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ {print $NF; exit}')" "$bundle/preload/$lib"
done
cp "$build_dir/analyzer/cumem-analyze" "$build_dir/tests/unit/analyzer/analyzer_benchmark" "$bundle/analyzer/"
# Debug information only (the symbol tables stay, for perf and backtraces there): with it the bundle is over 100 MB,
# more than the device tool carries (64 MiB).
strip --strip-debug "$bundle/analyzer/cumem-analyze" "$bundle/analyzer/analyzer_benchmark" \
  "$bundle/preload/libcumemtrace.so"
lib_dir=$bundle/analyzer/lib
# Everything the analyzer links except the C library itself, which must be the machine's own.
ldd "$build_dir/analyzer/cumem-analyze" | awk '/=> \// {print $3}' |
  grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*)\.so' | while read -r lib; do
  cp -L "$lib" "$lib_dir/"
done
# Smoke test of what will travel: a stale object once made the bundled analyzer crash on the GPU machine while the
# development build read the same traces; the bundle is refused unless it reads a shipped GPU trace.
for cmd in summary peak leaks oom pinned; do
  if ! "$bundle/analyzer/cumem-analyze" "$cmd" examples/torch_train_pinned_h200.pb --json >/dev/null; then
    echo "gpu-bundle.sh: the bundled cumem-analyze failed on '$cmd' of examples/torch_train_pinned_h200.pb;" \
      "rebuild $build_dir from clean (ninja -C $build_dir -t clean)" >&2
    exit 1
  fi
done
du -sh "$bundle"
