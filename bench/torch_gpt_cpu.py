#!/usr/bin/env python3
"""PyTorch eager reference for bench/gpt_cpu.sh: the same GPT shape, AdamW and batch as the
genesis run, on the CPU with the same thread count; prints one JSON line with tokens/s.

    python3 bench/torch_gpt_cpu.py --n-layer 4 --n-embd 256 --n-head 4 --block-size 128 \
        --batch 8 --vocab 256 --steps 30 --threads 2
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, c, h):
        super().__init__()
        self.h = h
        self.ln_1, self.ln_2 = nn.LayerNorm(c), nn.LayerNorm(c)
        self.c_attn, self.attn_proj = nn.Linear(c, 3 * c), nn.Linear(c, c)
        self.c_fc, self.mlp_proj = nn.Linear(c, 4 * c), nn.Linear(4 * c, c)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.h, C // self.h).transpose(1, 2) for t in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):  # PyTorch >= 2.0: its fused kernel
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(C // self.h)
            mask = torch.ones(T, T, dtype=torch.bool).tril()
            y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v
        x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.wte = nn.Embedding(a.vocab, a.n_embd)
        self.wpe = nn.Embedding(a.block_size, a.n_embd)
        self.h = nn.ModuleList(Block(a.n_embd, a.n_head) for _ in range(a.n_layer))
        self.ln_f = nn.LayerNorm(a.n_embd)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1], device=idx.device))
        for block in self.h:
            x = block(x)
        return F.linear(self.ln_f(x), self.wte.weight)


def main():
    p = argparse.ArgumentParser()
    for name, default in [("n-layer", 4), ("n-embd", 256), ("n-head", 4), ("block-size", 128),
                          ("batch", 8), ("vocab", 256), ("steps", 30), ("warmup", 3), ("threads", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = GPT(a)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.0)
    idx = torch.randint(0, a.vocab, (a.batch, a.block_size))
    tgt = torch.randint(0, a.vocab, (a.batch, a.block_size))

    def step():
        loss = F.cross_entropy(model(idx).view(-1, a.vocab), tgt.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    for _ in range(a.warmup):
        step()
    start = time.perf_counter()
    for _ in range(a.steps):
        step()
    elapsed = time.perf_counter() - start
    print(json.dumps({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                      "tokens_per_s": a.steps * a.batch * a.block_size / elapsed}))


if __name__ == "__main__":
    main()
