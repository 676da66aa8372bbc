#!/bin/sh
# The holo-nano policy format (docs/policy.md) on the tiny agent model: a task that selects it
# (per task, holoctl run --policy-format, or holod's default) decodes steps under holo-nano's
# grammar that parse as its tools and run on the Xvfb; its provenance and prompt record say
# holo-nano and whose system text (holod's own here: the published copy in --published-dir does
# not match its SHA-256s, so it is not used); the prompts follow its turns (the tool output in a
# user turn of its own, newline-padded; "<observation>\n" image "\n</observation>"). Unknown
# format names are refused by the API, holoctl and holod.
. "$(dirname "$0")/agent-lib.sh"
require_agent
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client
mkdir -p "$T/published"
echo "not the published template" >"$T/published/system-template.txt"
echo "{}" >"$T/published/step-schema.json"
start_agent --temperature 0 --published-dir "$T/published"
grep -q "holo-nano: the published copy is not used (holod's own system text):.*SHA-256" \
	"$HOLOD_LOG" || fail "no warning about the mismatching published copy: $(cat "$HOLOD_LOG")"

# ---- per task
submit '{"instruction": "Click the red block.", "max_steps": 3, "policy_format": "holo-nano"}'
N=$TASK
wait_until 240 task_final "$N" || fail "task $N did not finish"
api GET "/v1/tasks/$N"
expect_json "provenance format" .provenance.policy_format holo-nano
expect_json "provenance system text" .provenance.system_text holod
expect_json "the format's sampling" '.provenance.sampling.temperature' 0
expect_json "spec" .spec.policy_format holo-nano
steps "$N"
check_steps "valid holo-nano steps" '(.steps | length) >= 1 and ([.steps[] | .status == "ok"
	and (.agent.raw_output | fromjson | .tool_call.tool_name
	| test("^(update_plan|answer|[a-z_]+_desktop)$"))] | all)'
check_steps "observations as holo-nano wraps them" '[.steps[].agent.prompt_text
	| contains("<SPECIAL_11>User\n<observation>\n<img>")] | all'
check_steps "the tool output in its own turn" '[.steps[1:][].agent.prompt_text
	| test("<SPECIAL_11>User\n<(tool_output|error) tool=\"[a-z_]+\">\n")] | all'
# What the model is told (item 8): the harness's output, empty for a plain success (holod's
# no-focus warning when the keys went to the root window), "error: ..." for a failure, nothing
# after update_plan; the journal's result keeps the executor's text (pixels of a click).
check_steps "holo-nano's tool output" '[.steps[1:][] as $s | .steps[$s.index - 1] as $p
	| ($p.agent.raw_output | fromjson | .tool_call.tool_name) as $n
	| $s.agent.user_turn | if $n == "update_plan" then . == "<observation>\n<image>\n</observation>"
	elif $p.status == "ok" then startswith("<tool_output tool=\"\($n)\">\n\n</tool_output>\n")
		or startswith("<tool_output tool=\"\($n)\">\nno window had the keyboard focus")
	else startswith("<error tool=\"\($n)\">\nerror: ") end
	and (if $n == "click_desktop" and $p.status == "ok" then $p.result | startswith("clicked ")
	     else true end)] | all'
check_steps "the history holds holo-nano steps" '[.steps[1:][].agent.prompt_text
	| contains("<SPECIAL_11>Assistant\n{\"note\":")] | all'
P=$(sqlite3 "$DB" "SELECT prompt FROM tasks WHERE id = $N")
[ "$(printf '%s' "$P" | jq -r '[.format, .system_text, .evicted] | join("|")')" = \
	"holo-nano|holod|[Image omitted by context cleaning]" ] ||
	fail "prompt record: $(printf '%s' "$P" | head -c 400)"
printf '%s' "$P" | jq -r .system | grep -q '^```json$' ||
	fail "the system text has no json schema block"

# ---- holo3 stays the default; holoctl run selects holo-nano
submit '{"instruction": "Click the red block.", "max_steps": 1, "dry_run": true}'
D=$TASK
wait_until 240 task_final "$D" || fail "task $D did not finish"
api GET "/v1/tasks/$D"
expect_json "default format" .provenance.policy_format holo3
"$HOLOCTL" --json run --max-steps 1 --dry-run --policy-format holo-nano \
	"Click the red block." >"$T/run.out" 2>&1 || fail "holoctl run: $(cat "$T/run.out")"
C=$(jq -r .id "$T/run.out")
wait_until 240 task_final "$C" || fail "task $C did not finish"
api GET "/v1/tasks/$C"
expect_json "holoctl run's format" .provenance.policy_format holo-nano

# ---- unknown names
api POST /v1/tasks '{"instruction": "x", "policy_format": "holo1"}'
expect_error "unknown format" 400 bad_request 'policy_format: expected "holo3" or "holo-nano"'
"$HOLOCTL" run --policy-format holo1 x >"$T/bad.out" 2>&1
[ $? = 2 ] && grep -q "policy-format must be holo3 or holo-nano, not 'holo1'" "$T/bad.out" ||
	fail "holoctl run --policy-format holo1: $(cat "$T/bad.out")"
"$HOLOD" --policy-format holo1 --version >"$T/holod.out" 2>&1 && fail "holod took holo1"
grep -q "unknown policy format 'holo1' (holo3|holo-nano)" "$T/holod.out" ||
	fail "holod --policy-format holo1: $(cat "$T/holod.out")"

pass_or_fail
