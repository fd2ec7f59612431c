"""Allocation churn from Python through ctypes (the GIL is released in each call, as in PyTorch), at a chosen
Python call depth, timed by the workload itself after a warm-up. Prints one JSON line:
{"pairs": N, "depth": D, "ns_per_event": X}.

Usage: python3 python_workload.py PAIRS PYTHON_DEPTH [WARMUP_PAIRS]
Needs the fake or real libcuda.so.1 on the library path (cuInit, cuMemAlloc_v2, cuMemFree_v2).
"""
import ctypes
import json
import sys
import time

cuda = ctypes.CDLL("libcuda.so.1")
assert cuda.cuInit(0) == 0
alloc = cuda.cuMemAlloc_v2
free = cuda.cuMemFree_v2
pointer = ctypes.c_uint64()
ref = ctypes.byref(pointer)
size = ctypes.c_size_t(4096)


def churn(pairs):
    for _ in range(pairs):
        alloc(ref, size)
        free(pointer)


def nest(depth, pairs):
    if depth <= 1:
        churn(pairs)
    else:
        nest(depth - 1, pairs)


def main():
    pairs, depth = int(sys.argv[1]), int(sys.argv[2])
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else pairs // 10
    nest(depth, warmup)
    start = time.perf_counter_ns()
    nest(depth, pairs)
    elapsed = time.perf_counter_ns() - start
    print(json.dumps({"pairs": pairs, "depth": depth, "ns_per_event": elapsed / (2 * pairs)}))


main()
