#!/usr/bin/env python3
"""Reference values for tests/train/test_preference_golden.cpp, computed with PyTorch.

The tiny GPT of make_gpt_golden.py (genesis's architecture and names) as a policy, a frozen
reference (the policy's weights plus noise) and a value head ("score.weight", n_embd -> 1, no
bias, as GPT2ForSequenceClassification's) over two preference pairs: four sequences, [chosen,
rejected] per pair, whose targets score the response tokens only (-1 elsewhere). Writes the
weights, the rows, and for DPO (sigmoid with label smoothing, and IPO; TRL's formulas) and the
reward model (Bradley-Terry at each sequence's last scored position) the loss and every
parameter gradient, to preference_tiny.json. Rerun only when a definition changes:

    /usr/bin/python3 tests/golden/make_preference_golden.py   # needs python3-torch
"""
import json
import os

import torch
import torch.nn.functional as F

import make_gpt_golden as gpt

PAIRS = 2
ROWS = 2 * PAIRS
BETA = 0.1
LABEL_SMOOTHING = 0.1


def hidden(p, idx):
    """The final layer-normed hidden states: the LM head's and the value head's input."""
    C = gpt.CFG["n_embd"]
    logits_weight = p["wte.weight"]
    # make_gpt_golden's forward ends with the tied LM head; undo nothing, recompute up to ln_f.
    saved = F.linear
    captured = {}

    def capture(x, w, b=None):
        if w is logits_weight and b is None:
            captured["x"] = x
        return saved(x, w, b)

    F.linear = capture
    try:
        gpt.forward(p, idx)
    finally:
        F.linear = saved
    assert captured["x"].shape[-1] == C
    return captured["x"]


def sequence_log_probs(logits, targets, mean):
    logp = logits.log_softmax(-1)
    scored = targets >= 0
    picked = logp.gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1) * scored
    total = picked.sum(-1)
    return total / scored.sum(-1) if mean else total


def dpo_loss(policy, reference, loss_type):
    margin = (policy[:, 0] - policy[:, 1]) - (reference[:, 0] - reference[:, 1])
    if loss_type == "ipo":
        return ((margin - 1 / (2 * BETA)) ** 2).mean()
    z = BETA * margin
    return (-F.logsigmoid(z) * (1 - LABEL_SMOOTHING) - F.logsigmoid(-z) * LABEL_SMOOTHING).mean()


def make_params(seed):
    torch.manual_seed(seed)
    params = {}
    for n in gpt.names():
        s = gpt.shape_of(n)
        base = torch.ones(s) if n.endswith("weight") and "ln_" in n else torch.zeros(s)
        params[n] = (base + 0.3 * torch.randn(s, dtype=torch.float64)).float()
    return params


def listed(t):
    """A float32 tensor as a list, each value to the 9 digits that restore it exactly."""
    return [float(f"{x:.9g}") for x in t.detach().flatten().tolist()]


def grads_of(loss, params):
    return {n: listed(g) for n, g in zip(params, torch.autograd.grad(loss, list(params.values())))}


def main():
    T, V, C = gpt.CFG["block_size"], gpt.CFG["vocab_size"], gpt.CFG["n_embd"]
    gpt.B, gpt.T = ROWS, T
    policy = {n: t.clone().requires_grad_() for n, t in make_params(1).items()}
    torch.manual_seed(2)
    reference = {n: (t + 0.05 * torch.randn(t.shape)).detach() for n, t in policy.items()}
    score = (0.3 * torch.randn(1, C)).requires_grad_()
    idx = torch.randint(0, V, (ROWS, T))
    # Prompts of 3 tokens; responses of 4, 2, 3 and 5 tokens, the rest padding.
    targets = torch.full((ROWS, T), -1, dtype=torch.long)
    for row, length in enumerate([4, 2, 3, 5]):
        targets[row, 2:2 + length] = torch.randint(0, V, (length,))

    out = {"config": gpt.CFG, "rows": ROWS, "seq": T, "beta": BETA,
           "label_smoothing": LABEL_SMOOTHING,
           "idx": idx.flatten().tolist(), "targets": targets.flatten().tolist(),
           "policy": {n: {"shape": list(t.shape), "data": listed(t)}
                      for n, t in policy.items()},
           "reference": {n: listed(t) for n, t in reference.items()},
           "score": listed(score),
           "torch_version": torch.__version__}
    for loss_type in ("sigmoid", "ipo"):
        mean = loss_type == "ipo"
        pi = sequence_log_probs(gpt.forward(policy, idx), targets, mean).view(PAIRS, 2)
        with torch.no_grad():
            ref = sequence_log_probs(gpt.forward(reference, idx), targets, mean).view(PAIRS, 2)
        loss = dpo_loss(pi, ref, loss_type)
        out["dpo_" + loss_type] = {"loss": loss.item(), "policy_logps": listed(pi),
                                  "reference_logps": listed(ref),
                                  "grads": grads_of(loss, policy)}

    values = F.linear(hidden(policy, idx), score).squeeze(-1)  # (ROWS, T)
    last = (targets >= 0).long().cumsum(-1).argmax(-1)  # each row's last scored position
    scores = values.gather(-1, last.unsqueeze(-1)).view(PAIRS, 2)
    rm_loss = -F.logsigmoid(scores[:, 0] - scores[:, 1]).mean()
    params = dict(policy, **{"score.weight": score})
    out["rm"] = {"loss": rm_loss.item(), "scores": listed(scores),
                 "grads": grads_of(rm_loss, params)}

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "preference_tiny.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"wrote {path}: dpo sigmoid {out['dpo_sigmoid']['loss']:.6f}, "
          f"ipo {out['dpo_ipo']['loss']:.6f}, rm {rm_loss.item():.6f}")


if __name__ == "__main__":
    main()
