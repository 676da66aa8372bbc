#!/bin/sh
# The README's quick start as written (issue 33): its mousepad script, cut out of README.md, run
# by holoctl against a `holod --virtual` daemon started with no other option. holod starts a
# window manager on its display by default (--session auto), so the editor and its "Save As"
# dialog get the focus and the file is saved; the window manager is stopped with the display.
# Without openbox, or with --session none, none is started.
# The one change to the script: the file goes into the test's directory, not /tmp/hello.txt.
. "$(dirname "$0")/lib.sh"
require_tools openbox mousepad timeout

README="$HOLOD_SOURCE_ROOT"/"README.md" # (so quoted, check-doc-refs finds README.md)
awk '/^    echo .\[\{"tool_name":"launch","command":\["mousepad"\]/ { on = 1 }
     on { sub(/^    /, ""); print }
     on && /holoctl run --script - --follow/ { exit }' "$README" >"$T/quickstart.sh"
grep -q 'holoctl run --script - --follow' "$T/quickstart.sh" ||
	{ fail "no mousepad script in README.md"; pass_or_fail; }
grep -q '/tmp/hello\.txt' "$T/quickstart.sh" ||
	{ fail "the README's script does not save /tmp/hello.txt: $(cat "$T/quickstart.sh")"; pass_or_fail; }
sed -i -e "s|/tmp/hello\\.txt|$T/hello.txt|g" -e "s|build/cli/holoctl|\"\$HOLOCTL\"|g" \
	"$T/quickstart.sh"

# GTK without a session bus, accessibility bus or dconf: nothing outside $T is touched.
export NO_AT_BRIDGE=1 GSETTINGS_BACKEND=memory HOME="$T/home"
mkdir -p "$HOME"
start_holod --virtual 1024x768
grep -q "window manager openbox runs on :" "$HOLOD_LOG" ||
	fail "holod did not report its window manager: $(cat "$HOLOD_LOG")"
WM_PID=$(sed -n 's/.*started the session on :[0-9]* (pid \([0-9]*\)).*/\1/p' "$HOLOD_LOG")
[ -n "$WM_PID" ] && kill -0 "$WM_PID" 2>/dev/null || fail "no window manager process: '$WM_PID'"

export HOLOCTL
timeout 120 sh "$T/quickstart.sh" >"$T/run.out" 2>&1 ||
	fail "the README's script failed ($?): $(cat "$T/run.out")"
[ "$(cat "$T/hello.txt" 2>/dev/null)" = hello ] ||
	fail "the file was not saved with 'hello': '$(cat "$T/hello.txt" 2>&1)'; $(cat "$T/run.out")"

stop_holod || fail "holod exited non-zero: $(cat "$HOLOD_LOG")"
[ -n "$WM_PID" ] && kill -0 "$WM_PID" 2>/dev/null && fail "the window manager outlived holod"

# No openbox in PATH: --session auto says so and starts nothing; --session none is silent.
mkdir -p "$T/bin"
ln -s "$(command -v Xvfb)" "$T/bin/Xvfb"
HOLOD_LOG="$T/holod-no-openbox.log"
PATH="$T/bin" "$HOLOD" --virtual 320x240 2>>"$HOLOD_LOG" &
HOLOD_PID=$!
wait_until 30 status_ok || fail "holod without openbox did not become ready"
grep -q "warning: --session auto: openbox is not installed, so no window manager runs on the virtual display:" \
	"$HOLOD_LOG" || fail "no warning without openbox: $(cat "$HOLOD_LOG")"
grep -q "started the session" "$HOLOD_LOG" && fail "a session started without openbox"
stop_holod || fail "holod (no openbox) exited non-zero"
HOLOD_LOG="$T/holod-none.log"
start_holod --virtual 320x240 --session none
grep -q "session\|window manager" "$HOLOD_LOG" && fail "--session none: $(cat "$HOLOD_LOG")"
stop_holod || fail "holod (--session none) exited non-zero"
pass_or_fail
