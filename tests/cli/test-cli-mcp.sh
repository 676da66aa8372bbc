#!/bin/sh
# holoctl mcp's protocol without a daemon (unit: needs holoctl and jq, nothing from PyPI): the
# initialize handshake and its version negotiation, tools/list, and every malformed message
# answered with JSON-RPC's error code (-32700, -32600, -32601, -32602), MCP's -32002, or a tool
# error the model can read, never a crash; a line over MCP_MAX_LINE_BYTES is refused and the
# next one still served. The socket names no daemon, so tools that need holod say so.
. "$(dirname "$0")/../harness/test-lib.sh"
set -u
command -v jq >/dev/null 2>&1 || test_skip "jq is not installed"
T=$(mktemp -d "${TMPDIR:-/tmp}/holoctl-mcp.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILED=0
fail() {
	echo "FAIL: $*" >&2
	FAILED=$((FAILED + 1))
}

# mcp FILE: feeds FILE's lines to holoctl mcp; its answers into $T/out (one JSON per line),
# its exit status into RC.
mcp() {
	"$HOLOCTL" --socket "$T/no-holod.sock" mcp <"$1" >"$T/out" 2>"$T/err"
	RC=$?
}

# answer ID FILTER: FILTER (jq) over the answer whose id is ID must be true.
answer() {
	_got=$(jq -s --argjson id "$1" "map(select(.id == \$id)) | if length == 1 then .[0] | $2
		else \"\\(length) answers\" end" "$T/out" 2>&1)
	[ "$_got" = true ] || fail "id $1: '$2' is '$_got' in $(grep -F "\"id\":$1," "$T/out" | head -c 600)"
}

