"""The reference side of tests/chat/compare.sh: renders JSONL cases with jinja2 set up exactly as
transformers' apply_chat_template sets it up (utils/chat_template_utils.py,
_compile_jinja_template and _render_with_assistant_indices): ImmutableSandboxedEnvironment with
trim_blocks, lstrip_blocks, loopcontrols and the AssistantTracker extension for
{% generation %}, transformers' tojson, raise_exception and strftime_now, and the variables
messages, tools (None when absent), documents (None), add_generation_prompt, then the special
tokens of tokenizer_config.json and the case's kwargs. strftime_now reads the clock
GENESIS_CHAT_TEMPLATE_NOW (Unix seconds) sets. Generation spans are turned from character
indices into UTF-8 byte offsets, the unit genesis reports.

Input and output lines are those of tests/chat/render_cases.cpp. Run with Debian's python3 and
python3-jinja2:  /usr/bin/python3 render.py < cases.jsonl > reference.jsonl
"""
import json
import os
import sys
from datetime import datetime

import jinja2
import jinja2.ext
from jinja2.ext import Extension
from jinja2.sandbox import ImmutableSandboxedEnvironment


class Raised(jinja2.exceptions.TemplateError):
    """What raise_exception raises (a TemplateError, as in transformers), told apart here."""


def build_environment():
    class AssistantTracker(Extension):
        tags = {"generation"}

        def __init__(self, environment):
            super().__init__(environment)
            environment.extend(activate_tracker=self.activate_tracker)
            self._rendered_blocks = None
            self._generation_indices = None

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(["name:endgeneration"], drop_needle=True)
            return jinja2.nodes.CallBlock(
                self.call_method("_generation_support"), [], [], body
            ).set_lineno(lineno)

        @jinja2.pass_eval_context
        def _generation_support(self, context, caller):
            rv = caller()
            if self.is_active():
                start_index = len("".join(self._rendered_blocks))
                end_index = start_index + len(rv)
                self._generation_indices.append((start_index, end_index))
            return rv

        def is_active(self):
            return self._rendered_blocks is not None or self._generation_indices is not None

        def activate_tracker(self, rendered_blocks, generation_indices):
            tracker = self

            class Active:
                def __enter__(self):
                    tracker._rendered_blocks = rendered_blocks
                    tracker._generation_indices = generation_indices

                def __exit__(self, *exc):
                    tracker._rendered_blocks = None
                    tracker._generation_indices = None

            return Active()

    def raise_exception(message):
        raise Raised(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                          sort_keys=sort_keys)

    now = os.environ.get("GENESIS_CHAT_TEMPLATE_NOW")

    def strftime_now(format):
        clock = datetime.fromtimestamp(int(now)) if now else datetime.now()
        return clock.strftime(format)

    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True,
        extensions=[AssistantTracker, jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


def special_tokens_of(config):
    """The variables a tokenizer_config.json gives a template: string *_token entries (an
    AddedToken dict's content) and additional_special_tokens."""
    def text(v):
        if isinstance(v, str):
            return v
        if isinstance(v, dict) and isinstance(v.get("content"), str):
            return v["content"]
        return None
    out = {}
    for key, value in config.items():
        if key.endswith("_token") and len(key) > 6 and text(value) is not None:
            out[key] = text(value)
        elif key == "additional_special_tokens" and isinstance(value, list):
            out[key] = [text(v) for v in value if text(v) is not None]
    return out


def read_config(directory):
    path = os.path.join(directory, "tokenizer_config.json")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def load_template(case):
    """(template source, special tokens) as transformers would find them."""
    t = case["template"]
    if "source" in t:
        return t["source"], case.get("special_tokens", {})
    if "file" in t:
        with open(t["file"], encoding="utf-8") as f:
            source = f.read()
        config = read_config(t["tokenizer_dir"]) if t.get("tokenizer_dir") else None
        return source, special_tokens_of(config) if config else {}
    directory, name = t["dir"], t.get("name") or "default"
    config = read_config(directory) or {}
    jinja_file = os.path.join(directory, "chat_template.jinja")
    if name == "default" and os.path.isfile(jinja_file):
        with open(jinja_file, encoding="utf-8") as f:
            return f.read(), special_tokens_of(config)
    template = config.get("chat_template")
    if isinstance(template, list):
        template = {entry["name"]: entry["template"] for entry in template}.get(name)
    if not isinstance(template, str):
        raise LookupError(f"{directory} has no chat template")
    return template, special_tokens_of(config)


def render(env, case):
    source, special = load_template(case)
    compiled = env.from_string(source)
    kwargs = {**special, **case.get("kwargs", {})}
    blocks, indices = [], []
    with compiled.environment.activate_tracker(blocks, indices):
        for block in compiled.generate(
                messages=case["messages"], tools=case.get("tools"), documents=None,
                add_generation_prompt=case.get("add_generation_prompt", False), **kwargs):
            blocks.append(block)
        text = "".join(blocks)
    spans = []
    for start, end in indices:
        begin = len(text[:start].encode("utf-8", "surrogatepass"))
        spans.append([begin, begin + len(text[start:end].encode("utf-8", "surrogatepass"))])
    return text, spans


def main():
    env = build_environment()
    for line in sys.stdin:
        if not line.strip():
            continue
        case = json.loads(line)
        out = {"name": case.get("name", "")}
        try:
            out["text"], out["generation"] = render(env, case)
        except Raised as e:
            out.update(error=str(e), raised=True, message=str(e))
        except Exception as e:  # what transformers would raise: any failure of the template
            out.update(error=f"{type(e).__name__}: {e}", raised=False)
        sys.stdout.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
