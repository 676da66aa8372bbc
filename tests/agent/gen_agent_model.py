#!/usr/bin/env python3
"""Generate the tiny vision-language checkpoint of the agent tests (tests/fixtures/models/tiny-agent).

A complete NemotronH_Nano_VL_V2 checkpoint that holod can run an instruction task with:
  - the tiny language model of tools/gen_tiny_model.py ("M-M*-M", hidden 64) over the Tekken
    tokenizer fixture (tests/fixtures/tokenizer/tekken/tokenizer.json, copied in: <SPECIAL_10..12>,
    <image>, <img>, </img>, <think>, </think>), vocab = its ids rounded up to a multiple of 64;
  - the tiny RADIO tower + projector of tools/gen_tiny_vision.py with 64-pixel tiles (4 image
    tokens per tile) and at most 4 tiles, so a 640x400 screen costs a handful of tokens;
  - random weights with one deliberate bias, "steering": every token embedding has +4 in
    dimension 0 (the layers' small random updates do not undo it), and the LM head's column 0
    gives a few tokens a large logit there: '"' most, then 'c', then '5'. Decoding under the step
    grammar then gives short strings, the tool `click` and coordinates like 555, step after step,
    which keeps the end-to-end tests fast (no 1024-byte random strings, no 30-second `wait`) and
    makes the clicks land where the test client can record them. Without the grammar the same
    model emits '"' forever, which is what the invalid-step test needs;
  - tokenizer_config.json with the chat template in the base model's published layout
    (tools/nemotron_vl_template.py).

With --short-prompt (tests/fixtures/models/tiny-agent-short) the checkpoint is the same but for
its tokenizer: the pre-tokenizer splits at line ends only, and BPE merges trained greedily (most
frequent pair first, ties to the first seen) on the agent's system prompt for a 640x400 screen
(tests/policy/golden-holo3-system.txt with the screen size replaced) and the test instruction
bring that prefix from about 5000 tokens (the prompt holds the step's JSON Schema) to a few
hundred. The emulated CUDA backend's attention costs the square of the prefix, so this is what
makes the agent tests fit there.
The added tokens keep their ids (now in the vocab too), the new ids come after them; the steering looks its tokens up in the new vocab.

Usage: tools/.venv/bin/python tests/agent/gen_agent_model.py [--short-prompt] [--out DIR]
The output is deterministic: rerunning it reproduces the committed files byte for byte.
"""

import argparse
import json
import os
import re
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_tiny_model as gtm  # noqa: E402
import gen_tiny_vision as gtv  # noqa: E402
import nemotron_vl_template as nvt  # noqa: E402

TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "tokenizer", "tekken", "tokenizer.json")
VISION = dict(gtv.VISION, tile=64, pos_grid=16)
MAX_TILES = 4
# (token, weight in the LM head's steering column)
STEERING = [('"', 2.0), ("c", 1.4), ("5", 1.0)]
STEER_EMBED = 4.0
GOLDEN_SYSTEM = os.path.join(ROOT, "tests", "policy", "golden-holo3-system.txt")
# The prefix a --short-prompt tokenizer is trained on stops shrinking at this many tokens.
SHORT_PROMPT_TOKENS = 320


