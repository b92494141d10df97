#!/usr/bin/env python3
"""An independent reference for genesis's Hugging Face checkpoints: writes tiny random checkpoints
in transformers' exact layout (config.json, generation_config.json, safetensors, optionally sharded)
and computes log-probs, greedy generations and classifier scores from such a directory in float32
on the CPU, in plain torch ops written from the model cards and transformers' modeling_*.py (not
from genesis's C++). It leaves out batching, attention masks, training and every rope_scaling type
but llama3 and linear. Helpers: hf_checkpoint.py (files), hf_model.py (math), peft_adapter.py (LoRA
adapters), hf_selfcheck.py.

    hf_reference.py make --family llama|mistral|qwen2|qwen3|gpt2 --out DIR [--seed S]
        [--dtype float32|bfloat16|float16] [--shards N] [--tied|--untied] [--hidden 64 --layers 2
        --heads 4 --kv-heads 2 --head-dim D --intermediate 128 --vocab 320 --max-pos 256]
        [--window W [--max-window-layers M] | --inactive-window W] [--no-layer-types]
        [--rope-scaling llama3 [--rope-factor 8 --rope-original-max 64]] [--rope-theta T]
        [--attention-bias] [--mlp-bias] [--sequence-classification [--num-labels 2]]
        [--bos ID] [--eos ID[,ID...]] [--pad ID] [--rms-norm-eps E] [--initializer-range R]
        [--no-prefix]
    hf_reference.py logprobs --model DIR --input IDS.jsonl [--adapter ADIR]   # {"logprobs": [log p(ids[t]|ids[<t]), t=1..n-1]}
    hf_reference.py generate --model DIR --input IDS.jsonl --max-new-tokens N [--adapter ADIR]   # {"ids": [new tokens]}
    hf_reference.py score    --model DIR --input IDS.jsonl [--adapter ADIR]   # {"score": [one per label]}
    hf_reference.py make-adapter --model DIR --out ADIR --r 4 --alpha 8 --targets q_proj,v_proj|all-linear
        [--rslora] [--modules-to-save score[,...]] [--seed S]   # a random PEFT LoRA adapter (A, B != 0)
    hf_reference.py check-adapter --adapter ADIR --model DIR   # one line: modules adapted, r, tensors
    hf_reference.py merge --model DIR --adapter ADIR --out DIR2   # a full checkpoint with the adapter merged
    hf_reference.py selfcheck                                # exit 1 on any failed check

Each input line is {"ids": [...]}; each output line answers one input line. Exit code 3 when torch
is missing (the C++ tests then skip), 2 for a bad command line, checkpoint or adapter.

--adapter applies a LoRA adapter in PEFT's layout (peft_adapter.py) as an additive path, y = base(x) +
scale * (x @ A^T) @ B^T, scale = lora_alpha/r (use_rslora: lora_alpha/sqrt(r)); merge computes the
same model the other way, W + scale * B @ A (GPT-2's Conv1D: + scale * (B @ A)^T). An adapter
directory holds adapter_config.json (peft_type "LORA", task_type, r, lora_alpha, lora_dropout,
target_modules, use_rslora, modules_to_save, fan_in_fan_out, bias "none", base_model_name_or_path,
init_lora_weights, inference_mode) and adapter_model.safetensors with, per adapted module M (its
Hugging Face module path: GPT-2's always start "transformer.", with or without --no-prefix),
    base_model.model.M.lora_A.weight (r, in)    base_model.model.M.lora_B.weight (out, r)
(for Conv1D too: in/out are its features, W is (in, out)), and every parameter P of a module that
modules_to_save names (a *ForSequenceClassification base always saves score) as base_model.model.P,
e.g. base_model.model.score.weight.

Tensor names (I = layer, D = head_dim, Hq/Hkv = attention/key-value heads, C = hidden, F =
intermediate, V = vocab; nn.Linear weights are (out, in)):

  llama, mistral, qwen2, qwen3 (*ForCausalLM; *ForSequenceClassification has score.weight instead
  of lm_head.weight):
    model.embed_tokens.weight                          (V, C)
    model.layers.I.self_attn.q_proj.weight             (Hq*D, C)   .bias (Hq*D)  qwen2; llama/qwen3 with attention_bias
    model.layers.I.self_attn.k_proj.weight             (Hkv*D, C)  .bias (Hkv*D) likewise
    model.layers.I.self_attn.v_proj.weight             (Hkv*D, C)  .bias (Hkv*D) likewise
    model.layers.I.self_attn.o_proj.weight             (C, Hq*D)   .bias (C)     llama/qwen3 with attention_bias
    model.layers.I.self_attn.q_norm.weight             (D)         qwen3 only
    model.layers.I.self_attn.k_norm.weight             (D)         qwen3 only
    model.layers.I.mlp.gate_proj.weight                (F, C)      .bias (F) llama with mlp_bias
    model.layers.I.mlp.up_proj.weight                  (F, C)      .bias (F) likewise
    model.layers.I.mlp.down_proj.weight                (C, F)      .bias (C) likewise
    model.layers.I.input_layernorm.weight              (C)
    model.layers.I.post_attention_layernorm.weight     (C)
    model.norm.weight                                  (C)
    lm_head.weight                                     (V, C)      only when tie_word_embeddings is false
    score.weight                                       (num_labels, C)  *ForSequenceClassification

  gpt2 (GPT2LMHeadModel as save_pretrained writes it; --no-prefix drops "transformer." as the
  hub's openai-community/gpt2 files do; Conv1D weights are (in, out), x @ W + b; F = n_inner or 4C):
    transformer.wte.weight (V, C)            transformer.wpe.weight (n_positions, C)
    transformer.h.I.ln_1.weight (C)          transformer.h.I.ln_1.bias (C)
    transformer.h.I.attn.c_attn.weight (C, 3C)   transformer.h.I.attn.c_attn.bias (3C)   [q | k | v]
    transformer.h.I.attn.c_proj.weight (C, C)    transformer.h.I.attn.c_proj.bias (C)
    transformer.h.I.ln_2.weight (C)          transformer.h.I.ln_2.bias (C)
    transformer.h.I.mlp.c_fc.weight (C, F)   transformer.h.I.mlp.c_fc.bias (F)
    transformer.h.I.mlp.c_proj.weight (F, C) transformer.h.I.mlp.c_proj.bias (C)
    transformer.ln_f.weight (C)              transformer.ln_f.bias (C)
    lm_head.weight (V, C)  only when untied ("tie_word_embeddings": false in config.json)
    score.weight (num_labels, C)  GPT2ForSequenceClassification
  The reader also ignores h.I.attn.bias / attn.masked_bias, the causal-mask buffers older files hold.
"""
import argparse
import json
import sys

