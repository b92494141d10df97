"""hf_reference.py selfcheck: checks the reference against the independent numpy GPT-2
(tests/ckpt/gpt2_numpy.py) and the safetensors reader (tests/ckpt/read_safetensors.py), and
against itself where two routes must agree (GQA vs the same model with kv heads repeated, a window
no shorter than the sequence vs none, a window's exact reach, bf16/f16 files vs f32 weights rounded,
tied vs untied with lm_head = embedding, sharded vs one file, cached greedy vs full forwards, LoRA
adapters applied on the side vs merged into the weights, ...).
Models are tiny and built in memory where no file is under test, so it runs in a few seconds.
"""
import contextlib
import io
import json
import math
import os
import subprocess
import sys
import tempfile

import torch

import hf_checkpoint as ckpt
import hf_reference
import peft_adapter
from hf_model import Arch, Cache, Model, rope_inv_freq, rotate

HERE = os.path.dirname(os.path.abspath(__file__))
CKPT_TESTS = os.path.join(os.path.dirname(HERE), "ckpt")
IDS = [5, 17, 3, 250, 99, 17, 42, 8, 311, 7, 64, 128, 1, 200, 33, 90]


def spec(*flags):
    a = hf_reference.build_parser().parse_args(["make", "--out", "-"] + list(flags))
    return hf_reference.resolve_spec(a)


def model_of(s, weights=None, config_edit=None):
    """An in-memory model from a spec, its f32 weights (drawn unless given) and an optional edit
    of the config dict."""
    weights = dict(weights if weights is not None else ckpt.random_weights(s))
    config = ckpt.build_config(s)
    if config_edit:
        config_edit(config)
    return Model(config, ckpt.build_generation_config(s), weights)


def lp(model, ids=IDS):
    return torch.tensor(model.logprobs(ids))


def maxdiff(a, b):
    return float((torch.as_tensor(a) - torch.as_tensor(b)).abs().max())


class Checks:
    def __init__(self):
        self.failed = 0
        self.count = 0

    def check(self, name, ok, detail=""):
        self.count += 1
        self.failed += not ok
        print(f"{'ok  ' if ok else 'FAIL'} {name}{': ' + detail if detail else ''}", flush=True)

    def close(self, name, a, b, tol):
        d = maxdiff(a, b)
        self.check(name, d <= tol, f"max |diff| {d:.2e} (tolerance {tol:.0e})")

    def apart(self, name, a, b, least):
        d = maxdiff(a, b)
        self.check(name, d >= least, f"max |diff| {d:.2e} (must be >= {least:.0e})")


def check_gpt2_numpy(c, tmp):
    """The GPT-2 path against tests/ckpt/gpt2_numpy.py (float64 numpy, its own names and config
    reading) on a file written by `make --no-prefix`, the hub's names that reader expects."""
    script = os.path.join(CKPT_TESTS, "gpt2_numpy.py")
    s = spec("--family", "gpt2", "--no-prefix", "--seed", "3")
    d = os.path.join(tmp, "gpt2_numpy")
    ckpt.write_checkpoint(d, s)
    with open(os.path.join(d, "config.json")) as f:
        config = json.load(f)
    config["tie_word_embeddings"] = True  # that reader asks for the key transformers leaves out
    ckpt.write_json(os.path.join(d, "config.json"), config)
    rows = [IDS, [319, 0, 1, 2, 3, 300, 300, 12, 5, 250, 9, 77, 78, 79, 80, 81]]
    arg = ";".join(",".join(map(str, r)) for r in rows)
    out = subprocess.run([sys.executable, script, d, arg], capture_output=True, text=True)
    if out.returncode != 0:
        c.check("gpt2 vs tests/ckpt/gpt2_numpy.py", False, out.stderr.strip()[-300:])
        return
    theirs = torch.tensor(json.loads(out.stdout))
    m = Model.load(d)
    ours = torch.stack([m.logits(r) for r in rows])
    c.close("gpt2 logits vs tests/ckpt/gpt2_numpy.py (f64)", ours, theirs, 2e-5)
    prefixed = model_of(spec("--family", "gpt2", "--seed", "3"))
    c.close("gpt2 'transformer.' names == hub names", lp(prefixed), lp(m), 0)


