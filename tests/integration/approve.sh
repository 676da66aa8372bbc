#!/bin/sh
# Approval gates (issue 32), through scripts (tests/remote/remote-ask.sh has a model's step
# denied): a held step shows its action, reason, point and target crop in the task's status, in
# holod's status and on the event stream; `holoctl approve` runs it, `holoctl deny` fails the
# script's step without acting, no answer within --approve-timeout fails it closed; each is
# journaled with who decided and when; approving twice, or a task that holds nothing, is a clear
# error; risky holds what the rules name (a hotkey that closes, write into a terminal found on the
# screen, a user's window regex) and lets the rest run; a bad rule file stops holod.
. "$(dirname "$0")/lib.sh"
require_tools
start_xvfb 640x400x24
start_client || exit 1
cat >"$T/rules.json" <<'EOF'
{"windows": [{"title": "^holod-secret$"}]}
EOF
start_holod --approve-timeout 600 --approve-rules "$T/rules.json"

hctl() {
	HOLOD_SOCKET="$SOCK" "$HOLOCTL" "$@"
}
journal_held() { # TASK INDEX FILTER
	sqlite3 "$DB" "SELECT json_extract(held, '$3') FROM steps WHERE task_id = $1 AND idx = $2"
}

# ---- all: the click waits; what it shows; approved, it runs
cat >"$T/click.json" <<'EOF'
{"actions": [{"tool_name": "click", "x": 100, "y": 60, "element": "the white area"},
             {"tool_name": "answer", "content": "clicked"}]}
EOF
hctl run --script "$T/click.json" --approve all --follow >"$T/follow.out" 2>"$T/follow.err" &
FOLLOW=$!
wait_until 30 grep -q "waits for approval" "$T/follow.out" ||
	fail "run --follow did not show the held step: $(cat "$T/follow.out" "$T/follow.err")"
A=$(sqlite3 "$DB" "SELECT max(id) FROM tasks")
grep -q "holoctl approve $A, or holoctl deny $A" "$T/follow.out" || fail "hint: $(cat "$T/follow.out")"
api GET "/v1/tasks/$A"
expect_json "held" .status waiting_for_approval
expect_json "held" .waiting.for approval
expect_json "held" .waiting.step 0
expect_json "held" .waiting.action.tool_name click
expect_json "held" .waiting.action.element "the white area"
expect_json "held" .waiting.mode all
expect_json "held" .waiting.reason "--approve all holds every action"
expect_json "held" .waiting.point.x 100
jq -e '.waiting.crop | startswith("data:image/png;base64,")' "$BODY" >/dev/null ||
	fail "no target crop: $(jq -c '.waiting | del(.crop)' "$BODY")"
jq -r '.waiting.crop' "$BODY" | sed 's/^data:image\/png;base64,//' | base64 -d >"$T/crop.png"
[ "$(od -An -tx1 -j16 -N8 "$T/crop.png" | tr -d ' \n')" = 0000010000000100 ] ||
	fail "the crop is not 256x256: $(od -An -tx1 -N24 "$T/crop.png")"
api GET /v1/status
expect_json "status" '.displays[0].waiting.action.tool_name' click
[ "$(grep -c '^press ' "$CLIENT_LOG")" = 0 ] || fail "a held click was injected"
# A reply is not an approval; a deny's reason is checked.
api POST "/v1/tasks/$A/reply" '{"text": "yes"}'
expect_error "reply to a held step" 409 conflict "waits for an approval: holoctl approve or deny"
api POST "/v1/tasks/$A/deny" '{"reason": 5}'
expect_error "bad reason" 400 bad_request "reason: expected a string"
api POST "/v1/tasks/$A/approve" '{"yes": true}'
expect_error "approve body" 400 bad_request "approve takes no body"
hctl approve "$A" >"$T/approve.out" 2>&1 || fail "holoctl approve: $(cat "$T/approve.out")"
grep -q "task $A: approved" "$T/approve.out" || fail "approve output: $(cat "$T/approve.out")"
# A second approve: the step was already approved (or is no longer waiting).
hctl approve "$A" >"$T/twice.out" 2>&1
[ $? = 1 ] || fail "approving twice succeeded"
grep -Eq "task $A (was already approved|is not waiting for an approval)" "$T/twice.out" ||
	fail "approve twice: $(cat "$T/twice.out")"
