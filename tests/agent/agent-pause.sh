#!/bin/sh
# holoctl pause / resume (issue 32): a task paused while its step 1 is decoded (a long decode: a
# think block of 4000 tokens) stops that decode within a few tokens, between two of them: the
# step is not acted nor journaled, and the task holds (status "paused"); resumed, it looks at
# the screen again and decides step 1 anew, and every step prefills exactly the tokens of a
# task never paused (the same prompt ids, hashed, the same counts and session lengths), the
# turn that step 1 evicted from the window (window 1) included. Bad input: pausing a finished
# or a queued task, resuming a running one or an unknown one: clear errors.
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
start_agent --step-tokens 8400
export HOLOD_SOCKET="$SOCK"
# greedy: the steering's '"' fills the think block to its budget (agent-thinking.sh)
SPEC='{"instruction": "Click the red block.", "max_steps": 2, "dry_run": true, "window": 1,
	"thinking": true, "thinking_tokens": 4000, "temperature": 0}'
THINK=4000

# ---- paused during step 1's decode, resumed
submit "$SPEC"
A=$TASK
EV="$T/events.ndjson"
curl -sN --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >"$EV" &
CURL=$!
"$HOLOCTL" follow "$A" >"$T/follow.out" 2>&1 &
FOLLOW=$!
wait_until 120 grep -q '"step":1,"phase":"decode"' "$EV" || fail "step 1 never decoded"
api POST "/v1/tasks/$A/pause"
expect_code "pause while decoding" 202
paused() { [ "$(task_status "$A")" = paused ]; }
wait_until 60 paused || fail "task $A never paused: $(task_status "$A")"
api GET "/v1/tasks/$A"
expect_json "paused" .paused true
# step 1's decode stopped: it was not acted, and only step 0 is journaled
expect_json "paused" .steps 1
wait_until 10 grep -q '"event":"status","task_id":'"$A"',"status":"paused"' "$EV" ||
	fail "no paused event"
jq -s -e 'map(select(.step == 1 and .phase == "interrupted")) | length == 1' "$EV" >/dev/null ||
	fail "no interrupted event for step 1"
# promptly: far fewer tokens than the think block's budget were decoded before it stopped
N=$(jq -s 'map(select(.step == 1 and .phase == "decode")) | length' "$EV")
echo "step 1 decoded $N tokens before the pause stopped it"
[ "$N" -ge 1 ] && [ "$N" -lt "$THINK" ] || fail "step 1 decoded $N tokens before it paused"
# holding: asked again, the answer is at once
api POST "/v1/tasks/$A/pause"
expect_code "pause again" 200
expect_json "pause again" .status paused
"$HOLOCTL" resume "$A" >"$T/resume.out" 2>&1 || fail "holoctl resume: $(cat "$T/resume.out")"
grep -q "^task $A resumed" "$T/resume.out" || fail "holoctl resume: $(cat "$T/resume.out")"
wait_task "$A" failed 240
wait "$CURL"
wait "$FOLLOW"
grep -q "^step 1 \[+[0-9.]*s\] decode interrupted (paused): the step is decided again once resumed$" \
	"$T/follow.out" || fail "holoctl follow: $(grep -v thought "$T/follow.out" | head -c 3000)"
api GET "/v1/tasks/$A"
expect_json "resumed" .error "max_steps budget (2) reached without an answer"
expect_json "resumed" .steps 2
# the events: step 1 captured, paused, running again, step 1 captured again (a "running" first
# when the stream began before the task ran)
jq -r 'if .event == "status" then .status elif .phase == "capture" then "capture \(.step)"
	else empty end' "$EV" | tr '\n' ' ' | sed 's/^running //' >"$T/order"
WANT="capture 0 capture 1 paused running capture 1 "
[ "$(cat "$T/order")" = "$WANT" ] || fail "events: $(cat "$T/order"), not $WANT"

