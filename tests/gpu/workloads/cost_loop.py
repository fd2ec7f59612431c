#!/usr/bin/env python3
"""What one event costs when its stack carries Python frames: N allocations in a Python loop, timed.

Run by the GPU suite (tests/gpu/conftest.py) with PYTORCH_NO_CUDA_MEMORY_CACHING=1 (so each torch.empty is one cudaMalloc and its
release one cudaFree: two events an iteration) three times: untraced, traced with CUMEMTRACE_PYTHON=0, traced with
the defaults (Python frames on). The allocation is made a few Python calls deep, as in a real program. the suite
prints microseconds per event for each run and the difference to the untraced run (INFO rows: there is no oracle
for a cost, only the untraced run as the baseline).

Usage: cost_loop.py TRUTH_JSON [N]. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402

WARMUP = 200
SIZE = 1 << 18      # 256 KiB: a plain cudaMalloc, far from any size class limit
DEPTH = 6           # Python frames between the loop and torch.empty


def nested(depth, device):
    if depth == 0:
        t = torch.empty(SIZE, dtype=torch.uint8, device=device)
        del t
        return 1
    return nested(depth - 1, device)


def loop(n, device):
    done = 0
    for _ in range(n):
        done += nested(DEPTH, device)
    torch.cuda.synchronize(device)
    return done


def main():
    path = rc.out_path("cost_loop_truth.json")
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 10000
    if not torch.cuda.is_available():
        print("cost_loop: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    loop(WARMUP, device)
    t0 = time.perf_counter_ns()
    done = loop(n, device)
    elapsed = time.perf_counter_ns() - t0

    truth = rc.base_truth("cost_loop", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "n": done,
        "warmup": WARMUP,
        "size": SIZE,
        "depth": DEPTH,
        "events_per_iteration": 2,
        "elapsed_ns": elapsed,
        "ns_per_iteration": elapsed / float(done),
        "ns_per_event": elapsed / float(2 * done),
        "memory_stats": rc.safe(lambda: dict(torch.cuda.memory_stats(device))),
    })
    print("cost_loop: %d iterations in %.3f s: %.2f us per event (CUMEMTRACE_PYTHON=%s, preload %s)" % (
        done, elapsed / 1e9, elapsed / 2e3 / done, truth["env"].get("CUMEMTRACE_PYTHON"), truth["traced"]))
    rc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
