#!/usr/bin/env python3
"""Phases (issue 9 item 3): a model trained in a "train" phase and evaluated in a "validate" phase, each an NVTX
range pushed with torch.cuda.nvtx.range_push and popped with range_pop, which cumemtrace receives through NVTX's
injection interface (NVTX_INJECTION64_PATH names the preload; the suite sets it for the traced run).

The oracle: torch.cuda.reset_peak_memory_stats() right before each push, and max_memory_reserved() (and
max_memory_allocated()) right before each pop, after a synchronize: PyTorch's own peak of that phase. Nothing
allocates between the reset and the push or between the reading and the pop. Validation uses a larger batch than
training, so that it reserves segments of its own and the two peaks differ. The suite expects the analyzer's peak
of PyTorch's reserved bytes in each phase (`peak --json`: phases[].peaks[] with kind "torch_reserved") to equal the
phase's max_memory_reserved().

Usage: nvtx_phases.py TRUTH_JSON. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

TRAIN_STEPS = 6
TRAIN_BATCH = 256
VALIDATE_STEPS = 3
VALIDATE_BATCH = 2048
FEATURES = 1024
HIDDEN = 4096


def phase(name, device, body):
    """Runs body() inside NVTX range `name`, with PyTorch's peak reset at its start: PyTorch's figures for it."""
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    torch.cuda.nvtx.range_push(name)
    body()
    torch.cuda.synchronize(device)
    figures = {"max_memory_reserved": torch.cuda.max_memory_reserved(device),
               "max_memory_allocated": torch.cuda.max_memory_allocated(device),
               "requested_bytes_peak": torch.cuda.memory_stats(device)["requested_bytes.all.peak"],
               "memory_reserved_at_end": torch.cuda.memory_reserved(device)}
    torch.cuda.nvtx.range_pop()
    return figures


def main():
    path = rc.out_path("nvtx_phases_truth.json")
    if not torch.cuda.is_available():
        print("nvtx_phases: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.ReLU(), nn.Linear(HIDDEN, FEATURES)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train():
        for _ in range(TRAIN_STEPS):
            x = torch.randn(TRAIN_BATCH, FEATURES, device=device)
            loss = (model(x) - x).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    def validate():
        with torch.no_grad():
            for _ in range(VALIDATE_STEPS):
                x = torch.randn(VALIDATE_BATCH, FEATURES, device=device)
                (model(x) - x).pow(2).mean().item()

    phases = {"train": phase("train", device, train), "validate": phase("validate", device, validate)}
    truth = rc.base_truth("nvtx_phases", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({"phases": phases, "order": ["train", "validate"],
                  # PyTorch's own tensor peaks of each phase, as `peak --phase NAME --json` must give them.
                  "phase_peaks": {name: {"allocated": f["max_memory_allocated"],
                                         "requested": f["requested_bytes_peak"]} for name, f in phases.items()}})
    for name, f in phases.items():
        print("nvtx_phases: %s max_memory_reserved %d max_memory_allocated %d" % (
            name, f["max_memory_reserved"], f["max_memory_allocated"]))
    rc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
