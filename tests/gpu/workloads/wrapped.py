#!/usr/bin/env python3
"""Which processes trace: a PyTorch program started by a wrapper that loads the preload and never allocates
(timeout, a shell), and the programs a traced PyTorch program starts.

Usage: wrapped.py TRUTH_JSON [--spawn | --chdir DIR]. With --chdir it first makes DIR and moves into it, as Hydra
moves a training script into its output folder (the trace, at a relative path, lands there). Allocates and frees a
few tensors and writes {"pid", "memory_stats"}. With --spawn, it then runs this script again twice and waits for
both: once through `bash -c` (a shell between them) and once directly with a copy of os.environ (taken at start, as
subprocess users often pass it); their truths go beside this one (TRUTH_JSON.child0, .child1) and their pids into
this truth's "children".
"""
import json
import os
import subprocess
import sys

import torch

MiB = 1 << 20


def main():
    truth_path = os.path.abspath(sys.argv[1])
    if "--chdir" in sys.argv[2:]:
        folder = sys.argv[sys.argv.index("--chdir") + 1]
        os.makedirs(folder, exist_ok=True)
        os.chdir(folder)
    device = torch.device("cuda", 0)
    kept = [torch.empty(n * MiB, dtype=torch.uint8, device=device) for n in (8, 24, 40)]
    del kept[1]
    torch.cuda.synchronize()
    truth = {"pid": os.getpid(), "memory_stats": dict(torch.cuda.memory_stats(device))}
    if "--spawn" in sys.argv[2:]:
        me = [sys.executable, os.path.abspath(__file__)]
        children = []
        shell = subprocess.run(["bash", "-c", '"$0" "$1" "$2"; true', me[0], me[1], truth_path + ".child0"])
        direct = subprocess.run(me + [truth_path + ".child1"], env=dict(os.environ))
        for i, p in enumerate((shell, direct)):
            with open(truth_path + ".child%d" % i) as f:
                children.append({"pid": json.load(f)["pid"], "rc": p.returncode})
        truth["children"] = children
    with open(truth_path, "w") as f:
        json.dump(truth, f)


if __name__ == "__main__":
    main()
