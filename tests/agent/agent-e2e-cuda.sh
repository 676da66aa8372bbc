#!/bin/sh
# The agent end to end on the CUDA backend (the emulated build), against the CPU on the same
# model: tests/fixtures/models/tiny-agent-short, the agent fixture with a tokenizer whose merges
# cover the system prompt (a ~300-token prefix instead of ~2000, which the emulated attention
# could not prefill in time). On each backend, one holod runs the same two tasks:
#   persistent, 3 steps: schema-valid steered clicks, executed as decoded, journaled, and the
#               session grows by exactly what each step appended and decoded;
#   window K=1, 2 steps, jump-forward off: every step restarts from the prefix snapshot and
#               the window grows by the last step's turns;
#   rolling K=1, 3 steps (the default history): step 1 appends observation 0 in evicted form and
#               snapshots the session on the backend, step 2 restores that snapshot: the
#               session is the snapshot before the step + appended + decoded;
#   jump-forward: the persistent steps (on, the default) journal forced tokens riding along
#               with sampled ones; the window task's (off) a forward per token, valid clicks.
# The two backends must journal the same shape: the same prefix, the same tokens appended at the
# first step of each task, the same modes and tools; the recording client must have seen every
# journaled click of both, in order.
. "$(dirname "$0")/agent-lib.sh"
require_agent
[ -n "${HOLOD_TEST_GPU_EMULATED:-}" ] || test_skip "not the emulated CUDA build"
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client

# A task takes tens of seconds on the emulated GPU: polling it every 20 ms would spend about as
# much CPU in curl and jq as holod spends on the task.
run_task() { # BODY -> TASK, rows in $T/rows
	submit "$1"
	WAIT_POLL_S=0.25
	wait_task "$TASK" failed 240
	WAIT_POLL_S=
	token_rows "$TASK" >"$T/rows"
}

for AGENT_BACKEND in cpu cuda; do
	B=$AGENT_BACKEND
	rm -f "$SOCK"
	start_agent
	api GET /v1/status
	expect_json "$B status" .model.backend "$B"
	expect_json "$B status" .model.name tiny-agent-short

	# ---- persistent
	run_task '{"instruction": "Click the red block.", "max_steps": 3, "history": "persistent"}'
	cp "$T/rows" "$T/rows.$B.p"
	steps "$TASK"
	cp "$T/steps.json" "$T/steps.$B.p"
	check_steps "$B steps" '(.steps | length) == 3 and all(.steps[]; .status == "ok" and .error == null
		and .agent.attempts == 1)'
	check_steps "$B schema" 'all(.steps[]; (.agent.raw_output | fromjson | keys) == ["note", "thought", "tool_call"])'
	check_steps "$B executed = decoded" 'all(.steps[]; (.agent.raw_output | fromjson | .tool_call) as $c
		| $c.tool_name == .tool_call.tool_name and $c.x == .tool_call.x and $c.y == .tool_call.y)'
	check_steps "$B steered clicks" 'all(.steps[]; .tool_call.tool_name == "click"
		and .result == "clicked \(.tool_call.button // "left") x1 at (\(.pixels.x),\(.pixels.y))")'
	awk -v name="$B persistent" '
		{ a[NR] = $2; d[NR] = $3; s[NR] = $4; mode[NR] = $5 }
		END {
			bad = 0
			prefix = s[1] - a[1] - d[1]
			for (k = 1; k <= NR; k++) {
				if (mode[k] != "persistent") { print name ": step " k " mode " mode[k]; bad = 1 }
				if (k > 1 && s[k] != s[k-1] + a[k] + d[k]) { print name ": step " k " session " s[k] " != " s[k-1] " + " a[k] " + " d[k]; bad = 1 }
				if (k > 2 && a[k] != a[2]) { print name ": step " k " appended " a[k] " != " a[2]; bad = 1 }
				if (a[k] >= prefix) { print name ": step " k " re-prefilled " a[k] " >= prefix " prefix; bad = 1 }
			}
			print prefix > "'"$T/prefix.$B"'"
			exit bad
		}' "$T/rows" || fail "$B persistent token counts: $(tr '\n' ';' <"$T/rows")"

	# ---- window, K = 1, with jump-forward off (below)
	run_task '{"instruction": "Click the red block.", "max_steps": 2, "history": "window", "window": 1,
		"jump_forward": false}'
	cp "$T/rows" "$T/rows.$B.w"
	W_TASK=$TASK
	awk -v name="$B window" -v prefix="$(cat "$T/prefix.$B")" '
		{ a[NR] = $2; d[NR] = $3; s[NR] = $4; mode[NR] = $5 }
		END {
			bad = 0
			if (NR != 2) { print name ": " NR " steps"; bad = 1 }
			for (k = 1; k <= NR; k++) {
				if (mode[k] != "window") { print name ": step " k " mode " mode[k]; bad = 1 }
				if (s[k] != prefix + a[k] + d[k]) { print name ": step " k " session " s[k] " != " prefix " + " a[k] " + " d[k]; bad = 1 }
				if (k > 1 && a[k] <= a[k-1] + d[k-1]) { print name ": step " k " window " a[k] " did not grow by the last turn"; bad = 1 }
			}
			exit bad
		}' "$T/rows" || fail "$B window token counts: $(tr '\n' ';' <"$T/rows")"

	# ---- rolling, K = 1
	run_task '{"instruction": "Click the red block.", "max_steps": 3, "window": 1}'
	cp "$T/rows" "$T/rows.$B.r"
	awk -v name="$B rolling" -v prefix="$(cat "$T/prefix.$B")" '
		{ a[NR] = $2; d[NR] = $3; s[NR] = $4; mode[NR] = $5 }
		END {
			bad = 0
			if (NR != 3) { print name ": " NR " steps"; bad = 1 }
			for (k = 1; k <= NR; k++) {
				base[k] = s[k] - a[k] - d[k]
				if (mode[k] != "rolling") { print name ": step " k " mode " mode[k]; bad = 1 }
				if (k <= 2 && base[k] != prefix) { print name ": step " k " started from " base[k] ", not the prefix " prefix; bad = 1 }
				if (k == 3 && base[k] <= prefix) { print name ": step 3 did not start from the snapshot of the evicted turn: " base[k]; bad = 1 }
			}
			exit bad
		}' "$T/rows" || fail "$B rolling token counts: $(tr '\n' ';' <"$T/rows")"
	# ---- jump-forward on and off (issue 34): the persistent task decoded with it (the
	# default), the window task without; both valid clicks (not compared byte for byte, as
	# agent-sampling on the CPU: the forced ids are the canonical split the model need not
	# choose), and the journaled counts: on, the forced tokens ride along with the sampled ones
	# (the step's lead among them); off, a forward per token
	cp "$T/steps.$B.p" "$T/steps.json"
	check_steps "$B jump-forward on" 'all(.steps[]; .agent.tokens.forced > 0 and
		.agent.tokens.forwards + .agent.tokens.forced == .agent.tokens.decoded)'
	api GET "/v1/tasks/$W_TASK"
	expect_json "$B jump-forward off" .provenance.jump_forward false
	steps "$W_TASK"
	check_steps "$B clicks without jump-forward" '(.steps | length) == 2 and all(.steps[];
		.status == "ok" and .tool_call.tool_name == "click" and .agent.attempts == 1 and
		.agent.tokens.forced == 0 and .agent.tokens.forwards == .agent.tokens.decoded)'
	api GET /v1/status
	expect_json "$B session freed" .model.sessions 0
	stop_holod || fail "$B holod exit status $?"
