#!/bin/sh
# Desktop workflows (issue 15): the script-only actions on a private Xvfb with a real window
# manager (openbox) and real programs (mousepad, xterm), no model.
#   - launch mousepad, wait for its window and focus, type non-ASCII text, save it through the
#     GTK "Save As" dialog found by wait_for (never a fixed sleep); the file on disk matches;
#   - each action's failure modes: a program that does not exist, a window that never appears
#     (the timeout names what was on the screen), a bad regex (400), a target without a model
#     (400), write without a focused window (a note, or an error under require_focus);
#   - without a window manager, launch focuses the window it waited for and activate focuses
#     directly.
. "$(dirname "$0")/lib.sh"

require_tools openbox mousepad xterm xprop
start_xvfb 1024x768x24
# GTK without a session bus, accessibility bus or dconf: nothing outside $T is touched.
export NO_AT_BRIDGE=1 GSETTINGS_BACKEND=memory HOME="$T/home"
mkdir -p "$HOME"
openbox --sm-disable >"$T/openbox.log" 2>&1 &
OPENBOX_PID=$!
wm_up() { xprop -root _NET_SUPPORTING_WM_CHECK | grep -q 'window id'; }
wait_until 20 wm_up || { fail "openbox did not start"; exit 1; }
start_holod

# run_script NAME JSON: submits a script and waits for its end; TASK is its id and $BODY the
# final task.
run_script() {
	submit "$2"
	wait_until 60 task_final "$TASK" || fail "$1: task $TASK did not end"
	api GET "/v1/tasks/$TASK"
}
# step_field TASK N FILTER: a member of step N.
step_field() {
	curl -sS --unix-socket "$SOCK" "http://holod/v1/tasks/$1/steps" | jq -r ".steps[$2]$3"
}
expect_contains() {
	case "$2" in
	*"$3"*) ;;
	*) fail "$1: '$2' does not contain '$3'" ;;
	esac
}

# ---- the editor workflow -------------------------------------------------------------------
OUT="$T/out.txt"
TEXT='Grüße, 世界 ✓\nzweite Zeile'
run_script editor '{"script": [
  {"tool_name": "launch", "command": ["mousepad", "--disable-server"],
   "wait_window": {"class": "^Mousepad$"}, "timeout": 20},
  {"tool_name": "wait_for", "focus": {"class": "^Mousepad$"}, "timeout": 10},
  {"tool_name": "write", "content": "'"$TEXT"'"},
  {"tool_name": "hotkey", "keys": ["ctrl", "s"]},
  {"tool_name": "wait_for", "window": {"title": "^Save As$"}, "timeout": 10},
  {"tool_name": "activate", "window": {"title": "^Save As$"}, "timeout": 5},
  {"tool_name": "write", "content": "'"$OUT"'"},
  {"tool_name": "wait_for", "screen_stable": {"ms": 300}, "timeout": 10},
  {"tool_name": "hotkey", "keys": ["enter"]},
  {"tool_name": "wait_for", "window_gone": {"title": "^Save As$"}, "timeout": 10},
  {"tool_name": "wait_for", "window": {"title": "out\\.txt"}, "timeout": 10}],
  "require_focus": true, "settle_ms": 50}'
expect_json "editor status" .status succeeded
expect_json "editor error" .error null
printf 'Grüße, 世界 ✓\nzweite Zeile' >"$T/want.txt"
cmp -s "$OUT" "$T/want.txt" || fail "editor: the saved file differs: $(od -c "$OUT" 2>&1 | head -3)"
EDITOR_TASK=$TASK
EDITOR_PID=$(step_field "$TASK" 0 .result | sed -n 's/.*(pid \([0-9]*\),.*/\1/p')
[ -n "$EDITOR_PID" ] && kill -0 "$EDITOR_PID" 2>/dev/null ||
	fail "launch: no live pid in '$(step_field "$TASK" 0 .result)'"
# Its own process group and session, with its output in the task's log.
[ "$(ps -o pgid= -p "$EDITOR_PID" | tr -d ' ')" = "$EDITOR_PID" ] ||
	fail "launch: mousepad is not the leader of its own process group"
[ -f "$STATE/logs/$EDITOR_TASK.log" ] || fail "launch: no log file $STATE/logs/$EDITOR_TASK.log"
expect_contains "launch result" "$(step_field "$TASK" 0 .result)" 'window "Untitled'
expect_contains "activate result" "$(step_field "$TASK" 5 .result)" "through the window manager"

# ---- failure modes ---------------------------------------------------------------------------
run_script missing '{"script": [{"tool_name": "launch", "command": ["holod-no-such-program"]}]}'
expect_json "missing program" .status failed
expect_contains "missing program" "$(jq -r .error "$BODY")" \
	"cannot start 'holod-no-such-program': no such program (looked in PATH)"

# The editor's window is there, but a launch waits for a window of its own.
run_script never '{"script": [{"tool_name": "launch", "command": ["sleep", "30"],
  "wait_window": {"class": "^Mousepad$"}, "timeout": 0.5}]}'
expect_json "never status" .status failed
expect_contains "never: the timeout says what it waited for" "$(jq -r .error "$BODY")" \
	'timed out after 0.5 s waiting for a new window with class ~ "^Mousepad$"; windows on the screen:'
