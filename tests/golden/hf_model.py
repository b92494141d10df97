"""The forward pass of Hugging Face's Llama-family (llama, mistral, qwen2, qwen3) and GPT-2 models,
written from the model cards and transformers' modeling_*.py in plain torch ops, in float32 on the
CPU from a checkpoint's weights upcast to f32. One sequence at a time (no batch, no attention mask:
what model(input_ids) computes), with a key/value cache so that greedy generation feeds one token
per step as transformers' generate does. Training-only parts (dropout) are left out. A LoRA
adapter (peft_adapter.apply) adds its path to the outputs of the linears it adapts (Model.lora).
"""
import math

import torch

import hf_checkpoint as ckpt


# ----------------------------------------------------------------------------------------------
# the configuration as the modeling code reads it

def _eos_ids(config, gen):
    ids = []
    for source in (config, gen):
        e = source.get("eos_token_id")
        for t in (e if isinstance(e, list) else [e]):
            if t is not None and t not in ids:
                ids.append(int(t))
    return ids


def rope_inv_freq(head_dim, theta, scaling):
    """inv_freq (head_dim/2,) f32: 1 / theta^(2i/head_dim), then rope_scaling (llama3, linear)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))
    kind = None if scaling is None else scaling.get("rope_type", scaling.get("type"))
    if kind in (None, "default"):
        return inv
    if kind == "linear":
        return inv / scaling["factor"]
    if kind != "llama3":
        raise ValueError(f"rope_scaling type {kind!r} is not implemented by this reference")
    # Llama 3.1: wavelengths shorter than old_len/high_freq_factor keep their frequency, those
    # longer than old_len/low_freq_factor are slowed by `factor`, those between are interpolated.
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_len = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    slowed = torch.where(wavelen > old_len / low, inv / factor, inv)
    smooth = (old_len / wavelen - low) / (high - low)
    between = (1 - smooth) * slowed / factor + smooth * slowed
    medium = ~(wavelen < old_len / high) & ~(wavelen > old_len / low)
    return torch.where(medium, between, slowed)


def layer_windows(config):
    """Per layer, the sliding window (keys i - W < j <= i are visible) or None for full attention."""
    fam, L = config["model_type"], config["num_hidden_layers"]
    if fam == "llama":
        return [None] * L
    if fam == "mistral":  # every layer, when sliding_window is set
        return [config.get("sliding_window")] * L
    # qwen2/qwen3: sliding_window counts only with use_sliding_window, and only on the layers
    # layer_types marks "sliding_attention"; old configs have no layer_types, and then those are
    # the layers from max_window_layers on.
    window = config.get("sliding_window") if config.get("use_sliding_window", False) else None
    types = config.get("layer_types")
    if types is None:
        first = config.get("max_window_layers", 28)
        types = ["sliding_attention" if window is not None and i >= first else "full_attention"
                 for i in range(L)]
    if len(types) != L:
        raise ValueError(f"layer_types has {len(types)} entries for {L} layers")
    return [window if t == "sliding_attention" else None for t in types]


class Arch:
    """What the forward needs from config.json and generation_config.json."""

    def __init__(self, config, gen):
        self.family = fam = config["model_type"]
        arch = (config.get("architectures") or [""])[0]
        self.task = "score" if arch.endswith("ForSequenceClassification") else "lm"
        self.num_labels = len(config["id2label"]) if "id2label" in config else 2
        self.pad_token_id = config.get("pad_token_id")
        self.eos_ids = _eos_ids(config, gen)
        # The class default of tie_word_embeddings: True for GPT2Config, False for the others.
        self.tied = config.get("tie_word_embeddings", fam == "gpt2")
        if fam == "gpt2":
            if config.get("activation_function", "gelu_new") != "gelu_new":
                raise ValueError("only activation_function gelu_new is implemented")
            self.hidden, self.heads, self.layers = config["n_embd"], config["n_head"], config["n_layer"]
            self.head_dim = self.hidden // self.heads
            self.n_positions = config["n_positions"]
            self.eps = config.get("layer_norm_epsilon", 1e-5)
            self.scale_attn = config.get("scale_attn_weights", True)
            self.scale_by_layer = config.get("scale_attn_by_inverse_layer_idx", False)
            return
        if fam not in ckpt.LLAMA_FAMILY:
            raise ValueError(f"model_type {fam!r} is not one of llama, mistral, qwen2, qwen3, gpt2")
        if config.get("hidden_act", "silu") != "silu":
            raise ValueError("only hidden_act silu is implemented")
        self.hidden, self.heads = config["hidden_size"], config["num_attention_heads"]
        self.layers = config["num_hidden_layers"]
        self.kv_heads = config.get("num_key_value_heads") or self.heads
        self.head_dim = config.get("head_dim") or self.hidden // self.heads
        self.eps = config.get("rms_norm_eps", 1e-6)
        self.inv_freq = rope_inv_freq(self.head_dim, float(config.get("rope_theta", 10000.0)),
                                      config.get("rope_scaling"))
        self.windows = layer_windows(config)
        bias = bool(config.get("attention_bias", False)) and fam in ("llama", "qwen3")
        self.qkv_bias = fam == "qwen2" or bias  # Qwen2 always has q/k/v biases, never an o bias
        self.o_bias = bias
        self.mlp_bias = fam == "llama" and bool(config.get("mlp_bias", False))
        self.qk_norm = fam == "qwen3"


# ----------------------------------------------------------------------------------------------
# the pieces

def rms_norm(x, weight, eps):
    """x (..., C) f32: x / sqrt(mean(x^2) + eps), then times the weight."""
    variance = (x * x).mean(-1, keepdim=True)
    return weight * (x * torch.rsqrt(variance + eps))


def layer_norm(x, weight, bias, eps):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + eps) * weight + bias


def silu(x):
    return x * torch.sigmoid(x)


def gelu_new(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def rotate(x, cos, sin):
    """RoPE on x (heads, T, D) in the rotate-half convention: dimension i pairs with i + D/2."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


