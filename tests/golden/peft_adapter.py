"""LoRA adapters in PEFT's layout for hf_reference.py: read and check one against its base model,
apply it as an additive path in hf_model.Model, merge it into a full checkpoint, write a random one.
Written from PEFT's source (huggingface/peft: tuners/lora/layer.py, tuners/tuners_utils.py,
utils/save_and_load.py, utils/other.py, config.py), not from genesis's C++.

An adapter directory holds adapter_config.json and adapter_model.safetensors. Module paths are the
Hugging Face model's module names (GPT-2's carry "transformer." even where the checkpoint's tensor
names do not), and every key starts with "base_model.model.":
    base_model.model.<module>.lora_A.weight   (r, in)    A LoRA-adapted nn.Linear or GPT-2 Conv1D;
    base_model.model.<module>.lora_B.weight   (out, r)   the same shapes for both (in/out features).
    base_model.model.<module>.<param>         the base's shape: modules_to_save, the whole module.
A module is adapted iff target_modules matches it (a list: equal to, or a "."-suffix of, its path; a
string: re.fullmatch, or "all-linear") and no modules_to_save entry covers it. Then
    y = base(x) + scale * (x @ A^T) @ B^T,  scale = lora_alpha / r (use_rslora: lora_alpha / sqrt(r)),
and merged, W + scale * B @ A for nn.Linear (out, in), W + scale * (B @ A)^T for Conv1D (in, out).
lora_dropout is ignored (eval). Not implemented (refused with exit 2): DoRA, lora_bias, bias other
than "none", rank/alpha patterns, layers_to_transform, exclude_modules, embedding LoRA, inits that
change the base (PiSSA, OLoRA, ...), and modules_to_save on a tied embedding or lm_head.
"""
import collections
import json
import math
import os
import re

import torch

import hf_checkpoint as ckpt
from hf_model import Model

CONFIG_NAME = "adapter_config.json"
WEIGHTS_NAME = "adapter_model.safetensors"
PREFIX = "base_model.model."  # PeftModel -> LoraModel -> the transformers model
ALL_LINEAR = "all-linear"
HEADS = ("lm_head", "score")  # the output heads all-linear leaves out
MIN_TARGET_MODULES_FOR_OPTIMIZATION = 20  # peft/utils/constants.py

# The keys PEFT's save_pretrained writes for every LoRA config (asdict of LoraConfig) that this
# reader needs, with their JSON types.
NONE = type(None)
REQUIRED = {"peft_type": (str,), "task_type": (str, NONE), "r": (int,), "lora_alpha": (int, float),
            "lora_dropout": (int, float), "target_modules": (list, str), "use_rslora": (bool,),
            "modules_to_save": (list, NONE), "fan_in_fan_out": (bool,), "bias": (str,),
            "base_model_name_or_path": (str, NONE), "init_lora_weights": (bool, str),
            "inference_mode": (bool,)}
# LoraConfig fields that change what is adapted or how: accepted only at their defaults.
AT_DEFAULT = {"use_dora": (False,), "lora_bias": (False,), "rank_pattern": ({}, None),
              "alpha_pattern": ({}, None), "layers_to_transform": (None,), "layers_pattern": (None, [], ""),
              "exclude_modules": (None, []), "target_parameters": (None, []), "trainable_token_indices": (None,),
              "layer_replication": (None,), "alora_invocation_tokens": (None,), "use_qalora": (False,),
              "megatron_config": (None,), "use_bdlora": (None,), "arrow_config": (None,),
              "kasa_config": (None,), "monteclora_config": (None,), "velora_config": (None,)}
# The other LoraConfig/PeftConfig fields: they only matter while training or initialising.
IGNORED = {"auto_mapping", "revision", "peft_version", "megatron_core", "loftq_config", "eva_config",
           "corda_config", "lora_ga_config", "qalora_group_size", "ensure_weight_tying"}
# Inits that leave the base weights alone; PiSSA, OLoRA, CorDA, LoftQ, EVA, ... rewrite W at load.
PLAIN_INITS = (True, False, "gaussian")


