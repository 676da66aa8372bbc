#!/bin/sh
# The remote provider (issue 17) against a scripted OpenAI-compatible server (fake-openai.c):
# streamed answers with a 429 retried after its Retry-After, the request checked against the
# chat-completions schema (PNG data URLs; for vLLM, its structured_outputs field and the
# screenshot's placeholder inside the observation's text part, which the model's chat template
# renders in place; for any other server, response_format json_schema and the parts in order), a
# non-streamed answer, 5xx past the retry bound, a slow server (timeout), invalid answers
# (retried, then the raw output journaled), the json_object fallback, cancel in the middle of a
# streamed answer, the server down (the task fails, holod keeps serving) -- and the key never
# appears in the log, the journal, the API or status.
. "$(dirname "$0")/remote-lib.sh"
command -v base64 >/dev/null 2>&1 && command -v od >/dev/null 2>&1 || test_skip "no base64/od"

KEY="sk-fake-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"

CLICK='{"note":null,"thought":"Click the block","tool_call":{"tool_name":"click","element":"the block","x":250,"y":250}}'
ANSWER='{"note":null,"thought":"All done","tool_call":{"tool_name":"answer","content":"done"}}'
printf 'status 429 1\nok %s\nok %s\n' "$CLICK" "$ANSWER" >"$SCRIPT"
fake_start
ENDPOINT="$FAKE_URL"

start_xvfb 640x400x24
start_client || exit 1
printf '%s\n' "$KEY" >"$T/key"
chmod 640 "$T/key"
# Credentials and a query in the URL must not reach the journal, the log or status either.
start_holod --remote "http://someone:pw-in-url@127.0.0.1:$PORT/v1/?token=q-in-url" \
	--remote-key-file "$T/key" --remote-timeout 3 --remote-connect-timeout 2 \
	--remote-retries 2 --step-retries 1 --history window --window 1
grep -q "can be read by other users" "$HOLOD_LOG" || fail "no warning about the key file's mode"
api GET /v1/status
expect_json "status" .provider.name remote
expect_json "status" .provider.endpoint "$ENDPOINT"

# ---- two streamed steps after a 429 honoured for its Retry-After (1 s)
submit '{"instruction": "Click the block, then answer."}'
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK"
expect_json "answer" .result done
expect_json "provenance" .provenance.provider remote
expect_json "provenance" .provenance.model.endpoint "$ENDPOINT"
expect_json "provenance" .provenance.model.server vllm
expect_json "provenance" .provenance.model.structured_output structured_outputs
expect_json "provenance: thinking asked of the server (remote-think)" .provenance.thinking true
grep -q "HTTP 429; retry 1 of 2 in 1000 ms" "$HOLOD_LOG" || fail "the 429 was not retried after 1 s"
grep -q '^press button=1 .* root_x=160 root_y=100 ' "$CLIENT_LOG" ||
	fail "the remote step's click (250,250 of 1000 on 640x400) did not land"
api GET "/v1/tasks/$TASK/steps"
jq -e '(.steps | length) == 2 and all(.steps[]; .agent.provider == "remote"
	and .agent.remote.model == "fake-model" and .agent.remote.prompt_tokens > 0
	and .agent.remote.completion_tokens > 0 and .agent.remote.server_us > 0)' "$BODY" >/dev/null ||
	fail "steps lack the remote usage: $(head -c 1500 "$BODY")"