done

# ---- the same journal shape on both backends
[ "$(cat "$T/prefix.cpu")" = "$(cat "$T/prefix.cuda")" ] ||
	fail "prefix: cpu $(cat "$T/prefix.cpu") tokens, cuda $(cat "$T/prefix.cuda")"
# the short tokenizer's merges were trained on the system prompt before later tools (ask_user)
# joined it: a few hundred tokens, against ~5000 with the plain one (gen_agent_model.py
# --short-prompt retrains them; 409 on 2026-11-29)
[ "$(cat "$T/prefix.cuda")" -lt 500 ] || fail "the prefix is $(cat "$T/prefix.cuda") tokens"
for h in p w r; do
	cut -d' ' -f5 "$T/rows.cpu.$h" >"$T/modes.cpu"
	cut -d' ' -f5 "$T/rows.cuda.$h" >"$T/modes.cuda"
	cmp -s "$T/modes.cpu" "$T/modes.cuda" || fail "$h modes differ"
	[ "$(head -n 1 "$T/rows.cpu.$h" | cut -d' ' -f2)" = "$(head -n 1 "$T/rows.cuda.$h" | cut -d' ' -f2)" ] ||
		fail "$h: first steps appended differently: $(head -n 1 "$T/rows.cpu.$h") / $(head -n 1 "$T/rows.cuda.$h")"
done
[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE status = 'ok' AND tool_name = 'click'")" = 16 ] ||
	fail "journal: $(sqlite3 "$DB" "SELECT task_id, idx, status, tool_name FROM steps" | tr '\n' ';')"
sqlite3 -separator ' ' "$DB" "SELECT px, py FROM steps ORDER BY task_id, idx" >"$T/journal.points"
sed -n 's/^press button=[0-9] .* root_x=\([0-9-]*\) root_y=\([0-9-]*\) .*/\1 \2/p' "$CLIENT_LOG" \
	>"$T/client.points"
cmp -s "$T/journal.points" "$T/client.points" ||
	fail "client clicks $(tr '\n' ';' <"$T/client.points") != journal $(tr '\n' ';' <"$T/journal.points")"
for f in cpu.p cpu.w cpu.r cuda.p cuda.w cuda.r; do echo "$f: $(tr '\n' ';' <"$T/rows.$f")"; done
pass_or_fail
