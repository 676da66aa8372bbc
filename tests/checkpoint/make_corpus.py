#!/usr/bin/env python3
"""Writes the hand-made seed corpus of tests/checkpoint/fuzz-safetensors.c into tests/checkpoint/corpus/.

Each file is one fuzz input: a selector byte ('S' safetensors, 'C' config.json) and the input.
Names say what the parser must do with it: ok-* parse, bad-* be rejected. Standard library only;
the config seeds copy the committed fixtures' config.json files.
Usage: tests/checkpoint/make_corpus.py
"""

import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "corpus")
FIXTURES = os.path.join(HERE, "..", "fixtures", "models")


def st(header, data=b"", pad=True, length=None):
    h = header if isinstance(header, bytes) else json.dumps(header, separators=(",", ":")).encode()
    if pad:
        h += b" " * ((8 - len(h) % 8) % 8)
    n = len(h) if length is None else length
    return b"S" + struct.pack("<Q", n) + h + data


def t(dtype, shape, begin, end):
    return {"dtype": dtype, "shape": shape, "data_offsets": [begin, end]}


def main():
    os.makedirs(OUT, exist_ok=True)
    seeds = {}

    seeds["ok-st-minimal"] = st({"a": t("F32", [2], 0, 8)}, b"\0" * 8)
    seeds["ok-st-mixed"] = st(
        {
            "__metadata__": {"format": "pt"},
            "w.f32": t("F32", [2, 2], 0, 16),
            "w.bf16": t("BF16", [3], 16, 22),
            "w.f16": t("F16", [1, 1, 1, 1], 22, 24),
            "scalar": t("F32", [], 24, 28),
            "empty": t("BF16", [0, 5], 28, 28),
        },
        bytes(range(28)),
    )
    seeds["ok-st-gap-and-trailing-data"] = st({"a": t("BF16", [1], 4, 6)}, b"\0" * 16)
    # NVIDIA ModelOpt FP8: e4m3 codes (NaN codes included: the loader, not the parser, refuses
    # them) and an F32 scale
    seeds["ok-st-f8-e4m3"] = st(
        {"w.weight": t("F8_E4M3", [3, 5], 0, 15), "w.weight_scale": t("F32", [], 16, 20)},
        bytes([0x38, 0x7E, 0xFE, 0x01, 0x80, 0x7F, 0xFF] + [0x40] * 8) + b"\0" + b"\0\0\x80\x3b",
    )
    seeds["bad-st-f8-size-mismatch"] = st({"w": t("F8_E4M3", [4, 4], 0, 15)}, b"\0" * 16)
    seeds["bad-st-empty"] = b"S"
    seeds["bad-st-short"] = b"S\x08\x00\x00\x00"
    seeds["bad-st-header-len-2p63"] = b"S" + struct.pack("<Q", 1 << 63) + b"{}"
    seeds["bad-st-header-len-over-limit"] = b"S" + struct.pack("<Q", (100 << 20) + 1) + b"{}      "
    seeds["bad-st-header-len-beyond-file"] = st({"a": t("F32", [1], 0, 4)}, b"\0" * 4, length=1000)
    seeds["bad-st-not-object"] = st(b"[1,2]")
    seeds["bad-st-malformed"] = st(b'{"a":{"dtype":', pad=False)
    seeds["bad-st-trailing-garbage"] = st(b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}} x', b"\0" * 4)
    seeds["bad-st-overlap"] = st({"a": t("F32", [2], 0, 8), "b": t("F32", [2], 4, 12)}, b"\0" * 12)
    seeds["bad-st-offset-beyond-data"] = st({"a": t("F32", [4], 0, 16)}, b"\0" * 8)
    seeds["bad-st-offset-negative"] = st({"a": t("F32", [1], -4, 0)}, b"\0" * 8)
    seeds["bad-st-offset-huge"] = st({"a": t("F32", [1], 18446744073709551612, 18446744073709551615)}, b"\0" * 8)
    seeds["bad-st-reversed"] = st({"a": t("F32", [0], 8, 4)}, b"\0" * 8)
    seeds["bad-st-size-mismatch"] = st({"a": t("BF16", [3], 0, 8)}, b"\0" * 8)
    seeds["bad-st-dtype-i64"] = st({"a": t("I64", [1], 0, 8)}, b"\0" * 8)
    seeds["bad-st-dtype-number"] = st({"a": {"dtype": 7, "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4)
    seeds["bad-st-duplicate"] = st(
        b'{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}',
        b"\0" * 8,
    )
    seeds["bad-st-misaligned"] = st({"a": t("F32", [1], 2, 6)}, b"\0" * 8)
    seeds["bad-st-negative-dim"] = st({"a": t("F32", [-1], 0, 0)}, b"\0" * 8)
    seeds["bad-st-five-dims"] = st({"a": t("F32", [1, 1, 1, 1, 1], 0, 4)}, b"\0" * 4)
    seeds["bad-st-shape-overflow"] = st({"a": t("F32", [1 << 31, 1 << 31, 1 << 31, 1 << 31], 0, 0)}, b"\0" * 8)
    seeds["bad-st-dim-beyond-data"] = st({"a": t("F32", [0, 1 << 40], 0, 0)}, b"\0" * 8)
    seeds["bad-st-entry-not-object"] = st({"a": [1, 2]})
    seeds["bad-st-offsets-three"] = st({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}, b"\0" * 8)
    seeds["bad-st-control-char-name"] = st({"a\nb": t("F32", [1], 0, 4)}, b"\0" * 4)
    seeds["bad-st-empty-name"] = st({"": t("F32", [1], 0, 4)}, b"\0" * 4)
    seeds["bad-st-deep-nesting"] = st(b'{"a":' + b"[" * 5000 + b"]" * 5000 + b"}")

    for name in ("tiny-mamba", "tiny-vl", "tiny-aliases", "tiny-tied"):
        with open(os.path.join(FIXTURES, name, "config.json"), "rb") as f:
            text = f.read()
        seeds["ok-cfg-" + name] = b"C" + text
        if name == "tiny-vl":
            seeds["bad-cfg-truncated-" + name] = b"C" + text[: len(text) // 2]
    base = '"hidden_size": 64, "hybrid_override_pattern": "M-*", "num_attention_heads": 4'
    seeds["ok-cfg-nonfinite"] = (
        "C{" + base + ', "time_step_limit": [0.0, Infinity], "x": NaN, "y": -Infinity, "s": "NaN Infinity"}'
    ).encode()
    seeds["ok-cfg-layers-block-type"] = (
        'C{"hidden_size": 8, "layers_block_type": ["mamba", "mlp", "full_attention"], "num_attention_heads": 2}'
    ).encode()
    seeds["bad-cfg-empty"] = b"C"
    seeds["bad-cfg-not-object"] = b"C[]"
    seeds["bad-cfg-deep-nesting"] = b"C" + b"[" * 5000 + b"]" * 5000
    seeds["bad-cfg-deep-objects"] = b"C" + b'{"a":' * 3000 + b"1" + b"}" * 3000
    seeds["bad-cfg-nan-eps"] = ("C{" + base + ', "layer_norm_epsilon": NaN}').encode()
    seeds["bad-cfg-eps-underflows-float"] = ("C{" + base + ', "layer_norm_epsilon": 1e-85}').encode()
    seeds["bad-cfg-neg-infinity-limit"] = ("C{" + base + ', "time_step_limit": [-Infinity, 0.1]}').encode()
    seeds["bad-cfg-infinity-word"] = ("C{" + base + ', "x": Infinityy}').encode()
    seeds["bad-cfg-minus-nan"] = ("C{" + base + ', "x": -NaN}').encode()
    seeds["bad-cfg-moe"] = b'C{"hidden_size": 64, "hybrid_override_pattern": "ME"}'
    seeds["bad-cfg-huge-int"] = b'C{"hidden_size": 99999999999999999999999, "hybrid_override_pattern": "M"}'
    seeds["bad-cfg-long-pattern"] = b'C{"hidden_size": 8, "hybrid_override_pattern": "' + b"M" * 600 + b'"}'
    seeds["bad-cfg-vl-without-llm"] = ('C{"model_type": "NemotronH_Nano_VL_V2", ' + base + "}").encode()
    seeds["bad-cfg-nul-byte"] = b'C{"hidden_size": 64,\0 "hybrid_override_pattern": "M"}'
    seeds["bad-cfg-unterminated-string"] = b'C{"hidden_size": 64, "x": "Infinity'

    for old in os.listdir(OUT):
        if old.startswith(("ok-", "bad-")):
            os.unlink(os.path.join(OUT, old))
    for name, data in sorted(seeds.items()):
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
