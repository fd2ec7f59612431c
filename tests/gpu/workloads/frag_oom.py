#!/usr/bin/env python3
"""A fragmentation OOM: PyTorch's message says a lot is "reserved by PyTorch but unallocated", and none of it is in
one piece big enough.

One 2 GiB tensor makes a 2 GiB segment; freed, the cache keeps it. Twenty 100 MiB tensors are then carved out of
that segment (each split off the cached block), every other one is freed, and a 500 MiB request cannot fit in any
hole while a per-process memory fraction forbids a new segment: the allocator records an OOM entry and raises.
The truth holds memory_stats() right before the failing request and PyTorch's own message; the checker compares the
verdict's reserved-but-unallocated with reserved - allocated (the figure in the message), in bytes.

Usage: frag_oom.py TRUTH_JSON. Exit 3 without CUDA, 4 when no OOM happened.
"""
import re
import sys

import allocator_common as ac
import torch

MiB = 1 << 20


def main():
    truth_path = sys.argv[1]
    if not torch.cuda.is_available():
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    big = torch.empty(2048 * MiB, dtype=torch.uint8, device=device)
    del big
    pieces = [torch.empty(100 * MiB, dtype=torch.uint8, device=device) for _ in range(20)]
    for i in range(0, 20, 2):
        pieces[i] = None
    total = torch.cuda.get_device_properties(device).total_memory
    reserved = torch.cuda.memory_reserved(device)
    torch.cuda.set_per_process_memory_fraction((reserved + 200 * MiB) / total, device)
    checkpoints = []
    ac.checkpoint(torch, device, "before_oom", checkpoints)
    before = torch.cuda.memory_stats(device)
    message = None
    try:
        x = torch.empty(500 * MiB, dtype=torch.uint8, device=device)  # the request that cannot fit
        del x
    except torch.OutOfMemoryError as e:
        message = str(e)
    if message is None:
        return 4
    after = torch.cuda.memory_stats(device)
    m = re.search(r"([\d.]+ [KMG]iB) is reserved by PyTorch but unallocated", message)
    truth = {"workload": "frag_oom", "message": message, "request": 500 * MiB,
             "before": {k: before.get(k, 0) for k in ac.STAT_KEYS},
             "after": {k: after.get(k, 0) for k in ac.STAT_KEYS},
             "reserved_unallocated_text": m.group(1) if m else None,
             "reserved_minus_allocated_at_oom": after["reserved_bytes.all.current"] -
             after["allocated_bytes.all.current"],
             "checkpoints": checkpoints}
    ac.write_truth(truth_path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
