#!/usr/bin/env python3
"""PyTorch reference for bench/gpt_cuda.sh: the GPT shape genesis's gpt2 preset trains (learned
positions, pre-LN blocks, fused causal attention, tanh-GELU, tied head), bf16 autocast with f32
weights, fused AdamW, gradient clipping, the same batch; prints one JSON line with tokens/s.
--compile adds torch.compile (llm.c's point of comparison). Timed as genesis times itself: the
first 3 steps are warm-up (compilation, cuBLAS plans) and not timed, and the GPU is synchronised
before the clock is read at both ends.

    python3 bench/torch_gpt_cuda.py --batch 16 --block-size 1024 --steps 30 [--compile]
"""
import argparse
import json
import time

import torch
import torch.nn.functional as F

from torch_gpt_cpu import GPT  # the same model as the CPU benchmark's


def main():
    p = argparse.ArgumentParser()
    for name, default in [("n-layer", 12), ("n-embd", 768), ("n-head", 12), ("block-size", 1024),
                          ("batch", 16), ("vocab", 50304), ("steps", 30), ("warmup", 3)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--compile", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = True
    model = GPT(a).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=6e-4, weight_decay=0.1, fused=True)
    run = torch.compile(model) if a.compile else model
    idx = torch.randint(0, a.vocab, (a.batch, a.block_size), device="cuda")
    tgt = torch.randint(0, a.vocab, (a.batch, a.block_size), device="cuda")

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = run(idx)
        loss = F.cross_entropy(logits.float().view(-1, a.vocab), tgt.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    torch.cuda.synchronize()  # the last steps' kernels count in the time, as genesis's do
    elapsed = time.perf_counter() - start
    loss.item()
    print(json.dumps({"torch_version": torch.__version__, "compile": a.compile,
                      "device": torch.cuda.get_device_name(),
                      "tokens_per_s": a.steps * a.batch * a.block_size / elapsed,
                      "peak_memory_mb": torch.cuda.max_memory_allocated() / 2**20}))


if __name__ == "__main__":
    main()
