#!/usr/bin/env python3
"""Write a random bf16 Nemotron-H checkpoint of a real model's shapes (default: Holotron-12B's
language model, tools/bench/holotron-12b-config.json), streamed to disk tensor by tensor, so a
24 GB checkpoint is written with a few hundred MB of memory. What it is for: measuring what
holod holds resident for a 12B-shaped model in each weight format (holo-quantize, then
holo-bench engine --model DIR), which a model built in memory cannot do on a 24 GB machine.

The tensors, names and config are those of tools/gen_tiny_model.py's lm_tensors() and
text_config() (a bare `nemotron_h` checkpoint, `backbone.` names, one safetensors file); the
matrices' values are normal with the same standard deviations, drawn chunk by chunk.

  tools/bench/big_model.py --out DIR [--config tools/bench/holotron-12b-config.json]
                           [--layers N]   (the first N layers of the pattern: a smaller model)

Needs numpy (tools/.venv from tools/bench/vs-llamacpp has it). CI never runs this.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gen_tiny_model as gtm  # noqa: E402

CHUNK = 1 << 24  # values drawn at a time


def shape_of(cfg):
    c = cfg.get("llm_config", cfg)
    return {
        "pattern": c["hybrid_override_pattern"],
        "hidden": c["hidden_size"],
        "vocab": c["vocab_size"],
        "inter": c["intermediate_size"],
        "heads": c["num_attention_heads"],
        "kv_heads": c["num_key_value_heads"],
        "head_dim": c["head_dim"],
        "m_heads": c["mamba_num_heads"],
        "m_head_dim": c["mamba_head_dim"],
        "n_groups": c["n_groups"],
        "state": c["ssm_state_size"],
        "conv": c["conv_kernel"],
        "chunk": c["chunk_size"],
        "tied": c.get("tie_word_embeddings", False),
    }


class Normal:
    """a bf16 matrix drawn from N(0, std^2) when written"""

    def __init__(self, shape, std):
        self.dtype, self.shape, self.std = "BF16", list(shape), std
        self.nbytes = 2 * math.prod(shape)

    def write(self, f, rng):
        n = math.prod(self.shape)
        for i in range(0, n, CHUNK):
            v = rng.standard_normal(min(CHUNK, n - i), dtype=np.float32) * np.float32(self.std)
            f.write(gtm.bf16_round(v)[1].astype("<u2").tobytes())


class Small:
    """a gen_tiny_model Tensor (norms, conv, the SSM parameters)"""

    def __init__(self, t):
        self.dtype, self.shape, self.t = t.dtype, t.shape, t
        self.nbytes = len(t.data)

    def write(self, f, rng):
        f.write(self.t.data)


def tensors(c, rng):
    d = c["hidden"]
    H, P, G, N, K = c["m_heads"], c["m_head_dim"], c["n_groups"], c["state"], c["conv"]
    d_in = H * P
    conv_dim = d_in + 2 * G * N
    Hq, Hkv, Dh = c["heads"], c["kv_heads"], c["head_dim"]
    inter, V = c["inter"], c["vocab"]

    def norm_w(n):
        return Small(gtm.Tensor("BF16", (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)))

    t = {}
    b = "backbone."
    t[b + "embeddings.weight"] = Normal((V, d), 0.3)
    for i, kind in enumerate(c["pattern"]):
        lp = f"{b}layers.{i}."
        t[lp + "norm.weight"] = norm_w(d)
        m = lp + "mixer."
        if kind == "M":
            t[m + "in_proj.weight"] = Normal((2 * d_in + 2 * G * N + H, d), 0.1)
            t[m + "conv1d.weight"] = Small(gtm.Tensor(
                "BF16", (rng.standard_normal((conv_dim, 1, K)) * 0.3).astype(np.float32)))
            t[m + "conv1d.bias"] = Small(gtm.Tensor(
                "BF16", (rng.standard_normal((conv_dim,)) * 0.1).astype(np.float32)))
            dt = np.exp(rng.uniform(math.log(1e-3), math.log(1e-1), H))
            t[m + "dt_bias"] = Small(gtm.Tensor("F32", gtm.inv_softplus(dt).astype(np.float32)))
            t[m + "A_log"] = Small(gtm.Tensor("F32", np.log(rng.uniform(1.0, 16.0, H)).astype(np.float32)))
            t[m + "D"] = Small(gtm.Tensor("F32", rng.uniform(0.5, 1.5, H).astype(np.float32)))
            t[m + "norm.weight"] = norm_w(d_in)
            t[m + "out_proj.weight"] = Normal((d, d_in), 0.05)
        elif kind == "*":
            t[m + "q_proj.weight"] = Normal((Hq * Dh, d), 0.1)
            t[m + "k_proj.weight"] = Normal((Hkv * Dh, d), 0.1)
            t[m + "v_proj.weight"] = Normal((Hkv * Dh, d), 0.08)
            t[m + "o_proj.weight"] = Normal((d, Hq * Dh), 0.05)
        elif kind == "-":
            t[m + "up_proj.weight"] = Normal((inter, d), 0.1)
            t[m + "down_proj.weight"] = Normal((d, inter), 0.05)
        else:
            raise ValueError(f"unsupported layer kind {kind!r}")
    t[b + "norm_f.weight"] = norm_w(d)
    if not c["tied"]:
        t["lm_head.weight"] = Normal((V, d), 0.25)
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--config", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                     "holotron-12b-config.json"))
    ap.add_argument("--layers", type=int, default=0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    with open(args.config) as f:
        c = shape_of(json.load(f))
    if args.layers:
        if not 1 <= args.layers <= len(c["pattern"]):
            sys.exit(f"big_model.py: --layers must be 1..{len(c['pattern'])}")
        c["pattern"] = c["pattern"][: args.layers]
    rng = np.random.default_rng(args.seed)
    t = tensors(c, rng)
    os.makedirs(args.out, exist_ok=True)
    cfg = gtm.text_config(c)
    cfg["torch_dtype"] = "bfloat16"
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1)
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    names = sorted(t)
    for name in names:
        header[name] = {"dtype": t[name].dtype, "shape": t[name].shape,
                        "data_offsets": [offset, offset + t[name].nbytes]}
        offset += t[name].nbytes
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(os.path.join(args.out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for name in names:
            t[name].write(f, rng)
    print(f"big_model.py: wrote {args.out}: {len(c['pattern'])} layers, {offset / 1e9:.2f} GB of tensors")


if __name__ == "__main__":
    main()
