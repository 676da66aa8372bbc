#!/bin/sh
# A full disk under the state directory: holod in a private mount namespace with its state
# directory on a 2 MiB tmpfs and its screenshots on a 1 MiB one. When a screenshot cannot be
# written, the task fails with an error that says the disk is full and names the file; when the
# journal itself cannot grow (SQLITE_FULL), the submit or the task fails the same way. holod never
# crashes or hangs, keeps answering /v1/status, loses no committed step or screenshot
# (sha256 as journaled, PRAGMA integrity_check ok), and runs tasks again once space is freed.
# Skipped (77) where unshare or mount are not permitted (not root, no CAP_SYS_ADMIN).
if [ -z "${HOLOD_DISKFULL_NS:-}" ]; then
	command -v unshare >/dev/null 2>&1 || { echo "skip: no unshare"; exit 77; }
	unshare --mount --propagation private true 2>/dev/null ||
		{ echo "skip: unshare --mount not permitted"; exit 77; }
	HOLOD_DISKFULL_NS=1 exec unshare --mount --propagation private sh "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
require_tools dd

SHOTS="$STATE/screenshots"
mkdir -p "$STATE"
if ! mount -t tmpfs -o size=2m,mode=0700 tmpfs "$STATE" 2>/dev/null; then
	echo "skip: cannot mount a tmpfs"
	exit 77
fi
mkdir -p "$SHOTS"
mount -t tmpfs -o size=1m,mode=0700 tmpfs "$SHOTS" || { fail "mount $SHOTS"; exit 1; }

disk_cleanup() {
	if [ -n "$HOLOD_PID" ]; then
		kill -KILL "$HOLOD_PID" 2>/dev/null
		wait "$HOLOD_PID" 2>/dev/null
		HOLOD_PID=
	fi
	umount "$SHOTS" 2>/dev/null
	umount "$STATE" 2>/dev/null
	cleanup
}
trap disk_cleanup EXIT

# fill FILE: writes zeros until the file system refuses (ENOSPC), then checks it is full.
fill() {
	dd if=/dev/zero of="$1" bs=4k 2>/dev/null
	[ "$(df -P "$1" | awk 'NR == 2 { print $4 }')" = 0 ] || fail "could not fill $(dirname "$1")"
}

# expect_nospace NAME TEXT: the error says the disk is full and names a path in the state dir.
expect_nospace() {
	case "$2" in
	*"No space left on device"*) ;;
	*) fail "$1: '$2' does not say 'No space left on device'" ;;
	esac
	case "$2" in
	*"$STATE"*) ;;
	*) fail "$1: '$2' does not name the state directory $STATE or a file in it" ;;
	esac
}

start_xvfb
start_holod --state-dir "$STATE"

three='{"script": [{"tool_name": "move", "x": 10, "y": 10}, {"tool_name": "move", "x": 20, "y": 20}, {"tool_name": "move", "x": 30, "y": 30}]}'

# A: committed before the disk fills.
submit "$three"
A=$TASK
wait_task "$A" succeeded
shots_of() { sqlite3 "$DB" "SELECT count(*) FROM screenshots WHERE task_id = $1"; }
shots_are() { [ "$(shots_of "$1")" = "$2" ]; }
wait_until 20 shots_are "$A" 6 || fail "task A: $(shots_of "$A") screenshots, expected 6"
check_screenshots "$A"
SHA_A=$(sqlite3 "$DB" "SELECT group_concat(sha256) FROM screenshots WHERE task_id = $A ORDER BY idx")

# B: the screenshot file system is full, so its PNGs cannot be written.
fill "$SHOTS/filler"
submit "$three"
B=$TASK
wait_task "$B" failed
api GET "/v1/tasks/$B"
expect_nospace "task B error" "$(jq -r .error "$BODY")"
api GET /v1/status
expect_code "status after a failed screenshot" 200
[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $B")" -ge 1 ] ||
	fail "task B lost its step rows"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM screenshots WHERE task_id = $B")" = 0 ] ||
	fail "task B journaled a screenshot that could not be written"
[ -z "$(find "$SHOTS" -name '*.tmp')" ] || fail "half-written screenshots left: $(find "$SHOTS" -name '*.tmp')"
grep -q "No space left on device" "$HOLOD_LOG" || fail "no 'No space left on device' in the log"
rm -f "$SHOTS/filler"

# The journal's file system fills up while a task runs (during its wait): SQLite cannot grow the
# WAL (SQLITE_FULL -> ENOSPC). The task still ends, failed, saying why; it is not left 'running'.
submit '{"script": [{"tool_name": "move", "x": 10, "y": 10}, {"tool_name": "wait", "duration": 8}, {"tool_name": "move", "x": 20, "y": 20}]}'
E=$TASK
in_wait() {
	[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $E AND idx = 1")" = 1 ]
}
wait_until 20 in_wait || fail "task E never reached its wait"
fill "$STATE/filler"
wait_task "$E" failed 20
api GET "/v1/tasks/$E"
expect_nospace "task E error" "$(jq -r .error "$BODY")"
api GET /v1/status
expect_code "status after the journal filled up" 200

# The journal's file system is full before a submit. Either the submit is refused or the task
# fails; both say why, and holod keeps working.
fill "$STATE/filler2"
api POST /v1/tasks "$three"
if [ "$CODE" = 201 ]; then
	D=$(jq -r .id "$BODY")
	wait_task "$D" failed
	api GET "/v1/tasks/$D"
	expect_nospace "task D error" "$(jq -r .error "$BODY")"
else
	expect_code "submit on a full journal" 500
	expect_nospace "submit on a full journal" "$(jq -r .error.message "$BODY")"
fi
api GET /v1/status
expect_code "status with a full journal" 200
rm -f "$STATE/filler" "$STATE/filler2"

# Space again: a new task runs and succeeds; nothing committed was lost.
submit "$three"
C=$TASK
wait_task "$C" succeeded
wait_until 20 shots_are "$C" 6 || fail "task C: $(shots_of "$C") screenshots, expected 6"
check_screenshots "$C"
check_screenshots "$A"
[ "$(sqlite3 "$DB" "SELECT group_concat(sha256) FROM screenshots WHERE task_id = $A ORDER BY idx")" = "$SHA_A" ] ||
	fail "task A's screenshot rows changed"
api GET "/v1/tasks/$A/steps"
expect_json "A steps" '[.steps[].status] | join(",")' "ok,ok,ok"
[ "$(sqlite3 "$DB" 'PRAGMA integrity_check')" = ok ] || fail "integrity_check"
stop_holod || fail "holod exited with status $?"
pass_or_fail
