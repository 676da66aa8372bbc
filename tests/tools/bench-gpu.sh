#!/bin/sh
# holo-bench gpu in a build without a GPU. In the emulated build: without --emulated it says the
# device is the emulation and exits 77 (nothing to measure); with it, the steps run at the tiny
# shapes of tools/bench/tiny-vl-config.json and print every figure the real-GPU check's report
# collects, the goals beside decode and prefill, and the vision tower's tiles of a 1920x1080
# screenshot. In a build with the CUDA runtime, --emulated is refused.
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
for f in copy:GB/s gemm:TFLOP/s bf16.prefill:tok/s bf16.decode:tok/s bf16.state:MiB \
	bf16.vision:ms/tile bf16.vision_of_gemm:%; do
	grep -Eq "^figure name=gpu.${f%%:*} value=$v unit=${f#*:}$" "$out"
done
grep -Eq "^figure name=gpu.bf16.prefill_of_gemm value=$v unit=% goal=>=60$" "$out"
grep -Eq "^figure name=gpu.bf16.decode_of_roofline value=$v unit=% goal=>=85$" "$out"
test "$(grep -c '^figure ' "$out")" = 9
# the fp32 precision's figures carry its name
"$bench" gpu --emulated --precision fp32 --prompt 4 --decode 2 >"$out.fp32"
grep -Eq "^figure name=gpu.fp32.decode_of_roofline value=$v unit=% goal=>=85$" "$out.fp32"
! "$bench" gpu --emulated --config /nonexistent/config.json 2>/dev/null
