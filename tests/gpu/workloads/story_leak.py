#!/usr/bin/env python3
"""User story 2, slow leak: a loop keeps every step's loss tensor, and with it the step's autograd graph and the
activations the graph saved.

Run by the GPU suite (tests/gpu/conftest.py) under the preload (default caching allocator, which never gives segments back unless
emptied: every segment it reserves is still live when the trace ends). The input batch is made once, before the
loop, so that the only per-step allocations come from the forward line: the hidden activation (512 x 8192 float32
= 16 MiB a step) saved for backward, and the loss. the suite expects `cumem-analyze leaks --json`'s top group to have
the `leak-forward` (or `leak-append`) line as its user frame, and that group's bytes to rise over the steps, as
memory_allocated() (recorded after every step, on the trace's clock) does.

With --no-leak the loop keeps each loss as a Python float instead (loss.item()): the same program without the
leak, for `cumem-analyze diff` (it must name the leaking line first).

Usage: story_leak.py TRUTH_JSON [--no-leak]. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

STEPS = 24
BATCH = 512
IN_FEATURES = 256
HIDDEN = 8192


def main():
    path = rc.out_path("story_leak_truth.json")
    if not torch.cuda.is_available():
        print("story_leak: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(IN_FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, 1)).to(device)
    x = torch.randn(BATCH, IN_FEATURES, device=device)
    torch.cuda.synchronize(device)
    steps = [rc.checkpoint("before_loop", step=-1, memory_allocated=torch.cuda.memory_allocated(device),
                           memory_reserved=torch.cuda.memory_reserved(device))]

    no_leak = "--no-leak" in sys.argv[2:]
    losses = []
    for step in range(STEPS):
        loss = model(x * (1.0 + step)).mean()  # ROW-MARK: leak-forward
        losses.append(loss.item() if no_leak else loss)  # ROW-MARK: leak-append
        torch.cuda.synchronize(device)
        steps.append(rc.checkpoint("step_%d" % step, step=step,
                                   memory_allocated=torch.cuda.memory_allocated(device),
                                   memory_reserved=torch.cuda.memory_reserved(device)))

    marks = rc.marker_lines(__file__)
    truth = rc.base_truth("story_leak", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "script": rc.script_identity(__file__),
        "forward_line": marks.get("leak-forward"),
        "append_line": marks.get("leak-append"),
        "steps": steps,
        "losses_kept": len(losses),
        "no_leak": no_leak,
        "per_step_saved_bytes": BATCH * HIDDEN * 4,
        "memory_stats": rc.safe(lambda: dict(torch.cuda.memory_stats(device))),
    })
    print("story_leak: %d losses kept; memory_allocated %d -> %d" % (
        len(losses), steps[0]["memory_allocated"], steps[-1]["memory_allocated"]))
    rc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
