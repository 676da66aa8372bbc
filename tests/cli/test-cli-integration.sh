#!/bin/sh
# holod and holoctl end to end: a private Xvfb, the x11 test client recording every input event it
# receives, holod in temporary XDG directories, and holoctl finding it through those directories.
#
# usage: test-cli-integration.sh SCENARIO
#   script      a script of clicks, typing, hotkeys and scrolls through `run --script - --follow`;
#               the client records exactly those events; `show` lists the steps; every PNG of the
#               journal exists and matches its sha256; a step's screenshot through the API too
#   do          `holoctl do ...` one action at a time, `holoctl screenshot`, errors of each kind
#   cancel      `holoctl cancel` of a running and of a queued task; the rest never runs
#   exit-codes  `run --follow` statuses, --json streams, no model, no daemon
#   report      `holoctl report` rendered by headless Chromium: markers, escaping, navigation
#   focus       keys with no focused window: `do write` says warning (the whole sentence) and
#               exits 0, `do --require-focus write` fails (1); with a focused client it types;
#               `holoctl windows` lists that client and the pointer; `show` and `list` cut
#               long text to $COLUMNS, print it whole into a file and with --wide
#   prune       `holoctl prune`: refused without --yes when stdin is no terminal, --dry-run
#               lists what would go and its cutoff, on a terminal (script(1)) it asks and
#               removes only what it listed (a task finished while it asks stays), --yes
#               prunes; POST /v1/prune?before= validated
#   replay-check  `holoctl replay --check`: a replay on the recorded screen passes; one on a
#               changed screen stops at the first step whose screen differs, saying by how much
# env: HOLOD, HOLOCTL, HOLO_TEST_CLIENT: the built programs.
# Skipped (exit 77; failed where $HOLOD_CI is set) when Xvfb (or, for `script`, sqlite3 or
# sha256sum) is not installed.
set -u
. "$(dirname "$0")/../harness/test-lib.sh"

scenario=${1:?usage: test-cli-integration.sh script|do|cancel|exit-codes}
: "${HOLOD:?}" "${HOLOCTL:?}" "${HOLO_TEST_CLIENT:?}"

need() {
	command -v "$1" >/dev/null 2>&1 || test_skip "$1 is not installed"
}
need Xvfb
if [ "$scenario" = script ] || [ "$scenario" = report ] || [ "$scenario" = replay-check ]; then
	need sqlite3
	need sha256sum
fi
[ "$scenario" = report ] && need jq
# tools/install-deps.sh installs Chromium; it is skipped only where it genuinely is not.
[ "$scenario" = report ] && need chromium

tmp=$(mktemp -d "${TMPDIR:-/tmp}/holoctl-it.XXXXXX") || exit 1
xvfb_pid=
client_pid=
holod_pid=

