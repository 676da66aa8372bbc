#!/bin/sh
# Thinking (docs/policy.md, thinking) on the tiny agent model, which writes '"' forever when
# nothing constrains it: with --thinking on every step opens "<think>\n", the think block is
# decoded free until the budget (--thinking-tokens) closes it with "</think>", then the step is
# decoded under the grammar and parses. The think text is journaled (agent.reasoning, and the raw
# output as sampled), shown by `holoctl run --follow`, and dropped from what the model is given
# next:
#   rolling: the next steps' history holds each earlier step as its canonical JSON, no think
#            text and no "</think>";
#   persistent: the session is taken back to the generation prompt and the turn closed with
#            "</think>" + the step, so it grows by what was appended only, never by the decoded
#            think tokens (session[k] = session[k-1] + appended[k]), and the chat export of the
#            task re-renders to the ids the session prefilled (chat-prefill);
#   "thinking": false on the task: the generation prompt closes the block at once
#            (<think></think>), the raw output is the step alone, as with --thinking off.
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
# greedy: the steering's '"' wins every free token by a wide margin (no sampled 'c' or '5')
start_agent --thinking on --thinking-tokens 12 --temperature 0

# ---- rolling (the default history): 3 steps
submit '{"instruction": "Click the red block.", "max_steps": 3}'
R=$TASK
wait_task "$R" failed 240
api GET "/v1/tasks/$R"
expect_json "provenance" .provenance.thinking true
expect_json "provenance" .provenance.thinking_tokens 12
steps "$R"
check_steps "3 valid steps" '(.steps | length) == 3 and ([.steps[] | .status == "ok"] | all)'
check_steps "free text, cut by the budget" '[.steps[].agent.reasoning
	| type == "string" and test("^\"+$") and length == 12] | all'
check_steps "then </think> and a step" '[.steps[].agent | .raw_output
	| startswith(("\"" * 12) + "</think>")
	and (.[(index("</think>") + 8):] | fromjson | keys) == ["note", "thought", "tool_call"]] | all'
check_steps "the generation prompt opens the block" '[.steps[].agent.prompt_text
	| endswith("<SPECIAL_11>Assistant\n<think>\n")] | all'
check_steps "no think text in the next steps" '[.steps[1:][] | .index as $i | .agent.prompt_text
	| (contains("</think>") | not) and (contains("\"\"\"\"") | not)
	and ([match("<SPECIAL_11>Assistant\n{\"note\""; "g")] | length) == $i] | all'

# ---- holoctl run --follow shows the think block of each step
HOLOD_SOCKET="$SOCK" "$HOLOCTL" run --follow --max-steps 1 Click the red block. >"$T/out" 2>"$T/err"
[ "$(grep -c '^        reasoning: """"""""""""$' "$T/out")" = 1 ] ||
	fail "--follow: no reasoning line: $(cat "$T/out" "$T/err")"

# ---- persistent: 3 steps; the decoded think tokens leave the session
submit '{"instruction": "Click the red block.", "max_steps": 3, "history": "persistent"}'
P=$TASK
wait_task "$P" failed 240
token_rows "$P" >"$T/rows"
awk '
	{ a[NR] = $2; d[NR] = $3; s[NR] = $4; mode[NR] = $5 }
	END {
		bad = 0
		if (NR != 3) { print NR " steps"; bad = 1 }
		for (k = 1; k <= NR; k++) {
			if (mode[k] != "persistent") { print "step " k " mode " mode[k]; bad = 1 }
			if (d[k] <= 12) { print "step " k " decoded " d[k]; bad = 1 }
			if (k > 1 && s[k] != s[k-1] + a[k]) { print "step " k " session " s[k] " != " s[k-1] " + " a[k]; bad = 1 }
		}
		exit bad
	}' "$T/rows" || fail "persistent: the think tokens stayed in the session: $(tr '\n' ';' <"$T/rows")"
steps "$P"
check_steps "persistent: the turn closed without the thought" '[.steps[].agent.prompt_text
	| contains("<SPECIAL_11>Assistant\n<think>\n</think>{\"note\"") and endswith("}\n<SPECIAL_12>\n")
	and (contains("\"\"\"\"") | not)] | all'
HOLOD_SOCKET="$SOCK" "$HOLOCTL" export -o "$T/export" --format chat "$P" >"$T/export.log" 2>&1 ||
	fail "export: $(cat "$T/export.log")"
"$CHAT_PREFILL" "$AGENT_MODEL" "$T/export" >"$T/prefill.log" 2>&1 ||
	fail "the exported thinking steps do not re-render to what was prefilled: $(cat "$T/prefill.log")"

# ---- the task turns thinking off
submit '{"instruction": "Click the red block.", "max_steps": 2, "thinking": false}'
O=$TASK
wait_task "$O" failed 240
api GET "/v1/tasks/$O"
expect_json "provenance off" .provenance.thinking false
steps "$O"
check_steps "off: no block" '[.steps[] | .status == "ok" and .agent.reasoning == null
	and (.agent.raw_output | fromjson | keys) == ["note", "thought", "tool_call"]
	and (.agent.prompt_text | endswith("<SPECIAL_11>Assistant\n<think></think>"))] | all'

pass_or_fail
