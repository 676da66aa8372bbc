#!/bin/sh
# holo-quantize from the command line (tools/holo-quantize): usage and exit codes, a checkpoint
# written whole (tokenizer copied), run by holo-infer exactly as the source quantized at load,
# an existing --out refused (--force replaces it), write errors leaving nothing behind.
# Usage: test-holo-quantize.sh HOLO_QUANTIZE HOLO_INFER SOURCE_ROOT
set -u
hq=$1
infer=$2
src=$3/tests/fixtures/models/tiny-agent
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() { # DESCRIPTION WANT_RC RC OUTPUT_FILE [TEXT]
	if [ "$3" != "$2" ]; then
		echo "FAIL: $1: exit $3, expected $2"; cat "$4"; fail=1
	elif [ $# -ge 5 ] && ! grep -qF -- "$5" "$4"; then
		echo "FAIL: $1: output lacks \"$5\""; cat "$4"; fail=1
	fi
}

"$hq" --help >"$tmp/out" 2>&1; check "--help" 0 $? "$tmp/out" "usage: holo-quantize --model DIR --weights q8|q4 --out DIR2"
"$hq" --model "$src" --out "$tmp/x" >"$tmp/out" 2>&1; check "no --weights" 2 $? "$tmp/out" "--model, --weights and --out are needed"
"$hq" --model "$src" --weights q5 --out "$tmp/x" >"$tmp/out" 2>&1; check "--weights q5" 2 $? "$tmp/out" "--weights q5: expected q8 or q4"
"$hq" --model "$tmp/none" --weights q8 --out "$tmp/x" >"$tmp/out" 2>&1; check "missing model" 1 $? "$tmp/out" "none"
[ -e "$tmp/x" ] && { echo "FAIL: a refused run left $tmp/x"; fail=1; }

"$hq" --model "$src" --weights q8 --out "$tmp/q8" --threads 2 >"$tmp/out" 2>&1
check "q8" 0 $? "$tmp/out" "quantizing the linear layers to q8: 100%"
grep -qF "copied tokenizer.json" "$tmp/out" || { echo "FAIL: tokenizer.json not reported copied"; fail=1; }
cmp -s "$src/tokenizer.json" "$tmp/q8/tokenizer.json" || { echo "FAIL: tokenizer.json differs"; fail=1; }

# weights in other formats beside the checkpoint (a GGUF, a PyTorch file) are not copied
mkdir "$tmp/src"
for f in "$src"/*; do ln -s "$f" "$tmp/src/"; done
echo gguf >"$tmp/src/model-Q8_0.gguf"
echo torch >"$tmp/src/pytorch_model.bin"
"$hq" --model "$tmp/src" --weights q8 --out "$tmp/q8o" >"$tmp/out" 2>&1
check "q8 beside other weights" 0 $? "$tmp/out" "not copied: model-Q8_0.gguf (weights in another format)"
grep -qF "not copied: pytorch_model.bin (weights in another format)" "$tmp/out" || { echo "FAIL: pytorch_model.bin not named"; fail=1; }
[ -e "$tmp/q8o/model-Q8_0.gguf" ] || [ -e "$tmp/q8o/pytorch_model.bin" ] && { echo "FAIL: other weights copied"; fail=1; }
cmp -s "$src/tokenizer.json" "$tmp/q8o/tokenizer.json" || { echo "FAIL: tokenizer.json not copied beside other weights"; fail=1; }

# the written checkpoint runs as the source quantized at load, with no quantizing
"$infer" --model "$tmp/q8" --backend cpu --prompt-ids 1,2,3,4,5 --max-tokens 8 >"$tmp/a" 2>"$tmp/a.err"
check "holo-infer on the written checkpoint" 0 $? "$tmp/a.err" "are q8 as stored (holo-quantize)"
grep -qF "weights q8" "$tmp/a.err" || { echo "FAIL: backend line lacks 'weights q8'"; cat "$tmp/a.err"; fail=1; }
grep -qF "quantized the language model" "$tmp/a.err" && { echo "FAIL: the load quantized"; fail=1; }
# the (untied) lm_head's records are written too: the load quantizes no head either
grep -qF 'lm_head.weight":[' "$tmp/q8/config.json" || { echo "FAIL: config.json lists no lm_head records"; fail=1; }
grep -qF "the lm_head too" "$tmp/a.err" || { echo "FAIL: the load quantized the lm_head"; cat "$tmp/a.err"; fail=1; }
"$infer" --model "$src" --backend cpu --weights q8 --prompt-ids 1,2,3,4,5 --max-tokens 8 >"$tmp/b" 2>"$tmp/b.err"
check "holo-infer --weights q8 on the source" 0 $? "$tmp/b.err" "quantized the language model's linear layers to q8"
cmp -s "$tmp/a" "$tmp/b" || { echo "FAIL: generated ids differ:"; cat "$tmp/a" "$tmp/b"; fail=1; }
"$infer" --model "$tmp/q8" --backend cpu --weights q4 --prompt-ids 1,2 --max-tokens 1 >/dev/null 2>"$tmp/out"
check "--weights q4 on a q8 checkpoint" 1 $? "$tmp/out" "were quantized to q8 by holo-quantize"

# an existing --out: refused, untouched; --force replaces it
"$hq" --model "$src" --weights q4 --out "$tmp/q8" >"$tmp/out" 2>&1
check "existing --out" 1 $? "$tmp/out" "exists and is not empty (--force replaces it)"
grep -qF '"format":"q8"' "$tmp/q8/config.json" || { echo "FAIL: the refused run changed $tmp/q8"; fail=1; }
"$hq" --model "$src" --weights q4 --out "$tmp/q8" --force >"$tmp/out" 2>&1
check "--force" 0 $? "$tmp/out"
grep -qF '"format":"q4"' "$tmp/q8/config.json" || { echo "FAIL: --force did not replace $tmp/q8"; fail=1; }

# write errors: a parent that is a file; a file size limit hit mid-file (as a full disk)
echo x >"$tmp/file"
"$hq" --model "$src" --weights q8 --out "$tmp/file/out" >"$tmp/out" 2>&1
check "--out under a file" 1 $? "$tmp/out" "Not a directory"
(ulimit -f 64; trap '' XFSZ; exec "$hq" --model "$src" --weights q8 --out "$tmp/full") >"$tmp/out" 2>&1
check "file size limit" 1 $? "$tmp/out" "writing model.safetensors: File too large"
[ -e "$tmp/full" ] && { echo "FAIL: the failed write left $tmp/full"; fail=1; }
ls -A "$tmp" | grep -q holo-quantize && { echo "FAIL: a temporary directory was left:"; ls -A "$tmp"; fail=1; }
exit $fail
