#!/usr/bin/env python3
"""A long CPU-bound training run that ends in an out-of-memory, for timing `cumem-analyze` on millions of rows with
an OOM to diagnose (docs/performance.md, "Reading a trace"): GPT-2 built from a config (6 layers x 128, batch 2 x 64,
AdamW: every allocation on the step's critical path, about 1000 trace rows per step) for SECONDS, then one request
larger than the card. Prints one JSON line: steps, PyTorch's allocation count, the OOM message's first line.
Exit 3 without CUDA.

Usage: long_run_oom.py SECONDS
"""
import json
import sys
import time

import torch


def main():
    if not torch.cuda.is_available():
        sys.exit(3)
    seconds = float(sys.argv[1])
    from transformers import GPT2Config, GPT2LMHeadModel
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    config = GPT2Config(n_layer=6, n_embd=128, n_head=8, n_positions=64)
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (2, 64), device=device)
    steps = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        steps += 1
    torch.cuda.synchronize()
    message = ""
    try:
        torch.empty(torch.cuda.get_device_properties(0).total_memory, dtype=torch.uint8, device=device)
    except torch.OutOfMemoryError as e:
        message = str(e).splitlines()[0]
    stats = torch.cuda.memory_stats()
    print(json.dumps({"steps": steps, "allocations": stats["allocation.all.allocated"], "oom": message}))


if __name__ == "__main__":
    main()
