#!/usr/bin/env python3
"""A training-like sequence of requests for checking `cumem-analyze whatif --without-outside` and `--capacity`
against reruns: 12 steps, each making five activations (1344 MiB together) and freeing them, the model state
growing by 300 MiB every third step, then a 1.5 GiB request.

  alone:  nothing else on the card: runs through.
  other:  a second process holds all but about 2.5 GiB of the card first: the same requests run out of memory.
With --fraction F, torch.cuda.set_per_process_memory_fraction(F) first (a smaller card, for the rerun of
--capacity). Prints one JSON line: {"mode", "oom", "reserved_peak", "total_memory", "other_bytes"}. Exit 3 without
CUDA.

Usage: whatif_steps.py alone|other [--fraction F]
"""
import json
import subprocess
import sys

import torch

MiB = 1 << 20
HOLDER = ("import sys, torch\n"
          "x = torch.empty(int(sys.argv[1]), dtype=torch.uint8, device='cuda')\n"
          "print('ready', flush=True)\n"
          "sys.stdin.read()\n")


def steps(device):
    state = []
    for step in range(12):
        activations = [torch.empty(size * MiB, dtype=torch.uint8, device=device) for size in (256, 128, 384, 64, 512)]
        if step % 3 == 0:
            state.append(torch.empty(300 * MiB, dtype=torch.uint8, device=device))
        del activations
    final = torch.empty(1536 * MiB, dtype=torch.uint8, device=device)
    del final, state


def main():
    mode = sys.argv[1]
    if not torch.cuda.is_available():
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    total = torch.cuda.get_device_properties(device).total_memory
    if "--fraction" in sys.argv:
        torch.cuda.set_per_process_memory_fraction(float(sys.argv[sys.argv.index("--fraction") + 1]), device)
    torch.empty(1, device=device)  # the context first, so that the free memory below is what is left
    holder = None
    other = 0
    if mode == "other":
        free, _ = torch.cuda.mem_get_info(device)
        other = free - 3072 * MiB  # the holder's own context takes about 500 MiB more: 2.5 GiB are left
        holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(other)], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, text=True)
        assert holder.stdout.readline().strip() == "ready"
    oom = False
    try:
        steps(device)
    except torch.OutOfMemoryError:
        oom = True
    print(json.dumps({"mode": mode, "oom": oom, "reserved_peak": torch.cuda.max_memory_reserved(device),
                      "total_memory": total, "other_bytes": other}))
    if holder is not None:
        holder.stdin.close()
        holder.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
