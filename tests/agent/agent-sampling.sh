#!/bin/sh
# Sampling as the policy format was trained (issue 30): an instruction task that sets nothing
# samples at holo3's temperature 0.8 and top_p 0.95 with a seed drawn at its start, all three in
# its provenance; the recorded seed samples the same steps again; temperature 0 is greedy
# whatever the seed; holod's --temperature, --top-p and --seed are the defaults tasks override.
# Jump-forward is on unless the task says otherwise (its provenance).
# Every task is a dry run: the sampled actions (a key press, a wait) change nothing on the
# screen, so a task run again sees the same screens.
. "$(dirname "$0")/agent-lib.sh"
require_agent
# The test environment decodes greedily (tests/meson.build); this test is about the defaults.
unset HOLOD_TEMPERATURE HOLOD_TOP_P HOLOD_SEED
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
start_agent

# raw ID: the task's decoded steps, one per line
raw() {
	curl -sS --unix-socket "$SOCK" "http://holod/v1/tasks/$1/steps" |
		jq -c '[.steps[] | .agent.raw_output]'
}
seed_of() {
	curl -sS --unix-socket "$SOCK" "http://holod/v1/tasks/$1" | jq -r .provenance.sampling.seed
}
finish() {
	wait_until 240 task_final "$1" || fail "task $1 did not finish"
}
TASK_TEXT='"instruction": "Click the red block.", "max_steps": 3, "dry_run": true'

# ---- the defaults: the format's, and a seed drawn per task, in /v1/status and the provenance
api GET /v1/status
expect_json "status sampling" '.sampling == {"format": "holo3", "temperature": 0.8, "top_p": 0.95,
	"seed": null}' true
"$HOLOCTL" status --all >"$T/status.out" 2>&1 || fail "holoctl status: $(cat "$T/status.out")"
grep -Eq '^sampling\.temperature +0\.8' "$T/status.out" ||
	fail "holoctl status shows no sampling: $(cat "$T/status.out")"
submit "{$TASK_TEXT}"
A=$TASK
finish "$A"
api GET "/v1/tasks/$A"
expect_json "default temperature" '.provenance.sampling.temperature == 0.8' true
expect_json "default top_p" '.provenance.sampling.top_p == 0.95' true
expect_json "drawn seed" '.provenance.sampling.seed | type == "number" and . >= 0
	and . <= 4294967295 and . == floor' true
expect_json "spec without a seed" '.spec | has("seed")' false
SEED_A=$(seed_of "$A")
"$HOLOCTL" show "$A" >"$T/show" 2>&1 || fail "holoctl show: $(cat "$T/show")"
grep -Eq "^sampling +temperature 0\.8, top_p 0\.95, seed $SEED_A," "$T/show" ||
	fail "holoctl show: no sampling row with seed $SEED_A: $(cat "$T/show")"
submit "{$TASK_TEXT}"
B=$TASK
finish "$B"
# 32 random bits each: equal once in 2^32 runs
[ "$(seed_of "$B")" != "$SEED_A" ] || fail "tasks $A and $B drew the same seed $SEED_A"

# ---- the recorded seed samples the same steps: through the API, and through holoctl run with
# the defaults spelled out
RAW_A=$(raw "$A")
[ "$(printf '%s' "$RAW_A" | jq length)" -ge 1 ] || fail "task $A decoded no step: $RAW_A"
submit "{$TASK_TEXT, \"seed\": $SEED_A}"
C=$TASK
finish "$C"
[ "$(seed_of "$C")" = "$SEED_A" ] || fail "task $C ran with seed $(seed_of "$C"), not $SEED_A"
[ "$(raw "$C")" = "$RAW_A" ] || fail "seed $SEED_A: task $C decoded $(raw "$C"), task $A $RAW_A"
"$HOLOCTL" --json run --max-steps 3 --dry-run --temperature 0.8 --top-p 0.95 --seed "$SEED_A" \
	"Click the red block." >"$T/run.out" 2>&1 || fail "holoctl run: $(cat "$T/run.out")"
D=$(jq -r .id "$T/run.out")
finish "$D"
api GET "/v1/tasks/$D"
expect_json "holoctl run's sampling" '.spec | [.temperature, .top_p, .seed] ==
	[0.8, 0.95, '"$SEED_A"']' true
[ "$(raw "$D")" = "$RAW_A" ] || fail "seed $SEED_A: task $D decoded $(raw "$D"), task $A $RAW_A"

# ---- sampling does sample: at temperature 2 with no nucleus cut, two seeds decode different
# strings (each a run of near-uniform draws over the vocabulary: never equal in practice)
submit '{"instruction": "Click the red block.", "max_steps": 1, "dry_run": true,
	"temperature": 2, "top_p": 1, "seed": 1}'
