#!/bin/sh
# holo-bench agent --backend B measures persistent agent steps on tiny-agent-short: the step line
# of step 2 and step 3, each part (vision, prefill, decode, measured and roofline) positive, the
# context growing by exactly the turn's tokens (12 image + 6 text) and the 4 decoded ones, the
# measured rates printed, and measured/roofline and the step ratio given. Then the same on
# random weights of a config's shapes (--random-config: the LM and a random vision tower, no
# checkpoint), one step shown with its figure lines. With the checkpoint's tokenizer, the
# jump-forward summary line of steps decoded under the grammar off and on: fewer forwards with
# it (forwards_on + forced = the tokens fed back), the step's lead (`{"note":`) forced before
# the first sample, then the scripted click steps' line and their prediction for Holotron-12B
# (fewer forwards, less time on the H100 and H200, and on the CPU when it is measured); also
# from holo-bench policy --model. The emulated CUDA backend, whose decode forwards are slow,
# decodes one step of each kind.
# usage: bench-agent-measure.sh HOLO_BENCH BACKEND OUT
set -eu
bench=$1 backend=$2 out=$3
model=$HOLOD_SOURCE_ROOT/tests/fixtures/models/tiny-agent-short
jump_steps=$([ "$backend" = cpu ] && echo 2 || echo 1)
"$bench" agent --backend "$backend" --model "$model" --steps 3 --decode 4 --prefix 16 --text 6 \
	--screen 200x120 --jump-steps "$jump_steps" >"$out"
cat "$out"
# jump-forward steps=N tokens=T forced=F forwards_off=A forwards_on=B decode_ms_off=X decode_ms_on=Y,
# and the same fields on the jump-forward-click line
check_jump() {
	awk '
	$1 == "jump-forward" || $1 == "jump-forward-click" {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		seen[$1]++
		if (f["steps"] != steps || !(f["forced"] > 0) || !(f["forwards_on"] + 0 < f["forwards_off"] + 0) ||
		    !(f["decode_ms_off"] > 0) || !(f["decode_ms_on"] > 0) || f["forwards_on"] + f["forced"] != f["tokens"] + 0) {
			print "bad jump-forward line: " $0; bad = 1
		}
	}
	END { if (seen["jump-forward"] != 1 || seen["jump-forward-click"] != 1 || bad) {
		print "expected one jump-forward and one jump-forward-click line"; exit 1 } }' steps="$2" "$1"
	grep -q "0 incomplete)" "$1"
	# the lead: the first step's ids with jump-forward on start with `{"note":` in this
	# tokenizer's canonical split, appended with the observation rather than sampled
	grep -q 'its first 3 ids (the lead) appended' "$1"
	grep -q '^first step, tokens separated by |: on  {"|note|":|' "$1"
}
# jump-forward-predicted model=M device=D context=C forwards_off=A forwards_on=B step_ms_off=X
# step_ms_on=Y saved=Z%
check_predicted() {
	awk '
	$1 == "jump-forward-predicted" {
		for (i = 2; i <= NF; i++) { split($i, kv, "="); f[kv[1]] = kv[2] }
		seen[f["device"]]++
		if (f["model"] != "holotron-12b" || !(f["forwards_on"] + 0 < f["forwards_off"] + 0) ||
		    !(f["step_ms_on"] + 0 < f["step_ms_off"] + 0) || !(f["step_ms_on"] > 0)) {
			print "bad prediction line: " $0; bad = 1
		}
	}
	END { if (seen["h100"] != 1 || seen["h200"] != 1 || seen["cpu"] != cpu || bad) {
		print "expected one prediction line per device"; exit 1 } }' cpu="$2" "$1"
}
check_jump "$out" "$jump_steps"
check_predicted "$out" "$([ "$backend" = cpu ] && echo 1 || echo 0)"
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
if [ "$backend" = cpu ]; then
	"$bench" policy --model "$model" --steps 2 --decode 2 >"$out.policy"
	cat "$out.policy"
	check_jump "$out.policy" 4
fi
# a missing --model is refused
! "$bench" agent --backend "$backend" 2>/dev/null

config=$HOLOD_SOURCE_ROOT/tools/bench/tiny-vl-config.json
"$bench" agent --backend "$backend" --random-config "$config" --steps 2 --decode 2 --prefix 8 \
	--text 4 --screen 200x120 >"$out.random"
cat "$out.random"
grep -q "random weights of the shapes of $config\$" "$out.random"
grep -q "= 7 tiles; 28 + 4 tokens appended, 2 decoded greedily; prefix 8; 2 persistent steps" "$out.random"
# step 2 alone: its line (context 8 + 28 + 4 + 2 = 42) and its figures
test "$(grep -c '^2 ' "$out.random")" = 1
grep -Eq "^2 +42 +7 " "$out.random"
! grep -q "step 2 / step 2" "$out.random"
v='[0-9.]+(e[-+][0-9]+)?'
for p in vision prefill decode sum roofline; do
	grep -Eq "^figure name=agent.step2.$p value=$v unit=ms\$" "$out.random"
done
grep -Eq "^figure name=agent.step2.of_roofline value=$v unit=x goal=<=1.2\$" "$out.random"
# one model only
! "$bench" agent --backend "$backend" --random-config "$config" --model "$model" 2>/dev/null
