#!/usr/bin/env python3
"""A small DDP model over NCCL, one process per GPU, started by torchrun: the multi-GPU row.

Run by the GPU suite (tests/gpu/conftest.py) as
  scripts/cumemtrace --follow-exec -o DIR/run.%r.pb -- python3 -m torch.distributed.run --standalone \
      --nproc-per-node 2 tests/gpu/rows/ddp_train.py DIR
so that every rank writes its own trace (run.0.pb, run.1.pb). Each rank writes DIR/truth.<RANK>.json: its rank,
local rank, pid, device and torch.cuda.memory_stats() of its device (the suite compares the caching allocator's
peak in that rank's trace with reserved_bytes.all.peak), and the result of an all_reduce (each rank must see the
sum of all ranks' contributions: a check of the program, not of cumemtrace). Nothing calls empty_cache(): every
segment stays live to the end, so the leak report resolves every c10 stack.

Usage: ddp_train.py OUTDIR. Exit 3 without CUDA, 5 without torch.distributed's environment.
"""
import os
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn as nn  # noqa: E402
from torch.nn.parallel import DistributedDataParallel as DDP  # noqa: E402

STEPS = 10


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "."
    if not torch.cuda.is_available():
        print("ddp_train: CUDA is not available", file=sys.stderr)
        return 3
    if "RANK" not in os.environ or "LOCAL_RANK" not in os.environ:
        print("ddp_train: RANK/LOCAL_RANK not set: start it with torchrun", file=sys.stderr)
        return 5
    rank, local_rank = int(os.environ["RANK"]), int(os.environ["LOCAL_RANK"])
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = torch.device("cuda", local_rank)
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", device_id=device)
    torch.manual_seed(0)
    model = DDP(nn.Sequential(nn.Linear(1024, 4096), nn.GELU(), nn.Linear(4096, 1024)).to(device),
                device_ids=[local_rank])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    x = torch.randn(256, 1024, device=device)
    losses = []
    for _ in range(STEPS):
        optimizer.zero_grad(set_to_none=True)
        loss = model(x * (rank + 1)).square().mean()
        loss.backward()
        optimizer.step()
        losses.append(float(loss.item()))
    check = torch.full((1024,), float(rank + 1), device=device)
    dist.all_reduce(check)
    torch.cuda.synchronize(device)
    want = float(world * (world + 1) // 2)
    reduced = float(check[0].item())
    dist.barrier()

    truth = rc.base_truth("ddp_train", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "rank": rank,
        "local_rank": local_rank,
        "world_size": world,
        "device": local_rank,
        "nccl_version": rc.safe(lambda: ".".join(str(v) for v in torch.cuda.nccl.version())),
        "losses": losses,
        "all_reduce": {"got": reduced, "want": want},
        "memory_stats": rc.safe(lambda: dict(torch.cuda.memory_stats(device))),
        "mem_get_info": rc.safe(lambda: list(torch.cuda.mem_get_info(device))),
    })
    rc.write_truth(os.path.join(out_dir, "truth.%d.json" % rank), truth)
    dist.destroy_process_group()
    return 0 if reduced == want else 6


if __name__ == "__main__":
    sys.exit(main())
