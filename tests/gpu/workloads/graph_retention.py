#!/usr/bin/env python3
"""The two commonest ways a PyTorch program keeps autograd's graph alive, each with its fix, for checking that
cumem-analyze names the cause and the change (tests/gpu/graph_retention_check.sh reruns each with the fix).

  eval_outputs  trains a few steps, then evaluates without torch.no_grad(), collecting each batch's probabilities:
                every batch's graph (all its saved activations) stays reachable from the list. Fix: no_grad.
  train_metric  trains, and keeps a running total of a metric tensor (not the loss) that backward never visits:
                each step's metric graph keeps its saved tensors. Fix: accumulate metric.item().

Usage: graph_retention.py eval_outputs|train_metric [--fix] [--batches N] [--batch ROWS]
Prints one JSON line: mode, fix, oom (and PyTorch's message), PyTorch's allocated peak. Exit 3 without CUDA.
"""
import json
import sys

import torch
import torch.nn.functional as F

HIDDEN = 4096
CLASSES = 8192
BATCH = int(sys.argv[sys.argv.index("--batch") + 1]) if "--batch" in sys.argv else 2048


def make_model(device):
    layers = []
    for _ in range(6):
        layers += [torch.nn.Linear(HIDDEN, HIDDEN), torch.nn.GELU()]
    layers.append(torch.nn.Linear(HIDDEN, CLASSES))
    return torch.nn.Sequential(*layers).to(device)


def train_steps(model, optimizer, device, steps, metric_fix=None):
    running = 0.0
    for _ in range(steps):
        x = torch.randn(BATCH, HIDDEN, device=device)
        y = torch.randint(0, CLASSES, (BATCH,), device=device)
        out = model(x)
        loss = F.cross_entropy(out, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        if metric_fix is not None:
            confidence = out.softmax(-1).amax(-1).mean()  # a metric backward never visits
            running += confidence.item() if metric_fix else confidence
    return running


def evaluate(model, device, batches, fix):
    probs = []
    for _ in range(batches):
        x = torch.randn(BATCH, HIDDEN, device=device)
        if fix:
            with torch.no_grad():
                probs.append(model(x).softmax(-1))
        else:
            probs.append(model(x).softmax(-1))
    return len(probs)


def main():
    if not torch.cuda.is_available():
        sys.exit(3)
    mode = sys.argv[1]
    fix = "--fix" in sys.argv
    batches = int(sys.argv[sys.argv.index("--batches") + 1]) if "--batches" in sys.argv else 400
    device = torch.device("cuda")
    model = make_model(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    result = {"mode": mode, "fix": fix, "oom": False}
    try:
        if mode == "eval_outputs":
            train_steps(model, optimizer, device, 3)
            evaluate(model, device, batches, fix)
        elif mode == "train_metric":
            train_steps(model, optimizer, device, batches, metric_fix=fix)
        else:
            sys.exit(f"unknown mode {mode}")
    except torch.OutOfMemoryError as e:
        result["oom"] = True
        result["message"] = str(e).splitlines()[0]
    torch.cuda.synchronize()
    result["allocated_peak"] = torch.cuda.max_memory_allocated()
    result["reserved_peak"] = torch.cuda.max_memory_reserved()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
