#!/bin/sh
# Crash safety: kill -9 in the middle of a task, restart on the same state. The task is
# 'interrupted', the queued one too, every committed step and its screenshots are intact
# (sha256 as journaled), PRAGMA integrity_check passes; the stale socket is replaced. A second
# holod on a live socket is refused and leaves the first one alone.
. "$(dirname "$0")/lib.sh"
require_tools
start_xvfb
start_holod

submit '{"script": [{"tool_name": "move", "x": 10, "y": 10}, {"tool_name": "click", "x": 20, "y": 20}, {"tool_name": "wait", "duration": 30}, {"tool_name": "move", "x": 30, "y": 30}]}'
A=$TASK
submit '{"script": [{"tool_name": "move", "x": 40, "y": 40}]}'
B=$TASK

shots_written() {
	[ "$(sqlite3 "$DB" "SELECT count(*) FROM screenshots WHERE task_id = $A AND idx < 2")" = 4 ] &&
		[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $A AND idx = 2")" = 1 ]
}
wait_until 30 shots_written || fail "task never reached its wait with 4 screenshots written"

# A second holod while the first is alive: refused, first unharmed.
"$HOLOD" 2>"$T/second.log" &
SECOND=$!
wait "$SECOND"
rc=$?
[ "$rc" -ne 0 ] || fail "second holod started (exit 0)"
grep -q "another holod is running" "$T/second.log" || fail "second holod: $(cat "$T/second.log")"
# Another socket but the same state directory: refused too (one writer per journal).
"$HOLOD" --socket "$T/other.sock" 2>"$T/third.log" &
THIRD=$!
wait "$THIRD"
[ $? -ne 0 ] || fail "holod sharing the state directory started"
grep -q "another holod uses the state directory" "$T/third.log" || fail "third holod: $(cat "$T/third.log")"
api GET /v1/status
expect_code "first holod after refused second" 200
expect_json "first holod still running A" .running "$A"

kill -KILL "$HOLOD_PID"
wait "$HOLOD_PID" 2>/dev/null
HOLOD_PID=
[ -S "$SOCK" ] || fail "kill -9 should leave the socket file behind"

[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after kill -9"

start_holod
grep -q "replaced stale socket" "$HOLOD_LOG" || fail "no 'replaced stale socket' in the log"
grep -q "marked 2 task(s) left over" "$HOLOD_LOG" || fail "recovery not logged"

api GET "/v1/tasks/$A"
expect_json "A after crash" .status interrupted
expect_json "A after crash" .error "holod stopped while the task was running"
api GET "/v1/tasks/$B"
expect_json "B after crash" .status interrupted
expect_json "B after crash" .error "holod stopped before the task started"
api GET "/v1/tasks/$A/steps"
expect_json "A steps" '[.steps[].status] | join(",")' "ok,ok,interrupted"
expect_json "A step 1" '.steps[1].pixels.x' 20
check_screenshots "$A"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM screenshots WHERE task_id = $A AND idx < 2")" = 4 ] ||
	fail "screenshots of committed steps lost"
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check after restart"
[ "$(sqlite3 "$DB" 'PRAGMA foreign_key_check' | wc -l)" = 0 ] || fail "foreign_key_check"
# The restarted holod works.
submit '{"script": [{"tool_name": "move", "x": 5, "y": 5}]}'
wait_task "$TASK" succeeded
stop_holod || fail "holod exited with status $?"
pass_or_fail
