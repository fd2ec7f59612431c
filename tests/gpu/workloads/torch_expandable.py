#!/usr/bin/env python3
"""PyTorch's caching allocator with expandable segments: physical memory through the driver's VMM API.

Run by the GPU suite (tests/gpu/conftest.py) with PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (the runner sets it, not this
script). With it the allocator reserves address space (cuMemAddressReserve), creates one physical handle per page of
a segment (cuMemCreate: 20 MiB pages for the large pool, 2 MiB for the small one), maps it (cuMemMap) and, on
empty_cache(), unmaps and releases free pages (cuMemUnmap, cuMemRelease). It gets those driver functions through
cudaGetDriverEntryPoint*, so a cudaMalloc interposer sees nothing (docs/design.md). the suite compares the peak of
live cuMemCreate bytes whose stack passes through libc10_cuda.so with memory_stats()["reserved_bytes.all.peak"],
and the same live bytes at each checkpoint with memory_reserved() then.

Fixed work: 64 + 96 + 32 + 128 MiB, free 96 + 32, empty_cache(), then 48 MiB and a small (4000 B) tensor; no
matmul, so no cuBLAS workspace. Usage: torch_expandable.py TRUTH_JSON. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()  # before the import: the trace starts later, at the first CUDA memory call
T0_UNIX_NS = time.time_ns()

import coverage_common as cc  # noqa: E402
import torch  # noqa: E402

MiB = cc.MiB


def snapshot_segments():
    """The allocator's own view of its segments (is_expandable says the setting took effect)."""
    segments = []
    for s in torch.cuda.memory_snapshot():
        segments.append({k: s.get(k) for k in ("device", "address", "total_size", "allocated_size", "active_size",
                                                 "segment_type", "is_expandable", "stream")})
    return segments


def main():
    path = cc.out_path("torch_expandable_truth.json")
    if not torch.cuda.is_available():
        print("torch_expandable: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    checkpoints = []

    def mark(label):
        torch.cuda.synchronize(device)
        checkpoints.append(cc.checkpoint(label, memory_reserved=torch.cuda.memory_reserved(device),
                                         memory_allocated=torch.cuda.memory_allocated(device)))

    def block(mib):
        t = torch.empty(mib * MiB, dtype=torch.uint8, device=device)
        t.fill_(7)
        return t

    a = block(64)
    mark("after_64")
    b = block(96)
    c = block(32)
    d = block(128)
    mark("grown_320")
    del b, c
    mark("freed_96_32")
    torch.cuda.empty_cache()  # unmaps and releases the pages no block uses any more
    mark("after_empty_cache")
    e = block(48)
    small = torch.full((1000,), 1.5, dtype=torch.float32, device=device)  # small pool: its own segment
    mark("regrown")
    segments = cc.safe(snapshot_segments)
    stats = dict(torch.cuda.memory_stats(device))
    mark("end")

    truth = cc.base_truth("torch_expandable", T0_MONO_NS, T0_UNIX_NS)
    truth.update({
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "device_name": torch.cuda.get_device_name(device),
        "device_total_memory": torch.cuda.get_device_properties(device).total_memory,
        "allocator_backend": cc.safe(torch.cuda.get_allocator_backend),
        "memory_stats": stats,
        "checkpoints": checkpoints,
        "segments": segments,
        "live_tensor_bytes": sum(t.numel() * t.element_size() for t in (a, d, e, small)),
    })
    for key in ("reserved_bytes.all.peak", "reserved_bytes.all.current", "allocated_bytes.all.peak",
                "segment.all.allocated", "num_alloc_retries", "num_ooms"):
        print("  memory_stats[%r] = %s" % (key, stats.get(key)))
    print("  segments: %s" % (segments if isinstance(segments, dict) else
                              [(s["segment_type"], s["total_size"], s["is_expandable"]) for s in segments]))
    cc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