[ "$(cat "$REC/req-1.auth")" = "Bearer $KEY" ] || fail "the key was not sent as a bearer token"
# The request as the chat-completions API documents it, with vLLM's structured_outputs (its
# guided_json was removed in 0.12) and no response_format; sampled at the format's top_p (the
# tests' temperature is 0, tests/meson.build). The observation is one text part holding the
# image placeholder where the screenshot goes, then the image.
R1="$REC/req-1.json"
jq -e '.model == "fake-model" and .stream == true and .stream_options.include_usage == true
	and (.structured_outputs | keys) == ["json"]
	and (.structured_outputs.json.required == ["note","thought","tool_call"])
	and (.structured_outputs.json.properties.tool_call.anyOf | length) == 13
	and (has("response_format") or has("guided_json")) == false
	and .temperature == 0 and .top_p == 0.95
	and .messages[0].role == "system" and (.messages[0].content | type) == "string"
	and .messages[1] == {"role":"user","content":"Task: Click the block, then answer."}
	and (.messages | length) == 3 and .messages[2].role == "user"
	and ([.messages[2].content[] | .type] == ["text","image_url"])
	and .messages[2].content[0].text == "<observation>\n<image>\n</observation>"
	and (.messages[2].content[1].image_url.url | startswith("data:image/png;base64,"))' \
	"$R1" >/dev/null || fail "request 1 does not follow the API: $(head -c 600 "$R1")"
jq -r '.messages[2].content[1].image_url.url' "$R1" | sed 's/^data:image\/png;base64,//' |
	base64 -d >"$T/shot.png" 2>/dev/null
[ "$(od -An -tx1 -N24 "$T/shot.png" | tr -d ' \n')" = \
	"89504e470d0a1a0a0000000d494844520000028000000190" ] ||
	fail "the image is not a 640x400 PNG"
# Step 2 (window 1): the first observation's screenshot evicted (its wrapper kept), the step as
# the assistant said, the click's result in a user message of its own (newline-padded, the point
# in the model's coordinates, not the pixels (160,100) the journal keeps), then the observation
# (H's Agent loop layout, docs/policy.md items 3, 4, 6, 7, 8, 29).
jq -e --argjson click "$CLICK" '(.messages | length) == 6
	and .messages[2] == {"role": "user",
		"content": "<observation>\n[screenshot evicted]\n</observation>"}
	and .messages[3].role == "assistant" and (.messages[3].content | fromjson) as $s
	| $s.tool_call.tool_name == "click" and $s.tool_call.x == 250
	and .messages[4] == {"role": "user",
		"content": "<tool_output tool=\"click\">\nclicked left x1 at (250,250)\n</tool_output>"}
	and .messages[5].role == "user"
	and ([.messages[5].content[] | .type] == ["text","image_url"])
	and .messages[5].content[0].text == "<observation>\n<image>\n</observation>"' \
	"$REC/req-2.json" >/dev/null || fail "request 2's history: $(head -c 800 "$REC/req-2.json")"
# What the server renders from it: request 2's messages through the model's chat template
# (holo-infer --render renders as NVIDIA-Nemotron-Nano-12B-v2-VL's template does, checked
# against transformers; vLLM hands it an image_url part as {"type": "image"}): the screenshot's
# tokens inside <observation>, after the tool's output, as the local engine renders them.
# render FILE: the text rendered from the recorded request FILE
render() {
	jq '[.messages[] | if (.content | type) == "array" then .content |= map(if .type ==
		"image_url" then {"type": "image", "tiles": 1} else . end) else . end]' "$1" \
		>"$T/conv.json" && "$HOLO_INFER" --model "$AGENT_MODEL" --render \
		--messages "$T/conv.json" 2>"$T/render.err" | jq -r .text
}
if [ -x "${HOLO_INFER:-}" ] && [ -f "${AGENT_MODEL:-}/config.json" ]; then
	render "$REC/req-2.json" >"$T/rendered" || fail "holo-infer --render: $(cat "$T/render.err")"
	jq -Rse 'test("<SPECIAL_11>User\n<tool_output tool=\"click\">\n[^<]*\n</tool_output>\n" +
		"<SPECIAL_11>User\n<observation>\n<img>(<image>)+</img>\n</observation>\n" +
		"<SPECIAL_11>Assistant\n")' \
		"$T/rendered" >/dev/null ||
		fail "vLLM layout: the screenshot is not rendered inside <observation>: $(cat "$T/rendered")"
fi
# The chat export takes a remote task: the same turns, no prefill digests (the server tokenized).
FIRST=$TASK
"$HOLOCTL" export -o "$T/exp" --format chat "$FIRST" >"$T/exp.out" 2>"$T/err" ||
	fail "holoctl export --format chat: $(cat "$T/err")"
