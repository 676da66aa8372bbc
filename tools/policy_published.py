#!/usr/bin/env python3
"""Makes local copies of the published holo-nano texts and checks them byte for byte.

tests/fixtures/policy/published/README.md names the texts the holo-nano policy format follows
(NVIDIA's Nemotron cookbook port of holo-nano, server/holotron_agent.py) and their SHA-256s;
the texts themselves are not committed. Given that file (a checkout of NVIDIA-NeMo/Nemotron at
the commit the README names), this writes into OUT (default tests/fixtures/policy/published/local,
ignored by git):
  system-template.txt  the value of _SYSTEM_PROMPT_TEMPLATE (read with ast.literal_eval: the
                       module, which imports its server, is never run)
  step-schema.json     json.dumps(Step.model_json_schema()), the pydantic classes between the
                       "Pydantic Step union" and "System prompt" banners run on their own
  system-prompt.txt    _build_system_prompt(password="password", max_steps=50, max_time_s=1800,
                       os_name="Linux") with the date 2026-11-21
and exits 1 unless each has the README's size and SHA-256 (the schema depends on pydantic's
version: 2.13.4 was read). When they all match, the template and the schema are also written
where holod reads them (--published-dir, default $XDG_DATA_HOME/holod/published, else
~/.local/share/holod/published): holod's holo-nano format then uses the published system text
(docs/policy.md); set HOLOD_PUBLISHED_DIR to write elsewhere, or to "" not to.

usage: tools/policy_published.py PATH/TO/holotron_agent.py [OUT]
"""
import ast
import hashlib
import json
import os
import sys

EXPECTED = {
    "system-template.txt": (11419, "ee5cbd0f370bcde65f94a32c667010acf546786c03577017c8bb7762cef88475"),
    "step-schema.json": (8631, "9c5781e05421b086909a02f904e4de8aeffdeacc49abc7987a798a5866b07cd7"),
    "system-prompt.txt": (20072, "6335ce693c14248450dad66180d6f17dfb6541003a3beb93a78d8f88e1c5b463"),
}


def template_of(src):
    for node in ast.parse(src).body:
        if isinstance(node, ast.AnnAssign):
            targets = [node.target]
        elif isinstance(node, ast.Assign):
            targets = node.targets
        else:
            continue
        if any(getattr(t, "id", None) == "_SYSTEM_PROMPT_TEMPLATE" for t in targets):
            return ast.literal_eval(node.value)
    sys.exit("no _SYSTEM_PROMPT_TEMPLATE in the file")


def schema_of(src):
    try:
        start = src.index("# ── Pydantic Step union")
        end = src.index("# ── System prompt")
    except ValueError:
        sys.exit("the Pydantic Step union / System prompt banners are not in the file")
    ns = {}
    exec("from typing import Any, Literal, Optional\n"
         "from pydantic import BaseModel, ConfigDict, Field\n" + src[start:end], ns)
    return json.dumps(ns["Step"].model_json_schema())


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src = open(sys.argv[1], encoding="utf-8").read()
    out = sys.argv[2] if len(sys.argv) == 3 else os.path.join(
        os.path.dirname(__file__), "..", "tests", "fixtures", "policy", "published", "local")
    template = template_of(src)
    schema = schema_of(src)
    prompt = (template.format(start_time="2026-11-21", max_steps=50, max_time_s=1800,
                              os_name="Linux", password="password")
              + "\n<output_format>\n```json\n" + schema + "\n```\n</output_format>\n")
    os.makedirs(out, exist_ok=True)
    bad = 0
    for name, text in (("system-template.txt", template), ("step-schema.json", schema),
                       ("system-prompt.txt", prompt)):
        data = text.encode("utf-8")
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
        size, sha = EXPECTED[name]
        got = hashlib.sha256(data).hexdigest()
        ok = len(data) == size and got == sha
        bad += not ok
        print(f"{name}: {len(data)} bytes, sha256 {got}: {'ok' if ok else 'DIFFERS from the README'}")
    if bad:
        sys.exit(1)
    dest = os.environ.get("HOLOD_PUBLISHED_DIR")
    if dest is None:
        data_home = os.environ.get("XDG_DATA_HOME")
        if not data_home or not os.path.isabs(data_home):
            data_home = os.path.join(os.path.expanduser("~"), ".local", "share")
        dest = os.path.join(data_home, "holod", "published")
    if dest:
        os.makedirs(dest, exist_ok=True)
        for name, text in (("system-template.txt", template), ("step-schema.json", schema)):
            with open(os.path.join(dest, name), "wb") as f:
                f.write(text.encode("utf-8"))
        print(f"holod reads them from {dest}")
    sys.exit(0)


if __name__ == "__main__":
    main()
