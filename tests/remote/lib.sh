# Helpers of the `remote` suite (POSIX sh, sourced): a real OpenAI-compatible server, llama.cpp's
# through llama-cpp-python (`python -m llama_cpp.server`, installed by tools/remote-server/setup.sh
# into the venv $HOLOD_REMOTE_VENV), serving the tiny model tools/remote-server/tiny_model.py
# writes. Builds on tests/integration/lib.sh (temporary XDG directories, holod on a private Xvfb,
# fail/pass_or_fail) and stops the server in the same EXIT trap: no test leaves it running.
#
#   remote_server_start   writes the model, starts the server on 127.0.0.1 at a free port and
#                         waits until GET /v1/models answers; sets
#                           REMOTE_ORIGIN  http://127.0.0.1:PORT
#                           REMOTE_URL     $REMOTE_ORIGIN/v1 (an OpenAI client's base URL)
#                           REMOTE_MODEL   the served model name
#                           REMOTE_LOG     the server's output (printed when a check failed)
#   remote_server_stop    stops it (the EXIT trap calls it too)
#
# A missing venv skips the test (exit 77), and fails it where $HOLOD_CI is set (tools/check.sh,
# which CI runs, installs the venv first).

. "$(dirname "$0")/../integration/lib.sh"

REMOTE_VENV=${HOLOD_REMOTE_VENV:-$HOLOD_SOURCE_ROOT/tools/.venv-remote}
REMOTE_PY=$REMOTE_VENV/bin/python
REMOTE_MODEL=holod-tiny
REMOTE_LOG="$T/remote-server.log"
REMOTE_PID=
REMOTE_ORIGIN=
REMOTE_URL=
# Seconds the server may take to load the model and answer /v1/models (about 1 s here, but the
# suites run in parallel on 2 cores).
REMOTE_START_SECONDS=${REMOTE_START_SECONDS:-60}

remote_server_stop() {
	[ -n "$REMOTE_PID" ] || return 0
	kill "$REMOTE_PID" 2>/dev/null
	# uvicorn finishes its requests on SIGTERM; one that hangs gets SIGKILL after 10 s.
	i=0
	while kill -0 "$REMOTE_PID" 2>/dev/null && [ $i -lt 100 ]; do
		sleep 0.1
		i=$((i + 1))
	done
	kill -KILL "$REMOTE_PID" 2>/dev/null
	wait "$REMOTE_PID" 2>/dev/null
	REMOTE_PID=
}

remote_cleanup() {
	remote_server_stop
	if [ "$FAILED" -ne 0 ] && [ -f "$REMOTE_LOG" ]; then
		echo "---- remote server log (last 40 lines) ----" >&2
		tail -n 40 "$REMOTE_LOG" >&2
	fi
	cleanup
}
trap remote_cleanup EXIT
# A reader that went away (SIGPIPE) or a closed terminal also runs the EXIT trap, so the server
# never outlives the test (integration/lib.sh covers INT and TERM).
trap 'exit 1' HUP PIPE

# remote_require [TOOL...]: curl, jq, the tools named and the venv's server, or skip.
remote_require() {
	for tool in curl jq "$@"; do
		command -v "$tool" >/dev/null 2>&1 || test_skip "$tool is not installed"
	done
	if ! [ -x "$REMOTE_PY" ] || ! "$REMOTE_PY" -c 'import llama_cpp.server, gguf' 2>/dev/null; then
		test_skip "no llama-cpp-python server in $REMOTE_VENV (run tools/remote-server/setup.sh)"
	fi
}

# A port that was free a moment ago; the server's bind decides (remote_server_start retries).
remote_free_port() {
	"$REMOTE_PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

remote_server_start() {
	model="$T/holod-tiny.gguf"
	[ -f "$model" ] || "$REMOTE_PY" "$HOLOD_SOURCE_ROOT/tools/remote-server/tiny_model.py" \
		--out "$model" || { fail "tiny_model.py could not write the model"; return 1; }
	for _ in 1 2 3; do
		port=$(remote_free_port)
		# One thread: the model is tiny, and the other suites share the CPU. 32768 tokens of
		# context: the vocabulary is one token per byte and a task's conversation grows by
		# each step's text.
		"$REMOTE_PY" -m llama_cpp.server --model "$model" --model_alias "$REMOTE_MODEL" \
			--host 127.0.0.1 --port "$port" --n_ctx 32768 --n_threads 1 --n_threads_batch 1 \
			>>"$REMOTE_LOG" 2>&1 &
		REMOTE_PID=$!
		REMOTE_ORIGIN="http://127.0.0.1:$port"
		REMOTE_URL="$REMOTE_ORIGIN/v1"
		deadline=$(($(date +%s) + REMOTE_START_SECONDS))
		while kill -0 "$REMOTE_PID" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
			# (jq -e on empty input succeeds: the answer is checked to be there first.)
			models=$(curl -sf -m 5 "$REMOTE_URL/models" 2>/dev/null) && [ -n "$models" ] &&
				printf '%s' "$models" | jq -e --arg m "$REMOTE_MODEL" \
					'.data | map(.id) | index($m) != null' >/dev/null && return 0
			sleep 0.2
		done
		if kill -0 "$REMOTE_PID" 2>/dev/null; then
			remote_server_stop
			fail "the server did not answer GET /v1/models within $REMOTE_START_SECONDS s"
			return 1
		fi
		wait "$REMOTE_PID" 2>/dev/null
		REMOTE_PID=
		# Another process took the port between the probe and the bind: try another one.
		grep -q "address already in use" "$REMOTE_LOG" || break
	done
	fail "the server exited before answering GET /v1/models"
	return 1
}
