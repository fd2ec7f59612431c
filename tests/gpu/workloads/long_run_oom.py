#!/usr/bin/env python3
"""A long CPU-bound training run that ends in an out-of-memory, for timing `cumem-analyze` on millions of rows with
an OOM to diagnose (docs/performance.md, "Reading a trace"): GPT-2 built from a config (6 layers x 128, batch 2 x 64,
AdamW: every allocation on the step's critical path, about 1000 trace rows per step) for SECONDS, then one request
larger than the card. Prints one JSON line: steps, PyTorch's allocation count, the OOM message's first line.
Exit 3 without CUDA.

With MAX_STEPS the loop also stops after that many steps (two runs then make the same allocations, whatever their
speed: a run traced two ways is compared report by report); with LEAK_EVERY it keeps a 16 KiB tensor every that many
steps (a slow leak, for the leak report's growth).

Usage: long_run_oom.py SECONDS [MAX_STEPS [LEAK_EVERY]]
"""
import json
import sys
import time

import torch


def main():
    if not torch.cuda.is_available():
        sys.exit(3)
    seconds = float(sys.argv[1])
    max_steps = int(sys.argv[2]) if len(sys.argv) > 2 else None
    leak_every = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    kept = []
    from transformers import GPT2Config, GPT2LMHeadModel
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    config = GPT2Config(n_layer=6, n_embd=128, n_head=8, n_positions=64)
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (2, 64), device=device)
    steps = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end and (max_steps is None or steps < max_steps):
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        steps += 1
        if leak_every and steps % leak_every == 0:
            kept.append(loss.detach().expand(4096).clone())  # leak-kept
    torch.cuda.synchronize()
    message = ""
    try:
        torch.empty(torch.cuda.get_device_properties(0).total_memory, dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError as e:
        message = str(e).splitlines()[0]
    stats = torch.cuda.memory_stats()
    keys = ["allocated_bytes.all.peak", "requested_bytes.all.peak", "reserved_bytes.all.peak",
            "allocated_bytes.all.current", "reserved_bytes.all.current"]
    print(json.dumps({"steps": steps, "allocations": stats["allocation.all.allocated"], "kept": len(kept),
                      "kept_bytes": sum(t.numel() * t.element_size() for t in kept), "leak_line": leak_line(),
                      "memory_stats": {k: stats[k] for k in keys}, "oom": message}))


def leak_line():
    """The line that keeps a tensor every LEAK_EVERY steps (marked `leak-kept`)."""
    with open(__file__) as f:
        return next(i for i, line in enumerate(f, 1) if "# leak-kept" in line and "kept.append" in line)


if __name__ == "__main__":
    main()
