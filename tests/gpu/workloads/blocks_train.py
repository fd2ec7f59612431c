#!/usr/bin/env python3
"""GPT-2 (6 layers x 512, built from a config: no download) trained with AdamW, with checkpoints where PyTorch's
own figures are read (allocator_common.checkpoint): after the model reaches the GPU, in the middle of a forward
pass (activations live), after the first optimizer step (AdamW's state appears), and after a few more steps. The
checker compares each with the block events the trace holds before that checkpoint's marker.

Run under the default allocator and under PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True.
Usage: blocks_train.py TRUTH_JSON [STEPS]. Exit 3 without CUDA.
"""
import sys
import time

import allocator_common as ac
import torch


def main():
    truth_path = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 6
    if not torch.cuda.is_available():
        return 3
    from transformers import GPT2Config, GPT2LMHeadModel
    device = torch.device("cuda", 0)
    torch.cuda.set_device(device)
    torch.manual_seed(0)
    config = GPT2Config(n_layer=6, n_embd=512, n_head=8, n_positions=256)
    model = GPT2LMHeadModel(config).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    checkpoints = []
    torch.cuda.synchronize()
    ac.checkpoint(torch, device, "model_on_gpu", checkpoints)

    # Mid-forward: a hook on the 3rd block reads the figures while earlier activations are live.
    def mid_forward(module, inputs, output):
        if not checkpoints[-1]["name"].startswith("mid_forward"):
            ac.checkpoint(torch, device, "mid_forward", checkpoints)
    handle = model.transformer.h[2].register_forward_hook(mid_forward)
    losses = []
    for step in range(steps):
        ids = torch.randint(0, config.vocab_size, (16, 256), device=device)
        out = model(ids, labels=ids)
        out.loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        losses.append(out.loss.item())
        if step == 0:
            handle.remove()
            ac.checkpoint(torch, device, "after_first_step", checkpoints)
        del out, ids
    torch.cuda.synchronize()
    ac.checkpoint(torch, device, "after_training", checkpoints)
    truth = {"workload": "blocks_train", "steps": steps, "losses": losses, "checkpoints": checkpoints,
             "end_mono_ns": time.monotonic_ns()}
    ac.write_truth(truth_path, truth)
    return 0


if __name__ == "__main__":
    sys.exit(main())
