#!/usr/bin/env python3
"""Golden fixtures for the tokenizer tests (tests/tokenizer/).

Trains two SMALL byte-level BPE tokenizers with Hugging Face `tokenizers` and records what that
library answers for a varied test corpus, so the C tokenizer can be held to identical ids:

  tests/fixtures/tokenizer/tekken/tokenizer.json   Tekken-style: Split(Regex, Isolated) +
      ByteLevel(use_regex=false) (model.md 5.1); merges saved in the [a, b] array form.
  tests/fixtures/tokenizer/gpt2/tokenizer.json     GPT-2-style: ByteLevel(add_prefix_space=true,
      use_regex=true) alone; merges rewritten to the "a b" string form; ignore_merges=true.
  tests/fixtures/tokenizer/expected.json           corpus, ids (special tokens parsed / not
      parsed), decoded text (special tokens kept / skipped) for both, and decode-only cases.

Both have the special tokens <unk>, <s>, </s>, <SPECIAL_3>..<SPECIAL_12> at ids 0..12 and the
added tokens <image>, <img>, </img> (special), <think>, </think> (not special), <ref> (lstrip +
rstrip) and <box> (single_word) after the trained vocabulary.

Run with the project venv:  tools/.venv/bin/python tools/make_tokenizer_fixture.py
Deterministic: re-running with the same `tokenizers` version rewrites identical files.
"""

import json
import os
import sys

import tokenizers
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "fixtures", "tokenizer")

TEKKEN_REGEX = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

SPECIALS = ["<unk>", "<s>", "</s>"] + [f"<SPECIAL_{i}>" for i in range(3, 13)]

TRAIN_CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps; the fox runs away.",
    "Open the Firefox window, click on the address bar and type the URL of the page.",
    "Press Ctrl+Alt+T to open a terminal, then run `ls -la /home/user/Documents`.",
    "Click the 'Save' button in the top-right corner of the dialog, then close it.",
    "The screenshot shows a desktop with three windows: a browser, an editor, a shell.",
    "Move the mouse to (640, 480) and double-click the icon labelled \"Trash\".",
    "Il était une fois une petite fille qui s'appelait Chaperon Rouge. Où est-elle allée ?",
    "Größe, Übermaß, Straße: die Fußgängerzone ist über die Brücke erreichbar.",
    "¿Dónde está la biblioteca? Está al lado de la estación de ferrocarril, señor.",
    "Быстрая коричневая лиса прыгает через ленивую собаку. Привет, мир!",
    "我们今天去公园散步，天气很好。请点击左上角的按钮打开菜单。",
    "東京は日本の首都です。ファイルを保存してください。ひらがなとカタカナ。",
    "안녕하세요, 세계! 오늘 날씨가 좋네요.",
    "مرحبا بالعالم، كيف حالك اليوم؟",
    "नमस्ते दुनिया, आप कैसे हैं?",
    "Emoji: 😀 😃 👍🏽 ❤️ 👨‍👩‍👧‍👦 🇫🇷 🚀✨ — and some more: 🎉🎉🎉",
    "def main(argc, argv):\n    for i in range(10):\n        print(f\"{i}: {argv[i]}\")\n    return 0\n",
    "int main(void)\n{\n\tconst char *s = \"hello\";\n\treturn strlen(s) > 3 ? 1 : 0;\n}\n",
    "{\"action\": \"click\", \"x\": 123, \"y\": 456, \"button\": \"left\"}",
    "SELECT id, name FROM users WHERE age >= 21 ORDER BY name DESC LIMIT 100;",
    "Numbers: 0 1 2 3 4 5 6 7 8 9 10 42 3.14159 2,718 1e-9 0xDEADBEEF 1_000_000",
    "Lines\r\nwith\r\nwindows\r\nendings and\ttabs\tand    many     spaces.",
    "https://example.com/path/to/resource?query=value&other=1#fragment",
    "user@example.org wrote: > quoted text >> nested quote",
    "CamelCaseWordsAndSnake_case_words and SCREAMING_CASE and kebab-case-words",
    "Thinking step by step: first locate the button, then click it, then verify the result.",
    "I'll, you're, we've, they'd, she's, it's, don't, can't, won't, shouldn't",
]

