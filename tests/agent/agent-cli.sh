#!/bin/sh
# `holoctl run "..." --follow` with a model: each step is printed as it happens (action, where
# it clicked in pixels and model coordinates, the model's thought), and holoctl exits with the
# task's outcome.
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
start_agent
export HOLOD_SOCKET="$SOCK"

"$HOLOCTL" status >"$T/status" 2>&1 || fail "holoctl status: $(cat "$T/status")"
# The summary names the model and its state; --all has every counter.
grep -Eq '^model +tiny-agent ready on (cpu|cuda), ' "$T/status" || fail "holoctl status: $(cat "$T/status")"
"$HOLOCTL" status --all >"$T/status" 2>&1 || fail "holoctl status --all: $(cat "$T/status")"
grep -Eq '^model\.state +ready$' "$T/status" || fail "holoctl status --all: $(cat "$T/status")"
grep -Eq '^model\.name +tiny-agent$' "$T/status" || fail "holoctl status --all: $(cat "$T/status")"

"$HOLOCTL" run --follow --max-steps 2 Click the red block. >"$T/out" 2>"$T/err"
RC=$?
[ "$RC" = 3 ] || fail "holoctl run --follow exited $RC, expected 3 (failed): $(cat "$T/err")"
cat "$T/out"
[ "$(grep -c '^step [01]  click @ 355,222 (model 555,555)  ok  .*: clicked left x1 at (355,222)$' "$T/out")" = 2 ] ||
	fail "step lines: $(cat "$T/out")"
[ "$(grep -c '^        thought: ' "$T/out")" = 2 ] || fail "thought lines: $(cat "$T/out")"
grep -q 'max_steps budget (2) reached without an answer' "$T/out" "$T/err" ||
	fail "no outcome: $(cat "$T/out" "$T/err")"

# holoctl show: the model's phases next to capture/inject/settle, what produced the task, each
# step's thought and note wrapped to $COLUMNS, and --steps for a range. --wide: the table's
# results whole, though 60 columns would cut them.
ID=$(sed -n 's/^task \([0-9]*\) \(queued\|running\)$/\1/p' "$T/out" | head -n 1)
COLUMNS=60 "$HOLOCTL" show --wide "$ID" >"$T/show" 2>"$T/err" || fail "holoctl show: $(cat "$T/err")"
cat "$T/show"
grep -Eq '^#  TOOL .* CAPTURE +PREPROC +VISION +PREFILL +DECODE +INJECT +SETTLE +TOTAL  RESULT$' "$T/show" ||
	fail "show: no model phase columns"
[ "$(grep -Ec '^[01]  click .* ok ( +[0-9.]+ (us|ms|s)){8}  clicked left' "$T/show")" = 2 ] ||
	fail "show: not two rows with eight timings"
grep -Eq '^model  +tiny-agent \(sha256 [0-9a-f]{12}\) on cpu, fp32$' "$T/show" || fail "show: no model line"
grep -Eq "^screen  +${SCREEN_W}x${SCREEN_H}\$" "$T/show" || fail "show: no screen line"
[ "$(grep -c '^step [01]$' "$T/show")" = 2 ] || fail "show: not two step texts"
[ "$(grep -c '^  thought: ' "$T/show")" = 2 ] || fail "show: not two thoughts"
[ "$(grep -c '^  note: ' "$T/show")" = 2 ] || fail "show: not two notes"
awk '/^step 0$/ { on = 1 } on && length($0) > 60 { bad = 1 } END { exit bad }' "$T/show" ||
	fail "show: a thought line is wider than COLUMNS=60"
"$HOLOCTL" show --steps 1-1 "$ID" >"$T/show" 2>"$T/err" || fail "holoctl show --steps: $(cat "$T/err")"
[ "$(grep -Ec '^[0-9]+  click ' "$T/show")" = 1 ] && grep -Eq '^1  click ' "$T/show" &&
	grep -q '^step 1$' "$T/show" && ! grep -q '^step 0$' "$T/show" || fail "show --steps 1-1: $(cat "$T/show")"
