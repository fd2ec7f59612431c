#!/usr/bin/env python3
"""Two OOMs for checking `cumem-analyze whatif` against reruns: the same program is traced once, then rerun
untraced with the setting the replay was asked about, and the rerun's outcome must be the replay's answer.

A filler tensor leaves 3.3 GiB of the card free. A 2 GiB tensor is made and freed (its segment stays cached), then
40 tensors are made, then a 1.5 GiB request:
  holes: 40 MiB tensors, every other one freed. Under the defaults they are carved out of the cached 2 GiB segment,
         whose holes cannot be returned to the driver: 1.3 GiB free on the card, the request fails. With
         max_split_size_mb:100 the 2 GiB block is kept for large requests, the small ones get segments of their own,
         the cached segment is released when the card fills, and the request fits.
  live:  80 MiB tensors, all kept (3.2 GiB of live tensors): no setting makes room.
Prints one JSON line: {"mode", "oom", "reserved_peak", "allocated_peak", "settings"}. Exit 3 without CUDA.

Usage: whatif_frag.py holes|live
"""
import json
import os
import sys

import torch

MiB = 1 << 20


def main():
    mode = sys.argv[1]
    if not torch.cuda.is_available():
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    free, _ = torch.cuda.mem_get_info(device)
    # The filler in power-of-two pieces of at least 16 MiB, which no rounding setting (roundup_power2_divisions)
    # enlarges; what is left below 16 MiB stays free.
    rest = free - 3379 * MiB
    filler = []
    piece = 1 << (rest.bit_length() - 1)
    while piece >= 16 * MiB:
        if rest >= piece:
            filler.append(torch.empty(piece, dtype=torch.uint8, device=device))
            rest -= piece
        piece >>= 1
    big = torch.empty(2048 * MiB, dtype=torch.uint8, device=device)
    del big
    size = 40 * MiB if mode == "holes" else 80 * MiB
    pieces = [torch.empty(size, dtype=torch.uint8, device=device) for _ in range(40)]
    if mode == "holes":
        pieces = pieces[::2]
    oom = False
    try:
        request = torch.empty(1536 * MiB, dtype=torch.uint8, device=device)
        del request
    except torch.OutOfMemoryError:
        oom = True
    print(json.dumps({"mode": mode, "oom": oom, "reserved_peak": torch.cuda.max_memory_reserved(device),
                      "allocated_peak": torch.cuda.max_memory_allocated(device), "filler": sum(t.numel() for t in filler),
                      "settings": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")}))
    del pieces, filler
    return 0


if __name__ == "__main__":
    sys.exit(main())