cat >"$T/in" <<'IN'
{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":2,"method":"tools/list"}
{"jsonrpc":"2.0","id":3,"method":"ping"}
this is not JSON
{"jsonrpc":"2.0","id":4,"method":"no/such/method"}
{"jsonrpc":"1.0","id":5,"method":"ping"}
{"jsonrpc":"2.0","id":6,"method":"tools/call","params":["screenshot"]}
[{"jsonrpc":"2.0","id":7,"method":"ping"}]
{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}
{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"teleport","arguments":{}}}
{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"click","arguments":{"x":-1,"y":3}}}
{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"hotkey","arguments":{"keys":["ctr","s"]}}}
{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"write","arguments":{"content":"hi","colour":"red"}}}
{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"screenshot","arguments":{}}}
{"jsonrpc":"2.0","id":13,"method":"resources/read","params":{"uri":"file:///etc/passwd"}}
{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"run_task","arguments":{"instruction":"x","max_steps":0}}}
{"jsonrpc":"2.0","id":15,"method":"tools/call","params":{"name":"click","arguments":{"x":1,"y":1},"_meta":{"progressToken":[1]}}}
{"jsonrpc":"2.0","id":16,"method":"tools/call","params":{"name":"click","arguments":{"x":1,"y":1},"task":{"ttl":1000}}}
{"jsonrpc":"2.0","id":17,"method":"initialize","params":{"protocolVersion":"1999-01-01","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}
{"jsonrpc":"2.0","id":18,"method":"resources/templates/list"}
{"jsonrpc":"2.0","id":22,"method":"tools/list"}
{"jsonrpc":"2.0","id":19,"method":"tools/call","params":{"name":"cancel_task","arguments":{"task_id":"7"}}}
{"jsonrpc":"2.0","id":23,"method":"tools/call","params":{"name":"reply_task","arguments":{"task_id":7,"text":""}}}
{"jsonrpc":"2.0","id":24,"method":"tools/call","params":{"name":"windows","arguments":{"display":5}}}
{"jsonrpc":"2.0","id":25,"method":"tools/call","params":{"name":"windows","arguments":{"display":":1"}}}
IN
# One line over the limit (MCP_MAX_LINE_BYTES, 2 MiB), then a request that must still be served.
{ printf '{"jsonrpc":"2.0","id":20,"method":"ping","params":{"pad":"'
  head -c 2200000 /dev/zero | tr '\0' 'a'
  printf '"}}\n{"jsonrpc":"2.0","id":21,"method":"ping"}\n'
  # an id longer than MCP_MAX_ID_BYTES (256)
  printf '{"jsonrpc":"2.0","id":"%s","method":"ping"}\n' "$(head -c 300 /dev/zero | tr '\0' 'i')"
} >>"$T/in"
mcp "$T/in"
[ "$RC" -eq 0 ] || fail "holoctl mcp exited $RC: $(cat "$T/err")"
jq -e . "$T/out" >/dev/null 2>&1 || fail "an answer is not JSON: $(head -c 300 "$T/out")"
[ "$(grep -c '"jsonrpc":"2.0"' "$T/out")" -eq "$(wc -l <"$T/out")" ] ||
	fail "a line of stdout is not a JSON-RPC message"

answer 1 '.result.protocolVersion == "2025-06-18" and .result.serverInfo.name == "holod"
	and .result.capabilities.tools != null and .result.capabilities.resources != null
	and .result.capabilities.tasks == null'
answer 2 '[.result.tools[].name] as $n | ["run_task", "screenshot", "locate", "click",
	"double_click", "triple_click", "move", "drag", "scroll", "write", "hotkey", "key_down",
	"key_up", "hold_and_tap_key", "wait", "launch", "wait_for", "activate", "drag_to", "windows",
	"status", "cancel_task", "reply_task"] - $n == []'
# the action tools are ipc's table's, the model's own ones (answer, ask_user, update_plan) left out
answer 2 '[.result.tools[].name] | index("answer") == null and index("ask_user") == null
	and index("update_plan") == null'
answer 2 '.result.tools | map(select(.name == "write" or .name == "click"))
	| all(.inputSchema.properties.require_focus.type == "boolean")'
answer 2 '.result.tools | all(.inputSchema.type == "object" and (.description | length) > 0)'
answer 2 '.result.tools[] | select(.name == "run_task") | has("execution") | not'
# run_task takes POST /v1/tasks's members, which holod checks; the other tools' sets are closed.
answer 2 '.result.tools[] | select(.name == "run_task") | .inputSchema
	| (has("additionalProperties") | not) and (.properties | has("stuck_stop") and has("script"))'
answer 2 '.result.tools | map(select(.name != "run_task")) | all(.inputSchema.additionalProperties == false)'
answer 2 '.result.tools[] | select(.name == "click") | .inputSchema.properties | has("x")
	and has("target") and has("coords") and has("display") and (has("tool_name") | not)'
answer 3 '.result == {}'
answer 4 '.error.code == -32601 and (.error.message | test("no/such/method"))'
answer 5 '.error.code == -32600 and (.error.message | test("jsonrpc"))'
answer 6 '.error.code == -32602'
answer 8 '.error.code == -32602 and (.error.message | test("teleport"))'
answer 9 '.result.isError == true and .result.content[0].text == "x: -1 is out of range 0..32767"'
answer 10 '.result.isError == true and (.result.content[0].text | test("^keys\\[0\\]: unknown key name .ctr."))'
answer 11 '.result.isError == true and (.result.content[0].text | test("^colour: unknown"))'
answer 12 '.result.isError == true and (.result.content[0].text | test("cannot connect to .*no-holod.sock"))'
answer 13 '.error.code == -32002 and .error.data.uri == "file:///etc/passwd"'
answer 14 '.result.isError == true and (.result.content[0].text | test("^max_steps"))'
answer 15 '.error.code == -32602 and (.error.message | test("progressToken"))'
answer 16 '.error.code == -32602 and (.error.message | test("taskSupport"))'
answer 17 '.result.protocolVersion == "2025-11-25" and .result.capabilities.tasks.requests.tools.call == {}'
answer 22 '.result.tools[] | select(.name == "run_task") | .execution.taskSupport == "optional"'
answer 18 '[.result.resourceTemplates[].uriTemplate] | index("holod://tasks/{id}/steps") != null'
answer 19 '.result.isError == true and (.result.content[0].text | test("^task_id"))'
answer 23 '.result.isError == true and (.result.content[0].text | test("^text: expected the answer"))'
answer 21 '.result == {}'
answer 24 '.result.isError == true and (.result.content[0].text | test("^display: expected"))'
answer 25 '.result.isError == true and (.result.content[0].text | test("cannot connect to .*no-holod.sock"))'
answer 2 '.result.tools[] | select(.name == "windows") | .annotations.readOnlyHint == true'
# Those without a readable id are answered with id null: the JSON, the batch, the object id,
# the line over the limit and the long id.
_nulls=$(jq -rs '[.[] | select(.id == null) | .error.code] | sort | tostring' "$T/out")
[ "$_nulls" = '[-32700,-32600,-32600,-32600,-32600]' ] || fail "id-less errors: $_nulls"
jq -s -e '[.[] | select(.id == null) | .error.message] | any(test("MCP_MAX_LINE_BYTES"))' \
	"$T/out" >/dev/null || fail "the long line's error does not name its limit"
# The notification is not answered; everything else is, once.
[ "$(wc -l <"$T/out")" -eq 28 ] || fail "$(wc -l <"$T/out") answers for 28 requests"

# holoctl mcp takes no arguments, and its help names the client configuration.
"$HOLOCTL" mcp extra </dev/null >/dev/null 2>"$T/err" && fail "mcp extra was accepted"
grep -q "takes no arguments" "$T/err" || fail "mcp extra: $(cat "$T/err")"
"$HOLOCTL" mcp --help | grep -q '"mcpServers"' || fail "mcp --help lacks the client configuration"

[ "$FAILED" -eq 0 ] || exit 1
exit 0
