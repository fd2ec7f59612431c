#!/usr/bin/env python3
"""A small PyTorch training run that exercises what cumemtrace must account for, and writes PyTorch's own view of it.

Run by the GPU suite (tests/gpu/conftest.py) under libcumemtrace.so; tests/gpu/tracekit.py then checks the trace against the ground
truth this script writes:
  * the CUDA caching allocator (default settings) reserves segments with cudaMalloc from libc10_cuda.so: their live
    peak must equal memory_stats()["reserved_bytes.all.peak"];
  * a matmul-heavy MLP, so cuBLAS/cuBLASLt get their handles and workspaces (some of it outside the caching
    allocator, through their own static CUDA runtime);
  * DataLoader(pin_memory=True, num_workers=2): the thread named `pt_data_pin` pins each 12 MiB batch into
    power-of-two blocks (16 MiB) of PyTorch's CachingHostAllocator: their peak must equal the allocator's own
    host_memory_stats() peak;
  * torch.cuda.mem_get_info() at the end and at the step with the least free memory, so the process total in the
    trace can be compared with what the driver says is used.

Usage: torch_train_pinned.py [TRUTH_JSON]   (or env CUMEMTRACE_TRUTH; default ./torch_truth.json)
The ground truth is written last, after every CUDA allocation the script makes, and nothing allocates after it.
Runs in well under a minute on one H100/H200; needs no network and no downloads. Python 3.11+.
"""
import json
import os
import sys
import threading
import time

T0_MONO_NS = time.monotonic_ns()  # CLOCK_MONOTONIC, the clock the trace uses (header clock_id 1)
T0_UNIX_NS = time.time_ns()

import torch  # noqa: E402  (timestamps above are taken before the import on purpose)
import torch.nn as nn  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

STEPS = 20
BATCH = 1024
IN_FEATURES = 3072   # a batch is 1024 x 3072 float32 = 12 MiB; pinned into a 16 MiB power-of-two block
HIDDEN = 2048
CLASSES = 1000
BASE_ROWS = 512      # distinct random rows the dataset cycles through (6 MiB, made once in the parent)


class RandomRows(Dataset):
    """Synthetic dataset: row i is one of BASE_ROWS fixed random vectors; label i % CLASSES."""

    def __init__(self, length):
        self.length = length
        generator = torch.Generator().manual_seed(0)
        self.base = torch.randn(BASE_ROWS, IN_FEATURES, generator=generator)

    def __len__(self):
        return self.length

    def __getitem__(self, index):
        return self.base[index % BASE_ROWS], index % CLASSES


def make_model():
    layers = [nn.Linear(IN_FEATURES, HIDDEN), nn.GELU()]
    for _ in range(3):
        layers += [nn.Linear(HIDDEN, HIDDEN), nn.GELU()]
    layers.append(nn.Linear(HIDDEN, CLASSES))
    return nn.Sequential(*layers)


def os_thread_names():
    """Kernel thread names (what pthread_setname_np / prctl set, what the trace records), by tid."""
    names = {}
    try:
        for tid in os.listdir("/proc/self/task"):
            try:
                with open("/proc/self/task/%s/comm" % tid) as f:
                    names[tid] = f.read().strip()
            except OSError:
                pass
    except OSError:
        pass
    return names


def python_threads():
    return [{"name": t.name, "ident": t.ident, "native_id": getattr(t, "native_id", None), "daemon": t.daemon}
            for t in threading.enumerate()]


def mem_sample(label, step):
    torch.cuda.synchronize()
    free, total = torch.cuda.mem_get_info()
    return {
        "label": label,
        "step": step,
        "mono_ns": time.monotonic_ns(),
        "free_bytes": free,
        "total_bytes": total,
        "used_bytes": total - free,
        "memory_reserved": torch.cuda.memory_reserved(),
        "memory_allocated": torch.cuda.memory_allocated(),
    }


def safe(fn, default=None):
    try:
        return fn()
    except Exception as e:  # record why instead of failing the run
        return default if default is not None else {"error": "%s: %s" % (type(e).__name__, e)}