jq -e --arg click "$CLICK" '[.messages[].role] == ["system", "user", "user", "assistant", "user",
	"user", "assistant"] and .messages[3].content == $click and .prefill.steps[0].sha256 == null
	and (.messages[4].content | startswith("<tool_output tool=\"click\">\n"))
	and .messages[5].content == "<observation>\n<image>\n</observation>"
	and (.messages[2].images[0].path | type) == "string"' "$T/exp/chat.jsonl" >/dev/null ||
	fail "chat export of a remote task: $(head -c 800 "$T/exp/chat.jsonl")"

# ---- a holo-nano task (docs/policy.md): holo-nano's system text and Step schema (generated
# from its tool table: no published copy here) as structured_outputs, its turns (the evicted
# observation's text, the tool output of a plain success empty in a user message of its own),
# its parser (click_desktop) and serializer (the history's assistant turn)
NCLICK='{"note":null,"thought":"Click the block","tool_call":{"tool_name":"click_desktop","element":"the block","x":250,"y":250}}'
NANSWER='{"note":null,"thought":"All done","tool_call":{"tool_name":"answer","content":"done"}}'
N0=$(ls "$REC"/*.json | wc -l)
printf 'ok %s\nok %s\n' "$NCLICK" "$NANSWER" >"$SCRIPT"
submit '{"instruction": "Click the block, then answer.", "policy_format": "holo-nano"}'
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK"
expect_json "holo-nano provenance" .provenance.policy_format holo-nano
expect_json "holo-nano answer" .result done
[ "$(grep -c '^press button=1 .* root_x=160 root_y=100 ' "$CLIENT_LOG")" -ge 2 ] ||
	fail "the holo-nano click_desktop (250,250 of 1000 on 640x400) did not land"
jq -e '(.messages[0].content | contains("hold_and_tap_key_desktop")
		and endswith("\n```\n</output_format>\n\n/think"))
	and ([.structured_outputs.json.properties.tool_call.anyOf[].properties.tool_name.const]
		| length == 13 and index("click_desktop") != null and index("ask_user") != null)
	and .messages[1] == {"role":"user","content":"Task: Click the block, then answer."}
	and (.messages | length) == 3
	and ([.messages[2].content[] | .type] == ["text","image_url"])
	and .messages[2].content[0].text == "<observation>\n<image>\n</observation>"' \
	"$REC/req-$N0.json" >/dev/null || fail "holo-nano request 1: $(head -c 600 "$REC/req-$N0.json")"
jq -e --arg click "$NCLICK" '(.messages | length) == 6
	and .messages[2] == {"role": "user",
		"content": "<observation>\n[Image omitted by context cleaning]\n</observation>"}
	and .messages[3] == {"role": "assistant", "content":
		($click | fromjson | .tool_call.button = "left" | tojson)}
	and .messages[4] == {"role": "user",
		"content": "<tool_output tool=\"click_desktop\">\n\n</tool_output>"}
	and .messages[5].content[0].text == "<observation>\n<image>\n</observation>"' \
	"$REC/req-$((N0 + 1)).json" >/dev/null ||
	fail "holo-nano request 2: $(head -c 1200 "$REC/req-$((N0 + 1)).json")"
P=$(sqlite3 "$DB" "SELECT prompt FROM tasks WHERE id = $TASK")
[ "$(printf '%s' "$P" | jq -r '[.format, .system_text, .evicted, .provider] | join("|")')" = \
	"holo-nano|holod|[Image omitted by context cleaning]|remote" ] ||
	fail "holo-nano prompt record: $(printf '%s' "$P" | head -c 400)"

# ---- a non-streamed answer is taken too
printf 'plain %s\n' "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Answer."}'
wait_task "$TASK" succeeded 30

# ---- 5xx past the retry bound: 1 + 2 requests, then the task fails saying so
N0=$(ls "$REC"/*.json | wc -l)
printf 'status 503\n' >"$SCRIPT"
submit '{"instruction": "Click the block."}'
wait_task "$TASK" failed 30
api GET "/v1/tasks/$TASK"
case "$(jq -r .error "$BODY")" in
*"answered HTTP 503: fake failure 503 (retries exhausted, --remote-retries)"*) ;;
*) fail "5xx error: $(jq -r .error "$BODY")" ;;
esac
[ $(($(ls "$REC"/*.json | wc -l) - N0)) -eq 3 ] || fail "503 was not asked 3 times"

# ---- a slow server: the request times out after --remote-timeout
printf 'slow 6000 ok %s\n' "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Answer."}'
wait_task "$TASK" failed 30
api GET "/v1/tasks/$TASK"
case "$(jq -r .error "$BODY")" in
*"did not answer within 3 s (--remote-timeout 3"*) ;;
*) fail "timeout error: $(jq -r .error "$BODY")" ;;
esac

# ---- invalid answers: retried once (sampled at 0.7), then the task fails, raw output journaled
N0=$(ls "$REC"/*.json | wc -l)
printf 'ok {"thought": "no tool call here"}\n' >"$SCRIPT"
submit '{"instruction": "Click the block."}'
wait_task "$TASK" failed 30
[ $(($(ls "$REC"/*.json | wc -l) - N0)) -eq 2 ] || fail "the invalid answer was not retried once"
LAST=$(($(ls "$REC"/*.json | wc -l) - 1))
jq -e '.temperature > 0.6' "$REC/req-$LAST.json" >/dev/null || fail "the retry was not sampled"
api GET "/v1/tasks/$TASK/steps"
jq -e '.steps[0].tool_call == "null" and .steps[0].status == "error" and .steps[0].agent.attempts == 2
	and .steps[0].agent.raw_output == "{\"thought\": \"no tool call here\"}"' "$BODY" >/dev/null ||
	fail "the invalid step's raw output: $(head -c 800 "$BODY")"

# ---- cancel in the middle of a streamed answer stops at once
printf 'stall %s\n' "$CLICK" >"$SCRIPT"
N0=$(ls "$REC"/*.json | wc -l)
submit '{"instruction": "Click the block."}'
more_requests() { [ "$(ls "$REC"/*.json | wc -l)" -gt "$N0" ]; }
wait_until 20 more_requests || fail "the stalled request never came"
sleep 0.3
T0=$(date +%s%N)
api POST "/v1/tasks/$TASK/cancel"
wait_until 10 task_final "$TASK"
MS=$((($(date +%s%N) - T0) / 1000000))
[ "$(task_status "$TASK")" = cancelled ] || fail "the stalled task is $(task_status "$TASK")"
[ "$MS" -lt "$(test_time_limit 1000)" ] || fail "cancel took $MS ms"
echo "cancel during a streamed answer: $MS ms"

# ---- SIGTERM in the middle of a streamed answer (the flag the kill switch sets too): holod
# stops at once, the task is interrupted
N0=$(ls "$REC"/*.json | wc -l)
submit '{"instruction": "Click the block."}'
STALLED=$TASK
wait_until 20 more_requests || fail "the second stalled request never came"
sleep 0.3
T0=$(date +%s%N)
stop_holod || fail "holod exit status $? after SIGTERM during a streamed answer"
MS=$((($(date +%s%N) - T0) / 1000000))
[ "$MS" -lt "$(test_time_limit 3000)" ] || fail "SIGTERM during a streamed answer took $MS ms"
echo "SIGTERM during a streamed answer: holod exited in $MS ms"
# (again as any OpenAI-compatible server, whatever /models says: --remote-server openai)
start_holod --remote "http://someone:pw-in-url@127.0.0.1:$PORT/v1/?token=q-in-url" \
	--remote-key-file "$T/key" --remote-timeout 3 --remote-connect-timeout 2 \
	--remote-server openai
case "$(task_status "$STALLED")" in
interrupted | cancelled) ;;
*) fail "the task stopped by SIGTERM is $(task_status "$STALLED")" ;;
esac

# ---- any other server: response_format json_schema, no structured_outputs, the observation's
# parts in order: text, image, text
printf 'ok %s\n' "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Answer."}'
wait_task "$TASK" succeeded 30
api GET "/v1/tasks/$TASK"
expect_json "provenance" .provenance.model.server openai
expect_json "provenance" .provenance.model.structured_output json_schema
LAST=$(($(ls "$REC"/*.json | wc -l) - 1))
jq -e '.response_format.type == "json_schema" and .response_format.json_schema.name == "holo3_step"
	and (.response_format.json_schema.schema.required == ["note","thought","tool_call"])
	and has("structured_outputs") == false and has("guided_json") == false
	and ([.messages[2].content[] | .type] == ["text","image_url","text"])
	and .messages[2].content[0].text == "<observation>\n"
	and .messages[2].content[2].text == "\n</observation>"' "$REC/req-$LAST.json" >/dev/null ||
	fail "request to an OpenAI-compatible server: $(head -c 600 "$REC/req-$LAST.json")"
# (the Nemotron template, as vLLM would apply it, puts this layout's image in front of the
# observation: why vLLM gets the other one)
if [ -x "${HOLO_INFER:-}" ] && [ -f "${AGENT_MODEL:-}/config.json" ]; then
	render "$REC/req-$LAST.json" >"$T/rendered" ||
		fail "holo-infer --render: $(cat "$T/render.err")"
	jq -Rse 'test("<SPECIAL_11>User\n<img>(<image>)+</img>\n<observation>\n\n</observation>\n")' \
		"$T/rendered" >/dev/null || fail "parts layout rendered: $(cat "$T/rendered")"
fi

# ---- a server that takes {"type":"json_object","schema"} only (llama-cpp-python, whose 500
# names response_format): asked again at once in that form, no backoff
printf 'schema500 %s\n' "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Answer."}'
wait_task "$TASK" succeeded 30
LAST=$(($(ls "$REC"/*.json | wc -l) - 1))
jq -e '.response_format.type == "json_object" and .response_format.schema.type == "object"' \
	"$REC/req-$LAST.json" >/dev/null || fail "no json_object fallback"
grep -q "answered HTTP 500; retry" "$HOLOD_LOG" && fail "the refused form was retried as a failure"
api GET /v1/status
expect_json "fallback remembered" .provider.structured_output json_object
expect_json "status server" .provider.server openai

# ---- the server down: the task fails clearly, holod keeps serving
fake_stop
submit '{"instruction": "Click the block."}'
wait_task "$TASK" failed 30
api GET "/v1/tasks/$TASK"
case "$(jq -r .error "$BODY")" in
*"cannot reach the model server at $ENDPOINT: "*) ;;
*) fail "server down: $(jq -r .error "$BODY")" ;;
esac
submit '{"script": [{"tool_name": "click", "x": 30, "y": 30}]}'
wait_task "$TASK" succeeded 30

# ---- the key and the URL's credentials appear nowhere holod writes or answers
api GET /v1/status
cp "$BODY" "$T/status.json"
curl -sS --unix-socket "$SOCK" "http://holod/v1/tasks?limit=100" >"$T/tasks.json"
for id in $(seq 1 "$TASK"); do
	curl -sS --unix-socket "$SOCK" "http://holod/v1/tasks/$id" >>"$T/tasks.json"
	curl -sS --unix-socket "$SOCK" "http://holod/v1/tasks/$id/steps" >>"$T/tasks.json"
done
sqlite3 "$DB" .dump >"$T/db.sql"
for secret in "$KEY" pw-in-url q-in-url someone; do
	for f in "$HOLOD_LOG" "$T/status.json" "$T/tasks.json" "$T/db.sql"; do
		! grep -q -- "$secret" "$f" || fail "'$secret' appears in $(basename "$f")"
	done
done
stop_holod || fail "holod exit status $?"
pass_or_fail
