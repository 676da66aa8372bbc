#!/usr/bin/env python3
"""Golden logits for the CPU language model (tests/lm/test-lm-golden.c).

For each tiny checkpoint in tests/fixtures/models/ (made by tools/gen_tiny_model.py) this runs Hugging
Face transformers' native NemotronHForCausalLM in float32 on the CPU:
  * prefill of a prompt of PROMPT_LEN ids (several SSD chunks, not chunk-aligned): logits of every
    position;
  * GEN_STEPS greedy decode steps with the model's cache (the recurrent Mamba path and the KV cache):
    the logits of each step.
The native torch fallback clamps dt to time_step_min (model.md 6.1); that clamp is undone by setting
every mixer's `time_step_limit` to (0, inf) after loading, which is what the checkpoint's
time_step_limit says.

A second, independent oracle in float64 NumPy runs the same token sequence through model.md section 2
as a plain per-token scan (no chunking, no cache objects) from the same weights; the script fails if
transformers and the oracle disagree by more than ORACLE_TOL, so a chunking or caching bug in either
cannot slip into the fixture.

Output, per model, in tests/fixtures/lm/:
  <name>.bin   little-endian: "HLMG", u32 version=1, u32 vocab, u32 n_prompt, u32 n_gen,
               i32 prompt[n_prompt], i32 gen[n_gen],
               f32 prefill_logits[n_prompt][vocab],
               f32 decode_logits[n_gen][vocab]   (row i: logits after feeding gen[i])
               gen[0] is the argmax of the last prefill row, gen[i+1] the argmax of decode row i.
  <name>.json  provenance: versions, tolerances measured against the oracle.

Usage: tools/.venv/bin/python tools/make_lm_golden.py [--models DIR] [--out DIR]
"""

import argparse
import json
import math
import os
import platform
import struct
import sys

import numpy as np
import torch
import transformers
from transformers import NemotronHConfig, NemotronHForCausalLM

MODELS = ["tiny-mamba", "tiny-aliases", "tiny-tied"]
PROMPT_LEN = 37   # 4 full chunks of 8 and a partial one
GEN_STEPS = 32
ORACLE_TOL = 1e-4


def check_pattern_support():
    """The dense MLP layer '-' must be known to this transformers (model.md 7)."""
    assert NemotronHConfig._pattern_to_list("M-*") == ["linear_attention", "mlp", "full_attention"], \
        "this transformers' NemotronHConfig does not map '-' to an MLP layer"


def load_hf(path):
    model = NemotronHForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    # This transformers' NemotronH declares no tied weights, so a checkpoint without lm_head.weight
    # would get a random head: tie it by hand, as tie_word_embeddings asks.
    if model.config.tie_word_embeddings:
        model.lm_head.weight = model.model.embeddings.weight
    n = 0
    for layer in model.model.layers:
        mixer = layer.mixer
        if hasattr(mixer, "time_step_limit"):
            mixer.time_step_limit = (0.0, float("inf"))
            n += 1
    return model, n


def hf_run(model, prompt):
    ids = torch.tensor([prompt], dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=ids, use_cache=True)
        prefill = out.logits[0].float().numpy().copy()
        cache = out.past_key_values
        gen, rows = [], []
        nxt = int(np.argmax(prefill[-1]))
        pos = len(prompt)
        for _ in range(GEN_STEPS):
            gen.append(nxt)
            out = model(input_ids=torch.tensor([[nxt]]), past_key_values=cache, use_cache=True,
                        cache_position=torch.tensor([pos]))
            cache = out.past_key_values
            pos += 1
            row = out.logits[0, -1].float().numpy().copy()
            rows.append(row)
            nxt = int(np.argmax(row))
    return prefill, gen, np.stack(rows)


# ---- float64 per-token oracle (model.md 2) --------------------------------------------------------