"$HOLOCTL" show --steps 5- "$ID" >"$T/show" 2>"$T/err" || fail "holoctl show --steps 5-"
grep -q '^no steps in the range 5-10000 (the task has 2)$' "$T/show" || fail "show --steps 5-: $(cat "$T/show")"
"$HOLOCTL" show --steps 3-1 "$ID" >"$T/show" 2>"$T/err"
[ $? = 2 ] && grep -q "holoctl show: --steps '3-1' is not a range" "$T/err" || fail "show --steps 3-1: $(cat "$T/err")"

# holoctl export of an instruction task: the instruction, the model's raw output and the
# model-space point it chose, with the pixels it became.
"$HOLOCTL" export -o "$T/exp" "$ID" >"$T/exp.out" 2>"$T/err" || fail "holoctl export: $(cat "$T/err")"
[ "$(wc -l <"$T/exp/steps.jsonl")" = 2 ] || fail "export: not two lines"
jq -e -s 'all(.[]; .instruction == "Click the red block." and (.raw_output | fromjson | .tool_call.x) == .model.x
	and .model == {"x": 555, "y": 555} and .pixels == {"x": 355, "y": 222}
	and .provenance.model.name == "tiny-agent" and (.screenshot | test("^images/[0-9]+-[01]-before.png$")))' \
	"$T/exp/steps.jsonl" >/dev/null || fail "export: $(cat "$T/exp/steps.jsonl")"

# The history options reach the task.
"$HOLOCTL" run --follow --max-steps 2 --history window --window 1 --max-tiles 1 \
	Click the red block. >"$T/out" 2>"$T/err"
[ $? = 3 ] || fail "holoctl run --history window: $(cat "$T/out" "$T/err")"
ID=$(sed -n 's/^task \([0-9]*\) \(queued\|running\)$/\1/p' "$T/out" | head -n 1)
api GET "/v1/tasks/$ID"
expect_json "cli history" .spec.history window
expect_json "cli history" .spec.window 1
expect_json "cli history" .spec.max_tiles 1
steps "$ID"
check_steps "cli window steps" 'all(.steps[]; .agent.prompt == "window" and .agent.tiles == 1)'

# A model that answers: the task succeeds with the answer's content as its result, and holoctl
# exits 0.
stop_holod || fail "holod exit status $?"
rm -f "$SOCK"
P0=$(presses)
steer_to_answer "$T/answering"
start_holod --model "$T/answering"
wait_until 60 model_is ready || fail "the answering model did not load: $(model_state)"
"$HOLOCTL" run --follow --max-steps 5 What is on the screen? >"$T/out" 2>"$T/err"
RC=$?
cat "$T/out"
[ "$RC" = 0 ] || fail "holoctl run --follow of an answer exited $RC: $(cat "$T/out" "$T/err")"
grep -q '^step 0  answer ' "$T/out" || fail "no answer step: $(cat "$T/out")"
ID=$(sed -n 's/^task \([0-9]*\) \(queued\|running\)$/\1/p' "$T/out" | head -n 1)
api GET "/v1/tasks/$ID"
expect_json "answer" .status succeeded
expect_json "answer" .steps 1
expect_json "answer" .error null
RESULT=$(jq -r .result "$BODY")
steps "$ID"
check_steps "answer step" ".steps[0].tool_call.tool_name == \"answer\" and .steps[0].result == \"answered\"
	and .steps[0].tool_call.content == $(jq .result "$BODY")"
[ "$(presses)" = "$P0" ] || fail "an answer clicked"
echo "answer: '$RESULT'"

# An instruction to a holod without a model: the 503 is explained.
stop_holod || fail "holod exit status $?"
rm -f "$SOCK"
start_holod
"$HOLOCTL" run Click the red block. >"$T/out" 2>"$T/err" && fail "holoctl run without a model succeeded"
grep -q 'no model loaded' "$T/err" || fail "no-model message: $(cat "$T/err")"
stop_holod || fail "holod exit status $?"
pass_or_fail
