#!/bin/sh
# Many tasks, one model (issue 16): four instruction tasks on four virtual displays at once share
# the model worker's batched forwards; every step is schema-valid, each task's journal is
# complete, and a cancel of one leaves the other three running to their end. Admission: with a
# state limit that fits two sessions the third task waits, its queue position in /v1/status and
# in the task, and runs once one ends; a limit that no session fits refuses the task.
. "$(dirname "$0")/agent-lib.sh"
require_agent
[ "$AGENT_BACKEND" = cpu ] || test_skip "the fleet runs on the CPU backend"
# The prefix alone is about 5000 tokens of the tiny tokenizer (the system prompt holds the step
# schema), so the sessions hold 8192.
CTX="--context-tokens 8192 --step-tokens 256"

# ---- four displays, four tasks at once
start_agent --virtual 640x400 --displays 4 --kill-switch-ms 0 --batch-prefill-chunk 64 $CTX
api GET /v1/status
expect_json "displays" '.displays | length' 4
expect_json "batching" .model.batching.prefill_chunk 64
expect_json "batching" .model.batching.budget_bytes null
: >"$T/ids"
i=0
while [ $i -lt 4 ]; do
	submit '{"instruction": "Click the red block.", "max_steps": 4}'
	echo "$TASK" >>"$T/ids"
	i=$((i + 1))
done
C=$(sed -n 2p "$T/ids")
four_running() {
	[ "$(curl -sS --unix-socket "$SOCK" http://holod/v1/status |
		jq '[.displays[].running | select(. != null)] | length')" = 4 ]
}
wait_until 60 four_running || fail "four tasks never ran at once"
first_step() { # TASK: it journaled a step
	[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $1")" -ge 1 ]
}
wait_until 120 first_step "$C" || fail "task $C never stepped"
HOLOD_SOCKET="$SOCK" "$HOLOCTL" cancel "$C" >/dev/null 2>&1 || fail "holoctl cancel $C"
wait_task "$C" cancelled 30
for id in $(cat "$T/ids"); do
	[ "$id" = "$C" ] && continue
	wait_task "$id" failed 300
	api GET "/v1/tasks/$id"
	expect_json "task $id" .error "max_steps budget (4) reached without an answer"
	expect_json "task $id" .steps 4
	steps "$id"
	check_steps "task $id: four steps in order" '[.steps[].index] == [0, 1, 2, 3]'
	check_steps "task $id: every step ok" 'all(.steps[]; .status == "ok" and .error == null)'
	check_steps "task $id: schema" 'all(.steps[]; (.agent.raw_output | fromjson | keys) == ["note", "thought", "tool_call"])'
	check_steps "task $id: screenshots" 'all(.steps[]; .screenshots.before != null and .screenshots.after != null)'
done
# the three ran beside the cancelled one: their steps overlap its life
C_END=$(sqlite3 "$DB" "SELECT finished_us FROM tasks WHERE id = $C")
later=$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id != $C AND started_us > $C_END")
[ "$later" -ge 3 ] || fail "only $later steps of the other tasks came after the cancel"
api GET /v1/status
expect_json "batched" '.model.batching.largest_batch >= 2' true
expect_json "batched" .model.batching.sequences 0
expect_json "sessions freed" .model.sessions 0
echo "forwards: $(jq .model.batching.batches "$BODY"), largest batch: $(jq .model.batching.largest_batch "$BODY") sessions"
stop_holod || fail "holod exit status $?"

# ---- admission: what one task reserves, then a limit that fits two of them
start_agent --virtual 640x400 --displays 3 --kill-switch-ms 0 --state-limit 1048576 $CTX
submit '{"instruction": "Click the red block.", "max_steps": 1}'
# what task $1 reserved, from holod's log line at its admission (it lasts only while the task
# runs: a poll of /v1/status can miss it on a loaded machine)
reserved() {
	R=$(sed -n "s/^holod: task $1: model session admitted, \([0-9]*\) bytes reserved .*/\1/p" \
		"$HOLOD_LOG" | head -n 1)
	[ -n "$R" ] && [ "$R" -gt 0 ]
}
wait_task "$TASK" failed 120
reserved "$TASK" || fail "task $TASK reserved nothing"
stop_holod || fail "holod exit status $?"
LIMIT_KIB=$((R * 5 / 2 / 1024))
echo "one task reserves $R bytes; state limit $LIMIT_KIB KiB"

start_agent --virtual 640x400 --displays 3 --kill-switch-ms 0 --state-limit "$LIMIT_KIB" $CTX
api GET /v1/status
expect_json "budget" .model.batching.budget_bytes $((LIMIT_KIB * 1024))
submit '{"instruction": "Click the red block.", "max_steps": 5}'
A1=$TASK
submit '{"instruction": "Click the red block.", "max_steps": 5}'
A2=$TASK
# Admission is first come at the worker, not by task id: the third is submitted once both are in.
two_admitted() {
	grep -q "^holod: task $A1: model session admitted" "$HOLOD_LOG" &&
		grep -q "^holod: task $A2: model session admitted" "$HOLOD_LOG"
}
wait_until 120 two_admitted || fail "tasks $A1 and $A2 were never admitted together"
submit '{"instruction": "Click the red block.", "max_steps": 2}'
A3=$TASK
third_waits() {
	api GET /v1/status
	[ "$(jq -c .model.batching.waiting "$BODY")" = "[{\"task\":$A3,\"position\":1}]" ]
}
wait_until 60 third_waits || fail "task $A3 never waited: $(jq -c .model.batching "$BODY")"
api GET "/v1/tasks/$A3"
expect_json "waiting task" .status running
expect_json "waiting task" .model_queue_position 1
api GET "/v1/tasks/$A1"
expect_json "admitted task" .model_queue_position null
wait_task "$A3" failed 300
api GET "/v1/tasks/$A3"
expect_json "third ran" .steps 2
expect_json "third ran" .model_queue_position null
FIRST_END=$(sqlite3 "$DB" "SELECT min(finished_us) FROM tasks WHERE id IN ($A1, $A2)")
A3_STEP=$(sqlite3 "$DB" "SELECT min(started_us) FROM steps WHERE task_id = $A3")
[ "$A3_STEP" -ge "$FIRST_END" ] || fail "task $A3 stepped before a session was freed"
wait_task "$A1" failed 300
wait_task "$A2" failed 300
api GET /v1/status
expect_json "released" .model.batching.reserved_bytes 0
expect_json "released" .model.batching.waiting '[]'
stop_holod || fail "holod exit status $?"

# ---- a session that can never fit is refused, saying why
start_agent --virtual 640x400 --displays 1 --kill-switch-ms 0 --state-limit 64 $CTX
submit '{"instruction": "Click the red block.", "max_steps": 2}'
wait_task "$TASK" failed 60
api GET "/v1/tasks/$TASK"
case "$(jq -r .error "$BODY")" in
*"needs "*" MiB (a context of 8192 tokens, its snapshots and its prefix), more than the 0.1 MiB the sessions may hold"*) ;;
*) fail "never fits: $(jq -r .error "$BODY")" ;;
esac
expect_json "never fits" .steps 0
pass_or_fail