def check_safetensors_files(c, tmp):
    """bf16 and f16 files: tensors are the f32 draw rounded, the independent reader agrees on names,
    dtypes, shapes and sums, and log-probs equal those of the rounded f32 weights in memory."""
    for dtype, code, torch_dtype in (("bfloat16", "BF16", torch.bfloat16), ("float16", "F16", torch.float16)):
        s = spec("--family", "qwen3", "--dtype", dtype, "--shards", "3", "--seed", "4")
        d = os.path.join(tmp, "files_" + dtype)
        files = ckpt.write_checkpoint(d, s)
        w32 = dict(ckpt.random_weights(s))
        stored = ckpt.load_weights(d)
        same = set(stored) == set(w32) and all(
            stored[n].dtype == torch_dtype and torch.equal(stored[n], w32[n].to(torch_dtype)) for n in w32)
        c.check(f"{dtype} x3 shards: stored tensors == f32 draw cast", same)
        with open(os.path.join(d, "model.safetensors.index.json")) as f:
            index = json.load(f)
        c.check(f"{dtype} index: 3 files, every tensor mapped, total_size",
                sorted(set(index["weight_map"].values())) == files == [ckpt.shard_name(k, 3) for k in (1, 2, 3)]
                and set(index["weight_map"]) == set(w32)
                and index["metadata"]["total_size"] == sum(t.numel() * 2 for t in w32.values()))
        sums_ok = True
        for fname in files:
            out = subprocess.run([sys.executable, os.path.join(CKPT_TESTS, "read_safetensors.py"),
                                  os.path.join(d, fname)], capture_output=True, text=True, check=True)
            read = json.loads(out.stdout)
            sums_ok &= read["metadata"] == {"format": "pt"}
            for t in read["tensors"]:
                mine = stored[t["name"]]
                sums_ok &= t["dtype"] == code and t["shape"] == list(mine.shape)
                sums_ok &= abs(t["sum"] - float(mine.double().sum())) <= 1e-9 * max(1.0, abs(t["sum"]))
        c.check(f"{dtype} files vs tests/ckpt/read_safetensors.py (names, dtype, shape, sum)", sums_ok)
        rounded = {n: t.to(torch_dtype).float() for n, t in w32.items()}
        from_file = lp(Model.load(d))
        c.close(f"{dtype} file log-probs == f32 weights rounded to {dtype}", from_file,
                lp(model_of(s, rounded)), 0)
        c.apart(f"{dtype} rounding is visible (vs f32 weights)", from_file, lp(model_of(s, w32)), 1e-6)


def check_gqa(c):
    """GQA == the same model with each kv head repeated for its group of query heads (plain MHA):
    query head h reads kv head h // (heads / kv_heads)."""
    for fam, extra in (("llama", ["--attention-bias"]), ("qwen2", []), ("qwen3", []), ("mistral", ["--window", "5"])):
        s = spec("--family", fam, "--heads", "4", "--kv-heads", "2", *extra)
        w = dict(ckpt.random_weights(s))
        wide, D, rep = dict(w), s["head_dim"], 2
        for n, t in w.items():
            if ".k_proj." in n or ".v_proj." in n:
                wide[n] = t.reshape(s["kv_heads"], D, *t.shape[1:]).repeat_interleave(rep, 0).reshape(-1, *t.shape[1:])
        s_mha = dict(s, kv_heads=s["heads"])
        grouped, mha = lp(model_of(s, w)), lp(model_of(s_mha, wide))
        c.close(f"{fam}: kv_heads 2 == kv_heads 4 with kv heads repeated", grouped, mha, 2e-5)
        swapped = dict(w)
        for n, t in w.items():  # the other grouping (h % kv_heads) must give another answer
            if ".k_proj." in n or ".v_proj." in n:
                swapped[n] = t.reshape(s["kv_heads"], D, *t.shape[1:]).repeat(rep, *[1] * t.dim()).reshape(-1, *t.shape[1:])
        c.apart(f"{fam}: ... and not with heads interleaved", lp(model_of(s_mha, swapped)), grouped, 1e-3)


