#!/bin/sh
# holo-bench agent --backend B measures persistent agent steps on tiny-agent-short: the step line
# of step 2 and step 3, each part (vision, prefill, decode, measured and roofline) positive, the
# context growing by exactly the turn's tokens (12 image + 6 text) and the 4 decoded ones, the
# measured rates printed, and measured/roofline and the step ratio given.
# usage: bench-agent-measure.sh HOLO_BENCH BACKEND OUT
set -eu
bench=$1 backend=$2 out=$3
model=$HOLOD_SOURCE_ROOT/tests/fixtures/models/tiny-agent-short
"$bench" agent --backend "$backend" --model "$model" --steps 3 --decode 4 --prefix 16 --text 6 \
	--screen 200x120 >"$out"
cat "$out"
grep -q "= 3 tiles; 12 + 6 tokens appended, 4 decoded greedily; prefix 16; 3 persistent steps" "$out"
grep -Eq "^GEMM rate: [0-9.]+ TFLOP/s" "$out"
grep -Eq "^copy bandwidth: [0-9.]+ GB/s" "$out"
grep -Eq "^step 3 / step 2: [0-9.]+ " "$out"
# step context tiles vision prefill decode sum | vision prefill decode sum ratio
awk '
$1 == 2 || $1 == 3 {
	want = $1 == 2 ? 38 : 60
	if ($2 != want || $3 != 3 || $8 != "|") { print "bad step line: " $0; bad = 1 }
	for (i = 4; i <= 12; i++) if (i != 8 && !($i + 0 > 0)) { print "part " i " not positive: " $0; bad = 1 }
	seen++
}
END { if (seen != 2 || bad) { print "expected steps 2 and 3"; exit 1 } }' "$out"
# a missing --model is refused
! "$bench" agent --backend "$backend" 2>/dev/null
