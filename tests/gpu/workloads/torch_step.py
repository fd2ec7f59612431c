#!/usr/bin/env python3
"""A few PyTorch training steps, optionally under torch.profiler: the CUPTI rows.

Run by the GPU suite (tests/gpu/conftest.py):
  * `--profile`, untraced and under the preload with its defaults: torch.profiler (Kineto, which subscribes to
    CUPTI itself) must still record the CUDA kernels with the preload loaded. The truth carries the number of CUDA
    device events (kernels, memcpys, memsets) the profiler recorded in the profiled steps, and the kernels by name;
    the suite compares the traced run's count with the untraced run's (the same code launches the same kernels).
  * without `--profile`, under the preload with CUMEMTRACE_CUPTI=1 (cumemtrace's own CUPTI subscription as a
    second source): no profiler here, since CUPTI allows one subscriber per process.

Usage: torch_step.py TRUTH_JSON [--profile]. Exit 3 without CUDA.
"""
import collections
import sys
import time
import warnings

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

WARMUP_STEPS = 3
PROFILED_STEPS = 3


def main():
    path = rc.out_path("torch_step_truth.json")
    profile = "--profile" in sys.argv[2:]
    if not torch.cuda.is_available():
        print("torch_step: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 2048), nn.GELU(), nn.Linear(2048, 1024), nn.GELU(),
                          nn.Linear(1024, 10)).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x = torch.randn(512, 1024, device=device)
    y = torch.randint(0, 10, (512,), device=device)
    loss_fn = nn.CrossEntropyLoss()

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        optimizer.step()
        return loss

    for _ in range(WARMUP_STEPS):
        step()
    torch.cuda.synchronize(device)

    prof_info = None
    if profile:
        from torch.profiler import ProfilerActivity, profile as torch_profile
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with torch_profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                for _ in range(PROFILED_STEPS):
                    step()
                torch.cuda.synchronize(device)
        cuda_type = torch.autograd.DeviceType.CUDA
        device_events = [e for e in prof.events() if e.device_type == cuda_type]
        names = collections.Counter(e.name for e in device_events)
        prof_info = {
            "cuda_device_events": len(device_events),
            "distinct_names": len(names),
            "by_name": dict(names.most_common(40)),
            "cpu_events": sum(1 for e in prof.events() if e.device_type != cuda_type),
            "warnings": [str(w.message)[:300] for w in caught][:20],
        }
        print("torch_step: profiler recorded %d CUDA device events (%d distinct names)" % (
            prof_info["cuda_device_events"], prof_info["distinct_names"]))
    final_loss = float(step().item())
    torch.cuda.synchronize(device)

    truth = rc.base_truth("torch_step", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "profile": profile,
        "profiler": prof_info,
        "final_loss": final_loss,
        "memory_stats": rc.safe(lambda: dict(torch.cuda.memory_stats(device))),
    })
    rc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
