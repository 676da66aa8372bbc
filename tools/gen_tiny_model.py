#!/usr/bin/env python3
"""Generate tiny random Nemotron-H checkpoints for the engine tests.

Needs only numpy and the standard library (safetensors are written by hand with struct + json).

Every model is a complete checkpoint directory (config.json + *.safetensors) that both the engine's
loader and Hugging Face transformers' native NemotronHConfig/NemotronHForCausalLM accept (the bare
`nemotron_h` ones; the VLM one is the remote-code layout that transformers cannot instantiate
natively).

Weights are drawn in float32 and rounded to bfloat16 (round-to-nearest-even), so the BF16 tensors
are exact and a float32 reference that loads them sees the very same numbers. A_log, D and dt_bias
are stored as F32 (mixed dtypes, as model.md 3.1 warns); one model stores its block norms as F16
(values that are exact in bf16 and f16 alike).

Models (tests/fixtures/models/<name>/):
  tiny-mamba       bare nemotron_h, pattern "M-M*-M", vocab 256, untied
  tiny-aliases     bare nemotron_h, "*M-M" given as layers_block_type, aliased field names
                   (mamba_n_groups, mamba_d_conv, mamba_chunk_size), vocab 512, no time_step_limit
  tiny-tied        bare nemotron_h, "M*M-", tie_word_embeddings (no lm_head tensor), F16 norms,
                   vocab 512
  tiny-vl          NemotronH_Nano_VL_V2 layout: llm_config + vision_config, `language_model.`
                   prefix, tiny vision_model.* / mlp1.* extras; the language model weights are
                   byte-identical to tiny-mamba (same seed), so its logits must equal tiny-mamba's
  tiny-sharded     tiny-mamba split over 3 shards with model.safetensors.index.json
  tiny-chat        bare nemotron_h, "M-M*-M", with a copy of the tokenizer fixture
                   (tests/fixtures/tokenizer/tekken/tokenizer.json, Tekken-style specials, <image>
                   and friends); vocab = the tokenizer's ids rounded up to a multiple of 64.
                   Skipped (with a note) when that tokenizer is absent.

Usage: tools/gen_tiny_model.py [--out tests/fixtures/models] [--chat-tokenizer PATH/tokenizer.json]
The output is deterministic: rerunning it reproduces the committed files byte for byte.
"""

import argparse
import json
import math
import os
import shutil
import struct
import sys

import numpy as np

DTYPE_SIZE = {"BF16": 2, "F16": 2, "F32": 4}


def bf16_round(a):
    """float32 array -> (float32 values exactly representable in bf16, uint16 bf16 bits)."""
    a = np.ascontiguousarray(a, dtype=np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    back = (r.astype(np.uint32) << 16).view(np.float32)
    return back, r


class Tensor:
    def __init__(self, dtype, array):
        assert dtype in DTYPE_SIZE
        self.dtype = dtype
        self.shape = list(array.shape)
        if dtype == "BF16":
            _, bits = bf16_round(array)
            self.data = bits.astype("<u2").tobytes()
        elif dtype == "F16":
            vals, _ = bf16_round(array)
            h = vals.astype(np.float16)
            assert np.array_equal(h.astype(np.float32), vals), "value not exact in f16"
            self.data = h.astype("<f2").tobytes()
        else:
            self.data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        assert len(self.data) == int(np.prod(self.shape, dtype=np.int64)) * DTYPE_SIZE[dtype]


def write_safetensors(path, tensors, metadata=None):
    """tensors: dict name -> Tensor. Data laid out in name order, header padded to 8 bytes.
    metadata: the __metadata__ strings (default {"format": "pt"})."""
    header = {"__metadata__": {"format": "pt"} if metadata is None else dict(metadata)}
    offset = 0
    names = sorted(tensors)
    for name in names:
        t = tensors[name]
        header[name] = {
            "dtype": t.dtype,
            "shape": t.shape,
            "data_offsets": [offset, offset + len(t.data)],
        }
        offset += len(t.data)
    hjson = json.dumps(header, separators=(",", ":")).encode()
    hjson += b" " * ((8 - len(hjson) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hjson)))
        f.write(hjson)
        for name in names:
            f.write(tensors[name].data)
    return offset