class AdapterError(ValueError):
    """A bad adapter or one this reference does not implement: hf_reference.py exits 2 with it."""


# ----------------------------------------------------------------------------------------------
# the base model's modules, by their Hugging Face paths

# kind: linear, conv1d, embedding, norm (RMSNorm, LayerNorm), container (a module of modules).
# ckpt: the module's name in the checkpoint (and in Model.lora); params: param -> checkpoint tensor.
Module = collections.namedtuple("Module", "kind ckpt n_in n_out params tied")


def hf_path(model, name):
    """The Hugging Face path of a checkpoint name: GPT-2's module is always model.transformer, also
    when the file's names lack "transformer." (the hub's gpt2)."""
    if model.arch.family == "gpt2" and not model.prefix and not name.startswith(HEADS):
        return "transformer." + name
    return name


def module_table(model):
    """path -> Module for every module of the model with parameters, the containers above them and,
    when the head is tied, lm_head (a module of its own in transformers, its weight the embedding's)."""
    table, params = {}, collections.defaultdict(dict)
    for name in model.w:
        path, param = hf_path(model, name).rsplit(".", 1)
        params[path][param] = name
    for path, ps in params.items():
        ckpt_path = ps[next(iter(ps))].rsplit(".", 1)[0]
        leaf, w = path.rsplit(".", 1)[-1], model.w.get(ps.get("weight"))
        if leaf in ("embed_tokens", "wte", "wpe"):
            table[path] = Module("embedding", ckpt_path, None, None, ps, False)
        elif w is not None and w.dim() == 2 and model.arch.family == "gpt2" and leaf not in HEADS:
            table[path] = Module("conv1d", ckpt_path, w.shape[0], w.shape[1], ps, False)  # W (in, out)
        elif w is not None and w.dim() == 2:
            table[path] = Module("linear", ckpt_path, w.shape[1], w.shape[0], ps, False)  # W (out, in)
        else:
            table[path] = Module("norm", ckpt_path, None, None, ps, False)
    if model.arch.task == "lm" and model.arch.tied:
        V, C = model.head.shape
        table["lm_head"] = Module("linear", "lm_head", C, V, {"weight": model.head_name}, True)
    for path in list(table):
        parts = path.split(".")
        for i in range(1, len(parts)):
            table.setdefault(".".join(parts[:i]), Module("container", None, None, None, {}, False))
    return table


def under(table, path):
    """The modules with parameters at or below `path`."""
    return [p for p, m in table.items() if m.kind != "container" and (p == path or p.startswith(path + "."))]


# ----------------------------------------------------------------------------------------------
# which modules a config adapts and saves (tuners_utils.check_target_module_exists,
# _maybe_include_all_linear_layers; other._set_trainable)

def all_linear(table):
    """PEFT's all-linear: every nn.Linear and Conv1D but the output head (lm_head, or score)."""
    return sorted(p for p, m in table.items() if m.kind in ("linear", "conv1d") and p not in HEADS)


def is_targeted(cfg, path):
    mts = cfg.get("modules_to_save") or []
    if any(re.match(rf"(^|.*\.){m}($|\..*)", path) for m in mts):
        return False  # a module to save is never also adapted
    t = cfg["target_modules"]
    if isinstance(t, str):
        return re.fullmatch(t, path) is not None
    return path in t or any(path.endswith("." + k) for k in t)


def adapted_modules(cfg, table):
    """The paths PEFT puts a LoRA layer on, refusing what it cannot adapt or this reference leaves out."""
    if isinstance(cfg["target_modules"], str) and cfg["target_modules"].lower() == ALL_LINEAR:
        cfg = dict(cfg, target_modules=all_linear(table))
    paths = sorted(p for p in table if p and is_targeted(cfg, p))
    if not paths:
        t = cfg["target_modules"]
        shown = t if isinstance(t, str) or len(t) <= 4 else t[:4] + [f"... {len(t)} in all"]
        besides = " outside modules_to_save" if cfg.get("modules_to_save") else ""
        raise AdapterError(f"target_modules {shown} match no module of the model{besides}")
    for p in paths:
        if table[p].kind not in ("linear", "conv1d"):
            what = "embedding LoRA is not implemented here" if table[p].kind == "embedding" else "PEFT cannot adapt it"
            raise AdapterError(f"target_modules match {p} (kind {table[p].kind}): {what}")
    return paths


