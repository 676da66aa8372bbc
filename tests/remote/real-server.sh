#!/bin/sh
# holod --remote against a real OpenAI-compatible server: llama.cpp's, through llama-cpp-python
# (tests/remote/lib.sh), serving the tiny random model of tools/remote-server/tiny_model.py. An
# instruction task runs several steps through it: every step the server streams is one holod's
# parser accepts and holod acts on, and the journal holds the provider, the served model and
# the server's latency of each step (and no usage: this server streams none). The model reads text only, so holod sends the text-only
# layout (--remote-images none; docs/remote-server.md). The model never answers (its output
# biases), so the task ends at its step budget.
# Environment from meson: HOLOD, HOLO_TEST_CLIENT (optional), HOLOD_SOURCE_ROOT.
. "$(dirname "$0")/lib.sh"

remote_require Xvfb sqlite3
remote_server_start || pass_or_fail

STEPS=3
start_xvfb 640x400x24
start_holod --remote "$REMOTE_URL" --remote-model "$REMOTE_MODEL" --remote-images none \
	--remote-timeout 60 --history window --window 2
api GET /v1/status
expect_json "status" .provider.name remote
expect_json "status" .provider.endpoint "$REMOTE_URL"

submit "{\"instruction\": \"Open the text editor and type hello\", \"max_steps\": $STEPS}"
wait_task "$TASK" failed 120
api GET "/v1/tasks/$TASK"
case "$(jq -r .error "$BODY")" in
*"max_steps budget ($STEPS) reached without an answer"*) ;;
*) fail "the task did not end at its step budget: $(jq -r .error "$BODY")" ;;
esac

# Every step: the server's first answer parsed (one attempt), its tool (never answer) carried out,
# asked of the remote provider, the served model named and the server's latency measured.
api GET "/v1/tasks/$TASK/steps"
jq -e --argjson n "$STEPS" --arg m "$REMOTE_MODEL" '(.steps | length) == $n
	and all(.steps[]; .agent.provider == "remote" and .agent.remote.model == $m
		and .agent.attempts == 1 and .status == "ok"
		and .agent.remote.server_us > 0 and (.tool_call.tool_name | type) == "string"
		and .tool_call.tool_name != "answer")' "$BODY" >/dev/null ||
	fail "the steps are not $STEPS remote steps with the server's latency: $(head -c 1500 "$BODY")"
# This server streams no usage (docs/remote-server.md): holod journals none rather than a guess.
jq -e 'all(.steps[]; .agent.remote.prompt_tokens == null and .agent.remote.completion_tokens == null)' \
	"$BODY" >/dev/null || fail "steps carry usage this server never sent: $(head -c 1500 "$BODY")"
echo "steps: $(jq -c '[.steps[] | {tool: .tool_call.tool_name, remote: .agent.remote}]' "$BODY")"

# The journal itself (docs/journal.md): one row per step with the provider, model and latency.
rows=$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $TASK AND provider = 'remote'
	AND remote_model = '$REMOTE_MODEL' AND server_us > 0")
[ "$rows" = "$STEPS" ] || fail "the journal holds $rows remote steps with latency, not $STEPS"

# Each step was one streamed chat completion the server answered with 200 (holod's first
# request in the OpenAI form is refused by this server, 500, and holod falls back to its own
# form: docs/remote-server.md).
ok=$(grep -c '"POST /v1/chat/completions HTTP/1.1" 200' "$REMOTE_LOG")
[ "$ok" -ge "$STEPS" ] || fail "the server answered $ok chat completions with 200, not $STEPS"
api GET /v1/status
expect_json "status" .provider.structured_output json_object
expect_json "status" .provider.server openai

# holod keeps serving after the task; the server is still up.
kill -0 "$REMOTE_PID" 2>/dev/null || fail "the server exited during the task"
status_ok || fail "holod stopped answering after the task"
pass_or_fail
