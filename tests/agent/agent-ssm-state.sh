#!/bin/sh
# The bf16 SSM state end to end (issue 16): an instruction task of the tiny agent model with
# --ssm-state bf16 decodes schema-valid steps, /v1/status and the journal's provenance say
# bf16, and what the task's session reserves holds its SSM state at half the bytes of an fp32
# run's reservation (the conv state and the KV cache stay fp32).
. "$(dirname "$0")/agent-lib.sh"
require_agent
[ "$AGENT_BACKEND" = cpu ] || test_skip "the SSM state's run is on the CPU backend"
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
# A state limit, so that tasks reserve their sessions; no retries, so that a task of the default
# rolling history reserves one session of the full context, its rolling snapshot (charged like
# the session) and its prefix snapshot: three fixed (conv + SSM) states.
OPTS="--state-limit 1048576 --step-retries 0"

# what task $1 reserved, from holod's log line at its admission (the reservation itself lasts
# only while the task runs: a poll of /v1/status can miss it on a loaded machine)
reserved() {
	R=$(sed -n "s/^holod: task $1: model session admitted, \([0-9]*\) bytes reserved .*/\1/p" \
		"$HOLOD_LOG" | head -n 1)
	[ -n "$R" ] && [ "$R" -gt 0 ]
}

# run_task SSM_STATE STEPS: one task under --ssm-state SSM_STATE; sets TASK and R (what the
# task reserved).
run_task() {
	AGENT_SSM_STATE=$1
	rm -f "$SOCK"
	start_agent $OPTS
	api GET /v1/status
	expect_json "status ($1)" .model.ssm_state "$1"
	submit "{\"instruction\": \"Click the red block.\", \"max_steps\": $2}"
	wait_task "$TASK" failed 120
	reserved "$TASK" || fail "task $TASK reserved nothing ($1)"
	api GET "/v1/tasks/$TASK"
	expect_json "budget ($1)" .error "max_steps budget ($2) reached without an answer"
	expect_json "provenance ($1)" .provenance.model.ssm_state "$1"
	[ "$(sqlite3 "$DB" "SELECT json_extract(provenance, '\$.model.ssm_state') FROM tasks
		WHERE id = $TASK")" = "$1" ] || fail "the journal's provenance of task $TASK is not $1"
}

run_task fp32 1
R32=$R
stop_holod || fail "holod exit status $?"

run_task bf16 2
R16=$R
steps "$TASK"
check_steps "bf16: two steps" '[.steps[].index] == [0, 1]'
check_steps "bf16: every step ok" 'all(.steps[]; .status == "ok" and .error == null)'
check_steps "bf16: schema" 'all(.steps[]; (.agent.raw_output | fromjson | keys) == ["note", "thought", "tool_call"])'
check_steps "bf16: executed = decoded" 'all(.steps[]; (.agent.raw_output | fromjson | .tool_call) as $c
	| $c.tool_name == .tool_call.tool_name and $c.x == .tool_call.x and $c.y == .tool_call.y)'
grep -q "SSM state bf16" "$HOLOD_LOG" || fail "the load's log line does not say SSM state bf16"
api GET /v1/status
expect_json "released" .model.batching.reserved_bytes 0
stop_holod || fail "holod exit status $?"

# Each Mamba layer holds heads x head_dim x state_size SSM values: 4 bytes each in fp32, 2 in
# bf16; the three fixed states of the reservation save 2 bytes per value each.
CFG="$AGENT_MODEL/config.json"
SSM_VALUES=$(jq '.llm_config | (.hybrid_override_pattern | [scan("M")] | length)
	* .mamba_num_heads * .mamba_head_dim * .ssm_state_size' "$CFG")
echo "reserved: fp32 state $R32 bytes, bf16 state $R16 bytes; $SSM_VALUES SSM values a session"
[ "$SSM_VALUES" -gt 0 ] || fail "no SSM values in $CFG"
[ $((R32 - R16)) = $((3 * SSM_VALUES * 2)) ] ||
	fail "bf16 reserved $R16 bytes, fp32 $R32: expected $((3 * SSM_VALUES * 2)) fewer"
pass_or_fail
