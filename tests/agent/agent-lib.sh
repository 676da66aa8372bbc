# Helpers of the agent tests (POSIX sh, sourced after nothing else): tests/integration/lib.sh
# (temporary XDG directories, a private Xvfb, holod, curl/jq/sqlite3 helpers) plus the model
# and a recording client that covers the whole screen.
#
# Environment from meson: HOLOD, HOLOCTL, HOLO_TEST_CLIENT, AGENT_MODEL, INTEGRATION_LIB.

. "$INTEGRATION_LIB"

SCREEN_W=640
SCREEN_H=400

require_agent() {
	require_tools "$@"
	[ -f "$AGENT_MODEL/model.safetensors" ] || { echo "skip: no model at $AGENT_MODEL"; exit 77; }
	[ -n "${HOLO_TEST_CLIENT:-}" ] && [ -x "$HOLO_TEST_CLIENT" ] ||
		{ echo "skip: no test client"; exit 77; }
}

# start_agent_client: the recording client over the whole screen, so every click lands in it.
start_agent_client() {
	CLIENT_LOG="$T/client.log"
	"$HOLO_TEST_CLIENT" --log "$CLIENT_LOG" --geometry "${SCREEN_W}x${SCREEN_H}+0+0" \
		2>"$T/client.err" &
	CLIENT_PID=$!
	wait_until 20 grep -q '^ready' "$CLIENT_LOG" || { fail "test client not ready"; exit 1; }
}

model_state() {
	curl -sS --unix-socket "$SOCK" http://holod/v1/status | jq -r .model.state
}

model_is() {
	[ "$(model_state)" = "$1" ]
}

# start_agent [HOLOD ARGS...]: holod with the model, once the model is loaded.
start_agent() {
	start_holod --model "$AGENT_MODEL" "$@"
	wait_until 60 model_is ready || { fail "the model did not load: $(model_state)"; exit 1; }
}

# steps ID: the task's steps into $T/steps.json
steps() {
	curl -sS --unix-socket "$SOCK" "http://holod/v1/tasks/$1/steps" >"$T/steps.json"
}

# check_steps NAME FILTER: FILTER (jq, over .steps) must be true.
check_steps() {
	_got=$(jq -r "$2" "$T/steps.json" 2>&1)
	[ "$_got" = true ] || fail "$1: '$2' is '$_got' over $(head -c 1500 "$T/steps.json")"
}

# token_rows ID: "idx appended decoded session prompt" per step, from the journal.
token_rows() {
	sqlite3 -separator ' ' "$DB" "SELECT idx, tokens_appended, tokens_decoded, session_tokens,
		prompt FROM steps WHERE task_id = $1 ORDER BY idx"
}

presses() {
	grep -c '^press ' "$CLIENT_LOG"
}