def inv_softplus(y):
    return y + np.log(-np.expm1(-y))


def lm_tensors(c, rng, prefix, norm_dtype="BF16"):
    """The language model's tensors, named as in a `backbone.` checkpoint with `prefix` in front."""
    d = c["hidden"]
    H, P, G, N, K = c["m_heads"], c["m_head_dim"], c["n_groups"], c["state"], c["conv"]
    d_in = H * P
    conv_dim = d_in + 2 * G * N
    Hq, Hkv, Dh = c["heads"], c["kv_heads"], c["head_dim"]
    inter, V = c["inter"], c["vocab"]

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    def norm_w(n):
        return (1.0 + rng.standard_normal(n) * 0.1).astype(np.float32)

    t = {}
    b = prefix + "backbone."
    t[b + "embeddings.weight"] = Tensor("BF16", normal((V, d), 0.3))
    for i, kind in enumerate(c["pattern"]):
        lp = f"{b}layers.{i}."
        t[lp + "norm.weight"] = Tensor(norm_dtype, norm_w(d))
        m = lp + "mixer."
        if kind == "M":
            t[m + "in_proj.weight"] = Tensor("BF16", normal((2 * d_in + 2 * G * N + H, d), 0.1))
            t[m + "conv1d.weight"] = Tensor("BF16", normal((conv_dim, 1, K), 0.3))
            t[m + "conv1d.bias"] = Tensor("BF16", normal((conv_dim,), 0.1))
            dt = np.exp(rng.uniform(math.log(1e-3), math.log(1e-1), H))
            t[m + "dt_bias"] = Tensor("F32", inv_softplus(dt).astype(np.float32))
            t[m + "A_log"] = Tensor("F32", np.log(rng.uniform(1.0, 16.0, H)).astype(np.float32))
            t[m + "D"] = Tensor("F32", rng.uniform(0.5, 1.5, H).astype(np.float32))
            t[m + "norm.weight"] = Tensor("BF16", norm_w(d_in))
            t[m + "out_proj.weight"] = Tensor("BF16", normal((d, d_in), 0.05))
        elif kind == "*":
            t[m + "q_proj.weight"] = Tensor("BF16", normal((Hq * Dh, d), 0.1))
            t[m + "k_proj.weight"] = Tensor("BF16", normal((Hkv * Dh, d), 0.1))
            t[m + "v_proj.weight"] = Tensor("BF16", normal((Hkv * Dh, d), 0.08))
            t[m + "o_proj.weight"] = Tensor("BF16", normal((d, Hq * Dh), 0.05))
        elif kind == "-":
            t[m + "up_proj.weight"] = Tensor("BF16", normal((inter, d), 0.1))
            t[m + "down_proj.weight"] = Tensor("BF16", normal((d, inter), 0.05))
        else:
            raise ValueError(f"unsupported layer kind {kind!r}")
    t[b + "norm_f.weight"] = Tensor("BF16", norm_w(d))
    if not c.get("tied", False):
        t[prefix + "lm_head.weight"] = Tensor("BF16", normal((V, d), 0.25))
    return t