def softmax(scores):
    e = torch.exp(scores - scores.max(-1, keepdim=True).values)
    return e / e.sum(-1, keepdim=True)


def log_softmax(logits):
    m = logits.max(-1, keepdim=True).values
    return logits - (m + torch.log(torch.exp(logits - m).sum(-1, keepdim=True)))


def attend(q, k, v, q_pos, k_pos, window, scale=None, divide=None):
    """q (Hq, T, D), k and v (Hkv, S, D); query head h reads key/value head h // (Hq/Hkv). A key at
    position j is visible to a query at position i iff j <= i and, with a window W, j > i - W.
    Scores are q.k times `scale` (Llama family) or divided by `divide` (GPT-2). Returns (Hq, T, D)."""
    group = q.shape[0] // k.shape[0]
    k = k.repeat_interleave(group, dim=0)
    v = v.repeat_interleave(group, dim=0)
    scores = q @ k.transpose(1, 2)
    scores = scores * scale if divide is None else scores / divide
    visible = k_pos[None, :] <= q_pos[:, None]
    if window is not None:
        visible &= k_pos[None, :] > q_pos[:, None] - window
    return softmax(scores.masked_fill(~visible, float("-inf"))) @ v


def key_positions(pos, k):
    """The positions of the S cached-plus-new keys in k (heads, S, D): they end where pos ends."""
    end = int(pos[-1]) + 1
    return torch.arange(end - k.shape[1], end)


class Cache:
    """Per layer the keys (after RoPE) and values seen so far, and the next position."""

    def __init__(self, layers):
        self.k, self.v, self.pos = [None] * layers, [None] * layers, 0

    def extend(self, i, k, v):
        if self.k[i] is not None:
            k, v = torch.cat((self.k[i], k), dim=1), torch.cat((self.v[i], v), dim=1)
        self.k[i], self.v[i] = k, v
        return k, v


# ----------------------------------------------------------------------------------------------
# the models

