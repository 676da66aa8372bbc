#!/bin/sh
# holo-bench engine on a holo-quantize checkpoint (q4, the lm_head's records too): the lm head's
# GEMV alone runs on its records with the quantized GEMV (not read as bf16 past its bytes), the
# GEMM-only rate, which has no plain products to time, is said not measured, and the parameters
# are counted from the records' shapes; the bf16 source's lm head is timed on the backend's copy
# in 2 MiB pages.
# --vs-bf16 prints the rate against bf16 weights decoded in the same rounds, and is refused where
# there is nothing to compare.
# usage: bench-engine-quantized.sh HOLO_QUANTIZE HOLO_BENCH SOURCE_ROOT OUT
set -eu
hq=$1 bench=$2 src=$3/tests/fixtures/models/tiny-mamba out=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$hq" --model "$src" --weights q4 --out "$tmp/q4" >/dev/null 2>&1
"$bench" engine --model "$tmp/q4" --backend cpu --precision fp32 --prompt 8 --decode 2 \
	--threads 2 >"$out"
cat "$out"
grep -Eq "^gemv alone \([^,]*, the lm head 256 x 64 in q4, fp32 activations\): median [0-9.]+ GB/s" "$out"
grep -q "^prefill GEMM-only rate: not measured (the checkpoint's matrices are holo-quantize records)" "$out"
# where a decode step's time goes: the profiled steps' operations, the matrix products' read rate
# against the read pass and the rest's share, and the ceiling counting the session's state
grep -Eq "^decode cpu matrix products +[0-9.]+ ms \( *[0-9.]+%\), [0-9]+ GFLOP/s, weights q4$" "$out"
grep -Eq "^decode cpu mamba scan +[0-9.]+ ms" "$out"
grep -Eq "^decode step [0-9.]+ ms \(8 profiled\): matrix products [0-9.]+ ms, reading the weights at [0-9.]+ GB/s \([0-9]+% of the median read bandwidth\); the other operations and the gaps between them -?[0-9.]+ ms \(-?[0-9]+% of the step\)$" "$out"
grep -Eq "^decode ceiling counting the session's state \([0-9.]+ MB recurrent, read and written each step; [0-9.]+ MB of K/V cache, read\) beside the weights: [0-9.]+ tok/s: decode at [0-9]+% of it$" "$out"
grep -Eq "^read bandwidth \(2 threads, [0-9]+ MB passes interleaved with the decode rounds, ([0-9]+ of [0-9]+ MB in 2 MiB pages|in 4 KiB pages|pages unknown: no /proc/self/smaps)\)" "$out"
# the same weights as the source's (not the records' bytes / 2)
"$bench" engine --model "$src" --backend cpu --precision fp32 --prompt 8 --decode 2 --threads 2 \
	>"$out.src"
cat "$out.src"
# the bf16 source's lm head timed on the copy the backend reads (lm_prepared.head_held)
grep -Eq "^gemv alone \([^,]*, the lm head 256 x 64 held in 2 MiB pages, fp32 activations\): median [0-9.]+ GB/s" "$out.src"
want=$(sed -n 's/^parameters [0-9.]* B (\([0-9]*\)).*/\1/p' "$out.src")
have=$(sed -n 's/^parameters [0-9.]* B (\([0-9]*\)).*/\1/p' "$out")
[ -n "$want" ] && [ "$want" = "$have" ]
# --vs-bf16: the same model's bf16 weights decoded in rounds alternating with q8's, the rate
# against them and the bytes' ratio, which is bf16's bytes per token over q8's (a random model
# of ~15M parameters, so that the megabytes printed give the ratio to 1%)
"$bench" engine --random pattern=M-M*-,hidden=512,vocab=8192,intermediate=2048,heads=4,kv_heads=2,head_dim=128,m_heads=8,m_head_dim=64,m_groups=2,m_state=64 \
	--backend cpu --precision fp32 --weights q8 --vs-bf16 --prompt 8 --decode 8 --threads 2 \
	>"$out.vs"
cat "$out.vs"
grep -Eq "^reference \(--vs-bf16\): backend cpu, weights bf16 [0-9.]+ MB, [0-9.]+ MB read per decode token$" "$out.vs"
grep -Eq "^decode against bf16 in the same rounds \(--vs-bf16\): q8 [0-9.]+ tok/s \([0-9]+% of the read bandwidth\), bf16 [0-9.]+ tok/s \([0-9]+%\): [0-9.]+x \(per round: min [0-9.]+x, median [0-9.]+x, max [0-9.]+x over 2 rounds, q8 first in 1\); the bytes read per token give [0-9.]+x, [0-9.]+x counting the session's state$" "$out.vs"
q8_bytes=$(sed -n 's/^parameters .*, weight bytes read per decode token \([0-9.]*\) MB$/\1/p' "$out.vs")
bf16_bytes=$(sed -n 's/^reference (--vs-bf16): .*, \([0-9.]*\) MB read per decode token$/\1/p' "$out.vs")
given=$(sed -n 's/.*; the bytes read per token give \([0-9.]*\)x, .*/\1/p' "$out.vs")
awk -v q="$q8_bytes" -v b="$bf16_bytes" -v g="$given" 'BEGIN {
	r = b / q; d = r - g; if (d < 0) d = -d
	if (q <= 0 || d > 0.02) { printf "bytes ratio %s, want %.2f\n", g, r; exit 1 } }'
# refused: with the weights as stored (nothing to compare), and on a holo-quantize checkpoint,
# which has no bf16 weights
if "$bench" engine --model "$src" --vs-bf16 --prompt 8 --decode 2 >/dev/null 2>"$out.err"; then
	exit 1
fi
grep -q "^holo-bench engine: --vs-bf16 compares a quantized format with bf16: add --weights q8, q4 or fp8$" "$out.err"
if "$bench" engine --model "$tmp/q4" --weights q4 --vs-bf16 --prompt 8 --decode 2 >/dev/null 2>"$out.err"; then
	exit 1
fi
grep -q "^holo-bench engine: --vs-bf16: the bf16 weights: .*holo-quantize" "$out.err"
