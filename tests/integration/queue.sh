#!/bin/sh
# One display, one task at a time: two tasks run in FIFO order; a queued task can be cancelled
# before it starts; a running script is cancelled at a safe point (inside a long wait) with its
# held keys released; the event stream reports steps as they happen and ends with the status.
. "$(dirname "$0")/lib.sh"
require_tools
start_xvfb
start_holod
HAVE_CLIENT=0
start_client && HAVE_CLIENT=1

# A first task that holds the display for a while, a second queued behind it.
submit '{"script": [{"tool_name": "move", "x": 1, "y": 1}, {"tool_name": "wait", "duration": 1.5}, {"tool_name": "move", "x": 2, "y": 2}]}'
A=$TASK
submit '{"script": [{"tool_name": "move", "x": 3, "y": 3}]}'
B=$TASK
submit '{"script": [{"tool_name": "move", "x": 4, "y": 4}]}'
C=$TASK

# Follow A's events live, from before it ends.
curl -sS -N --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >"$T/events" &
EVENTS_PID=$!

wait_until 20 task_is "$A" running || fail "A never ran"
api GET /v1/status
expect_json "status while busy" .running "$A"
[ "$(task_status "$B")" = queued ] || fail "B should wait behind A, is $(task_status "$B")"
api GET /v1/status
expect_json "status queue" '.queue | join(",")' "$B,$C"

# Cancel C while it waits: it never starts.
api POST "/v1/tasks/$C/cancel"
expect_code "cancel queued" 200
expect_json "cancel queued" .status cancelled
expect_json "cancel queued" .started_at null

# While A runs, the stream already has its first step and no end yet.
wait_until 20 grep -q '"event":"step"' "$T/events" || fail "no live step event"
grep -q '"event":"end"' "$T/events" && task_is "$A" running && fail "stream ended while A runs"

wait_task "$A" succeeded
wait_task "$B" succeeded
a_end=$(sqlite3 "$DB" "SELECT finished_us FROM tasks WHERE id = $A")
b_start=$(sqlite3 "$DB" "SELECT started_us FROM tasks WHERE id = $B")
[ "$b_start" -ge "$a_end" ] || fail "B started ($b_start) before A finished ($a_end)"
[ "$(task_status "$C")" = cancelled ] || fail "C ran after being cancelled"

wait "$EVENTS_PID" || fail "event stream curl failed"
[ "$(jq -r .event "$T/events" | tr '\n' ' ')" = "task step step step end " ] ||
	fail "events: $(jq -r .event "$T/events" | tr '\n' ' ')"
[ "$(tail -n 1 "$T/events" | jq -r .task.status)" = succeeded ] || fail "events: final status"

# Cancel during a long script: holding shift, then a 20 s wait. Cancel lands inside the wait.
submit '{"script": [{"tool_name": "key_down", "key": "shift"}, {"tool_name": "wait", "duration": 20}, {"tool_name": "write", "content": "never"}]}'
D=$TASK
wait_until 20 sh -c "[ \"\$(sqlite3 '$DB' \"SELECT count(*) FROM steps WHERE task_id = $D AND idx = 1\")\" = 1 ]" ||
	fail "D never reached its wait"
t0=$(date +%s)
api POST "/v1/tasks/$D/cancel"
expect_code "cancel running" 202
wait_task "$D" cancelled 10
t1=$(date +%s)
[ $((t1 - t0)) -le 5 ] || fail "cancel took $((t1 - t0)) s"
api GET "/v1/tasks/$D/steps"
expect_json "cancelled steps" '.steps | length' 2
expect_json "cancelled wait step" '.steps[1].status' error
expect_json "cancelled wait step" '.steps[1].error' "cancelled during wait"
api GET "/v1/tasks/$D"
expect_json "cancel error" .error "cancelled during step 1 (wait)"
if [ "$HAVE_CLIENT" = 1 ]; then
	wait_until 10 grep -q '^keyrelease .*keysym=Shift_L' "$CLIENT_LOG" ||
		fail "shift still held after cancel"
	grep -q 'text=6e65766572\|keysym=n ' "$CLIENT_LOG" && fail "typed after cancel"
fi

stop_holod || fail "holod exited with status $?"
pass_or_fail