# ---- the same task never paused: every step prefills the same ids, the sessions grow alike
submit "$SPEC"
B=$TASK
wait_task "$B" failed 240
ROWS_A=$(sqlite3 "$DB" "SELECT idx, prompt_sha256, prompt, tokens_appended, tokens_decoded,
	session_tokens FROM steps WHERE task_id = $A ORDER BY idx")
ROWS_B=$(sqlite3 "$DB" "SELECT idx, prompt_sha256, prompt, tokens_appended, tokens_decoded,
	session_tokens FROM steps WHERE task_id = $B ORDER BY idx")
[ -n "$ROWS_A" ] && [ "$ROWS_A" = "$ROWS_B" ] ||
	fail "paused and resumed differs from never paused: '$ROWS_A' vs '$ROWS_B'"
echo "$ROWS_A"

# ---- a persistent session: its decode cannot stop (no state from before the step's prompt is
# kept), so it runs to its end, but the step decided is not acted: journaled "not executed",
# and the model reads that as the step's result once resumed (the next step's user turn)
submit '{"instruction": "Click the red block.", "max_steps": 3, "dry_run": true,
	"history": "persistent", "thinking": true, "thinking_tokens": 4000, "temperature": 0}'
P=$TASK
EV="$T/events-p.ndjson"
curl -sN --unix-socket "$SOCK" "http://holod/v1/tasks/$P/events" >"$EV" &
CURL=$!
wait_until 120 grep -q '"step":1,"phase":"decode"' "$EV" || fail "persistent: step 1 never decoded"
api POST "/v1/tasks/$P/pause"
expect_code "persistent: pause while decoding" 202
paused_p() { [ "$(task_status "$P")" = paused ]; }
wait_until 120 paused_p || fail "task $P never paused: $(task_status "$P")"
api GET "/v1/tasks/$P"
expect_json "persistent: step 1 journaled" .steps 2
[ "$(sqlite3 "$DB" "SELECT status || ': ' || error FROM steps WHERE task_id = $P AND idx = 1")" = \
	"error: not executed: the task was paused while this step was decided" ] ||
	fail "persistent: step 1: $(sqlite3 "$DB" "SELECT status, error FROM steps WHERE task_id = $P AND idx = 1")"
jq -s -e 'map(select(.step == 1 and .phase == "interrupted")) | length == 0' "$EV" >/dev/null ||
	fail "persistent: the decode was interrupted"
jq -s -e 'map(select(.step == 1 and .phase == "acted" and .ok == false)) | length == 1' "$EV" >/dev/null ||
	fail "persistent: no acted event with ok false for step 1"
"$HOLOCTL" resume "$P" >"$T/resume-p.out" 2>&1 || fail "holoctl resume: $(cat "$T/resume-p.out")"
wait_task "$P" failed 240
wait "$CURL"
sqlite3 "$DB" "SELECT user_turn FROM steps WHERE task_id = $P AND idx = 2" | \
	grep -q "not executed: the task was paused while this step was decided" ||
	fail "persistent: step 2's turn does not say step 1 was not run: $(sqlite3 "$DB" "SELECT user_turn FROM steps WHERE task_id = $P AND idx = 2")"

# ---- bad input
api POST "/v1/tasks/$B/pause"
expect_error "pause a finished task" 409 conflict \
	"task $B already finished (failed): there is nothing to pause"
api GET "/v1/tasks/$B"
expect_json "never paused" .paused false
api POST "/v1/tasks/$B/resume"
expect_error "resume a finished task" 409 conflict \
	"task $B already finished (failed): there is nothing to resume"
api POST /v1/tasks/424242/pause
expect_code "pause unknown" 404
"$HOLOCTL" pause "$B" >"$T/pause.out" 2>&1
[ $? = 1 ] && grep -q "already finished (failed): there is nothing to pause" "$T/pause.out" ||
	fail "holoctl pause of a finished task: $(cat "$T/pause.out")"
# a running task that is not paused, and a queued one
submit '{"script": [{"tool_name": "wait", "duration": 30}]}'
W=$TASK
wait_until 30 task_is "$W" running || fail "the script did not start"
api POST "/v1/tasks/$W/resume"
expect_error "resume a running task" 409 conflict \
	"task $W is not paused (it runs): there is nothing to resume"
submit "$SPEC"
Q=$TASK
api POST "/v1/tasks/$Q/pause"
expect_error "pause a queued task" 409 conflict \
	"task $Q is queued, not running: only a running task pauses (pause it once it runs, or cancel it)"
api POST /v1/tasks/cancel
pass_or_fail
