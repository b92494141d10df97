"""Hugging Face checkpoint files for hf_reference.py: safetensors written and read with struct + json,
config.json and generation_config.json as transformers 4.55 writes them for llama, mistral, qwen2,
qwen3 and gpt2, the state-dict names and shapes of each family, and a seeded random init.
It knows nothing of the model math (hf_model.py) and imports only the standard library, numpy and
torch. The names per family are listed in hf_reference.py's docstring.
"""
import json
import math
import os
import struct

import numpy as np
import torch

TRANSFORMERS_VERSION = "4.55.4"  # the last line of releases that wrote "torch_dtype" (4.56 writes "dtype")

# --dtype -> (torch dtype, safetensors code)
DTYPES = {"float32": (torch.float32, "F32"), "bfloat16": (torch.bfloat16, "BF16"),
          "float16": (torch.float16, "F16")}
# safetensors code -> (numpy dtype of the raw bytes, torch dtype they are viewed as)
CODES = {"F32": (np.float32, torch.float32), "F16": (np.float16, torch.float16),
         "BF16": (np.int16, torch.bfloat16), "I64": (np.int64, torch.int64)}
CODE_OF = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16", torch.int64: "I64"}

LLAMA_FAMILY = ("llama", "mistral", "qwen2", "qwen3")
ARCH_PREFIX = {"llama": "Llama", "mistral": "Mistral", "qwen2": "Qwen2", "qwen3": "Qwen3", "gpt2": "GPT2"}


# ----------------------------------------------------------------------------------------------
# safetensors

def tensor_bytes(t):
    """The little-endian bytes of a CPU tensor; bf16 goes through an int16 view of the same bits."""
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    return t.numpy().tobytes()  # numpy's native order, little-endian on every host this runs on


def write_safetensors(path, tensors):
    """tensors: name -> tensor. Header: __metadata__ {"format": "pt"} then the tensors by name, data
    in the same order, the header padded with spaces to a multiple of 8 as the safetensors library does."""
    header = {"__metadata__": {"format": "pt"}}
    blobs, offset = [], 0
    for name in sorted(tensors):
        t = tensors[name]
        data = tensor_bytes(t)
        header[name] = {"dtype": CODE_OF[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_safetensors(path):
    """name -> tensor in its stored dtype, checking that the data offsets tile the buffer."""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    if header.get("__metadata__", {}).get("format") != "pt":
        raise ValueError(f"{path}: __metadata__.format is not 'pt' (transformers refuses it)")
    data = blob[8 + n:]
    out, spans = {}, []
    for name, info in header.items():
        if name == "__metadata__":
            continue
        raw, dtype = CODES[info["dtype"]]
        begin, end = info["data_offsets"]
        count = math.prod(info["shape"])
        if end - begin != count * np.dtype(raw).itemsize:
            raise ValueError(f"{path}: {name} has {end - begin} bytes for shape {info['shape']}")
        arr = np.frombuffer(data[begin:end], dtype=raw)
        t = torch.from_numpy(arr.copy()).reshape(info["shape"])
        out[name] = t.view(dtype) if dtype == torch.bfloat16 else t
        spans.append((begin, end))
    spans.sort()
    if spans and (spans[0][0] != 0 or spans[-1][1] != len(data)
                  or any(a[1] != b[0] for a, b in zip(spans, spans[1:]))):
        raise ValueError(f"{path}: tensor data does not tile the buffer")
    return out


def shard_name(k, n):
    return f"model-{k:05d}-of-{n:05d}.safetensors"


def save_weights(out_dir, named, shards):
    """named: [(name, tensor)] in state-dict order. One file, or `shards` files cut in that order at
    about equal byte counts plus model.safetensors.index.json (keys sorted, indent 2, as transformers)."""
    if shards <= 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), dict(named))
        return ["model.safetensors"]
    if shards > len(named):
        raise ValueError(f"--shards {shards} is more than the {len(named)} tensors")
    sizes = [len(tensor_bytes(t)) for _, t in named]
    total = sum(sizes)
    groups, acc = [[]], 0
    for i, (item, size) in enumerate(zip(named, sizes)):
        to_open = shards - len(groups)  # shards not yet started
        if groups[-1] and to_open > 0 and (acc >= len(groups) * total / shards or len(named) - i == to_open):
            groups.append([])
        groups[-1].append(item)
        acc += size
    files, weight_map = [], {}
    for k, group in enumerate(groups, start=1):
        fname = shard_name(k, shards)
        write_safetensors(os.path.join(out_dir, fname), dict(group))
        files.append(fname)
        for name, _ in group:
            weight_map[name] = fname
    index = {"metadata": {"total_size": total}, "weight_map": weight_map}
    write_json(os.path.join(out_dir, "model.safetensors.index.json"), index)
    return files


