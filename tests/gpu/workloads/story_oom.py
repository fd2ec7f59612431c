#!/usr/bin/env python3
"""User story 1, validation OOM: training fits, then a validation loop keeps every output on the GPU until a
cudaMalloc fails.

Run by the GPU suite (tests/gpu/conftest.py) under the preload. Why a real out-of-memory and not
torch.cuda.set_per_process_memory_fraction(): with a fraction set, PyTorch's caching allocator refuses a request
that would pass the fraction itself and raises OutOfMemoryError without calling cudaMalloc, so the driver (and
cumemtrace) would see no failed allocation at all. Here each validation output is 2 GiB (a matmul of a 32768 x 1024
batch with a 1024 x 16384 weight); the loop appends them until the caching allocator's cudaMalloc fails (about 70
on an H200's 141 GiB, a second or two), catches torch.OutOfMemoryError, frees everything and writes the truth.

The truth names the script's own lines by their `ROW-MARK:` comments (found by reading this file, not from the
interpreter): the suite expects `cumem-analyze oom --json`'s first failure's user frame to be the `validation-output`
line. It also records memory_reserved() after each kept output, so the failed request's size and what was live
then can be compared.

Usage: story_oom.py TRUTH_JSON. Exit 3 without CUDA, 4 when no OOM happened within the step limit.
"""
import sys
import time

T0_MONO_NS = time.monotonic_ns()
T0_UNIX_NS = time.time_ns()

import rows_common as rc  # noqa: E402
import torch  # noqa: E402
import torch.nn as nn  # noqa: E402

TRAIN_BATCH = 1024
VAL_BATCH = 32768
IN_FEATURES = 1024
OUT_FEATURES = 16384           # one validation output: 32768 x 16384 float32 = 2 GiB
MAX_VALIDATION_STEPS = 400     # 800 GiB: far more than any GPU has


def main():
    path = rc.out_path("story_oom_truth.json")
    if not torch.cuda.is_available():
        print("story_oom: CUDA is not available", file=sys.stderr)
        return 3
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    model = nn.Linear(IN_FEATURES, OUT_FEATURES).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)

    # Training fits: small batches, nothing kept.
    for _ in range(3):
        x = torch.randn(TRAIN_BATCH, IN_FEATURES, device=device)
        loss = model(x).square().mean()  # ROW-MARK: train-forward
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    del x, loss
    optimizer.zero_grad(set_to_none=True)
    torch.cuda.synchronize(device)
    after_training = rc.checkpoint("after_training", memory_reserved=torch.cuda.memory_reserved(device),
                                   memory_allocated=torch.cuda.memory_allocated(device))

    # Validation keeps its outputs on the GPU.
    val_x = torch.randn(VAL_BATCH, IN_FEATURES, device=device)
    outputs = []
    kept = []
    oom = None
    free_before = total = None
    with torch.no_grad():
        for step in range(MAX_VALIDATION_STEPS):
            try:
                outputs.append(model(val_x))  # ROW-MARK: validation-output
            except torch.OutOfMemoryError as e:
                # Reserved as PyTorch left it at the raise: after its own retries, which may have released cached
                # segments between the failed cudaMalloc calls (seen on an H200).
                oom = {"step": step, "message": str(e).splitlines()[0][:500], "mono_ns": time.monotonic_ns(),
                       "memory_reserved": torch.cuda.memory_reserved(device)}
                break
            torch.cuda.synchronize(device)
            kept.append({"step": step, "mono_ns": time.monotonic_ns(),
                         "memory_reserved": torch.cuda.memory_reserved(device),
                         "memory_allocated": torch.cuda.memory_allocated(device),
                         "output_bytes": outputs[-1].numel() * outputs[-1].element_size()})
    memory_stats = rc.safe(lambda: dict(torch.cuda.memory_stats(device)))
    n_outputs = len(outputs)
    output_bytes = VAL_BATCH * OUT_FEATURES * 4
    del outputs
    torch.cuda.synchronize(device)
    free_before, total = torch.cuda.mem_get_info(device)

    truth = rc.base_truth("story_oom", T0_MONO_NS, T0_UNIX_NS)
    truth.update(rc.torch_facts(torch, device))
    truth.update({
        "script": rc.script_identity(__file__),
        "validation_line": rc.marker_lines(__file__).get("validation-output"),
        "train_line": rc.marker_lines(__file__).get("train-forward"),
        "output_bytes": output_bytes,
        "outputs_kept": n_outputs,
        "oom": oom,
        "after_training": after_training,
        "kept": kept,
        "last_reserved_before_oom": kept[-1]["memory_reserved"] if kept else None,
        "memory_stats": memory_stats,
        "mem_get_info_after_free": {"free_bytes": free_before, "total_bytes": total},
    })
    print("story_oom: %d outputs of %d bytes kept, then %s" % (n_outputs, output_bytes,
                                                               oom["message"] if oom else "no OOM"))
    rc.write_truth(path, truth)
    return 0 if oom else 4


if __name__ == "__main__":
    sys.exit(main())