def changed_at(model, ids, flip):
    """Which positions' logits change when the token at `flip` changes."""
    other = list(ids)
    other[flip] = (other[flip] + 1) % 300
    d = (model.logits(ids) - model.logits(other)).abs().max(-1).values
    return [t for t in range(len(ids)) if d[t] > 1e-6]


def check_windows(c):
    T = len(IDS)
    none = lp(model_of(spec("--family", "mistral")))
    c.close("mistral: window == sequence length gives no-window log-probs", lp(model_of(spec("--family", "mistral", "--window", str(T)))), none, 0)
    c.apart("mistral: window == length - 2 changes them", lp(model_of(spec("--family", "mistral", "--window", str(T - 2)))), none, 1e-3)
    # W = 2: each of the 2 layers sees keys i-1 and i, so the output at i reads tokens i-2..i.
    m = model_of(spec("--family", "mistral", "--window", "2"))
    c.check("mistral window 2, 2 layers: flipping token 5 changes exactly positions 5..7",
            changed_at(m, IDS, 5) == [5, 6, 7], str(changed_at(m, IDS, 5)))
    m = model_of(spec("--family", "qwen2", "--window", "3", "--max-window-layers", "0"))
    c.check("qwen2 window 3 on both layers: flipping token 5 changes exactly 5..9",
            changed_at(m, IDS, 5) == list(range(5, 10)), str(changed_at(m, IDS, 5)))
    full = lp(model_of(spec("--family", "qwen2")))
    per_layer = lp(model_of(spec("--family", "qwen2", "--window", "3", "--max-window-layers", "1")))
    c.apart("qwen2 window 3 from layer 1 changes log-probs", per_layer, full, 1e-3)
    c.apart("... and differs from the window on both layers", per_layer, lp(m), 1e-3)
    c.close("qwen2 window, max_window_layers = num_layers == no window",
            lp(model_of(spec("--family", "qwen2", "--window", "3", "--max-window-layers", "2"))), full, 0)
    c.close("qwen2 without layer_types (from max_window_layers) == with",
            lp(model_of(spec("--family", "qwen2", "--window", "3", "--max-window-layers", "1", "--no-layer-types"))), per_layer, 0)
    c.close("qwen2 sliding_window 3 with use_sliding_window false == no window (Qwen2.5 configs)",
            lp(model_of(spec("--family", "qwen2", "--inactive-window", "3"))), full, 0)

    def types(config):
        config["layer_types"] = ["sliding_attention", "full_attention"]
    c.apart("qwen2 layer_types is obeyed over max_window_layers",
            lp(model_of(spec("--family", "qwen2", "--window", "3", "--max-window-layers", "1"), config_edit=types)), per_layer, 1e-3)
    q3 = spec("--family", "qwen3", "--window", "3", "--max-window-layers", "1")
    c.check("qwen3 windows per layer from the config",
            Arch(ckpt.build_config(q3), {}).windows == [None, 3])


def check_tied(c):
    for fam in ("llama", "gpt2"):
        tied = spec("--family", fam, "--tied")
        w = ckpt.random_weights(tied)
        embed = dict(w)["transformer.wte.weight" if fam == "gpt2" else "model.embed_tokens.weight"]
        untied = dict(tied, tied=False)
        c.close(f"{fam}: tied == untied with lm_head = embedding", lp(model_of(tied, w)),
                lp(model_of(untied, w + [("lm_head.weight", embed.clone())])), 0)


def full_greedy(model, ids, n):
    seq, out = list(ids), []
    for _ in range(n):
        nxt = int(torch.argmax(model.logits(seq)[-1]))
        out.append(nxt)
        seq.append(nxt)
        if nxt in model.arch.eos_ids:
            break
    return out


