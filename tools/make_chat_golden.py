#!/usr/bin/env python3
"""Golden fixtures for the chat rendering (engine/chat/chat.c, tests/vision/test-vision-chat.c).

Needs the tools venv (tools/.venv: tokenizers, jinja2, torch, transformers, timm). Run after
tools/gen_tiny_vision.py and tools/make_vision_golden.py (it reuses the latter's reference
vision tower and the test images). Writes:

  tests/fixtures/vision/tiny-vlm/tokenizer.json (with --tokenizer; else the committed one is read,
      so that every fixture keeping its ids stays valid whatever the tokenizers version)
      a small byte-level BPE (Tekken-style Split regex + ByteLevel, model.md 5.1) trained here on
      an ASCII corpus, every id below the tiny checkpoint's 256 embedding rows: <unk>, <s>, </s>,
      <SPECIAL_3>..<SPECIAL_12> at 0..12 (special), the trained vocabulary up to 249, then
      <image>=250 (the config's img_context_token_id), <img>=251, </img>=252 (special),
      <think>=253, </think>=254 (not special).
  tests/fixtures/vision/tiny-vlm/tokenizer_config.json
      the base model's chat template in its published layout (tools/nemotron_vl_template.py;
      tools/chat_template_diff.py writes the renderings holod is held to,
      tests/fixtures/chat/tiny-vlm.json).
  tests/fixtures/vision/chat-golden.json
      the token sequences the logits below were computed on: conversations rendered as the
      model's prompt is (docs/design/model.md 5.2): transformers' apply_chat_template with the
      checkpoint's template (the base model's, tools/nemotron_vl_template.py: BOS first, the
      system block), each `<image>` placeholder expanded to <img> + <image> x (256 x tiles) +
      </img> as the reference processor does, tokenized with the HF tokenizer with
      add_special_tokens=False: text and ids. tests/vision/test-vision-chat.c holds holod's
      rendering of the same messages to these ids, and its logits to those below.
  tests/fixtures/vision/chat.safetensors
      logits of the two-image conversation: the image rows from the reference vision tower
      (make_vision_golden.TinyRadio, float64) spliced into transformers' NemotronH (float32).

Deterministic for a given `tokenizers` version.
Usage: tools/.venv/bin/python tools/make_chat_golden.py [--tokenizer]
"""

import json
import os
import sys

import jinja2
import numpy as np
import tokenizers
import torch
from PIL import Image
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import make_vision_golden as mvg  # noqa: E402
import gen_tiny_vision as gtv  # noqa: E402
import nemotron_vl_template as nvt  # noqa: E402

FIX = os.path.normpath(os.path.join(HERE, "..", "tests", "fixtures", "vision"))
MODEL = os.path.join(FIX, "tiny-vlm")

TEKKEN_REGEX = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+|"
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*|"
    r"\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<unk>", "<s>", "</s>"] + [f"<SPECIAL_{i}>" for i in range(3, 13)]
TRAINED_VOCAB = 250  # ids 0..249; <image> must land on 250 (config.json img_context_token_id)

TRAIN_CORPUS = [
    "You are a GUI agent. Look at the screen and act.",
    "What is on the screen? Click on the search bar.",
    "Now this one: type the address and press Enter.",
    "A red square. The button is at the top left of the window.",
    "System User Assistant: open the file menu, then save the document.",
    "Scroll down to see more results; double-click the icon.",
    "Hello there! Describe the image in one sentence.",
    "The quick brown fox jumps over the lazy dog 0123456789.",
    "{\"action\": \"click\", \"x\": 120, \"y\": 45}\n",
    "Be brief.\nThink step by step.\n\tindented line\n",
]

TOKENS_PER_TILE = 256
IMAGES = {  # name -> (png, tile budget); tiles from the reference processor
    "square": ("square.png", 12),  # 1 tile
    "small": ("small.png", 2),     # 2 tiles + thumbnail
}

# Conversations. Images are listed per message in placeholder order.
CASES = [
    {
        "name": "two_images",
        "reasoning": False,
        "messages": [
            {"role": "system", "content": "You are a GUI agent. /no_think"},
            {"role": "user", "content": "<image>\nWhat is on the screen?", "images": ["square"]},
            {"role": "assistant", "content": "<think>\nA square.\n</think>\n\nA red square."},
            {"role": "user", "content": "Now this one: <image>\nClick on the search bar.  ",
             "images": ["small"]},
        ],
        "logits": True,
    },
    {
        "name": "think_in_user",
        "reasoning": False,
        "messages": [
            {"role": "user", "content": "  Hello there! /think\n"},
        ],
    },
    {
        "name": "system_think",
        "reasoning": False,
        "messages": [
            {"role": "system", "content": "Be brief. /think"},
            {"role": "user", "content": "Describe the image in one sentence."},
        ],
    },
    {
        "name": "no_think_wins",
        "reasoning": False,
        "messages": [
            {"role": "system", "content": "/think Be brief."},
            {"role": "user", "content": "Scroll down. /no_think"},
            {"role": "assistant", "content": "Done."},
            {"role": "user", "content": "Open the file menu.\n\n"},
        ],
    },
    {
        "name": "spec_example",
        "reasoning": False,
        "messages": [
            {"role": "system", "content": "/no_think"},
            {"role": "user", "content": "<image>\nClick on the search bar.", "images": ["small"]},
        ],
        "logits": True,  # also the holo-infer --image smoke test's prompt
    },
]