H1=$TASK
submit '{"instruction": "Click the red block.", "max_steps": 1, "dry_run": true,
	"temperature": 2, "top_p": 1, "seed": 2}'
H2=$TASK
finish "$H1"
finish "$H2"
[ "$(raw "$H1")" != "$(raw "$H2")" ] || fail "temperature 2: seeds 1 and 2 decoded the same $(raw "$H1")"

# ---- temperature 0 is greedy: the seed changes nothing, the steered model clicks
submit "{$TASK_TEXT, \"temperature\": 0, \"seed\": 1}"
G1=$TASK
finish "$G1"
submit "{$TASK_TEXT, \"temperature\": 0, \"seed\": 2}"
G2=$TASK
finish "$G2"
api GET "/v1/tasks/$G1"
expect_json "greedy provenance" '.provenance.sampling | [.temperature, .seed] == [0, 1]' true
[ "$(raw "$G1")" = "$(raw "$G2")" ] || fail "greedy: seeds 1 and 2 decoded $(raw "$G1") and $(raw "$G2")"
steps "$G1"
check_steps "greedy clicks" '(.steps | length) == 3 and all(.steps[]; .tool_call.tool_name == "click")'

# ---- jump-forward (docs/policy.md): on by default, off per task; greedy, both modes' steps are
# valid clicks (not compared byte for byte: the forced ids are the tokenizer's canonical split,
# which the model need not choose, so the contexts, and near-ties after them, can differ)
submit "{$TASK_TEXT, \"temperature\": 0, \"jump_forward\": false}"
J0=$TASK
finish "$J0"
api GET "/v1/tasks/$J0"
expect_json "jump-forward off" .provenance.jump_forward false
expect_json "spec jump_forward" .spec.jump_forward false
api GET "/v1/tasks/$G1"
expect_json "jump-forward on by default" .provenance.jump_forward true
steps "$J0"
check_steps "greedy clicks without jump-forward" '(.steps | length) == 3 and
	all(.steps[]; .status == "dry_run" and .tool_call.tool_name == "click")'
# the journaled counts (schema 11): off, every token decoded took its own forward; on, the
# forced ones rode along with a sampled one, so the forwards are the sampled tokens alone
check_steps "counts without jump-forward" 'all(.steps[]; .agent.attempts == 1 and
	.agent.tokens.forced == 0 and .agent.tokens.forwards == .agent.tokens.decoded)'
steps "$G1"
check_steps "counts with jump-forward" 'all(.steps[]; .agent.attempts == 1 and
	.agent.tokens.forced > 0 and .agent.tokens.forwards > 0 and
	.agent.tokens.forwards + .agent.tokens.forced == .agent.tokens.decoded)'
# holoctl show prints them per step, as the journal holds them
FWD=$(jq '.steps[0].agent.tokens | "\(.decoded) decoded, \(.forced) forced (jump-forward), \(.forwards) forwards"' \
	"$T/steps.json" | tr -d '"')
"$HOLOCTL" show "$G1" >"$T/show.jf" 2>&1 || fail "holoctl show: $(cat "$T/show.jf")"
grep -qx "  tokens: $FWD" "$T/show.jf" || fail "holoctl show has no '  tokens: $FWD': $(cat "$T/show.jf")"

# ---- out of range: refused, naming the field
api POST /v1/tasks '{"instruction": "x", "temperature": 3}'
expect_error "temperature range" 400 bad_request "temperature"
api POST /v1/tasks '{"instruction": "x", "top_p": 0}'
expect_error "top_p range" 400 bad_request "top_p"
api POST /v1/tasks '{"instruction": "x", "seed": -1}'
expect_error "seed range" 400 bad_request "seed"
stop_holod || fail "holod exit status $?"

# ---- holod's own defaults: --temperature 0 is greedy, the configured seed and top_p recorded
rm -f "$SOCK"
start_agent --temperature 0 --top-p 0.5 --seed 5
api GET /v1/status
expect_json "configured status" '.sampling == {"format": "holo3", "temperature": 0, "top_p": 0.5,
	"seed": 5}' true
submit "{$TASK_TEXT}"
E=$TASK
finish "$E"
api GET "/v1/tasks/$E"
expect_json "configured sampling" '.provenance.sampling == {"temperature": 0, "top_p": 0.5, "seed": 5}' true
[ "$(raw "$E")" = "$(raw "$G1")" ] || fail "--temperature 0: task $E decoded $(raw "$E"), greedy $(raw "$G1")"
# a task's own field wins over holod's
submit "{$TASK_TEXT, \"temperature\": 0.8, \"seed\": $SEED_A, \"top_p\": 0.95}"
F=$TASK
finish "$F"
[ "$(raw "$F")" = "$RAW_A" ] || fail "seed $SEED_A under --temperature 0: task $F decoded $(raw "$F"), task $A $RAW_A"
stop_holod || fail "holod exit status $?"
pass_or_fail
