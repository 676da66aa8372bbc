#!/bin/sh
# The X server going away in the middle of a task (the X session ended) fails that task with a
# clear error; holod survives, and once a display is back the next task reconnects and runs.
. "$(dirname "$0")/lib.sh"
require_tools
# Our display goes away for a while: other tests' `Xvfb -displayfd` take the lowest free numbers,
# so while ours is down one of them could take its number and answer holod in its place. Use a
# number far above theirs instead (the first free one from 500 + pid % 400).
n=$((500 + $$ % 400))
while [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ]; do n=$((n + 1)); done
DISPLAY=":$n"
export DISPLAY
Xvfb "$DISPLAY" -screen 0 800x600x24 -nolisten tcp -noreset 2>"$T/xvfb.log" &
XVFB_PID=$!
wait_until 20 test -S "/tmp/.X11-unix/X$n" || { cat "$T/xvfb.log" >&2; fail "Xvfb $DISPLAY did not start"; exit 1; }
start_holod

submit '{"script": [{"tool_name": "move", "x": 1, "y": 1}, {"tool_name": "wait", "duration": 20}, {"tool_name": "move", "x": 2, "y": 2}]}'
A=$TASK
in_wait() {
	[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $A AND idx = 1")" = 1 ]
}
wait_until 20 in_wait || fail "task never reached its wait"
kill "$XVFB_PID"
wait "$XVFB_PID" 2>/dev/null
XVFB_PID=

api GET /v1/status
expect_code "holod alive without its X server" 200
# The task notices only at its next X call; cancel its 20 s wait rather than sit it out.
api POST "/v1/tasks/$A/cancel"
wait_task "$A" cancelled

# No X server: a clear task error, not a crash.
submit '{"script": [{"tool_name": "move", "x": 1, "y": 1}]}'
wait_task "$TASK" failed
api GET "/v1/tasks/$TASK"
case "$(jq -r .error "$BODY")" in
*"X server"* | *"cannot open display"*) ;;
*) fail "error without a display: $(jq -r .error "$BODY")" ;;
esac

# The display comes back under the same name: the next task reconnects.
Xvfb "$DISPLAY" -screen 0 800x600x24 -nolisten tcp -noreset 2>"$T/xvfb2.log" &
XVFB_PID=$!
submit_until_ok() {
	api POST /v1/actions '{"action": {"tool_name": "move", "x": 3, "y": 3}}'
	[ "$(jq -r .task.status "$BODY")" = succeeded ]
}
wait_until 20 submit_until_ok || fail "no task succeeded after the X server came back"
[ "$(grep -c 'kill switch armed' "$HOLOD_LOG")" -ge 2 ] || fail "kill switch not re-armed on the new connection"

# The server goes away while holod is idle and a new one comes up under the same name: the next
# task notices before its first action (holod re-reads the display before every task), so it
# runs on the new server at the first try, with the kill switch armed there too.
kill "$XVFB_PID"
wait "$XVFB_PID" 2>/dev/null
Xvfb "$DISPLAY" -screen 0 640x480x24 -nolisten tcp -noreset 2>"$T/xvfb3.log" &
XVFB_PID=$!
wait_until 20 test -S "/tmp/.X11-unix/X$n" || fail "Xvfb $DISPLAY did not come back"
api POST /v1/actions '{"action": {"tool_name": "move", "x": 639, "y": 479}}'
[ "$(jq -r .task.status "$BODY")" = succeeded ] ||
	fail "the first task after an idle server change: $(cat "$BODY")"
# The new screen is smaller: its size was read again, so a point of the old one is refused.
api POST /v1/actions '{"action": {"tool_name": "move", "x": 700, "y": 500}}'
[ "$(jq -r .task.status "$BODY")" = failed ] || fail "a point outside the new screen: $(cat "$BODY")"
[ "$(grep -c 'kill switch armed' "$HOLOD_LOG")" -ge 3 ] || fail "kill switch not re-armed after the idle server change"
stop_holod || fail "holod exited with status $?"
pass_or_fail
