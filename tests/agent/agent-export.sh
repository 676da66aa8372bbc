#!/bin/sh
# `holoctl export --format chat` round-trips: one line per instruction task in the model's chat
# format, which chat-prefill re-renders with the engine's chat renderer and the model's
# tokenizer into exactly the ids the session prefilled (the counts and SHA-256 digests the
# journal recorded), for a persistent task, a window task whose older screenshots were
# evicted, and a persistent session rebuilt at its cap. An export changed by one character (a
# tool result, an assistant turn a window carries) no longer matches, at the step it changed.
. "$(dirname "$0")/agent-lib.sh"
require_agent
[ -x "${CHAT_PREFILL:-}" ] || { echo "skip: no chat-prefill"; exit 77; }
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
export HOLOD_SOCKET="$SOCK"

# The prefix length, for a context that forces a rebuild (as agent-history.sh does).
start_agent
submit '{"instruction": "Click the red block.", "max_steps": 3, "history": "persistent"}'
P=$TASK
wait_task "$P" failed 240
submit '{"instruction": "Click the red block.", "max_steps": 3, "history": "window", "window": 1}'
W=$TASK
wait_task "$W" failed 240
submit '{"script": [{"tool_name": "move", "x": 5, "y": 5}], "settle_ms": 0}'
S=$TASK
wait_task "$S" succeeded 60
PREFIX=$(sqlite3 "$DB" "SELECT json_extract(prompt, '$.tokens') FROM tasks WHERE id = $P")
stop_holod || fail "holod exit status $?"
rm -f "$SOCK"
start_agent --context-tokens $((PREFIX + 1000)) --step-tokens 300
submit '{"instruction": "Click the red block.", "max_steps": 6}'
R=$TASK
wait_task "$R" failed 240
# Rebuilt, then appending again from the rebuilt conversation.
[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps a JOIN steps b ON b.task_id = a.task_id
	AND b.idx = a.idx + 1 WHERE a.task_id = $R AND a.prompt = 'rebuild' AND b.prompt = 'persistent'")" -ge 1 ] ||
	fail "task $R was not rebuilt then appended to: $(sqlite3 "$DB" "SELECT idx, prompt FROM steps WHERE task_id = $R")"

"$HOLOCTL" export -o "$T/exp" --format chat "$P" "$W" "$S" "$R" >"$T/exp.out" 2>"$T/err" ||
	fail "holoctl export --format chat: $(cat "$T/err")"
grep -q 'chat.jsonl: 3 tasks (1 without a conversation' "$T/exp.out" ||
	fail "export summary: $(cat "$T/exp.out")"
[ "$(wc -l <"$T/exp/chat.jsonl")" = 3 ] || fail "chat.jsonl: not three lines"
head -c 1200 "$T/exp/chat.jsonl"; echo

# The conversation: system, task, then per step the user turn with its screenshot and the
# model's step as the assistant turn.
jq -e -s --argjson p "$P" '.[] | select(.task_id == $p)
	| .format == "holo3" and .history == "persistent"
	and ([.messages[].role] == ["system", "user", "user", "assistant", "user", "assistant",
	                            "user", "assistant"])
	and .messages[1].content == "Task: Click the red block."
	and (.messages[0].content | length > 100)
	and .messages[2].content == "<observation><image></observation>"
	and (.messages[4].content | startswith("<tool_output tool=\"click\">clicked left x1 at ("))
	and .messages[2].images[0].path == "images/\($p)-0-before.png"
	and .messages[2].images[0].tiles >= 1 and .messages[2].images[0].width == 640
	and (.prefill.steps | length == 3 and all(.prompt == "persistent" and .valid))' \
	"$T/exp/chat.jsonl" >/dev/null || fail "persistent line: $(grep "\"task_id\":$P," "$T/exp/chat.jsonl")"
for f in "$T"/exp/images/*; do
	[ -s "$f" ] || fail "empty image $f"
done
[ "$(ls "$T/exp/images" | wc -l)" = 12 ] || fail "images: $(ls "$T/exp/images")"
# The assistant turns are what the model wrote.
steps "$P"
jq -r '.steps[].agent.raw_output' "$T/steps.json" >"$T/raw"
jq -r --argjson p "$P" 'select(.task_id == $p) | .messages[] | select(.role == "assistant")
	| .content' "$T/exp/chat.jsonl" >"$T/assistant"
cmp -s "$T/raw" "$T/assistant" || fail "assistant turns differ from the raw outputs"
jq -e -s --argjson w "$W" '.[] | select(.task_id == $w) | .history == "window" and .window == 1
	and (.prefill.steps | all(.prompt == "window"))' "$T/exp/chat.jsonl" >/dev/null ||
	fail "window line"

# The round trip.
"$CHAT_PREFILL" "$AGENT_MODEL" "$T/exp" >"$T/rt" 2>&1 || fail "round trip: $(cat "$T/rt")"
cat "$T/rt"
[ "$(grep -c 'all match what the session prefilled' "$T/rt")" = 3 ] || fail "round trip: $(cat "$T/rt")"

# One character changed: the step that carries it no longer matches.
mkdir "$T/bad"
cp -r "$T/exp/images" "$T/bad/"
jq -c --argjson p "$P" 'if .task_id == $p then .messages[6].content |= sub("clicked"; "Clicked")
	else . end' "$T/exp/chat.jsonl" >"$T/bad/chat.jsonl"
"$CHAT_PREFILL" "$AGENT_MODEL" "$T/bad" >"$T/rt" 2>&1
RC=$?
[ "$RC" = 1 ] && grep -q "^task $P step 2 (persistent): rendered [0-9]* ids (sha256 [0-9a-f]*), the session prefilled [0-9]* (sha256 [0-9a-f]*)$" "$T/rt" ||
	fail "changed tool result: exit $RC: $(cat "$T/rt")"
# In a window the assistant turns of the history are prefilled again: changing the first
# step's thought shows at step 1.
jq -c --argjson w "$W" 'select(.task_id == $w) | .messages[3].content |=
	(fromjson | .thought = "elsewhere" | tojson)' "$T/exp/chat.jsonl" >"$T/bad/chat.jsonl"
"$CHAT_PREFILL" "$AGENT_MODEL" "$T/bad" >"$T/rt" 2>&1
RC=$?
[ "$RC" = 1 ] && grep -q "^task $W step 1 (window): " "$T/rt" ||
	fail "changed assistant turn: exit $RC: $(cat "$T/rt")"
cat "$T/rt"
stop_holod || fail "holod exit status $?"
pass_or_fail
