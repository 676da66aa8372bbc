# Helpers shared by the integration tests (POSIX sh, sourced). Each test gets temporary XDG
# directories, its own Xvfb (found with -displayfd, never a fixed display number) and its own
# holod; everything is polled with deadlines, never slept for a fixed time.
#
# Environment from meson: HOLOD (the daemon), HOLO_TEST_CLIENT (optional), NOTIFY_RECV.

set -u
. "$(dirname "$0")/../harness/test-lib.sh"

T=$(mktemp -d "${TMPDIR:-/tmp}/holod-it.XXXXXX")
export XDG_RUNTIME_DIR="$T/run" XDG_STATE_HOME="$T/state" XDG_CONFIG_HOME="$T/config" \
	XDG_DATA_HOME="$T/data"
mkdir -p "$XDG_RUNTIME_DIR" "$XDG_STATE_HOME" "$XDG_CONFIG_HOME"
chmod 700 "$XDG_RUNTIME_DIR"
unset HOLOD_SOCKET HOLOD_CONFIG HOLOD_STATE_DIR HOLOD_VIRTUAL HOLOD_SETTLE_MS HOLOD_MAX_STEPS \
	HOLOD_MAX_SECONDS HOLOD_DISPLAYS HOLOD_SESSION HOLOD_MODEL NOTIFY_SOCKET WAYLAND_DISPLAY DISPLAY
SOCK="$XDG_RUNTIME_DIR/holod/holod.sock"
STATE="$XDG_STATE_HOME/holod"
DB="$STATE/holod.db"
HOLOD_LOG="$T/holod.log"
HOLOD_PID=
XVFB_PID=
CLIENT_PID=
FAILED=0

cleanup() {
	[ -n "$CLIENT_PID" ] && kill "$CLIENT_PID" 2>/dev/null
	if [ -n "$HOLOD_PID" ]; then
		kill -KILL "$HOLOD_PID" 2>/dev/null
		wait "$HOLOD_PID" 2>/dev/null
	fi
	[ -n "$XVFB_PID" ] && kill "$XVFB_PID" 2>/dev/null
	wait 2>/dev/null
	if [ "$FAILED" -ne 0 ] && [ -f "$HOLOD_LOG" ]; then
		echo "---- holod log ----" >&2
		cat "$HOLOD_LOG" >&2
	fi
	rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
	echo "FAIL: $*" >&2
	FAILED=$((FAILED + 1))
}

pass_or_fail() {
	if [ "$FAILED" -ne 0 ]; then
		echo "$FAILED check(s) failed" >&2
		exit 1
	fi
	exit 0
}

require_tools() {
	for tool in Xvfb curl jq sqlite3 sha256sum "$@"; do
		command -v "$tool" >/dev/null 2>&1 || test_skip "$tool is not installed"
	done
}

# wait_until TIMEOUT_S CMD...: polls CMD every $WAIT_POLL_S seconds (default 0.02); returns 1 at
# the deadline. A wait of many seconds sets a longer period: each poll forks its command's
# processes (curl, jq), which take CPU from the daemon under test.
wait_until() {
	_deadline=$(($(date +%s) + $1))
	shift
	while ! "$@" >/dev/null 2>&1; do
		[ "$(date +%s)" -ge "$_deadline" ] && return 1
		sleep "${WAIT_POLL_S:-0.02}"
	done
	return 0
}

start_xvfb() {
	Xvfb -displayfd 3 -screen 0 "${1:-800x600x24}" -nolisten tcp -noreset \
		3>"$T/xvfb.num" 2>"$T/xvfb.log" &
	XVFB_PID=$!
	if ! wait_until 20 grep -q . "$T/xvfb.num"; then
		echo "Xvfb did not start:" >&2
		cat "$T/xvfb.log" >&2
		exit 1
	fi
	DISPLAY=":$(head -n 1 "$T/xvfb.num")"
	export DISPLAY
}

