#!/bin/sh
# The holo-nano harness's actions in holod's vocabulary, run by the executor on Xvfb and seen by
# the recording test client: drag_to drags from where the pointer is, hold_and_tap_key holds its
# keys while tapping the others in order, update_plan does nothing on the screen and journals
# the plan with an empty result.
. "$(dirname "$0")/lib.sh"
require_tools
start_xvfb 800x600x24
start_holod
start_client || { echo "SKIP: the recording test client is not built"; exit 77; }

# ---- a script: focus the field, move, drag_to, hold shift while tapping a and b, a plan
submit '{"script": [
  {"tool_name": "click", "x": 50, "y": 140},
  {"tool_name": "move", "x": 20, "y": 140},
  {"tool_name": "drag_to", "element": "the end of the field", "x": 260, "y": 150},
  {"tool_name": "hold_and_tap_key", "hold_keys": ["shift"], "tap_keys": ["a", "b"]},
  {"tool_name": "update_plan", "goals": [{"title": "Type AB", "status": "done"},
     {"title": "Check the field", "status": "running"}]},
  {"tool_name": "answer", "content": "done"}]}'
T1=$TASK
wait_task "$T1" succeeded

api GET "/v1/tasks/$T1/steps"
expect_code steps 200
expect_json steps '.steps | length' 6
expect_json steps '[.steps[].status] | unique | join(",")' ok
expect_json steps '.steps[2].result' "dragged (20,140) to (260,150)"
expect_json steps '.steps[2].pixels.x' 260
expect_json steps '.steps[3].result' "held shift, tapped a,b"
expect_json steps '.steps[4].result' ""
expect_json steps '.steps[4].tool_call.goals[1].title' "Check the field"
expect_json steps '.steps[4].tool_call.goals[0].status' done

# What the client saw: the press where the pointer was, the release at the destination, the
# taps with Shift held, Shift released at the end.
released() { grep -q '^keyrelease keycode=50 keysym=Shift_L' "$CLIENT_LOG"; }
wait_until 10 released || fail "client: shift was never released"
grep -q '^press button=1 x=20 y=140 ' "$CLIENT_LOG" || fail "client: no press at (20,140)"
grep -q '^release button=1 x=260 y=150 ' "$CLIENT_LOG" || fail "client: no release at (260,150)"
keys=$(grep '^key .*state=0x1 ' "$CLIENT_LOG" | sed -n 's/.* keysym=\([A-Za-z]*\) .*/\1/p' | tr '\n' ' ')
[ "$keys" = "A B " ] || fail "client: keys with Shift held '$keys', expected 'A B '"
[ "$(grep -c '^key keycode=50 keysym=Shift_L' "$CLIENT_LOG")" = 1 ] ||
	fail "client: shift pressed more than once"

# ---- bad input: clear errors naming the field
api POST /v1/tasks '{"script": [{"tool_name": "hold_and_tap_key", "hold_keys": ["ctrl", "ctr"], "tap_keys": ["a"]}]}'
expect_error "hold key name" 400 bad_request "script[0].hold_keys[1]: unknown key name 'ctr'"
api POST /v1/tasks '{"script": [{"tool_name": "hold_and_tap_key", "hold_keys": ["ctrl", "alt", "shift", "super"], "tap_keys": ["a"]}]}'
expect_error "hold keys" 413 payload_too_large "script[0].hold_keys: 4 keys exceed the limit of 3"
api POST /v1/tasks '{"script": [{"tool_name": "update_plan", "goals": [{"title": "x", "status": "started"}]}]}'
expect_error "goal status" 400 bad_request "script[0].goals[0].status: expected one of todo, running, done, failed"

# ---- holoctl do: the same actions from the command line
"$HOLOCTL" do move 30 140 >/dev/null || fail "holoctl do move"
"$HOLOCTL" do drag_to 200 150 >"$T/do.out" || fail "holoctl do drag_to"
grep -q 'dragged (30,140) to (200,150)' "$T/do.out" || fail "holoctl do drag_to: $(cat "$T/do.out")"
"$HOLOCTL" do hold_and_tap_key ctrl a >"$T/do.out" || fail "holoctl do hold_and_tap_key"
grep -q 'held ctrl, tapped a' "$T/do.out" || fail "holoctl do hold_and_tap_key: $(cat "$T/do.out")"
"$HOLOCTL" do update_plan "running:Open it" "todo:Save" >/dev/null || fail "holoctl do update_plan"
"$HOLOCTL" do update_plan "started:Open it" 2>"$T/do.err" && fail "holoctl do update_plan took a bad status"
grep -q "STATUS:TITLE" "$T/do.err" || fail "holoctl do update_plan: $(cat "$T/do.err")"
pass_or_fail