def load_weights(model_dir):
    """name -> tensor (stored dtype) from model.safetensors or the shards an index names."""
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        return read_safetensors(os.path.join(model_dir, "model.safetensors"))
    with open(index_path) as f:
        index = json.load(f)
    weight_map = index["weight_map"]
    out = {}
    for fname in sorted(set(weight_map.values())):
        part = read_safetensors(os.path.join(model_dir, fname))
        for name, t in part.items():
            if weight_map.get(name) != fname:
                raise ValueError(f"{fname} holds {name}, which the index maps to {weight_map.get(name)}")
            out[name] = t
    missing = set(weight_map) - set(out)
    if missing:
        raise ValueError(f"the index names tensors no shard holds: {sorted(missing)}")
    total = sum(len(tensor_bytes(t)) for t in out.values())
    if index.get("metadata", {}).get("total_size") != total:
        raise ValueError(f"index total_size {index.get('metadata')} != {total} bytes of tensors")
    return out


def write_json(path, obj):
    with open(path, "w") as f:
        f.write(json.dumps(obj, indent=2, sort_keys=True) + "\n")


# ----------------------------------------------------------------------------------------------
# config.json and generation_config.json

def architecture(family, seq_cls):
    if seq_cls:
        return ARCH_PREFIX[family] + "ForSequenceClassification"
    return "GPT2LMHeadModel" if family == "gpt2" else ARCH_PREFIX[family] + "ForCausalLM"


