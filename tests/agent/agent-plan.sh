#!/bin/sh
# holod plans the CUDA device for its tasks (issue 29), on the emulated device: two virtual
# displays, so two tasks at once, each planned as the sessions its admission reserves (its own,
# the snapshot before decoding with --step-retries, the rolling history's, its prefix's).
#  - a large device: device_plan holds the two tasks' sessions, both fit, no warning;
#  - a device with room for one task and a half beside the rest: the model loads, the log and
#    device_plan say one of the two tasks fits, and admission's budget holds one task's sessions
#    (the second waits for it) where the device's free memory alone would admit both;
#  - a device with room for half a task: the load is refused with the plan's sentence, naming
#    the sizes and the sessions, and instruction tasks are refused with it.
# The devices are sized from the first run's plan, so the test follows the plan's arithmetic.
. "$(dirname "$0")/agent-lib.sh"
require_agent
[ -n "${HOLOD_TEST_GPU_EMULATED:-}" ] || test_skip "the plan is tested on the emulated CUDA device"
# the tiny model's prefix takes about 5000 tokens: sessions of 8192 keep the plan small
# (--history window by default: a task may still ask for rolling, which holds the most)
PLAN_ARGS="--backend cuda --precision bf16 --virtual 640x400 --displays 2 --kill-switch-ms 0
	--context-tokens 8192 --step-tokens 256 --history window"
EMU_TOTAL=$((80 << 30)) # the emulation's default device

# ---- a large device: both tasks fit
# shellcheck disable=SC2086
start_agent $PLAN_ARGS
api GET /v1/status
expect_json "plan" '.model.device_plan.tasks' 2
expect_json "plan" '.model.device_plan.tasks_fit' 2
expect_json "plan" '.model.device_plan.warning' null
expect_json "plan" '.model.device_plan.context_tokens' 8192
# --step-retries 2 (the default) and a task asking for --history rolling: the session, two
# snapshots, the prefix's (the window history holds one fewer: planned for the most)
expect_json "plan" '.model.device_plan.sessions' 8
expect_json "plan" '.model.device_plan.sessions_fit > 8' true
PER=4
SESSION=$(jq .model.device_plan.session_bytes "$BODY")
FREE=$(jq .model.device_plan.free_bytes "$BODY")
BASE=$(jq '.model.device_plan | .total_bytes - .sessions * .session_bytes' "$BODY")
[ "$SESSION" -gt 0 ] && [ "$BASE" -gt 0 ] || fail "plan: session $SESSION, base $BASE bytes"
grep -q "holds the sessions of the 2 tasks that may run at once" "$HOLOD_LOG" ||
	fail "the plan is not in the log"
stop_holod || fail "holod exit status $?"

# what the device holds before the plan (the emulation's own allocations) stays as it was
PRE=$((EMU_TOTAL - FREE))

# ---- room for one task and a half: loads, warns, admits one task at a time
rm -f "$SOCK"
# shellcheck disable=SC2086
HOLOD_GPU_EMU_MEMORY=$((PRE + BASE + PER * SESSION * 3 / 2)) start_agent $PLAN_ARGS
api GET /v1/status
expect_json "one task fits" '.model.device_plan.tasks' 2
expect_json "one task fits" '.model.device_plan.tasks_fit' 1
expect_json "one task fits" '.model.device_plan.sessions_fit' 6
W=$(jq -r .model.device_plan.warning "$BODY")
case "$W" in
*" holds the sessions of 1 of the 2 tasks that may run at once (a task holds 4 sessions of 8192 tokens, "*"the others wait for admission until one ends"*) ;;
*) fail "the plan's warning: '$W'" ;;
esac
echo "warned: $W"
grep -q "holds the sessions of 1 of the 2 tasks that may run at once" "$HOLOD_LOG" ||
	fail "the warning is not in the log"
# the free memory after the upload would admit both; the plan's budget holds one task's sessions
expect_json "one task's budget" ".model.batching.budget_bytes >= $PER * $SESSION" true
expect_json "one task's budget" ".model.batching.budget_bytes < 2 * $PER * $SESSION" true
expect_json "free memory" ".model.device_memory_free > 2 * $PER * $SESSION" true
stop_holod || fail "holod exit status $?"

# ---- room for half a task: refused at the load with the plan's sentence
rm -f "$SOCK"
HOLOD_GPU_EMU_MEMORY=$((PRE + BASE + PER * SESSION / 2)) start_holod --model "$AGENT_MODEL" \
	--backend cuda --precision bf16 --virtual 640x400 --context-tokens 8192 --step-tokens 256
wait_until 60 model_is failed || fail "half a task's device: state $(model_state)"
api GET /v1/status
ERR=$(jq -r .model.error "$BODY")
case "$ERR" in
"the model $AGENT_MODEL: "*" in bf16 needs "*" GiB of weights (bf16) + "*" GiB of vision tower + 4 sessions of 8192 tokens ("*" GiB each) + "*" of device memory; CUDA device 0 ("*") has "*" GiB free: "*) ;;
*) fail "the plan's refusal: '$ERR'" ;;
esac
echo "refused: $ERR"
grep -q "4 sessions of 8192 tokens" "$HOLOD_LOG" || fail "the refusal is not in the log"
api POST /v1/tasks '{"instruction": "Click the red block."}'
expect_error "instruction after the refused load" 503 no_model "$ERR"
stop_holod || fail "holod exit status $?"
pass_or_fail