def saved_modules(cfg, table):
    """The paths modules_to_save wraps: PEFT's plain str.endswith over every module name."""
    mts = cfg.get("modules_to_save") or []
    paths = sorted(p for p in table if p and any(p.endswith(m) for m in mts))
    # PEFT would save a copy of one and leave the other on the shared tensor: an untied model.
    tied = table["lm_head"].params["weight"] if "lm_head" in table and table["lm_head"].tied else None
    for p in paths:
        if any(tied in table[q].params.values() for q in under(table, p)):
            raise AdapterError(f"modules_to_save {p}: its weight is tied (embedding = lm_head); "
                               "saving it is not implemented by this reference")
    return paths


def minimal_target_modules(targets, table):
    """tuners_utils._find_minimal_target_modules: the shortest "."-suffixes that pick out `targets`
    from the other module names, which PEFT writes instead of a long list."""
    def suffixes(s):
        parts = s.split(".")
        return [".".join(parts[i:]) for i in range(len(parts))][::-1]
    other = {s for p in table if p not in targets for s in suffixes(p)}
    required = set()
    for item, sfx in sorted(((t, suffixes(t)) for t in targets), key=lambda pair: pair[1]):
        for s in sfx:
            if s in required or s in other:
                continue
            if not any(item.endswith("." + q) for q in required):
                required.add(s)
                break
    return sorted(required) if required else sorted(targets)


# ----------------------------------------------------------------------------------------------
# reading and checking

def check_config(cfg, task):
    """adapter_config.json: PEFT's keys with their types, a LoRA this reference implements, and a
    task_type that fits the base (CAUSAL_LM for a causal LM, SEQ_CLS for a classifier)."""
    if not isinstance(cfg, dict):
        raise AdapterError(f"{CONFIG_NAME} is not a JSON object")
    for key, types in REQUIRED.items():
        if key not in cfg:
            raise AdapterError(f"{CONFIG_NAME} has no {key}")
        v = cfg[key]
        if not isinstance(v, types) or (isinstance(v, bool) and bool not in types):
            names = " or ".join("null" if t is NONE else t.__name__ for t in types)
            raise AdapterError(f"{CONFIG_NAME}: {key} is {json.dumps(v)}, not of type {names}")
    for key, v in cfg.items():
        if key in AT_DEFAULT and v not in AT_DEFAULT[key]:
            raise AdapterError(f"{CONFIG_NAME}: {key} {json.dumps(v)} is not implemented by this reference")
        if key not in REQUIRED and key not in AT_DEFAULT and key not in IGNORED:
            raise AdapterError(f"{CONFIG_NAME}: {key} is not a LoraConfig field")
    if cfg["peft_type"] != "LORA":
        raise AdapterError(f"peft_type is {cfg['peft_type']!r}, not 'LORA'")
    if cfg["bias"] != "none":
        raise AdapterError(f"bias is {cfg['bias']!r}: only 'none' is implemented (no bias tensors)")
    want = "SEQ_CLS" if task == "score" else "CAUSAL_LM"
    if cfg["task_type"] not in (None, want):
        raise AdapterError(f"task_type {cfg['task_type']!r} does not fit the base, which wants {want!r}")
    if cfg["r"] <= 0:
        raise AdapterError(f"r is {cfg['r']}, not a positive integer")
    if not 0 <= cfg["lora_dropout"] <= 1:
        raise AdapterError(f"lora_dropout {cfg['lora_dropout']} is not a probability")
    if cfg["init_lora_weights"] not in PLAIN_INITS:
        raise AdapterError(f"init_lora_weights {cfg['init_lora_weights']!r} changes the base weights "
                           "at load: not implemented")
    for key in ("target_modules", "modules_to_save"):
        if isinstance(cfg[key], list) and not all(isinstance(s, str) for s in cfg[key]):
            raise AdapterError(f"{CONFIG_NAME}: {key} must hold strings")
    patterns = [cfg["target_modules"]] if isinstance(cfg["target_modules"], str) else []
    for pattern in patterns + (cfg["modules_to_save"] or []):
        try:  # PEFT uses both as regular expressions
            re.compile(pattern)
        except re.error as e:
            raise AdapterError(f"{CONFIG_NAME}: {pattern!r} is not a regular expression: {e}")


