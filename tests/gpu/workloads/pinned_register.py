#!/usr/bin/env python3
"""PyTorch pinned memory in cudaHostRegister mode: malloc + page pre-faulting on 8 threads + one cudaHostRegister
per block, instead of cudaHostAlloc.

Run by the GPU suite (tests/gpu/conftest.py) with PYTORCH_CUDA_ALLOC_CONF=pinned_use_cuda_host_register:True,
pinned_num_register_threads:8 (the runner sets it, in both spellings), once without and once with the preload.
PyTorch's CachingHostAllocator rounds each request up to a power of two and keeps freed blocks cached (this script
never empties the cache), so every block it registers stays registered to the end.

Which host_memory_stats() counter is the oracle (PyTorch 2.11, at::HostStats): `allocated_bytes` counts the bytes
of the blocks the allocator owns (cached + in use), added when a block is created (the cudaHostRegister here) and
removed when it is given back (cudaHostUnregister, only on empty_cache); `active_bytes` counts the blocks in use by
tensors. So the trace's registered_host peak must equal allocated_bytes.peak, and active_bytes.peak is at most
that (blocks freed and then reused by a later request of the same size class are not registered again). the suite
reports both; the older layout (reserved_bytes = blocks) is handled as tests/gpu/tracekit.py does.

Usage: pinned_register.py TRUTH_JSON. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402

MiB = rc.MiB
# Requests in order: (bytes, kept?). Power-of-two rounding: 1 -> 1 MiB, 3 -> 4, 5 -> 8, 12 -> 16, 3 -> 4 (a new
# block: the first 4 MiB one is still in use), then 3 MiB again after a free (reuses a cached 4 MiB block).
PLAN = [(1 * MiB, True), (3 * MiB, True), (5 * MiB, False), (12 * MiB, True), (3 * MiB, False)]


def round_pow2(n):
    p = 1
    while p < n:
        p <<= 1
    return p


def main():
    path = rc.out_path("pinned_register_truth.json")
    if not torch.cuda.is_available():
        print("pinned_register: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    points = []

    kept, requests = [], []
    for size, keep in PLAN:
        t = torch.empty(size, dtype=torch.uint8, pin_memory=True)
        t.fill_(7)
        d = t.to(device, non_blocking=True)  # a real use: an async copy from the pinned block
        torch.cuda.synchronize(device)
        requests.append({"size": size, "rounded": round_pow2(size), "data_ptr": t.data_ptr(), "kept": keep,
                         "device_sum": int(d[:16].sum().item())})
        if keep:
            kept.append(t)
        del t, d
        points.append(rc.checkpoint("after_%d" % len(requests),
                                    host_stats=rc.safe(lambda: dict(torch.cuda.host_memory_stats()))))
    # A request of a size class that has a cached free block: no new registration.
    again = torch.empty(3 * MiB, dtype=torch.uint8, pin_memory=True)
    requests.append({"size": 3 * MiB, "rounded": 4 * MiB, "data_ptr": again.data_ptr(), "kept": True,
                     "reuse_expected": True})
    kept.append(again)
    torch.cuda.synchronize(device)
    points.append(rc.checkpoint("end", host_stats=rc.safe(lambda: dict(torch.cuda.host_memory_stats()))))

    truth = rc.base_truth("pinned_register", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "requests": requests,
        "checkpoints": points,
        "host_memory_stats": rc.safe(lambda: dict(torch.cuda.host_memory_stats())),
        "memory_stats": rc.safe(lambda: dict(torch.cuda.memory_stats(device))),
        "kept_blocks": len(kept),
    })
    hs = truth["host_memory_stats"]
    if isinstance(hs, dict):
        for key in sorted(hs):
            if key.endswith(".peak") or key.startswith("num_host"):
                print("  host_memory_stats[%r] = %s" % (key, hs[key]))
    rc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
