"""Times the driver calls the preload makes outside the hooked call itself, on a real GPU: cuMemGetInfo (the memory
sample taken every CUMEMTRACE_SAMPLE_MS on an allocating thread, and after a failed allocation) and cuCtxGetDevice
(the current device of an allocation that does not name one). Prints one JSON line of ns per call: the median and
the quartiles of REPEATS batches of CALLS calls each, through ctypes, with cuDriverGetVersion (which asks the device
nothing) as the cost of the call itself.

Usage: python3 bench/driver_call_cost.py [CALLS=200] [REPEATS=25]   (needs torch with CUDA, or any process that
has made a context current: here torch makes it)
"""
import ctypes
import json
import statistics
import sys
import time

import torch

calls = int(sys.argv[1]) if len(sys.argv) > 1 else 200
repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 25
torch.cuda.init()
torch.zeros(1, device="cuda")  # a context, current on this thread
cuda = ctypes.CDLL("libcuda.so.1")
free_b, total_b = ctypes.c_size_t(), ctypes.c_size_t()
device = ctypes.c_int()


def per_call(fn):
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter_ns()
        for _ in range(calls):
            fn()
        samples.append((time.perf_counter_ns() - t0) / calls)
    q = statistics.quantiles(samples, n=4)
    return {"median": round(statistics.median(samples)), "q1": round(q[0]), "q3": round(q[2])}


def mem_get_info():
    assert cuda.cuMemGetInfo_v2(ctypes.byref(free_b), ctypes.byref(total_b)) == 0


def ctx_get_device():
    assert cuda.cuCtxGetDevice(ctypes.byref(device)) == 0


version = ctypes.c_int()


def driver_version():  # a call that asks the driver nothing of the device: ctypes' and the entry's cost, to subtract
    assert cuda.cuDriverGetVersion(ctypes.byref(version)) == 0


result = {"cuMemGetInfo_ns": per_call(mem_get_info), "cuCtxGetDevice_ns": per_call(ctx_get_device),
          "cuDriverGetVersion_ns": per_call(driver_version), "device": torch.cuda.get_device_name(0)}
print(json.dumps(result))
