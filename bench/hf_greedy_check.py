#!/usr/bin/env python3
"""Does a genesis export load in Hugging Face transformers and answer as genesis does?

Loads EXPORT (written by `genesis ckpt export`: model.safetensors + config.json) with
transformers' GPT2LMHeadModel, decodes every sample of RUN's summary.json greedily from its prompt
(byte tokens, end-of-text 256, as genesis's SFT preset encodes them) and compares with the answer
genesis generated for it. Prints one JSON line; exit 1 on any mismatch, 3 without transformers.

    python3 bench/hf_greedy_check.py RUN_DIR EXPORT_DIR
"""
import json
import sys

END_OF_TEXT = 256


def main():
    run_dir, export_dir = sys.argv[1], sys.argv[2]
    try:
        import torch
        from transformers import GPT2LMHeadModel
    except ImportError as e:
        print(json.dumps({"error": "transformers is not installed: %s" % e}))
        return 3
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = GPT2LMHeadModel.from_pretrained(export_dir, torch_dtype=torch.float32).to(device).eval()
    samples = json.load(open(run_dir + "/summary.json"))["samples"]
    assert samples, "summary.json has no generation samples (an SFT run writes them)"
    mismatches = []
    for s in samples:
        prompt = list(s["prompt"].encode("utf-8"))
        expected = list(s["generated"].encode("utf-8"))
        ids = torch.tensor([prompt], device=device)
        with torch.no_grad():
            out = model.generate(ids, max_new_tokens=len(expected) + 1, do_sample=False,
                                 eos_token_id=END_OF_TEXT, pad_token_id=END_OF_TEXT,
                                 attention_mask=torch.ones_like(ids))
        answer = [t for t in out[0, len(prompt):].tolist() if t != END_OF_TEXT][:len(expected)]
        if answer != expected:
            mismatches.append({"prompt": s["prompt"], "genesis": s["generated"],
                               "transformers": bytes(t if t < 256 else 63 for t in answer)
                               .decode("utf-8", "replace")})
    print(json.dumps({"samples": len(samples), "mismatches": len(mismatches),
                      "first_mismatches": mismatches[:3], "device": device}))
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
