#!/usr/bin/env python3
"""The chat template of the tiny checkpoints, in the published NVIDIA-Nemotron-Nano-12B-v2-VL layout.

The base model's template (docs/design/model.md 5.2 has the evidence and where it was read)
is reproduced here for what holod renders: system, user and assistant turns whose content is a
string or a list of {"type": "text"} and {"type": "image"} parts. Its rules:
  - the prompt opens with bos_token, then `<SPECIAL_10>System\\n` + the system text (or nothing
    when the first message is not a system message) + `\\n`;
  - "/think" and "/no_think" are removed from every text, `</think>` protected from the first
    (it is swapped for a marker and back); reasoning turns on when a system or user text holds
    "/think" outside `</think>`, off when it holds "/no_think", the last such text winning;
    default off;
  - a string content is cleaned and stripped; a list content is its text parts joined, after a
    `<image>\\n` prefix for one image or `<image 1><image> <image 2><image>\\n` for several
    (none when the text holds its own `<image>`), with its leading newlines removed;
  - user turn `<SPECIAL_11>User\\n{cleaned again, stripped}\\n`, assistant turn
    `<SPECIAL_11>Assistant\\n{content, stripped, thinking kept}\\n<SPECIAL_12>\\n`; with no
    message after the system one, an empty user turn;
  - generation prompt `<SPECIAL_11>Assistant\\n` + `<think>\\n` (reasoning) or `<think></think>`.
The processor then replaces each `<image>` with `<img>` + `<image>` x (tokens per tile x tiles)
+ `</img>`, and the text is tokenized with add_special_tokens=False.

Usage: python tools/nemotron_vl_template.py DIR...   writes DIR/tokenizer_config.json
(gen_agent_model.py and make_chat_golden.py call write_tokenizer_config() themselves).
"""

import json
import os
import sys

TEMPLATE = (
    "{%- macro clean(s) -%}"
    "{{- s.replace('</think>', '<_end_think>').replace('/think', '').replace('/no_think', '')"
    ".replace('<_end_think>', '</think>') -}}"
    "{%- endmacro -%}\n"
    "{%- macro texts(m) -%}"
    "{%- if m['content'] is string -%}{{- m['content'] -}}"
    "{%- else -%}{%- for p in m['content'] if p['type'] == 'text' -%}{{- p['text'] -}}{%- endfor -%}"
    "{%- endif -%}"
    "{%- endmacro -%}\n"
    "{%- set st = namespace(think=false, system='') -%}\n"
    "{%- for m in messages if m['role'] in ['system', 'user'] -%}\n"
    "  {%- set parts = [m['content']] if m['content'] is string else "
    "m['content'] | selectattr('type', 'equalto', 'text') | map(attribute='text') | list -%}\n"
    "  {%- for t in parts -%}\n"
    "    {%- if '/think' in t.replace('</think>', '') -%}{%- set st.think = true -%}\n"
    "    {%- elif '/no_think' in t -%}{%- set st.think = false -%}{%- endif -%}\n"
    "  {%- endfor -%}\n"
    "{%- endfor -%}\n"
    "{%- if messages and messages[0]['role'] == 'system' -%}\n"
    "  {%- if messages[0]['content'] is string -%}"
    "{%- set st.system = clean(messages[0]['content']) | trim -%}\n"
    "  {%- else -%}{%- set ns2 = namespace(s='') -%}"
    "{%- for p in messages[0]['content'] if p['type'] == 'text' -%}"
    "{%- set ns2.s = ns2.s + clean(p['text']) -%}{%- endfor -%}"
    "{%- set st.system = ns2.s | trim -%}{%- endif -%}\n"
    "  {%- set rest = messages[1:] -%}\n"
    "{%- else -%}{%- set rest = messages -%}{%- endif -%}\n"
    "{{- bos_token + '<SPECIAL_10>System\\n' + st.system + '\\n' -}}\n"
    "{%- if not rest -%}{%- set rest = [{'role': 'user', 'content': ''}] -%}{%- endif -%}\n"
    "{%- for m in rest -%}\n"
    "  {%- if m['content'] is string -%}{%- set body = clean(m['content']) | trim -%}\n"
    "  {%- else -%}\n"
    "    {%- set text = texts(m) -%}\n"
    "    {%- set n = m['content'] | selectattr('type', 'equalto', 'image') | list | length -%}\n"
    "    {%- if '<image>' in text or n == 0 -%}{%- set pre = '' -%}\n"
    "    {%- elif n == 1 -%}{%- set pre = '<image>\\n' -%}\n"
    "    {%- else -%}{%- set tags = namespace(l=[]) -%}"
    "{%- for i in range(n) -%}{%- set tags.l = tags.l + ['<image ' ~ (i + 1) ~ '><image>'] -%}"
    "{%- endfor -%}{%- set pre = tags.l | join(' ') + '\\n' -%}{%- endif -%}\n"
    "    {%- set body = pre + text.lstrip('\\n') -%}\n"
    "  {%- endif -%}\n"
    "  {%- if m['role'] == 'user' -%}{{- '<SPECIAL_11>User\\n' + (clean(body) | trim) + '\\n' -}}\n"
    "  {%- elif m['role'] == 'assistant' -%}"
    "{{- '<SPECIAL_11>Assistant\\n' + (body | trim) + '\\n<SPECIAL_12>\\n' -}}\n"
    "  {%- endif -%}\n"
    "{%- endfor -%}\n"
    "{%- if add_generation_prompt -%}"
    "{{- '<SPECIAL_11>Assistant\\n' + ('<think>\\n' if st.think else '<think></think>') -}}"
    "{%- endif -%}\n"
)


def write_tokenizer_config(directory):
    """DIR/tokenizer_config.json as the published checkpoints ship it: the tokenizer class,
    <s>/</s>/<unk>, no BOS added by the tokenizer itself (the template writes it), the template."""
    with open(os.path.join(directory, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "PreTrainedTokenizerFast", "add_bos_token": False,
                   "add_eos_token": False, "bos_token": "<s>", "eos_token": "</s>",
                   "unk_token": "<unk>", "chat_template": TEMPLATE}, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    for d in sys.argv[1:]:
        write_tokenizer_config(d)
