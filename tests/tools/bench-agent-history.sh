#!/bin/sh
# holo-bench agent --history on the tiny agent model (issue 30): the tokens each history mode
# prefills per step, rendered and fitted as holod does, then predicted for Holotron-12B's shapes.
#   persistent: the same each step (no rebuild in 12 steps of the tiny model);
#   window:     grows with the task;
#   rolling:    the window's at step 2 (nothing evicted yet), then the same each step from step
#               K + 2 on, below the window's;
#   predicted:  9 tiles x 256 tokens per 1920x1080 screenshot; persistent one screenshot and its
#               text a step, rolling three and an evicted turn; a CPU GEMM rate and seconds.
# usage: bench-agent-history.sh HOLO_BENCH OUT MODEL_DIR
B=$1
OUT=$2
M=$3
fail() { echo "FAIL: $*"; exit 1; }
"$B" agent --history --model "$M" --steps 12 --device-spec h200 >"$OUT" 2>&1 ||
	fail "exit $?: $(cat "$OUT")"
cat "$OUT"
fig() { # NAME -> value
	sed -n "s/^figure name=agent\.history\.$1 value=\([0-9]*\) unit=tokens$/\1/p" "$OUT"
}
for t in model predicted; do
	for m in persistent window rolling; do
		for s in 2 10 12; do
			v=$(fig "$t.$m.step$s")
			[ -n "$v" ] && [ "$v" -gt 0 ] || fail "no figure $t.$m.step$s"
			eval "${t}_${m}_$s=$v"
		done
	done
done
[ "$model_persistent_2" = "$model_persistent_10" ] && [ "$model_persistent_10" = "$model_persistent_12" ] ||
	fail "persistent is not the same each step"
[ "$model_window_2" -lt "$model_window_10" ] && [ "$model_window_10" -lt "$model_window_12" ] ||
	fail "the window does not grow"
[ "$model_rolling_2" = "$model_window_2" ] || fail "rolling at step 2 is not the window's"
[ "$model_rolling_10" = "$model_rolling_12" ] || fail "rolling is not constant from step 5 on"
[ "$model_rolling_12" -lt "$model_window_12" ] || fail "rolling is not below the window"
grep -q "^predicted for .*holotron-12b-config.json (text counted by .*): 9 tiles x 256 tokens per screenshot," "$OUT" ||
	fail "the prediction's shapes"
# step 2: the 12B's persistent session is rebuilt at step 10 (the prefix, counted by the tiny
# tokenizer, holds the step schema: 5016 tokens)
[ "$predicted_persistent_2" -gt 2304 ] && [ "$predicted_persistent_2" -lt 2604 ] ||
	fail "predicted persistent step: $predicted_persistent_2"
[ "$predicted_rolling_10" -gt $((3 * 2304)) ] && [ "$predicted_rolling_10" -lt $((3 * 2304 + 900)) ] ||
	fail "predicted rolling step: $predicted_rolling_10"
[ "$predicted_rolling_12" = "$predicted_rolling_10" ] || fail "predicted rolling is not constant"
grep -Eq "^CPU (bf16|fp32 \(no oneDNN bf16 here\)) GEMM rate at .*: [0-9.]+ GFLOP/s$" "$OUT" || fail "no CPU GEMM rate"
grep -Eq "^ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +s of prefill at the CPU's measured GEMM rate$" "$OUT" ||
	fail "no CPU seconds"
grep -Eq "^ +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+ +ms of prefill at the GPU's peak \(roofline\)$" "$OUT" ||
	fail "no GPU milliseconds"
# --history needs the model whose tokenizer renders the prompt
"$B" agent --history >/dev/null 2>&1
[ $? = 2 ] || fail "--history without --model"
"$B" agent --history --model "$M" --steps 1 >/dev/null 2>&1
[ $? = 2 ] || fail "--history --steps 1"
echo "PASS"
