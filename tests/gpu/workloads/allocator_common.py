"""What the PyTorch caching-allocator workloads share: checkpoints that tie PyTorch's own figures to one place in
the trace's event order.

A checkpoint reads torch.cuda.memory_stats() and the active blocks of torch.cuda.memory._snapshot() (host-side
bookkeeping: neither allocates device memory), then makes one driver allocation of a size nothing else asks for
(MARKER_BASE + index bytes, through ctypes on libcuda.so.1, freed at once). In the trace, the TORCH_* events before
that marker's sequence number are exactly those PyTorch had counted when its figures were read. The oracle is
PyTorch's own numbers; the marker only says where in the trace they apply.
"""
import ctypes
import json
import os

MARKER_BASE = 777  # driver allocations of 777..(777 + checkpoints) bytes: PyTorch never asks the driver for those

_libcuda = None


def _driver():
    global _libcuda
    if _libcuda is None:
        _libcuda = ctypes.CDLL("libcuda.so.1")
        _libcuda.cuMemAlloc_v2.argtypes = [ctypes.POINTER(ctypes.c_uint64), ctypes.c_size_t]
        _libcuda.cuMemFree_v2.argtypes = [ctypes.c_uint64]
    return _libcuda


def marker(index):
    """One driver allocation of MARKER_BASE + index bytes, freed at once (needs a current context)."""
    ptr = ctypes.c_uint64(0)
    rc = _driver().cuMemAlloc_v2(ctypes.byref(ptr), MARKER_BASE + index)
    if rc != 0:
        raise RuntimeError(f"cuMemAlloc for checkpoint marker {index} failed: {rc}")
    _driver().cuMemFree_v2(ptr.value)


STAT_KEYS = ("requested_bytes.all.current", "requested_bytes.all.peak", "allocation.all.current",
             "allocated_bytes.all.current", "allocated_bytes.all.peak", "reserved_bytes.all.current",
             "reserved_bytes.all.peak", "active_bytes.all.current", "segment.all.current", "num_ooms",
             "inactive_split_bytes.all.current")


def checkpoint(torch, device, name, checkpoints):
    """Reads PyTorch's figures and the active blocks, then places the marker. Appends to `checkpoints`."""
    stats = torch.cuda.memory_stats(device)
    active = []
    for segment in torch.cuda.memory._snapshot()["segments"]:
        if segment.get("device", 0) != device.index:
            continue
        for block in segment["blocks"]:
            if block["state"] == "active_allocated":
                active.append([block["address"], block["requested_size"]])
    index = len(checkpoints)
    marker(index)
    checkpoints.append({"name": name, "marker_size": MARKER_BASE + index,
                        "stats": {k: stats.get(k, 0) for k in STAT_KEYS}, "active_blocks": sorted(active)})


def write_truth(path, truth):
    truth["env"] = {k: os.environ.get(k) for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF",
                                                   "CUMEMTRACE_PYTHON", "CUMEMTRACE_STACK_DEPTH")}
    with open(path, "w") as f:
        json.dump(truth, f, indent=1)