TEST_CORPUS = [
    "",
    " ",
    "a",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading and trailing spaces  ",
    "multiple     spaces\tand\t\ttabs",
    "line one\nline two\n\nline four\n",
    "windows\r\nline\r\nendings\r\n\r\n",
    "mixed \r\n \n\r whitespace \t\n  \t",
    "   \n\n   ",
    "\t",
    "Ünïcödé àccénts: café, naïve, résumé, Ångström, Œuvre",
    "Größenordnung der Straßenbahn",
    "中文测试：你好世界，这是一个测试。",
    "日本語のテキストとカタカナ、漢字。",
    "한국어 텍스트",
    "Emoji 😀 and 👍🏽 and ❤️ and family 👨‍👩‍👧‍👦 and flag 🇫🇷!",
    "🚀🚀🚀✨✨",
    "digits 0123456789 and 3.14159 and 1,000,000 and -42",
    "x = f(a, b) + g[3] * h{4} / 2; // comment",
    "def foo(bar):\n    return bar ** 2  # square\n",
    "<think>reasoning here</think>answer",
    "<s>hello</s>",
    "text <SPECIAL_10> more <SPECIAL_11> end <SPECIAL_12>",
    "<image><img></img>",
    "look at <img><image></img> please",
    "<SPECIAL_1> is not a token but <SPECIAL_3> is",
    "partial <SPECIAL_ and <imag and </thi",
    "lstrip/rstrip:   <ref>   spaced   </ref>",
    "single word <box> ok but x<box>y not",
    "NEL\u0085nbsp\u00a0ideographic\u3000space\u2028sep\u200bzwsp",
    # U+180E is no longer White_Space (Oniguruma agrees) but PCRE2's \s still takes it.
    "mongolian \u180e vowel  \u180e separator \u2000\u180e\x1f x\u180e\u180ey",
    "combining e\u0301 a\u0308 and titlecase \u01c5 and modifier \u02b0",
    "I'll you're we've they'd DON'T",
    "CamelCaseWord snake_case_word SCREAMING_CASE",
    "https://example.com/a/b?c=d&e=f",
    "path/to/file.txt\n//\n/\r\n",
    "!!!???...,,,;;;:::",
    "\u00a0\u00a0 x",
    "arabic مرحبا hindi नमस्ते russian привет",
    "supercalifragilisticexpialidocious" * 40,
    "a" * 2000,
    ("word " * 300).strip(),
    "\x00nul\x01ctrl\x7fdel",
]


# Random texts glued from pieces that stress the pre-tokenizer regex and the added-token matcher
# (whitespace kinds, marks, ZWJ sequences, token fragments next to letters).
RANDOM_PIECES = [
    "a", "Z", "the", "Word", " ", "  ", "\t", "\n", "\r\n", "\r", "\u0085", "\u00a0", "\u3000",
    "\u2028", "é", "e\u0301", "中", "文", "😀", "👨\u200d👩", "🇫🇷", "\ufe0f", "7", "42", "'s", "'ll",
    "/", "//", "!", "?", ".", "(", "{", "_", "-", "<s>", "</s>", "<SPECIAL_1", "<SPECIAL_11>",
    "<image>", "<img>", "</img>", "<think>", "</think>", "<ref>", "</ref>", "<box>", "<", ">",
    "при", "مر", "\x01", "\x7f", "ǅ", "ʰ", "Ⅻ", "½", "'S", "'re", "'ve", "'d", "'m", "'t", " \n ",
    "\n\n", " \r", "\u200b", "\u2009", "١٢", "𝐀", "ﬁ", "Σ", "ς", "\x00", "\x1f", "\u0301\u0301",
    "\U0001F3FD", " 7", "3.5", "ℕ", "ー", "ｱ", "ㄱ",
]


def random_corpus(n, seed=1234):
    import random
    rnd = random.Random(seed)
    return ["".join(rnd.choice(RANDOM_PIECES) for _ in range(rnd.randrange(1, 30)))
            for _ in range(n)]


