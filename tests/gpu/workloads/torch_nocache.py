#!/usr/bin/env python3
"""PyTorch with PYTORCH_NO_CUDA_MEMORY_CACHING=1: one cudaMalloc of the exact size per tensor, one cudaFree each.

Run by the GPU suite (tests/gpu/conftest.py) with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (the runner sets it). The script allocates
K = 8 tensors of known odd and even sizes, frees 4 of them, and keeps M = 4 alive to the end of the process: their
Python references are leaked on purpose (Py_IncRef), so that the interpreter's finalization does not free them and
they are still live when the trace ends. the suite compares the allocations live at the end of the trace whose stack
passes through libc10_cuda.so with this list: count, sizes and data_ptr() addresses; and the number of such
cudaMalloc calls with K.

Usage: torch_nocache.py TRUTH_JSON. Exit 3 without CUDA.
"""
import ctypes
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import coverage_common as cc  # noqa: E402
import torch  # noqa: E402

MiB = cc.MiB
# (bytes, kept to the end?)
PLAN = [
    (1 * MiB, True),
    (3 * MiB + 4096, False),
    (5000, True),
    (7 * MiB, False),
    (123457, True),
    (2 * MiB, False),
    (65536 + 512, False),
    (10 * MiB + 1, True),
]


def main():
    path = cc.out_path("torch_nocache_truth.json")
    if not torch.cuda.is_available():
        print("torch_nocache: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)

    tensors = []
    for size, _ in PLAN:
        t = torch.empty(size, dtype=torch.uint8, device=device)
        t.fill_(9)
        tensors.append(t)
    torch.cuda.synchronize(device)
    records = [{"size": t.numel() * t.element_size(), "data_ptr": t.data_ptr(), "kept": kept}
               for t, (_, kept) in zip(tensors, PLAN)]
    kept = [t for t, (_, keep) in zip(tensors, PLAN) if keep]
    del tensors, t
    torch.cuda.synchronize(device)  # the freed ones are freed: the caching is off, so cudaFree ran at once
    for t in kept:
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(t))  # never freed, not even at interpreter shutdown
    point = cc.checkpoint("kept_only", memory_allocated=torch.cuda.memory_allocated(device))

    truth = cc.base_truth("torch_nocache", T0_MONO_NS, T0_UNIX_NS)
    truth.update({
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(device),
        "device_total_memory": torch.cuda.get_device_properties(device).total_memory,
        "allocator_backend": cc.safe(torch.cuda.get_allocator_backend),
        "n_allocated": len(PLAN),
        "allocations": records,
        "live": [{"size": r["size"], "data_ptr": r["data_ptr"]} for r in records if r["kept"]],
        "freed": [{"size": r["size"], "data_ptr": r["data_ptr"]} for r in records if not r["kept"]],
        "checkpoints": [point],
        "memory_stats": cc.safe(lambda: dict(torch.cuda.memory_stats(device))),
    })
    print("  %d tensors, %d kept: %s" % (len(PLAN), len(truth["live"]),
                                         ["%d @ %#x" % (r["size"], r["data_ptr"]) for r in truth["live"]]))
    cc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
