#!/usr/bin/env python3
"""Reference values for tests/train/test_grpo_golden.cpp, computed with PyTorch.

The tiny GPT and the four rows of make_preference_golden.py, read as four completions (targets
-1 outside the completion tokens) with one advantage each. The policy, the policy that sampled
(the policy's weights plus noise, so that ratios leave [1 - epsilon, 1 + epsilon_high] and the
clip acts) and the reference (another perturbation) give per-token log-probabilities; the loss is
TRL GRPOTrainer's: -min(ratio A, clip(ratio) A) + beta (exp(ref - logp) - (ref - logp) - 1) per
completion token, aggregated as grpo, dapo and dr_grpo. Writes the weights, rows, advantages and
each loss type's loss and every parameter gradient to grpo_tiny.json. Rerun only when a
definition changes:

    /usr/bin/python3 tests/golden/make_grpo_golden.py   # needs python3-torch
"""
import json
import os

import torch

import make_gpt_golden as gpt
from make_preference_golden import ROWS, grads_of, listed, make_params

EPSILON, EPSILON_HIGH, BETA = 0.2, 0.28, 0.04
ADVANTAGES = [1.5, -0.75, 0.5, -1.25]


def token_log_probs(logits, targets):
    mask = (targets >= 0).float()
    logp = logits.log_softmax(-1).gather(-1, targets.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return logp * mask, mask


def grpo_loss(logp, old, ref, adv, mask, loss_type, length):
    ratio = torch.exp(logp - old)
    clipped = torch.clamp(ratio, 1 - EPSILON, 1 + EPSILON_HIGH)
    per_token = -torch.min(ratio * adv, clipped * adv)
    d = ref - logp
    per_token = per_token + BETA * (torch.exp(d) - d - 1)
    masked = per_token * mask
    if loss_type == "grpo":
        return (masked.sum(-1) / mask.sum(-1).clamp(min=1)).mean()
    if loss_type == "dapo":
        return masked.sum() / mask.sum().clamp(min=1)
    return masked.sum() / (logp.shape[0] * length)


def main():
    T, V = gpt.CFG["block_size"], gpt.CFG["vocab_size"]
    gpt.B, gpt.T = ROWS, T
    policy = {n: t.clone().requires_grad_() for n, t in make_params(1).items()}
    torch.manual_seed(3)
    old = {n: (t + 0.02 * torch.randn(t.shape)).detach() for n, t in policy.items()}
    reference = {n: (t + 0.1 * torch.randn(t.shape)).detach() for n, t in policy.items()}
    idx = torch.randint(0, V, (ROWS, T))
    targets = torch.full((ROWS, T), -1, dtype=torch.long)
    for row, length in enumerate([4, 2, 3, 5]):
        targets[row, 2:2 + length] = torch.randint(0, V, (length,))
    adv = torch.tensor(ADVANTAGES).unsqueeze(1)

    logp, mask = token_log_probs(gpt.forward(policy, idx), targets)
    with torch.no_grad():
        old_logp, _ = token_log_probs(gpt.forward(old, idx), targets)
        ref_logp, _ = token_log_probs(gpt.forward(reference, idx), targets)
    ratio = torch.exp(logp - old_logp).detach()
    clipped = ((ratio < 1 - EPSILON) | (ratio > 1 + EPSILON_HIGH)) & (mask > 0)
    out = {"config": gpt.CFG, "rows": ROWS, "seq": T, "epsilon": EPSILON,
           "epsilon_high": EPSILON_HIGH, "beta": BETA, "advantages": ADVANTAGES,
           "idx": idx.flatten().tolist(), "targets": targets.flatten().tolist(),
           "policy": {n: {"shape": list(t.shape), "data": listed(t)} for n, t in policy.items()},
           "old": {n: listed(t) for n, t in old.items()},
           "reference": {n: listed(t) for n, t in reference.items()},
           "clipped_tokens": int(clipped.sum()), "torch_version": torch.__version__}
    for loss_type in ("grpo", "dapo", "dr_grpo"):
        logp, mask = token_log_probs(gpt.forward(policy, idx), targets)
        loss = grpo_loss(logp, old_logp, ref_logp, adv, mask, loss_type, T)
        out[loss_type] = {"loss": loss.item(), "grads": grads_of(loss, policy)}

    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "grpo_tiny.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"wrote {path}: grpo {out['grpo']['loss']:.6f}, dapo {out['dapo']['loss']:.6f}, "
          f"dr_grpo {out['dr_grpo']['loss']:.6f}; {out['clipped_tokens']} of "
          f"{int(mask.sum())} tokens outside the clip range")


if __name__ == "__main__":
    main()
