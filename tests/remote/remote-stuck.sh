#!/bin/sh
# Stuck steps (issue 33) against the scripted OpenAI-compatible server (fake-openai.c) on a
# static screen (the test client does not repaint on input): the same click answered again and
# again leaves the screen unchanged, so after --stuck-warn steps the next request's tool output
# says so, and after --stuck-stop the task ends `stuck` with its evidence in the API, the
# journal, the report and holoctl's exit status; clicks that differ on the unchanged screen end
# it too, with no repeated action as evidence; 0 and 0 turn it off (the max_steps budget ends
# the task instead).
. "$(dirname "$0")/remote-lib.sh"

click() {
	printf '{"note":null,"thought":"Click it","tool_call":{"tool_name":"click","element":"%s","x":%d,"y":%d}}' \
		"$1" "$2" "$3"
}
printf 'ok %s\n' "$(click 'the block' 250 250)" >"$SCRIPT"
fake_start

start_xvfb 640x400x24
start_client || exit 1
start_holod --remote "$FAKE_URL" --history window --window 1 --stuck-stop 5

# ---- the same click on a screen it does not change: warned from the third step, stuck at the
# fifth (holod's --stuck-stop), both streaks in the evidence
submit '{"instruction": "Click the block until something happens.", "max_steps": 20}'
wait_task "$TASK" stuck 60
api GET "/v1/tasks/$TASK"
expect_json "provenance" '.provenance.stuck | "\(.warn) \(.stop)"' "3 5"
expect_json "evidence reason" .stuck.reason unchanged_screen
expect_json "evidence steps" '.stuck.steps | "\(.[0]) \(.[1])"' "0 4"
expect_json "evidence count" .stuck.count 5
expect_json "evidence action" '.stuck.action | "\(.tool_name) \(.x) \(.y)"' "click 250 250"
SHA=$(jq -r .stuck.screen_sha256 "$BODY")
echo "$SHA" | grep -Eq '^[0-9a-f]{64}$' || fail "evidence: no screen hash: $(cat "$BODY")"
case "$(jq -r .error "$BODY")" in
"stuck: the screen did not change during 5 steps in a row (steps 0 to 4, screen sha256 "*) ;;
*) fail "error: $(jq -r .error "$BODY")" ;;
esac
api GET "/v1/tasks/$TASK/steps"
jq -e '(.steps | length) == 5 and .steps[0].stuck == null and .steps[1].stuck == null
	and all(.steps[2:][]; .stuck | test("^The screen has not changed during the last [345] steps"))
	and (.steps[4].stuck | contains("You repeated the same action (click at (250,250)) 5 times in a row (steps 0 to 4)."))' \
	"$BODY" >/dev/null || fail "steps' stuck warnings: $(jq -c '[.steps[].stuck]' "$BODY")"
# What the model was told: the fourth request (req-3) carries step 2's tool output and its warning,
# the third (req-2) none. The warning is inside the tool output, after the action's result.
grep -q 'The screen has not changed during the last 3 steps (steps 0 to 2)' "$REC/req-3.json" ||
	fail "the fourth request has no warning: $(head -c 3000 "$REC/req-3.json")"
grep -q 'clicked left x1 at (250,250) The screen has not changed' "$REC/req-3.json" ||
	fail "the warning does not follow the tool output"
grep -q 'has not changed' "$REC/req-2.json" && fail "the third request was warned already"
[ "$(sqlite3 "$DB" "SELECT status, json_extract(stuck, '\$.reason'), json_extract(stuck, '\$.screen_sha256') FROM tasks WHERE id = $TASK")" = "stuck|unchanged_screen|$SHA" ] ||
	fail "journal: $(sqlite3 "$DB" "SELECT status, stuck FROM tasks WHERE id = $TASK")"
[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $TASK AND stuck IS NOT NULL")" = 3 ] ||
	fail "journal: not 3 warned steps"
"$HOLOCTL" report "$TASK" -o "$T/report.html" >/dev/null 2>"$T/report.err" ||
	fail "report: $(cat "$T/report.err")"
grep -q 'unchanged_screen' "$T/report.html" && grep -q "$SHA" "$T/report.html" &&
	grep -q 'The screen has not changed during the last 3 steps' "$T/report.html" ||
	fail "the report does not show the evidence and warnings"
"$HOLOCTL" show "$TASK" >"$T/show.out" 2>&1 || fail "show failed: $(cat "$T/show.out")"
grep -q "^stuck *unchanged_screen, steps 0 to 4, screen $(echo "$SHA" | cut -c1-12)" "$T/show.out" ||
	fail "show does not show the evidence: $(cat "$T/show.out")"
"$HOLOCTL" list --status stuck >"$T/list.out" || fail "list --status stuck failed"
grep -q "^ *$TASK " "$T/list.out" || fail "list --status stuck: $(cat "$T/list.out")"

# ---- clicks that differ, the screen unchanged: holoctl's numbers, exit status 7
printf 'ok %s\nok %s\nok %s\n' "$(click a 100 600)" "$(click b 500 600)" "$(click c 900 600)" \
	>"$SCRIPT"
"$HOLOCTL" run --follow --stuck-warn 2 --stuck-stop 3 --max-steps 20 \
	"Click around." >"$T/run.out" 2>&1
rc=$?
[ "$rc" -eq 7 ] || fail "run --follow exited $rc, not 7 (stuck): $(cat "$T/run.out")"
TASK=$(sqlite3 "$DB" "SELECT max(id) FROM tasks")
api GET "/v1/tasks/$TASK"
expect_json "cli: status" .status stuck
expect_json "cli: evidence" '"\(.stuck.reason) \(.stuck.count) \(.stuck.action)"' \
	"unchanged_screen 3 null"
expect_json "cli: spec" '"\(.spec.stuck_warn) \(.spec.stuck_stop)"' "2 3"
"$HOLOCTL" run --script /dev/null --stuck-warn 2 >/dev/null 2>"$T/usage.err"
[ $? -eq 2 ] && grep -q "apply to instructions only" "$T/usage.err" ||
	fail "--stuck-warn with a script: $(cat "$T/usage.err")"
"$HOLOCTL" run --stuck-stop 1001 x >/dev/null 2>"$T/usage.err"
[ $? -eq 2 ] && grep -q -- "--stuck-stop must be from 0 (off) to 1000" "$T/usage.err" ||
	fail "--stuck-stop 1001: $(cat "$T/usage.err")"
api POST /v1/tasks '{"instruction": "x", "stuck_warn": 1001}'
expect_error "stuck_warn out of range" 400 bad_request "stuck_warn"

# ---- 0 and 0: never warned, never stuck; the step budget ends it
printf 'ok %s\n' "$(click 'the block' 250 250)" >"$SCRIPT"
submit '{"instruction": "Click.", "max_steps": 7, "stuck_warn": 0, "stuck_stop": 0}'
wait_task "$TASK" failed 60
[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $TASK AND stuck IS NULL")" = 7 ] ||
	fail "a task with stuck steps off was warned"
api GET "/v1/tasks/$TASK"
expect_json "off: no evidence" .stuck null

pass_or_fail
