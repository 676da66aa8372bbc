#!/usr/bin/env python3
"""Generate the tiny vision-language checkpoint for the vision tests (tests/fixtures/vision/tiny-vlm).

Needs only numpy; reuses tools/gen_tiny_model.py (imported as a module) for the safetensors writer,
the bf16 rounding and the language model, so the LM weights are byte-identical to tiny-mamba and
tiny-vl (same seed).

The vision tower is a complete tiny RADIO (model.md 3.2) under the real tensor names:
  ViT width 64, 2 pre-LN blocks, 4 heads (head dim 16), MLP 256, patch 16, 8 prefix tokens
  (4 "teacher" cls tokens + 4 registers, register_multiple 8), a 48x48 position grid
  (cpe_max_size 768), so a 512x512 tile (32x32 patches) exercises the CPE bilinear resize.
The projector (model.md 3.3) maps the pixel-shuffled 4*64 = 256 features through RMSNorm,
Linear 256->128, ReLU^2, Linear 128->64 (the LM hidden size).

Dtypes: BF16 as in the real checkpoint, except block 1's LayerNorm parameters (F32) and
mlp1.0.weight (F16), so the C code's dtype handling is exercised. No final norm
(vision_model.radio_model.model.norm.*), as in C-RADIOv2-H.

Usage: tools/gen_tiny_vision.py [--out tests/fixtures/vision/tiny-vlm]
The output is deterministic: rerunning it reproduces the committed files byte for byte.
"""

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gen_tiny_model as gtm  # noqa: E402

VISION = {
    "width": 64,
    "depth": 2,
    "heads": 4,
    "mlp": 256,
    "patch": 16,
    "num_cls": 4,
    "register_multiple": 8,
    "pos_grid": 48,  # cpe_max_size / patch
    "tile": 512,
    "projector_hidden": 128,
}
VISION_SEED = 5001
PREFIX = "vision_model.radio_model.model."


def vision_tensors(v, llm_hidden, rng):
    w, patch_in = v["width"], 3 * v["patch"] * v["patch"]
    n_prefix = v["num_cls"] + (v["register_multiple"] - v["num_cls"] % v["register_multiple"])
    g = v["pos_grid"]

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm_w(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    t = {}
    pg = PREFIX + "patch_generator."
    t[pg + "embedder.weight"] = gtm.Tensor("BF16", normal((w, patch_in), 0.03))
    t[pg + "pos_embed"] = gtm.Tensor("BF16", normal((1, g * g, w), 0.5))
    t[pg + "cls_token.token"] = gtm.Tensor("BF16", normal((n_prefix, w), 0.5))
    for i in range(v["depth"]):
        b = f"{PREFIX}blocks.{i}."
        ndt = "F32" if i == 1 else "BF16"
        t[b + "norm1.weight"] = gtm.Tensor(ndt, norm_w(w))
        t[b + "norm1.bias"] = gtm.Tensor(ndt, normal((w,), 0.05))
        t[b + "attn.qkv.weight"] = gtm.Tensor("BF16", normal((3 * w, w), 0.15))
        t[b + "attn.qkv.bias"] = gtm.Tensor("BF16", normal((3 * w,), 0.05))
        t[b + "attn.proj.weight"] = gtm.Tensor("BF16", normal((w, w), 0.1))
        t[b + "attn.proj.bias"] = gtm.Tensor("BF16", normal((w,), 0.05))
        t[b + "norm2.weight"] = gtm.Tensor(ndt, norm_w(w))
        t[b + "norm2.bias"] = gtm.Tensor(ndt, normal((w,), 0.05))
        t[b + "mlp.fc1.weight"] = gtm.Tensor("BF16", normal((v["mlp"], w), 0.12))
        t[b + "mlp.fc1.bias"] = gtm.Tensor("BF16", normal((v["mlp"],), 0.05))
        t[b + "mlp.fc2.weight"] = gtm.Tensor("BF16", normal((w, v["mlp"]), 0.06))
        t[b + "mlp.fc2.bias"] = gtm.Tensor("BF16", normal((w,), 0.05))
    t["mlp1.0.weight"] = gtm.Tensor("F16", norm_w(4 * w))
    t["mlp1.1.weight"] = gtm.Tensor("BF16", normal((v["projector_hidden"], 4 * w), 0.08))
    t["mlp1.3.weight"] = gtm.Tensor("BF16", normal((llm_hidden, v["projector_hidden"]), 0.1))
    return t


def vlm_config(lm, v):
    cfg = gtm.vl_config(lm)
    cfg["vision_config"] = {
        "model_type": "radio",
        "version": "radio_v2.5-h",
        "patch_size": v["patch"],
        "max_resolution": v["pos_grid"] * v["patch"],
        "preferred_resolution": [v["tile"], v["tile"]],
        # timm does not know this name; the head count comes from num_attention_heads.
        "num_attention_heads": v["heads"],
        "args": {
            "model": "vit_tiny_test",
            "cpe_max_size": v["pos_grid"] * v["patch"],
            "register_multiple": v["register_multiple"],
            "cls_token_per_teacher": True,
            "teachers": [{"name": f"teacher{i}"} for i in range(v["num_cls"])],
        },
    }
    cfg["force_image_size"] = v["tile"]
    cfg["patch_size"] = v["patch"]
    cfg["vit_hidden_size"] = v["width"]
    cfg["projector_hidden_size"] = v["projector_hidden"]
    return cfg


def preprocessor_config(cfg):
    return {
        "image_processor_type": "NemotronNanoVLV2ImageProcessor",
        "image_size": cfg["force_image_size"],
        "max_num_tiles": 12,
        "use_thumbnail": True,
        "norm_mean": cfg["norm_mean"],
        "norm_std": cfg["norm_std"],
        "patch_size": cfg["patch_size"],
        "downsample_ratio": cfg["downsample_ratio"],
    }


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--out", default=os.path.join(here, "..", "tests", "fixtures", "vision", "tiny-vlm"))
    args = ap.parse_args(argv)
    out = os.path.normpath(args.out)
    gtm.fresh_dir(out)

    lm = dict(gtm.BASE, pattern="M-M*-M", vocab=256)
    tensors = gtm.lm_tensors(lm, np.random.default_rng(1001), "language_model.")
    tensors.update(vision_tensors(VISION, lm["hidden"], np.random.default_rng(VISION_SEED)))
    gtm.write_safetensors(os.path.join(out, "model.safetensors"), tensors)
    cfg = vlm_config(lm, VISION)
    gtm.write_config(os.path.join(out, "config.json"), cfg)
    with open(os.path.join(out, "preprocessor_config.json"), "w") as f:
        f.write(json.dumps(preprocessor_config(cfg), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
