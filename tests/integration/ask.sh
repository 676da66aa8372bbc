#!/bin/sh
# ask_user (issue 32), through a script's step (the tiny model cannot be made to pick the tool;
# tests/remote/remote-ask.sh drives a model's step): the task waits as waiting_for_user with the
# question in its status, in holod's status and on its event stream (and in `holoctl run
# --follow`), `holoctl reply` makes the reply the step's result and the task goes on; who replied
# is journaled; a reply to a task that does not wait is a clear error; no reply within
# --ask-timeout fails the task saying so, and so does a task's own shorter ask_timeout (API and
# holoctl run --ask-timeout), recorded in its provenance; cancel ends the wait.
. "$(dirname "$0")/lib.sh"
require_tools
start_xvfb 640x400x24
start_holod --ask-timeout 600

hctl() {
	HOLOD_SOCKET="$SOCK" "$HOLOCTL" "$@"
}

# ---- the question, shown everywhere, and the reply as the step's result
cat >"$T/ask.json" <<'EOF'
[{"tool_name": "ask_user", "question": "Which file should I open?"},
 {"tool_name": "answer", "content": "asked"}]
EOF
hctl run --script "$T/ask.json" --follow >"$T/follow.out" 2>"$T/follow.err" &
FOLLOW=$!
wait_until 30 grep -q "asks: Which file should I open?" "$T/follow.out" ||
	fail "run --follow did not show the question: $(cat "$T/follow.out" "$T/follow.err")"
A=$(sqlite3 "$DB" "SELECT max(id) FROM tasks")
grep -q "holoctl reply $A \"TEXT\"" "$T/follow.out" || fail "no reply hint: $(cat "$T/follow.out")"
# The stream has said it, so the status says it too: no polling needed.
api GET "/v1/tasks/$A"
expect_json "task" .status waiting_for_user
expect_json "task" .waiting.for reply
expect_json "task" .waiting.question "Which file should I open?"
expect_json "task" .waiting.step 0
expect_json "task" .waiting.timeout_s 600
api GET /v1/status
expect_json "status" '.displays[0].waiting.question' "Which file should I open?"
api GET "/v1/tasks?status=running"
expect_json "list" '.tasks[0].status' waiting_for_user
hctl show "$A" >"$T/show.out" || fail "holoctl show $A"
grep -q "asks: Which file should I open?" "$T/show.out" || fail "show: $(cat "$T/show.out")"
# A raw event stream opened now starts with the wait too.
curl -sS -N --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >"$T/events" &
EVENTS=$!
wait_until 30 grep -q '"event":"waiting"' "$T/events" || fail "no waiting event: $(cat "$T/events")"

# Approve is not a reply; bad bodies name what is wrong.
api POST "/v1/tasks/$A/reply" '{"text": ""}'
expect_error "empty reply" 400 bad_request "text: empty"
api POST "/v1/tasks/$A/reply" '{"txt": "a"}'
expect_error "unknown member" 400 bad_request "txt: unknown field"
api POST "/v1/tasks/$A/reply" "{\"text\": \"$(head -c 5000 /dev/zero | tr '\0' a)\"}"
expect_error "long reply" 413 payload_too_large "text: 5000 bytes exceed the limit of 4096"
api POST "/v1/tasks/$A/reply" 'not json'
expect_error "bad JSON" 400 bad_request "invalid JSON"
task_is "$A" waiting_for_user || fail "a refused reply ended the wait"

hctl reply "$A" "notes.txt, please" >"$T/reply.out" 2>&1 || fail "holoctl reply: $(cat "$T/reply.out")"
grep -q "task $A: reply sent" "$T/reply.out" || fail "reply output: $(cat "$T/reply.out")"
wait "$FOLLOW" || fail "run --follow exit status $?: $(cat "$T/follow.out" "$T/follow.err")"
wait "$EVENTS"
wait_task "$A" succeeded
api GET "/v1/tasks/$A/steps"
expect_json "step 0" '.steps[0].status' ok
expect_json "step 0" '.steps[0].result' "notes.txt, please"
expect_json "step 0" '.steps[0].held.waited_for' reply
expect_json "step 0" '.steps[0].held.decision' replied
expect_json "step 0" '.steps[0].held.uid' "$(id -u)"
jq -e '.steps[0].held.pid > 0 and .steps[0].held.answered_us >= .steps[0].held.since_us' \
	"$BODY" >/dev/null || fail "who replied when: $(jq -c '.steps[0].held' "$BODY")"