def build_tokenizer():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(TEKKEN_REGEX), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
    ])
    tok.decoder = decoders.ByteLevel()
    byte_map = {ch for ch in pre_tokenizers.ByteLevel.alphabet()}
    # printable ASCII, tab and newline only: the whole vocabulary must fit under 250 ids
    ascii_chars = [chr(c) for c in range(0x20, 0x7f)] + ["\t", "\n"]
    bl = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    alphabet = sorted({bl.pre_tokenize_str(c)[0][0] for c in ascii_chars})
    assert set(alphabet) <= byte_map
    trainer = trainers.BpeTrainer(
        vocab_size=TRAINED_VOCAB,
        min_frequency=1,
        special_tokens=[AddedToken(s, special=True, normalized=False) for s in SPECIALS],
        initial_alphabet=alphabet,
        show_progress=False,
    )
    tok.train_from_iterator(TRAIN_CORPUS * 3, trainer)
    assert tok.get_vocab_size() == TRAINED_VOCAB, tok.get_vocab_size()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False)
                            for s in ("<image>", "<img>", "</img>")])
    tok.add_tokens([AddedToken("<think>", special=False), AddedToken("</think>", special=False)])
    for s, want in (("<image>", 250), ("<img>", 251), ("</img>", 252), ("<think>", 253),
                    ("</think>", 254), ("<SPECIAL_12>", 12)):
        assert tok.token_to_id(s) == want, (s, tok.token_to_id(s))
    return tok


def render(hf_tok, messages):
    """The prompt as the checkpoint's template renders it (string contents, their <image>
    placeholders in place; reasoning only from the texts' /think switches, as the template
    reads no option: every case's "reasoning" is false, holod's default)."""
    msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
    return hf_tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


def expand_images(text, tiles):
    """The processor: each <image> placeholder, in order, becomes <img><image>*256*t</img>."""
    parts = text.split("<image>")
    assert len(parts) == len(tiles) + 1, (len(parts), tiles)
    out = parts[0]
    for t, rest in zip(tiles, parts[1:]):
        out += "<img>" + "<image>" * (TOKENS_PER_TILE * t) + "</img>" + rest
    return out


def main():
    with open(os.path.join(MODEL, "config.json")) as f:
        cfg = json.load(f)
    with open(os.path.join(MODEL, "preprocessor_config.json")) as f:
        pcfg = json.load(f)
    assert cfg["img_context_token_id"] == 250

    if "--tokenizer" in sys.argv[1:]:
        tok = build_tokenizer()
        tok.save(os.path.join(MODEL, "tokenizer.json"))
    nvt.write_tokenizer_config(MODEL)
    tok = Tokenizer.from_file(os.path.join(MODEL, "tokenizer.json"))
    import transformers
    hf_tok = transformers.AutoTokenizer.from_pretrained(MODEL)

    weights = mvg.read_safetensors(os.path.join(MODEL, "model.safetensors"))
    radio = mvg.TinyRadio(weights, dict(gtv.VISION))
    pixels, tiles_of = {}, {}
    for name, (png, budget) in IMAGES.items():
        pil = Image.open(os.path.join(FIX, png))
        _, grid, px = mvg.preprocess(pil, pcfg["image_size"], budget, pcfg["use_thumbnail"],
                                     pcfg["norm_mean"], pcfg["norm_std"])
        pixels[name] = px
        tiles_of[name] = grid[3]

    golden = {"generator": "tools/make_chat_golden.py", "versions": {
        "tokenizers": tokenizers.__version__, "jinja2": jinja2.__version__,
        "torch": torch.__version__}, "tokens_per_tile": TOKENS_PER_TILE,
        "images": {n: {"png": p, "max_tiles": b, "n_tiles": tiles_of[n]} for n, (p, b) in IMAGES.items()},
        "cases": []}
    arrays = {}
    for case in CASES:
        order = [img for m in case["messages"] for img in m.get("images", [])]
        assert not case["reasoning"]
        text = expand_images(render(hf_tok, case["messages"]), [tiles_of[i] for i in order])
        ids = tok.encode(text, add_special_tokens=False).ids
        assert tok.decode(ids, skip_special_tokens=False) == text
        assert ids[0] == tok.token_to_id("<s>"), "the prompt starts with BOS (model.md 5.2)"
        golden["cases"].append({"name": case["name"], "reasoning": case["reasoning"],
                                "messages": case["messages"], "text": text, "ids": ids})
        if case.get("logits"):
            import make_lm_golden  # noqa: F401
            rows = torch.cat([radio.project(radio.features(pixels[i])) for i in order]).numpy()
            mamba_dir = os.path.join(HERE, "..", "tests", "fixtures", "models", "tiny-mamba")
            model, _ = make_lm_golden.load_hf(mamba_dir)
            assert all(np.array_equal(weights[n], w) for n, w in mvg.read_safetensors(
                os.path.join(mamba_dir, "model.safetensors")).items() for n in ["language_model." + n])
            with torch.no_grad():
                emb = model.model.embeddings.weight[torch.tensor(ids)].clone()
                pos = [k for k, t in enumerate(ids) if t == 250]
                assert len(pos) == rows.shape[0]
                emb[pos] = torch.from_numpy(rows.astype(np.float32))
                logits = model(inputs_embeds=emb.unsqueeze(0), use_cache=False).logits[0].float().numpy()
            keep = [k for k, t in enumerate(ids) if t != 250] + [pos[0], pos[255], pos[256], pos[-1]]
            keep += [len(ids) - 1]
            keep = sorted(set(keep))
            arrays[case["name"] + ".logits_rows"] = np.array(keep, np.float32)
            arrays[case["name"] + ".logits"] = logits[keep]
            golden["versions"]["transformers"] = transformers.__version__
    with open(os.path.join(FIX, "chat-golden.json"), "w") as f:
        f.write(json.dumps(golden, indent=1) + "\n")
    mvg.write_safetensors(os.path.join(FIX, "chat.safetensors"), arrays,
                          {"generator": "tools/make_chat_golden.py"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
