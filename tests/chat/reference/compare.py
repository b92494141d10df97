"""Compares genesis's renderings (render_cases.cpp) with jinja2's (render.py), case by case: the
same text and generation spans, or both failing, and for raise_exception the same message.
Prints the first differences and exits 1 on any; on success prints nothing.

  compare.py --what TEST CASES REFERENCE GENESIS
"""
import argparse
import json
import sys


def first_difference(a, b):
    i = 0
    while i < min(len(a), len(b)) and a[i] == b[i]:
        i += 1
    return i


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--what", default="chat.exact")
    parser.add_argument("cases")
    parser.add_argument("reference")
    parser.add_argument("genesis")
    args = parser.parse_args()
    read = lambda path: [json.loads(l) for l in open(path, encoding="utf-8") if l.strip()]
    cases, ref, gen = read(args.cases), read(args.reference), read(args.genesis)
    if not (len(cases) == len(ref) == len(gen)):
        print(f"{args.what}: {len(cases)} cases, {len(ref)} reference lines, {len(gen)} genesis "
              "lines", file=sys.stderr)
        return 1
    problems = []
    for case, r, g in zip(cases, ref, gen):
        name = case.get("name", "?")
        if "text" in r:
            if "text" not in g:
                problems.append(f"{name}: jinja2 renders it, genesis fails: {g.get('error')}")
            elif r["text"] != g["text"]:
                i = first_difference(r["text"], g["text"])
                problems.append(f"{name}: texts differ at character {i}:\n"
                                f"    jinja2:  {r['text'][max(0, i - 40):i + 60]!r}\n"
                                f"    genesis: {g['text'][max(0, i - 40):i + 60]!r}")
            elif r["generation"] != g["generation"]:
                problems.append(f"{name}: generation spans differ: jinja2 {r['generation']}, "
                                f"genesis {g['generation']}")
        else:
            if "error" not in g:
                problems.append(f"{name}: jinja2 fails ({r['error']}), genesis renders "
                                f"{g['text'][:80]!r}")
            elif r["raised"] and (not g.get("raised") or g.get("message") != r["message"]):
                problems.append(f"{name}: raise_exception({r['message']!r}) in jinja2, genesis: "
                                f"{g['error']}")
    for p in problems[:8]:
        print(f"{args.what}: {p}", file=sys.stderr)
    if len(problems) > 8:
        print(f"{args.what}: ... and {len(problems) - 8} more", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
