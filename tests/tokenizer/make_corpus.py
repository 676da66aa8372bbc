#!/usr/bin/env python3
"""Seed corpus for tests/tokenizer/fuzz-tokenizer.c (replayed by the `unit` suite).

File names say the expected outcome: ok-* must succeed, bad-* must be rejected. The first byte
selects the target: L (tokenizer.json), E (text to encode), D (little-endian int32 ids to decode).
Run: python3 tests/tokenizer/make_corpus.py   (rewrites tests/tokenizer/corpus/)
"""
import json
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def tok(pre=None, model=None, added=None, normalizer=None, decoder=None, **extra):
    m = {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "<s>": 4}, "merges": ["a b"]}
    m.update(model or {})
    d = {"added_tokens": added if added is not None else
         [{"id": 4, "content": "<s>", "special": True, "normalized": False}],
         "normalizer": normalizer,
         "pre_tokenizer": pre if pre is not None else {"type": "ByteLevel", "add_prefix_space": False,
                                                       "use_regex": True},
         "decoder": decoder if decoder is not None else {"type": "ByteLevel"},
         "model": m}
    d.update(extra)
    return json.dumps(d, ensure_ascii=False)


def nested(depth):
    node = {"type": "ByteLevel", "use_regex": False}
    for _ in range(depth):
        node = {"type": "Sequence", "pretokenizers": [node]}
    return node


def main():
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        os.unlink(os.path.join(OUT, f))
    cases = {
        # loads
        "ok-load-minimal": "L" + tok(),
        "ok-load-array-merges": "L" + tok(model={"merges": [["a", "b"]]}),
        "ok-load-split-sequence": "L" + tok(pre={"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": r"\s+"}, "behavior": "MergedWithNext", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": True, "use_regex": False}]}),
        # jansson cannot hold NUL in object keys (byte-level vocabularies never have one).
        "bad-load-nul-in-vocab-key": "L" + tok(model={"vocab": {"a": 0, "\u0000": 1}, "merges": []}),
        "ok-load-nul-in-added-token": "L" + tok(added=[{"id": 5, "content": "<\u0000>", "special": True}]),
        "ok-load-added-flags": "L" + tok(added=[
            {"id": 4, "content": "<s>", "special": True, "lstrip": True, "rstrip": True},
            {"id": 5, "content": "ab", "single_word": True, "normalized": True}]),
        "ok-load-unk": "L" + tok(model={"unk_token": "<s>", "fuse_unk": True, "byte_fallback": True}),
        "ok-load-decoder-sequence": "L" + tok(decoder={"type": "Sequence", "decoders": [{"type": "ByteLevel"}]}),
        "ok-load-normalizer-empty-sequence": "L" + tok(normalizer={"type": "Sequence", "normalizers": []}),
        "bad-load-empty": "L",
        "bad-load-not-object": "L[]",
        "bad-load-malformed": "L" + tok()[:-7] + ",,}",
        "bad-load-truncated": "L" + tok()[:40],
        "bad-load-wordpiece": "L" + tok(model={"type": "WordPiece"}),
        "bad-load-no-model-type": "L" + json.dumps({"model": {"vocab": {}}}),
        "bad-load-empty-vocab": "L" + tok(model={"vocab": {}, "merges": []}),
        "bad-load-nfc": "L" + tok(normalizer={"type": "NFC"}),
        "bad-load-merge-unknown": "L" + tok(model={"merges": ["a zz"]}),
        "bad-load-merge-result-unknown": "L" + tok(model={"merges": ["b a"]}),
        "bad-load-merge-three-parts": "L" + tok(model={"merges": ["a b c"]}),
        "bad-load-merge-number": "L" + tok(model={"merges": [7]}),
        "bad-load-id-string": "L" + tok(model={"vocab": {"a": "0"}, "merges": []}),
        "bad-load-id-huge": "L" + tok(model={"vocab": {"a": 2 ** 40}, "merges": []}),
        "bad-load-id-float": "L" + tok(model={"vocab": {"a": 1.5}, "merges": []}),
        "bad-load-deep-sequence": "L" + tok(pre=nested(40)),
        "bad-load-regex": "L" + tok(pre={"type": "Split", "pattern": {"Regex": "[a-"}, "behavior": "Isolated"}),
        "bad-load-metaspace": "L" + tok(pre={"type": "Metaspace"}),
        "bad-load-decoder-null": "L" + tok(decoder=None).replace('"decoder": {"type": "ByteLevel"}', '"decoder": null'),
        "bad-load-token-too-long": "L" + tok(model={"vocab": {"a" * 5000: 0}, "merges": []}),
        "bad-load-added-not-object": "L" + tok(added=[3]),
        "bad-load-added-empty-content": "L" + tok(added=[{"id": 9, "content": ""}]),
        "bad-load-flag-not-bool": "L" + tok(added=[{"id": 9, "content": "<x>", "special": "yes"}]),
        "bad-load-dropout": "L" + tok(model={"dropout": 0.5}),
        # encodes
        "ok-enc-empty": "E",
        "ok-enc-ascii": "EHello, world! The quick brown fox.",
        "ok-enc-specials": "E<s>x<SPECIAL_11><image><img></img><think>y</think><box> <ref> z </ref>",
        "ok-enc-partial-specials": "E<SPECIAL_<ima</thin<<<>>>",
        "ok-enc-unicode": "E" + "中文 😀 👨‍👩‍👧 e\u0301 \u0085\u00a0\u3000\u2028 ١٢٣ ǅ",
        "ok-enc-whitespace": "E \r\n\r\n \t\t   \n",
        "ok-enc-nul": "E\x00a\x00",
        "ok-enc-long-word": "E" + "ab" * 3000,
        "bad-enc-overlong": b"E\xc0\xaf",
        "bad-enc-surrogate": b"E\xed\xa0\x80",
        "bad-enc-truncated": b"Eabc\xe4\xb8",
        "bad-enc-lone-continuation": b"E\x80",
        "bad-enc-beyond-unicode": b"E\xf4\x90\x80\x80",
        # decodes
        "ok-dec-empty": "D",
        "ok-dec-specials": b"D" + struct.pack("<6i", 1, 10, 11, 12, 1226, 1229),
        "ok-dec-byte-tokens": b"D" + struct.pack("<4i", 185, 266, 259, 235),
        "ok-dec-half-char": b"D" + struct.pack("<2i", 173, 129),
        "bad-dec-negative": b"D" + struct.pack("<2i", 5, -1),
        "bad-dec-beyond-vocab": b"D" + struct.pack("<2i", 5, 1 << 30),
    }
    for name, data in cases.items():
        if isinstance(data, str):
            data = data.encode("utf-8")
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
