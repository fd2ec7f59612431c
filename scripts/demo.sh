#!/usr/bin/env bash
# The main job in one command, set-up included. With a GPU: build, trace an example program and print the report.
# Without one: build the analyzer and report on a real trace captured on a GPU (examples/).
# Usage: scripts/demo.sh [build-dir]
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir=${1:-build}
scripts/setup.sh "$build_dir"
analyze=$build_dir/analyzer/cumem-analyze
preload=$build_dir/preload/libcumemtrace.so

if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && grep -q "BUILD_PRELOAD:BOOL=ON" "$build_dir/CMakeCache.txt"; then
  cmake --build "$build_dir" --target cumemtrace cumem-analyze
  work=$(mktemp -d)
  trace=$work/demo.pb
  if python3 -c "import torch; assert torch.cuda.is_available()" >/dev/null 2>&1; then
    echo "demo: tracing a PyTorch training run with a pinned-memory DataLoader"
    scripts/cumemtrace -o "$trace" -- python3 tests/gpu/workloads/torch_train_pinned.py "$work/truth.json" >/dev/null
  else
    echo "demo: tracing a CUDA C++ program with planted leaks and a failing cudaMalloc"
    nvcc -o "$work/leaky" tests/gpu/workloads/leaky.cu
    scripts/cumemtrace -o "$trace" -- "$work/leaky" >/dev/null
  fi
else
  cmake --build "$build_dir" --target cumem-analyze
  trace=examples/graph_no_grad_h100.pb
  echo "demo: no GPU here; reporting on $trace, captured on an NVIDIA H100 (examples/README.md):"
  echo "      a PyTorch evaluation loop without torch.no_grad() that keeps every batch's graph until PyTorch runs"
  echo "      out of memory; rerun on the GPU with the change the report names, it ran through"
fi
echo
"$analyze" "$trace"
