#!/usr/bin/env python3
"""Training with validation now and then, and no NVTX ranges: the analyzer must find the two phases itself (from
backward passes: model/torch/step_phases.h) and give each PyTorch's own peaks.

Two cycles of: TRAIN_STEPS training steps (train_epoch()), then VALIDATE_STEPS batches of validation under
torch.no_grad() with a larger batch (evaluate(), a function of its own as in real scripts), so that validation
peaks above training. The oracle: torch.cuda.reset_peak_memory_stats() at the start of each stretch (after a
synchronize; nothing allocates between the reset and the stretch's first tensor) and max_memory_allocated(),
requested_bytes.all.peak and max_memory_reserved() at its end; a phase's truth is the larger of its two stretches.

Usage: train_validate.py TRUTH_JSON. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

CYCLES = 2
TRAIN_STEPS = 20
TRAIN_BATCH = 256
VALIDATE_STEPS = 4
VALIDATE_BATCH = 4096
FEATURES = 1024
HIDDEN = 4096


def figures(device):
    torch.cuda.synchronize(device)
    return {"allocated": torch.cuda.max_memory_allocated(device),
            "requested": torch.cuda.memory_stats(device)["requested_bytes.all.peak"],
            "reserved": torch.cuda.max_memory_reserved(device)}


def stretch(device, body):
    torch.cuda.synchronize(device)
    torch.cuda.reset_peak_memory_stats(device)
    body()
    return figures(device)


def main():
    path = rc.out_path("train_validate_truth.json")
    if not torch.cuda.is_available():
        print("train_validate: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(FEATURES, HIDDEN), nn.GELU(), nn.Linear(HIDDEN, HIDDEN), nn.GELU(),
                          nn.Linear(HIDDEN, FEATURES)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)

    def train_epoch():
        model.train()
        for _ in range(TRAIN_STEPS):
            x = torch.randn(TRAIN_BATCH, FEATURES, device=device)
            loss = (model(x) - x).pow(2).mean()
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()

    def evaluate():
        model.eval()
        total = 0.0
        with torch.no_grad():
            for _ in range(VALIDATE_STEPS):
                x = torch.randn(VALIDATE_BATCH, FEATURES, device=device)
                total += (model(x) - x).pow(2).mean().item()
        return total

    stretches = {"train": [], "validate": []}
    for _ in range(CYCLES):
        stretches["train"].append(stretch(device, train_epoch))
        stretches["validate"].append(stretch(device, evaluate))
    truth = rc.base_truth("train_validate", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "stretches": stretches, "order": ["train", "validate"],
        # PyTorch's own peaks of each phase (the larger of its stretches), as the phases found must give them.
        "phase_peaks": {name: {key: max(s[key] for s in runs) for key in ("allocated", "requested", "reserved")}
                        for name, runs in stretches.items()}})
    for name, p in truth["phase_peaks"].items():
        print("train_validate: %s %s" % (name, p))
    rc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