try:
    import torch  # noqa: F401  (the helpers need it; this is where its absence is reported)
except ImportError:
    print("torch is not installed", file=sys.stderr)
    sys.exit(3)

import hf_checkpoint as ckpt
import peft_adapter
from hf_model import Model

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gpt2")


class UsageError(Exception):
    pass


def resolve_spec(a):
    """The make options with each family's defaults filled in and its impossible options refused.
    Returns the dict hf_checkpoint.build_config and random_weights read."""
    fam = a.family
    llama_like = fam != "gpt2"

    def refuse(flag, families):
        if fam in families:
            raise UsageError(f"{flag} does not apply to {fam}")

    if a.kv_heads is not None or a.head_dim is not None:
        refuse("--kv-heads/--head-dim", ("gpt2",))
    if a.window is not None:
        refuse("--window", ("llama", "gpt2"))
    if a.max_window_layers is not None or a.inactive_window is not None or a.no_layer_types:
        refuse("--max-window-layers/--inactive-window/--no-layer-types", ("llama", "mistral", "gpt2"))
    if a.inactive_window is not None and a.window is not None:
        raise UsageError("--window and --inactive-window exclude each other")
    if a.rope_scaling is not None or a.rope_theta is not None:
        refuse("--rope-scaling/--rope-theta", ("gpt2",))
    if a.rope_scaling is not None:
        refuse("--rope-scaling", ("mistral",))  # MistralConfig has no rope_scaling
    if a.attention_bias:
        refuse("--attention-bias", ("mistral", "qwen2", "gpt2"))
    if a.mlp_bias:
        refuse("--mlp-bias", ("mistral", "qwen2", "qwen3", "gpt2"))
    if a.no_prefix:
        refuse("--no-prefix", ("llama", "mistral", "qwen2", "qwen3"))

    heads = a.heads
    kv_heads = a.kv_heads if a.kv_heads is not None else (2 if llama_like else heads)
    if a.hidden % heads or heads % kv_heads:
        raise UsageError("--hidden must divide by --heads and --heads by --kv-heads")
    default_dim = a.hidden // heads * (2 if fam == "qwen3" else 1)  # Qwen3's head_dim is its own
    head_dim = a.head_dim if a.head_dim is not None else default_dim
    if fam == "qwen2" and head_dim != a.hidden // heads:
        raise UsageError("Qwen2Config has no head_dim: it is hidden/heads")
    if head_dim % 2:
        raise UsageError("--head-dim must be even for RoPE")
    if a.rope_scaling == "llama3":
        rope_scaling = {"factor": float(a.rope_factor), "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                        "original_max_position_embeddings": a.rope_original_max, "rope_type": "llama3"}
    else:
        rope_scaling = None
    theta = a.rope_theta
    if theta is None:
        theta = {"llama": 500000.0 if rope_scaling else 10000.0, "mistral": 1000000.0,
                 "qwen2": 1000000.0, "qwen3": 1000000.0}.get(fam)
    eps = a.rms_norm_eps if a.rms_norm_eps is not None else (1e-6 if fam.startswith("qwen") else 1e-5)
    special = a.vocab - 1 if fam == "gpt2" else None  # GPT-2's <|endoftext|> is its last id
    bos = a.bos if a.bos is not None else (special if fam == "gpt2" else 1)
    eos = [int(t) for t in a.eos.split(",")] if a.eos else [special if fam == "gpt2" else 2]
    pad = a.pad if a.pad is not None else (0 if a.sequence_classification else None)
    for name, t in [("bos", bos), ("pad", pad)] + [("eos", t) for t in eos]:
        if t is not None and not 0 <= t < a.vocab:
            raise UsageError(f"{name} id {t} is outside the vocabulary")
    intermediate = a.intermediate if a.intermediate is not None else (4 * a.hidden if fam == "gpt2" else 128)
    tied = a.tied if a.tied is not None else fam == "gpt2"
    if a.shards < 1:
        raise UsageError("--shards must be at least 1")
    return {
        "family": fam, "seed": a.seed, "dtype": a.dtype, "shards": a.shards, "tied": tied,
        "hidden": a.hidden, "layers": a.layers, "heads": heads, "kv_heads": kv_heads,
        "head_dim": head_dim, "intermediate": intermediate, "vocab": a.vocab, "max_pos": a.max_pos,
        "n_inner": None if intermediate == 4 * a.hidden else intermediate,
        "window": a.window,
        "max_window_layers": a.max_window_layers if a.max_window_layers is not None else 1,
        "inactive_window": a.inactive_window, "layer_types": not a.no_layer_types and a.inactive_window is None,
        "rope_theta": theta, "rope_scaling": rope_scaling,
        "attention_bias": a.attention_bias, "mlp_bias": a.mlp_bias,
        "seq_cls": a.sequence_classification, "num_labels": a.num_labels,
        "bos": bos, "eos": eos, "pad": pad, "eps": eps, "init_std": a.initializer_range,
        "no_prefix": a.no_prefix,
    }


def read_inputs(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    for i, line in enumerate(lines):
        if not isinstance(line.get("ids"), list) or not all(isinstance(t, int) for t in line["ids"]):
            raise UsageError(f"{path}:{i + 1}: expected {{\"ids\": [int, ...]}}")
    return [line["ids"] for line in lines]


def check_ids(model, ids, path):
    vocab = model.w[model.prefix + ("wte.weight" if model.arch.family == "gpt2" else "model.embed_tokens.weight")].shape[0]
    if not ids or any(not 0 <= t < vocab for t in ids):
        raise UsageError(f"{path}: ids must be a non-empty list within the vocabulary of {vocab}")


def cmd_make(a):
    s = resolve_spec(a)
    files = ckpt.write_checkpoint(a.out, s)
    print(f"wrote {a.out}: {ckpt.architecture(s['family'], s['seq_cls'])} {s['dtype']}, {', '.join(files)}",
          file=sys.stderr)


def cmd_per_line(a, compute, key, task):
    model = Model.load(a.model)
    if model.arch.task != task:
        raise UsageError(f"{a.model} is a {model.arch.task} model; this subcommand needs {task}")
    if a.adapter:
        peft_adapter.apply(model, peft_adapter.read_adapter(a.adapter, model))
    for ids in read_inputs(a.input):
        check_ids(model, ids, a.input)
        print(json.dumps({key: compute(model, ids)}))


def number(text):
    """lora_alpha as PEFT's int field holds it when it is whole (8, not 8.0)."""
    x = float(text)
    return int(x) if x.is_integer() else x


def cmd_make_adapter(a):
    targets = [t for t in a.targets.split(",") if t]
    if not targets or (peft_adapter.ALL_LINEAR in targets and len(targets) > 1):
        raise UsageError("--targets is a comma-separated list of module names, or all-linear alone")
    if a.r < 1:
        raise UsageError("--r must be at least 1")
    mts = [m for m in a.modules_to_save.split(",") if m] if a.modules_to_save else None
    adapter = peft_adapter.make_adapter(a.model, a.out, a.r, a.alpha, targets, a.rslora, mts, a.seed)
    print(f"wrote {peft_adapter.summary(a.out, adapter)}", file=sys.stderr)


def cmd_check_adapter(a):
    print(peft_adapter.summary(a.adapter, peft_adapter.read_adapter(a.adapter, Model.load(a.model))))


def cmd_merge(a):
    files = peft_adapter.merge(a.model, a.adapter, a.out)
    print(f"wrote {a.out}: {a.model} + {a.adapter} merged, {', '.join(files)}", file=sys.stderr)


def build_parser():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    m = sub.add_parser("make", help="write a tiny random checkpoint")
    m.add_argument("--family", required=True, choices=FAMILIES)
    m.add_argument("--out", required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--dtype", default="float32", choices=sorted(ckpt.DTYPES))
    m.add_argument("--shards", type=int, default=1)
    tie = m.add_mutually_exclusive_group()
    tie.add_argument("--tied", dest="tied", action="store_true", default=None, help="default for gpt2")
    tie.add_argument("--untied", dest="tied", action="store_false", help="default for the Llama family")
    m.add_argument("--hidden", type=int, default=64)
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, help="default 2 (Llama family)")
    m.add_argument("--head-dim", type=int, help="default hidden/heads; qwen3: 2*hidden/heads")
    m.add_argument("--intermediate", type=int, help="default 128; gpt2: 4*hidden (n_inner null)")
    m.add_argument("--vocab", type=int, default=320)
    m.add_argument("--max-pos", type=int, default=256)
    m.add_argument("--window", type=int, help="sliding window: mistral all layers; qwen2/qwen3 "
                   "use_sliding_window true, from --max-window-layers on")
    m.add_argument("--max-window-layers", type=int, help="qwen2/qwen3, default 1")
    m.add_argument("--inactive-window", type=int, help="qwen2/qwen3: sliding_window W with "
                   "use_sliding_window false and no layer_types, as Qwen2.5's config.json")
    m.add_argument("--no-layer-types", action="store_true", help="qwen2/qwen3: omit layer_types "
                   "(as transformers < 4.53 wrote)")
    m.add_argument("--rope-scaling", choices=["llama3"])
    m.add_argument("--rope-factor", type=float, default=8.0)
    m.add_argument("--rope-original-max", type=int, default=64,
                   help="original_max_position_embeddings; 64 puts a tiny head_dim's frequencies in all three bands")
    m.add_argument("--rope-theta", type=float)
    m.add_argument("--attention-bias", action="store_true", help="llama, qwen3")
    m.add_argument("--mlp-bias", action="store_true", help="llama")
    m.add_argument("--sequence-classification", action="store_true")
    m.add_argument("--num-labels", type=int, default=2)
    m.add_argument("--bos", type=int)
    m.add_argument("--eos", help="one id or a comma-separated list")
    m.add_argument("--pad", type=int, help="default 0 with --sequence-classification, else none")
    m.add_argument("--rms-norm-eps", type=float, help="rms_norm_eps or gpt2's layer_norm_epsilon")
    m.add_argument("--initializer-range", type=float, default=0.1,
                   help="the init std; 0.1, not 0.02, so that attention is far from uniform at width 64")
    m.add_argument("--no-prefix", action="store_true", help="gpt2: names without 'transformer.'")
    for name, extra in (("logprobs", False), ("generate", True), ("score", False)):
        c = sub.add_parser(name)
        c.add_argument("--model", required=True)
        c.add_argument("--input", required=True)
        if extra:
            c.add_argument("--max-new-tokens", type=int, required=True)
        c.add_argument("--adapter", help="a PEFT LoRA adapter directory to apply (not merged)")
    m = sub.add_parser("make-adapter", help="write a random PEFT LoRA adapter for a base checkpoint")
    m.add_argument("--model", required=True)
    m.add_argument("--out", required=True)
    m.add_argument("--r", type=int, required=True)
    m.add_argument("--alpha", type=number, required=True, help="lora_alpha")
    m.add_argument("--targets", required=True, help="module names (q_proj,v_proj) or all-linear")
    m.add_argument("--rslora", action="store_true", help="use_rslora: scale lora_alpha/sqrt(r)")
    m.add_argument("--modules-to-save", help="comma-separated; a classifier base adds classifier,score")
    m.add_argument("--seed", type=int, default=0)
    c = sub.add_parser("check-adapter", help="check an adapter's layout against its base; one summary line")
    c.add_argument("--adapter", required=True)
    c.add_argument("--model", required=True)
    c = sub.add_parser("merge", help="write base + adapter merged as a full checkpoint")
    c.add_argument("--model", required=True)
    c.add_argument("--adapter", required=True)
    c.add_argument("--out", required=True)
    sub.add_parser("selfcheck", help="the consistency checks; exit 1 on a failure")
    return p


def main(argv):
    a = build_parser().parse_args(argv)
    try:
        if a.command == "make":
            cmd_make(a)
        elif a.command == "logprobs":
            cmd_per_line(a, lambda m, ids: m.logprobs(ids), "logprobs", "lm")
        elif a.command == "generate":
            cmd_per_line(a, lambda m, ids: m.generate(ids, a.max_new_tokens), "ids", "lm")
        elif a.command == "score":
            cmd_per_line(a, lambda m, ids: m.score(ids), "score", "score")
        elif a.command == "make-adapter":
            cmd_make_adapter(a)
        elif a.command == "check-adapter":
            cmd_check_adapter(a)
        elif a.command == "merge":
            cmd_merge(a)
        else:
            import hf_selfcheck
            return 0 if hf_selfcheck.run() else 1
    except (UsageError, ValueError, KeyError, OSError) as e:
        print(f"hf_reference.py {a.command}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
