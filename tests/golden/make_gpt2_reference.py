#!/usr/bin/env python3
"""PyTorch reference for tests/nn/test_gpt_cuda_golden.cpp: a GPT-2 124M-shaped model (genesis's
architecture and parameter names: learned positions, pre-LN blocks, causal attention, tanh-GELU
MLP, tied LM head, Linear weights (out, in)) with random weights, one forward/backward on random
tokens on the GPU, in fp32 (TF32 off) and under bf16 autocast. Writes, as safetensors files:

    OUT/weights.safetensors      the parameters, f32
    OUT/batch.safetensors        idx and targets, i64 (B, T)
    OUT/ref_fp32.safetensors     "loss" and every parameter's gradient, f32
    OUT/ref_bf16.safetensors     the same under torch.autocast(dtype=bfloat16)

    python3 tests/golden/make_gpt2_reference.py --out DIR [--batch 4 --seq 256]

Exit code 3 when torch or a CUDA device is missing (the test then says so and skips).
"""
import argparse
import json
import math
import struct
import sys

try:
    import torch
    import torch.nn.functional as F
except ImportError:
    print("torch is not installed", file=sys.stderr)
    sys.exit(3)

from make_gpt_golden import names, shape_of  # genesis's parameter names and shapes

CFG = dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50304)


def forward(p, idx):
    B, T = idx.shape
    C, H = CFG["n_embd"], CFG["n_head"]
    D = C // H
    x = p["wte.weight"][idx] + p["wpe.weight"][torch.arange(T, device=idx.device)]
    for i in range(CFG["n_layer"]):
        q = f"h.{i}."
        h = F.layer_norm(x, (C,), p[q + "ln_1.weight"], p[q + "ln_1.bias"], 1e-5)
        qkv = F.linear(h, p[q + "attn.c_attn.weight"], p[q + "attn.c_attn.bias"])
        qh, kh, vh = (t.view(B, T, H, D).transpose(1, 2) for t in qkv.split(C, dim=2))
        y = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
        y = y.transpose(1, 2).reshape(B, T, C)
        x = x + F.linear(y, p[q + "attn.c_proj.weight"], p[q + "attn.c_proj.bias"])
        h = F.layer_norm(x, (C,), p[q + "ln_2.weight"], p[q + "ln_2.bias"], 1e-5)
        h = F.gelu(F.linear(h, p[q + "mlp.c_fc.weight"], p[q + "mlp.c_fc.bias"]), approximate="tanh")
        x = x + F.linear(h, p[q + "mlp.c_proj.weight"], p[q + "mlp.c_proj.bias"])
    x = F.layer_norm(x, (C,), p["ln_f.weight"], p["ln_f.bias"], 1e-5)
    return F.linear(x, p["wte.weight"])


def save(path, tensors):
    """A minimal safetensors writer (no dependency beyond torch)."""
    kinds = {torch.float32: "F32", torch.int64: "I64"}
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().cpu().numpy().tobytes()
        header[name] = {"dtype": kinds[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def run(params, idx, targets, dtype):
    for p in params.values():
        p.grad = None
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bf16"):
        logits = forward(params, idx)
    # As in genesis's trainer: the loss from f32 logits.
    loss = F.cross_entropy(logits.float().view(-1, CFG["vocab_size"]), targets.view(-1))
    loss.backward()
    out = {"loss": loss.detach().float().reshape(())}
    out.update({n: p.grad.float() for n, p in params.items()})
    return out


def main():
    a = argparse.ArgumentParser()
    a.add_argument("--out", required=True)
    a.add_argument("--batch", type=int, default=4)
    a.add_argument("--seq", type=int, default=256)
    args = a.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device for torch", file=sys.stderr)
        sys.exit(3)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    params = {}
    for n in names(CFG):
        s = shape_of(n, CFG)
        if "ln_" in n:
            base = torch.ones(s) if n.endswith("weight") else torch.zeros(s)
            t = base + 0.1 * torch.randn(s)
        else:
            std = 0.02 if not n.endswith("c_proj.weight") else 0.02 / math.sqrt(2 * CFG["n_layer"])
            t = std * torch.randn(s) if n.endswith("weight") else 0.01 * torch.randn(s)
        params[n] = t.cuda().requires_grad_()
    idx = torch.randint(0, CFG["vocab_size"], (args.batch, args.seq), device="cuda")
    targets = torch.randint(0, CFG["vocab_size"], (args.batch, args.seq), device="cuda")
    save(f"{args.out}/weights.safetensors", params)
    save(f"{args.out}/batch.safetensors", {"idx": idx, "targets": targets})
    for dtype in ("fp32", "bf16"):
        save(f"{args.out}/ref_{dtype}.safetensors", run(params, idx, targets, dtype))
    print(json.dumps({"torch": torch.__version__, "device": torch.cuda.get_device_name()}))


if __name__ == "__main__":
    main()