cleanup() {
	for p in $holod_pid $client_pid $xvfb_pid; do
		kill "$p" 2>/dev/null
	done
	for p in $holod_pid $client_pid $xvfb_pid; do
		wait "$p" 2>/dev/null
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

fail() {
	echo "FAIL ($scenario): $*" >&2
	for f in holod.log out err follow.out follow.err; do
		[ -s "$tmp/$f" ] && sed "s|^|  $f: |" "$tmp/$f" >&2
	done
	exit 1
}

now() {
	date +%s
}

# wait_for SECONDS COMMAND...: runs COMMAND until it succeeds; fails after SECONDS.
wait_for() {
	deadline=$(($(now) + $1))
	shift
	until "$@" >/dev/null 2>&1; do
		[ "$(now)" -lt "$deadline" ] || return 1
		sleep 0.05
	done
}

# ---- the desktop: Xvfb, the test client, holod --------------------------------------------------

# Nothing from the caller's environment may point holod or holoctl elsewhere.
unset HOLOD_SOCKET HOLOD_CONFIG HOLOD_STATE_DIR HOLOD_VIRTUAL HOLOD_SETTLE_MS HOLOD_MAX_STEPS \
	HOLOD_MAX_SECONDS HOLOD_DISPLAYS HOLOD_SESSION HOLOD_MODEL WAYLAND_DISPLAY
export XDG_RUNTIME_DIR="$tmp/run" XDG_STATE_HOME="$tmp/state" XDG_CONFIG_HOME="$tmp/config" \
	XDG_DATA_HOME="$tmp/data"
mkdir -m 700 "$XDG_RUNTIME_DIR" "$XDG_STATE_HOME" "$XDG_CONFIG_HOME" || exit 1
state="$XDG_STATE_HOME/holod"

Xvfb -displayfd 3 -screen 0 1280x720x24 -nolisten tcp 3>"$tmp/display" >"$tmp/xvfb.log" 2>&1 &
xvfb_pid=$!
wait_for 30 test -s "$tmp/display" || fail "Xvfb did not start: $(cat "$tmp/xvfb.log")"
DISPLAY=":$(cat "$tmp/display")"
export DISPLAY

"$HOLO_TEST_CLIENT" --log "$tmp/client.log" >"$tmp/client.err" 2>&1 &
client_pid=$!
wait_for 30 grep -q '^ready ' "$tmp/client.log" || fail "the test client did not become ready"

start_holod() {
	"$HOLOD" --settle-ms 20 >>"$tmp/holod.log" 2>&1 &
	holod_pid=$!
	wait_for 30 "$HOLOCTL" status || fail "holod did not answer holoctl status"
}

# Stops holod with SIGTERM; it must exit 0.
stop_holod() {
	kill -TERM "$holod_pid"
	wait "$holod_pid"
	rc=$?
	holod_pid=
	[ "$rc" -eq 0 ] || fail "holod exited with status $rc after SIGTERM"
}

start_holod

# ---- what the client saw ------------------------------------------------------------------------

# Lines the client logged after line $1, without pointer motion, focus changes and the fields
# that vary from run to run (server timestamps, keycodes of the server's keymap).
record_since() {
	tail -n +"$(($1 + 1))" "$tmp/client.log" | grep -Ev '^(motion|focus|ready) ' |
		sed -e 's/ time=[0-9]*//' -e 's/ keycode=[0-9]*//'
}

record_mark() {
	wc -l <"$tmp/client.log"
}

# expect_record MARK FILE: the client's record since MARK becomes exactly FILE (events arrive
# asynchronously, so poll; a record that grows past FILE never matches).
expect_record() {
	deadline=$(($(now) + 15))
	while :; do
		record_since "$1" >"$tmp/record"
		cmp -s "$tmp/record" "$2" && return 0
		if [ "$(now)" -ge "$deadline" ]; then
			diff -u "$2" "$tmp/record" >&2
			fail "the client's record differs from the expected events (above)"
		fi
		sleep 0.05
	done
}

# A click as the client logs it: click BUTTON X Y TARGET (window = root: the client is at 0,0).
click_lines() {
	mask=$((1 << ($1 + 7)))
	echo "press button=$1 x=$2 y=$3 root_x=$2 root_y=$3 state=0x0 target=$4"
	printf 'release button=%s x=%s y=%s root_x=%s root_y=%s state=0x%x\n' "$1" "$2" "$3" "$2" "$3" "$mask"
}

# task_id_of FILE: the id in holoctl's "task N ..." first line.
task_id_of() {
	sed -n '1s/^task \([0-9][0-9]*\) .*/\1/p' "$1"
}

# ---- scenarios ----------------------------------------------------------------------------------

scenario_script() {
	mark=$(record_mark)
	cat >"$tmp/script.json" <<-'EOF'
	{"actions": [
	  {"tool_name": "click", "x": 35, "y": 35, "element": "red block"},
	  {"tool_name": "click", "x": 150, "y": 145, "element": "text field"},
	  {"tool_name": "write", "content": "hi"},
	  {"tool_name": "hotkey", "keys": ["ctrl", "s"]},
	  {"tool_name": "double_click", "x": 95, "y": 35},
	  {"tool_name": "scroll", "x": 60, "y": 95, "direction": "down", "scroll_size": 2},
	  {"tool_name": "click", "x": 215, "y": 35, "button": "right"}
	], "settle_ms": 20}
	EOF
	"$HOLOCTL" run --script - --follow <"$tmp/script.json" >"$tmp/follow.out" 2>"$tmp/follow.err"
	rc=$?
	[ "$rc" -eq 0 ] || fail "run --follow exited $rc for a task that should succeed"
	id=$(task_id_of "$tmp/follow.out")
	[ -n "$id" ] || fail "run printed no task id"
	[ "$(grep -c '^step [0-9]' "$tmp/follow.out")" -eq 7 ] || fail "--follow did not print 7 steps"
	grep -q '^step 2  write "hi"  ok' "$tmp/follow.out" || fail "--follow: step 2 is not the write"
	[ "$(tail -n 1 "$tmp/follow.out")" = "task $id succeeded after 7 steps" ] ||
		fail "--follow: wrong last line"

	{
		click_lines 1 35 35 red
		click_lines 1 150 145 field
		echo "key keysym=h state=0x0 text=68"
		echo "keyrelease keysym=h state=0x0"
		echo "key keysym=i state=0x0 text=69"
		echo "keyrelease keysym=i state=0x0"
		echo "key keysym=Control_L state=0x0 text=-"
		echo "key keysym=s state=0x4 text=13"
		echo "keyrelease keysym=s state=0x4"
		echo "keyrelease keysym=Control_L state=0x4"
		click_lines 1 95 35 green
		click_lines 1 95 35 green
		for n in 1 2; do
			echo "press button=5 x=60 y=95 root_x=60 root_y=95 state=0x0 target=button"
			echo "scroll direction=down x=60 y=95"
			echo "release button=5 x=60 y=95 root_x=60 root_y=95 state=0x1000"
		done
		click_lines 3 215 35 color
	} >"$tmp/expected"
	expect_record "$mark" "$tmp/expected"

	# holoctl show: the task, then one row per step with tool, arguments, pixels, status, result.
	"$HOLOCTL" show "$id" >"$tmp/out" 2>"$tmp/err" || fail "show $id failed"
	grep -q '^status  *succeeded$' "$tmp/out" || fail "show: no 'status succeeded' line"
	grep -Eq '^#  TOOL  +ARGS  +MODEL  +PIXELS  +STATUS' "$tmp/out" || fail "show: no step table header"
	[ "$(grep -Ec '^[0-6]  (click|write|hotkey|double_click|scroll) ' "$tmp/out")" -eq 7 ] ||
		fail "show: not 7 step rows"
	grep -Eq '^0  click  +red block  +-  +35,35  +ok ' "$tmp/out" || fail "show: row 0"
	grep -Eq '^2  write  +"hi"  +-  +-  +ok ' "$tmp/out" || fail "show: row 2"
	grep -Eq '^3  hotkey  +ctrl\+s  +-  +-  +ok ' "$tmp/out" || fail "show: row 3"
	grep -Eq '^5  scroll  +down 2  +-  +60,95  +ok ' "$tmp/out" || fail "show: row 5"
	grep -Eq '^6  click  +right  +-  +215,35  +ok ' "$tmp/out" || fail "show: row 6"
	"$HOLOCTL" --json show "$id" >"$tmp/out" 2>"$tmp/err" || fail "show --json failed"
	[ "$(wc -l <"$tmp/out")" -eq 2 ] || fail "show --json: not the task and the steps documents"
	grep -q "^{\"task_id\": *$id, *\"steps\": *\[" "$tmp/out" || fail "show --json: no steps document"

	# Screenshots: two per step, written off the critical path, so wait for all 14 rows.
	db="$state/holod.db"
	q="SELECT path || ' ' || sha256 FROM screenshots WHERE task_id = $id ORDER BY idx, which"
	rows_are_14() {
		[ "$(sqlite3 -readonly "$db" "SELECT count(*) FROM screenshots WHERE task_id = $id")" = 14 ]
	}
	wait_for 30 rows_are_14 || fail "the journal does not list 14 screenshots for task $id"
	sqlite3 -readonly "$db" "$q" >"$tmp/shots" || fail "sqlite3 cannot read $db"
	while read -r path sha; do
		f="$state/$path"
		[ -f "$f" ] || fail "screenshot $path is missing"
		[ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "$path is not a PNG"
		[ "$(sha256sum <"$f" | cut -d' ' -f1)" = "$sha" ] || fail "$path does not match its sha256"
	done <"$tmp/shots"

	# The same PNG through the API.
	"$HOLOCTL" screenshot --task "$id" --step 0 --which before -o "$tmp/step0.png" >"$tmp/out" 2>"$tmp/err" ||
		fail "screenshot --task --step failed"
	sha=$(sqlite3 -readonly "$db" "SELECT sha256 FROM screenshots WHERE task_id = $id AND idx = 0 AND which = 'before'")
	[ "$(sha256sum <"$tmp/step0.png" | cut -d' ' -f1)" = "$sha" ] ||
		fail "the API's step screenshot differs from the journal's"
	grep -q "^wrote $tmp/step0.png (1280x720, [0-9]* bytes, sha256 matches the journal)$" "$tmp/out" ||
		fail "screenshot: wrong line"

	# A screenshot changed behind holod's back is reported, not passed on.
	path=$(sqlite3 -readonly "$db" "SELECT path FROM screenshots WHERE task_id = $id AND idx = 1 AND which = 'after'")
	printf 'x' >>"$state/$path"
	"$HOLOCTL" screenshot --task "$id" --step 1 -o "$tmp/step1.png" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "a changed screenshot was accepted"
	grep -q "does not match the journal's" "$tmp/err" || fail "a changed screenshot: no reason"
	[ ! -e "$tmp/step1.png" ] || fail "a changed screenshot was written"
}

scenario_do() {
	mark=$(record_mark)
	run_do() {
		"$HOLOCTL" do "$@" >"$tmp/out" 2>"$tmp/err" || fail "do $* exited $?"
	}
	run_do click 35 35
	grep -q '^step 0  click @ 35,35  ok' "$tmp/out" || fail "do click: wrong line"
	run_do click 150 145
	run_do write "ok"
	run_do hotkey ctrl+a
	run_do right_click 95 35
	run_do scroll 60 95 up 1
	# holod releases held keys when a task ends, and each `do` is a task of its own: the key is
	# pressed and released, and a later key_up finds nothing held.
	run_do key_down shift
	"$HOLOCTL" do key_up shift >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "do key_up of a key nobody holds did not fail"
	grep -q '^holoctl: the action failed: ' "$tmp/err" || fail "do key_up: no reason"
	run_do --coords model click 27 60
	grep -q '^step 0  click @ 35,43 (model 27,60)  ok' "$tmp/out" || fail "do --coords model: wrong line"

	# Refused before sending: nothing reaches the desktop.
	"$HOLOCTL" do hotkey ctr+a >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 2 ] || fail "do hotkey ctr+a: not a usage error"
	grep -q "unknown key name 'ctr'" "$tmp/err" || fail "do hotkey ctr+a: no reason"
	# Refused by holod: the daemon's message.
	"$HOLOCTL" do click 5000 10 >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "do click 5000 10: not an error"
	grep -q 'outside the screen' "$tmp/err" || fail "do click 5000 10: not holod's reason"

	{
		click_lines 1 35 35 red
		click_lines 1 150 145 field
		echo "key keysym=o state=0x0 text=6f"
		echo "keyrelease keysym=o state=0x0"
		echo "key keysym=k state=0x0 text=6b"
		echo "keyrelease keysym=k state=0x0"
		echo "key keysym=Control_L state=0x0 text=-"
		echo "key keysym=a state=0x4 text=01"
		echo "keyrelease keysym=a state=0x4"
		echo "keyrelease keysym=Control_L state=0x4"
		click_lines 3 95 35 green
		echo "press button=4 x=60 y=95 root_x=60 root_y=95 state=0x0 target=button"
		echo "scroll direction=up x=60 y=95"
		echo "release button=4 x=60 y=95 root_x=60 root_y=95 state=0x800"
		echo "key keysym=Shift_L state=0x0 text=-"
		echo "keyrelease keysym=Shift_L state=0x1"
		click_lines 1 35 43 red
	} >"$tmp/expected"
	expect_record "$mark" "$tmp/expected"

	# --json: holod's answer as received.
	"$HOLOCTL" --json do wait 0.1 >"$tmp/out" 2>"$tmp/err" || fail "do --json wait failed"
	grep -q '"step": *{.*"tool_name": *"wait"' "$tmp/out" || fail "do --json: no step in the answer"

	# Every action above (the one holod refused included) is a task of its own.
	"$HOLOCTL" list --limit 500 >"$tmp/out" 2>"$tmp/err" || fail "list failed"
	[ "$(grep -Ec '^ *[0-9]+  (succeeded|failed) ' "$tmp/out")" -eq 11 ] || fail "list: not 11 tasks"
	grep -Eq '^ *[0-9]+  failed  +1  .*click @ 5000,10' "$tmp/out" || fail "list: the failed click"
	"$HOLOCTL" list --status failed >"$tmp/out" 2>"$tmp/err" || fail "list --status failed failed"
	[ "$(grep -Ec '^ *[0-9]+  failed ' "$tmp/out")" -eq 2 ] || fail "list --status failed: not 2 tasks"
	"$HOLOCTL" list --limit 2 --offset 2 >"$tmp/out" 2>"$tmp/err" || fail "list paging failed"
	grep -q '^tasks 3-4 of 11 (next page: --offset 4)$' "$tmp/out" || fail "list: paging line"

	# The screen now, as a PNG file.
	"$HOLOCTL" screenshot -o "$tmp/shot.png" >"$tmp/out" 2>"$tmp/err" || fail "screenshot failed"
	size=$(wc -c <"$tmp/shot.png")
	grep -q "^wrote $tmp/shot.png (1280x720, $size bytes)$" "$tmp/out" || fail "screenshot: wrong line"
	[ "$(head -c 4 "$tmp/shot.png" | od -An -c | tr -d ' ')" = '211PNG' ] || fail "screenshot: not a PNG"
	"$HOLOCTL" screenshot --json -o "$tmp/shot2.png" >"$tmp/out" 2>"$tmp/err" || fail "screenshot --json failed"
	grep -q '"width": *1280, *"height": *720' "$tmp/out" || fail "screenshot --json: no size"
}

scenario_cancel() {
	mark=$(record_mark)
	printf '%s' '[{"tool_name":"wait","duration":30},{"tool_name":"wait","duration":30},
		{"tool_name":"click","x":35,"y":35}]' >"$tmp/long.json"
	started=$(now)
	"$HOLOCTL" run --script - --follow <"$tmp/long.json" >"$tmp/follow.out" 2>"$tmp/follow.err" &
	follow_pid=$!
	wait_for 30 grep -q '^task [0-9]* ' "$tmp/follow.out" || fail "run printed no task id"
	id=$(task_id_of "$tmp/follow.out")
	running() {
		"$HOLOCTL" list --status running | grep -Eq "^ *$id  running "
	}
	wait_for 30 running || fail "task $id never ran"

	# A second task waits behind it on the display's queue; cancelling it is immediate.
	"$HOLOCTL" run --script - <"$tmp/long.json" >"$tmp/out" 2>"$tmp/err" || fail "second run failed"
	queued_id=$(task_id_of "$tmp/out")
	grep -q "^task $queued_id queued" "$tmp/out" || fail "the second task is not queued"
	"$HOLOCTL" cancel "$queued_id" >"$tmp/out" 2>"$tmp/err" || fail "cancel of the queued task failed"
	[ "$(cat "$tmp/out")" = "task $queued_id cancelled" ] || fail "cancel of a queued task: wrong line"

	"$HOLOCTL" cancel "$id" >"$tmp/out" 2>"$tmp/err" || fail "cancel $id failed"
	grep -Eq "^task $id(: cancelling| cancelled)" "$tmp/out" || fail "cancel: wrong line"
	wait "$follow_pid"
	rc=$?
	[ "$rc" -eq 4 ] || fail "run --follow exited $rc for a cancelled task, not 4"
	[ $(($(now) - started)) -lt 30 ] || fail "the cancelled wait ran to its end"
	grep -q "^task $id cancelled after 1 step" "$tmp/follow.out" || fail "--follow: no cancelled line"

	"$HOLOCTL" show "$id" >"$tmp/out" 2>"$tmp/err" || fail "show $id failed"
	grep -q '^status  *cancelled$' "$tmp/out" || fail "show: not cancelled"
	[ "$(grep -Ec '^[0-9]  (wait|click) ' "$tmp/out")" -eq 1 ] || fail "show: steps after the cancel"
	"$HOLOCTL" list --status cancelled >"$tmp/out" 2>"$tmp/err" || fail "list --status cancelled"
	[ "$(grep -Ec '^ *[0-9]+  cancelled ' "$tmp/out")" -eq 2 ] || fail "list: not 2 cancelled tasks"

	# Finished tasks cannot be cancelled: holod's reason, exit 1.
	"$HOLOCTL" cancel "$id" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "cancelling a finished task did not fail"
	grep -q 'HTTP 409 conflict' "$tmp/err" || fail "cancel of a finished task: not holod's 409"
	"$HOLOCTL" cancel 999999 >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "cancelling an unknown task did not fail"
	grep -q 'no task 999999 (HTTP 404 not_found)' "$tmp/err" || fail "cancel of an unknown task"

	# The click after the waits never happened.
	: >"$tmp/expected"
	expect_record "$mark" "$tmp/expected"
}

