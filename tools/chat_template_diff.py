#!/usr/bin/env python3
"""holod's chat rendering against transformers' apply_chat_template, on any checkpoint.

For each conversation of CASES (a JSON file: [{"name", "messages"}...], messages in transformers'
form, an image part being {"type": "image", "tiles": N}), the reference is what transformers does
with the checkpoint's own chat template and tokenizer: apply_chat_template(messages,
tokenize=False, add_generation_prompt=True), each <image> of the text replaced by <img> +
<image> x (tokens per tile x tiles) + </img> as the Nemotron-VL processor does, then
tokenizer(text, add_special_tokens=False). Tokens per tile come from config.json
((force_image_size / patch_size)^2 x downsample_ratio^2).

  --holo-infer PATH   also run `holo-infer --model MODEL --render --messages ...` per case and
                      print the first difference in text and ids (exit 1 on any)
  --write FILE        write the reference renderings as a fixture (tests/fixtures/chat/*.json,
                      which tests/chat/test-chat-template.c holds holod's rendering to)

Needs the reference venv (CI never does):
  python3 -m venv tools/.venv-ref && tools/.venv-ref/bin/pip install transformers jinja2 tokenizers
Usage, e.g. with the real checkpoint:
  tools/.venv-ref/bin/python tools/chat_template_diff.py --model ~/models/Holotron-12B \\
      --holo-infer build/tools/holo-infer/holo-infer
The fixtures (after tools/nemotron_vl_template.py wrote the tiny checkpoints' templates):
  tools/.venv-ref/bin/python tools/chat_template_diff.py --model tests/fixtures/vision/tiny-vlm \\
      --write tests/fixtures/chat/tiny-vlm.json
  tools/.venv-ref/bin/python tools/chat_template_diff.py --model tests/fixtures/models/tiny-agent \\
      --write tests/fixtures/chat/tiny-agent.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

import jinja2
import tokenizers
import transformers
from transformers import AutoTokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
DEFAULT_CASES = os.path.join(ROOT, "tests", "fixtures", "chat", "conversations.json")


def tokens_per_tile(model):
    with open(os.path.join(model, "config.json")) as f:
        cfg = json.load(f)
    side = cfg["force_image_size"] // cfg["patch_size"]
    return int(round(side * side * cfg["downsample_ratio"] ** 2))


def reference(tok, messages, per_tile):
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    tiles = [p["tiles"] for m in messages if not isinstance(m["content"], str)
             for p in m["content"] if p["type"] == "image"]
    parts = text.split("<image>")
    assert len(parts) == len(tiles) + 1, ("placeholders vs images", len(parts) - 1, tiles)
    out = parts[0]
    for t, rest in zip(tiles, parts[1:]):
        out += "<img>" + "<image>" * (per_tile * t) + "</img>" + rest
    ids = tok(out, add_special_tokens=False)["input_ids"]
    return out, ids


def first_diff(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else -1


def holod_render(holo_infer, model, messages):
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
        json.dump(messages, f)
        path = f.name
    try:
        p = subprocess.run([holo_infer, "--model", model, "--render", "--messages", path],
                           capture_output=True, text=True)
    finally:
        os.unlink(path)
    if p.returncode != 0:
        return None, p.stderr.strip()
    return json.loads(p.stdout), None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="checkpoint directory")
    ap.add_argument("--cases", default=DEFAULT_CASES)
    ap.add_argument("--holo-infer", help="holo-infer binary to diff against")
    ap.add_argument("--write", help="write the reference renderings to this fixture")
    args = ap.parse_args()

    tok = AutoTokenizer.from_pretrained(args.model)
    per_tile = tokens_per_tile(args.model)
    with open(args.cases) as f:
        cases = json.load(f)
    out_cases, bad = [], 0
    for case in cases:
        text, ids = reference(tok, case["messages"], per_tile)
        assert tok.decode(ids, skip_special_tokens=False) == text, case["name"]
        out_cases.append({"name": case["name"], "messages": case["messages"], "text": text, "ids": ids})
        if not args.holo_infer:
            continue
        got, err = holod_render(args.holo_infer, args.model, case["messages"])
        if got is None:
            print(f"{case['name']}: holo-infer failed: {err}")
            bad += 1
            continue
        dt, di = first_diff(got["text"], text), first_diff(got["ids"], ids)
        if dt < 0 and di < 0:
            print(f"{case['name']}: same text and {len(ids)} ids")
            continue
        bad += 1
        print(f"{case['name']}: DIFFERENT")
        if dt >= 0:
            print(f"  text from byte {dt}: holod {got['text'][dt:dt + 60]!r}")
            print(f"  {'':>15}transformers {text[dt:dt + 60]!r}")
        if di >= 0:
            print(f"  ids from {di}: holod {got['ids'][di:di + 8]} transformers {ids[di:di + 8]}")
    if args.write:
        fixture = {
            "generator": "tools/chat_template_diff.py",
            "model": os.path.relpath(os.path.abspath(args.model), ROOT),
            "versions": {"transformers": transformers.__version__,
                         "tokenizers": tokenizers.__version__, "jinja2": jinja2.__version__},
            "tokens_per_tile": per_tile,
            "cases": out_cases,
        }
        head = json.dumps({k: v for k, v in fixture.items() if k != "cases"}, ensure_ascii=False)
        lines = ",\n".join(json.dumps(c, ensure_ascii=False) for c in out_cases)
        with open(args.write, "w") as f:
            f.write(head[:-1] + ', "cases": [\n' + lines + "\n]}\n")
    if args.holo_infer:
        print(f"{len(cases) - bad} of {len(cases)} conversations render the same")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
