#!/bin/sh
# History modes (agent.md 2), checked with the token counts the journal keeps per step:
#   persistent: only the new turn is prefilled each step, the session grows by exactly what
#               was appended and decoded: session[k] = session[k-1] + appended[k] + decoded[k],
#               and what is appended does not grow with the number of steps;
#   window:     every step restarts from the prefix snapshot: session[k] = prefix + appended[k]
#               + decoded[k], and the window grows by the last step's turns; with K = 1 only
#               one screenshot is sent, so it grows less than with K = 3;
#   rolling:    (the default) the same context as a window: each step restores a snapshot of
#               the prefix and the observations already evicted, appends the one leaving the
#               window in its evicted form, snapshots, then appends the last K; so its prompt
#               text is the end of the window's, prefix + what its snapshot held + appended =
#               the window's prefix + appended, and what it appends is the same each step once
#               every evicted turn carries a tool result (from step K + 1 on, 0-based);
#   rebuild:    a persistent session about to pass --context-tokens is rebuilt from the prefix
#               snapshot and the recent history, and goes on appending from there; a rolling
#               session whose snapshot and window would pass it is rebuilt the same way and
#               goes on rolling from there.
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
check_steps "persistent step 0 text" '.steps[0].agent.prompt_text | startswith("<SPECIAL_11>User\n<observation>\n<img><image>x")
	and endswith("<SPECIAL_12>\n") and (contains("tool_output") | not)'
check_steps "persistent text: only the new turn" '[.steps[1:][] as $s | .steps[$s.index - 1] as $p
	| $s.agent.prompt_text | startswith("<SPECIAL_11>User\n<tool_output tool=\"click\">\nclicked left x1 at (\($p.model.x),\($p.model.y))\n</tool_output>\n<SPECIAL_11>User\n<observation>\n<img>")
	and $p.result == "clicked left x1 at (\($p.pixels.x),\($p.pixels.y))" and ($p.model == $p.pixels or (contains("at (\($p.pixels.x),\($p.pixels.y))") | not))
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
# ---- rolling, K = 2, against a window of the same K: the same context, from a snapshot
for H in window rolling; do
	run_task "{\"instruction\": \"Click the red block.\", \"max_steps\": 6, \"history\": \"$H\", \"window\": 2}"
	cp "$T/rows" "$T/rows.$H"
	steps "$TASK"
	cp "$T/steps.json" "$T/steps.$H"
done
api GET "/v1/tasks/$TASK"
expect_json "rolling spec" .spec.history rolling
expect_json "rolling provenance" .provenance.history rolling
# Each step's text ends the window's step text (what the snapshot held is the rest of it), with
# one evicted turn before the window from step 2 on, none before.
jq -e -n --slurpfile w "$T/steps.window" --slurpfile r "$T/steps.rolling" '
	[range(0; 6) as $i | $w[0].steps[$i].agent.prompt_text as $wt
	 | $r[0].steps[$i].agent.prompt_text as $rt
	 | ($wt | endswith($rt))
	   and ([$rt | match("<img>"; "g")] | length) == ([$i + 1, 2] | min)
	   and ([$rt | match("\\[screenshot evicted\\]"; "g")] | length) == (if $i >= 2 then 1 else 0 end)
	   and ($rt | contains("SPECIAL_10") | not) and ($rt | contains("Task:") | not)
	   and $r[0].steps[$i].agent.prompt == "rolling"] | all' >/dev/null ||
	fail "rolling text is not the end of the window's: $(jq -c '[.steps[].agent.prompt_text]' "$T/steps.rolling" | head -c 3000)"
paste -d' ' "$T/rows.window" "$T/rows.rolling" | awk -v prefix="$PREFIX" -v K=2 '
	{ wa[NR] = $2; a[NR] = $7; d[NR] = $8; s[NR] = $9; mode[NR] = $10 }
	END {
		bad = 0
		if (NR != 6) { print "rolling: " NR " steps"; bad = 1 }
		for (k = 1; k <= NR; k++) {
			i = k - 1
			base[k] = s[k] - a[k] - d[k]
			if (mode[k] != "rolling") { print "rolling: step " i " mode " mode[k]; bad = 1 }
			# what the snapshot held + what the step appended = the window
			if (base[k] - prefix + a[k] != wa[k]) { print "rolling: step " i " snapshot " base[k] " + appended " a[k] " is not prefix " prefix " + window " wa[k]; bad = 1 }
			if (i <= K && base[k] != prefix) { print "rolling: step " i " started from " base[k] ", not the prefix " prefix; bad = 1 }
			if (i > K && base[k] <= base[k-1]) { print "rolling: step " i " snapshot " base[k] " did not grow from " base[k-1]; bad = 1 }
			if (i > K && a[k] != a[K+2]) { print "rolling: step " i " appended " a[k] ", step " K+1 " " a[K+2]; bad = 1 }
		}
		if (NR == 6 && wa[6] <= a[6] + 100) { print "rolling: the window prefilled " wa[6] " at step 5, rolling " a[6]; bad = 1 }
		exit bad
	}' || fail "rolling token counts: $(paste -d' ' "$T/rows.window" "$T/rows.rolling" | tr '\n' ';')"

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
run_task '{"instruction": "Click the red block.", "max_steps": 7, "history": "persistent"}'
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
cp "$T/rows" "$T/rows.pr"

# ---- rolling with the same small context: rebuilt from the prefix, then rolling again
run_task '{"instruction": "Click the red block.", "max_steps": 9, "window": 1}'
awk -v prefix="$PREFIX" -v cap=$CAP '
	{ a[NR] = $2; d[NR] = $3; s[NR] = $4; mode[NR] = $5 }
	END {
		bad = 0; rebuilt = 0; rolled_after = 0
		for (k = 1; k <= NR; k++) {
			if (s[k] > cap) { print "step " k " session " s[k] " over the cap " cap; bad = 1 }
			base = s[k] - a[k] - d[k]
			if (mode[k] == "rebuild") {
				rebuilt++
				if (k < NR && mode[k+1] == "rolling") rolled_after++
				if (base != prefix) { print "rebuild at " k ": " s[k] " != " prefix " + " a[k] " + " d[k]; bad = 1 }
			} else if (mode[k] == "rolling") {
				if (base < prefix || (k > 1 && base >= s[k-1])) { print "step " k " rolled from " base; bad = 1 }
			} else { print "step " k " mode " mode[k]; bad = 1 }
		}
		if (NR != 9 || rebuilt < 1 || rolled_after < 1) { print NR " steps, " rebuilt " rebuilds, " rolled_after " rolled after one"; bad = 1 }
		exit bad
	}' "$T/rows" || fail "rolling rebuild token counts: $(tr '\n' ';' <"$T/rows")"
cp "$T/rows" "$T/rows.rr"
stop_holod || fail "holod exit status $?"
for f in window rolling; do echo "K=2 $f: $(tr '\n' ';' <"$T/rows.$f")"; done
echo "rolling rebuild: $(tr '\n' ';' <"$T/rows.rr")"
for f in p w1 w3; do echo "$f: $(tr '\n' ';' <"$T/rows.$f")"; done
echo "rebuild: $(tr '\n' ';' <"$T/rows.pr")"
pass_or_fail