def oracle(model, tokens):
    cfg = model.config
    sd = {k: v.detach().double().numpy() for k, v in model.state_dict().items()}
    types = cfg.layers_block_type
    eps = cfg.layer_norm_epsilon
    H, P, N, G = cfg.mamba_num_heads, cfg.mamba_head_dim, cfg.ssm_state_size, cfg.n_groups
    K = cfg.conv_kernel
    d_in = H * P
    conv_dim = d_in + 2 * G * N
    hq, hkv, dh = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
    emb = sd["model.embeddings.weight"]
    head = sd["lm_head.weight"] if "lm_head.weight" in sd else emb

    def rms(x, w):
        return w * (x / np.sqrt(np.mean(x * x) + eps))

    def silu(x):
        return x / (1 + np.exp(-x))

    def softplus(x):
        return x if x > 20 else math.log1p(math.exp(x))

    state = {}
    for i, t in enumerate(types):
        if t == "linear_attention":
            state[i] = {"conv": np.zeros((K, conv_dim)), "ssm": np.zeros((H, P, N))}
        elif t == "full_attention":
            state[i] = {"k": [], "v": []}
    logits = []
    for tok in tokens:
        h = emb[tok].copy()
        for i, t in enumerate(types):
            p = f"model.layers.{i}."
            x = rms(h, sd[p + "norm.weight"])
            if t == "linear_attention":
                m = p + "mixer."
                st = state[i]
                zx = sd[m + "in_proj.weight"] @ x
                z, xbc, dtr = zx[:d_in], zx[d_in:d_in + conv_dim], zx[d_in + conv_dim:]
                st["conv"] = np.concatenate([st["conv"][1:], xbc[None]], 0)
                w = sd[m + "conv1d.weight"][:, 0, :]          # [conv_dim, K]
                b = sd.get(m + "conv1d.bias", np.zeros(conv_dim))
                xc = silu(b + np.sum(w * st["conv"].T, axis=1))
                xs = xc[:d_in].reshape(H, P)
                B = xc[d_in:d_in + G * N].reshape(G, N)
                C = xc[d_in + G * N:].reshape(G, N)
                A = -np.exp(sd[m + "A_log"])
                y = np.zeros((H, P))
                for hh in range(H):
                    g = hh // (H // G)
                    dt = softplus(dtr[hh] + sd[m + "dt_bias"][hh])
                    st["ssm"][hh] = np.exp(dt * A[hh]) * st["ssm"][hh] + dt * np.outer(xs[hh], B[g])
                    y[hh] = st["ssm"][hh] @ C[g] + sd[m + "D"][hh] * xs[hh]
                u = y.reshape(-1) * silu(z)
                gs = d_in // G
                u = u.reshape(G, gs)
                u = u / np.sqrt(np.mean(u * u, axis=1, keepdims=True) + eps)
                u = u.reshape(-1) * sd[m + "norm.weight"]
                h = h + sd[m + "out_proj.weight"] @ u
            elif t == "full_attention":
                m = p + "mixer."
                st = state[i]
                q = (sd[m + "q_proj.weight"] @ x).reshape(hq, dh)
                st["k"].append((sd[m + "k_proj.weight"] @ x).reshape(hkv, dh))
                st["v"].append((sd[m + "v_proj.weight"] @ x).reshape(hkv, dh))
                Kc, Vc = np.stack(st["k"]), np.stack(st["v"])   # [T, hkv, dh]
                o = np.zeros((hq, dh))
                for qi in range(hq):
                    kv = qi // (hq // hkv)
                    s = Kc[:, kv] @ q[qi] / math.sqrt(dh)
                    s = np.exp(s - s.max())
                    s /= s.sum()
                    o[qi] = s @ Vc[:, kv]
                h = h + sd[m + "o_proj.weight"] @ o.reshape(-1)
            elif t == "mlp":
                m = p + "mixer."
                u = np.maximum(sd[m + "up_proj.weight"] @ x, 0) ** 2
                h = h + sd[m + "down_proj.weight"] @ u
            else:
                raise SystemExit(f"layer type {t} not supported by the oracle")
        logits.append(head @ rms(h, sd["model.norm_f.weight"]))
    return np.stack(logits)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap.add_argument("--models", default=os.path.join(root, "tests/fixtures/models"))
    ap.add_argument("--out", default=os.path.join(root, "tests/fixtures/lm"))
    args = ap.parse_args(argv)
    check_pattern_support()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    os.makedirs(args.out, exist_ok=True)
    for name in MODELS:
        path = os.path.join(args.models, name)
        model, n_mixers = load_hf(path)
        V = model.config.vocab_size
        rng = np.random.default_rng(4242)
        prompt = [int(t) for t in rng.integers(3, V, size=PROMPT_LEN)]
        prefill, gen, dec = hf_run(model, prompt)
        ref = oracle(model, prompt + gen)
        d_prefill = float(np.max(np.abs(ref[:PROMPT_LEN] - prefill)))
        d_decode = float(np.max(np.abs(ref[PROMPT_LEN:] - dec)))
        print(f"{name}: vocab {V}, pattern {model.config.hybrid_override_pattern}, "
              f"transformers vs float64 oracle: prefill {d_prefill:.3g}, decode {d_decode:.3g}")
        if not (d_prefill < ORACLE_TOL and d_decode < ORACLE_TOL):
            raise SystemExit(f"{name}: transformers and the float64 oracle disagree")
        with open(os.path.join(args.out, name + ".bin"), "wb") as f:
            f.write(b"HLMG" + struct.pack("<4I", 1, V, len(prompt), len(gen)))
            f.write(np.asarray(prompt, dtype="<i4").tobytes())
            f.write(np.asarray(gen, dtype="<i4").tobytes())
            f.write(np.ascontiguousarray(prefill, dtype="<f4").tobytes())
            f.write(np.ascontiguousarray(dec, dtype="<f4").tobytes())
        meta = {
            "model": f"tests/fixtures/models/{name}",
            "pattern": model.config.hybrid_override_pattern,
            "vocab": V,
            "prompt_len": len(prompt),
            "gen_steps": len(gen),
            "reference": "transformers NemotronHForCausalLM, float32, CPU torch fallback "
                         "(chunked SSD prefill, recurrent decode with cache)",
            "tied_head": bool(model.config.tie_word_embeddings),
            "dt_clamp": f"time_step_limit set to (0, inf) on {n_mixers} mixers (model.md 6.1)",
            "oracle": "float64 NumPy per-token scan of model.md 2",
            "max_abs_diff_vs_oracle": {"prefill": d_prefill, "decode": d_decode},
            "versions": {
                "transformers": transformers.__version__,
                "torch": torch.__version__,
                "numpy": np.__version__,
                "python": platform.python_version(),
            },
        }
        with open(os.path.join(args.out, name + ".json"), "w") as f:
            json.dump(meta, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