scenario_exit_codes() {
	# A failing step fails the task: exit 3, the reason on the last line.
	printf '%s' '[{"tool_name":"click","x":5000,"y":10},{"tool_name":"click","x":35,"y":35}]' |
		"$HOLOCTL" run --script - --follow >"$tmp/follow.out" 2>"$tmp/follow.err"
	rc=$?
	[ "$rc" -eq 3 ] || fail "run --follow exited $rc for a failed task, not 3"
	id=$(task_id_of "$tmp/follow.out")
	grep -q "^task $id failed after 1 step: .*outside the screen" "$tmp/follow.out" ||
		fail "--follow: no failed line"

	# The command line's budget reaches holod: one step allowed, two asked.
	printf '%s' '[{"tool_name":"move","x":10,"y":10},{"tool_name":"move","x":20,"y":20}]' |
		"$HOLOCTL" run --script - --follow --max-steps 1 >"$tmp/follow.out" 2>"$tmp/follow.err"
	rc=$?
	[ "$rc" -eq 3 ] || fail "run --follow --max-steps 1 exited $rc, not 3"
	grep -q "failed after 1 step: max_steps budget (1) reached" "$tmp/follow.out" ||
		fail "--max-steps: not the budget's failure"

	# --json: one JSON document per line, the stream ending with the task's final state.
	printf '%s' '[{"tool_name":"move","x":300,"y":250}]' |
		"$HOLOCTL" --json run --script - --follow >"$tmp/follow.out" 2>"$tmp/follow.err"
	rc=$?
	[ "$rc" -eq 0 ] || fail "run --json --follow exited $rc"
	grep -q '"event": *"step"' "$tmp/follow.out" || fail "--json --follow: no step event"
	tail -n 1 "$tmp/follow.out" | grep -q '"event": *"end".*"status": *"succeeded"' ||
		fail "--json --follow: the last line is not the end event"
	grep -vq '^{' "$tmp/follow.out" && fail "--json --follow: a line that is not JSON"

	# A bad script: exit 2 and nothing queued.
	"$HOLOCTL" list --json >"$tmp/before" 2>"$tmp/err" || fail "list --json failed"
	printf '%s' '[{"tool_name":"scroll","x":1,"y":1,"direction":"sideways"}]' |
		"$HOLOCTL" run --script - --follow >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 2 ] || fail "a bad script is not a usage error"
	grep -q 'script\[0\].direction' "$tmp/err" || fail "a bad script: the field is not named"
	"$HOLOCTL" list --json >"$tmp/after" 2>"$tmp/err" || fail "list --json failed"
	cmp -s "$tmp/before" "$tmp/after" || fail "a bad script reached holod"

	# An instruction without a model: holod's 503, its message and the way out.
	"$HOLOCTL" run "open the settings" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "an instruction without a model did not fail"
	grep -q 'HTTP 503 no_model' "$tmp/err" || fail "no model: not holod's error"
	grep -q 'holoctl run --script FILE' "$tmp/err" || fail "no model: no hint"

	# holod stopped under a running task: the stream ends with the task interrupted, exit 5.
	# emptied first: the redirection below happens in the child, after this shell goes on to
	# read the file, which must not show the previous run's task
	: >"$tmp/follow.out"
	printf '%s' '[{"tool_name":"wait","duration":20}]' |
		"$HOLOCTL" run --script - --follow >"$tmp/follow.out" 2>"$tmp/follow.err" &
	follow_pid=$!
	# POST /v1/tasks answers 'queued', or already 'running' when the display was idle (api.md).
	wait_for 30 grep -qE '^task [0-9]+ (queued|running)' "$tmp/follow.out" ||
		fail "--follow: the wait task was not queued"
	id=$(task_id_of "$tmp/follow.out")
	wait_for 30 sh -c "\"$HOLOCTL\" --json show $id | grep -q '\"status\": *\"running\"'" ||
		fail "the wait task did not start"
	stop_holod
	wait "$follow_pid"
	rc=$?
	[ "$rc" -eq 5 ] || fail "run --follow exited $rc when holod stopped, not 5 (interrupted)"
	grep -q "^task $id interrupted" "$tmp/follow.out" ||
		fail "--follow: no interrupted line: $(cat "$tmp/follow.out")"
	start_holod

	# holod killed under a running task: the stream breaks off, the outcome is unknown: exit 6
	# with a sentence saying so, not a protocol error.
	# emptied first: the redirection below happens in the child, after this shell goes on to
	# read the file, which must not show the previous run's task
	: >"$tmp/follow.out"
	printf '%s' '[{"tool_name":"wait","duration":20}]' |
		"$HOLOCTL" run --script - --follow >"$tmp/follow.out" 2>"$tmp/follow.err" &
	follow_pid=$!
	wait_for 30 grep -qE '^task [0-9]+ (queued|running)' "$tmp/follow.out" ||
		fail "--follow: the second wait task was not queued"
	id=$(task_id_of "$tmp/follow.out")
	wait_for 30 sh -c "\"$HOLOCTL\" --json show $id | grep -q '\"status\": *\"running\"'" ||
		fail "the second wait task did not start"
	kill -KILL "$holod_pid"
	wait "$holod_pid"
	holod_pid=
	wait "$follow_pid"
	rc=$?
	[ "$rc" -eq 6 ] || fail "run --follow exited $rc when holod was killed, not 6 (unknown)"
	grep -q "lost holod while following task $id; its outcome is unknown" "$tmp/follow.err" ||
		fail "--follow after kill -9: $(cat "$tmp/follow.err")"
	start_holod

	# No daemon: the cause and the fix.
	stop_holod
	"$HOLOCTL" status >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "status without holod did not fail"
	grep -q "cannot connect to $XDG_RUNTIME_DIR/holod/holod.sock: .*start it with \`holod\`" "$tmp/err" ||
		fail "status without holod: $(cat "$tmp/err")"

	# A path that is not a socket is named as such, not as a stale socket.
	HOLOD_SOCKET=/etc/passwd "$HOLOCTL" status >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "status on /etc/passwd did not fail"
	grep -q "cannot connect to /etc/passwd: it is not a socket but a regular file" "$tmp/err" ||
		fail "status on /etc/passwd: $(cat "$tmp/err")"
}

