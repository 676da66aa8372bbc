#!/bin/sh
# Quantized weights end to end (issue 28): an instruction task of the tiny agent model with
# --weights q8 and q4 decodes schema-valid steps; /v1/status, the journal's provenance and the
# load's log line say the format, and the weights the backend holds (device_weight_bytes) are
# fewer than the bf16 run's: the quantized layers replace their source's bytes. The model written
# by holo-quantize (q8) runs with --weights default, says q8 everywhere and holds exactly the
# bytes quantizing at load holds.
. "$(dirname "$0")/agent-lib.sh"
require_agent
# (CUDA runs q8, q4 and fp8 too, issue 29: tests/gpu/test-gpu-quant-lm.c; this scenario checks the
# CPU backend's load log)
[ "$AGENT_BACKEND" = cpu ] || test_skip "this scenario checks the CPU backend's quantized load"
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client

# run_task WEIGHTS [OPTION]: one task of one step under --weights OPTION (default: WEIGHTS), which
# /v1/status, the provenance and the log must name WEIGHTS; sets HELD (device_weight_bytes)
run_task() {
	rm -f "$SOCK"
	start_agent --step-retries 0 --weights "${2:-$1}"
	api GET /v1/status
	expect_json "status ($1)" .model.weights "$1"
	HELD=$(jq -r .model.device_weight_bytes "$BODY")
	[ "$HELD" -gt 0 ] || fail "no device_weight_bytes in the status ($1)"
	submit '{"instruction": "Click the red block.", "max_steps": 1}'
	wait_task "$TASK" failed 120
	api GET "/v1/tasks/$TASK"
	expect_json "provenance ($1)" .provenance.model.weights "$1"
	[ "$(sqlite3 "$DB" "SELECT json_extract(provenance, '\$.model.weights') FROM tasks
		WHERE id = $TASK")" = "$1" ] || fail "the journal's provenance of task $TASK is not $1"
	steps "$TASK"
	check_steps "$1: the step ok" 'all(.steps[]; .status == "ok" and .error == null)'
	check_steps "$1: schema" 'all(.steps[]; (.agent.raw_output | fromjson | keys) == ["note", "thought", "tool_call"])'
	grep -q "weights $1 (" "$HOLOD_LOG" || fail "the load's log line does not say weights $1"
	stop_holod || fail "holod exit status $?"
}

run_task bf16
H16=$HELD
run_task q8
H8=$HELD
run_task q4
H4=$HELD
echo "weights held: bf16 $H16, q8 $H8, q4 $H4 bytes"
[ "$H8" -lt "$H16" ] && [ "$H4" -lt "$H8" ] || fail "the quantized runs do not hold fewer bytes"

# quantized once on disk: the same format and bytes with no quantizing at load
"$HOLO_QUANTIZE" --model "$AGENT_MODEL" --weights q8 --out "$T/agent-q8" >"$T/quantize.log" 2>&1 ||
	fail "holo-quantize: $(cat "$T/quantize.log")"
AGENT_MODEL=$T/agent-q8
run_task q8 default
echo "weights held: the holo-quantize q8 directory $HELD bytes"
[ "$HELD" = "$H8" ] || fail "the q8 directory holds $HELD bytes, quantizing at load $H8"
grep -q "are q8 as stored (holo-quantize)" "$HOLOD_LOG" || fail "the log does not say the layers are q8 as stored"
pass_or_fail
