#!/bin/sh
# Every endpoint of docs/api.md through curl on the Unix socket, every error class, and a
# script of clicks, typing and hotkeys that the recording test client sees exactly.
. "$(dirname "$0")/lib.sh"
require_tools
start_xvfb 800x600x24
start_holod
HAVE_CLIENT=0
start_client && HAVE_CLIENT=1

# ---- GET /v1/status
api GET /v1/status
expect_code status 200
expect_json status .api_version 1
expect_json status .model null
expect_json status .display "$DISPLAY"
expect_json status '.queue | length' 0
expect_json status .running null

# ---- POST /v1/tasks: a script of clicks, typing and hotkeys on the test client's window
submit '{"script": [
  {"tool_name": "click", "element": "red block", "x": 35, "y": 35},
  {"tool_name": "click", "x": 50, "y": 140},
  {"tool_name": "write", "content": "hi"},
  {"tool_name": "hotkey", "keys": ["ctrl", "a"]},
  {"tool_name": "scroll", "x": 200, "y": 200, "direction": "down", "scroll_size": 2},
  {"tool_name": "click", "x": 500, "y": 500, "button": "right"},
  {"tool_name": "answer", "content": "all done"}]}'
expect_json create '.status == "queued" or .status == "running"' true
expect_json create .kind script
T1=$TASK
wait_task "$T1" succeeded

# ---- GET /v1/tasks/{id}
api GET "/v1/tasks/$T1"
expect_code task 200
expect_json task .result "all done"
expect_json task .steps 7
expect_json task '.spec.script[0].element' "red block"
# A script task's provenance: holod's version, the display and its screen, the budgets.
expect_json provenance '.provenance.screen == {"width": 800, "height": 600}' true
expect_json provenance '.provenance.display | test("^:[0-9]+$")' true
expect_json provenance '.provenance.budgets | (.max_steps > 0 and .max_seconds > 0)' true
expect_json provenance '.provenance.holod_version | length > 0' true
expect_json provenance '.provenance | has("model")' false

# ---- GET /v1/tasks/{id}/steps
api GET "/v1/tasks/$T1/steps"
expect_code steps 200
expect_json steps '.steps | length' 7
expect_json steps '[.steps[].status] | unique | join(",")' ok
expect_json steps '.steps[0].pixels.x' 35
expect_json steps '.steps[0].monitor.width' 800
expect_json steps '.steps[0].image.height' 600
expect_json steps '.steps[2].result' "typed 2 bytes"
expect_json steps '.steps[0].timings_us.inject >= 0' true
expect_json steps '.steps[6].tool_call.tool_name' answer
check_screenshots "$T1"