# holoctl report: the page of a recorded task rendered by headless Chromium; the DOM it
# built says the page's own script ran (step count, every image decoded), the markers sit at
# the recorded pixels, and markup typed or named by a task is text, never code.
scenario_report() {
	cat >"$tmp/script.json" <<-'EOF'
	{"actions": [
	  {"tool_name": "click", "x": 35, "y": 35, "element": "<img src=x onerror=\"document.body.setAttribute('data-pwned','1')\">"},
	  {"tool_name": "double_click", "x": 95, "y": 35},
	  {"tool_name": "drag", "x": 100, "y": 100, "x2": 300, "y2": 200},
	  {"tool_name": "scroll", "x": 60, "y": 95, "direction": "down", "scroll_size": 2},
	  {"tool_name": "write", "content": "</pre><script>document.body.setAttribute('data-pwned','2')</script>"},
	  {"tool_name": "hotkey", "keys": ["ctrl", "a"]}
	], "settle_ms": 20}
	EOF
	"$HOLOCTL" run --script - --follow <"$tmp/script.json" >"$tmp/follow.out" 2>"$tmp/follow.err" ||
		fail "run --follow failed: $(cat "$tmp/follow.err")"
	id=$(task_id_of "$tmp/follow.out")
	"$HOLOCTL" report -o "$tmp/r.html" "$id" >"$tmp/out" 2>"$tmp/err" || fail "report failed"
	grep -q "^$tmp/r.html: task $id, 6 steps$" "$tmp/out" || fail "report: $(cat "$tmp/out")"
	dom() {
		HOME="$tmp" timeout 90 chromium --headless --no-sandbox --disable-gpu \
			--user-data-dir="$tmp/chromium" --window-size=1920,1080 --dump-dom \
			"file://$1" 2>"$tmp/chromium.err"
	}
	dom "$tmp/r.html" >"$tmp/dom" || fail "chromium: $(tail -n 5 "$tmp/chromium.err")"
	grep -q '<body data-steps="6" data-images-loaded="12"' "$tmp/dom" ||
		fail "report: the page's script did not count 6 steps and 12 decoded images: $(grep -o '<body[^>]*>' "$tmp/dom")"
	[ "$(grep -o '<section class="step"' "$tmp/dom" | wc -l)" -eq 6 ] || fail "report: not 6 step sections"
	grep -q 'data-pwned="' "$tmp/dom" && fail "report: markup from the task ran in the page"
	grep -q "&lt;/pre&gt;&lt;script&gt;document.body.setAttribute" "$tmp/dom" ||
		fail "report: the typed markup is not shown as text"
	grep -q '&lt;img src=x onerror=' "$tmp/dom" || fail "report: the element is not shown as text"
	# Markers at the recorded pixels (the screenshot is the whole 1280x720 screen).
	grep -q '<circle class="marker click" data-x="35" data-y="35" cx="35" cy="35"' "$tmp/dom" ||
		fail "report: no click marker at 35,35"
	grep -q '<circle class="marker double" data-x="95" data-y="35" cx="95" cy="35"' "$tmp/dom" ||
		fail "report: no double-click marker at 95,35"
	grep -q '<circle class="marker ring" cx="95" cy="35"' "$tmp/dom" || fail "report: no double-click ring"
	grep -q '<line class="marker drag" x1="100" y1="100" x2="300" y2="200"' "$tmp/dom" ||
		fail "report: no drag path 100,100 -> 300,200"
	grep -Eq '<line class="marker scroll" x1="60" y1="95" x2="60" y2="1[0-9][0-9]"' "$tmp/dom" ||
		fail "report: no downward scroll arrow at 60,95"
	grep -q '<b>hotkey</b> ctrl+a' "$tmp/dom" || fail "report: no hotkey caption"

	# Images beside the page: the same checks hold, and the files are the journal's PNGs.
	"$HOLOCTL" report --external-images -o "$tmp/ext.html" "$id" >"$tmp/out" 2>"$tmp/err" ||
		fail "report --external-images failed: $(cat "$tmp/err")"
	[ "$(ls "$tmp/ext-images" | wc -l)" -eq 12 ] || fail "report: not 12 PNGs in ext-images/"
	db_sha=$(sqlite3 "$state/holod.db" "SELECT sha256 FROM screenshots WHERE task_id = $id AND idx = 2 AND which = 'before'")
	[ "$(sha256sum <"$tmp/ext-images/2-before.png" | cut -d' ' -f1)" = "$db_sha" ] ||
		fail "report: ext-images/2-before.png is not the journaled screenshot"
	dom "$tmp/ext.html" >"$tmp/dom" || fail "chromium: $(tail -n 5 "$tmp/chromium.err")"
	grep -q '<body data-steps="6" data-images-loaded="12"' "$tmp/dom" ||
		fail "report --external-images: images not loaded: $(grep -o '<body[^>]*>' "$tmp/dom")"
	grep -q 'src="ext-images/0-before.png"' "$tmp/dom" || fail "report: no relative image path"

	# holoctl export: one line per step with its action, both coordinate spaces, the copied
	# screenshots (the journal's bytes) and the task's provenance.
	"$HOLOCTL" export -o "$tmp/exp" "$id" >"$tmp/out" 2>"$tmp/err" || fail "export failed: $(cat "$tmp/err")"
	grep -q "^$tmp/exp/steps.jsonl: 1 tasks, 6 steps$" "$tmp/out" || fail "export: $(cat "$tmp/out")"
	[ "$(wc -l <"$tmp/exp/steps.jsonl")" -eq 6 ] || fail "export: not 6 lines"
	[ "$(jq -s -c '[.[] | .step]' "$tmp/exp/steps.jsonl")" = "[0,1,2,3,4,5]" ] || fail "export: step order"
	jq -e -s ".[2] | .task_id == $id and .kind == \"script\" and .instruction == null
		and .action.tool_name == \"drag\" and .pixels == {\"x\": 100, \"y\": 100, \"x2\": 300, \"y2\": 200}
		and .image == {\"width\": 1280, \"height\": 720} and .status == \"ok\"
		and .screenshot == \"images/$id-2-before.png\" and .provenance.screen.width == 1280
		and .task_status == \"succeeded\"" "$tmp/exp/steps.jsonl" >/dev/null ||
		fail "export: line 2: $(sed -n 3p "$tmp/exp/steps.jsonl")"
	[ "$(sha256sum <"$tmp/exp/images/$id-2-before.png" | cut -d' ' -f1)" = "$db_sha" ] ||
		fail "export: images/$id-2-before.png is not the journaled screenshot"
	[ "$(ls "$tmp/exp/images" | wc -l)" -eq 12 ] || fail "export: not 12 images"
	"$HOLOCTL" export -o "$tmp/exp2" --since 2000-01-01 >"$tmp/out" 2>"$tmp/err" || fail "export --since failed"
	cmp -s "$tmp/exp/steps.jsonl" "$tmp/exp2/steps.jsonl" || fail "export --since differs from export ID"
	"$HOLOCTL" export -o "$tmp/exp3" --since 2999-01-01 >"$tmp/out" 2>"$tmp/err" || fail "export --since (none) failed"
	[ ! -s "$tmp/exp3/steps.jsonl" ] || fail "export --since 2999 exported steps"
	"$HOLOCTL" export -o "$tmp/exp4" --all "$id" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 2 ] || fail "export with both --all and an ID was accepted"

	"$HOLOCTL" report 999 -o "$tmp/none.html" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] && [ ! -e "$tmp/none.html" ] || fail "report of an unknown task"

	# holoctl replay: the recorded actions from step 1 on, as a new script task at the same
	# pixels that records what it replays; --dry-run journals them and injects nothing.
	"$HOLOCTL" replay --from 1 "$id" >"$tmp/out" 2>"$tmp/err" || fail "replay: $(cat "$tmp/out" "$tmp/err")"
	rid=$(sed -n "s/^task \([0-9]*\) replays task $id: 5 actions\$/\1/p" "$tmp/out")
	[ -n "$rid" ] || fail "replay: $(cat "$tmp/out")"
	grep -q "^task $rid succeeded after 5 steps$" "$tmp/out" || fail "replay outcome: $(cat "$tmp/out")"
	"$HOLOCTL" --json show "$rid" >"$tmp/rshow" || fail "show of the replay"
	jq -e -s ".[0].spec.replay_of == $id and .[0].spec.coords == \"pixels\"" "$tmp/rshow" >/dev/null ||
		fail "replay: the new task does not record replay_of $id"
	"$HOLOCTL" --json show "$id" >"$tmp/oshow" || fail "show of the original"
	[ "$(jq -c -s '[.[1].steps[1:][] | [.tool_call.tool_name, .pixels]]' "$tmp/oshow")" = \
	  "$(jq -c -s '[.[1].steps[] | [.tool_call.tool_name, .pixels]]' "$tmp/rshow")" ] ||
		fail "replay: not the original actions at the original pixels"
	mark=$(record_mark)
	"$HOLOCTL" replay --dry-run "$id" >"$tmp/out" 2>"$tmp/err" || fail "replay --dry-run: $(cat "$tmp/err")"
	did=$(sed -n "s/^task \([0-9]*\) replays task $id: 6 actions (dry run)\$/\1/p" "$tmp/out")
	[ -n "$did" ] || fail "replay --dry-run: $(cat "$tmp/out")"
	"$HOLOCTL" --json show "$did" | jq -e -s '[.[1].steps[].status] == ["dry_run","dry_run","dry_run","dry_run","dry_run","dry_run"]' >/dev/null ||
		fail "replay --dry-run: steps not dry_run"
	sleep 0.2
	[ -z "$(record_since "$mark")" ] || fail "replay --dry-run injected input: $(record_since "$mark")"
	"$HOLOCTL" replay --from 6 "$id" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] && grep -q "task $id has no executed step from step 6 on to replay" "$tmp/err" ||
		fail "replay --from 6: $(cat "$tmp/err")"

	# holoctl prune: recent tasks stay; with --older-than 0s they go with their steps and
	# PNGs in one transaction, and the bytes freed are those of their screenshots.
	"$HOLOCTL" prune --yes --older-than 30d >"$tmp/out" 2>"$tmp/err" || fail "prune 30d: $(cat "$tmp/err")"
	grep -q '^pruned 0 task(s) finished over 30d ago; 0 bytes' "$tmp/out" || fail "prune 30d: $(cat "$tmp/out")"
	shot_bytes=$(sqlite3 "$state/holod.db" "SELECT sum(bytes) FROM screenshots")
	"$HOLOCTL" prune --yes --older-than 0s >"$tmp/out" 2>"$tmp/err" || fail "prune 0s: $(cat "$tmp/err")"
	grep -q "^pruned 3 task(s) finished over 0s ago; $shot_bytes bytes of screenshots freed" "$tmp/out" ||
		fail "prune 0s: $(cat "$tmp/out") (expected $shot_bytes bytes)"
	[ -z "$(ls "$state/screenshots")" ] || fail "prune left $(ls "$state/screenshots")"
	[ "$(sqlite3 "$state/holod.db" "SELECT (SELECT count(*) FROM tasks) + (SELECT count(*) FROM steps)
		+ (SELECT count(*) FROM screenshots)")" = 0 ] || fail "prune left rows"
	[ "$(sqlite3 "$state/holod.db" 'PRAGMA foreign_key_check; PRAGMA integrity_check')" = ok ] ||
		fail "prune: the journal is not consistent"
	"$HOLOCTL" show "$id" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "show of a pruned task did not fail"
	"$HOLOCTL" prune --older-than 30 >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 2 ] && grep -q "'30' is not an age" "$tmp/err" || fail "prune without a unit: $(cat "$tmp/err")"
}