def byte_chars():
    """GPT-2's byte-to-character map of the ByteLevel pre-tokenizer."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def apply_merges(word, ranks):
    t = list(word)
    while len(t) > 1:
        best = min(((ranks.get((t[i], t[i + 1])), i) for i in range(len(t) - 1)
                    if (t[i], t[i + 1]) in ranks), default=None)
        if best is None:
            break
        i = best[1]
        t[i:i + 2] = [t[i] + t[i + 1]]
    return t


def short_prompt_tokenizer(tok):
    """tok with a line-level pre-tokenizer and merges trained on the agent's prompt text."""
    with open(GOLDEN_SYSTEM, encoding="utf-8") as f:
        text = f.read().replace("1920x1080", "640x400")
    text += "\nTask: Click the red block.\n"
    line = r"[^\n]*\n|[^\n]+"
    tok["pre_tokenizer"] = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": line}, "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]}
    m = tok["model"]
    ranks = {tuple(p): i for i, p in enumerate(m["merges"])}
    bc = byte_chars()
    words = [apply_merges("".join(bc[b] for b in w.encode("utf-8")), ranks)
             for w in re.findall(line, text)]
    vocab = m["vocab"]
    # HF numbers added tokens that are not in the vocab after it: they go in at their ids first,
    # so that they keep them once the vocab grows.
    for a in tok["added_tokens"]:
        if a["content"] not in vocab:
            vocab[a["content"]] = a["id"]
    next_id = tokenizer_ids(tok)
    while sum(len(w) for w in words) > SHORT_PROMPT_TOKENS:
        counts = {}
        for w in words:
            for pair in zip(w, w[1:]):
                counts[pair] = counts.get(pair, 0) + 1
        pair = max(counts, key=counts.get)  # first seen among the most frequent
        merged = pair[0] + pair[1]
        m["merges"].append(list(pair))
        if merged not in vocab:
            vocab[merged] = next_id
            next_id += 1
        for w in words:
            i = 0
            while i < len(w) - 1:
                if (w[i], w[i + 1]) == pair:
                    w[i:i + 2] = [merged]
                i += 1
    return tok


def tokenizer_ids(tok):
    ids = list(tok["model"]["vocab"].values()) + [a["id"] for a in tok.get("added_tokens", [])]
    return max(ids) + 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--short-prompt", action="store_true",
                    help="a tokenizer whose merges cover the agent's prompt (tiny-agent-short)")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    name = "tiny-agent-short" if args.short_prompt else "tiny-agent"
    out = os.path.normpath(args.out or os.path.join(ROOT, "tests", "fixtures", "models", name))
    gtm.fresh_dir(out)

    with open(TOKENIZER, encoding="utf-8") as f:
        tok = json.load(f)
    if args.short_prompt:
        tok = short_prompt_tokenizer(tok)
    n_ids = tokenizer_ids(tok)
    vocab = (n_ids + 63) // 64 * 64
    image_id = next(a["id"] for a in tok["added_tokens"] if a["content"] == "<image>")

    lm = dict(gtm.BASE, pattern="M-M*-M", vocab=vocab)
    rng = np.random.default_rng(7001)
    tensors = gtm.lm_tensors(lm, rng, "language_model.")
    d = lm["hidden"]
    emb = (rng.standard_normal((vocab, d)) * 0.3).astype(np.float32)
    emb[:, 0] = STEER_EMBED
    head = (rng.standard_normal((vocab, d)) * 0.02).astype(np.float32)
    head[:, 0] = 0.0
    for text, w in STEERING:
        head[tok["model"]["vocab"][text], 0] = w
    tensors["language_model.backbone.embeddings.weight"] = gtm.Tensor("BF16", emb)
    tensors["language_model.lm_head.weight"] = gtm.Tensor("BF16", head)
    tensors.update(gtv.vision_tensors(VISION, d, np.random.default_rng(7002)))
    gtm.write_safetensors(os.path.join(out, "model.safetensors"), tensors)

    cfg = gtv.vlm_config(lm, VISION)
    cfg["img_context_token_id"] = image_id
    gtm.write_config(os.path.join(out, "config.json"), cfg)
    pp = gtv.preprocessor_config(cfg)
    pp["max_num_tiles"] = MAX_TILES
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        f.write(json.dumps(pp, indent=2) + "\n")
    if args.short_prompt:
        with open(os.path.join(out, "tokenizer.json"), "w", encoding="utf-8") as f:
            f.write(json.dumps(tok, ensure_ascii=False, separators=(",", ":")) + "\n")
    else:
        shutil.copyfile(TOKENIZER, os.path.join(out, "tokenizer.json"))
    nvt.write_tokenizer_config(out)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