def check_generation(c):
    cases = [("llama", []), ("llama", ["--rope-scaling", "llama3"]), ("mistral", ["--window", "3"]),
             ("qwen2", ["--window", "3"]), ("qwen3", ["--attention-bias"]), ("gpt2", [])]
    for fam, extra in cases:
        m = model_of(spec("--family", fam, "--eos", "318", *extra))
        prompt = IDS[:5]
        cached = m.generate(prompt, 14)
        c.check(" ".join([fam] + extra) + ": cached greedy == argmax of full forwards",
                cached == full_greedy(m, prompt, 14), str(cached))
    m = model_of(spec("--family", "mistral", "--eos", "318", "--window", "3"))
    free = m.generate(IDS[:5], 14)
    at = next(i for i in range(2, len(free)) if free[i] not in free[:i])  # a first appearance past 1
    m.arch.eos_ids = [318, free[at]]
    stop = m.generate(IDS[:5], 14)
    c.check(f"generation stops after an eos id ({free[at]}) and keeps it", stop == free[:at + 1], str(stop))


def check_qk_norm_and_rope(c):
    def scaled(w, s):
        w = dict(w)
        D = s["head_dim"]
        w["model.layers.0.self_attn.q_proj.weight"] = w["model.layers.0.self_attn.q_proj.weight"].clone()
        w["model.layers.0.self_attn.q_proj.weight"][:D] *= 3.0  # query head 0
        w["model.layers.1.self_attn.k_proj.weight"] = w["model.layers.1.self_attn.k_proj.weight"].clone()
        w["model.layers.1.self_attn.k_proj.weight"][D:2 * D] *= 0.5  # kv head 1
        return w
    for fam, unchanged in (("qwen3", True), ("llama", False)):
        s = spec("--family", fam)
        w = ckpt.random_weights(s)
        a, b = lp(model_of(s, w)), lp(model_of(s, scaled(w, s)))
        if unchanged:
            c.close("qwen3: scaling one head's q or k rows changes nothing (per-head q/k RMSNorm)", a, b, 5e-5)
        else:
            c.apart("llama: ... but does without q/k norms", a, b, 1e-3)
    # RoPE makes q.k depend on positions only through their difference, so the same tokens placed
    # at positions 37.. (an empty cache that starts there) must give the same logits. This holds
    # only if q and k turn alike and each pair (i, i + D/2) turns by one angle.
    for fam, extra in (("llama", []), ("qwen3", []), ("llama", ["--rope-scaling", "llama3"])):
        m = model_of(spec("--family", fam, *extra))
        at0, at37 = Cache(2), Cache(2)
        at37.pos = 37
        ids = torch.tensor(IDS)
        c.close(" ".join([fam] + extra) + ": RoPE is relative (positions 0.. == positions 37..)",
                m.hidden_states(ids, at0) @ m.head.t(), m.hidden_states(ids, at37) @ m.head.t(), 2e-5)
    # Meta's Llama code turns adjacent pairs (x[2j], x[2j+1]) as the complex number x * e^(i t f_j);
    # transformers' conversion permutes q/k rows so that pair j becomes (x[j], x[j + D/2]), which
    # rotate-half must then turn by the same angle in the same direction.
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 9, 16, generator=g)  # (heads, T, D), transformers' layout
    t = torch.arange(9).float()[:, None] * rope_inv_freq(16, 10000.0, None)[None, :]  # (T, 8)
    meta = torch.view_as_complex(torch.stack((x[..., :8], x[..., 8:]), dim=-1).contiguous())
    meta = torch.view_as_real(meta * torch.polar(torch.ones_like(t), t))
    angles = torch.cat((t, t), dim=-1)
    c.close("rotate-half == Meta's complex RoPE on permuted pairs", rotate(x, angles.cos(), angles.sin()),
            torch.cat((meta[..., 0], meta[..., 1]), dim=-1), 1e-5)
    s = spec("--family", "llama", "--rope-scaling", "llama3")
    sc = s["rope_scaling"]
    plain, scaled_f = rope_inv_freq(16, s["rope_theta"], None), rope_inv_freq(16, s["rope_theta"], sc)
    old, f, lo, hi = sc["original_max_position_embeddings"], sc["factor"], sc["low_freq_factor"], sc["high_freq_factor"]
    expect = []
    for i in range(8):  # the Llama 3.1 rule, in float64 from the model card's description
        inv = 1.0 / s["rope_theta"] ** (2 * i / 16)
        wl = 2 * math.pi / inv
        if wl < old / hi:
            expect.append(inv)
        elif wl > old / lo:
            expect.append(inv / f)
        else:
            t = (old / wl - lo) / (hi - lo)
            expect.append((1 - t) * inv / f + t * inv)
    rel = max(abs(a - e) / e for a, e in zip(scaled_f.tolist(), expect))
    bands = [(2 * math.pi / p < old / hi, 2 * math.pi / p > old / lo) for p in plain.tolist()]
    c.check("llama3 inv_freq == the float64 rule, all three bands present at head_dim 16",
            rel < 1e-6 and any(b[0] for b in bands) and any(b[1] for b in bands)
            and any(not b[0] and not b[1] for b in bands), f"max rel diff {rel:.1e}")
    c.apart("llama3 rope_scaling changes log-probs", lp(model_of(s)),
            lp(model_of(dict(s, rope_scaling=None))), 1e-3)


