#!/usr/bin/env python3
"""The preload's clock against the workload's own: PyTorch block allocations, each between two time.monotonic_ns()
reads (CLOCK_MONOTONIC, the trace's clock), over about three seconds, so that the preload calibrates its scale of
the CPU's counter several times (preload/clock.h). Each allocation has a size of its own (multiples of 512 bytes,
which the caching allocator keeps as they are), so the suite finds its torch.alloc event by size.

Usage: clock_brackets.py TRUTH_JSON [SECONDS]. Writes {"pid", "brackets": [[before_ns, after_ns, bytes], ...]}.
"""
import json
import os
import sys
import time

import torch

ROUND = 50


def main():
    truth_path = sys.argv[1]
    seconds = float(sys.argv[2]) if len(sys.argv) > 2 else 3.0
    device = torch.device("cuda", 0)
    torch.empty(1, device=device)  # the context and the allocator's first segment, outside the brackets
    brackets = []
    end = time.monotonic_ns() + int(seconds * 1e9)
    k = 0
    while time.monotonic_ns() < end:
        kept = []
        for _ in range(ROUND):
            k += 1
            size = 512 * k
            before = time.monotonic_ns()
            t = torch.empty(size, dtype=torch.uint8, device=device)
            after = time.monotonic_ns()
            brackets.append([before, after, size])
            kept.append(t)
        del kept
        time.sleep(0.05)
    torch.cuda.synchronize()
    with open(truth_path, "w") as f:
        json.dump({"pid": os.getpid(), "brackets": brackets}, f)


if __name__ == "__main__":
    main()
