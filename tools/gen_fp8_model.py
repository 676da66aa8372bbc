#!/usr/bin/env python3
"""Write tiny FP8 checkpoints in NVIDIA ModelOpt's layout, and the e4m3 value table, for the tests.

Needs numpy and ml_dtypes (ml_dtypes.float8_e4m3fn is the same type as torch.float8_e4m3fn: OCP
FP8 E4M3, bias 7, no infinities, 0x7f/0xff NaN, largest 448). Run it from a venv under tools/
that has both, e.g.  python3 -m venv tools/.venv && tools/.venv/bin/pip install numpy ml_dtypes
CI never runs it: its outputs are committed.

From tests/fixtures/models/tiny-mamba (bf16, tools/gen_tiny_model.py) it writes, in the layout
ModelOpt's Hugging Face export gives an FP8 checkpoint (what vLLM's modelopt.py reads):
  - every linear layer of the language model (mixer.in_proj/out_proj, q/k/v/o_proj,
    up/down_proj) as `<name>.weight` F8_E4M3 [out, in], `<name>.weight_scale` F32 and, for the
    static recipe, `<name>.input_scale` F32 []; the embeddings, lm_head, norms, conv1d, A_log, D
    and dt_bias as tiny-mamba stores them (ModelOpt leaves them unquantized);
  - the quantization declared in hf_quant_config.json and/or config.json's quantization_config.

Models (tests/fixtures/models/<name>/):
  tiny-fp8     quant_algo FP8: per-tensor weight_scale [] = amax / 448 (ModelOpt's recipe), a
               static input_scale []; hf_quant_config.json ({"producer": ..., "quantization":
               {"quant_algo": "FP8", "kv_cache_quant_algo": null, "exclude_modules": [...]}})
               and the same in config.json's quantization_config (the flat form, "ignore")
  tiny-fp8-pc  quant_algo FP8_PER_CHANNEL_PER_TOKEN: weight_scale [out] = each row's amax / 448,
               no input_scale (dynamic per-token activations); config.json's quantization_config
               alone
and tests/fixtures/quant/e4m3.txt: every code 00..ff and its value as ml_dtypes decodes it.

Usage: tools/.venv/bin/python tools/gen_fp8_model.py [--fixtures tests/fixtures]
The output is deterministic.
"""

import argparse
import json
import os
import shutil
import struct

import ml_dtypes
import numpy as np

E4M3 = ml_dtypes.float8_e4m3fn
LINEAR = ("in_proj", "out_proj", "q_proj", "k_proj", "v_proj", "o_proj", "up_proj", "down_proj")
SIZE = {"BF16": 2, "F16": 2, "F32": 4, "F8_E4M3": 1}
# What ModelOpt leaves unquantized in a Nemotron-H: the head, Mamba's conv1d, and (in the VLM)
# the vision tower and projector.
EXCLUDE = ["lm_head", "*mixer.conv1d*", "vision_model*", "mlp1*"]
PRODUCER = {"name": "modelopt", "version": "0.37.0"}


def read_safetensors(path):
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8 : 8 + n])
    data = buf[8 + n :]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], data[b:end])
    return out


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, shape, bytes). Laid out as the safetensors library does: by
    element size, largest first, then by name, so every tensor is aligned to its elements."""
    names = sorted(tensors, key=lambda k: (-SIZE[tensors[k][0]], k))
    header = {"__metadata__": {"format": "pt"}}
    off = 0
    for k in names:
        dt, shape, data = tensors[k]
        assert len(data) == int(np.prod(shape, dtype=np.int64)) * SIZE[dt], k
        header[k] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for k in names:
            f.write(tensors[k][2])


def bf16_to_f32(data, shape):
    u = np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16
    return u.view(np.float32).reshape(shape)


def f32(a):
    return np.ascontiguousarray(a, dtype="<f4").tobytes()


def to_e4m3(w, scale):
    """ModelOpt's cast: w / scale clamped to +-448, rounded to nearest even by the dtype."""
    q = np.clip(w / scale, -448.0, 448.0).astype(E4M3)
    assert not np.isnan(q.astype(np.float32)).any()
    return q.view(np.uint8).tobytes()


def make(src, out, per_channel):
    t = read_safetensors(os.path.join(src, "model.safetensors"))
    res = {}
    for name, (dt, shape, data) in t.items():
        parts = name.split(".")
        if len(parts) >= 2 and parts[-1] == "weight" and parts[-2] in LINEAR:
            assert dt == "BF16"
            w = bf16_to_f32(data, shape)
            base = name[: -len(".weight")]
            if per_channel:
                scale = (np.abs(w).max(axis=1) / np.float32(448.0)).astype(np.float32)
                res[name] = ("F8_E4M3", shape, to_e4m3(w, scale[:, None]))
                res[base + ".weight_scale"] = ("F32", [shape[0]], f32(scale))
            else:
                scale = np.float32(np.abs(w).max() / np.float32(448.0))
                res[name] = ("F8_E4M3", shape, to_e4m3(w, scale))
                res[base + ".weight_scale"] = ("F32", [], f32(scale))
                # a calibrated activation amax / 448 (the CPU does not use it)
                res[base + ".input_scale"] = ("F32", [], f32(np.float32(4.0 / 448.0)))
        else:
            res[name] = (dt, shape, data)
    if os.path.isdir(out):
        shutil.rmtree(out)
    os.makedirs(out)
    write_safetensors(os.path.join(out, "model.safetensors"), res)
    with open(os.path.join(src, "config.json")) as f:
        text = f.read()
    cfg = json.loads(text)
    algo = "FP8_PER_CHANNEL_PER_TOKEN" if per_channel else "FP8"
    cfg["quantization_config"] = {
        "quant_method": "modelopt",
        "quant_algo": algo,
        "kv_cache_scheme": None,
        "ignore": EXCLUDE,
        "producer": PRODUCER,
    }
    with open(os.path.join(out, "config.json"), "w") as f:
        f.write(json.dumps(cfg, indent=2, allow_nan=True) + "\n")
    if not per_channel:
        hq = {
            "producer": PRODUCER,
            "quantization": {"quant_algo": algo, "kv_cache_quant_algo": None, "exclude_modules": EXCLUDE},
        }
        with open(os.path.join(out, "hf_quant_config.json"), "w") as f:
            f.write(json.dumps(hq, indent=4) + "\n")


def e4m3_table(path):
    codes = np.arange(256, dtype=np.uint8)
    vals = codes.view(E4M3).astype(np.float32)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("# code value: every float8_e4m3fn code as ml_dtypes %s decodes it (tools/gen_fp8_model.py)\n"
                % ml_dtypes.__version__.split("+")[0])
        for c, v in zip(codes, vals):
            f.write("%02x %s\n" % (c, "nan" if np.isnan(v) else repr(float(v))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fixtures", default="tests/fixtures")
    a = ap.parse_args()
    src = os.path.join(a.fixtures, "models", "tiny-mamba")
    make(src, os.path.join(a.fixtures, "models", "tiny-fp8"), per_channel=False)
    make(src, os.path.join(a.fixtures, "models", "tiny-fp8-pc"), per_channel=True)
    e4m3_table(os.path.join(a.fixtures, "quant", "e4m3.txt"))


if __name__ == "__main__":
    main()