scenario_replay_check() {
	# Three moves on an unchanging screen: a checked replay finds every screen as recorded.
	printf '%s' '{"actions": [{"tool_name": "move", "x": 20, "y": 20},
		{"tool_name": "move", "x": 30, "y": 30}, {"tool_name": "move", "x": 40, "y": 40}],
		"settle_ms": 0}' >"$tmp/same.json"
	"$HOLOCTL" run --script - --follow <"$tmp/same.json" >"$tmp/out" 2>"$tmp/err" ||
		fail "recording: $(cat "$tmp/err")"
	same=$(task_id_of "$tmp/out")
	"$HOLOCTL" replay --check "$same" >"$tmp/out" 2>"$tmp/err" ||
		fail "replay --check on the same screen: $(cat "$tmp/out" "$tmp/err")"
	rid=$(sed -n "s/^task \([0-9]*\) replays task $same: 3 actions, each screen checked (at most 1% of the pixels may differ)\$/\1/p" "$tmp/out")
	[ -n "$rid" ] || fail "replay --check: $(cat "$tmp/out")"
	grep -q "^task $rid succeeded after 3 steps$" "$tmp/out" || fail "replay --check: $(cat "$tmp/out")"
	"$HOLOCTL" --json show "$rid" >"$tmp/rshow" || fail "show of the replay"
	jq -e -s ".[0].spec.check == {\"threshold\": 0.01, \"steps\": [0, 1, 2]}" "$tmp/rshow" >/dev/null ||
		fail "replay --check: the spec does not record the check: $(head -c 600 "$tmp/rshow")"

	# A recording during which a second window appears (while step 1 waits): its step 2 saw
	# that window. Replayed once the window is gone, steps 0 and 1 match and step 2 does not.
	printf '%s' '{"actions": [{"tool_name": "move", "x": 20, "y": 20},
		{"tool_name": "wait", "duration": 6}, {"tool_name": "move", "x": 40, "y": 40}],
		"settle_ms": 0}' >"$tmp/changed.json"
	"$HOLOCTL" run --script - <"$tmp/changed.json" >"$tmp/out" 2>"$tmp/err" ||
		fail "recording: $(cat "$tmp/err")"
	changed=$(task_id_of "$tmp/out")
	step_running() {
		[ "$(sqlite3 "$state/holod.db" "SELECT status FROM steps WHERE task_id = $changed AND idx = 1")" = running ]
	}
	wait_for 20 step_running || fail "step 1 of task $changed did not start"
	"$HOLO_TEST_CLIENT" --log "$tmp/client2.log" --geometry 400x300+600+300 --no-focus \
		>"$tmp/client2.err" 2>&1 &
	client2_pid=$!
	wait_for 10 grep -q '^ready ' "$tmp/client2.log" || fail "the second client did not become ready"
	# (it must be up before step 2's screenshot, or the recording cannot show it)
	step_running || fail "the second client came up after step 1 of task $changed ended"
	task_done() {
		[ "$(sqlite3 "$state/holod.db" "SELECT status FROM tasks WHERE id = $changed")" = succeeded ]
	}
	wait_for 20 task_done || fail "task $changed did not succeed"
	kill "$client2_pid"
	wait "$client2_pid" 2>/dev/null
	sleep 0.3

	"$HOLOCTL" replay --check "$changed" >"$tmp/out" 2>"$tmp/err"
	rc=$?
	cat "$tmp/out" "$tmp/err"
	[ "$rc" -eq 3 ] || fail "replay --check on a changed screen exited $rc, expected 3 (failed)"
	grep -Eq "step 2: the screen differs from step 2 of task $changed: 1[0-9]\.[0-9]{2}% of the pixels differ \(mean absolute difference [0-9]+\.[0-9]{2} of 255\), above the threshold of 1\.00%" \
		"$tmp/out" "$tmp/err" || fail "replay --check: no difference message"
	cid=$(sed -n "s/^task \([0-9]*\) replays task $changed: .*/\1/p" "$tmp/out")
	# It stopped before acting on the differing screen: steps 0 and 1 ran; step 2 is journaled
	# as not run, with the screen it was refused on (the review shows what differed).
	[ "$(sqlite3 "$state/holod.db" "SELECT group_concat(idx || ':' || status) FROM steps WHERE task_id = $cid")" = "0:ok,1:ok,2:error" ] ||
		fail "replay --check: steps $(sqlite3 "$state/holod.db" "SELECT idx, status FROM steps WHERE task_id = $cid")"
	sqlite3 "$state/holod.db" "SELECT error FROM steps WHERE task_id = $cid AND idx = 2" |
		grep -q "^not run: the screen differs from step 2 of task $changed: " ||
		fail "replay --check: step 2's error: $(sqlite3 "$state/holod.db" "SELECT error FROM steps WHERE task_id = $cid AND idx = 2")"
	wait_for 10 "$HOLOCTL" screenshot --task "$cid" --step 2 --which before -o "$tmp/refused.png" ||
		fail "replay --check: no screenshot of the refused step"
	"$HOLOCTL" --json screenshot --task "$cid" --step 2 --which before -o "$tmp/refused.png" |
		jq -e '.width == 1280 and .height == 720 and .verified' >/dev/null ||
		fail "replay --check: the refused step's screenshot"

	# A threshold above the difference lets it through.
	"$HOLOCTL" replay --check --threshold 50% "$changed" >"$tmp/out" 2>"$tmp/err" ||
		fail "replay --check --threshold 50%: $(cat "$tmp/out" "$tmp/err")"
	grep -q "succeeded after 3 steps$" "$tmp/out" || fail "replay --threshold 50%: $(cat "$tmp/out")"
	"$HOLOCTL" replay --check --threshold 2 "$changed" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 2 ] && grep -q "'2' is not a fraction of the pixels" "$tmp/err" || fail "threshold 2: $(cat "$tmp/err")"
	"$HOLOCTL" replay --threshold 0.1 "$changed" >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 2 ] && grep -q -- "--threshold goes with --check" "$tmp/err" || fail "threshold alone: $(cat "$tmp/err")"
}

