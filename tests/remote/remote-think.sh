#!/bin/sh
# Thinking with --remote (docs/policy.md, Thinking; issue 30), against the scripted fake server
# (fake-openai.c, taken for vLLM): with thinking on (holod's default) the request asks for it as
# both references do (chat_template_kwargs.enable_thinking, reasoning_effort "medium"), bounds it
# with vLLM's thinking_token_budget (--thinking-tokens) and, for
# the Nemotron-Nano-VL template that reads no kwargs, ends the system text with its "/think"
# switch, which the template removes while opening "<think>\n" (rendered through the model's
# template by holo-infer --render). The server's reasoning ("reasoning" or "reasoning_content"
# deltas, or a think block in the text from a server without a reasoning parser) is journaled as
# the step's reasoning, shown by `holoctl run --follow`, and dropped from the next request's
# history; "thinking": false asks for none of those fields, and a strict server that refuses them
# (HTTP 400 naming one) is asked again without them, for the rest of the task.
. "$(dirname "$0")/remote-lib.sh"

CLICK='{"note":null,"thought":"Click the block","tool_call":{"tool_name":"click","element":"the block","x":250,"y":250}}'
ANSWER='{"note":null,"thought":"All done","tool_call":{"tool_name":"answer","content":"done"}}'
printf 'think reasoning The block is red; click it.|%s\nthink reasoning_content It was clicked.|%s\n' \
	"$CLICK" "$ANSWER" >"$SCRIPT"
fake_start
start_xvfb 640x400x24
start_client || exit 1
start_holod --remote "$FAKE_URL" --remote-timeout 10 \
	--history window --window 1

# ---- thinking on: asked for, journaled, dropped from the history
submit '{"instruction": "Click the block, then answer."}'
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK"
expect_json "provenance" .provenance.thinking true
jq -e '.chat_template_kwargs == {"enable_thinking": true} and .reasoning_effort == "medium"
	and .thinking_token_budget == 1024 and .max_tokens == 4096
	and (.messages[0].content | endswith("\n</output_format>\n/think"))' "$REC/req-0.json" \
	>/dev/null || fail "request 1 does not ask for thinking: $(head -c 300 "$REC/req-0.json")"
api GET "/v1/tasks/$TASK/steps"
jq -e --arg click "$CLICK" '[.steps[].agent.reasoning] == ["The block is red; click it.",
	"It was clicked."] and .steps[0].agent.raw_output == $click' "$BODY" >/dev/null ||
	fail "the steps' reasoning: $(head -c 1500 "$BODY")"
jq -e '(.messages | map(select(.role == "assistant")) | map(.content | fromjson | .tool_call.x))
	== [250] and (tostring | contains("The block is red") | not)' \
	"$REC/req-1.json" >/dev/null ||
	fail "the reasoning reached the history: $(head -c 1500 "$REC/req-1.json")"
# What the Nemotron-Nano-VL template renders from request 1 (vLLM hands it the image_url part
# as {"type": "image"}): the system text without the switch, the think block opened.
if [ -x "${HOLO_INFER:-}" ] && [ -f "${AGENT_MODEL:-}/config.json" ]; then
	jq '[.messages[] | if (.content | type) == "array" then .content |= map(if .type ==
		"image_url" then {"type": "image", "tiles": 1} else . end) else . end]' \
		"$REC/req-0.json" >"$T/conv.json"
	"$HOLO_INFER" --model "$AGENT_MODEL" --render --messages "$T/conv.json" \
		2>"$T/render.err" | jq -j .text >"$T/rendered" ||
		fail "holo-infer --render: $(cat "$T/render.err")"
	jq -Rse 'contains("</output_format>\n<SPECIAL_11>User\nTask: Click the block, then answer.\n")
		and (contains("/think") | not) and endswith("<SPECIAL_11>Assistant\n<think>\n")' \
		"$T/rendered" >/dev/null || fail "the rendered request: $(tail -c 600 "$T/rendered")"
fi

# ---- a server without a reasoning parser: the think block in the text
printf 'ok <think>Nothing left to do. {"x":1}</think> %s\n' "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Answer."}'
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK/steps"
expect_json "a think block in the text" '.steps[0].agent.reasoning' 'Nothing left to do. {"x":1}'

# ---- holoctl run --follow shows the reasoning
printf 'think reasoning Answer at once.|%s\n' "$ANSWER" >"$SCRIPT"
HOLOD_SOCKET="$SOCK" "$HOLOCTL" run --follow Answer. >"$T/out" 2>"$T/err" ||
	fail "holoctl run --follow: $(cat "$T/err")"
grep -q '^ *reasoning: Answer at once\.$' "$T/out" ||
	fail "--follow: no reasoning line: $(cat "$T/out" "$T/err")"

# ---- "thinking": false asks for none
N0=$(ls "$REC"/req-*.json | wc -l)
printf 'ok %s\n' "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Answer.", "thinking": false}'
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK"
expect_json "provenance, off" .provenance.thinking false
jq -e 'has("chat_template_kwargs") == false and has("reasoning_effort") == false
	and has("thinking_token_budget") == false
	and (.messages[0].content | endswith("</output_format>"))' "$REC/req-$N0.json" >/dev/null ||
	fail "thinking off: $(head -c 300 "$REC/req-$N0.json")"
api GET "/v1/tasks/$TASK/steps"
expect_json "no reasoning" '.steps[0].agent.reasoning' null

# ---- a strict server refuses the thinking fields: asked again without them, the task goes on
N0=$(ls "$REC"/req-*.json | wc -l)
# (one script line per request: the refused one, then the click and the answer)
printf 'strict %s\nstrict %s\nstrict %s\n' "$CLICK" "$CLICK" "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Click the block, then answer."}'
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK"
expect_json "provenance, strict" .provenance.thinking true
N1=$(ls "$REC"/req-*.json | wc -l)
[ "$((N1 - N0))" -eq 3 ] || fail "a strict server: $((N1 - N0)) requests, not 3 (refused, then a step each)"
jq -e 'has("chat_template_kwargs") and has("reasoning_effort")' "$REC/req-$N0.json" >/dev/null ||
	fail "strict, the first request: $(head -c 300 "$REC/req-$N0.json")"
for i in $((N0 + 1)) $((N0 + 2)); do
	jq -e 'has("chat_template_kwargs") == false and has("reasoning_effort") == false
		and has("thinking_token_budget") == false' "$REC/req-$i.json" >/dev/null ||
		fail "strict, request $i still has a thinking field: $(head -c 300 "$REC/req-$i.json")"
done
api GET "/v1/tasks/$TASK/steps"
expect_json "strict: two steps" '.steps | length' 2
pass_or_fail
