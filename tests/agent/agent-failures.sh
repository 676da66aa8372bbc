#!/bin/sh
# What goes wrong, visibly: a model that does not load (holod keeps serving scripts, status and
# 503 say why; a directory that is not a checkpoint stops holod at start), and steps that stay invalid after the bounded retries (the task fails with the
# model's raw output in the journal).
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client

# ---- a corrupt checkpoint: truncated weights
BAD="$T/bad-model"
mkdir -p "$BAD"
cp "$AGENT_MODEL"/*.json "$BAD"/
head -c 100000 "$AGENT_MODEL/model.safetensors" >"$BAD/model.safetensors"
# Through the config file's `model` key this time.
mkdir -p "$XDG_CONFIG_HOME/holod"
printf 'model = %s\n' "$BAD" >"$XDG_CONFIG_HOME/holod/holod.conf"
start_holod
rm "$XDG_CONFIG_HOME/holod/holod.conf"
wait_until 30 model_is failed || fail "a truncated model: state $(model_state)"
api GET /v1/status
expect_json "load failure" .model.name bad-model
expect_json "load failure" .model.backend cpu
ERR=$(jq -r .model.error "$BODY")
case "$ERR" in
"cannot load the model $BAD: "?*) ;;
*) fail "load error: '$ERR'" ;;
esac
grep -q "cannot load the model $BAD" "$HOLOD_LOG" || fail "the load error is not in the log"
api POST /v1/tasks '{"instruction": "Click the red block."}'
expect_error "instruction without a model" 503 no_model "$ERR"
submit '{"script": [{"tool_name": "click", "x": 20, "y": 20}]}'
wait_task "$TASK" succeeded 30
wait_until 10 grep -q '^press button=1 .* root_x=20 root_y=20 ' "$CLIENT_LOG" || fail "the script did not click"
stop_holod || fail "holod exit status $?"

# ---- the CUDA backend on a device the model does not fit (the emulated build's device is
# capped at 256 KiB; these runs name CUDA's bf16, over the test environment's
# HOLOD_PRECISION=fp32): the load fails with a sentence about device memory, never a silent CPU
# fallback, and scripts keep working.
if [ -n "${HOLOD_TEST_GPU_EMULATED:-}" ]; then
	rm -f "$SOCK"
	HOLOD_GPU_EMU_MEMORY=256K start_holod --model "$AGENT_MODEL" --backend cuda --precision bf16
	wait_until 60 model_is failed || fail "CUDA out of memory: state $(model_state)"
	api GET /v1/status
	expect_json "CUDA out of memory" .model.backend cuda
	ERR=$(jq -r .model.error "$BODY")
	case "$ERR" in
	*"device memory"*) ;;
	*) fail "CUDA out-of-memory error: '$ERR'" ;;
	esac
	api POST /v1/tasks '{"instruction": "Click the red block."}'
	expect_error "instruction without a model (CUDA)" 503 no_model "$ERR"
	submit '{"script": [{"tool_name": "click", "x": 30, "y": 30}]}'
	wait_task "$TASK" succeeded 30
	wait_until 10 grep -q '^press button=1 .* root_x=30 root_y=30 ' "$CLIENT_LOG" ||
		fail "the script did not click after the CUDA load failed"
	stop_holod || fail "holod exit status $?"

	# The model loads but a task's session cannot fit what the sessions may hold (a 64 KiB
	# --state-limit: a device too small for one task's sessions refuses the load instead,
	# agent-plan.sh): the task fails at admission before its prefill, naming what it needs and
	# what the sessions may hold, and the next script still runs.
	rm -f "$SOCK"
	start_agent --backend cuda --precision bf16 --state-limit 64
	submit '{"instruction": "Click the red block.", "max_steps": 1}'
	wait_task "$TASK" failed 60
	api GET "/v1/tasks/$TASK"
	E=$(jq -r .error "$BODY")
	case "$E" in
	"the task's model session needs "*" MiB "*"more than the 0.1 MiB the sessions may hold"*"--state-limit"*) ;;
	*) fail "a session past the state limit: '$E'" ;;
	esac
	submit '{"script": [{"tool_name": "click", "x": 40, "y": 40}]}'
	wait_task "$TASK" succeeded 30
	wait_until 10 grep -q '^press button=1 .* root_x=40 root_y=40 ' "$CLIENT_LOG" ||
		fail "the script did not click after the CUDA task was refused"
	stop_holod || fail "holod exit status $?"

	# A device fault in the middle of a task (injected: the first kernel after the trigger file
	# appears meets an illegal address, and the context stays broken as CUDA's does): the task
	# fails naming the CUDA error, holod recreates the backend once the task's session is gone,
	# and the recreated backend computes again.
	rm -f "$SOCK"
	HOLOD_GPU_EMU_FAULT="file:$T/gpu-fault" start_agent --backend cuda --precision bf16
	api GET /v1/status
	expect_json "CUDA weight load" '.model.load | .done and .bytes == .total and .total > 0
		and .bytes_per_second > 0' true
	: >"$T/gpu-fault"
	submit '{"instruction": "Click the red block.", "max_steps": 1}'
	wait_task "$TASK" failed 60
	rm -f "$T/gpu-fault"
	api GET "/v1/tasks/$TASK"
	E=$(jq -r .error "$BODY")
	case "$E" in
	"cannot prefill the prompt ("*" tokens): the CUDA device 0 ("*") failed: cudaErrorIllegalAddress (an illegal memory access was encountered)") ;;
	*) fail "a device fault: '$E'" ;;
	esac
	wait_until 60 sh -c "curl -sS --unix-socket '$SOCK' http://holod/v1/status |
		jq -e '.model.state == \"ready\" and .model.device_resets == 1' >/dev/null" ||
		fail "no backend recreated after the device fault: $(curl -sS --unix-socket "$SOCK" http://holod/v1/status)"
	api GET /v1/status
	expect_json "after the device fault" .model.sessions 0
	expect_json "after the device fault" .model.device_state_bytes 0
	expect_json "after the device fault" '.model.device_weight_bytes > 0' true
	grep -q "its device failed: cudaErrorIllegalAddress" "$HOLOD_LOG" ||
		fail "the device fault is not in the log"
	grep -q "backend recreated in" "$HOLOD_LOG" || fail "the recreation is not in the log"
	# Past the point where the fault stopped the first task: this one computes until its time
	# budget ends it, with no device error.
	submit '{"instruction": "Click the red block.", "max_steps": 1, "max_seconds": 4}'
	wait_task "$TASK" failed 60
	api GET "/v1/tasks/$TASK"
	case "$(jq -r .error "$BODY")" in
	"max_seconds budget (4 s) exhausted "*) ;;
	*) fail "a task after the recreation: '$(jq -r .error "$BODY")'" ;;
	esac
	submit '{"script": [{"tool_name": "click", "x": 50, "y": 50}]}'
	wait_task "$TASK" succeeded 30
	wait_until 10 grep -q '^press button=1 .* root_x=50 root_y=50 ' "$CLIENT_LOG" ||
		fail "the script did not click after the device fault"
	stop_holod || fail "holod exit status $?"
fi

# ---- a directory that is not a model: refused at start, before holod serves (issue 33)
rm -f "$SOCK"
timeout 30 "$HOLOD" --model "$T" 2>"$T/notmodel.err"
rc=$?
[ "$rc" = 1 ] || fail "not a model: exit $rc, expected 1"
grep -qF -- "--model: $T is not a model checkpoint" "$T/notmodel.err" ||
	fail "not a model: $(cat "$T/notmodel.err")"

# ---- invalid steps: retried, then the task fails with the raw output journaled
P0=$(presses)
rm -f "$SOCK"
start_agent --debug-unconstrained --step-tokens 32 --step-retries 2
submit '{"instruction": "Click the red block.", "max_steps": 3}'
I=$TASK
wait_task "$I" failed 120
api GET "/v1/tasks/$I"
E=$(jq -r .error "$BODY")
# the raw output is the last attempt's, and a retry samples (temperature 0.7, the task's seed):
# it mostly starts with the steered '"', not always (CI saw 'c"cc...'), and unconstrained text
# may end early as JSON the parser refuses (CI saw '"c un' and a stray byte 0x97) instead of
# running into the token budget: either way the step is invalid after 3 attempts
case "$E" in
"step 0: no complete step within 32 tokens after 3 attempt(s); raw output: "?*) ;;
"step 0: invalid step: "*" after 3 attempt(s); raw output: "?*) ;;
*) fail "invalid step error: '$E'" ;;
esac
# at most 32 tokens sampled, 31 fed back: the generation loop ends at --step-tokens without
# feeding the last one (tokens_decoded counts what the session holds).
[ "$(sqlite3 "$DB" "SELECT tool_name, status, attempts, length(raw_output) > 0,
	tokens_decoded BETWEEN 1 AND 31 FROM steps WHERE task_id = $I")" = "invalid|error|3|1|1" ] ||
	fail "invalid step row: $(sqlite3 "$DB" "SELECT * FROM steps WHERE task_id = $I")"
[ "$(grep -c 'retrying (attempt' "$HOLOD_LOG")" = 2 ] || fail "expected 2 retries in the log"
[ "$(presses)" = "$P0" ] || fail "an invalid step clicked"
stop_holod || fail "holod exit status $?"

# ---- the grammar on, but a step budget too small for any step: same bounded retries
rm -f "$SOCK"
start_agent --step-tokens 16 --step-retries 1
submit '{"instruction": "Click the red block.", "max_steps": 3}'
wait_task "$TASK" failed 120
api GET "/v1/tasks/$TASK"
case "$(jq -r .error "$BODY")" in
"step 0: no complete step within 16 tokens after 2 attempt(s); raw output: {\"note\":"*) ;;
*) fail "constrained step budget error: '$(jq -r .error "$BODY")'" ;;
esac
stop_holod || fail "holod exit status $?"
pass_or_fail