def main():
    out_path = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CUMEMTRACE_TRUTH", "torch_truth.json")
    if not torch.cuda.is_available():
        print("torch_train_pinned: CUDA is not available", file=sys.stderr)
        return 3

    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = make_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()

    dataset = RandomRows(STEPS * BATCH)
    # fork explicitly: the workers must be forks of this (traced) process, never fresh interpreters started with
    # exec, which would inherit LD_PRELOAD and CUMEMTRACE_OUTPUT and trace into the same file.
    loader = DataLoader(dataset, batch_size=BATCH, shuffle=False, num_workers=2, pin_memory=True,
                        multiprocessing_context="fork", persistent_workers=False, prefetch_factor=2)

    samples = []
    threads_during = None
    losses = []
    t_train = time.monotonic()
    for step, (x, y) in enumerate(loader):
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        # Two samples a step (activations and gradients live; then the optimizer's states and foreach temporaries):
        # compare.py takes the one with the least free memory as "the peak-ish point".
        samples.append(mem_sample("after_backward", step))
        optimizer.step()
        samples.append(mem_sample("after_optimizer_step", step))
        losses.append(loss.item())
        if step == 5:
            threads_during = {"python": python_threads(), "os": os_thread_names()}
    train_s = time.monotonic() - t_train
    del loader  # the iterator is exhausted: workers and the pin thread have been shut down

    final = mem_sample("end", len(losses))
    peak_sample = min(samples, key=lambda s: s["free_bytes"]) if samples else None

    memory_stats = dict(torch.cuda.memory_stats(device))
    host_stats = safe(lambda: dict(torch.cuda.host_memory_stats()))
    truth = {
        "pid": os.getpid(),
        "argv": sys.argv,
        "python": sys.version,
        "torch_version": torch.__version__,
        "torch_cuda_version": torch.version.cuda,
        "torch_git_version": getattr(torch.version, "git_version", None),
        "cudnn_version": safe(lambda: torch.backends.cudnn.version()),
        "cuda_driver_version": safe(lambda: torch._C._cuda_getDriverVersion() if hasattr(
            torch._C, "_cuda_getDriverVersion") else None),
        "device_name": torch.cuda.get_device_name(device),
        "device_total_memory": torch.cuda.get_device_properties(device).total_memory,
        "allocator_backend": safe(lambda: torch.cuda.get_allocator_backend()),
        "env": {k: os.environ.get(k) for k in ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_ALLOC_CONF", "LD_PRELOAD",
                                               "CUMEMTRACE_OUTPUT", "CUDA_VISIBLE_DEVICES")},
        "config": {"steps": STEPS, "batch": BATCH, "in_features": IN_FEATURES, "hidden": HIDDEN,
                   "classes": CLASSES, "num_workers": 2, "pin_memory": True,
                   "batch_bytes": BATCH * IN_FEATURES * 4},
        "steps_run": len(losses),
        "loss_first_last": [losses[0], losses[-1]] if losses else None,
        "train_seconds": train_s,
        "t0_mono_ns": T0_MONO_NS,
        "t0_unix_ns": T0_UNIX_NS,
        "mem_get_info_end": final,
        "mem_get_info_peak": peak_sample,
        "mem_samples": samples,
        "threads_during_training": threads_during,
        "threads_end": {"python": python_threads(), "os": os_thread_names()},
        "memory_stats": memory_stats,
        "host_memory_stats": host_stats,
        "max_memory_reserved": torch.cuda.max_memory_reserved(device),
        "max_memory_allocated": torch.cuda.max_memory_allocated(device),
        "truth_written_mono_ns": time.monotonic_ns(),
    }

    print("torch %s (CUDA %s), device %s, %d steps in %.1f s, loss %s"
          % (torch.__version__, torch.version.cuda, truth["device_name"], len(losses), train_s,
             truth["loss_first_last"]))
    for key in ("reserved_bytes.all.peak", "allocated_bytes.all.peak", "segment.all.peak", "segment.all.allocated",
                "num_alloc_retries", "num_ooms"):
        print("  memory_stats[%r] = %s" % (key, memory_stats.get(key)))
    if isinstance(host_stats, dict):
        print("  host_memory_stats keys (bytes/alloc/segment/active):")
        for key in sorted(host_stats):
            if any(w in key for w in ("bytes", "alloc", "segment", "active", "num_host")):
                print("    %s = %s" % (key, host_stats[key]))
    print("  mem_get_info end: used %d of %d; at peak sample (step %s): used %d"
          % (final["used_bytes"], final["total_bytes"], peak_sample and peak_sample["step"],
             peak_sample["used_bytes"] if peak_sample else -1))
    if threads_during:
        print("  OS thread names during training:", sorted(set(threads_during["os"].values())))

    tmp = out_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(truth, f, indent=1, sort_keys=True, default=str)
    os.replace(tmp, out_path)
    print("ground truth written to", out_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
