#!/usr/bin/env python3
"""Training-step time of GPT-2 (6 layers x 512, batch 16 x 256, AdamW; built from a config) in one of three modes,
for docs/performance.md: run it untraced, under cumemtrace (LD_PRELOAD, block events with Python frames), and with
`--history` (PyTorch's own torch.cuda.memory._record_memory_history(stacks="python")), in one device call
(tests/gpu/test_torch_blocks.py).

Writes its truth JSON (and prints it): mode, median and mean ms per step over the timed steps, allocations per step
(memory_stats: each is an ALLOC, a FREE_REQUESTED and a FREE_COMPLETED entry), and with --history how many entries
PyTorch's history held and the size of its pickled snapshot.
Usage: gpt2_overhead.py TRUTH_JSON [--history] [--steps N] [--layers L --embd E --batch B --seq S] [--serve]
With --serve the timed steps are run on request, so that a driver can interleave several processes (one per mode)
finely over the same minutes: after the warm-up it prints "ready", then for each line "run N" on stdin runs N steps
and prints {"times_ms": [...], "cpu_ms": [...]} (each step's wall time, and the CPU time of all the process's threads
in it); at "end" it writes the truth JSON (median over every step it ran) and exits.
(bench/torch_overhead.py also runs it with a small embedding and batch, where the step is bound by the CPU and every
microsecond spent per allocation shows in the step time.)
"""
import json
import os
import pickle
import statistics
import sys
import time

import torch


def main():
    history = "--history" in sys.argv
    def option(name, default):
        return int(sys.argv[sys.argv.index(name) + 1]) if name in sys.argv else default
    steps = option("--steps", 120)
    layers, embd, batch, seq = option("--layers", 6), option("--embd", 512), option("--batch", 16), option("--seq", 256)
    from transformers import GPT2Config, GPT2LMHeadModel
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    config = GPT2Config(n_layer=layers, n_embd=embd, n_head=8, n_positions=seq)
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device=device)
    if history:
        torch.cuda.memory._record_memory_history(enabled="all", context="all", stacks="python")

    def step():
        out = model(ids, labels=ids)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    allocs_before = torch.cuda.memory_stats(device)["allocation.all.allocated"]
    times, cpu_times = [], []

    def timed(n):
        for _ in range(n):
            t0, c0 = time.perf_counter(), time.process_time()
            step()
            torch.cuda.synchronize()
            times.append((time.perf_counter() - t0) * 1e3)
            cpu_times.append((time.process_time() - c0) * 1e3)
        return times[-n:]

    if "--serve" in sys.argv:
        print("ready", flush=True)
        for line in sys.stdin:
            words = line.split()
            if words[:1] == ["run"]:
                n = int(words[1])
                print(json.dumps({"times_ms": timed(n), "cpu_ms": cpu_times[-n:]}), flush=True)
            elif words[:1] == ["end"]:
                break
        steps = len(times)
    else:
        timed(steps)
    allocs = torch.cuda.memory_stats(device)["allocation.all.allocated"] - allocs_before
    result = {"mode": "history" if history else "plain", "steps": steps,
              "config": {"layers": layers, "embd": embd, "batch": batch, "seq": seq},
              "median_ms": statistics.median(times), "mean_ms": statistics.fmean(times),
              "allocations_per_step": allocs / max(steps, 1)}
    if history:
        snapshot = torch.cuda.memory._snapshot()
        entries = sum(len(t) for t in snapshot.get("device_traces", []))
        result["history_entries"] = entries
        result["history_pickle_bytes"] = len(pickle.dumps(snapshot))
        torch.cuda.memory._record_memory_history(enabled=None)
    result["pid"] = os.getpid()
    with open(sys.argv[1], "w") as f:
        json.dump(result, f)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