# ---- GET /v1/tasks/{id}/steps/{n}/screenshot (PNG, the journaled hash)
for which in before after; do
	rm -f "$T/shot.png"
	code=$(curl -sS --unix-socket "$SOCK" -o "$T/shot.png" -w '%{http_code}' -D "$T/headers" \
		"http://holod/v1/tasks/$T1/steps/0/screenshot?which=$which")
	[ "$code" = 200 ] || fail "step screenshot $which: HTTP $code"
	sha=$(sha256sum "$T/shot.png" | cut -d' ' -f1)
	want=$(sqlite3 "$DB" "SELECT sha256 FROM screenshots WHERE task_id=$T1 AND idx=0 AND which='$which'")
	[ "$sha" = "$want" ] || fail "step screenshot $which: sha256 $sha, journal says $want"
	grep -qi '^content-type: image/png' "$T/headers" || fail "step screenshot: not image/png"
	[ "$(head -c 8 "$T/shot.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
		fail "step screenshot $which: not a PNG"
done
api GET "/v1/tasks/$T1/steps/0/screenshot?which=sideways"
expect_error "screenshot which" 400 bad_request "which: unknown value 'sideways'"
api GET "/v1/tasks/$T1/steps/99/screenshot"
expect_error "screenshot step 99" 404 not_found "step 99"

# ---- what the test client recorded: exactly those events, in that order
if [ "$HAVE_CLIENT" = 1 ]; then
	# The client logs asynchronously; the scrolls come last, so once they are there, all is.
	two_scrolls() { [ "$(grep -c '^scroll direction=down' "$CLIENT_LOG")" -ge 2 ]; }
	wait_until 10 two_scrolls || fail "client: the scrolls never arrived"
	grep -q '^press button=1 .*target=red' "$CLIENT_LOG" || fail "client: no left press on red"
	grep -q '^press button=1 .*target=field' "$CLIENT_LOG" || fail "client: no press on the field"
	keys=$(grep '^key ' "$CLIENT_LOG" | sed -n 's/.* text=\([0-9a-f-]*\).*/\1/p' | tr '\n' ' ')
	[ "$keys" = "68 69 - 01 " ] || fail "client: typed key texts '$keys', expected '68 69 - 01 '"
	[ "$(grep -c '^scroll direction=down' "$CLIENT_LOG")" = 2 ] || fail "client: expected 2 scroll-downs"
	grep -q '^press button=3' "$CLIENT_LOG" && fail "client: right click at (500,500) landed in the window"
	[ "$(grep -c '^press button=1' "$CLIENT_LOG")" = 2 ] || fail "client: expected exactly 2 left presses"
fi

# ---- GET /v1/tasks (filter, paging)
submit '{"script": [{"tool_name": "move", "x": 1, "y": 1}], "dry_run": true}'
T2=$TASK
wait_task "$T2" succeeded
api GET /v1/tasks
expect_code list 200
expect_json list .total 2
expect_json list '.tasks[0].id' "$T2"
api GET '/v1/tasks?limit=1&offset=1'
expect_json "list paging" '.tasks | length' 1
expect_json "list paging" '.tasks[0].id' "$T1"
api GET '/v1/tasks?status=failed'
expect_json "list filter" .total 0
api GET '/v1/tasks?status=bogus'
expect_error "list bad status" 400 bad_request "status: unknown value 'bogus'"
api GET '/v1/tasks?limit=100000'
expect_error "list limit" 400 bad_request "limit:"
api GET '/v1/tasks?colour=red'
expect_error "list unknown parameter" 400 bad_request "unknown query parameter 'colour'"
api GET "/v1/tasks/$T2/steps"
expect_json "dry run" '.steps[0].status' dry_run

# ---- model coordinates map through the monitor (0..1000 -> 0..799)
submit '{"script": [{"tool_name": "move", "x": 500, "y": 1000}], "coords": "model"}'
wait_task "$TASK" succeeded
api GET "/v1/tasks/$TASK/steps"
expect_json "model coords" '.steps[0].model.x' 500
expect_json "model coords" '.steps[0].pixels.x' 400
expect_json "model coords" '.steps[0].pixels.y' 599

# ---- pixel coordinates outside the screen fail the task with a clear error
submit '{"script": [{"tool_name": "click", "x": 5000, "y": 10}]}'
wait_task "$TASK" failed
api GET "/v1/tasks/$TASK"
expect_json "off screen" .error "step 0 (click): point (5000,10) is outside the screen (800x600 pixels)"

# ---- budgets
submit '{"script": [{"tool_name": "move", "x": 1, "y": 1}, {"tool_name": "move", "x": 2, "y": 2}], "max_steps": 1}'
wait_task "$TASK" failed
api GET "/v1/tasks/$TASK"
expect_json "max_steps" .error "max_steps budget (1) reached with 1 actions left"
submit '{"script": [{"tool_name": "wait", "duration": 5}], "max_seconds": 1}'
wait_task "$TASK" failed 20
api GET "/v1/tasks/$TASK"
expect_json "max_seconds" .error "max_seconds budget (1 s) exhausted during step 0"

# ---- GET /v1/tasks/{id}/events on a finished task: the whole story, then the end
curl -sS -N --unix-socket "$SOCK" "http://holod/v1/tasks/$T1/events" >"$T/events" ||
	fail "events: curl failed"
[ "$(jq -r .event "$T/events" | tr '\n' ' ')" = "task step step step step step step step end " ] ||
	fail "events: $(jq -r .event "$T/events" | tr '\n' ' ')"
[ "$(tail -n 1 "$T/events" | jq -r .task.status)" = succeeded ] || fail "events: last line"

# ---- POST /v1/tasks/{id}/cancel on a finished task: 409
api POST "/v1/tasks/$T1/cancel"
expect_error "cancel finished" 409 conflict "already finished (succeeded)"
api POST /v1/tasks/424242/cancel
expect_error "cancel unknown" 404 not_found "no task 424242"

# ---- POST /v1/actions: one action now, journaled as a one-step task
api POST /v1/actions '{"action": {"tool_name": "move", "x": 10, "y": 20}}'
expect_code actions 200
expect_json actions .task.status succeeded
expect_json actions .step.pixels.y 20
expect_json actions .step.result "moved to (10,20)"
api POST /v1/actions '{"action": {"tool_name": "hotkey", "keys": ["ctrl", "ctr"]}}'
expect_error "actions bad key" 400 bad_request "action.keys[1]: unknown key name 'ctr'"

# ---- GET /v1/screenshot: the screen now
code=$(curl -sS --unix-socket "$SOCK" -o "$T/now.png" -w '%{http_code}' http://holod/v1/screenshot)
[ "$code" = 200 ] || fail "screenshot: HTTP $code"
[ "$(head -c 8 "$T/now.png" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] ||
	fail "screenshot: not a PNG"
# PNG IHDR: width and height, big-endian, at bytes 16..23.
[ "$(od -An -tu1 -j16 -N8 "$T/now.png" | tr -s ' ')" = " 0 0 3 32 0 0 2 88" ] ||
	fail "screenshot: not 800x600"

# ---- error classes
api POST /v1/tasks '{"instruction": "open the settings"}'
expect_error "instruction" 503 no_model "no model loaded"
api POST /v1/tasks '{"script": [ {"tool_name": "click"'
expect_error "malformed" 400 bad_request "invalid JSON at line 1"
api POST /v1/tasks '{"script": [{"tool_name": "click", "x": 1, "y": 1}], "colour": 1}'
expect_error "unknown field" 400 bad_request "colour: unknown field"
api POST /v1/tasks '{"script": [{"tool_name": "click", "x": "1", "y": 1}]}'
expect_error "wrong type" 400 bad_request "script[0].x: expected an integer"
api POST /v1/tasks '{"script": [{"tool_name": "teleport", "x": 1, "y": 1}]}'
expect_error "unknown tool" 400 bad_request "script[0].tool_name: unknown tool 'teleport'"
api POST /v1/tasks '{"script": [{"tool_name": "wait", "duration": 1}, {"tool_name": "wait", "duration": 1}, {"tool_name": "hotkey", "keys": ["ctrl", "ctr"]}]}'
expect_error "unknown key" 400 bad_request "script[2].keys[1]: unknown key name 'ctr'"
api POST /v1/tasks ''
expect_error "empty body" 400 bad_request "invalid JSON"
api GET /v1/tasks/424242
expect_error "unknown task" 404 not_found "no task 424242"
api GET /v1/tasks/424242/steps
expect_error "unknown task steps" 404 not_found "no task 424242"
api GET /v1/tasks/424242/events
expect_error "unknown task events" 404 not_found "no task 424242"
api GET /v1/nothing
expect_error "unknown route" 404 not_found "no such endpoint"
api GET /v2/status
expect_error "unknown version" 404 not_found "no such endpoint"
api GET /v1/caf%C3%A9%FF
expect_error "non-UTF-8 route" 404 not_found "no such endpoint"
api GET '/v1/tasks?status=%FF'
expect_error "non-UTF-8 query value" 400 bad_request "status: unknown value '?'"
api GET /v1/tasks/abc
expect_error "non-numeric id" 404 not_found "no such endpoint"
api DELETE /v1/tasks
expect_error "wrong method" 405 method_not_allowed "allowed: GET, POST"
api POST /v1/status '{}'
expect_error "wrong method status" 405 method_not_allowed "allowed: GET"
code=$(curl -sS --unix-socket "$SOCK" -o /dev/null -w '%{http_code}' -D "$T/headers" -X PUT http://holod/v1/screenshot)
grep -qi '^allow: GET' "$T/headers" || fail "405 without Allow header"

# 413: a body over IPC_MAX_BODY_BYTES (1 MiB), sent with Content-Length and chunked
head -c 1100000 /dev/zero | tr '\0' ' ' >"$T/big"
CODE=$(curl -sS --unix-socket "$SOCK" -o "$BODY" -w '%{http_code}' --data-binary @"$T/big" \
	http://holod/v1/tasks)
expect_error "big body" 413 payload_too_large "exceeds the limit of 1048576"
CODE=$(curl -sS --unix-socket "$SOCK" -o "$BODY" -w '%{http_code}' -H 'Transfer-Encoding: chunked' \
	--data-binary @"$T/big" http://holod/v1/tasks)
expect_error "big chunked body" 413 payload_too_large "exceeds the limit of 1048576"
# 413: a list over IPC_MAX_SCRIPT_ACTIONS (1000)
{
	printf '{"script": ['
	i=0
	while [ $i -lt 1000 ]; do printf '{"tool_name":"move","x":1,"y":1},'; i=$((i + 1)); done
	printf '{"tool_name":"move","x":1,"y":1}]}'
} >"$T/long"
CODE=$(curl -sS --unix-socket "$SOCK" -o "$BODY" -w '%{http_code}' --data-binary @"$T/long" \
	http://holod/v1/tasks)
expect_error "long list" 413 payload_too_large "script: 1001 actions exceed the limit of 1000"
# 431: headers over IPC_MAX_HEADER_BYTES (8 KiB)
big_header=$(head -c 9000 /dev/zero | tr '\0' 'a')
CODE=$(curl -sS --unix-socket "$SOCK" -o "$BODY" -w '%{http_code}' -H "X-Padding: $big_header" \
	http://holod/v1/status)
expect_error "big headers" 431 headers_too_large "exceed the limit of 8192"

# The daemon survived all of that and shuts down cleanly (exit 0: no leak under ASan either).
api GET /v1/status
expect_code "still alive" 200
stop_holod || fail "holod exited with status $?"
pass_or_fail
