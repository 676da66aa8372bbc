#!/usr/bin/env python3
"""Write one random Nemotron-H model twice: as a Hugging Face checkpoint that holod loads
(config.json + model.safetensors) and as a GGUF that llama.cpp loads, with the same weights.

The shapes are holo-bench engine's default random model (~0.70B parameters, bf16): 22 Mamba-2,
4 attention and 22 ReLU^2 MLP layers of width 1024, 128k vocabulary. The weights come from
tools/gen_tiny_model.py's generator (its lm_tensors() and text_config()), so holod sees exactly
the checkpoint layout its tests use. The GGUF follows llama.cpp's `nemotron_h` loader: matrices
in bf16, norms, biases and the SSM parameters in f32, A stored as -exp(A_log), the conv weight
as [channels, kernel], the gated norm as [groups, channels per group]. Its vocabulary is a
byte-level BPE stand-in (256 byte tokens, one merge and numbered fillers): the benchmark feeds
token ids, never text. --gguf-only rewrites the GGUF alone.

Needs numpy and the `gguf` package (tools/bench/vs-llamacpp installs both in tools/.venv).
"""
import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import gen_tiny_model as gtm  # noqa: E402

import gguf  # noqa: E402

PATTERN = "M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-"
SHAPE = {
    "pattern": PATTERN,
    "hidden": 1024,
    "vocab": 131072,
    "inter": 5120,
    "heads": 8,
    "kv_heads": 2,
    "head_dim": 128,
    "m_heads": 32,
    "m_head_dim": 64,
    "n_groups": 8,
    "state": 128,
    "conv": 4,
    "chunk": 128,
}


def byte_tokens():
    """GPT-2's byte-to-unicode table: the 256 single-byte tokens a byte-level BPE needs."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for _, c in sorted(zip(bs, cs))]


def array(t):
    """a gen_tiny_model Tensor as numpy: bf16 as uint16 bits, f32 as float32"""
    dt = np.uint16 if t.dtype == "BF16" else np.float32
    return np.frombuffer(t.data, dtype=dt).reshape(t.shape)


def f32(t):
    a = array(t)
    if t.dtype == "BF16":
        return (a.astype(np.uint32) << 16).view(np.float32)
    return a.astype(np.float32)


def write_gguf(path, c, t):
    L = len(c["pattern"])
    d_in = c["m_heads"] * c["m_head_dim"]
    w = gguf.GGUFWriter(path, "nemotron_h")
    w.add_name("holod random nemotron_h")
    w.add_context_length(4096)
    w.add_embedding_length(c["hidden"])
    w.add_block_count(L)
    w.add_feed_forward_length([c["inter"] if k == "-" else 0 for k in c["pattern"]])
    w.add_head_count(c["heads"])
    w.add_head_count_kv([c["kv_heads"] if k == "*" else 0 for k in c["pattern"]])
    w.add_key_length(c["head_dim"])
    w.add_value_length(c["head_dim"])
    w.add_layer_norm_eps(1e-5)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_ssm_conv_kernel(c["conv"])
    w.add_ssm_inner_size(d_in)
    w.add_ssm_state_size(c["state"])
    w.add_ssm_time_step_rank(c["m_heads"])
    w.add_ssm_group_count(c["n_groups"])
    w.add_file_type(gguf.LlamaFileType.MOSTLY_BF16)

    tokens = byte_tokens() + ["ab"]
    tokens += [f"<t{i}>" for i in range(len(tokens), c["vocab"])]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([gguf.TokenType.NORMAL] * len(tokens))
    w.add_token_merges(["a b"])  # llama.cpp refuses a BPE vocabulary without merges
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_add_bos_token(False)

    def mat(name, src):
        w.add_tensor(name, array(t[src]), raw_dtype=gguf.GGMLQuantizationType.BF16)

    def vec(name, a):
        w.add_tensor(name, np.ascontiguousarray(a, dtype=np.float32))

    b = "backbone."
    mat("token_embd.weight", b + "embeddings.weight")
    vec("output_norm.weight", f32(t[b + "norm_f.weight"]))
    mat("output.weight", "lm_head.weight")
    G = c["n_groups"]
    for i, kind in enumerate(c["pattern"]):
        lp, blk = f"{b}layers.{i}.", f"blk.{i}."
        m = lp + "mixer."
        vec(blk + "attn_norm.weight", f32(t[lp + "norm.weight"]))
        if kind == "M":
            mat(blk + "ssm_in.weight", m + "in_proj.weight")
            conv = f32(t[m + "conv1d.weight"])
            vec(blk + "ssm_conv1d.weight", conv.reshape(conv.shape[0], conv.shape[2]))
            vec(blk + "ssm_conv1d.bias", f32(t[m + "conv1d.bias"]))
            vec(blk + "ssm_dt.bias", f32(t[m + "dt_bias"]))
            vec(blk + "ssm_a", -np.exp(f32(t[m + "A_log"])).reshape(-1, 1))
            vec(blk + "ssm_d", f32(t[m + "D"]).reshape(-1, 1))
            vec(blk + "ssm_norm.weight", f32(t[m + "norm.weight"]).reshape(G, d_in // G))
            mat(blk + "ssm_out.weight", m + "out_proj.weight")
        elif kind == "*":
            mat(blk + "attn_q.weight", m + "q_proj.weight")
            mat(blk + "attn_k.weight", m + "k_proj.weight")
            mat(blk + "attn_v.weight", m + "v_proj.weight")
            mat(blk + "attn_output.weight", m + "o_proj.weight")
        else:
            mat(blk + "ffn_up.weight", m + "up_proj.weight")
            mat(blk + "ffn_down.weight", m + "down_proj.weight")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="directory: the checkpoint, and model.gguf in it")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--gguf-only", action="store_true")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    t = gtm.lm_tensors(SHAPE, rng, "")
    if not args.gguf_only:
        with open(os.path.join(args.out, "config.json"), "w") as f:
            json.dump(gtm.text_config(SHAPE), f, indent=1)
        gtm.write_safetensors(os.path.join(args.out, "model.safetensors"), t)
    write_gguf(os.path.join(args.out, "model.gguf"), SHAPE, t)


if __name__ == "__main__":
    main()
