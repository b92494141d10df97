#!/usr/bin/env python3
"""Reference values for tests/nn/test_gpt_golden.cpp, computed with PyTorch.

Builds a tiny GPT with genesis's architecture (learned positions, pre-LN blocks, causal attention,
tanh-GELU MLP, tied LM head; Linear weights stored (out, in)), fills it with random weights, runs
one forward/backward on fixed tokens and writes the weights, inputs, loss and every parameter
gradient to gpt_tiny.json. Rerun only when the model's definition changes:

    python3 tests/golden/make_gpt_golden.py   # needs python3-torch
"""
import json
import math
import os

import torch
import torch.nn.functional as F

CFG = dict(n_layer=2, n_head=4, n_embd=16, block_size=8, vocab_size=32)
B, T = 2, 8


def names(cfg=CFG):
    """genesis's parameter names, in its registration order."""
    out = ["wte.weight", "wpe.weight"]
    for i in range(cfg["n_layer"]):
        p = f"h.{i}."
        out += [p + "ln_1.weight", p + "ln_1.bias",
                p + "attn.c_attn.weight", p + "attn.c_attn.bias",
                p + "attn.c_proj.weight", p + "attn.c_proj.bias",
                p + "ln_2.weight", p + "ln_2.bias",
                p + "mlp.c_fc.weight", p + "mlp.c_fc.bias",
                p + "mlp.c_proj.weight", p + "mlp.c_proj.bias"]
    return out + ["ln_f.weight", "ln_f.bias"]


def shape_of(name, cfg=CFG):
    C, V, L = cfg["n_embd"], cfg["vocab_size"], cfg["block_size"]
    if name == "wte.weight": return (V, C)
    if name == "wpe.weight": return (L, C)
    if "ln_" in name: return (C,)
    table = {"attn.c_attn": (3 * C, C), "attn.c_proj": (C, C),
             "mlp.c_fc": (4 * C, C), "mlp.c_proj": (C, 4 * C)}
    for key, (o, i) in table.items():
        if key in name:
            return (o, i) if name.endswith("weight") else (o,)
    raise KeyError(name)


def forward(p, idx):
    C, H = CFG["n_embd"], CFG["n_head"]
    D = C // H
    x = p["wte.weight"][idx] + p["wpe.weight"][torch.arange(T)]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for i in range(CFG["n_layer"]):
        q = f"h.{i}."
        h = F.layer_norm(x, (C,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], 1e-5)
        qkv = F.linear(h, p[q + "attn.c_attn.weight"], p[q + "attn.c_attn.bias"])
        qh, kh, vh = (t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=2))
        att = (qh @ kh.transpose(-2, -1)) / math.sqrt(D)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ vh).transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, p[q + "attn.c_proj.weight"], p[q + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], 1e-5)
        h = F.gelu(F.linear(h, p[q + "mlp.c_fc.weight"], p[q + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p[q + "mlp.c_proj.weight"], p[q + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return F.linear(x, p["wte.weight"])


def main():
    torch.manual_seed(0)
    params = {}
    for n in names():
        s = shape_of(n)
        base = torch.ones(s) if n.endswith("weight") and "ln_" in n else torch.zeros(s)
        # Large enough that every nonlinearity is exercised away from its linear regime.
        params[n] = (base + 0.3 * torch.randn(s, dtype=torch.float64)).float().requires_grad_()
    idx = torch.randint(0, CFG["vocab_size"], (B, T))
    targets = torch.randint(0, CFG["vocab_size"], (B, T))
    logits = forward(params, idx)
    loss = F.cross_entropy(logits.view(-1, CFG["vocab_size"]), targets.view(-1))
    loss.backward()
    out = {
        "config": CFG, "batch": B, "seq": T,
        "idx": idx.flatten().tolist(), "targets": targets.flatten().tolist(),
        "loss": loss.item(),
        "logits_sum": logits.double().sum().item(),
        "params": {n: {"shape": list(t.shape), "data": t.detach().flatten().tolist()}
                   for n, t in params.items()},
        "grads": {n: t.grad.flatten().tolist() for n, t in params.items()},
        "torch_version": torch.__version__,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gpt_tiny.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"wrote {path}: loss {loss.item():.6f}")


if __name__ == "__main__":
    main()
