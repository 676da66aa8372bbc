#!/bin/sh
# Secrets (issue 33) against the scripted OpenAI-compatible server (fake-openai.c): a vault file
# that others could read stops holod at start; the 0600 vault's PASS and the environment's
# HOLO_TOKEN (--secret-env) are named in the system prompt and typed where the model and a
# script wrote {{secret:NAME}}: the test client receives the values, while the journal (the
# database and its WAL), the state directory, holod's log, the requests sent to the model, the
# API, the event stream, holoctl show, the report and the exports hold only the placeholder; the
# step's screenshots are sensitive (left out of the report and the exports unless
# --include-sensitive); an unknown name fails the step naming the name; a launched program does
# not inherit HOLO_TOKEN.
. "$(dirname "$0")/remote-lib.sh"
command -v od >/dev/null 2>&1 || test_skip "no od"

PASS="pw-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
TOKEN="tok-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')"
VAULT="$XDG_CONFIG_HOME/holod/secrets"
mkdir -p "$XDG_CONFIG_HOME/holod"
printf '# the test vault\n\nPASS=%s\n' "$PASS" >"$VAULT"

WRITE='{"note":null,"thought":"Log in","tool_call":{"tool_name":"write","content":"{{secret:PASS}} and {{secret:HOLO_TOKEN}}","press_enter":false}}'
NOPE='{"note":null,"thought":"Try","tool_call":{"tool_name":"write","content":"x{{secret:NOPE}}","press_enter":false}}'
ANSWER='{"note":null,"thought":"Done","tool_call":{"tool_name":"answer","content":"logged in"}}'
printf 'ok %s\nok %s\n' "$WRITE" "$ANSWER" >"$SCRIPT"
fake_start
start_xvfb 640x400x24
start_client || exit 1

# ---- a vault that others may read: holod refuses to start, and says why and what to do
chmod 644 "$VAULT"
timeout 20 "$HOLOD" --remote "$FAKE_URL" 2>"$T/refused.log"
rc=$?
[ "$rc" -ne 0 ] && [ "$rc" -ne 124 ] || fail "holod ran with a 0644 vault (exit $rc)"
grep -q "the secrets file $VAULT is mode 0644: other users may read or change it, refused (chmod 600 $VAULT)" \
	"$T/refused.log" || fail "no clear refusal: $(cat "$T/refused.log")"
chmod 600 "$VAULT"
HOLO_TOKEN="$TOKEN" timeout 20 "$HOLOD" --secret-env HOLO_MISSING 2>"$T/refused.log"
grep -q -- "--secret-env HOLO_MISSING: no such environment variable" "$T/refused.log" ||
	fail "a missing --secret-env variable: $(cat "$T/refused.log")"

HOLO_TOKEN="$TOKEN" start_holod --remote "$FAKE_URL" --history window \
	--window 1 --secret-env HOLO_TOKEN
grep -q "secrets: PASS, HOLO_TOKEN" "$HOLOD_LOG" || fail "holod did not name its secrets"

# ---- the model writes the placeholders; the client receives the values
submit '{"instruction": "Log in."}'
A=$TASK
wait_task "$A" succeeded 60
hex() { printf '%s' "$1" | od -An -tx1 | tr -d ' \n'; }
typed=$(grep '^key ' "$CLIENT_LOG" | sed -n 's/.* text=\([0-9a-f]*\).*/\1/p' | tr -d '\n')
[ "$typed" = "$(hex "$PASS and $TOKEN")" ] || fail "typed '$typed', not the secrets' values"
api GET "/v1/tasks/$A/steps"
cp "$BODY" "$T/steps-a.json"
jq -e '.steps[0].tool_call.content == "{{secret:PASS}} and {{secret:HOLO_TOKEN}}"
	and .steps[0].sensitive == true and .steps[1].sensitive == false
	and (.steps[0].result | startswith("typed 41 bytes (with secrets)"))' "$BODY" >/dev/null ||
	fail "steps: $(jq -c '[.steps[] | {tool_call, sensitive, result}]' "$BODY")"
# The system prompt names the secrets and how to write them, never a value.
grep -q 'Secrets you can type without seeing them: PASS, HOLO_TOKEN. To type one, write {{secret:NAME}}' \
	"$REC/req-0.json" || fail "the system prompt does not name the secrets"
# The next request's history holds the placeholder the model wrote.
grep -q '{{secret:PASS}} and {{secret:HOLO_TOKEN}}' "$REC/req-1.json" ||
	fail "the model's history lost the placeholder"

# ---- a script writes one; an unknown name fails its step, naming the name
api POST /v1/tasks '{"script": [{"tool_name": "write", "content": "{{secret:PASS}}!"}]}'
S=$(jq -r .id "$BODY")
wait_task "$S" succeeded 30
api POST /v1/tasks '{"script": [{"tool_name": "write", "content": "a{{secret:NOPE}}b"}]}'
U=$(jq -r .id "$BODY")
wait_task "$U" failed 30
api GET "/v1/tasks/$U"
expect_json "unknown secret" .error \
	"step 0 (write): unknown secret 'NOPE' (holod has: PASS, HOLO_TOKEN)"
printf 'ok %s\nok %s\n' "$NOPE" "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Try the other secret."}'
M=$TASK
wait_task "$M" succeeded 60
api GET "/v1/tasks/$M/steps"
expect_json "the model's unknown secret" .steps[0].error \
	"unknown secret 'NOPE' (holod has: PASS, HOLO_TOKEN)"