def check_score(c):
    s = spec("--family", "llama", "--sequence-classification", "--num-labels", "3", "--pad", "0")
    m = model_of(s)
    plain = m.score(IDS[:7])
    c.check("score: 3 labels", len(plain) == 3)
    c.close("score: right padding == no padding", m.score(IDS[:7] + [0, 0, 0]), plain, 1e-5)
    left = [0, 0] + IDS[:7]
    at_last = m.hidden_states(torch.tensor(left), Cache(2))[-1] @ m.head.t()
    c.close("score: left padding reads the last token", m.score(left), at_last, 1e-6)
    g = model_of(spec("--family", "gpt2", "--sequence-classification"))
    c.close("gpt2 score: right padding == no padding", g.score(IDS[:7] + [0]), g.score(IDS[:7]), 1e-5)


def check_cli(c, tmp):
    """make, logprobs, generate and score through main(), as the C++ tests call them."""
    d, ids = os.path.join(tmp, "cli"), os.path.join(tmp, "ids.jsonl")
    with open(ids, "w") as f:
        f.write(json.dumps({"ids": IDS[:9]}) + "\n" + json.dumps({"ids": [4]}) + "\n")

    def run(*argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = hf_reference.main(list(argv))
        return rc, [json.loads(line) for line in out.getvalue().splitlines()], err.getvalue()

    rc, _, _ = run("make", "--family", "qwen2", "--out", d, "--dtype", "bfloat16", "--shards", "2", "--window", "4")
    rc2, lines, _ = run("logprobs", "--model", d, "--input", ids)
    c.check("cli make + logprobs", rc == 0 and rc2 == 0 and len(lines) == 2 and len(lines[0]["logprobs"]) == 8
            and lines[1]["logprobs"] == [] and lines[0]["logprobs"] == Model.load(d).logprobs(IDS[:9]))
    rc, lines, _ = run("generate", "--model", d, "--input", ids, "--max-new-tokens", "6")
    c.check("cli generate", rc == 0 and [len(x["ids"]) <= 6 for x in lines] == [True, True])
    rc, _, err = run("score", "--model", d, "--input", ids)
    c.check("cli score on a causal LM is refused with exit 2", rc == 2 and "needs score" in err, err.strip())
    rc, _, err = run("make", "--family", "mistral", "--out", d, "--attention-bias")
    c.check("cli make refuses an option the family lacks", rc == 2 and "does not apply" in err, err.strip())


def quiet(*argv):
    """hf_reference.main(argv) with its output caught: (exit code, stdout lines, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = hf_reference.main([str(x) for x in argv])
    return rc, out.getvalue().splitlines(), err.getvalue()


def edit_adapter(src, dst, config_edit=None, tensors_edit=None):
    """A copy of the adapter in src, its config dict and {key: tensor} edited in place."""
    with open(os.path.join(src, peft_adapter.CONFIG_NAME)) as f:
        cfg = json.load(f)
    tensors = ckpt.read_safetensors(os.path.join(src, peft_adapter.WEIGHTS_NAME))
    if config_edit:
        config_edit(cfg)
    if tensors_edit:
        tensors_edit(tensors)
    peft_adapter.write_adapter(dst, cfg, tensors)
    return dst


def check_adapters(c, tmp):
    """LoRA in PEFT's layout: the additive path (--adapter) against the merged checkpoint (merge),
    PEFT's key names and shapes, a zero B, rslora's scale, GPT-2's Conv1D, and what must exit 2."""
    ids, rows = os.path.join(tmp, "lora_ids.jsonl"), [IDS, [0, 9, 0, 4]]  # 0 is the classifiers' pad
    with open(ids, "w") as f:
        f.write("".join(json.dumps({"ids": r}) + "\n" for r in rows))

    def answers(command, model, adapter=None, key=None, extra=()):
        rc, lines, err = quiet(command, "--model", model, "--input", ids, *extra,
                               *(["--adapter", adapter] if adapter else []))
        if rc != 0:
            raise RuntimeError(f"{command} exited {rc}: {err.strip()}")
        return [x for line in lines for x in json.loads(line)[key or command]]

    def build(name, make_flags, adapter_flags):
        base, adapter = os.path.join(tmp, "lora_" + name), os.path.join(tmp, "lora_" + name + "_a")
        ckpt.write_checkpoint(base, spec(*make_flags))
        rc, _, err = quiet("make-adapter", "--model", base, "--out", adapter, *adapter_flags)
        if rc != 0:
            raise RuntimeError(f"make-adapter exited {rc}: {err.strip()}")
        return base, adapter

    cases = [("llama", ["--family", "llama", "--untied"], ["--targets", "all-linear"], "logprobs"),
             ("qwen3", ["--family", "qwen3", "--tied"], ["--targets", "q_proj,v_proj", "--rslora"], "logprobs"),
             ("gpt2", ["--family", "gpt2"], ["--targets", "all-linear"], "logprobs"),
             ("gpt2_hub", ["--family", "gpt2", "--no-prefix", "--untied"],
              ["--targets", "c_fc,c_proj", "--modules-to-save", "lm_head"], "logprobs"),
             ("llama_cls", ["--family", "llama", "--sequence-classification", "--num-labels", "3"],
              ["--targets", "all-linear"], "score")]
    built = {}
    for name, make_flags, adapter_flags, command in cases:
        base, adapter = build(name, make_flags, ["--r", "4", "--alpha", "8", "--seed", "7"] + adapter_flags)
        built[name] = base, adapter
        rc, lines, err = quiet("check-adapter", "--adapter", adapter, "--model", base)
        c.check(f"lora {name}: check-adapter accepts make-adapter's output", rc == 0, (lines or [err.strip()])[0])
        merged = os.path.join(tmp, "lora_" + name + "_merged")
        rc, _, err = quiet("merge", "--model", base, "--adapter", adapter, "--out", merged)
        on_side = answers(command, base, adapter)
        c.close(f"lora {name}: base + adapter == merged checkpoint ({command})", on_side,
                answers(command, merged) if rc == 0 else [math.inf], 1e-5)
        c.apart(f"lora {name}: ... and the adapter changes them", on_side, answers(command, base), 1e-3)
        if command == "logprobs" and rc == 0:
            def greedy(model, adapter=None):
                return answers("generate", model, adapter, "ids", ["--max-new-tokens", "8"])
            c.check(f"lora {name}: greedy generation with the adapter == with the merged checkpoint",
                    greedy(base, adapter) == greedy(merged))

    def keys(adapter):
        tensors = ckpt.read_safetensors(os.path.join(adapter, peft_adapter.WEIGHTS_NAME))
        return {k: list(t.shape) for k, t in tensors.items()}
    got = keys(built["llama"][1])
    c.check("lora llama: keys base_model.model.model.layers.I.self_attn.q_proj.lora_A/B.weight, (r, in), (out, r)",
            got.get("base_model.model.model.layers.1.self_attn.q_proj.lora_A.weight") == [4, 64]
            and got.get("base_model.model.model.layers.1.mlp.down_proj.lora_B.weight") == [64, 4]
            and len(got) == 2 * 7 * 2 and not any("lm_head" in k for k in got))
    for name in ("gpt2", "gpt2_hub"):
        got = keys(built[name][1])
        c.check(f"lora {name}: Conv1D keys carry 'transformer.', c_attn A (r, C) and B (3C, r)",
                got.get("base_model.model.transformer.h.0.mlp.c_fc.lora_A.weight") == [4, 64]
                and got.get("base_model.model.transformer.h.1.mlp.c_proj.lora_B.weight") == [64, 4]
                and (name != "gpt2" or got.get("base_model.model.transformer.h.0.attn.c_attn.lora_B.weight")
                     == [192, 4]))
    got = keys(built["gpt2_hub"][1])
    c.check("lora gpt2_hub: modules_to_save lm_head saved as base_model.model.lm_head.weight",
            got.get("base_model.model.lm_head.weight") == [320, 64])
    with open(os.path.join(built["llama_cls"][1], peft_adapter.CONFIG_NAME)) as f:
        cls_cfg = json.load(f)
    c.check("lora llama_cls: SEQ_CLS, modules_to_save [classifier, score], score.weight saved",
            cls_cfg["task_type"] == "SEQ_CLS" and cls_cfg["modules_to_save"] == ["classifier", "score"]
            and keys(built["llama_cls"][1]).get("base_model.model.score.weight") == [3, 64])

    def zero_b(t):
        for k in t:
            if k.endswith(".lora_B.weight"):
                t[k] = torch.zeros_like(t[k])
    for name in ("llama", "gpt2"):
        base, adapter = built[name]
        zero = edit_adapter(adapter, adapter + "_zero", tensors_edit=zero_b)
        c.close(f"lora {name}: base + adapter with B = 0 == base", answers("logprobs", base, zero),
                answers("logprobs", base), 0)

    # rslora: scale lora_alpha / sqrt(r) = 8 / 2 at r = 4, which plain LoRA reaches with alpha 16.
    base, adapter = built["qwen3"]
    plain16 = edit_adapter(adapter, adapter + "_16", lambda cfg: cfg.update(use_rslora=False, lora_alpha=16))
    plain8 = edit_adapter(adapter, adapter + "_8", lambda cfg: cfg.update(use_rslora=False))
    rs = answers("logprobs", base, adapter)
    c.close("lora rslora r 4 alpha 8 == plain alpha 16 (scale 4)", rs, answers("logprobs", base, plain16), 0)
    c.apart("lora rslora r 4 alpha 8 != plain alpha 8 (scale 2)", rs, answers("logprobs", base, plain8), 1e-3)

    # Conv1D keeps W as (in, out), so the merge adds (B @ A)^T; on the square attn.c_proj the
    # untransposed B @ A fits too, and must give other log-probs.
    base, adapter = build("gpt2_proj", ["--family", "gpt2", "--seed", "2"],
                          ["--r", "4", "--alpha", "8", "--targets", "attn.c_proj"])
    s = spec("--family", "gpt2", "--seed", "2")
    w = dict(ckpt.random_weights(s))
    tensors = ckpt.read_safetensors(os.path.join(adapter, peft_adapter.WEIGHTS_NAME))
    wrong = dict(w)
    for i in range(s["layers"]):
        k = f"base_model.model.transformer.h.{i}.attn.c_proj."
        wrong[f"transformer.h.{i}.attn.c_proj.weight"] = w[f"transformer.h.{i}.attn.c_proj.weight"] + 2.0 * (
            tensors[k + "lora_B.weight"] @ tensors[k + "lora_A.weight"])
    m = model_of(s, wrong)
    c.apart("lora gpt2 Conv1D: merging B @ A untransposed gives other log-probs",
            answers("logprobs", base, adapter), [x for r in rows for x in m.logprobs(r)], 1e-3)

    # From 20 adapted modules on PEFT writes all-linear as the shortest distinguishing suffixes.
    base, adapter = build("llama3", ["--family", "llama", "--layers", "3"],
                          ["--r", "2", "--alpha", "4", "--targets", "all-linear"])
    with open(os.path.join(adapter, peft_adapter.CONFIG_NAME)) as f:
        tm = json.load(f)["target_modules"]
    c.check("lora all-linear on 21 modules: target_modules are the 7 names", tm == sorted(
        ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]), str(tm))

    # What must exit 2, from logprobs --adapter and check-adapter alike, on the qwen3 adapter
    # (q_proj and v_proj, r 4): (what, config edit, tensors edit, a piece of the message).
    base, adapter = built["qwen3"]
    q = "base_model.model.model.layers.0.self_attn.q_proj."
    A, B = q + "lora_A.weight", q + "lora_B.weight"

    def put(key, value):
        return lambda t: t.update({key: value(t) if callable(value) else value})
    bad = [("peft_type LOHA", lambda cfg: cfg.update(peft_type="LOHA"), None, "not 'LORA'"),
           ("bias all", lambda cfg: cfg.update(bias="all"), None, "only 'none'"),
           ("use_dora", lambda cfg: cfg.update(use_dora=True), None, "not implemented"),
           ("a misspelt key", lambda cfg: cfg.update(lora_aplha=8), None, "not a LoraConfig field"),
           ("r as a string", lambda cfg: cfg.update(r="4"), None, "not of type int"),
           ("task_type SEQ_CLS on a causal LM", lambda cfg: cfg.update(task_type="SEQ_CLS"), None, "does not fit"),
           ("a key naming no module", None, put(A.replace("q_proj", "x_proj"), lambda t: t[A]), "names no module"),
           ("a key without base_model.model.", None, put(A[len("base_model.model."):], lambda t: t.pop(A)),
            "does not start"),
           ("lora_A of the wrong r", None, put(A, torch.zeros(5, 64)), "has shape [5, 64]"),
           ("lora_B of the wrong out", None, put(B, torch.zeros(64, 4)), "has shape [64, 4]"),
           ("lora_A without lora_B", None, lambda t: t.pop(B), "lora_A without lora_B"),
           ("a target with neither", None, lambda t: (t.pop(A), t.pop(B)), "has no lora_A/lora_B"),
           ("a module target_modules leave out", None, put(A.replace("q_proj", "k_proj"), torch.zeros(4, 64)),
            "would not load"),
           ("a DoRA magnitude", None, put(q + "lora_magnitude_vector", torch.zeros(128)), "only lora_A.weight"),
           ("a base tensor outside modules_to_save", None, put("base_model.model.model.norm.weight", torch.ones(64)),
            "does not cover")]
    for i, (what, config_edit, tensors_edit, expect) in enumerate(bad):
        d = edit_adapter(adapter, os.path.join(tmp, f"lora_bad{i}"), config_edit, tensors_edit)
        rc, _, err = quiet("logprobs", "--model", base, "--input", ids, "--adapter", d)
        rc2, _, err2 = quiet("check-adapter", "--adapter", d, "--model", base)
        c.check(f"lora refused with exit 2: {what}", rc == 2 and rc2 == 2 and expect in err
                and err == err2.replace("check-adapter", "logprobs") and err.count("\n") == 1, err.strip())
    base, adapter = built["llama_cls"]
    d = edit_adapter(adapter, os.path.join(tmp, "lora_bad_cls"),
                     tensors_edit=lambda t: t.pop("base_model.model.score.weight"))
    rc, _, err = quiet("score", "--model", base, "--input", ids, "--adapter", d)
    c.check("lora refused with exit 2: modules_to_save score missing",
            rc == 2 and "score.weight is missing" in err, err.strip())
    base, adapter = built["qwen3"]
    rc, _, err = quiet("merge", "--model", base, "--adapter", adapter, "--out", base)
    c.check("lora merge refuses to write over its base", rc == 2, err.strip())


def run():
    c = Checks()
    torch.manual_seed(0)
    with tempfile.TemporaryDirectory() as tmp:
        for group in (lambda: check_gpt2_numpy(c, tmp), lambda: check_safetensors_files(c, tmp),
                      lambda: check_gqa(c), lambda: check_windows(c), lambda: check_tied(c),
                      lambda: check_generation(c), lambda: check_qk_norm_and_rope(c),
                      lambda: check_score(c), lambda: check_cli(c, tmp), lambda: check_adapters(c, tmp)):
            try:
                group()
            except Exception as e:  # a check that cannot run is a failed check, and the rest still run
                c.check("a check group raised", False, f"{type(e).__name__}: {e}")
    print(f"{c.count - c.failed}/{c.count} checks passed")
    return c.failed == 0
