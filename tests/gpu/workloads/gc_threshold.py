#!/usr/bin/env python3
"""garbage_collection_threshold under a per-process memory fraction, for checking the allocator replay's restatement
of PyTorch's cache garbage collection (tests/gpu/gc_threshold_check.sh runs it without and with the setting and
compares `whatif --set garbage_collection_threshold:G` on the first trace with the second run).

A few long-lived tensors, then requests of growing sizes, each held for a few steps: no cached block fits the next
size, so without garbage collection the cache grows up to the cap (where PyTorch frees it all and retries), and with
it the oldest cached segments go once reserved passes the threshold's share of the cap.

Usage: gc_threshold.py FRACTION [--conf] — the fraction is set with torch.cuda.set_per_process_memory_fraction
(or, with --conf, expected in PYTORCH_CUDA_ALLOC_CONF's per_process_memory_fraction). Prints one JSON line:
PyTorch's reserved and allocated peaks, num_alloc_retries, the card's totalGlobalMem and cudaMemGetInfo total.
Exit 3 without CUDA.
"""
import json
import sys

import torch

MiB = 1 << 20


def main():
    if not torch.cuda.is_available():
        sys.exit(3)
    fraction = float(sys.argv[1])
    device = torch.device("cuda", 0)
    if "--conf" not in sys.argv:
        torch.cuda.set_per_process_memory_fraction(fraction, device)
    keep = [torch.empty(256 * MiB, dtype=torch.uint8, device=device) for _ in range(4)]
    window = []
    for i in range(120):
        window.append(torch.empty((96 + 13 * i) * MiB, dtype=torch.uint8, device=device))
        if len(window) > 3:
            window.pop(0)
    del window
    torch.cuda.synchronize(device)
    stats = torch.cuda.memory_stats(device)
    print(json.dumps({"fraction": fraction, "conf": "--conf" in sys.argv,
                      "reserved_peak": torch.cuda.max_memory_reserved(device),
                      "allocated_peak": torch.cuda.max_memory_allocated(device),
                      "num_alloc_retries": stats["num_alloc_retries"], "num_ooms": stats["num_ooms"],
                      "total_global_mem": torch.cuda.get_device_properties(device).total_memory,
                      "mem_get_info_total": torch.cuda.mem_get_info(device)[1], "kept": len(keep)}))


if __name__ == "__main__":
    main()