N=$(ls "$REC"/req-*.json | wc -l)
grep -q "unknown secret 'NOPE'" "$REC/req-$((N - 1)).json" ||
	fail "the model was not told that NOPE is unknown"

# ---- a value the model read off the screen and wrote itself: kept as the placeholder in the
# journal and its history, and typed all the same
LEAK="{\"note\":\"the password is $PASS\",\"thought\":\"Type $PASS again\",\"tool_call\":{\"tool_name\":\"write\",\"content\":\"$PASS\",\"press_enter\":false}}"
printf 'ok %s\nok %s\n' "$LEAK" "$ANSWER" >"$SCRIPT"
submit '{"instruction": "Type it again."}'
L=$TASK
wait_task "$L" succeeded 60
api GET "/v1/tasks/$L/steps"
cp "$BODY" "$T/steps-l.json"
jq -e '.steps[0].tool_call.content == "{{secret:PASS}}" and .steps[0].sensitive == true
	and .steps[0].agent.thought == "Type {{secret:PASS}} again"
	and .steps[0].agent.note == "the password is {{secret:PASS}}"' "$BODY" >/dev/null ||
	fail "the model's own copy of a value: $(jq -c '.steps[0] | {tool_call, agent: {thought: .agent.thought, note: .agent.note}}' "$BODY")"
grep -q "secret value(s) in the model's output replaced by their placeholder" "$HOLOD_LOG" ||
	fail "holod did not say it replaced the model's copy"
typed=$(grep '^key ' "$CLIENT_LOG" | sed -n 's/.* text=\([0-9a-f]*\).*/\1/p' | tr -d '\n')
case "$typed" in
*"$(hex "$PASS")") ;;
*) fail "the model's copy of the value was not typed" ;;
esac

# ---- a launched program does not inherit the environment's secret
api POST /v1/tasks "{\"script\": [{\"tool_name\": \"launch\", \"command\": [\"sh\", \"-c\", \"env >$T/env.tmp && mv $T/env.tmp $T/env.txt\"]}]}"
wait_task "$(jq -r .id "$BODY")" succeeded 30
wait_until 20 test -s "$T/env.txt" || fail "the launched program wrote no environment"
grep -q HOLO_TOKEN "$T/env.txt" && fail "a launched program inherited HOLO_TOKEN"

# ---- what holod and holoctl wrote: the placeholder, never a value
curl -sS -N --unix-socket "$SOCK" "http://holod/v1/tasks/$A/events" >"$T/events.ndjson" ||
	fail "events of task $A"
grep -q '{{secret:PASS}}' "$T/events.ndjson" || fail "the event stream lost the step"
"$HOLOCTL" show "$A" >"$T/show.out" 2>&1 || fail "show: $(cat "$T/show.out")"
"$HOLOCTL" report "$A" -o "$T/report.html" >/dev/null 2>"$T/report.err" ||
	fail "report: $(cat "$T/report.err")"
grep -q "the before screenshot is left out: this step typed a secret" "$T/report.html" ||
	fail "the report shows the sensitive step's screenshots"
[ "$(grep -o '<img ' "$T/report.html" | wc -l)" = 2 ] ||
	fail "the report has $(grep -o '<img ' "$T/report.html" | wc -l) images, not step 1's 2"
"$HOLOCTL" report "$A" --include-sensitive -o "$T/report-all.html" >/dev/null 2>&1 ||
	fail "report --include-sensitive"
[ "$(grep -o '<img ' "$T/report-all.html" | wc -l)" = 4 ] ||
	fail "report --include-sensitive has not the 4 screenshots"
"$HOLOCTL" export -o "$T/export" "$A" "$S" >/dev/null 2>&1 || fail "export jsonl"
jq -s -e '.[0].sensitive == true and .[0].screenshot == null and .[0].screenshot_after == null
	and .[1].sensitive == false and (.[1].screenshot | type) == "string"' \
	"$T/export/steps.jsonl" >/dev/null || fail "export: $(head -c 600 "$T/export/steps.jsonl")"
"$HOLOCTL" export --format chat -o "$T/chat" "$A" >"$T/chat.out" 2>"$T/chat.err" ||
	fail "export chat: $(cat "$T/chat.err")"
grep -q "task $A left out: step 0 typed a secret" "$T/chat.err" ||
	fail "export chat did not say it left the task out: $(cat "$T/chat.err")"
"$HOLOCTL" export --format chat --include-sensitive -o "$T/chat-all" "$A" >/dev/null 2>&1 ||
	fail "export chat --include-sensitive"
[ "$(wc -l <"$T/chat-all/chat.jsonl")" = 1 ] || fail "export chat --include-sensitive: no task"
api GET "/v1/tasks/$A"
cp "$BODY" "$T/task-a.json"
api GET /v1/status
cp "$BODY" "$T/status.json"
stop_holod || fail "holod did not stop"
for v in "$PASS" "$TOKEN"; do
	found=$(grep -r -l -a -F -- "$v" "$STATE" "$HOLOD_LOG" "$REC" "$T/events.ndjson" \
		"$T/show.out" "$T/report.html" "$T/report-all.html" "$T/export" "$T/chat" \
		"$T/chat-all" "$T/steps-a.json" "$T/steps-l.json" "$T/task-a.json" "$T/status.json" \
		"$T/fake.log" \
		2>/dev/null)
	[ -z "$found" ] || fail "a secret value was written to: $found"
done
ls "$STATE"/holod.db* >/dev/null 2>&1 || fail "no journal to search"

pass_or_fail
