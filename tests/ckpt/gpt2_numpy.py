#!/usr/bin/env python3
# GPT-2 forward in numpy, written the way Hugging Face's modeling_gpt2.py computes it, on an
# exported directory (model.safetensors + config.json): Conv1D layers (x @ W + b, W is (in, out)),
# gelu_new, causal softmax attention, pre-LayerNorm blocks, and the LM head tied to wte. Reading
# only the names, shapes and config keys GPT2LMHeadModel reads, it shows an export is loadable
# as GPT-2 without needing torch. Usage: gpt2_numpy.py DIR "1,2,3;4,5,6" -> JSON logits (B, T, V).
import json
import math
import sys

import numpy as np


def load(path):
    with open(path, "rb") as f:
        blob = f.read()
    n = int.from_bytes(blob[:8], "little")
    header = json.loads(blob[8:8 + n])
    assert header.get("__metadata__", {}).get("format") == "pt", "transformers needs format=pt"
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        begin, end = info["data_offsets"]
        out[name] = np.frombuffer(data[begin:end], dtype=np.float32).reshape(info["shape"]).astype(np.float64)
    return out


def gelu_new(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * np.power(x, 3.0))))


def layer_norm(x, w, b, eps):
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + eps) * w + b


def conv1d(x, w, b):
    return x @ w + b


def attention(x, p, prefix, n_head):
    B, T, C = x.shape
    D = C // n_head
    qkv = conv1d(x, p[prefix + "c_attn.weight"], p[prefix + "c_attn.bias"])
    q, k, v = np.split(qkv, 3, axis=2)
    heads = lambda t: t.reshape(B, T, n_head, D).transpose(0, 2, 1, 3)  # (B, H, T, D)
    q, k, v = heads(q), heads(k), heads(v)
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(D)
    causal = np.tril(np.ones((T, T), dtype=bool))
    scores = np.where(causal, scores, np.finfo(np.float64).min)
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    probs = scores / scores.sum(-1, keepdims=True)
    y = (probs @ v).transpose(0, 2, 1, 3).reshape(B, T, C)
    return conv1d(y, p[prefix + "c_proj.weight"], p[prefix + "c_proj.bias"])


def forward(p, config, ids):
    eps = config["layer_norm_epsilon"]
    assert config["activation_function"] == "gelu_new" and config["tie_word_embeddings"]
    T = ids.shape[1]
    assert T <= config["n_positions"]
    x = p["wte.weight"][ids] + p["wpe.weight"][np.arange(T)]
    for i in range(config["n_layer"]):
        h = "h.%d." % i
        x = x + attention(layer_norm(x, p[h + "ln_1.weight"], p[h + "ln_1.bias"], eps), p, h + "attn.", config["n_head"])
        m = layer_norm(x, p[h + "ln_2.weight"], p[h + "ln_2.bias"], eps)
        m = conv1d(gelu_new(conv1d(m, p[h + "mlp.c_fc.weight"], p[h + "mlp.c_fc.bias"])),
                   p[h + "mlp.c_proj.weight"], p[h + "mlp.c_proj.bias"])
        x = x + m
    x = layer_norm(x, p["ln_f.weight"], p["ln_f.bias"], eps)
    return x @ p["wte.weight"].T


directory = sys.argv[1]
with open(directory + "/config.json") as f:
    config = json.load(f)
assert config["model_type"] == "gpt2" and config["architectures"] == ["GPT2LMHeadModel"]
params = load(directory + "/model.safetensors")
expected = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias"}
for i in range(config["n_layer"]):
    for suffix in ["ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                   "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                   "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"]:
        expected.add("h.%d.%s" % (i, suffix))
assert set(params) == expected, sorted(set(params) ^ expected)
C = config["n_embd"]
assert params["h.0.attn.c_attn.weight"].shape == (C, 3 * C)
assert params["h.0.mlp.c_fc.weight"].shape == (C, 4 * C)
ids = np.array([[int(t) for t in row.split(",")] for row in sys.argv[2].split(";")])
print(json.dumps(forward(params, config, ids).tolist()))
