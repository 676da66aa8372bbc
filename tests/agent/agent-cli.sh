#!/bin/sh
# `holoctl run "..." --follow` with a model: each step is printed as it happens (action, where
# it clicked in pixels and model coordinates, the model's thought), and holoctl exits with the
# task's outcome.
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
start_agent
export HOLOD_SOCKET="$SOCK"

"$HOLOCTL" run --follow --max-steps 2 Click the red block. >"$T/out" 2>"$T/err"
RC=$?
[ "$RC" = 3 ] || fail "holoctl run --follow exited $RC, expected 3 (failed): $(cat "$T/err")"
cat "$T/out"
[ "$(grep -c '^step [01]  click @ 355,222 (model 555,555)  ok  .*: clicked left x1 at (355,222)$' "$T/out")" = 2 ] ||
	fail "step lines: $(cat "$T/out")"
[ "$(grep -c '^        thought: ' "$T/out")" = 2 ] || fail "thought lines: $(cat "$T/out")"
grep -q 'max_steps budget (2) reached without an answer' "$T/out" "$T/err" ||
	fail "no outcome: $(cat "$T/out" "$T/err")"

# An instruction to a holod without a model: the 503 is explained.
stop_holod || fail "holod exit status $?"
rm -f "$SOCK"
start_holod
"$HOLOCTL" run Click the red block. >"$T/out" 2>"$T/err" && fail "holoctl run without a model succeeded"
grep -q 'no model loaded' "$T/err" || fail "no-model message: $(cat "$T/err")"
stop_holod || fail "holod exit status $?"
pass_or_fail
