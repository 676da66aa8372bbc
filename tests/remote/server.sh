#!/bin/sh
# llama.cpp's server (llama-cpp-python 0.3.36) as the remote provider's counterpart, driven with
# curl alone: streamed chat completions constrained by holod's step schema are steps holod's
# parser accepts; the OpenAI form of response_format and image parts are refused the way
# docs/remote-server.md says (holod falls back to the server's own form, and sends the text-only
# layout to a text model).
# Environment from meson: STEP_TOOL (tests/remote/step-tool.c), HOLOD_SOURCE_ROOT.
. "$(dirname "$0")/lib.sh"

remote_require
remote_server_start || pass_or_fail

schema=$("$STEP_TOOL" schema) || { fail "step-tool schema"; pass_or_fail; }
printf "%s" "$schema" | jq -e '.type == "object" and .required == ["note","thought","tool_call"]' >/dev/null ||
	fail "holod's step schema is not an object of note, thought and tool_call"

# chat REQUEST_JSON: POSTs to /v1/chat/completions; the body lands in $T/body, the status is printed.
chat() {
	curl -s -m 120 -o "$T/body" -w '%{http_code}' -H 'Content-Type: application/json' \
		--data-binary "$1" "$REMOTE_URL/chat/completions"
}

system=$(cat <<'TXT'
You are an agent that operates a Linux desktop (X11) to complete the user's task. Answer with
one step: {"note":string|null,"thought":string,"tool_call":{"tool_name":string,...arguments}}.
TXT
)

# Streamed, with the schema in the server's own response_format form, for three tasks: the
# answer arrives as SSE chunks of chat.completion.chunk ending with [DONE], and their text is a
# step holod's parser accepts.
for task in "Open the text editor and type hello" "Close the window" "Scroll down to the end"; do
	req=$(jq -cn --arg m "$REMOTE_MODEL" --arg sys "$system" --arg task "Task: $task" \
		--argjson schema "$schema" '{model: $m, stream: true, max_tokens: 4096,
		messages: [{role: "system", content: $sys},
			   {role: "user", content: [{type: "text", text: $task}]}],
		response_format: {type: "json_object", schema: $schema}}')
	code=$(chat "$req")
	if [ "$code" != 200 ]; then
		fail "streamed completion for '$task': HTTP $code: $(head -c 500 "$T/body")"
		continue
	fi
	tail_line=$(grep '^data: ' "$T/body" | tail -n 1)
	[ "$tail_line" = "data: [DONE]" ] || fail "the stream for '$task' does not end with data: [DONE]"
	chunks=$(grep '^data: {' "$T/body" | sed 's/^data: //')
	[ "$(printf "%s\n" "$chunks" | jq -s 'map(select(.object == "chat.completion.chunk")) | length')" -ge 2 ] ||
		fail "the stream for '$task' has fewer than 2 chat.completion.chunk events"
	step=$(printf "%s\n" "$chunks" | jq -rj '.choices[0].delta.content // empty')
	finish=$(printf "%s\n" "$chunks" | jq -r '.choices[0].finish_reason // empty' | tail -n 1)
	[ "$finish" = stop ] || fail "the stream for '$task' finished with '$finish', not stop: $step"
	if out=$(printf '%s' "$step" | "$STEP_TOOL" check); then
		echo "step for '$task': $out"
	else
		fail "the streamed step for '$task' is not a valid step: $out: $step"
	fi
done

# The OpenAI form {"type":"json_schema",...}: this server refuses it with HTTP 500 and a message
# that names response_format (what holod's fallback to the json_object form keys on).
req=$(jq -cn --arg m "$REMOTE_MODEL" --argjson schema "$schema" '{model: $m, stream: true,
	messages: [{role: "user", content: "Task: open the editor"}],
	response_format: {type: "json_schema", json_schema: {name: "step", strict: true, schema: $schema}}}')
code=$(chat "$req")
{ [ "$code" = 500 ] && grep -q "response_format" "$T/body"; } ||
	fail "response_format json_schema: expected HTTP 500 naming response_format, got $code: $(head -c 300 "$T/body")"

# An image part (a PNG data URL, the window layout's observation): refused, the tiny model
# reads text only. So holod's test against this server sends the text-only layout.
png=iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==
req=$(jq -cn --arg m "$REMOTE_MODEL" --arg url "data:image/png;base64,$png" '{model: $m,
	messages: [{role: "user", content: [{type: "text", text: "What is on the screen?"},
					     {type: "image_url", image_url: {url: $url}}]}]}')
code=$(chat "$req")
{ [ "$code" = 500 ] && grep -q "cannot read a content part of type image_url" "$T/body"; } ||
	fail "image_url part: expected HTTP 500 naming image_url, got $code: $(head -c 300 "$T/body")"

# None of it took the server down (a grammar llama.cpp cannot parse ends its process), and
# remote_server_stop ends it (no test leaves a server behind).
pid=$REMOTE_PID
kill -0 "$pid" 2>/dev/null || fail "the server exited during the test"
remote_server_stop
kill -0 "$pid" 2>/dev/null && fail "the server is still running after remote_server_stop"
pass_or_fail
