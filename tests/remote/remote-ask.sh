#!/bin/sh
# A model's ask_user step (issue 32), from the scripted fake server (fake-openai.c), since no
# model can be made to choose the tool: the task waits as waiting_for_user with the model's
# question and thought, `holoctl reply` answers, and the next request to the model carries the
# reply as the ask_user step's tool output; the step journals who replied.
. "$INTEGRATION_LIB"
require_tools
[ -n "${HOLO_TEST_CLIENT:-}" ] && [ -x "$HOLO_TEST_CLIENT" ] || test_skip "no test client"

unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
SCRIPT="$T/script"
REC="$T/requests"
mkdir -p "$REC"
FAKE_PID=
stop_fake() {
	[ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
	FAKE_PID=
}
trap 'stop_fake; cleanup' EXIT

ASK='{"note":null,"thought":"Two invoices match","tool_call":{"tool_name":"ask_user","question":"Which invoice, March or April?"}}'
ANSWER='{"note":null,"thought":"Paid","tool_call":{"tool_name":"answer","content":"paid"}}'
printf 'ok %s\nok %s\n' "$ASK" "$ANSWER" >"$SCRIPT"
"$FAKE_OPENAI" --port-file "$T/port" --script "$SCRIPT" --record "$REC" 2>"$T/fake.log" &
FAKE_PID=$!
wait_until 20 test -s "$T/port" || { fail "the fake server did not start"; exit 1; }
start_xvfb 640x400x24
start_client || exit 1
start_holod --remote "http://127.0.0.1:$(cat "$T/port")/v1" --remote-timeout 10 \
	--history window --window 1

submit '{"instruction": "Pay the invoice."}'
wait_until 30 task_is "$TASK" waiting_for_user || fail "task $TASK did not ask: $(task_status "$TASK")"
api GET "/v1/tasks/$TASK"
expect_json "question" .waiting.question "Which invoice, March or April?"
expect_json "question" .waiting.step 0
HOLOD_SOCKET="$SOCK" "$HOLOCTL" reply "$TASK" "April" >"$T/reply.out" 2>&1 ||
	fail "holoctl reply: $(cat "$T/reply.out")"
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK/steps"
expect_json "step 0" '.steps[0].tool_call.tool_name' ask_user
expect_json "step 0" '.steps[0].agent.thought' "Two invoices match"
expect_json "step 0" '.steps[0].result' April
expect_json "step 0" '.steps[0].held.decision' replied
# The model's next turn: the reply as the tool's output, before the new observation.
jq -e '(.messages | length) == 5 and .messages[3].role == "assistant"
	and (.messages[3].content | fromjson | .tool_call.tool_name) == "ask_user"
	and (.messages[4].content[0].text | startswith("<tool_output tool=\"ask_user\">April</tool_output>"))' \
	"$REC/req-1.json" >/dev/null || fail "the second request lacks the reply: $(head -c 1200 "$REC/req-1.json")"
pass_or_fail
