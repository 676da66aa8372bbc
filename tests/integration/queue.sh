#!/bin/sh
# One display, one task at a time: tasks run in FIFO order; a queued task can be cancelled
# before it starts; a running script is cancelled at a safe point (inside a long wait) with its
# held keys released; the event stream reports steps as they happen and ends with the status.
# Nothing here depends on timing: the first task waits 20 s and is cancelled by the test.
. "$(dirname "$0")/lib.sh"
require_tools
start_xvfb
start_holod
HAVE_CLIENT=0
start_client && HAVE_CLIENT=1

submit '{"script": [{"tool_name": "key_down", "key": "shift"}, {"tool_name": "wait", "duration": 20}, {"tool_name": "write", "content": "never"}]}'
A=$TASK
submit '{"script": [{"tool_name": "move", "x": 3, "y": 3}, {"tool_name": "move", "x": 4, "y": 4}]}'
B=$TASK
submit '{"script": [{"tool_name": "move", "x": 5, "y": 5}]}'
C=$TASK

# Follow A's events live, from before it ends.
curl -sS -N --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >"$T/events" &
EVENTS_PID=$!

in_wait() {
	[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $A AND idx = 1")" = 1 ]
}
wait_until 20 in_wait || fail "A never reached its wait"
api GET /v1/status
expect_json "status while busy" .running "$A"
expect_json "status queue" '.queue | join(",")' "$B,$C"
[ "$(task_status "$B")" = queued ] || fail "B should wait behind A, is $(task_status "$B")"

# Cancel C while it waits: it never starts.
api POST "/v1/tasks/$C/cancel"
expect_code "cancel queued" 200
expect_json "cancel queued" .status cancelled
expect_json "cancel queued" .started_at null
expect_json "cancel queued" .error "cancelled before it started"

# While A runs, the stream already has its first step and no end.
wait_until 20 grep -q '"event":"step"' "$T/events" || fail "no live step event"
grep -q '"event":"end"' "$T/events" && fail "stream ended while A runs"

# A reader that leaves mid-stream frees its connection thread long before the task ends.
threads() { ls "/proc/$HOLOD_PID/task" | wc -l; }
before=$(threads)
curl -sS -N --max-time 1 --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >/dev/null 2>&1
threads_back() { [ "$(threads)" -le "$before" ]; }
wait_until 10 threads_back || fail "event stream thread outlived its client ($(threads) > $before)"

# Cancel A inside its 20 s wait.
t0=$(date +%s)
api POST "/v1/tasks/$A/cancel"
expect_code "cancel running" 202
wait_task "$A" cancelled 10
[ $(($(date +%s) - t0)) -le "$(test_time_limit 5)" ] || fail "cancel took $(($(date +%s) - t0)) s"
api GET "/v1/tasks/$A/steps"
expect_json "cancelled steps" '.steps | length' 2
expect_json "cancelled wait step" '.steps[1].status' error
expect_json "cancelled wait step" '.steps[1].error' "cancelled during wait"
api GET "/v1/tasks/$A"
expect_json "cancel error" .error "cancelled during step 1 (wait)"
if [ "$HAVE_CLIENT" = 1 ]; then
	wait_until 10 grep -q '^keyrelease .*keysym=Shift_L' "$CLIENT_LOG" ||
		fail "shift still held after cancel"
	grep -q 'keysym=n ' "$CLIENT_LOG" && fail "typed after cancel"
fi

# B runs after A, C never.
wait_task "$B" succeeded
a_end=$(sqlite3 "$DB" "SELECT finished_us FROM tasks WHERE id = $A")
b_start=$(sqlite3 "$DB" "SELECT started_us FROM tasks WHERE id = $B")
[ "$b_start" -ge "$a_end" ] || fail "B started ($b_start) before A finished ($a_end)"
[ "$(task_status "$C")" = cancelled ] || fail "C ran after being cancelled"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $C")" = 0 ] || fail "C has steps"

wait "$EVENTS_PID" || fail "event stream curl failed"
[ "$(jq -r .event "$T/events" | tr '\n' ' ')" = "task step step end " ] ||
	fail "events: $(jq -r .event "$T/events" | tr '\n' ' ')"
[ "$(tail -n 1 "$T/events" | jq -r .task.status)" = cancelled ] || fail "events: final status"

stop_holod || fail "holod exited with status $?"
pass_or_fail
