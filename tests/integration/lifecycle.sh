#!/bin/sh
# The daemon's life: options (--help, --dump-config, config file < env < flags, bad values),
# sd_notify READY=1, socket permissions, SIGTERM in the middle of a task (task interrupted, held
# keys released, exit 0), no display (clear task error, no crash), --virtual (owns an Xvfb and
# kills it on exit).
. "$(dirname "$0")/lib.sh"
require_tools

# ---- options
"$HOLOD" --help >"$T/help" || fail "--help exit status"
for opt in --socket --state-dir --display --virtual --settle-ms --max-steps --max-seconds \
	--config --dump-config; do
	grep -q -- "$opt" "$T/help" || fail "--help does not mention $opt"
done
mkdir -p "$XDG_CONFIG_HOME/holod"
printf 'settle-ms = 7\nmax-steps = 9\n' >"$XDG_CONFIG_HOME/holod/holod.conf"
HOLOD_MAX_STEPS=11 "$HOLOD" --dump-config --max-seconds 13 >"$T/dump" || fail "--dump-config"
grep -qx 'settle-ms = 7' "$T/dump" || fail "config file value not in --dump-config"
grep -qx 'max-steps = 11' "$T/dump" || fail "environment does not override the config file"
grep -qx 'max-seconds = 13' "$T/dump" || fail "flag not in --dump-config"
grep -qx "socket = $SOCK" "$T/dump" || fail "default socket path: $(grep socket "$T/dump")"
rm "$XDG_CONFIG_HOME/holod/holod.conf"
"$HOLOD" --settle-ms lots 2>"$T/err"
[ $? = 2 ] || fail "bad option value: exit status"
grep -q "settle-ms: 'lots' is not an integer" "$T/err" || fail "bad value message: $(cat "$T/err")"
"$HOLOD" --frobnicate 2>"$T/err"
[ $? = 2 ] || fail "unknown option: exit status"

# ---- no display at all: holod runs, tasks fail with a clear error
start_holod
[ "$(stat -c %a "$(dirname "$SOCK")")" = 700 ] || fail "socket directory not 0700"
[ "$(stat -c %a "$SOCK")" = 600 ] || fail "socket not 0600"
api GET /v1/status
expect_json "no display" .display null
submit '{"script": [{"tool_name": "move", "x": 1, "y": 1}]}'
wait_task "$TASK" failed
api GET "/v1/tasks/$TASK"
expect_json "no display error" '.error | startswith("cannot open display $DISPLAY: ")' true
api GET /v1/screenshot
expect_error "screenshot without display" 503 no_display "cannot open display"
stop_holod || fail "holod (no display) exited with status $?"

# ---- sd_notify and SIGTERM during a task
start_xvfb
HAVE_CLIENT=0
start_client && HAVE_CLIENT=1
"$NOTIFY_RECV" "$T/notify.sock" 30 >"$T/notify.out" &
NPID=$!
wait_until 10 grep -q LISTENING "$T/notify.out" || fail "notify-recv did not start"
NOTIFY_SOCKET="$T/notify.sock" start_holod
wait "$NPID" || fail "no READY=1 from holod: $(cat "$T/notify.out")"
grep -qx 'READY=1' "$T/notify.out" || fail "notify message: $(cat "$T/notify.out")"

submit '{"script": [{"tool_name": "key_down", "key": "shift"}, {"tool_name": "wait", "duration": 25}]}'
A=$TASK
submit '{"script": [{"tool_name": "move", "x": 1, "y": 1}]}'
B=$TASK
wait_until 20 sh -c "[ \"\$(sqlite3 '$DB' \"SELECT count(*) FROM steps WHERE task_id = $A AND idx = 1\")\" = 1 ]" ||
	fail "task never reached its wait"
curl -sS -N --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >"$T/events" &
EVENTS_PID=$!
wait_until 10 grep -q '"event":"step"' "$T/events" || fail "no step event before SIGTERM"
t0=$(date +%s)
stop_holod || fail "holod exited with status $? after SIGTERM"
wait "$EVENTS_PID" || fail "event stream broken by SIGTERM"
[ "$(tail -n 1 "$T/events" | jq -r '.event + " " + .task.status')" = "end interrupted" ] ||
	fail "event stream after SIGTERM ends with: $(tail -n 1 "$T/events" | head -c 300)"
[ $(($(date +%s) - t0)) -le "$(test_time_limit 5)" ] || fail "SIGTERM took more than $(test_time_limit 5) s"
[ "$(sqlite3 "$DB" "SELECT status || ': ' || error FROM tasks WHERE id = $A")" = \
	"interrupted: holod received SIGTERM" ] || fail "A after SIGTERM: $(sqlite3 "$DB" "SELECT status, error FROM tasks WHERE id = $A")"
[ "$(sqlite3 "$DB" "SELECT status FROM tasks WHERE id = $B")" = interrupted ] ||
	fail "queued task after SIGTERM"
[ -e "$SOCK" ] && fail "socket left behind after a clean exit"
if [ "$HAVE_CLIENT" = 1 ]; then
	wait_until 10 grep -q '^keyrelease .*keysym=Shift_L' "$CLIENT_LOG" ||
		fail "shift still held after SIGTERM"
fi

# ---- --virtual: a private Xvfb, owned and killed
kill "$XVFB_PID" 2>/dev/null
unset DISPLAY
start_holod --virtual 640x480
api GET /v1/status
expect_json "virtual" .virtual_display true
VDISPLAY=$(jq -r .display "$BODY")
case "$VDISPLAY" in :[0-9]*) ;; *) fail "virtual display name '$VDISPLAY'" ;; esac
code=$(curl -sS --unix-socket "$SOCK" -o "$T/now.png" -w '%{http_code}' http://holod/v1/screenshot)
[ "$code" = 200 ] || fail "virtual screenshot: HTTP $code"
[ "$(od -An -tu1 -j16 -N8 "$T/now.png" | tr -s ' ')" = " 0 0 2 128 0 0 1 224" ] ||
	fail "virtual screenshot is not 640x480"
submit '{"script": [{"tool_name": "click", "x": 639, "y": 479}]}'
wait_task "$TASK" succeeded
VPID=$(sed -n "s/.*started Xvfb $VDISPLAY (640x480, pid \([0-9]*\)).*/\1/p" "$HOLOD_LOG")
kill -0 "$VPID" || fail "no Xvfb process for $VDISPLAY"
stop_holod || fail "holod (virtual) exited with status $?"
wait_until 10 sh -c "! kill -0 $VPID" || fail "Xvfb $VPID still running after holod exited"
pass_or_fail
