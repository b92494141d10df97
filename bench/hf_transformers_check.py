#!/usr/bin/env python3
"""Do genesis's log-probabilities and greedy answers for a Hugging Face checkpoint match
transformers' own model of its config.json?

Loads MODEL_DIR with transformers' AutoModelForCausalLM (float32, eager attention), scores every
{"ids": [...]} line of IDS and decodes it greedily for MAX_NEW tokens, and compares with what
`genesis score` and `genesis generate` wrote for the same lines. Prints one JSON line; exit 1 when
a log-probability differs by more than 1e-3 or a greedy answer differs, 3 without transformers.

    python3 bench/hf_transformers_check.py MODEL_DIR IDS SCORE_JSONL GENERATE_JSONL MAX_NEW
"""
import json
import sys


def lines(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    model_dir, ids_path, score_path, generate_path, max_new = sys.argv[1:6]
    try:
        import torch
        from transformers import AutoModelForCausalLM
    except ImportError as e:
        print(json.dumps({"error": "transformers is not installed: %s" % e}))
        return 3
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    worst, mismatches = 0.0, []
    inputs, scores, generated = lines(ids_path), lines(score_path), lines(generate_path)
    for i, (line, score, answer) in enumerate(zip(inputs, scores, generated)):
        ids = torch.tensor([line["ids"]])
        with torch.no_grad():
            logp = torch.log_softmax(model(ids).logits.float(), -1)[0, :-1]
            theirs = logp.gather(-1, ids[0, 1:, None])[:, 0].tolist()
            out = model.generate(ids, max_new_tokens=int(max_new), do_sample=False)
        ours = score["logprobs"]
        worst = max([worst] + [abs(a - b) for a, b in zip(ours, theirs)])
        greedy = out[0, ids.shape[1]:].tolist()
        if len(ours) != len(theirs) or greedy != answer["ids"]:
            mismatches.append({"line": i + 1, "transformers": greedy, "genesis": answer["ids"]})
    ok = worst <= 1e-3 and not mismatches
    print(json.dumps({"model": model_dir, "max_abs_logprob_diff": worst,
                      "greedy_mismatches": mismatches, "ok": ok}))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