api GET "/v1/tasks/$A"
expect_json "holod's ask timeout" .provenance.budgets.ask_timeout 600
# The waiting event came before step 0's end.
W=$(grep -n '"event":"waiting"' "$T/events" | head -n 1 | cut -d: -f1)
S=$(grep -n '"event":"step"' "$T/events" | head -n 1 | cut -d: -f1)
[ -n "$W" ] && [ -n "$S" ] && [ "$W" -lt "$S" ] || fail "events out of order: $(cut -c1-120 "$T/events")"

# ---- replies to tasks that do not wait: clear errors, nothing changes
hctl reply "$A" "again" >"$T/again.out" 2>&1
[ $? = 1 ] || fail "reply to a finished task: exit status"
grep -q "task $A is not waiting for a reply (it has finished)" "$T/again.out" ||
	fail "reply to a finished task: $(cat "$T/again.out")"
api POST /v1/tasks/9999/reply '{"text": "x"}'
expect_error "unknown task" 404 not_found "no task 9999"
submit '{"script": [{"tool_name": "wait", "duration": 30}]}'
B=$TASK
wait_until 30 task_is "$B" running || fail "task $B did not start"
api POST "/v1/tasks/$B/reply" '{"text": "x"}'
expect_error "running task" 409 conflict "task $B is not waiting for a reply (it is running)"
hctl reply "$B" "" >"$T/empty.out" 2>&1
[ $? = 2 ] || fail "an empty reply was sent"
api POST "/v1/tasks/$B/cancel"
wait_task "$B" cancelled

# ---- cancel ends the wait at once
submit '{"script": [{"tool_name": "ask_user", "question": "Still there?"}]}'
C=$TASK
wait_until 30 task_is "$C" waiting_for_user || fail "task $C does not wait"
hctl cancel "$C" >/dev/null || fail "cancel $C"
wait_task "$C" cancelled 10
api GET "/v1/tasks/$C"
expect_json "cancelled" .error "cancelled during step 0 (ask_user)"

# ---- the task's own ask_timeout, shorter than holod's: no reply within it fails the task
echo '[{"tool_name": "ask_user", "question": "Quick?"}]' >"$T/own.json"
hctl run --script "$T/own.json" --ask-timeout 1 >"$T/own.out" 2>&1 || fail "run: $(cat "$T/own.out")"
E=$(sqlite3 "$DB" "SELECT max(id) FROM tasks")
wait_task "$E" failed 30
api GET "/v1/tasks/$E"
expect_json "own timeout" .error \
	"step 0 (ask_user): no reply to the question within 1 s (the task's ask_timeout)"
expect_json "own timeout" .spec.ask_timeout 1
expect_json "own timeout" .provenance.budgets.ask_timeout 1
[ "$(sqlite3 "$DB" "SELECT json_extract(held, '$.decision') FROM steps WHERE task_id = $E")" = \
	timed_out ] || fail "the task's timeout is not journaled"
api POST /v1/tasks '{"script": [{"tool_name": "ask_user", "question": "?"}], "ask_timeout": 0}'
expect_error "ask_timeout 0" 400 bad_request "ask_timeout: 0 is out of range 1..86400"
api POST /v1/tasks '{"script": [{"tool_name": "ask_user", "question": "?"}], "ask_timeout": "soon"}'
expect_error "ask_timeout text" 400 bad_request "ask_timeout: expected an integer"
hctl run --script "$T/own.json" --ask-timeout 86401 >"$T/bad.out" 2>&1
[ $? = 2 ] && grep -q -- "--ask-timeout must be from 1 to 86400 seconds, not '86401'" "$T/bad.out" ||
	fail "holoctl run --ask-timeout 86401: $(cat "$T/bad.out")"

# ---- no reply within --ask-timeout: the task fails saying so
stop_holod || fail "holod exit status $?"
start_holod --ask-timeout 1
submit '{"script": [{"tool_name": "ask_user", "question": "Anyone?"}]}'
D=$TASK
wait_task "$D" failed 30
api GET "/v1/tasks/$D"
expect_json "timeout" .error "step 0 (ask_user): no reply to the question within 1 s (--ask-timeout)"
[ "$(sqlite3 "$DB" "SELECT json_extract(held, '$.decision') FROM steps WHERE task_id = $D")" = \
	timed_out ] || fail "the timeout is not journaled: $(sqlite3 "$DB" "SELECT held FROM steps WHERE task_id = $D")"
pass_or_fail