def build(kind):
    tok = Tokenizer(models.BPE(ignore_merges=(kind == "gpt2")))
    if kind == "tekken":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(TEKKEN_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ])
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1500 if kind == "tekken" else 1100,
        min_frequency=1,
        special_tokens=[AddedToken(s, special=True, normalized=False) for s in SPECIALS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(TRAIN_CORPUS * 3, trainer)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False)
                            for s in ("<image>", "<img>", "</img>")])
    tok.add_tokens([AddedToken("<think>", special=False), AddedToken("</think>", special=False)])
    tok.add_tokens([AddedToken("<ref>", special=False, lstrip=True, rstrip=True),
                    AddedToken("</ref>", special=False, lstrip=True, rstrip=True),
                    AddedToken("<box>", special=False, single_word=True)])
    return tok


# Variants of the Tekken fixture that exercise the rest of the pre-tokenizer and BPE options. The
# C test patches these fields into tekken/tokenizer.json, so only the patch is stored.
def bl(prefix=False, regex=False):
    return {"type": "ByteLevel", "add_prefix_space": prefix, "trim_offsets": True, "use_regex": regex}


def split(pattern, behavior, invert=False, literal=False):
    return {"type": "Split", "pattern": {("String" if literal else "Regex"): pattern},
            "behavior": behavior, "invert": invert}


VARIANTS = {
    "split_string_removed": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        split(" ", "Removed", literal=True), bl()]}},
    "merged_with_previous": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        split(r"\s+", "MergedWithPrevious"), bl()]}},
    "merged_with_next": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        split(r"\p{P}", "MergedWithNext"), bl()]}},
    "contiguous_inverted": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        split(r"\p{L}", "Contiguous", invert=True), bl()]}},
    "isolated_inverted_digits": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        split(r"\d+", "Isolated", invert=True), bl(prefix=True)]}},
    "removed_inverted": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        split(r"[a-z]+", "Removed", invert=True), bl()]}},
    "nested_sequence_prefix": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        {"type": "Sequence", "pretokenizers": [split(r"\n", "Isolated")]}, bl(prefix=True, regex=True)]}},
    # No ByteLevel step: characters outside the byte alphabet reach the model and become <unk>.
    "unk_fused": {"pre_tokenizer": None, "model": {"unk_token": "<unk>", "fuse_unk": True}},
    "unk_unfused": {"pre_tokenizer": None, "model": {"unk_token": "<unk>", "fuse_unk": False}},
    "no_unk_dropped": {"pre_tokenizer": {"type": "Sequence", "pretokenizers": [
        split(r"\s", "Isolated")]}},
    "ignore_merges": {"model": {"ignore_merges": True}},
    # <0xXX> tokens for bytes below 0xF0 only: CJK falls back to bytes, emoji to <unk>.
    "byte_fallback": {"pre_tokenizer": None, "model": {"unk_token": "<unk>", "byte_fallback": True},
                      "vocab_add": {f"<0x{b:02X}>": 2000 + b for b in range(0xF0)}},
}

VARIANT_TEXTS = [
    "Hello, world! The quick brown fox.", "  two  spaces   three\tand\ttabs ", "a1b22c333 4444",
    "line\n\nbreaks\r\nhere", "punct...!?;: (paren) [br] {cu}", "中文 and 😀 and café naïve",
    "x<image>y <s> <think>z</think>", "", "   ", "ünïcödé ÀÉÎ", "don't stop-me now/then",
]


def encode(tok, text, parse_special):
    tok.encode_special_tokens = not parse_special
    ids = tok.encode(text, add_special_tokens=False).ids
    tok.encode_special_tokens = False
    return ids


def byte_token_ids(tok, data):
    """Ids of the single-byte tokens spelling `data` (to cut characters across tokens)."""
    mapping = bytes_to_unicode()
    return [tok.token_to_id(mapping[b]) for b in data]


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def dump_compact(obj, depth=0):
    """JSON with one line per case: small, and its diffs stay readable."""
    if depth >= 4 or not isinstance(obj, (dict, list)) or not obj:
        return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    pad = " " * (depth + 1)
    if isinstance(obj, dict):
        items = [f"{pad}{json.dumps(k, ensure_ascii=False)}: {dump_compact(v, depth + 1)}"
                 for k, v in obj.items()]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    items = [pad + dump_compact(v, depth + 1) for v in obj]
    return "[\n" + ",\n".join(items) + "\n" + " " * depth + "]"


