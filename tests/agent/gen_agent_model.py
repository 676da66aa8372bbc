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
    model emits '"' forever, which is what the invalid-step test needs.

Usage: tools/.venv/bin/python tests/agent/gen_agent_model.py [--out tests/fixtures/models/tiny-agent]
The output is deterministic: rerunning it reproduces the committed files byte for byte.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import gen_tiny_model as gtm  # noqa: E402
import gen_tiny_vision as gtv  # noqa: E402

TOKENIZER = os.path.join(ROOT, "tests", "fixtures", "tokenizer", "tekken", "tokenizer.json")
VISION = dict(gtv.VISION, tile=64, pos_grid=16)
MAX_TILES = 4
# (token, weight in the LM head's steering column)
STEERING = [('"', 2.0), ("c", 1.4), ("5", 1.0)]
STEER_EMBED = 4.0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(ROOT, "tests", "fixtures", "models", "tiny-agent"))
    args = ap.parse_args(argv)
    out = os.path.normpath(args.out)
    gtm.fresh_dir(out)

    with open(TOKENIZER, encoding="utf-8") as f:
        tok = json.load(f)
    n_ids = gtm.tokenizer_ids(TOKENIZER)
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
    shutil.copyfile(TOKENIZER, os.path.join(out, "tokenizer.json"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
