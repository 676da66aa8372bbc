#!/bin/sh
# History modes (agent.md 2), checked with the token counts the journal keeps per step:
#   persistent: only the new turn is prefilled each step, the session grows by exactly what
#               was appended and decoded: session[k] = session[k-1] + appended[k] + decoded[k],
#               and what is appended does not grow with the number of steps;
#   window:     every step restarts from the prefix snapshot: session[k] = prefix + appended[k]
#               + decoded[k], and the window grows by the last step's turns; with K = 1 only
#               one screenshot is sent, so it grows less than with K = 3;
#   rebuild:    a persistent session about to pass --context-tokens is rebuilt from the prefix
#               snapshot and the recent history, and goes on appending from there.
# The journal's prompt_text (the appended tokens as text) shows what each step sent: never the
# system prompt or the task again, the previous action's result, one screenshot per step
# (persistent), or the whole history with only the last K screenshots (window).
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
start_agent

run_task() { # BODY -> TASK, rows in $T/rows
	submit "$1"
	wait_task "$TASK" failed 240
	token_rows "$TASK" >"$T/rows"
}

# ---- persistent
run_task '{"instruction": "Click the red block.", "max_steps": 4, "history": "persistent"}'
P=$TASK
awk -v name=persistent '
	{ idx[NR] = $1; a[NR] = $2; d[NR] = $3; s[NR] = $4; mode[NR] = $5 }
	END {
		bad = 0
		if (NR != 4) { print name ": " NR " steps"; bad = 1 }
		prefix = s[1] - a[1] - d[1]
		for (k = 1; k <= NR; k++) {
			if (mode[k] != "persistent") { print name ": step " k " mode " mode[k]; bad = 1 }
			if (k > 1 && s[k] != s[k-1] + a[k] + d[k]) { print name ": step " k " session " s[k] " != " s[k-1] " + " a[k] " + " d[k]; bad = 1 }
			if (k > 2 && a[k] != a[2]) { print name ": step " k " appended " a[k] " != " a[2]; bad = 1 }
			if (a[k] >= prefix) { print name ": step " k " re-prefilled " a[k] " >= prefix " prefix; bad = 1 }
		}
		print prefix > "'"$T"'/prefix"
		exit bad
	}' "$T/rows" || fail "persistent token counts: $(tr '\n' ';' <"$T/rows")"
PREFIX=$(cat "$T/prefix")
steps "$P"
check_steps "persistent step 0 text" '.steps[0].agent.prompt_text | startswith("<SPECIAL_11>User\n<observation><img><image>x")
	and endswith("<SPECIAL_12>\n") and (contains("tool_output") | not)'
check_steps "persistent text: only the new turn" '[.steps[1:][] as $s | .steps[$s.index - 1] as $p
	| $s.agent.prompt_text | startswith("<SPECIAL_11>User\n<tool_output tool=\"click\">clicked left x1 at (\($p.pixels.x),\($p.pixels.y))</tool_output>\n<observation><img>")
	and ([match("<observation>"; "g")] | length) == 1 and (contains("SPECIAL_10") | not)
	and (contains("Task:") | not) and (contains("\"tool_call\"") | not)] | all'
cp "$T/rows" "$T/rows.p"

# ---- window, K = 1 and K = 3
for K in 1 3; do
	run_task "{\"instruction\": \"Click the red block.\", \"max_steps\": 4, \"history\": \"window\", \"window\": $K}"
	cp "$T/rows" "$T/rows.w$K"
	api GET "/v1/tasks/$TASK"
	expect_json "window spec" .spec.history window
	expect_json "window spec" .spec.window "$K"
	steps "$TASK"
	check_steps "window $K text" "[.steps[] | .index as \$i | .agent.prompt_text
		| ([match(\"<observation>\"; \"g\")] | length) == \$i + 1
		and ([match(\"<img>\"; \"g\")] | length) == ([\$i + 1, $K] | min)
		and ([match(\"\\\\[screenshot evicted\\\\]\"; \"g\")] | length) == ([\$i + 1 - $K, 0] | max)
		and ([match(\"<SPECIAL_11>Assistant\\n{\"; \"g\")] | length) == \$i
		and (contains(\"SPECIAL_10\") | not) and (contains(\"Task:\") | not)] | all"
	awk -v name="window $K" -v prefix="$PREFIX" '
		{ a[NR] = $2; d[NR] = $3; s[NR] = $4; mode[NR] = $5 }
		END {
			bad = 0
			if (NR != 4) { print name ": " NR " steps"; bad = 1 }
			for (k = 1; k <= NR; k++) {
				if (mode[k] != "window") { print name ": step " k " mode " mode[k]; bad = 1 }
				if (s[k] != prefix + a[k] + d[k]) { print name ": step " k " session " s[k] " != " prefix " + " a[k] " + " d[k]; bad = 1 }
				if (k > 1 && a[k] <= a[k-1] + d[k-1]) { print name ": step " k " window " a[k] " did not grow by the last turn"; bad = 1 }
			}
			exit bad
		}' "$T/rows" || fail "window $K token counts: $(tr '\n' ';' <"$T/rows")"
done
# Same decisions, so the same text; K = 3 carries two more screenshots at the last step.
W1=$(awk 'NR == 4 { print $2 }' "$T/rows.w1")
W3=$(awk 'NR == 4 { print $2 }' "$T/rows.w3")
[ "$W3" -gt "$W1" ] || fail "window 3 appended $W3 tokens at step 3, window 1 $W1"
# The first step has no history: both windows send the same tokens.
[ "$(head -n 1 "$T/rows.w1" | cut -d' ' -f2)" = "$(head -n 1 "$T/rows.w3" | cut -d' ' -f2)" ] ||
	fail "first window steps differ: $(head -n 1 "$T/rows.w1") / $(head -n 1 "$T/rows.w3")"
stop_holod || fail "holod exit status $?"

# ---- persistent with a small context: a rebuild, then appending again
rm -f "$SOCK"
CAP=$((PREFIX + 1000))
start_agent --context-tokens $CAP --step-tokens 300
run_task '{"instruction": "Click the red block.", "max_steps": 7}'
awk -v prefix="$PREFIX" -v cap=$CAP '
	{ a[NR] = $2; d[NR] = $3; s[NR] = $4; mode[NR] = $5 }
	END {
		bad = 0; rebuilt = 0
		for (k = 1; k <= NR; k++) {
			if (s[k] > cap) { print "step " k " session " s[k] " over the cap " cap; bad = 1 }
			if (mode[k] == "rebuild") {
				rebuilt++
				if (k < NR && mode[k+1] == "persistent") appended_after++
				if (s[k] != prefix + a[k] + d[k]) { print "rebuild at " k ": " s[k] " != " prefix " + " a[k] " + " d[k]; bad = 1 }
			} else if (mode[k] == "persistent") {
				if (k > 1 && s[k] != s[k-1] + a[k] + d[k]) { print "step " k " did not append"; bad = 1 }
			} else { print "step " k " mode " mode[k]; bad = 1 }
		}
		if (NR != 7 || rebuilt < 1 || appended_after < 1) { print NR " steps, " rebuilt " rebuilds, " appended_after " appended after one"; bad = 1 }
		exit bad
	}' "$T/rows" || fail "rebuild token counts: $(tr '\n' ';' <"$T/rows")"
stop_holod || fail "holod exit status $?"
for f in p w1 w3; do echo "$f: $(tr '\n' ';' <"$T/rows.$f")"; done
echo "rebuild: $(tr '\n' ';' <"$T/rows")"
pass_or_fail
