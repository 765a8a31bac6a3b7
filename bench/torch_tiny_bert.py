#!/usr/bin/env python3
"""PyTorch side of the emulator benchmark (emulator_bench.cpp).

Trains the same tiny BERT as the emulator (the model code of
tests/emulator/torch_crosscheck.py), on the emulator's own batches, with
torch.optim.AdamW, in fp32 on the CPU, and prints samples per second.

Usage: torch_tiny_bert.py BATCHES.ipt THREADS
"""
import os
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "emulator"))
from torch_crosscheck import loss_of, micro_batches, read_tensors  # noqa: E402


def main():
    path, threads = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(threads)
    meta, tensors = read_tensors(path)
    steps = int(meta["steps"])
    per_step = int(meta["micro_batches"]) // steps
    batches = micro_batches(meta, tensors)
    init_meta, init = read_tensors(meta["weights"])
    W = {name: t.clone().requires_grad_(True) for name, t in init.items()}
    heads, layers = int(meta["heads"]), int(meta["layers"])
    opt = torch.optim.AdamW(W.values(), lr=1e-3, weight_decay=0.01)
    samples = 0
    start = None
    warmup = int(meta["warmup"])
    for s in range(steps):
        if s == warmup:
            start = time.perf_counter()
            samples = 0
        opt.zero_grad()
        for mb in batches[s * per_step:(s + 1) * per_step]:
            loss_of(W, mb, layers=layers, heads=heads).backward()
            samples += mb["samples"]
        opt.step()
    elapsed = time.perf_counter() - start
    print(f"samples_per_second {samples / elapsed:.3f}")


if __name__ == "__main__":
    main()
