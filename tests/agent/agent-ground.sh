#!/bin/sh
# Grounded clicks in scripts (issue 15): with the tiny VLM loaded, "target" instead of x/y asks
# the model for the point in one constrained step (a fresh session, the point grammar): the
# random-weight model still yields a point inside the screen, which is journaled (target,
# predicted point, time) and where the recording client sees the click.
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
start_agent

submit '{"script": [
  {"tool_name": "click", "target": "the Save button"},
  {"tool_name": "drag", "target": "the file icon", "target2": "the trash can"},
  {"tool_name": "wait_for", "screen_stable": {"ms": 100}, "timeout": 10}]}'
wait_task "$TASK" succeeded 120
steps "$TASK"
check_steps "grounded steps" '.steps | length == 3'
check_steps "model space" '.steps[0:2] | all(.coords == "model")'
check_steps "in range" '.steps[0:2] | all(.model.x >= 0 and .model.x <= 1000 and .model.y >= 0
	and .model.y <= 1000)'
check_steps "inside the screen" "[.steps[0].pixels, .steps[1].pixels] | all(.x >= 0 and .x < $SCREEN_W
	and .y >= 0 and .y < $SCREEN_H)"
check_steps "mapped as a model click" ".steps[0] | .pixels.x == ((.model.x / 1000 * $SCREEN_W) | round)
	and .pixels.y == ((.model.y / 1000 * $SCREEN_H) | round)"
check_steps "journaled target" '.steps[0].tool_call.target == "the Save button"
	and .steps[1].tool_call.target2 == "the trash can"'
check_steps "result" '.steps[0].result | test("^clicked left x1 at \\([0-9]+,[0-9]+\\); \"the Save button\" located at \\([0-9]+,[0-9]+\\) of 1000 in [0-9]+ ms$")'
check_steps "both ends" '.steps[1].result | test("\"the file icon\" located at .*; \"the trash can\" located at ")'
check_steps "no agent" '.steps | all(.agent == null)'
PX=$(jq -r '.steps[0].pixels.x' "$T/steps.json")
PY=$(jq -r '.steps[0].pixels.y' "$T/steps.json")
grep -q "^press button=1 x=$PX y=$PY " "$CLIENT_LOG" ||
	fail "the client saw no click at ($PX,$PY): $(grep '^press' "$CLIENT_LOG" | head -3)"
# The grounding session is gone with its step.
api GET /v1/status
expect_json "sessions" .model.sessions 0
expect_json "state bytes" .model.state_bytes 0
expect_json "admission released" .model.batching.reserved_bytes 0
stop_holod || fail "holod exit status $?"

# The grounding session lives across the batches' forwards beside the tasks' sessions, so it is
# admitted as they are: one that can never fit the state budget is refused, saying why. A
# grounding is asked in holod's --policy-format: holo-nano's texts here (docs/policy.md).
start_agent --state-limit 64 --policy-format holo-nano
submit '{"script": [{"tool_name": "click", "target": "the Save button"}]}'
wait_task "$TASK" failed 60
api GET "/v1/tasks/$TASK"
case "$(jq -r .error "$BODY")" in
*'cannot locate "the Save button": the task'"'"'s model session needs '*' MiB'*'more than the 0.1 MiB the sessions may hold'*) ;;
*) fail "grounding beyond the budget: $(jq -r .error "$BODY")" ;;
esac
api GET /v1/status
expect_json "nothing reserved after the refusal" .model.batching.reserved_bytes 0
grep -q 'locating "the Save button" in the holo-nano format' "$HOLOD_LOG" ||
	fail "the grounding was not asked in holod's format (holo-nano)"

pass_or_fail
