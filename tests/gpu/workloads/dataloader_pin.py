#!/usr/bin/env python3
"""DataLoader(pin_memory=True, num_workers=2) over a deterministic dataset, with a checksum of what reached the GPU.

Run by the GPU suite (tests/gpu/conftest.py) three times: untraced; under the preload with its defaults (user story 3, pinned spike:
the suite looks for Python frames of torch/utils/data/ with `pin_memory` in their function names in the `pinned`
report's spike stacks); and under the preload with CUMEMTRACE_FOLLOW_FORK=1 (the workers are forks that end with
os._exit: the run must give the same checksum and exit status as the untraced one, and the parent's trace must
read cleanly).

The workers are forked explicitly (multiprocessing_context="fork"): fresh interpreters started with exec would be
another route (CUMEMTRACE_FOLLOW_EXEC), not the one this row tests. Each batch is 8 x 393216 float32 = 12 MiB,
pinned by the thread pt_data_pin into 16 MiB blocks of PyTorch's CachingHostAllocator.

Usage: dataloader_pin.py TRUTH_JSON. Exit 3 without CUDA.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402
from torch.utils.data import DataLoader, Dataset  # noqa: E402

ITEMS = 128
BATCH = 8
ROW = 393216          # floats per item: a batch is 12 MiB


class Numbered(Dataset):
    """Item i is a row that depends only on i: the checksum is the same in every run and every process."""

    def __len__(self):
        return ITEMS

    def __getitem__(self, index):
        row = torch.arange(ROW, dtype=torch.float32)
        row.mul_(1.0 / ROW).add_(float(index % 17))
        return row, index


def main():
    path = rc.out_path("dataloader_pin_truth.json")
    if not torch.cuda.is_available():
        print("dataloader_pin: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    weights = torch.linspace(0.5, 1.5, ROW, device=device, dtype=torch.float64)
    loader = DataLoader(Numbered(), batch_size=BATCH, shuffle=False, num_workers=2, pin_memory=True,
                        multiprocessing_context="fork", persistent_workers=False, prefetch_factor=2)
    total = torch.zeros((), dtype=torch.float64, device=device)
    index_sum = 0
    batches = 0
    pinned = 0
    for x, idx in loader:
        pinned += int(x.is_pinned())
        x = x.to(device, non_blocking=True)
        total += (x.double() * weights).sum()
        index_sum += int(idx.sum())
        batches += 1
    del loader
    checksum = float(total.item())

    truth = rc.base_truth("dataloader_pin", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "checksum": checksum,
        "checksum_repr": repr(checksum),
        "index_sum": index_sum,
        "batches": batches,
        "pinned_batches": pinned,
        "batch_bytes": BATCH * ROW * 4,
        "host_memory_stats": rc.safe(lambda: dict(torch.cuda.host_memory_stats())),
        "memory_stats": rc.safe(lambda: dict(torch.cuda.memory_stats(device))),
    })
    print("dataloader_pin: %d batches (%d pinned), checksum %r, index sum %d" % (batches, pinned, checksum,
                                                                              index_sum))
    rc.write_truth(path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
