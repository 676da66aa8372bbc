#!/bin/sh
# holoctl pause with --remote (issue 32's gap): a step whose request the model server is still
# answering (a slow answer: a click, 60 s late) is dropped when the task pauses, whatever the
# history (persistent here, whose local decode runs to its end): the late click is never read,
# acted nor journaled, the task holds at once (status "paused", an "interrupted" progress event);
# resumed, it asks for step 0 again on a new screenshot with the same request, and finishes on
# the server's next answer.
. "$(dirname "$0")/remote-lib.sh"

CLICK='{"note":null,"thought":"Click it","tool_call":{"tool_name":"click","element":"the block","x":250,"y":250}}'
ANSWER='{"note":null,"thought":"All done","tool_call":{"tool_name":"answer","content":"done"}}'
printf 'slow 60000 %s\nok %s\n' "$CLICK" "$ANSWER" >"$SCRIPT"
fake_start

start_xvfb 640x400x24
start_client || exit 1
start_holod --remote "$FAKE_URL" --history persistent --remote-timeout 120

submit '{"instruction": "Click the block, then answer.", "max_steps": 5}'
A=$TASK
EV="$T/events.ndjson"
curl -sN --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >"$EV" &
CURL=$!
# the stream's first line (the task as it is) says it follows the task: a pause sent before
# that (a loaded machine, curl slow to start) reaches the stream only as the task's status
wait_until 30 test -s "$EV" || fail "the event stream never began"
# the request is at the server, which holds its answer for 60 s
wait_until 30 test -s "$REC/req-0.json" || fail "step 0 was never asked"
api POST "/v1/tasks/$A/pause"
expect_code "pause during the request" 202
paused() { [ "$(task_status "$A")" = paused ]; }
# at once, not when the slow answer comes (60 s)
wait_until 30 paused || fail "task $A did not pause while its request was under way: $(task_status "$A")"
api GET "/v1/tasks/$A"
expect_json "paused" .paused true
expect_json "paused: nothing decided" .steps 0
wait_until 10 grep -q '"phase":"interrupted"' "$EV" || fail "no interrupted event: $(cat "$EV")"
jq -s -e 'map(select(.step == 0 and .phase == "interrupted" and .why == "paused")) | length == 1' \
	"$EV" >/dev/null || fail "the interrupted event is not step 0's: $(cat "$EV")"
[ -e "$REC/req-1.json" ] && fail "asked again while paused"
"$HOLOCTL" resume "$A" >"$T/resume.out" 2>&1 || fail "holoctl resume: $(cat "$T/resume.out")"
wait_task "$A" succeeded 60
wait "$CURL"
api GET "/v1/tasks/$A"
expect_json "resumed" .result done
expect_json "resumed" .steps 1
# the late click was neither acted nor journaled: step 0 is the answer
[ "$(sqlite3 "$DB" "SELECT idx || ' ' || json_extract(tool_call, '\$.tool_name') FROM steps WHERE task_id = $A")" = "0 answer" ] ||
	fail "journal: $(sqlite3 "$DB" "SELECT idx, tool_call FROM steps WHERE task_id = $A")"
grep -q '"tool_name":"click"' "$BODY" && fail "the dropped click shows: $(head -c 2000 "$BODY")"
# step 0 asked again: the same conversation (the screen did not change), no third request
[ -e "$REC/req-1.json" ] && [ ! -e "$REC/req-2.json" ] || fail "requests: $(ls "$REC")"
jq -S -c .messages "$REC/req-0.json" >"$T/m0"
jq -S -c .messages "$REC/req-1.json" >"$T/m1"
cmp -s "$T/m0" "$T/m1" || fail "step 0 asked again with other messages"
jq -r 'if .event == "status" then .status elif .phase == "capture" then "capture \(.step)"
	else empty end' "$EV" | tr '\n' ' ' | sed 's/^running //; s/^capture 0 //' >"$T/order"
# (step 0's first capture and "running" only when the stream began before them)
WANT="paused running capture 0 "
[ "$(cat "$T/order")" = "$WANT" ] || fail "events: $(cat "$T/order"), not $WANT"
grep -q "task $A step 0: paused during its decode" "$HOLOD_LOG" || fail "no log line for the pause"
pass_or_fail
