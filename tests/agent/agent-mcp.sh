#!/bin/sh
# holoctl mcp with a real MCP client (issue 33): the official MCP Python SDK (`mcp` on PyPI,
# installed by tools/mcp-client/setup.sh into tools/.venv-mcp; .ci/run does it) starts
# `holoctl mcp` over stdio against a holod on a private Xvfb with the tiny agent model, lists the
# tools, runs a script task with progress, an action, a screenshot, a grounded locate, cancels a
# running task through its request and another as an MCP task, answers a task's question
# (ask_user, reply_task) while another waits in the queue, and in a second session hands one to
# the client as an elicitation form, and two steps held for approval (one approved, one
# denied) (tests/agent/mcp-client.py). Then
# holod's own record must agree: the tasks' statuses, the click the recording client saw, and no
# click from locate. Skips (77) without the SDK, except under HOLOD_CI.
. "$(dirname "$0")/agent-lib.sh"
require_agent
MCP_PYTHON=${HOLOD_MCP_VENV:+$HOLOD_MCP_VENV/bin/python}
MCP_PYTHON=${MCP_PYTHON:-$MCP_VENV_PYTHON}
"$MCP_PYTHON" -c 'import mcp.client.stdio' 2>/dev/null ||
	test_skip "the MCP Python SDK is not installed at $MCP_PYTHON (tools/mcp-client/setup.sh)"
start_xvfb "${SCREEN_W}x${SCREEN_H}x24"
start_agent_client --class holo-agent-client
start_agent

"$MCP_PYTHON" "$(dirname "$0")/mcp-client.py" "$HOLOCTL" "$SOCK" "$SCREEN_W" "$SCREEN_H" "$CLIENT_PID" \
	>"$T/client.out" 2>"$T/mcp.err" || fail "the MCP client's checks failed: $(cat "$T/mcp.err")"
id_of() {
	sed -n "s/^task $1 //p" "$T/client.out"
}
for name in script click locate cancelled asked mcp-task elicited approved denied; do
	[ -n "$(id_of $name)" ] || fail "no $name task id in $(cat "$T/client.out")"
done
task_is "$(id_of script)" succeeded || fail "script task: $(task_status "$(id_of script)")"
task_is "$(id_of click)" succeeded || fail "click task: $(task_status "$(id_of click)")"
task_is "$(id_of cancelled)" cancelled || fail "cancelled task: $(task_status "$(id_of cancelled)")"
task_is "$(id_of asked)" succeeded || fail "asked task: $(task_status "$(id_of asked)")"
task_is "$(id_of elicited)" succeeded || fail "elicited task: $(task_status "$(id_of elicited)")"
grep -q "mcp: task $(id_of elicited): the client's user answered its question" "$T/mcp.err" ||
	fail "holoctl mcp did not log the elicited answer: $(cat "$T/mcp.err")"
task_is "$(id_of approved)" succeeded || fail "approved task: $(task_status "$(id_of approved)")"
task_is "$(id_of denied)" failed || fail "denied task: $(task_status "$(id_of denied)")"
task_is "$(id_of mcp-task)" cancelled || fail "MCP task: $(task_status "$(id_of mcp-task)")"
api GET "/v1/tasks/$(id_of locate)"
expect_json "locate is a dry run" .spec.dry_run true
# The recording client saw the script's and the action's clicks, and nothing from locate.
grep -q '^press button=1 x=100 y=120 ' "$CLIENT_LOG" || fail "no click at (100,120)"
grep -q '^press button=1 x=200 y=150 ' "$CLIENT_LOG" || fail "no click at (200,150)"
grep -q '^press button=1 x=300 y=200 ' "$CLIENT_LOG" || fail "no click at (300,200)"
grep -q '^press button=1 x=320 y=250 ' "$CLIENT_LOG" || fail "no approved click at (320,250)"
[ "$(grep -c '^press button=1 ' "$CLIENT_LOG")" -eq 4 ] ||
	fail "clicks: $(grep '^press button=1 ' "$CLIENT_LOG")"
grep -q "mcp: task $(id_of cancelled) cancelled: the client cancelled the request" "$T/mcp.err" ||
	fail "holoctl mcp did not log the cancellation: $(cat "$T/mcp.err")"
# holoctl mcp's stderr (through the SDK): no sanitizer report, in an ASan build its leaks too.
grep -q "Sanitizer" "$T/mcp.err" && fail "holoctl mcp: $(grep -A20 Sanitizer "$T/mcp.err")"
stop_holod || fail "holod exit status $?"
pass_or_fail