scenario_focus() {
	# The client gave itself the focus (RevertToParent): once it is gone, keys go to the root.
	kill "$client_pid"
	wait "$client_pid" 2>/dev/null
	client_pid=
	"$HOLOCTL" do write hello >"$tmp/out" 2>"$tmp/err" || fail "do write without focus exited $?"
	grep -q '^step 0  write "hello"  warning  .*(no window had the keyboard focus: the keys went to the root window)$' \
		"$tmp/out" || fail "do write without focus: no warning state with the whole result"
	grep -q '^holoctl: warning: no window had the keyboard focus: the keys went to the root window; .*--require-focus' \
		"$tmp/err" || fail "do write without focus: no warning on stderr"
	warned=$(task_id_of_list)
	"$HOLOCTL" do --require-focus write typed >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] || fail "do --require-focus write without focus did not exit 1"
	grep -q '^holoctl: the action failed: step 0 (write): no window has the keyboard focus' "$tmp/err" ||
		fail "do --require-focus: no reason"

	# A client that takes the focus, with WM_CLASS and _NET_WM_PID as applications have.
	"$HOLO_TEST_CLIENT" --log "$tmp/client2.log" --geometry 300x200+500+300 --class holo-focus \
		>"$tmp/client2.err" 2>&1 &
	client_pid=$!
	wait_for 30 grep -q '^ready ' "$tmp/client2.log" || fail "the second client did not become ready"
	"$HOLOCTL" do --require-focus write k >"$tmp/out" 2>"$tmp/err" || fail "do --require-focus write with focus failed"
	grep -q '^step 0  write "k"  ok ' "$tmp/out" || fail "do write with focus: not ok"
	wait_for 15 grep -q "^key keycode=[0-9]* keysym=k " "$tmp/client2.log" || fail "the focused client got no k: $(cat "$tmp/client2.log")"

	# holoctl windows: the client (focused), its pid, class, geometry and title; the pointer.
	"$HOLOCTL" do move 600 400 >"$tmp/out" 2>"$tmp/err" || fail "do move failed"
	"$HOLOCTL" windows >"$tmp/out" 2>"$tmp/err" || fail "windows failed: $(cat "$tmp/err")"
	grep -Eq "^\*  0x[0-9a-f]{8}  +-  +$client_pid  holo-focus\.holo-focus  300x200\+500\+300  holo-test-client$" \
		"$tmp/out" || fail "windows: no line for the focused client: $(cat "$tmp/out")"
	grep -q '^pointer at 600,400$' "$tmp/out" || fail "windows: no pointer line: $(cat "$tmp/out")"
	"$HOLOCTL" --json windows >"$tmp/out" 2>"$tmp/err" || fail "windows --json failed"
	[ "$(jq -c '[.windows[] | select(.class == "holo-focus") | [.pid, .x, .y, .width, .height,
		.focused]] | first' "$tmp/out")" = "[$client_pid,500,300,300,200,true]" ] ||
		fail "windows --json: $(cat "$tmp/out")"
	[ "$(jq -c .pointer "$tmp/out")" = '{"x":600,"y":400}' ] || fail "windows --json: the pointer"
	"$HOLOCTL" windows --display :4242 >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 1 ] && grep -q 'does not drive display :4242' "$tmp/err" ||
		fail "windows --display :4242: $(cat "$tmp/err")"

	# show: the result cut to $COLUMNS, whole into a file and with --wide.
	COLUMNS=90 "$HOLOCTL" show "$warned" >"$tmp/out" 2>"$tmp/err" || fail "show failed"
	grep -q '^0  write .*  warning  .*\.\.\.$' "$tmp/out" || fail "show, COLUMNS=90: the result is not cut"
	awk 'length($0) > 90 { exit 1 }' "$tmp/out" || fail "show, COLUMNS=90: a line is wider than 90"
	"$HOLOCTL" show "$warned" >"$tmp/out" 2>"$tmp/err" || fail "show failed"
	grep -q '^0  write .*  warning  .*the keys went to the root window)$' "$tmp/out" ||
		fail "show into a file: the result is not whole"
	COLUMNS=90 "$HOLOCTL" show --wide "$warned" >"$tmp/out" 2>"$tmp/err" || fail "show --wide failed"
	grep -q 'the keys went to the root window)$' "$tmp/out" || fail "show --wide: the result is cut"
	# list: the error of the refused write.
	COLUMNS=100 "$HOLOCTL" list >"$tmp/out" 2>"$tmp/err" || fail "list failed"
	grep -Eq '^ *[0-9]+  failed  +1  .*write "typed"  +step 0 \(write\): no window has the.*\.\.\.$' "$tmp/out" ||
		fail "list, COLUMNS=100: the error is not cut"
	awk 'length($0) > 100 { exit 1 }' "$tmp/out" || fail "list, COLUMNS=100: a line is wider than 100"
	COLUMNS=100 "$HOLOCTL" list --wide >"$tmp/out" 2>"$tmp/err" || fail "list --wide failed"
	grep -q 'require_focus is set): activate a window first$' "$tmp/out" || fail "list --wide: the error is cut"
}