def scale_of(cfg):
    r, alpha = cfg["r"], cfg["lora_alpha"]
    return alpha / math.sqrt(r) if cfg["use_rslora"] else alpha / r


Adapter = collections.namedtuple("Adapter", "config scale lora saved table")
# lora: path -> (A (r, in), B (out, r)) as stored; saved: checkpoint tensor name -> tensor as stored.


def read_adapter(adapter_dir, model):
    """The adapter in `adapter_dir` checked against `model` (an hf_model.Model) as PEFT would load it:
    every key names a module or parameter of the model, every adapted module has both A and B of the
    right shapes, every module to save is there whole, and nothing else is."""
    try:
        with open(os.path.join(adapter_dir, CONFIG_NAME)) as f:
            cfg = json.load(f)
    except json.JSONDecodeError as e:
        raise AdapterError(f"{CONFIG_NAME}: {e}")
    check_config(cfg, model.arch.task)
    path = os.path.join(adapter_dir, WEIGHTS_NAME)
    if not os.path.exists(path):
        raise AdapterError(f"{adapter_dir} has no {WEIGHTS_NAME} (adapter_model.bin is not read here)")
    tensors = ckpt.read_safetensors(path)
    table = module_table(model)
    adapted, to_save = adapted_modules(cfg, table), saved_modules(cfg, table)
    params = {f"{p}.{k}": (p, name) for p, m in table.items() for k, name in m.params.items()}
    expected_saved = {f"{q}.{k}" for p in to_save for q in under(table, p) for k in table[q].params}
    lora, saved = collections.defaultdict(dict), {}
    for key, t in sorted(tensors.items()):
        if not key.startswith(PREFIX):
            raise AdapterError(f"{key} does not start with {PREFIX!r}")
        rest = key[len(PREFIX):]
        m = re.fullmatch(r"(.+)\.lora_([AB])\.weight", rest)
        if m:
            mod = table.get(m[1])
            if mod is None or mod.kind == "container":
                raise AdapterError(f"{key} names no module of the {model.arch.family} model")
            if m[1] not in adapted:
                raise AdapterError(f"{key}: target_modules do not match {m[1]}, so PEFT would not load it")
            lora[m[1]][m[2]] = t
        elif rest in params:
            if rest not in expected_saved:
                raise AdapterError(f"{key} is a base parameter that modules_to_save "
                                   f"{cfg['modules_to_save'] or []} does not cover")
            base = model.w[params[rest][1]]
            if tuple(t.shape) != tuple(base.shape):
                raise AdapterError(f"{key} has shape {list(t.shape)}, the base's is {list(base.shape)}")
            saved[params[rest][1]] = t
        elif "lora_" in rest:
            raise AdapterError(f"{key}: only lora_A.weight and lora_B.weight are implemented "
                               "(no DoRA, lora_bias or embedding LoRA)")
        else:
            raise AdapterError(f"{key} names no module or parameter of the {model.arch.family} model")
        if not t.is_floating_point():
            raise AdapterError(f"{key} is {t.dtype}, not a float tensor")
    for p in adapted:
        got, m = lora.get(p, {}), table[p]
        if not got:
            raise AdapterError(f"target module {p} has no lora_A/lora_B in {WEIGHTS_NAME}")
        for ab, other in (("A", "B"), ("B", "A")):
            if ab in got and other not in got:
                raise AdapterError(f"{PREFIX}{p}: lora_{ab} without lora_{other}")
        r = cfg["r"]
        for ab, shape in (("A", (r, m.n_in)), ("B", (m.n_out, r))):
            if tuple(got[ab].shape) != shape:
                raise AdapterError(f"{PREFIX}{p}.lora_{ab}.weight has shape {list(got[ab].shape)} where "
                                   f"r={r}, in={m.n_in}, out={m.n_out} want {list(shape)}")
    missing = sorted(expected_saved - {k[len(PREFIX):] for k in tensors})
    if missing:
        raise AdapterError(f"modules_to_save: {PREFIX}{missing[0]} is missing ({len(missing)} in all)")
    return Adapter(cfg, scale_of(cfg), {p: (ab["A"], ab["B"]) for p, ab in lora.items()}, saved, table)