wait "$FOLLOW" || fail "run --follow exit status $?: $(cat "$T/follow.out" "$T/follow.err")"
wait_task "$A" succeeded
grep -q '^press button=1 .* root_x=100 root_y=60 ' "$CLIENT_LOG" || fail "the approved click did not land"
[ "$(journal_held "$A" 0 '$.decision')" = approved ] || fail "approval not journaled"
[ "$(journal_held "$A" 0 '$.uid')" = "$(id -u)" ] || fail "approver's uid not journaled"
[ "$(journal_held "$A" 0 '$.mode')" = all ] || fail "mode not journaled"
[ "$(sqlite3 "$DB" "SELECT json_extract(held, '$.answered_us') >= json_extract(held, '$.since_us')
	FROM steps WHERE task_id = $A AND idx = 0")" = 1 ] || fail "approval time not journaled"
[ -z "$(journal_held "$A" 1 '$.decision')" ] || fail "answer was held"
hctl approve "$A" >"$T/done.out" 2>&1
grep -q "task $A is not waiting for an approval (it has finished)" "$T/done.out" ||
	fail "approve a finished task: $(cat "$T/done.out")"
# The report and the export say who approved.
hctl report "$A" -o "$T/report.html" >/dev/null 2>&1 || fail "holoctl report"
grep -q "approved by uid $(id -u)" "$T/report.html" || fail "the report does not say who approved"
hctl export -o "$T/exp" "$A" >/dev/null 2>&1 || fail "holoctl export"
grep -q '"decision":"approved"' "$T/exp/steps.jsonl" || fail "the export lacks the approval"

# ---- risky: a hotkey that closes waits, and a denial fails the script's step, nothing pressed
P0=$(grep -c '^key' "$CLIENT_LOG")
submit '{"script": [{"tool_name": "hotkey", "keys": ["alt", "F4"]}], "approve": "risky"}'
B=$TASK
wait_until 30 task_is "$B" waiting_for_approval || fail "alt+f4 was not held: $(task_status "$B")"
api GET "/v1/tasks/$B"
expect_json "risky" .waiting.reason "hotkey presses alt+f4, one of the approval rules' hotkeys"
hctl deny "$B" "not that window" >/dev/null 2>&1 || fail "holoctl deny"
wait_task "$B" failed
api GET "/v1/tasks/$B"
expect_json "denied" .error "step 0 (hotkey): denied by the user: not that window"
[ "$(grep -c '^key' "$CLIENT_LOG")" = "$P0" ] || fail "a denied hotkey was pressed"
[ "$(journal_held "$B" 0 '$.decision')" = denied ] || fail "denial not journaled"
[ "$(journal_held "$B" 0 '$.denial')" = "not that window" ] || fail "denial reason not journaled"

# ---- risky: a key held down by an earlier step and a key pressed later make ctrl+w: held,
# though neither step alone is a risky hotkey; denied, the w is never pressed
submit '{"script": [{"tool_name": "key_down", "key": "ctrl"},
	{"tool_name": "hotkey", "keys": ["w"]}], "approve": "risky"}'
K=$TASK
wait_until 30 task_is "$K" waiting_for_approval || fail "ctrl held + w was not held: $(task_status "$K")"
api GET "/v1/tasks/$K"
expect_json "held key" .waiting.step 1
expect_json "held key" .waiting.reason \
	"hotkey presses ctrl+w with the key(s) held down by an earlier key_down, one of the approval rules' hotkeys"
P1=$(grep -c '^key .* keysym=w ' "$CLIENT_LOG")
hctl deny "$K" >/dev/null 2>&1 || fail "deny $K"
wait_task "$K" failed
[ "$(grep -c '^key .* keysym=w ' "$CLIENT_LOG")" = "$P1" ] || fail "the denied w was pressed"
[ "$(journal_held "$K" 1 '$.decision')" = denied ] || fail "held-key denial not journaled"
[ "$(sqlite3 "$DB" "SELECT held IS NULL FROM steps WHERE task_id = $K AND idx = 0")" = 1 ] ||
	fail "the key_down itself was held"

