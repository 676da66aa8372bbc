#!/bin/sh
# What holod creates is its user's alone, and it changes no mode it does not own:
#  - a state directory that exists with 0755 is made 0700 (logged); the journal, its -wal and
#    -shm, and the screenshots are 0600 even under umask 022, and a second uid cannot read them;
#  - partial screenshots (*.png.tmp) a killed holod left are removed at start-up, nothing else;
#  - --socket in an existing directory never changes that directory's mode; a directory others
#    may write to is refused unless it is sticky (where a lock file of another uid is refused);
#    a path that is not a socket is refused and left alone.
. "$(dirname "$0")/lib.sh"
require_tools stat
# The checks as a second uid need root and setpriv; the rest runs as anyone.
AS_ROOT=false
[ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1 && AS_ROOT=true
umask 022

as_nobody() {
	setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

mode_of() {
	stat -c %a "$1"
}

# ---- the state directory and its files ---------------------------------------------------------
mkdir -m 755 "$STATE"
mkdir -p "$STATE/screenshots/7"
echo partial >"$STATE/screenshots/7/0-after.png.tmp"
echo mine >"$STATE/notes.png.tmp" # not holod's layout: left alone
start_xvfb
start_holod

[ "$(mode_of "$STATE")" = 700 ] || fail "state directory is $(mode_of "$STATE"), not 700"
grep -q "made the state directory $STATE private (mode 0755 -> 0700)" "$HOLOD_LOG" ||
	fail "tightening the state directory was not logged"
[ -e "$STATE/screenshots/7/0-after.png.tmp" ] && fail "a partial screenshot survived start-up"
grep -q "removed 1 partial screenshot file" "$HOLOD_LOG" || fail "the clean-up was not logged"
[ -e "$STATE/notes.png.tmp" ] || fail "a file outside screenshots/<task>/ was removed"

submit '{"script": [{"tool_name": "move", "x": 10, "y": 10}]}'
wait_task "$TASK" succeeded
shot=$(sqlite3 "$DB" "SELECT path FROM screenshots WHERE task_id = $TASK LIMIT 1")
[ -n "$shot" ] || fail "no screenshot journaled"
for f in "$DB" "$DB-wal" "$DB-shm" "$STATE/$shot"; do
	[ -e "$f" ] || { fail "$f missing"; continue; }
	[ "$(mode_of "$f")" = 600 ] || fail "$f is $(mode_of "$f"), not 600"
done

# A second uid, with every directory above the state directory open to it, still reads nothing.
if $AS_ROOT; then
	chmod 711 "$T" "$XDG_STATE_HOME"
	as_nobody cat "$DB" >/dev/null 2>&1 && fail "another uid read the journal"
	as_nobody cat "$STATE/$shot" >/dev/null 2>&1 && fail "another uid read a screenshot"
	as_nobody ls "$STATE" >/dev/null 2>&1 && fail "another uid listed the state directory"
	chmod 700 "$T" "$XDG_STATE_HOME"
else
	echo "not root: the checks as a second uid are skipped"
fi
stop_holod || fail "holod exited with status $?"

# ---- the socket's directory ---------------------------------------------------------------------
# holod_refused NAME MESSAGE ARGS...: holod must exit non-zero at once, logging MESSAGE.
holod_refused() {
	_name=$1 _msg=$2
	shift 2
	timeout 30 "$HOLOD" "$@" 2>"$T/refused.log"
	_rc=$?
	[ "$_rc" -ne 0 ] && [ "$_rc" -ne 124 ] || fail "$_name: holod exited $_rc, not refused"
	grep -q "$_msg" "$T/refused.log" || fail "$_name: $(cat "$T/refused.log")"
}

# An existing directory keeps its mode (it is not holod's): the socket alone is private.
mkdir -m 755 "$T/home"
SOCK="$T/home/h.sock"
start_holod --socket "$SOCK"
[ "$(mode_of "$T/home")" = 755 ] || fail "--socket changed its directory to $(mode_of "$T/home")"
[ "$(mode_of "$SOCK")" = 600 ] || fail "the socket is $(mode_of "$SOCK"), not 600"
stop_holod || fail "holod exited with status $?"

# A directory holod creates is 0700.
SOCK="$T/fresh/sub/h.sock"
start_holod --socket "$SOCK"
[ "$(mode_of "$T/fresh/sub")" = 700 ] || fail "a new socket directory is $(mode_of "$T/fresh/sub")"
stop_holod || fail "holod exited with status $?"

# Writable by others: refused, not chmod'ed; sticky (like /tmp): accepted.
mkdir "$T/open" && chmod 777 "$T/open"
holod_refused "world-writable directory" "is writable by other users and not sticky" \
	--socket "$T/open/h.sock"
[ "$(mode_of "$T/open")" = 777 ] || fail "a refused directory was changed"
mkdir "$T/sticky" && chmod 1777 "$T/sticky"
SOCK="$T/sticky/h.sock"
start_holod --socket "$SOCK"
[ "$(mode_of "$T/sticky")" = 1777 ] || fail "the sticky directory was changed"
stop_holod || fail "holod exited with status $?"

# In a sticky directory, a lock file another user planted is refused, not used.
if $AS_ROOT; then
	mkdir "$T/sticky2" && chmod 1777 "$T/sticky2"
	touch "$T/sticky2/h.sock.lock" && chown 65534 "$T/sticky2/h.sock.lock"
	holod_refused "another uid's lock file" \
		"h.sock.lock belongs to uid 65534, not to holod's uid 0" --socket "$T/sticky2/h.sock"
fi

# Not a socket: refused by name, and the file is untouched.
echo "root:x:0:0" >"$T/passwd"
holod_refused "a regular file as socket" \
	"$T/passwd exists and is not a socket; refusing to replace it" --socket "$T/passwd"
[ "$(cat "$T/passwd")" = "root:x:0:0" ] || fail "the regular file was replaced"
[ -e "$T/passwd.lock" ] && fail "a lock file was created next to a file that is not a socket"
pass_or_fail
