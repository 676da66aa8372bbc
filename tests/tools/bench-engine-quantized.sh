#!/bin/sh
# holo-bench engine on a holo-quantize checkpoint (q4, the lm_head's records too): the lm head's
# GEMV alone runs on its records with the quantized GEMV (not read as bf16 past its bytes), the
# GEMM-only rate, which has no plain products to time, is said not measured, and the parameters
# are counted from the records' shapes; the bf16 source's lm head is timed on the backend's copy
# in 2 MiB pages.
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
