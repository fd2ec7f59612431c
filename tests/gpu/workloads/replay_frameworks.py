#!/usr/bin/env python3
"""Fresh PyTorch training runs for checking that `cumem-analyze whatif` reproduces their allocator exactly (every
segment, every block's address) under their own settings: GPT-2 in a plain loop, the same model under Hugging Face's
Trainer, and timm's resnet18. Small and synthetic (models built from configs, random data): nothing is downloaded.
Prints one JSON line with PyTorch's reserved peak (the replay's must equal it). Exit 3 without CUDA.

Usage: replay_frameworks.py gpt2|trainer|timm
"""
import json
import sys

import torch


def gpt2_model():
    from transformers import GPT2Config, GPT2LMHeadModel
    return GPT2LMHeadModel(GPT2Config(n_layer=6, n_embd=512, n_head=8, vocab_size=8192, n_positions=256))


def plain_gpt2(device):
    model = gpt2_model().to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    for _ in range(8):
        tokens = torch.randint(0, 8192, (8, 256), device=device)
        loss = model(tokens, labels=tokens).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def trainer(device):
    from transformers import Trainer, TrainingArguments

    class Tokens(torch.utils.data.Dataset):
        def __len__(self):
            return 64

        def __getitem__(self, i):
            t = torch.randint(0, 8192, (256,), generator=torch.Generator().manual_seed(i))
            return {"input_ids": t, "labels": t}

    args = TrainingArguments(output_dir="/tmp/replay_trainer", per_device_train_batch_size=8, max_steps=8,
                             report_to=[], save_strategy="no", logging_strategy="no", dataloader_num_workers=0)
    Trainer(model=gpt2_model(), args=args, train_dataset=Tokens()).train()


def timm_resnet(device):
    import timm
    model = timm.create_model("resnet18", pretrained=False, num_classes=100).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    for _ in range(8):
        x = torch.randn(32, 3, 224, 224, device=device)
        y = torch.randint(0, 100, (32,), device=device)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)


def main():
    mode = sys.argv[1]
    if not torch.cuda.is_available():
        return 3
    device = torch.device("cuda", 0)
    torch.manual_seed(0)
    {"gpt2": plain_gpt2, "trainer": trainer, "timm": timm_resnet}[mode](device)
    torch.cuda.synchronize(device)
    print(json.dumps({"mode": mode, "reserved_peak": torch.cuda.max_memory_reserved(device)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
