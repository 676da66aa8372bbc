#!/usr/bin/env python3
"""Write the tiny chat model the `remote` test suite serves with llama.cpp's server.

A llama-architecture GGUF (2 layers of width 64, f32, about 0.5 MB) with random weights and:
  - a byte-level vocabulary: GPT-2's 256 byte tokens (so any text, any JSON, can be spelled),
    the one merge llama.cpp requires of a BPE vocabulary, and the chat tokens <|im_start|>,
    <|im_end|> (end of turn, the EOS) and <|endoftext|> (BOS);
  - a ChatML chat template that renders string contents and text parts, and raises an error on
    any other part (image_url): a text model cannot look at images, and a server that dropped
    them silently would hide which layout a client sent;
  - a preference written into the weights so that schema-constrained answers stay short, in
    range and several steps long: every embedding has the same constant first component, which
    the final norm turns into the largest input of the output layer, and the output rows give it
    a bias per token. Where the grammar allows them, the closing quote wins over everything, then
    `,`, `}` and `]`, then the digit 1: strings end as soon as their minLength does, optional
    properties are left out and integers are 1 (llama.cpp's schema grammar ignores minimum and
    maximum, so a free integer would otherwise run to 16 digits). `-`, `0`, white space and `a`
    lose: no negative or zero integers, and the tool `answer` is never chosen, so a task runs to
    its step budget. The other tokens keep random, context-dependent logits, so different
    prompts pick different tools.

Needs numpy and the `gguf` package (tools/remote-server/setup.sh installs both in
tools/.venv-remote). Deterministic for a given --seed; takes well under a second.

    tools/.venv-remote/bin/python tools/remote-server/tiny_model.py --out tiny-chat.gguf
"""
import argparse

import numpy as np

import gguf

HIDDEN = 64
LAYERS = 2
HEADS = 4
FFN = 128
CONTEXT = 32768

# The chat template: ChatML over string contents or lists of text parts.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% else %}{% for part in message['content'] %}"
    "{% if part['type'] == 'text' %}{{ part['text'] }}"
    "{% else %}{{ raise_exception('holod-tiny is a text model: it cannot read a content part of type ' + part['type']) }}"
    "{% endif %}{% endfor %}{% endif %}"
    "{{ '<|im_end|>\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Output-layer bias per token text (see the module comment).
PREFER = {'"': 14.0, ",": 10.0, "}": 10.0, "]": 10.0, "1": 5.0}
AVOID = {"-": -10.0, "0": -10.0, "a": -10.0,
         "Ġ": -10.0, "Ċ": -10.0, "ĉ": -10.0}  # ' ', '\n', '\t'


def byte_tokens():
    """GPT-2's byte-to-unicode table: the 256 single-byte tokens of a byte-level BPE."""
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


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="the GGUF file to write")
    ap.add_argument("--seed", type=int, default=17)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)

    tokens = byte_tokens() + ["ab", "<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    types = [gguf.TokenType.NORMAL] * 257 + [gguf.TokenType.CONTROL] * 3
    bos, eos = tokens.index("<|endoftext|>"), tokens.index("<|im_end|>")
    vocab = len(tokens)

    def rand(*shape, std):
        return (rng.standard_normal(shape) * std).astype(np.float32)

    embd = rand(vocab, HIDDEN, std=0.3)
    embd[:, 0] = 1.0
    out = rand(vocab, HIDDEN, std=0.5)
    out[:, 0] = 0.0
    for text, bias in list(PREFER.items()) + list(AVOID.items()):
        out[tokens.index(text), 0] = bias

    w = gguf.GGUFWriter(args.out, "llama")
    w.add_name("holod-tiny")
    w.add_context_length(CONTEXT)
    w.add_embedding_length(HIDDEN)
    w.add_block_count(LAYERS)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(HEADS)
    w.add_rope_dimension_count(HIDDEN // HEADS)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_vocab_size(vocab)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(["a b"])  # llama.cpp refuses a BPE vocabulary without merges
    w.add_bos_token_id(bos)
    w.add_eos_token_id(eos)
    w.add_add_bos_token(False)
    w.add_chat_template(CHAT_TEMPLATE)

    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", np.ones(HIDDEN, dtype=np.float32))
    w.add_tensor("output.weight", out)
    for i in range(LAYERS):
        blk = f"blk.{i}."
        w.add_tensor(blk + "attn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        for m in ("attn_q", "attn_k", "attn_v", "attn_output"):
            w.add_tensor(blk + m + ".weight", rand(HIDDEN, HIDDEN, std=0.05))
        w.add_tensor(blk + "ffn_norm.weight", np.ones(HIDDEN, dtype=np.float32))
        w.add_tensor(blk + "ffn_gate.weight", rand(FFN, HIDDEN, std=0.05))
        w.add_tensor(blk + "ffn_up.weight", rand(FFN, HIDDEN, std=0.05))
        w.add_tensor(blk + "ffn_down.weight", rand(HIDDEN, FFN, std=0.05))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
