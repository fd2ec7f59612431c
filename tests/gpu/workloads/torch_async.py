#!/usr/bin/env python3
"""PyTorch with backend:cudaMallocAsync: one stream-ordered pool allocation per tensor.

Run by the GPU suite (tests/gpu/conftest.py) with PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync (the runner sets it). The
backend calls cudaMallocAsync/cudaFreeAsync for every tensor, on the device's default memory pool, and its
memory_stats() are the pool's own attributes: allocated_bytes.all.peak = cudaMemPoolAttrUsedMemHigh,
reserved_bytes.all.peak = cudaMemPoolAttrReservedMemHigh. the suite compares the peak of live `pool` bytes in the
trace with allocated_bytes.all.peak, with this script's own ledger of live tensor bytes, and the number of pool
allocations with the number of tensors made here.

Every tensor is a multiple of 2 MiB (so the pool's rounding cannot make the driver's figure differ from the
requested bytes), filled by a kernel; no matmul (no cuBLAS workspace). The stream is synchronized after frees, so
the driver's high-water mark and the order of calls agree. Usage: torch_async.py TRUTH_JSON. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import coverage_common as cc  # noqa: E402
import torch  # noqa: E402

MiB = cc.MiB


class Ledger(object):
    """The script's own count of live tensor bytes: an oracle that does not depend on any allocator."""

    def __init__(self, device):
        self.device = device
        self.live = {}
        self.current = 0
        self.peak = 0
        self.count = 0
        self.sizes = []

    def new(self, name, mib):
        t = torch.empty(mib * MiB, dtype=torch.uint8, device=self.device)
        t.fill_(5)
        self.live[name] = t
        self.count += 1
        self.sizes.append(mib * MiB)
        self.current += mib * MiB
        self.peak = max(self.peak, self.current)

    def drop(self, *names):
        for name in names:
            t = self.live.pop(name)
            self.current -= t.numel() * t.element_size()
            del t
        torch.cuda.synchronize(self.device)


def main():
    path = cc.out_path("torch_async_truth.json")
    if not torch.cuda.is_available():
        print("torch_async: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    ledger = Ledger(device)
    checkpoints = []

    def mark(label):
        torch.cuda.synchronize(device)
        checkpoints.append(cc.checkpoint(label, ledger_bytes=ledger.current,
                                         memory_allocated=torch.cuda.memory_allocated(device)))

    ledger.new("a", 32)
    ledger.new("b", 64)
    ledger.new("c", 16)
    mark("112")
    ledger.drop("b")
    ledger.new("d", 128)
    ledger.new("e", 8)
    mark("peak_184")
    ledger.drop("a", "c", "e")
    ledger.new("f", 40)
    mark("end_168")
    stats = dict(torch.cuda.memory_stats(device))

    truth = cc.base_truth("torch_async", T0_MONO_NS, T0_UNIX_NS)
    truth.update({
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(device),
        "device_total_memory": torch.cuda.get_device_properties(device).total_memory,
        "allocator_backend": cc.safe(torch.cuda.get_allocator_backend),
        "memory_stats": stats,
        "n_tensors": ledger.count,
        "tensor_sizes": ledger.sizes,
        "ledger_peak_bytes": ledger.peak,
        "ledger_live_bytes": ledger.current,
        "checkpoints": checkpoints,
    })
    print("  backend %s, %d tensors, ledger peak %d" % (truth["allocator_backend"], ledger.count, ledger.peak))
    for key in sorted(stats):
        if stats[key]:
            print("  memory_stats[%r] = %s" % (key, stats[key]))
    cc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