# start_client: the X11 module's recording test client, when it is built.
start_client() {
	[ -n "${HOLO_TEST_CLIENT:-}" ] && [ -x "$HOLO_TEST_CLIENT" ] || return 1
	CLIENT_LOG="$T/client.log"
	"$HOLO_TEST_CLIENT" --log "$CLIENT_LOG" --geometry 400x300+0+0 2>"$T/client.err" &
	CLIENT_PID=$!
	wait_until 20 grep -q '^ready' "$CLIENT_LOG" || { fail "test client not ready"; return 1; }
	return 0
}

status_ok() {
	curl -sf --unix-socket "$SOCK" http://holod/v1/status
}

# start_holod [ARGS...]: starts holod in the background and waits until it answers.
start_holod() {
	"$HOLOD" --settle-ms 0 "$@" 2>>"$HOLOD_LOG" &
	HOLOD_PID=$!
	if ! wait_until 30 status_ok; then
		fail "holod did not become ready"
		exit 1
	fi
}

# stop_holod: SIGTERM, wait; returns holod's exit status.
stop_holod() {
	kill -TERM "$HOLOD_PID"
	wait "$HOLOD_PID"
	_rc=$?
	HOLOD_PID=
	return $_rc
}

# api METHOD PATH [BODY]: sets CODE (HTTP status) and BODY (file with the response body).
BODY="$T/body"
api() {
	if [ $# -ge 3 ]; then
		CODE=$(printf '%s' "$3" | curl -sS --unix-socket "$SOCK" -o "$BODY" -w '%{http_code}' \
			-X "$1" -H 'Content-Type: application/json' --data-binary @- "http://holod$2")
	else
		CODE=$(curl -sS --unix-socket "$SOCK" -o "$BODY" -w '%{http_code}' -X "$1" \
			"http://holod$2")
	fi
}

# expect_code NAME CODE: checks the last api call's status.
expect_code() {
	[ "$CODE" = "$2" ] || fail "$1: HTTP $CODE, expected $2: $(head -c 400 "$BODY")"
}

# expect_json NAME JQ_FILTER EXPECTED: checks a value of the last response.
expect_json() {
	_got=$(jq -r "$2" "$BODY" 2>&1)
	[ "$_got" = "$3" ] || fail "$1: $2 is '$_got', expected '$3'"
}

# expect_error NAME CODE ERROR_CODE MESSAGE_SUBSTRING
expect_error() {
	expect_code "$1" "$2"
	expect_json "$1" .error.code "$3"
	_msg=$(jq -r .error.message "$BODY" 2>/dev/null)
	case "$_msg" in
	*"$4"*) ;;
	*) fail "$1: message '$_msg' does not contain '$4'" ;;
	esac
}

# submit BODY: POST /v1/tasks, sets TASK to the new id.
submit() {
	api POST /v1/tasks "$1"
	expect_code "submit" 201
	TASK=$(jq -r .id "$BODY")
}

task_status() {
	curl -sS --unix-socket "$SOCK" "http://holod/v1/tasks/$1" | jq -r .status
}

task_is() {
	[ "$(task_status "$1")" = "$2" ]
}

task_final() {
	case "$(task_status "$1")" in
	succeeded | failed | cancelled | interrupted | stuck) return 0 ;;
	*) return 1 ;;
	esac
}

# wait_task ID STATUS [TIMEOUT]
wait_task() {
	wait_until "${3:-30}" task_final "$1" || { fail "task $1 did not finish"; return 1; }
	_st=$(task_status "$1")
	[ "$_st" = "$2" ] || fail "task $1 is $_st, expected $2"
}

# Every screenshot journaled for task $1 exists and matches its sha256.
check_screenshots() {
	_rows=$(sqlite3 "$DB" "SELECT path || ' ' || sha256 FROM screenshots WHERE task_id = $1")
	[ -n "$_rows" ] || fail "task $1 has no screenshots"
	echo "$_rows" | while read -r _path _sha; do
		_got=$(sha256sum "$STATE/$_path" 2>/dev/null | cut -d' ' -f1)
		[ "$_got" = "$_sha" ] || { echo "FAIL: $_path: sha256 $_got, journal $_sha" >&2; exit 1; }
	done || FAILED=$((FAILED + 1))
}