def summary(adapter_dir, adapter):
    cfg = adapter.config
    short = collections.Counter(p.rsplit(".", 1)[-1] for p in adapter.lora)
    kinds = ", ".join(f"{n} x{c}" for n, c in sorted(short.items()))
    saved = saved_modules(cfg, adapter.table)
    return (f"{adapter_dir}: LORA r={cfg['r']} lora_alpha={cfg['lora_alpha']} scale={adapter.scale:g}"
            f"{' (rslora)' if cfg['use_rslora'] else ''}, {len(adapter.lora)} modules adapted ({kinds}), "
            f"modules_to_save {saved or 'none'}, {2 * len(adapter.lora) + len(adapter.saved)} tensors")


# ----------------------------------------------------------------------------------------------
# using one

def apply(model, adapter):
    """The additive path: Model.linear/conv1d/project add scale * (x @ A^T) @ B^T for each adapted
    module, and the modules to save replace the base's tensors. Nothing is merged."""
    for path, (A, B) in adapter.lora.items():
        model.lora[adapter.table[path].ckpt] = (A.float(), B.float(), adapter.scale)
    for name, t in adapter.saved.items():
        model.w[name] = t.float()
    model.head = model.w[model.head_name]


def merge(model_dir, adapter_dir, out_dir):
    """A full checkpoint of base + adapter: W + scale * B @ A (Conv1D: its transpose) in f32, then
    the base tensor's dtype; modules to save copied in; config files as the base's. Returns the
    weight files written."""
    if os.path.realpath(model_dir) == os.path.realpath(out_dir):
        raise AdapterError("--out must not be the base model's directory")
    config, gen, raw = ckpt.read_checkpoint(model_dir)
    adapter = read_adapter(adapter_dir, Model(config, gen, raw))
    for path, (A, B) in adapter.lora.items():
        m = adapter.table[path]
        if m.tied:
            raise AdapterError(f"{path} is tied to the embedding: merging into it is not implemented")
        name = m.params["weight"]
        delta = adapter.scale * (B.float() @ A.float())  # (out, in)
        if m.kind == "conv1d":
            delta = delta.t()  # Conv1D keeps W as (in, out)
        raw[name] = (raw[name].float() + delta).to(raw[name].dtype)
    for name, t in adapter.saved.items():
        raw[name] = t.to(raw[name].dtype)
    os.makedirs(out_dir, exist_ok=True)
    ckpt.write_json(os.path.join(out_dir, "config.json"), config)
    if gen:
        ckpt.write_json(os.path.join(out_dir, "generation_config.json"), gen)
    return save_like(model_dir, out_dir, raw)


def save_like(model_dir, out_dir, tensors):
    """The tensors in the base's file layout: one model.safetensors, or the same shards and index."""
    for name in os.listdir(out_dir):  # as write_checkpoint: no other layout's weight files left over
        if name.startswith("model") and (name.endswith(".safetensors") or name.endswith(".index.json")):
            os.remove(os.path.join(out_dir, name))
    index_path = os.path.join(model_dir, "model.safetensors.index.json")
    if not os.path.exists(index_path):
        ckpt.write_safetensors(os.path.join(out_dir, "model.safetensors"), tensors)
        return ["model.safetensors"]
    with open(index_path) as f:
        weight_map = json.load(f)["weight_map"]
    files = sorted(set(weight_map.values()))
    for fname in files:
        ckpt.write_safetensors(os.path.join(out_dir, fname),
                               {n: t for n, t in tensors.items() if weight_map[n] == fname})
    total = sum(len(ckpt.tensor_bytes(t)) for t in tensors.values())
    ckpt.write_json(os.path.join(out_dir, "model.safetensors.index.json"),
                    {"metadata": {"total_size": total}, "weight_map": weight_map})
    return files


