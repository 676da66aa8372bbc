#!/bin/sh
# Only holod's own user may talk to it. Another uid is stopped by the 0700 directory at
# connect(); with the directory opened up (by the test, after start), the SO_PEERCRED check
# answers 403 and logs the refusal.
. "$(dirname "$0")/lib.sh"
require_tools setpriv
[ "$(id -u)" = 0 ] || { echo "skip: needs root to act as another uid"; exit 77; }
start_holod

as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

# The test directories must be traversable for nobody to reach the socket at all.
chmod 711 "$T" "$XDG_RUNTIME_DIR"
out=$(as_nobody curl -sS --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' \
	http://holod/v1/status 2>&1)
case "$out" in
*"Permission denied"* | *"Couldn't connect"* | *"Failed to connect"*) ;;
*) fail "another uid got through the 0700 directory: $out" ;;
esac

chmod 711 "$(dirname "$SOCK")"
chmod 666 "$SOCK"
# nobody cannot write under $T: the body comes back on stdout, the status on the last line.
out=$(as_nobody curl -sS --unix-socket "$SOCK" -w '\n%{http_code}' http://holod/v1/status)
[ "$(echo "$out" | tail -n 1)" = 403 ] || fail "another uid: $out, expected HTTP 403"
[ "$(echo "$out" | head -n 1 | jq -r .error.code)" = forbidden ] || fail "403 body: $out"
grep -q "refused a request from uid 65534" "$HOLOD_LOG" || fail "refusal not logged"
out=$(as_nobody curl -sS --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' \
	-d '{"script": [{"tool_name": "move", "x": 1, "y": 1}]}' http://holod/v1/tasks)
[ "$out" = 403 ] || fail "another uid posting a task: HTTP $out"
[ "$(sqlite3 "$DB" 'SELECT count(*) FROM tasks')" = 0 ] || fail "a refused request created a task"

# holod's own uid still gets in.
api GET /v1/status
expect_code "own uid" 200
stop_holod || fail "holod exited with status $?"
pass_or_fail
