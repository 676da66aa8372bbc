# Helpers of the agent tests (POSIX sh, sourced after nothing else): tests/integration/lib.sh
# (temporary XDG directories, a private Xvfb, holod, curl/jq/sqlite3 helpers) plus the model
# and a recording client that covers the whole screen.
#
# Environment from meson: HOLOD, HOLOCTL, HOLO_TEST_CLIENT, AGENT_MODEL, INTEGRATION_LIB, and
# AGENT_BACKEND (cpu, the default, or cuda: the emulated build runs the same scenarios on the CUDA
# backend), AGENT_PRECISION (empty: the backend's default) and AGENT_SSM_STATE (empty: fp32),
# which start_agent passes as --backend, --precision and --ssm-state.

. "$INTEGRATION_LIB"

SCREEN_W=640
SCREEN_H=400
AGENT_BACKEND=${AGENT_BACKEND:-cpu}
AGENT_PRECISION=${AGENT_PRECISION:-}

require_agent() {
	require_tools "$@"
	[ -f "$AGENT_MODEL/model.safetensors" ] || test_skip "no model at $AGENT_MODEL"
	[ -n "${HOLO_TEST_CLIENT:-}" ] && [ -x "$HOLO_TEST_CLIENT" ] || test_skip "no test client"
}

# start_agent_client: the recording client over the whole screen, so every click lands in it.
# start_agent_client [ARGS...]: more arguments of holo-test-client (--class NAME).
start_agent_client() {
	CLIENT_LOG="$T/client.log"
	"$HOLO_TEST_CLIENT" --log "$CLIENT_LOG" --geometry "${SCREEN_W}x${SCREEN_H}+0+0" "$@" \
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

# start_agent [HOLOD ARGS...]: holod with the model on $AGENT_BACKEND, once the model is loaded
# (a later --backend in ARGS wins). The scenarios are those of steps without thinking: thinking
# is off unless ARGS (or $AGENT_THINKING) turn it on (agent-thinking.sh). Stuck steps are off
# too: the tiny model clicks one block again and again on a screen that does not change, which
# would end its tasks `stuck` (that is tests/remote/remote-stuck.sh's scenario); ARGS may turn
# them on.
start_agent() {
	start_holod --model "$AGENT_MODEL" --backend "$AGENT_BACKEND" \
		--thinking "${AGENT_THINKING:-off}" --stuck-warn 0 --stuck-stop 0 \
		${AGENT_PRECISION:+--precision "$AGENT_PRECISION"} \
		${AGENT_SSM_STATE:+--ssm-state "$AGENT_SSM_STATE"} "$@"
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

# lm_head_offset FILE TOKEN: byte offset of the steering column of TOKEN's LM head row.
lm_head_offset() {
	_hlen=$(head -c 8 "$1" | od -An -t u8 | tr -d ' ')
	_base=$(dd if="$1" bs=1 skip=8 count="$_hlen" 2>/dev/null |
		jq '.["language_model.lm_head.weight"].data_offsets[0]')
	_id=$(jq -r --arg t "$2" '.model.vocab[$t]' "$AGENT_MODEL/tokenizer.json")
	echo $((8 + _hlen + _base + _id * 64 * 2))
}

# unsteer DIR: a copy of the model in DIR without the steering: a plain random-weight VLM.
unsteer() {
	mkdir -p "$1"
	cp "$AGENT_MODEL"/*.json "$AGENT_MODEL/model.safetensors" "$1"/
	for _tok in '"' c 5; do
		printf '\000\000' | dd of="$1/model.safetensors" bs=1 \
			seek="$(lm_head_offset "$1/model.safetensors" "$_tok")" count=2 conv=notrunc \
			2>/dev/null
	done
	cmp -s "$AGENT_MODEL/model.safetensors" "$1/model.safetensors" && fail "unsteer changed nothing"
}

# steer_to_answer DIR: a copy of the model in DIR whose steering favours 'a' where it favoured
# 'c' (gen_agent_model.py), so that its steps are `answer` instead of `click`. The LM head is
# patched in place: its rows are 64 bf16 values, the steering column is the first.
steer_to_answer() {
	mkdir -p "$1"
	cp "$AGENT_MODEL"/*.json "$AGENT_MODEL/model.safetensors" "$1"/
	_off_a=$(lm_head_offset "$1/model.safetensors" a)
	_off_c=$(lm_head_offset "$1/model.safetensors" c)
	dd if="$AGENT_MODEL/model.safetensors" of="$1/model.safetensors" bs=1 skip="$_off_c" \
		seek="$_off_a" count=2 conv=notrunc 2>/dev/null
	printf '\000\000' | dd of="$1/model.safetensors" bs=1 seek="$_off_c" count=2 conv=notrunc \
		2>/dev/null
	cmp -s "$AGENT_MODEL/model.safetensors" "$1/model.safetensors" &&
		fail "steer_to_answer changed nothing"
}
