#!/bin/sh
# The holo-nano grammar enforces the published schema: every step sampled from the grammar (and
# from masked walks) by test-policy-nano validates against the published Step schema. Needs the
# local copy tools/policy_published.py makes (the text is not committed:
# tests/fixtures/policy/published/README.md) and Python's jsonschema; skips (77) without them.
set -eu
copy="$HOLOD_SOURCE_ROOT/tests/fixtures/policy/published/local/step-schema.json"
[ -f "$copy" ] || { echo "SKIP: no local copy of the published schema ($copy)"; exit 77; }
python3 -c 'import jsonschema' 2>/dev/null || { echo "SKIP: no python3 jsonschema"; exit 77; }
sha=$(sha256sum "$copy" | cut -d' ' -f1)
[ "$sha" = 9c5781e05421b086909a02f904e4de8aeffdeacc49abc7987a798a5866b07cd7 ] ||
	{ echo "FAIL: $copy is not the published text (sha256 $sha)"; exit 1; }
steps=$(mktemp)
trap 'rm -f "$steps"' EXIT
"$TEST_POLICY_NANO" --dump >"$steps" 2>/dev/null
python3 - "$copy" "$steps" <<'PY'
import json, sys
import jsonschema
schema = json.load(open(sys.argv[1]))
v = jsonschema.Draft202012Validator(schema)
n = bad = 0
tools = set()
for line in open(sys.argv[2]):
    step = json.loads(line)
    # holod's own tool beside the published twelve (docs/policy.md): not in their schema
    if step["tool_call"]["tool_name"] == "ask_user":
        continue
    n += 1
    errs = list(v.iter_errors(step))
    if errs:
        bad += 1
        if bad <= 5:
            print("FAIL:", line.strip()[:300], "\n ", errs[0].message[:300])
    tools.add(step["tool_call"]["tool_name"])
print(f"{n} sampled steps, {bad} invalid against the published schema, tools {sorted(tools)}")
sys.exit(1 if bad or n < 100 or len(tools) != 12 else 0)
PY
