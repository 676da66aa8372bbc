#!/bin/sh
# holo-bench gpu in a build without a GPU. In the emulated build: without --emulated it says the
# device is the emulation and exits 77 (nothing to measure); with it, the steps run at the tiny
# shapes of tools/bench/tiny-vl-config.json and print every figure the real-GPU check's report
# collects, the goals beside decode and prefill, and the vision tower's tiles of a 1920x1080
# screenshot. --weights q8, q4 and fp8 (on a model wide enough for their records to be smaller
# than bf16's rows, tests/tools/bench-gpu-wide-config.json) print their figures under their
# format's name, the weight bytes a decode token reads from the backend's memory plan (fewer for
# q8 than bf16, fewer still for q4; fp8 between: its lm_head stays bf16), and fp8 its FP8 GEMM
# rate, against which its prefill is measured; fp8 on an emulated sm_80 is refused before
# anything is measured. In a build with the CUDA runtime, --emulated is refused.
# usage: bench-gpu.sh HOLO_BENCH OUT emulated|device
set -eu
bench=$1 out=$2 build=$3
unset HOLOD_PRECISION # (the tests' fp32): the bench's own default, bf16
if [ "$build" = device ]; then
	set +e
	"$bench" gpu --emulated >"$out" 2>&1
	rc=$?
	set -e
	cat "$out"
	test $rc = 2
	grep -q "this build runs the CUDA runtime, not the emulation" "$out"
	exit 0
fi
set +e
"$bench" gpu >"$out" 2>&1
rc=$?
set -e
cat "$out"
test $rc = 77
grep -q "this build's CUDA device is the CPU emulation, not a device: nothing to measure" "$out"

"$bench" gpu --emulated >"$out"
cat "$out"
v='[0-9.]+(e[-+][0-9]+)?'
grep -q "the shapes of $HOLOD_SOURCE_ROOT/tools/bench/tiny-vl-config.json" "$out"
grep -Eq "^prefill: 16 tokens, [0-9]+ tok/s = [0-9.]+% of the GEMM rate \([0-9]+ tok/s\) \[goal >= 60%\]$" "$out"
grep -Eq "^decode: 4 tokens, [0-9.]+ tok/s = [0-9.]+% of the roofline" "$out"
grep -Eq "^vision: random ViT of width 64, 2 blocks, MLP 256, 64-px tiles: a 1920x1080 screenshot = 9 tiles in [0-9.]+ ms: [0-9.]+ ms/tile" "$out"
for f in copy:GB/s gemm:TFLOP/s bf16.prefill:tok/s bf16.decode:tok/s bf16.decode_bytes:MB \
	bf16.state:MiB bf16.vision:ms/tile bf16.vision_of_gemm:%; do
	grep -Eq "^figure name=gpu.${f%%:*} value=$v unit=${f#*:}$" "$out"
done
grep -Eq "^figure name=gpu.bf16.prefill_of_gemm value=$v unit=% goal=>=60$" "$out"
grep -Eq "^figure name=gpu.bf16.decode_of_roofline value=$v unit=% goal=>=85$" "$out"
grep -Eq "^weights read per decode token: [0-9.]+ MB \(the memory plan: layers [0-9.]+ MB in bf16, " "$out"
test "$(grep -c '^figure ' "$out")" = 10
# the fp32 precision's figures carry its name
"$bench" gpu --emulated --precision fp32 --prompt 4 --decode 2 >"$out.fp32"
grep -Eq "^figure name=gpu.fp32.decode_of_roofline value=$v unit=% goal=>=85$" "$out.fp32"
! "$bench" gpu --emulated --config /nonexistent/config.json 2>/dev/null

# The weight formats, on a model without a tower whose matrices are 512 wide: each format's
# figures under its name, and the bytes a decode token reads (MB) in the order the formats'
# records size them.
wide=$HOLOD_SOURCE_ROOT/tests/tools/bench-gpu-wide-config.json
bytes() { sed -n "s/^figure name=gpu.$1.decode_bytes value=\([0-9.]*\) unit=MB$/\1/p" "$out.$1"; }
for w in bf16 q8 q4 fp8; do
	"$bench" gpu --emulated --config "$wide" --weights $w --prompt 16 --decode 2 >"$out.$w"
	cat "$out.$w"
	# 2105344 = Mamba 1104x512 + 512x512, attention (64 + 32 + 32) x 512 + 512x64, MLP 2 x 1024x512,
	# head 256x512: each layer its own kind's matrices
	grep -q "^model: random, 2.11M matrix parameters per token, weights $w, bf16 activations" "$out.$w"
	grep -q "^vision: not measured" "$out.$w"
	grep -Eq "^figure name=gpu.$w.prefill_of_gemm value=$v unit=% goal=>=60$" "$out.$w"
	grep -Eq "^figure name=gpu.$w.decode_of_roofline value=$v unit=% goal=>=85$" "$out.$w"
	grep -Eq "^figure name=gpu.$w.decode_bytes value=$v unit=MB$" "$out.$w"
done
awk -v b="$(bytes bf16)" -v q8="$(bytes q8)" -v q4="$(bytes q4)" -v f8="$(bytes fp8)" 'BEGIN {
	ok = q8 < 0.65 * b && q4 < 0.7 * q8 && f8 > q8 && f8 < b
	if (!ok) printf "decode bytes (MB): bf16 %s, q8 %s, q4 %s, fp8 %s\n", b, q8, q4, f8
	exit !ok
}'
# fp8's prefill against cuBLASLt's FP8 matmul rate of the same shape
grep -Eq "^cuBLASLt FP8 GEMM \(64\^3, e4m3 x e4m3, fp32 sums\): [0-9.]+ TFLOP/s" "$out.fp8"
grep -Eq "^figure name=gpu.gemm_fp8 value=$v unit=TFLOP/s$" "$out.fp8"
grep -Eq "^prefill: 16 tokens, [0-9]+ tok/s = [0-9.]+% of the FP8 GEMM rate" "$out.fp8"
! grep -q "gemm_fp8\|FP8 GEMM" "$out.q8"
# fp8 needs FP8 tensor cores: refused on an sm_80 before anything is measured
set +e
HOLOD_GPU_EMU_ARCH=sm_80 "$bench" gpu --emulated --config "$wide" --weights fp8 >"$out.sm80" 2>&1
rc=$?
"$bench" gpu --emulated --weights q5 >"$out.bad" 2>&1
rc_bad=$?
set -e
cat "$out.sm80" "$out.bad"
test $rc = 1
grep -q "^holo-bench gpu: --weights fp8 needs a GPU with FP8 tensor cores, compute capability 8.9 or newer (sm_89: Ada, sm_90: Hopper), but CUDA device 0 (.*) is sm_80: measure --weights q8 or q4 there$" "$out.sm80"
! grep -q "^figure \|copy bandwidth" "$out.sm80"
test $rc_bad = 2
grep -q "^holo-bench gpu: --weights q5: expected bf16, q8, q4 or fp8$" "$out.bad"