def build_config(s):
    """config.json for a resolved spec `s` (a dict, see hf_reference.resolve_spec). Keys are those
    transformers 4.55's save_pretrained writes: every attribute of the model's config class, plus the
    PretrainedConfig ones that differ from their defaults."""
    fam = s["family"]
    eos = s["eos"][0] if len(s["eos"]) == 1 else list(s["eos"])
    c = {"architectures": [architecture(fam, s["seq_cls"])], "model_type": fam,
         "bos_token_id": s["bos"], "eos_token_id": eos, "initializer_range": s["init_std"],
         "torch_dtype": s["dtype"], "transformers_version": TRANSFORMERS_VERSION, "use_cache": True,
         "vocab_size": s["vocab"]}
    if s["pad"] is not None:
        c["pad_token_id"] = s["pad"]
    if s["seq_cls"] and s["num_labels"] != 2:  # the default id2label has two labels
        c["id2label"] = {str(i): f"LABEL_{i}" for i in range(s["num_labels"])}
        c["label2id"] = {f"LABEL_{i}": i for i in range(s["num_labels"])}
    if fam == "gpt2":
        c.update(activation_function="gelu_new", attn_pdrop=0.1, embd_pdrop=0.1,
                 layer_norm_epsilon=s["eps"], n_embd=s["hidden"], n_head=s["heads"],
                 n_inner=s["n_inner"], n_layer=s["layers"], n_positions=s["max_pos"],
                 reorder_and_upcast_attn=False, resid_pdrop=0.1, scale_attn_by_inverse_layer_idx=False,
                 scale_attn_weights=True, summary_activation=None, summary_first_dropout=0.1,
                 summary_proj_to_labels=True, summary_type="cls_index", summary_use_proj=True)
        if not s["tied"]:  # True is both PretrainedConfig's and GPT2Config's default: not written
            c["tie_word_embeddings"] = False
        return c
    c.update(attention_dropout=0.0, hidden_act="silu", hidden_size=s["hidden"],
             intermediate_size=s["intermediate"], max_position_embeddings=s["max_pos"],
             num_attention_heads=s["heads"], num_hidden_layers=s["layers"],
             num_key_value_heads=s["kv_heads"], rms_norm_eps=s["eps"], rope_theta=s["rope_theta"],
             tie_word_embeddings=s["tied"])
    if fam == "llama":
        c.update(attention_bias=s["attention_bias"], head_dim=s["head_dim"], mlp_bias=s["mlp_bias"],
                 pretraining_tp=1, rope_scaling=s["rope_scaling"])
    elif fam == "mistral":
        c.update(head_dim=s["head_dim"], sliding_window=s["window"])
    else:  # qwen2, qwen3
        active = s["window"] is not None
        c.update(max_window_layers=s["max_window_layers"], rope_scaling=s["rope_scaling"],
                 use_sliding_window=active,
                 sliding_window=s["window"] if active else s["inactive_window"])
        if s["layer_types"]:
            c["layer_types"] = ["sliding_attention" if active and i >= s["max_window_layers"]
                                else "full_attention" for i in range(s["layers"])]
        if fam == "qwen3":
            c.update(attention_bias=s["attention_bias"], head_dim=s["head_dim"])
    return c


def build_generation_config(s):
    """generation_config.json as GenerationConfig.from_model_config(config).save_pretrained writes it."""
    g = {"_from_model_config": True, "bos_token_id": s["bos"],
         "eos_token_id": s["eos"][0] if len(s["eos"]) == 1 else list(s["eos"]),
         "transformers_version": TRANSFORMERS_VERSION}
    if s["pad"] is not None:
        g["pad_token_id"] = s["pad"]
    return g


# ----------------------------------------------------------------------------------------------
# names, shapes and init