class Model:
    def __init__(self, config, gen, tensors):
        self.arch = Arch(config, gen)
        self.w = {n: t.float() for n, t in tensors.items()}
        self.dtypes = {n: t.dtype for n, t in tensors.items()}  # as stored, for writing tensors back
        self.used = set()
        self.lora = {}  # module name -> (A (r, in), B (out, r), scale); peft_adapter.apply fills it
        a = self.arch
        self.prefix = ""
        if a.family == "gpt2":
            if "transformer.wte.weight" in self.w:
                self.prefix = "transformer."
            # Older GPT-2 files keep the causal-mask buffers; they are not parameters.
            for n in list(self.w):
                if n.endswith(".attn.bias") or n.endswith(".attn.masked_bias"):
                    del self.w[n]
        embed = self.prefix + ("wte.weight" if a.family == "gpt2" else "model.embed_tokens.weight")
        if a.task == "score":
            self.head_name, self.lora_head = "score.weight", "score"
        elif a.tied:
            self.head_name, self.lora_head = embed, "lm_head"  # transformers' lm_head module, tied
        else:
            self.head_name, self.lora_head = "lm_head.weight", "lm_head"
        self.head = self.get(self.head_name)
        # Touch every parameter once so that an unexpected or missing name fails here.
        self.hidden_states(torch.tensor([0]), Cache(a.layers))
        unused = sorted(set(self.w) - self.used)
        if unused:
            raise ValueError(f"tensors the {a.family} model does not use: {unused}")

    @classmethod
    def load(cls, model_dir):
        config, gen, tensors = ckpt.read_checkpoint(model_dir)
        return cls(config, gen, tensors)

    def get(self, name):
        if name not in self.w:
            raise KeyError(f"the checkpoint has no tensor {name}")
        self.used.add(name)
        return self.w[name]

    def adapted(self, x, y, name):
        """y = the module's base output for input x, plus a LoRA adapter's path when it adapts the
        module: scale * (x @ A^T) @ B^T, A (r, in) and B (out, r) for nn.Linear and Conv1D alike."""
        if name not in self.lora:
            return y
        A, B, scale = self.lora[name]
        return y + scale * ((x @ A.t()) @ B.t())

    def linear(self, x, name, bias):
        """nn.Linear: x @ W^T (+ b), W (out, in)."""
        y = x @ self.get(name + ".weight").t()
        return self.adapted(x, y + self.get(name + ".bias") if bias else y, name)

    def conv1d(self, x, name):
        """GPT-2's Conv1D: x @ W + b, W (in, out)."""
        return self.adapted(x, x @ self.get(name + ".weight") + self.get(name + ".bias"), name)

    def project(self, h):
        """The output head (lm_head, tied or not, or score) on hidden states h (..., C)."""
        return self.adapted(h, h @ self.head.t(), self.lora_head)

    def hidden_states(self, ids, cache):
        """ids (T,) new tokens after the cache's; returns the last layer's normed output (T, C)."""
        if self.arch.family == "gpt2":
            return self._gpt2(ids, cache)
        return self._llama(ids, cache)

    def _llama(self, ids, cache):
        a = self.arch
        T, D = ids.shape[0], a.head_dim
        pos = torch.arange(cache.pos, cache.pos + T)
        angles = pos.float()[:, None] * a.inv_freq[None, :]  # (T, D/2), f32 as transformers
        angles = torch.cat((angles, angles), dim=-1)
        cos, sin = angles.cos(), angles.sin()
        x = self.get("model.embed_tokens.weight")[ids]  # (T, C)
        for i in range(a.layers):
            p = f"model.layers.{i}."
            h = rms_norm(x, self.get(p + "input_layernorm.weight"), a.eps)
            q = self.linear(h, p + "self_attn.q_proj", a.qkv_bias).view(T, a.heads, D)
            k = self.linear(h, p + "self_attn.k_proj", a.qkv_bias).view(T, a.kv_heads, D)
            v = self.linear(h, p + "self_attn.v_proj", a.qkv_bias).view(T, a.kv_heads, D)
            if a.qk_norm:  # Qwen3: RMSNorm over each head's D dims, before RoPE
                q = rms_norm(q, self.get(p + "self_attn.q_norm.weight"), a.eps)
                k = rms_norm(k, self.get(p + "self_attn.k_norm.weight"), a.eps)
            q, k, v = q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1)  # (heads, T, D)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
            k, v = cache.extend(i, k, v)
            y = attend(q, k, v, pos, key_positions(pos, k), a.windows[i], scale=D ** -0.5)
            y = y.transpose(0, 1).reshape(T, a.heads * D)
            x = x + self.linear(y, p + "self_attn.o_proj", a.o_bias)
            h = rms_norm(x, self.get(p + "post_attention_layernorm.weight"), a.eps)
            m = silu(self.linear(h, p + "mlp.gate_proj", a.mlp_bias)) * self.linear(h, p + "mlp.up_proj", a.mlp_bias)
            x = x + self.linear(m, p + "mlp.down_proj", a.mlp_bias)
        cache.pos += T
        return rms_norm(x, self.get("model.norm.weight"), a.eps)

    def _gpt2(self, ids, cache):
        a, P = self.arch, self.prefix
        T, C, H, D = ids.shape[0], a.hidden, a.heads, a.head_dim
        pos = torch.arange(cache.pos, cache.pos + T)
        if cache.pos + T > a.n_positions:
            raise ValueError(f"{cache.pos + T} tokens are more than n_positions {a.n_positions}")
        x = self.get(P + "wte.weight")[ids] + self.get(P + "wpe.weight")[pos]
        for i in range(a.layers):
            p = f"{P}h.{i}."
            h = layer_norm(x, self.get(p + "ln_1.weight"), self.get(p + "ln_1.bias"), a.eps)
            q, k, v = (t.reshape(T, H, D).transpose(0, 1) for t in self.conv1d(h, p + "attn.c_attn").split(C, dim=-1))
            k, v = cache.extend(i, k, v)
            divide = math.sqrt(D) if a.scale_attn else 1.0
            if a.scale_by_layer:
                divide *= i + 1
            y = attend(q, k, v, pos, key_positions(pos, k), None, divide=divide)
            x = x + self.conv1d(y.transpose(0, 1).reshape(T, C), p + "attn.c_proj")
            h = layer_norm(x, self.get(p + "ln_2.weight"), self.get(p + "ln_2.bias"), a.eps)
            x = x + self.conv1d(gelu_new(self.conv1d(h, p + "mlp.c_fc")), p + "mlp.c_proj")
        cache.pos += T
        return layer_norm(x, self.get(P + "ln_f.weight"), self.get(P + "ln_f.bias"), a.eps)

    # ---- what the subcommands compute

    def logits(self, ids):
        """(T, V) logits of a whole sequence, no cache kept."""
        return self.project(self.hidden_states(torch.as_tensor(ids), Cache(self.arch.layers)))

    def logprobs(self, ids):
        """[log p(ids[t] | ids[<t]) for t = 1..n-1]."""
        if len(ids) < 2:
            return []
        lp = log_softmax(self.logits(ids)[:-1])
        return lp.gather(1, torch.as_tensor(ids[1:])[:, None])[:, 0].tolist()

    def generate(self, ids, max_new_tokens):
        """Greedy: the argmax (first on ties) of each step's logits, fed back one token at a time
        through the cache; stops after an eos id, which is kept."""
        cache, out = Cache(self.arch.layers), []
        h = self.hidden_states(torch.as_tensor(ids), cache)
        for _ in range(max_new_tokens):
            nxt = int(torch.argmax(self.project(h[-1])))
            out.append(nxt)
            if nxt in self.arch.eos_ids:
                break
            h = self.hidden_states(torch.tensor([nxt]), cache)
        return out

    def score(self, ids):
        """*ForSequenceClassification: the score head at the rightmost token that is not
        pad_token_id (the last token when there is no pad id; index 0 when all are pads)."""
        if self.arch.task != "score":
            raise ValueError("score needs a *ForSequenceClassification checkpoint")
        h = self.hidden_states(torch.as_tensor(ids), Cache(self.arch.layers))
        pad = self.arch.pad_token_id
        last = len(ids) - 1
        if pad is not None:
            keep = [t for t, token in enumerate(ids) if token != pad]
            last = keep[-1] if keep else 0
        return self.project(h[last]).tolist()
