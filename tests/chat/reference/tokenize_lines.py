"""Helpers of tests/chat/tokenize_compare.sh, which holds `genesis tokenize` on conversation
lines against jinja2 (render.py) and Hugging Face tokenizers (tests/tokenizer/reference/encode.js).

  tokenize_lines.py lines CASES                 # genesis tokenize's input: one conversation a line
  tokenize_lines.py texts REFERENCE             # encode.js's input: each rendered text ("" for
                                                #   a case jinja2 refused)
  tokenize_lines.py compare CASES REFERENCE IDS GENESIS --what TEST
"""
import json
import sys


def read(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    mode = sys.argv[1]
    if mode == "lines":
        for case in read(sys.argv[2]):
            line = {"messages": case["messages"],
                    "add_generation_prompt": case.get("add_generation_prompt", False)}
            for key in ("tools", "kwargs"):
                if key in case:
                    line[key] = case[key]
            print(json.dumps(line, ensure_ascii=False))
        return 0
    if mode == "texts":
        for r in read(sys.argv[2]):
            print(json.dumps({"text": r.get("text", "")}, ensure_ascii=False))
        return 0
    what = sys.argv[sys.argv.index("--what") + 1] if "--what" in sys.argv else "chat.tokenize"
    cases, ref, ids, gen = (read(p) for p in sys.argv[2:6])
    if not (len(cases) == len(ref) == len(ids) == len(gen)):
        print(f"{what}: line counts differ: {len(cases)} cases, {len(ref)} rendered, "
              f"{len(ids)} encoded, {len(gen)} from genesis", file=sys.stderr)
        return 1
    problems = []
    for case, r, i, g in zip(cases, ref, ids, gen):
        name = case["name"]
        if "text" not in r:
            if "error" not in g:
                problems.append(f"{name}: jinja2 fails ({r['error']}), genesis gives {g}")
            continue
        if "error" in g:
            problems.append(f"{name}: genesis fails: {g['error']}")
        elif g.get("text") != r["text"]:
            problems.append(f"{name}: rendered texts differ:\n    jinja2:  {r['text'][:200]!r}\n"
                            f"    genesis: {g.get('text', '')[:200]!r}")
        elif g.get("ids") != i.get("ids"):
            problems.append(f"{name}: ids differ:\n    tokenizers: {i.get('ids')}\n"
                            f"    genesis:    {g.get('ids')}")
    for p in problems[:8]:
        print(f"{what}: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