def state_dict_layout(s):
    """[(name, shape, kind)] in the order the model's modules register their parameters (which is
    also the order shards are cut in). kind: linear, embed, norm, bias, proj (GPT-2's c_proj)."""
    fam, H, L, V = s["family"], s["hidden"], s["layers"], s["vocab"]
    out = []
    if fam == "gpt2":
        p = "" if s["no_prefix"] else "transformer."
        inner = s["n_inner"] or 4 * H
        out += [(p + "wte.weight", (V, H), "embed"), (p + "wpe.weight", (s["max_pos"], H), "embed")]
        for i in range(L):
            h = f"{p}h.{i}."
            out += [(h + "ln_1.weight", (H,), "norm"), (h + "ln_1.bias", (H,), "bias"),
                    (h + "attn.c_attn.weight", (H, 3 * H), "linear"), (h + "attn.c_attn.bias", (3 * H,), "bias"),
                    (h + "attn.c_proj.weight", (H, H), "proj"), (h + "attn.c_proj.bias", (H,), "bias"),
                    (h + "ln_2.weight", (H,), "norm"), (h + "ln_2.bias", (H,), "bias"),
                    (h + "mlp.c_fc.weight", (H, inner), "linear"), (h + "mlp.c_fc.bias", (inner,), "bias"),
                    (h + "mlp.c_proj.weight", (inner, H), "proj"), (h + "mlp.c_proj.bias", (H,), "bias")]
        out += [(p + "ln_f.weight", (H,), "norm"), (p + "ln_f.bias", (H,), "bias")]
    else:
        D, nq, nkv, inter = s["head_dim"], s["heads"], s["kv_heads"], s["intermediate"]
        qkv_bias = fam == "qwen2" or (fam in ("llama", "qwen3") and s["attention_bias"])
        o_bias = fam in ("llama", "qwen3") and s["attention_bias"]
        mlp_bias = fam == "llama" and s["mlp_bias"]
        out.append(("model.embed_tokens.weight", (V, H), "embed"))
        for i in range(L):
            a = f"model.layers.{i}.self_attn."
            for proj, rows in (("q_proj", nq * D), ("k_proj", nkv * D), ("v_proj", nkv * D)):
                out.append((a + proj + ".weight", (rows, H), "linear"))
                if qkv_bias:
                    out.append((a + proj + ".bias", (rows,), "bias"))
            out.append((a + "o_proj.weight", (H, nq * D), "linear"))
            if o_bias:
                out.append((a + "o_proj.bias", (H,), "bias"))
            if fam == "qwen3":
                out += [(a + "q_norm.weight", (D,), "norm"), (a + "k_norm.weight", (D,), "norm")]
            m = f"model.layers.{i}.mlp."
            for proj, shape in (("gate_proj", (inter, H)), ("up_proj", (inter, H)), ("down_proj", (H, inter))):
                out.append((m + proj + ".weight", shape, "linear"))
                if mlp_bias:
                    out.append((m + proj + ".bias", (shape[0],), "bias"))
            out += [(f"model.layers.{i}.input_layernorm.weight", (H,), "norm"),
                    (f"model.layers.{i}.post_attention_layernorm.weight", (H,), "norm")]
        out.append(("model.norm.weight", (H,), "norm"))
    if s["seq_cls"]:
        out.append(("score.weight", (s["num_labels"], H), "linear"))
    elif not s["tied"]:
        out.append(("lm_head.weight", (V, H), "linear"))
    return out


def random_weights(s):
    """[(name, f32 tensor)]: transformers' init (normal(0, initializer_range) for linears and
    embeddings; GPT-2's c_proj at initializer_range / sqrt(2 n_layer)) except that norm weights are
    1 + 0.1 N(0,1) and every bias 0.1 N(0,1) instead of ones and zeros, so a mistake in either shows."""
    g = torch.Generator().manual_seed(s["seed"])
    std = s["init_std"]
    out = []
    for name, shape, kind in state_dict_layout(s):
        z = torch.randn(shape, generator=g, dtype=torch.float32)
        if kind in ("linear", "embed"):
            t = z * std
        elif kind == "proj":
            t = z * (std / math.sqrt(2 * s["layers"]))
        elif kind == "norm":
            t = 1.0 + 0.1 * z
        else:
            t = 0.1 * z
        out.append((name, t))
    return out


def write_checkpoint(out_dir, s, weights=None):
    """Writes config.json, generation_config.json and the weights (drawn in f32, cast to s["dtype"]).
    Returns the list of weight files."""
    os.makedirs(out_dir, exist_ok=True)
    for name in os.listdir(out_dir):  # a reused directory must not keep another layout's files
        if name.startswith("model") and (name.endswith(".safetensors") or name.endswith(".index.json")):
            os.remove(os.path.join(out_dir, name))
    weights = weights if weights is not None else random_weights(s)
    dtype = DTYPES[s["dtype"]][0]
    write_json(os.path.join(out_dir, "config.json"), build_config(s))
    write_json(os.path.join(out_dir, "generation_config.json"), build_generation_config(s))
    return save_weights(out_dir, [(n, t.to(dtype)) for n, t in weights], s["shards"])


def read_checkpoint(model_dir):
    """(config, generation_config or {}, name -> tensor in its stored dtype)."""
    with open(os.path.join(model_dir, "config.json")) as f:
        config = json.load(f)
    gen_path = os.path.join(model_dir, "generation_config.json")
    gen = {}
    if os.path.exists(gen_path):
        with open(gen_path) as f:
            gen = json.load(f)
    return config, gen, load_weights(model_dir)
