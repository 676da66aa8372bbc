#!/bin/sh
# Progress events during a step (issue 32) on the tiny agent model: a follower of the task's
# event stream sees, before each step's own "step" event, the step's capture, the vision
# encoder's tiles, the prefill's tokens, the thought streamed token by token (which, put
# together, is the thought the journal keeps), the action and its result, each with the
# step's clock; a queued task's follower is told how many tasks run before it, then that it
# runs. `holoctl follow` and `run --follow` print them; --follow no longer says "queued" alone.
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
# The fixture without its steering (random weights): its thoughts are text of every kind,
# where the steered model's are empty; dry runs (the steps still run the executor).
unsteer "$T/random"
AGENT_MODEL="$T/random" start_agent

# ---- a long script holds the display; an instruction task queued behind it is followed
submit '{"script": [{"tool_name": "wait", "duration": 30}]}'
W=$TASK
wait_until 30 task_is "$W" running || fail "the script did not start"
submit '{"instruction": "Click the red block.", "max_steps": 2, "dry_run": true}'
A=$TASK
EV="$T/events.ndjson"
curl -sN --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >"$EV" &
CURL=$!
HOLOD_SOCKET="$SOCK" "$HOLOCTL" follow "$A" >"$T/follow.out" 2>"$T/follow.err" &
FOLLOW=$!
queued_told() {
	grep -q '"phase":"queued","ahead":1' "$EV" && grep -q "queued behind 1 task" "$T/follow.out"
}
wait_until 30 queued_told || fail "no 'queued behind 1' event: $(cat "$EV") / $(cat "$T/follow.out")"
api POST "/v1/tasks/$W/cancel"
wait_task "$A" failed 240
wait "$CURL" || fail "the event stream ended with an error"
wait "$FOLLOW"
[ $? = 3 ] || fail "holoctl follow: exit status for a failed task: $(cat "$T/follow.err")"

# every line is JSON; the order of the kinds of events
jq -e . "$EV" >/dev/null || fail "the stream is not NDJSON: $(head -c 2000 "$EV")"
jq -r '.event + (if .event == "progress" then ":" + .phase else "" end)
	+ (if .event == "status" then ":" + .status else "" end)' "$EV" | uniq >"$T/kinds"
FIRST=$(head -n 3 "$T/kinds" | tr '\n' ' ')
[ "$FIRST" = "task progress:queued status:running " ] ||
	fail "the stream starts with '$FIRST', not task, queued, running"
grep -qx 'progress:admitted' "$T/kinds" || fail "no admitted event"
jq -s -e 'map(select(.phase == "prefill" and .what == "prompt")) | length > 0 and
	(last | .done == .total and .step == null)' "$EV" >/dev/null ||
	fail "no prefill events of the prompt"

steps "$A"
for i in 0 1; do
	# the step's events, in the order they were sent, up to its journaled step
	jq -c --argjson i "$i" 'select((.event == "progress" and .step == $i) or
		(.event == "step" and .step.index == $i))' "$EV" >"$T/step$i"
	jq -r 'if .event == "step" then "step" else .phase end' "$T/step$i" | grep -v retry | uniq |
		tr '\n' ' ' >"$T/phases$i"
	# the acted event before the journaled step, whenever the stream wakes (feed.h's order lock)
	[ "$(cat "$T/phases$i")" = "capture vision prefill decode action acted step " ] ||
		fail "step $i: events $(cat "$T/phases$i")"
	# the clock of the step only moves forward
	jq -s -e 'map(select(.event == "progress") | .elapsed_ms) | . == sort and all(. >= 0)' \
		"$T/step$i" >/dev/null || fail "step $i: elapsed_ms goes back"
	# vision: tile i of n, up to n; prefill: up to its total, ending at it
	jq -s -e 'map(select(.phase == "vision")) | length > 0 and
		all(.tile >= 1 and .tile <= .tiles) and (last | .tile == .tiles)' "$T/step$i" \
		>/dev/null || fail "step $i: vision events"
	jq -s -e 'map(select(.phase == "prefill")) | length > 0 and
		all(.done <= .total) and (last | .done == .total and .what == "observation")' \
		"$T/step$i" >/dev/null || fail "step $i: prefill events"
	# one decode event per token, counted from 1; the thought they stream is the journaled one
	jq -s -e 'map(select(.phase == "decode") | .tokens) | . == [range(1; length + 1)]' \
		"$T/step$i" >/dev/null || fail "step $i: decode events are not one per token"
	STREAMED=$(jq -s -j 'map(select(.phase == "decode") | .thought // "") | add' "$T/step$i")
	JOURNALED=$(jq -j --argjson i "$i" '.steps[$i].agent.thought' "$T/steps.json")
	[ -n "$JOURNALED" ] && [ "$STREAMED" = "$JOURNALED" ] ||
		fail "step $i: streamed thought '$STREAMED' != journaled '$JOURNALED'"
	jq -s -e --slurpfile s "$T/steps.json" --argjson i "$i" \
		'map(select(.phase == "action"))[0] | .tool_call == $s[0].steps[$i].tool_call
		and .thought == $s[0].steps[$i].agent.thought' "$T/step$i" >/dev/null ||
		fail "step $i: the action event is not the journaled tool call"
	jq -s -e --slurpfile s "$T/steps.json" --argjson i "$i" \
		'map(select(.phase == "acted"))[0] | .ok == ($s[0].steps[$i].error == null)
		and (.result // .error) == ($s[0].steps[$i].result // $s[0].steps[$i].error)' \
		"$T/step$i" >/dev/null || fail "step $i: the acted event is not the journaled result"
done

# ---- holoctl follow printed the same story
grep -q "^task $A running$" "$T/follow.out" || fail "follow: no 'running': $(cat "$T/follow.out")"
T0=$(jq -r '.steps[0].agent.thought' "$T/steps.json" | head -n 1)
grep -qF "step 0 [+" "$T/follow.out" || fail "follow: no step clock"
grep -qF "] thought: $T0" "$T/follow.out" || fail "follow: no streamed thought '$T0'"
grep -q "] vision: tile 1 of [0-9]" "$T/follow.out" || fail "follow: no vision tile"
grep -q "] prefill (observation): [0-9]* of [0-9]* tokens" "$T/follow.out" ||
	fail "follow: no prefill"
grep -q "^task $A failed after 2 steps" "$T/follow.out" || fail "follow: no outcome"

# ---- run --follow: "queued", then "running" once it runs
HOLOD_SOCKET="$SOCK" "$HOLOCTL" run --follow --max-steps 1 --dry-run "Click the red block." \
	>"$T/run.out" 2>"$T/run.err"
[ $? = 3 ] || fail "run --follow: $(cat "$T/run.err")"
RUNNING=$(grep -n "^task [0-9]* running$" "$T/run.out" | cut -d: -f1)
CAPTURE=$(grep -n "^step 0 \[+[0-9.]*s\] capture$" "$T/run.out" | cut -d: -f1)
[ -n "$RUNNING" ] && [ -n "$CAPTURE" ] && [ "$RUNNING" -lt "$CAPTURE" ] ||
	fail "run --follow: $(cat "$T/run.out")"
pass_or_fail
