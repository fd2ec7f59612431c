#!/usr/bin/env python3
"""CUDA graphs with a private memory pool, then torch.compile (mode default), with PyTorch's own numbers per phase.

Run by the GPU suite (tests/gpu/conftest.py) untraced and under the preload (TORCHINDUCTOR_COMPILE_THREADS=1 and a fresh
TORCHINDUCTOR_CACHE_DIR per run, set by the runner: the compilation happens in this process, cold, under the
preload). Phases:
  1. graphs: warm-up on a side stream, two graphs captured into one private pool (torch.cuda.graph_pool_handle()),
     each replayed 20 times with new input; the replay's output is compared with eager execution (a correctness
     check of the program under the preload, not of cumemtrace).
  2. compile: torch.compile(model) trained for 5 steps (forward, backward, SGD).
Nothing calls empty_cache() and the graphs stay alive: every segment the caching allocator reserves stays live to
the end, so every c10 allocation's stack appears in the analyzer's leak report (the suite resolves stack ids through
the reports). Per phase the truth records its start and end on the trace's clock and reserved_bytes.all.peak of
that phase (peak statistics are reset at the start of phase 2, so its peak counts from the level then), and
memory_reserved() at each boundary. the suite compares them with the replay of the trace's allocations whose stacks
pass through libc10_cuda.so over the same windows.

Usage: graphs_compile.py TRUTH_JSON. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402


def mlp():
    return nn.Sequential(nn.Linear(1024, 4096), nn.ReLU(), nn.Linear(4096, 1024))


def stats(device):
    ms = torch.cuda.memory_stats(device)
    return {k: ms.get(k) for k in ("reserved_bytes.all.peak", "reserved_bytes.all.current",
                                   "allocated_bytes.all.peak", "segment.all.allocated", "num_ooms")}


def graphs_phase(device):
    start = rc.checkpoint("graphs_start", memory_reserved=torch.cuda.memory_reserved(device))
    model = mlp().to(device).eval()
    static_x = torch.randn(512, 1024, device=device)
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.no_grad(), torch.cuda.stream(side):
        for _ in range(3):
            model(static_x)
    torch.cuda.current_stream(device).wait_stream(side)

    pool = torch.cuda.graph_pool_handle()
    g1, g2 = torch.cuda.CUDAGraph(), torch.cuda.CUDAGraph()
    with torch.no_grad():
        with torch.cuda.graph(g1, pool=pool):
            y1 = model(static_x)
        with torch.cuda.graph(g2, pool=pool):
            y2 = model(y1).relu() * 2.0
    max_diff = 0.0
    with torch.no_grad():
        for i in range(20):
            static_x.copy_(torch.randn(512, 1024, device=device))
            g1.replay()
            g2.replay()
            if i % 5 == 0:
                eager = model(model(static_x)).relu() * 2.0
                max_diff = max(max_diff, float((eager - y2).abs().max().item()))
    torch.cuda.synchronize(device)
    end = rc.checkpoint("graphs_end", memory_reserved=torch.cuda.memory_reserved(device), stats=stats(device))
    # Kept alive to the end of the process (see the module comment).
    return {"start": start, "end": end, "graph_vs_eager_max_abs_diff": max_diff}, (model, g1, g2, y1, y2, static_x)


def compile_phase(device):
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    start = rc.checkpoint("compile_start", memory_reserved=torch.cuda.memory_reserved(device), stats=stats(device))
    torch.manual_seed(1)
    model = mlp().to(device)
    compiled = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=device)
    losses = []
    t0 = time.monotonic()
    for _ in range(5):
        optimizer.zero_grad(set_to_none=True)
        loss = compiled(x).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
    torch.cuda.synchronize(device)
    end = rc.checkpoint("compile_end", memory_reserved=torch.cuda.memory_reserved(device), stats=stats(device))
    return {"start": start, "end": end, "losses": losses, "seconds": time.monotonic() - t0}, (model, compiled, x)


def main():
    path = rc.out_path("graphs_compile_truth.json")
    if not torch.cuda.is_available():
        print("graphs_compile: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    graphs, keep_graphs = graphs_phase(device)
    compiled, keep_compiled = compile_phase(device)

    truth = rc.base_truth("graphs_compile", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "phases": {"graphs": graphs, "compile": compiled},
        "memory_stats": rc.safe(lambda: dict(torch.cuda.memory_stats(device))),
        "triton_version": rc.safe(lambda: __import__("triton").__version__),
    })
    print("graphs_compile: graphs phase peak reserved %s (replay vs eager max |diff| %.3g); compile phase peak "
          "reserved %s, %.1f s, losses %s" % (
              graphs["end"]["stats"]["reserved_bytes.all.peak"], graphs["graph_vs_eager_max_abs_diff"],
              compiled["end"]["stats"]["reserved_bytes.all.peak"], compiled["seconds"], compiled["losses"]))
    rc.write_truth(path, truth)
    del keep_graphs, keep_compiled
    return 0


if __name__ == "__main__":
    sys.exit(main())
