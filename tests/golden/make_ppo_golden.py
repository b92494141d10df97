#!/usr/bin/env python3
"""Reference values for tests/train/test_ppo_golden.cpp, computed with PyTorch.

The tiny GPT of make_gpt_golden.py with a critic ("v_head", n_embd -> 1 with bias, TRL's
AutoModelForCausalLMWithValueHead) on its final hidden states, detached (the value loss trains the
head, not the trunk the policy shares), and the four completions of
make_grpo_golden.py. The rollout's policy (the weights plus noise, so that ratios leave the clip
range) gives the old log-probabilities; the old values, per-token rewards and the rollout's
values are drawn at random. GAE as TRL's PPOTrainer loop computes it (gamma, lam) gives the
advantages and returns; the loss is TRL's: the clipped surrogate's masked mean plus vf_coef times
half the masked mean of the larger of the value's and the clipped value's squared error. Writes
the weights, rows, rollout, GAE's results, the loss and every parameter gradient to
ppo_tiny.json. Rerun only when a definition changes:

    /usr/bin/python3 tests/golden/make_ppo_golden.py   # needs python3-torch
"""
import json
import os

import torch

import make_gpt_golden as gpt
from make_grpo_golden import token_log_probs
from make_preference_golden import ROWS, grads_of, hidden, listed, make_params

CLIPRANGE, CLIPRANGE_VALUE, VF_COEF, GAMMA, LAM = 0.2, 0.2, 0.1, 0.9, 0.95


def gae(rewards, values, mask):
    """TRL's loop over the completion tokens of each row (values past the completion are 0)."""
    advantages = torch.zeros_like(rewards)
    for r in range(rewards.shape[0]):
        positions = mask[r].nonzero().flatten().tolist()
        last = 0.0
        for k in reversed(range(len(positions))):
            t = positions[k]
            next_value = values[r, positions[k + 1]] if k + 1 < len(positions) else 0.0
            delta = rewards[r, t] + GAMMA * next_value - values[r, t]
            last = delta + GAMMA * LAM * last
            advantages[r, t] = last
    return advantages, (advantages + values) * mask


def ppo_loss(logp, vpred, old_logp, old_values, advantages, returns, mask):
    def masked_mean(x):
        return (x * mask).sum() / mask.sum()
    v_clipped = torch.clamp(vpred, old_values - CLIPRANGE_VALUE, old_values + CLIPRANGE_VALUE)
    vf = 0.5 * masked_mean(torch.max((vpred - returns) ** 2, (v_clipped - returns) ** 2))
    ratio = torch.exp(logp - old_logp)
    pg = masked_mean(torch.max(-advantages * ratio,
                               -advantages * torch.clamp(ratio, 1 - CLIPRANGE, 1 + CLIPRANGE)))
    return pg + VF_COEF * vf


def main():
    T, V, C = gpt.CFG["block_size"], gpt.CFG["vocab_size"], gpt.CFG["n_embd"]
    gpt.B, gpt.T = ROWS, T
    policy = {n: t.clone().requires_grad_() for n, t in make_params(1).items()}
    torch.manual_seed(5)
    policy["v_head.weight"] = (0.3 * torch.randn(1, C)).requires_grad_()
    policy["v_head.bias"] = (0.1 * torch.randn(1)).requires_grad_()
    old = {n: (t + 0.05 * torch.randn(t.shape)).detach() for n, t in policy.items()}
    idx = torch.randint(0, V, (ROWS, T))
    targets = torch.full((ROWS, T), -1, dtype=torch.long)
    for row, length in enumerate([4, 2, 3, 5]):
        targets[row, 2:2 + length] = torch.randint(0, V, (length,))
    mask = (targets >= 0).float()
    rewards = torch.randn(ROWS, T) * mask
    rollout_values = torch.randn(ROWS, T) * mask
    advantages, returns = gae(rewards, rollout_values, mask)

    with torch.no_grad():
        old_logp, _ = token_log_probs(gpt.forward(old, idx), targets)
    old_values = (rollout_values + 0.3 * torch.randn(ROWS, T)) * mask
    logp, _ = token_log_probs(gpt.forward(policy, idx), targets)
    h = hidden(policy, idx).detach()
    vpred = (h @ policy["v_head.weight"].t() + policy["v_head.bias"]).squeeze(-1)
    loss = ppo_loss(logp, vpred, old_logp, old_values, advantages, returns, mask)
    ratio = torch.exp(logp - old_logp).detach()
    clipped = ((ratio < 1 - CLIPRANGE) | (ratio > 1 + CLIPRANGE)) & (mask > 0)
    out = {"config": gpt.CFG, "rows": ROWS, "seq": T, "cliprange": CLIPRANGE,
           "cliprange_value": CLIPRANGE_VALUE, "vf_coef": VF_COEF, "gamma": GAMMA, "lam": LAM,
           "idx": idx.flatten().tolist(), "targets": targets.flatten().tolist(),
           "policy": {n: {"shape": list(t.shape), "data": listed(t)} for n, t in policy.items()},
           "old_logp": listed(old_logp), "old_values": listed(old_values),
           "rewards": listed(rewards), "rollout_values": listed(rollout_values),
           "advantages": listed(advantages), "returns": listed(returns),
           "loss": loss.item(), "grads": grads_of(loss, policy),
           "clipped_tokens": int(clipped.sum()), "torch_version": torch.__version__}
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ppo_tiny.json")
    with open(path, "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print(f"wrote {path}: loss {out['loss']:.6f}; {out['clipped_tokens']} of "
          f"{int(mask.sum())} tokens outside the clip range")


if __name__ == "__main__":
    main()
