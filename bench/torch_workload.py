"""PyTorch-like tensor churn against the fake libc10_cuda.so (tests/fakes): each iteration allocates a block
through the caching allocator and frees it, from Python through ctypes (the GIL released in each call, as in
PyTorch), at a chosen Python call depth and with a chosen number of native frames between the binding and the
allocator (PyTorch's dispatcher puts 30 to 40 there). Under cumemtrace every block gives a torch.alloc row (with its
native and Python stack) and a torch.free row, as PyTorch's tracker entries do. Timed by the workload itself after a
warm-up; prints one JSON line: {"pairs": N, "python_depth": D, "native_depth": F, "evict_kb": K, "ns_per_pair": X}.

EVICT_KB > 0 writes that many KiB of memory between pairs, as PyTorch's own work between two allocations does: the
preload's tables then meet the cold caches they meet on the GPU machine (its unwinding cost ~40 ns per frame there,
~10 here without eviction; docs/performance.md, "Where the preload's time goes"). ns_per_pair then includes the
writing.

Usage: python3 torch_workload.py PAIRS PYTHON_DEPTH NATIVE_DEPTH [WARMUP_PAIRS] [EVICT_KB]
Needs the fake libcuda.so.1 and the fake torch/libc10_cuda.so on the library path (bench/torch_instructions.sh
sets it up and counts the preload's instructions per pair).
"""
import ctypes
import json
import sys
import time

assert ctypes.CDLL("libcuda.so.1").cuInit(0) == 0
c10 = ctypes.CDLL("libc10_cuda.so")
c10.fake_torch_init(1)
malloc = c10.fake_torch_malloc_nested
malloc.restype = ctypes.c_void_p
malloc.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_int]
free = c10.fake_torch_free_nested
free.argtypes = [ctypes.c_void_p, ctypes.c_int]


def churn(pairs, frames):
    for i in range(pairs):
        p = malloc(4096 + (i & 7) * 512, 0, frames)
        free(p, frames)
        if EVICT:
            ctypes.memset(EVICT, i & 255, len(EVICT))


def nest(depth, pairs, frames):
    if depth <= 1:
        churn(pairs, frames)
    else:
        nest(depth - 1, pairs, frames)


EVICT_KB = int(sys.argv[5]) if len(sys.argv) > 5 else 0
EVICT = ctypes.create_string_buffer(EVICT_KB << 10) if EVICT_KB > 0 else None


def main():
    pairs, depth, frames = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else pairs // 10
    nest(depth, warmup, frames)
    start = time.perf_counter_ns()
    nest(depth, pairs, frames)
    elapsed = time.perf_counter_ns() - start
    print(json.dumps({"pairs": pairs, "python_depth": depth, "native_depth": frames, "evict_kb": EVICT_KB,
                      "ns_per_pair": elapsed / pairs}))


main()