def main():
    os.makedirs(OUT, exist_ok=True)
    expected = {
        "tokenizers_version": tokenizers.__version__,
        "generator": "tools/make_tokenizer_fixture.py",
        "fixtures": {},
    }
    for kind in ("tekken", "gpt2"):
        tok = build(kind)
        path = os.path.join(OUT, kind, "tokenizer.json")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = json.loads(tok.to_str())
        if kind == "gpt2":
            data["model"]["merges"] = [" ".join(m) for m in data["model"]["merges"]]
        text = json.dumps(data, ensure_ascii=False, indent=1)
        with open(path, "w", encoding="utf-8") as f:
            f.write(text + "\n")
        # Read back what was written so the expectations describe the committed file.
        tok = Tokenizer.from_file(path)
        cases = []
        for s in TEST_CORPUS + random_corpus(150):
            ids_special = encode(tok, s, True)
            ids_plain = encode(tok, s, False)
            cases.append({
                "text": s,
                "ids": ids_special,
                "ids_no_special": ids_plain,
                "decoded": tok.decode(ids_special, skip_special_tokens=False),
                "decoded_skip_special": tok.decode(ids_special, skip_special_tokens=True),
                "decoded_no_special": tok.decode(ids_plain, skip_special_tokens=False),
            })
        # Decode-only cases: characters cut across single-byte tokens, and invalid UTF-8.
        decode_cases = []
        for raw in ("é".encode(), "中".encode(), "😀".encode(), "👨‍👩‍👧".encode(),
                    b"\xe4\xb8", b"\xf0\x9f\x98", b"\xff\xfe", b"a\xc3", b"\xed\xa0\x80",
                    b"\xf4\x90\x80\x80", b"\xe0\x80\xaf", b"\xc0\xaf", b"\xf0\x9f\x98x",
                    "é".encode()[:1] + "中".encode()):
            ids = byte_token_ids(tok, raw)
            decode_cases.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False)})
        ids = [1, 13] + byte_token_ids(tok, "é".encode()) + [2, tok.token_to_id("<think>")]
        decode_cases.append({"ids": ids, "decoded": tok.decode(ids, skip_special_tokens=False),
                             "decoded_skip_special": tok.decode(ids, skip_special_tokens=True)})
        vocab = tok.get_vocab(with_added_tokens=True)
        expected["fixtures"][kind] = {
            "tokenizer": f"{kind}/tokenizer.json",
            "vocab_size": max(vocab.values()) + 1,
            # Without a prefix space, byte-level BPE gives back exactly the text it was given.
            "lossless": kind == "tekken",
            "cases": cases,
            "decode_cases": decode_cases,
            "token_ids": {name: vocab[name] for name in
                          SPECIALS + ["<image>", "<img>", "</img>", "<think>", "</think>",
                                      "<ref>", "</ref>", "<box>"]},
        }
        size = os.path.getsize(path)
        assert size < 200 * 1024, f"{path} is {size} bytes"
        print(f"{path}: {size} bytes, vocab {len(vocab)}", file=sys.stderr)
    base = json.load(open(os.path.join(OUT, "tekken", "tokenizer.json"), encoding="utf-8"))
    variants = {}
    for name, patch in VARIANTS.items():
        data = json.loads(json.dumps(base))
        for key, value in patch.items():
            if key == "model":
                data["model"].update(value)
            elif key == "vocab_add":
                data["model"]["vocab"].update(value)
            else:
                data[key] = value
        tok = Tokenizer.from_str(json.dumps(data))
        variants[name] = {
            "patch": patch,
            "cases": [{"text": t, "ids": encode(tok, t, True)} for t in VARIANT_TEXTS],
        }
    expected["variants"] = variants
    with open(os.path.join(OUT, "expected.json"), "w", encoding="utf-8") as f:
        f.write(dump_compact(expected) + "\n")


if __name__ == "__main__":
    main()