# ---- risky lets the rest run; a user's window regex holds a click on that window
submit '{"script": [{"tool_name": "click", "x": 50, "y": 50}], "approve": "risky"}'
wait_task "$TASK" succeeded
xterm -T holod-secret -geometry 40x10+300+200 2>/dev/null &
XT=$!
# mapped, not only created: a move before the map finds the root under the point (seen once)
wm_window() { xwininfo -name holod-secret 2>/dev/null | grep -q 'Map State: IsViewable'; }
if command -v xwininfo >/dev/null 2>&1 && wait_until 20 wm_window; then
	submit '{"script": [{"tool_name": "move", "x": 320, "y": 220}], "approve": "risky"}'
	C=$TASK
	wait_until 30 task_is "$C" waiting_for_approval || fail "a move over holod-secret was not held"
	api GET "/v1/tasks/$C"
	expect_json "window" .waiting.target.title holod-secret
	expect_json "window" .waiting.target.class XTerm
	expect_json "window" .waiting.reason \
		'move acts on a window the approval rules name (title ~ "^holod-secret$")'
	hctl deny "$C" >/dev/null 2>&1 || fail "deny $C"
	wait_task "$C" failed
	# write into the terminal, once it has the focus (activate acts on no point or keys)
	submit '{"script": [{"tool_name": "activate", "window": {"title": "^holod-secret$"}},
		{"tool_name": "write", "content": "ls"}], "approve": "risky"}'
	D=$TASK
	wait_until 30 task_is "$D" waiting_for_approval || fail "the write into xterm was not held"
	api GET "/v1/tasks/$D"
	expect_json "terminal" .waiting.step 1
	expect_json "terminal" .waiting.action.tool_name write
	expect_json "terminal" .waiting.reason "write types into a terminal (window class XTerm)"
	expect_json "terminal" .waiting.target.title holod-secret
	jq -e '.waiting.crop | startswith("data:image/png;base64,")' "$BODY" >/dev/null ||
		fail "no crop of the terminal"
	# cancel ends the wait
	api POST "/v1/tasks/$D/cancel"
	wait_task "$D" cancelled
	api GET "/v1/tasks/$D"
	expect_json "cancel" .error "cancelled during step 1 (write)"
else
	echo "SKIP part: no xwininfo, or xterm did not map"
fi
kill "$XT" 2>/dev/null

# ---- no answer within --approve-timeout: the step fails closed; the daemon's default mode
stop_holod || fail "holod exit status $?"
start_holod --approve all --approve-timeout 1
N0=$(grep -c '^press ' "$CLIENT_LOG")
submit '{"script": [{"tool_name": "click", "x": 30, "y": 30}]}'
E=$TASK
wait_task "$E" failed 30
api GET "/v1/tasks/$E"
expect_json "timeout" .error "step 0 (click): not approved within 1 s (--approve-timeout): not run"
[ "$(grep -c '^press ' "$CLIENT_LOG")" = "$N0" ] || fail "a click that timed out was injected"
[ "$(journal_held "$E" 0 '$.decision')" = timed_out ] || fail "timeout not journaled"
# A task may turn it off for itself.
submit '{"script": [{"tool_name": "click", "x": 30, "y": 30}], "approve": "none"}'
wait_task "$TASK" succeeded
api POST /v1/tasks '{"script": [{"tool_name": "click", "x": 1, "y": 1}], "approve": "some"}'
expect_error "bad mode" 400 bad_request 'approve: expected "none", "risky" or "all"'

# ---- a bad rule file stops holod, naming what is wrong
stop_holod || fail "holod exit status $?"
echo '{"hotkeys": ["ctrl+nope"]}' >"$T/bad.json"
"$HOLOD" --approve-rules "$T/bad.json" 2>"$T/bad.err"
[ $? != 0 ] || fail "holod started with a bad rule file"
grep -q "hotkeys\[0\]: 'ctrl+nope': unknown key name 'nope'" "$T/bad.err" ||
	fail "bad rule file: $(cat "$T/bad.err")"
pass_or_fail