expect_contains "never: the timeout names the windows seen" "$(jq -r .error "$BODY")" \
	'"/tmp/'
SLEEP_PID=$(step_field "$TASK" 0 .error | sed -n 's/.*(pid \([0-9]*\)).*/\1/p')
[ -n "$SLEEP_PID" ] && kill -- "-$SLEEP_PID" 2>/dev/null

run_script gone '{"script": [{"tool_name": "wait_for", "window_gone": {"class": "Mousepad"},
  "timeout": 0.3}]}'
expect_contains "window_gone timeout" "$(jq -r .error "$BODY")" 'still there: "'

run_script region '{"script": [{"tool_name": "wait_for",
  "region_changed": {"x": 0, "y": 0, "width": 50, "height": 50}, "timeout": 0.3}]}'
expect_contains "region timeout" "$(jq -r .error "$BODY")" \
	"waiting for the region 50x50 at (0,0) to change; it stayed as in the step's before-screenshot"

run_script activate_none '{"script": [{"tool_name": "activate", "window": {"title": "^nothing$"}}]}'
expect_contains "activate nothing" "$(jq -r .error "$BODY")" \
	'no window with title ~ "^nothing$" to activate; windows on the screen:'

# A cancel stops a wait at its next poll, long before its timeout.
submit '{"script": [{"tool_name": "wait_for", "window": {"title": "^never$"}, "timeout": 60}]}'
wait_until 10 task_is "$TASK" running || fail "cancel: the wait did not start"
api POST "/v1/tasks/$TASK/cancel"
expect_code "cancel a wait" 202
CANCEL_S=$(($(test_time_limit 5000) / 1000))
wait_until "$CANCEL_S" task_is "$TASK" cancelled || fail "cancel: the wait did not stop within $CANCEL_S s"
api GET "/v1/tasks/$TASK"
expect_json "cancelled wait" .error "cancelled during step 0 (wait_for)"

api POST /v1/tasks '{"script": [{"tool_name": "wait_for", "window": {"title": "(Save"}}]}'
expect_error "regex" 400 bad_request \
	"script[0].window.title: invalid regex at offset 5: missing closing parenthesis"
api POST /v1/tasks '{"script": [{"tool_name": "click", "target": "the Save button"}]}'
expect_error "target without a model" 400 bad_request \
	"script[0].target: a target needs a model to locate it, and holod was started without one"
api POST /v1/actions '{"action": {"tool_name": "move", "target": "the OK button"}}'
expect_error "target without a model (actions)" 400 bad_request "action.target: a target needs a model"

# Keys with no focused window: openbox gone, the editor closed, the focus falls to the root.
kill -- "-$EDITOR_PID"
# openbox leaves its stale _NET_SUPPORTING_WM_CHECK on the root: holod must see through it.
kill "$OPENBOX_PID"
wait "$OPENBOX_PID" 2>/dev/null
run_script nofocus '{"script": [{"tool_name": "move", "x": 1000, "y": 700},
  {"tool_name": "hotkey", "keys": ["ctrl", "l"]}]}'
expect_json "no focus: it runs" .status succeeded
expect_contains "no focus: the result says so" "$(step_field "$TASK" 1 .result)" \
	"no window had the keyboard focus"
run_script nofocus_required '{"script": [{"tool_name": "write", "content": "x"}],
  "require_focus": true}'
expect_json "require_focus" .status failed
expect_contains "require_focus" "$(jq -r .error "$BODY")" "no window has the keyboard focus"

# launch without a window manager: the window it waited for gets the focus, so the next keys
# reach it (the pointer, moved away, does not decide where they go).
run_script launch_focus '{"script": [
  {"tool_name": "launch", "command": ["xterm", "-T", "holod-launched"],
   "wait_window": {"title": "^holod-launched$"}, "timeout": 20},
  {"tool_name": "move", "x": 1000, "y": 700},
  {"tool_name": "write", "content": "x"}], "require_focus": true}'
expect_json "launch focus" .status succeeded
expect_contains "launch focus" "$(step_field "$TASK" 0 .result)" \
	'"holod-launched" (XTerm) after'
expect_contains "launch focus" "$(step_field "$TASK" 0 .result)" \
	"focused directly (no window manager)"
XTERM_PID=$(step_field "$TASK" 0 .result | sed -n 's/.*(pid \([0-9]*\),.*/\1/p')
[ -n "$XTERM_PID" ] && kill -- "-$XTERM_PID" 2>/dev/null

# activate without a window manager: direct focus.
run_script direct '{"script": [
  {"tool_name": "launch", "command": ["xterm", "-T", "holod-term"],
   "wait_window": {"title": "^holod-term$"}, "timeout": 20},
  {"tool_name": "move", "x": 1000, "y": 700},
  {"tool_name": "activate", "window": {"class": "^XTerm$"}, "timeout": 5},
  {"tool_name": "write", "content": "x"}], "require_focus": true}'
expect_json "direct activate" .status succeeded
expect_contains "direct activate" "$(step_field "$TASK" 2 .result)" "by direct focus"
XTERM_PID=$(step_field "$TASK" 0 .result | sed -n 's/.*(pid \([0-9]*\),.*/\1/p')
[ -n "$XTERM_PID" ] && kill -- "-$XTERM_PID" 2>/dev/null

pass_or_fail
