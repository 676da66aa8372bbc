#!/bin/sh
# A model's ask_user step (issue 32), from the scripted fake server (fake-openai.c), since no
# model can be made to choose the tool: the task waits as waiting_for_user with the model's
# question and thought, `holoctl reply` answers, and the next request to the model carries the
# reply as the ask_user step's tool output; the step journals who replied. A model's step held
# for approval (--approve risky, alt+f4) and denied: the model reads the denial as the step's
# error and goes on.
. "$(dirname "$0")/remote-lib.sh"

ASK='{"note":null,"thought":"Two invoices match","tool_call":{"tool_name":"ask_user","question":"Which invoice, March or April?"}}'
ANSWER='{"note":null,"thought":"Paid","tool_call":{"tool_name":"answer","content":"paid"}}'
printf 'ok %s\nok %s\n' "$ASK" "$ANSWER" >"$SCRIPT"
fake_start
start_xvfb 640x400x24
start_client || exit 1
start_holod --remote "$FAKE_URL" --remote-timeout 10 \
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
# The model's next turn: the reply as the tool's output (in the format's layout), after the
# ask_user step as the assistant said it.
# texts FILE: each message's text, image parts left out
texts() {
	jq '[.messages[] | .content | if type == "array" then map(.text // "") | join("") else . end]' "$1"
}
jq -e '[.messages[] | select(.role == "assistant") | .content | fromjson
	| .tool_call.tool_name] == ["ask_user"]' "$REC/req-1.json" >/dev/null ||
	fail "the second request lacks the ask_user step: $(head -c 1200 "$REC/req-1.json")"
texts "$REC/req-1.json" | jq -e 'map(select(test("<tool_output tool=\"ask_user\">\\s*April\\s*</tool_output>")))
	| length == 1' >/dev/null ||
	fail "the second request lacks the reply: $(texts "$REC/req-1.json" | head -c 1500)"

# ---- a held step denied: the denial is the model's next tool output
CLOSE='{"note":null,"thought":"Close the window","tool_call":{"tool_name":"hotkey","keys":["alt","f4"]}}'
printf 'ok %s\nok %s\n' "$CLOSE" "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Close the window.", "approve": "risky"}'
wait_until 30 task_is "$TASK" waiting_for_approval ||
	fail "task $TASK was not held: $(task_status "$TASK")"
api GET "/v1/tasks/$TASK"
expect_json "held" .waiting.thought "Close the window"
expect_json "held" .waiting.action.keys[1] f4
HOLOD_SOCKET="$SOCK" "$HOLOCTL" deny "$TASK" "keep it open" >"$T/deny.out" 2>&1 ||
	fail "holoctl deny: $(cat "$T/deny.out")"
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK/steps"
expect_json "denied step" '.steps[0].status' error
expect_json "denied step" '.steps[0].error' "denied by the user: keep it open"
expect_json "denied step" '.steps[0].held.decision' denied
grep -q '^key' "$CLIENT_LOG" && fail "a denied hotkey was pressed"
LAST="$REC/req-$(($(ls "$REC"/req-*.json | wc -l) - 1)).json"
texts "$LAST" | jq -e 'map(select(test("<error tool=\"hotkey\">\\s*denied by the user: keep it open\\s*</error>")))
	| length == 1' >/dev/null ||
	fail "the model was not told of the denial: $(texts "$LAST" | head -c 1500)"
pass_or_fail