def vision_tensors(rng, llm_hidden):
    """A few tiny RADIO / projector tensors: extras the LM loader must accept and expose by name."""
    w, patch_in = 16, 3 * 16 * 16

    def normal(shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    r = "vision_model.radio_model.model."
    return {
        r + "patch_generator.embedder.weight": Tensor("BF16", normal((w, patch_in), 0.02)),
        r + "patch_generator.pos_embed": Tensor("BF16", normal((1, 16, w), 0.02)),
        r + "patch_generator.cls_token.token": Tensor("BF16", normal((4, w), 0.02)),
        "mlp1.0.weight": Tensor("BF16", 1.0 + normal((4 * w,), 0.1)),
        "mlp1.1.weight": Tensor("BF16", normal((2 * llm_hidden, 4 * w), 0.05)),
        "mlp1.3.weight": Tensor("BF16", normal((llm_hidden, 2 * llm_hidden), 0.05)),
    }


def text_config(c, aliases=False):
    """A native-transformers `nemotron_h` config dict."""
    cfg = {
        "architectures": ["NemotronHForCausalLM"],
        "model_type": "nemotron_h",
        "vocab_size": c["vocab"],
        "hidden_size": c["hidden"],
        "num_hidden_layers": len(c["pattern"]),
        "intermediate_size": c["inter"],
        "num_attention_heads": c["heads"],
        "num_key_value_heads": c["kv_heads"],
        "head_dim": c["head_dim"],
        "mamba_num_heads": c["m_heads"],
        "mamba_head_dim": c["m_head_dim"],
        "ssm_state_size": c["state"],
        "expand": 1,
        "mamba_hidden_act": "silu",
        "mlp_hidden_act": "relu2",
        "layer_norm_epsilon": 1e-5,
        "use_conv_bias": True,
        "use_bias": False,
        "mamba_proj_bias": False,
        "attention_bias": False,
        "mlp_bias": False,
        "residual_in_fp32": False,
        "time_step_min": 0.001,
        "time_step_max": 0.1,
        "time_step_floor": 1e-4,
        "tie_word_embeddings": bool(c.get("tied", False)),
        "max_position_embeddings": 4096,
        "bos_token_id": 1,
        "eos_token_id": 2,
        "pad_token_id": 0,
        "use_mamba_kernels": False,
        "torch_dtype": "float32",
    }
    if aliases:
        names = {"M": "linear_attention", "*": "full_attention", "-": "mlp"}
        cfg["layers_block_type"] = [names[k] for k in c["pattern"]]
        cfg["mamba_n_groups"] = c["n_groups"]
        cfg["mamba_d_conv"] = c["conv"]
        cfg["mamba_chunk_size"] = c["chunk"]
    else:
        cfg["hybrid_override_pattern"] = c["pattern"]
        cfg["n_groups"] = c["n_groups"]
        cfg["conv_kernel"] = c["conv"]
        cfg["chunk_size"] = c["chunk"]
        cfg["time_step_limit"] = [0.0, float("inf")]
    return cfg


def vl_config(c):
    llm = text_config(c)
    return {
        "architectures": ["NemotronH_Nano_VL_V2"],
        "model_type": "NemotronH_Nano_VL_V2",
        "llm_config": llm,
        "vision_config": {
            "model_type": "radio",
            "version": "radio_v2.5-h",
            "patch_size": 16,
            "max_resolution": 64,
            "preferred_resolution": [64, 64],
            "args": {"model": "vit_tiny_test", "cpe_max_size": 64, "register_multiple": 4},
        },
        "force_image_size": 64,
        "patch_size": 16,
        "downsample_ratio": 0.5,
        "ps_version": "v2",
        "image_tag_type": "internvl",
        "vit_hidden_size": 16,
        "projector_hidden_size": 2 * c["hidden"],
        "img_context_token": "<image>",
        "img_start_token": "<img>",
        "img_end_token": "</img>",
        "img_context_token_id": 250,
        "norm_mean": [0.48145466, 0.4578275, 0.40821073],
        "norm_std": [0.26862954, 0.26130258, 0.27577711],
        "use_thumbnail": True,
        "torch_dtype": "bfloat16",
    }


def write_config(path, cfg):
    # json.dumps writes float('inf') as the bare token Infinity, as transformers' save does.
    with open(path, "w") as f:
        f.write(json.dumps(cfg, indent=2, allow_nan=True) + "\n")


BASE = {
    "hidden": 64,
    "m_heads": 8,
    "m_head_dim": 8,
    "n_groups": 2,
    "state": 16,
    "conv": 4,
    "chunk": 8,
    "heads": 4,
    "kv_heads": 2,
    "head_dim": 16,
    "inter": 128,
}


def fresh_dir(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    os.makedirs(path)


def tokenizer_ids(path):
    """One more than the largest id of a tokenizer.json (model vocab and added tokens)."""
    with open(path, encoding="utf-8") as f:
        tok = json.load(f)
    ids = list(tok["model"]["vocab"].values()) + [a["id"] for a in tok.get("added_tokens", [])]
    return max(ids) + 1


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "fixtures", "models"))
    here = os.path.dirname(os.path.abspath(__file__))
    ap.add_argument("--chat-tokenizer",
                    default=os.path.join(here, "..", "tests", "fixtures", "tokenizer", "tekken", "tokenizer.json"),
                    help="tokenizer.json for tiny-chat")
    args = ap.parse_args(argv)
    out = os.path.normpath(args.out)
    os.makedirs(out, exist_ok=True)

    # tiny-mamba, and the same weights in the VLM and sharded layouts.
    mamba = dict(BASE, pattern="M-M*-M", vocab=256)
    d = os.path.join(out, "tiny-mamba")
    fresh_dir(d)
    t_mamba = lm_tensors(mamba, np.random.default_rng(1001), "")
    write_safetensors(os.path.join(d, "model.safetensors"), t_mamba)
    write_config(os.path.join(d, "config.json"), text_config(mamba))

    d = os.path.join(out, "tiny-vl")
    fresh_dir(d)
    t_vl = lm_tensors(mamba, np.random.default_rng(1001), "language_model.")
    t_vl.update(vision_tensors(np.random.default_rng(1002), mamba["hidden"]))
    write_safetensors(os.path.join(d, "model.safetensors"), t_vl)
    write_config(os.path.join(d, "config.json"), vl_config(mamba))

    d = os.path.join(out, "tiny-sharded")
    fresh_dir(d)
    names = sorted(t_mamba)
    n_shards = 3
    weight_map, total = {}, 0
    for s in range(n_shards):
        part = {n: t_mamba[n] for n in names[s::n_shards]}
        fname = f"model-{s + 1:05d}-of-{n_shards:05d}.safetensors"
        total += write_safetensors(os.path.join(d, fname), part)
        for n in part:
            weight_map[n] = fname
    with open(os.path.join(d, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(weight_map.items()))}, f, indent=2)
        f.write("\n")
    write_config(os.path.join(d, "config.json"), text_config(mamba))

    aliases = dict(BASE, pattern="*M-M", vocab=512)
    d = os.path.join(out, "tiny-aliases")
    fresh_dir(d)
    write_safetensors(os.path.join(d, "model.safetensors"), lm_tensors(aliases, np.random.default_rng(2001), ""))
    write_config(os.path.join(d, "config.json"), text_config(aliases, aliases=True))

    tied = dict(BASE, pattern="M*M-", vocab=512, tied=True)
    d = os.path.join(out, "tiny-tied")
    fresh_dir(d)
    write_safetensors(os.path.join(d, "model.safetensors"),
                      lm_tensors(tied, np.random.default_rng(3001), "", norm_dtype="F16"))
    write_config(os.path.join(d, "config.json"), text_config(tied))

    if os.path.isfile(args.chat_tokenizer):
        n_ids = tokenizer_ids(args.chat_tokenizer)
        chat = dict(BASE, pattern="M-M*-M", vocab=(n_ids + 63) // 64 * 64)
        d = os.path.join(out, "tiny-chat")
        fresh_dir(d)
        write_safetensors(os.path.join(d, "model.safetensors"), lm_tensors(chat, np.random.default_rng(4001), ""))
        write_config(os.path.join(d, "config.json"), text_config(chat))
        shutil.copyfile(args.chat_tokenizer, os.path.join(d, "tokenizer.json"))
    else:
        print(f"note: {args.chat_tokenizer} not found, tiny-chat not generated", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