scenario_prune() {
	for d in 0.01 0.02 0.03; do
		"$HOLOCTL" do wait "$d" >"$tmp/out" 2>"$tmp/err" || fail "do wait $d failed"
	done
	count() {
		"$HOLOCTL" list | grep -Ec '^ *[0-9]+  succeeded '
	}
	# Nobody to ask (stdin is not a terminal): refused, saying how, and nothing sent.
	"$HOLOCTL" prune --older-than 0s </dev/null >"$tmp/out" 2>"$tmp/err"
	[ $? -eq 2 ] || fail "prune without --yes on a non-terminal did not exit 2"
	grep -q 'standard input is not a terminal to ask on: give --yes to prune, or --dry-run' "$tmp/err" ||
		fail "prune without --yes: $(cat "$tmp/err")"
	[ "$(count)" -eq 3 ] || fail "prune without --yes removed tasks"
	# --dry-run: what would go, nothing removed.
	"$HOLOCTL" prune --older-than 0s --dry-run </dev/null >"$tmp/out" 2>"$tmp/err" ||
		fail "prune --dry-run failed: $(cat "$tmp/err")"
	[ "$(grep -Ec '^ *[1-3]  succeeded  20' "$tmp/out")" -eq 3 ] || fail "prune --dry-run: not 3 rows: $(cat "$tmp/out")"
	grep -q '^would prune 3 task(s) finished over 0s ago, with [0-9]* bytes of screenshots' "$tmp/out" ||
		fail "prune --dry-run: no count: $(cat "$tmp/out")"
	"$HOLOCTL" --json prune --older-than 0s --dry-run >"$tmp/out" 2>"$tmp/err" || fail "prune --dry-run --json"
	[ "$(jq -c '[.dry_run, .tasks, [.would_prune[].id], (.before | type)]' "$tmp/out")" = \
		'[true,3,[3,2,1],"number"]' ] || fail "prune --dry-run --json: $(cat "$tmp/out")"
	# before=: the cutoff, checked (digits, not in the future, not with older_than)
	sock="$XDG_RUNTIME_DIR/holod/holod.sock"
	for q in 'before=abc' 'before=-1' 'before=99999999999999999' 'before=1&older_than=0' \
		'before='; do
		curl -sS --unix-socket "$sock" -X POST -o "$tmp/out" -w '%{http_code}' \
			"http://holod/v1/prune?$q" >"$tmp/code" 2>"$tmp/err"
		[ "$(cat "$tmp/code")" = 400 ] && grep -q 'before' "$tmp/out" ||
			fail "prune?$q: $(cat "$tmp/code") $(cat "$tmp/out")"
	done
	[ "$(count)" -eq 3 ] || fail "prune --dry-run removed tasks"
	# On a terminal it asks: "n" keeps everything.
	if command -v script >/dev/null 2>&1; then
		echo n | script -qec "$HOLOCTL prune --older-than 0s" /dev/null >"$tmp/out" 2>&1
		grep -q 'remove these 3 task(s), their steps and screenshots? \[y/N\]' "$tmp/out" ||
			fail "prune on a terminal did not ask: $(cat "$tmp/out")"
		grep -q 'nothing pruned' "$tmp/out" || fail "prune answered n: $(cat "$tmp/out")"
		[ "$(count)" -eq 3 ] || fail "prune answered n removed tasks"
		# "y" removes what was listed: a task that finished while it asked is not
		# among them and stays (a prune by its own older_than would take it too).
		mkfifo "$tmp/answer"
		script -qec "$HOLOCTL prune --older-than 0s" /dev/null <"$tmp/answer" >"$tmp/out" 2>&1 &
		script_pid=$!
		exec 3>"$tmp/answer"
		wait_for 20 grep -q 'remove these 3 task(s)' "$tmp/out" ||
			fail "prune on a terminal did not ask: $(cat "$tmp/out")"
		"$HOLOCTL" do wait 0.01 >"$tmp/out2" 2>"$tmp/err" || fail "do wait while asked failed"
		echo y >&3
		exec 3>&-
		wait "$script_pid" || fail "prune answered y: $(cat "$tmp/out")"
		grep -q '^pruned 3 task(s) finished over 0s ago' "$tmp/out" ||
			fail "prune answered y: $(cat "$tmp/out")"
		[ "$(count)" -eq 1 ] || fail "prune answered y removed a task it did not list"
	fi
	n=$(count)
	"$HOLOCTL" prune --older-than 0s --yes </dev/null >"$tmp/out" 2>"$tmp/err" || fail "prune --yes failed"
	grep -q "^pruned $n task(s) finished over 0s ago" "$tmp/out" || fail "prune --yes: $(cat "$tmp/out")"
	[ "$(count)" -eq 0 ] || fail "prune --yes left tasks"
	"$HOLOCTL" prune --older-than 0s --dry-run >"$tmp/out" 2>"$tmp/err" || fail "prune --dry-run of nothing"
	grep -q '^no task finished over 0s ago: nothing to prune$' "$tmp/out" || fail "prune --dry-run of nothing: $(cat "$tmp/out")"
}

# The id of the newest task (`holoctl list`'s first row).
task_id_of_list() {
	"$HOLOCTL" list --limit 1 | sed -n '2s/^ *\([0-9][0-9]*\) .*/\1/p'
}

case "$scenario" in
script) scenario_script ;;
focus) scenario_focus ;;
prune) scenario_prune ;;
report) scenario_report ;;
do) scenario_do ;;
cancel) scenario_cancel ;;
exit-codes) scenario_exit_codes ;;
replay-check) scenario_replay_check ;;
*) fail "unknown scenario" ;;
esac
[ -n "$holod_pid" ] && stop_holod
echo "ok: $scenario"
exit 0
