#!/usr/bin/env python3
"""PyTorch eager reference for bench/llama_cpu.sh: a Llama-shaped decoder (RMSNorm, q/k/v/o
without bias, rotary embedding with rotate_half, grouped-query causal attention, SwiGLU MLP, final
RMSNorm, untied head) trained with cross-entropy, AdamW and clip_grad_norm 1.0 on the CPU at the
genesis run's shape, batch and thread count; prints one JSON line with tokens/s. Attention is
written out (scores, mask, softmax), as transformers' eager path computes it: Debian's torch 1.13
has no F.scaled_dot_product_attention.

    python3 bench/torch_llama_cpu.py --hidden 512 --layers 8 --heads 8 --kv-heads 2 \
        --head-dim 64 --intermediate 1408 --vocab 32000 --block-size 256 --batch 4 --steps 20 \
        --threads 2
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        return self.weight * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps))


def rotate_half(x):
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((-x2, x1), dim=-1)


class Layer(nn.Module):
    def __init__(self, a):
        super().__init__()
        C, D, F_ = a.hidden, a.head_dim, a.intermediate
        self.h, self.hkv, self.d = a.heads, a.kv_heads, D
        self.input_layernorm = RMSNorm(C, a.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(C, a.rms_norm_eps)
        self.q_proj = nn.Linear(C, a.heads * D, bias=False)
        self.k_proj = nn.Linear(C, a.kv_heads * D, bias=False)
        self.v_proj = nn.Linear(C, a.kv_heads * D, bias=False)
        self.o_proj = nn.Linear(a.heads * D, C, bias=False)
        self.gate_proj = nn.Linear(C, F_, bias=False)
        self.up_proj = nn.Linear(C, F_, bias=False)
        self.down_proj = nn.Linear(F_, C, bias=False)

    def attention(self, x, cos, sin, mask):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.h, self.d).transpose(1, 2)    # (B, H, T, D)
        k = self.k_proj(x).view(B, T, self.hkv, self.d).transpose(1, 2)  # (B, Hkv, T, D)
        v = self.v_proj(x).view(B, T, self.hkv, self.d).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        group = self.h // self.hkv  # transformers' repeat_kv: each kv head serves `group` q heads
        k = k[:, :, None].expand(B, self.hkv, group, T, self.d).reshape(B, self.h, T, self.d)
        v = v[:, :, None].expand(B, self.hkv, group, T, self.d).reshape(B, self.h, T, self.d)
        att = (q @ k.transpose(-2, -1)) / math.sqrt(self.d)
        y = att.masked_fill(~mask, float("-inf")).softmax(-1) @ v  # (B, H, T, D)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, self.h * self.d))

    def forward(self, x, cos, sin, mask):
        h = x + self.attention(self.input_layernorm(x), cos, sin, mask)
        g = self.post_attention_layernorm(h)
        return h + self.down_proj(F.silu(self.gate_proj(g)) * self.up_proj(g))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed_tokens = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList(Layer(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.hidden, a.rms_norm_eps)
        self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)
        for p in self.parameters():  # transformers' init: N(0, 0.02), norms at one
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)
        D = a.head_dim
        self.register_buffer("inv_freq", 1.0 / (a.rope_theta ** (torch.arange(0, D, 2).float() / D)))

    def forward(self, idx):
        T = idx.shape[1]
        # cos, sin (T, D) once per forward, as transformers' LlamaRotaryEmbedding does
        freqs = torch.outer(torch.arange(T, dtype=torch.float32), self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos(), emb.sin()
        mask = torch.ones(T, T, dtype=torch.bool).tril()
        x = self.embed_tokens(idx)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.lm_head(self.norm(x))


def main():
    p = argparse.ArgumentParser()
    for name, default in [("hidden", 512), ("layers", 8), ("heads", 8), ("kv-heads", 2),
                          ("head-dim", 64), ("intermediate", 1408), ("vocab", 32000),
                          ("block-size", 256), ("batch", 4), ("steps", 20), ("warmup", 3),
                          ("threads", 0)]:
        p.add_argument("--" + name, type=int, default=default)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--rms-norm-eps", type=float, default=1e-5)
    a = p.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Llama(a)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, weight_decay=0.1)
    idx = torch.randint(0, a.vocab, (a.batch, a.block_size))
    tgt = torch.randint(0, a.vocab, (a.batch, a.block_size))

    def step():
        loss = F.cross_entropy(model(idx).view(-1, a.vocab), tgt.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss

    for _ in range(a.warmup):
        step()
    start = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    elapsed = time.perf_counter() - start
    assert math.isfinite(loss.item()), "loss is not finite"
    print(json.dumps({"torch_version": torch.__version__, "threads": torch.get_num_threads(),
                      "parameters": sum(p.numel() for p in model.parameters()),
                      "loss": loss.item(), "tokens_per_s": a.steps * a.batch * a.block_size / elapsed}))


if __name__ == "__main__":
    main()