# ----------------------------------------------------------------------------------------------
# writing a random one

def make_config(model, base_name, r, alpha, targets, rslora, modules_to_save):
    """adapter_config.json as PEFT's save_pretrained writes it for this LoraConfig on this base, less
    the fields that only matter while training. target_modules: the list as given, or all-linear
    expanded as PEFT does before saving (module paths; shortest suffixes from 20 modules on)."""
    seq_cls = model.arch.task == "score"
    table = module_table(model)
    mts = list(modules_to_save) if modules_to_save else None
    if seq_cls:  # PeftModelForSequenceClassification always adds its head names
        mts = (mts or []) + ["classifier", "score"]
    for t in targets:  # PEFT minds only when none matches; a typo here should not pass
        if t != ALL_LINEAR and not any(p == t or p.endswith("." + t) for p in table):
            raise AdapterError(f"--targets {t} names no module of the model")
    if targets == [ALL_LINEAR]:
        names = [p for p in all_linear(table) if is_targeted({"modules_to_save": mts, "target_modules": [p]}, p)]
        targets = names if len(names) < MIN_TARGET_MODULES_FOR_OPTIMIZATION else minimal_target_modules(names, table)
    return {"peft_type": "LORA", "task_type": "SEQ_CLS" if seq_cls else "CAUSAL_LM",
            "base_model_name_or_path": base_name, "inference_mode": True,
            "r": r, "lora_alpha": alpha, "lora_dropout": 0.0, "use_rslora": rslora,
            "target_modules": sorted(set(targets)), "modules_to_save": mts,
            "fan_in_fan_out": model.arch.family == "gpt2",  # PEFT turns it on for Conv1D targets
            "bias": "none", "init_lora_weights": True,
            "use_dora": False, "lora_bias": False, "rank_pattern": {}, "alpha_pattern": {},
            "layers_to_transform": None, "layers_pattern": None, "exclude_modules": None}


def random_adapter(model, cfg, seed):
    """{key: tensor}: A ~ N(0, 1/in) and B ~ N(0, 0.05^2) in f32 (PEFT upcasts adapter weights of a
    bf16/f16 base to f32), both non-zero so that the adapter shows; modules to save as the base's
    tensors plus 0.1 N(0,1), in the base's dtype."""
    g = torch.Generator().manual_seed(seed)
    table = module_table(model)
    out = {}
    for p in adapted_modules(cfg, table):
        m = table[p]
        out[f"{PREFIX}{p}.lora_A.weight"] = torch.randn(cfg["r"], m.n_in, generator=g) / math.sqrt(m.n_in)
        out[f"{PREFIX}{p}.lora_B.weight"] = 0.05 * torch.randn(m.n_out, cfg["r"], generator=g)
    for p in saved_modules(cfg, table):
        for q in under(table, p):
            for k, name in table[q].params.items():
                base = model.w[name]
                out[f"{PREFIX}{q}.{k}"] = (base + 0.1 * torch.randn(base.shape, generator=g)).to(model.dtypes[name])
    return out


def write_adapter(out_dir, cfg, tensors):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, CONFIG_NAME), "w") as f:
        f.write(json.dumps(cfg, indent=2, sort_keys=True))  # as PeftConfigMixin.save_pretrained
    ckpt.write_safetensors(os.path.join(out_dir, WEIGHTS_NAME), tensors)


def make_adapter(model_dir, out_dir, r, alpha, targets, rslora=False, modules_to_save=None, seed=0):
    """Writes a random adapter for the base in `model_dir` and reads it back through read_adapter.
    Returns that Adapter."""
    model = Model.load(model_dir)
    cfg = make_config(model, model_dir, r, alpha, targets, rslora, modules_to_save)
    check_config(cfg, model.arch.task)
    write_adapter(out_dir, cfg, random_adapter(model, cfg, seed))
    return read_adapter(out_dir, model)
