#!/usr/bin/env python3
"""Another process on the same GPU: `holder BYTES READY_FILE` allocates BYTES and waits (until killed);
`victim` then allocates 1 GiB tensors until PyTorch raises OutOfMemoryError and prints one JSON line with PyTorch's
own message and the processes it names ("Process N has X GiB memory in use"), the truth the OOM report is checked
against. Exit 3 without CUDA.

Usage: other_process.py holder BYTES READY_FILE | other_process.py victim
"""
import json
import os
import re
import sys
import time

import torch


def holder(nbytes, ready):
    block = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    block.fill_(1)
    torch.cuda.synchronize()
    with open(ready, "w") as f:
        f.write(str(os.getpid()))
    while True:
        time.sleep(1)


def victim():
    kept = []
    try:
        while True:
            kept.append(torch.empty(1 << 30, dtype=torch.uint8, device="cuda"))
    except torch.OutOfMemoryError as e:
        message = str(e)
    units = {"GiB": 1 << 30, "MiB": 1 << 20, "KiB": 1 << 10, "bytes": 1}
    named = [{"pid": int(pid), "bytes": round(float(amount) * units[unit]), "as_printed": f"{amount} {unit}"}
             for pid, amount, unit in re.findall(r"Process (\d+) has ([\d.]+) (GiB|MiB|KiB|bytes) memory in use",
                                                 message)]
    print(json.dumps({"oom": True, "tensors": len(kept), "pid": os.getpid(), "message": message.splitlines()[0],
                      "processes": named}))


def main():
    if not torch.cuda.is_available():
        sys.exit(3)
    if sys.argv[1] == "holder":
        holder(int(sys.argv[2]), sys.argv[3])
    else:
        victim()


if __name__ == "__main__":
    main()
