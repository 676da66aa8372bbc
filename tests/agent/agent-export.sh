#!/bin/sh
# `holoctl export --format chat` round-trips: one line per instruction task in the model's chat
# format, which chat-prefill re-renders with the engine's chat renderer and the model's
# tokenizer into exactly the ids the session prefilled (the counts and SHA-256 digests the
# journal recorded), for a persistent task, a window task whose older screenshots were
# evicted, a persistent session rebuilt at its cap, and a rolling one (the default) whose
# steps append the evicted turn and the window to its snapshot, rebuilt at the same cap. An export changed by one character (a
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
submit '{"instruction": "Click the red block.", "max_steps": 6, "history": "persistent"}'
R=$TASK
wait_task "$R" failed 240
# Rebuilt, then appending again from the rebuilt conversation.
[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps a JOIN steps b ON b.task_id = a.task_id
	AND b.idx = a.idx + 1 WHERE a.task_id = $R AND a.prompt = 'rebuild' AND b.prompt = 'persistent'")" -ge 1 ] ||
	fail "task $R was not rebuilt then appended to: $(sqlite3 "$DB" "SELECT idx, prompt FROM steps WHERE task_id = $R")"
submit '{"instruction": "Click the red block.", "max_steps": 9, "window": 1}'
L=$TASK
wait_task "$L" failed 240
[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps a JOIN steps b ON b.task_id = a.task_id
	AND b.idx = a.idx + 1 WHERE a.task_id = $L AND a.prompt = 'rebuild' AND b.prompt = 'rolling'")" -ge 1 ] ||
	fail "task $L was not rebuilt then rolled: $(sqlite3 "$DB" "SELECT idx, prompt FROM steps WHERE task_id = $L")"

"$HOLOCTL" export -o "$T/exp" --format chat "$P" "$W" "$S" "$R" "$L" >"$T/exp.out" 2>"$T/err" ||
	fail "holoctl export --format chat: $(cat "$T/err")"
grep -q 'chat.jsonl: 4 tasks (1 without a conversation' "$T/exp.out" ||
	fail "export summary: $(cat "$T/exp.out")"
[ "$(wc -l <"$T/exp/chat.jsonl")" = 4 ] || fail "chat.jsonl: not four lines"
head -c 1200 "$T/exp/chat.jsonl"; echo

# The conversation: system, task, then per step the previous action's result as a user message
# of its own (from the second step on), the observation's user turn with its screenshot, and the
# model's step as the assistant turn: the turns the model saw.
jq -e -s --argjson p "$P" '.[] | select(.task_id == $p)
	| .format == "holo3" and .history == "persistent"
	and ([.messages[].role] == ["system", "user", "user", "assistant", "user", "user",
	                            "assistant", "user", "user", "assistant"])
	and .messages[1].content == "Task: Click the red block."
	and (.messages[0].content | length > 100)
	and .messages[2].content == "<observation>\n<image>\n</observation>"
	and (.messages[4].content | startswith("<tool_output tool=\"click\">\nclicked left x1 at (")
		and endswith("\n</tool_output>"))
	and (.messages[4] | has("images") | not)
	and .messages[5].content == "<observation>\n<image>\n</observation>"
	and .messages[5].images[0].path == "images/\($p)-1-before.png"
	and .messages[2].images[0].path == "images/\($p)-0-before.png"
	and .messages[2].images[0].tiles >= 1 and .messages[2].images[0].width == 640
	and (.prefill.steps | length == 3 and all(.prompt == "persistent" and .valid))' \
	"$T/exp/chat.jsonl" >/dev/null || fail "persistent line: $(grep "\"task_id\":$P," "$T/exp/chat.jsonl")"
for f in "$T"/exp/images/*; do
	[ -s "$f" ] || fail "empty image $f"
done
[ "$(ls "$T/exp/images" | wc -l)" = 21 ] || fail "images: $(ls "$T/exp/images")"
# The assistant turns are what the model wrote.
steps "$P"
jq -r '.steps[].agent.raw_output' "$T/steps.json" >"$T/raw"
jq -r --argjson p "$P" 'select(.task_id == $p) | .messages[] | select(.role == "assistant")
	| .content' "$T/exp/chat.jsonl" >"$T/assistant"
cmp -s "$T/raw" "$T/assistant" || fail "assistant turns differ from the raw outputs"
jq -e -s --argjson w "$W" '.[] | select(.task_id == $w) | .history == "window" and .window == 1
	and (.prefill.steps | all(.prompt == "window"))' "$T/exp/chat.jsonl" >/dev/null ||
	fail "window line"
jq -e -s --argjson l "$L" '.[] | select(.task_id == $l) | .history == "rolling" and .window == 1
	and (.prefill.steps | all(.prompt == "rolling" or .prompt == "rebuild"))' \
	"$T/exp/chat.jsonl" >/dev/null || fail "rolling line"

# The round trip.
"$CHAT_PREFILL" "$AGENT_MODEL" "$T/exp" >"$T/rt" 2>&1 || fail "round trip: $(cat "$T/rt")"
cat "$T/rt"
[ "$(grep -c 'all match what the session prefilled' "$T/rt")" = 4 ] || fail "round trip: $(cat "$T/rt")"

# One character changed: the step that carries it no longer matches.
mkdir "$T/bad"
cp -r "$T/exp/images" "$T/bad/"
jq -c --argjson p "$P" 'if .task_id == $p then .messages[7].content |= sub("clicked"; "Clicked")
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
# A rolling step appends the turn that leaves its window of 1 in evicted form: the first
# step's thought is prefilled at step 1, into the snapshot the later steps start from.
jq -c --argjson l "$L" 'select(.task_id == $l) | .messages[3].content |=
	(fromjson | .thought = "elsewhere" | tojson)' "$T/exp/chat.jsonl" >"$T/bad/chat.jsonl"
"$CHAT_PREFILL" "$AGENT_MODEL" "$T/bad" >"$T/rt" 2>&1
RC=$?
[ "$RC" = 1 ] && grep -q "^task $L step 1 (rolling): " "$T/rt" ||
	fail "changed evicted turn: exit $RC: $(cat "$T/rt")"
cat "$T/rt"
stop_holod || fail "holod exit status $?"
pass_or_fail
