# Helpers of the `remote` suite's tests against the scripted OpenAI-compatible server
# (fake-openai.c; remote-fake, remote-ask, remote-think, remote-stuck, remote-secrets), POSIX sh,
# sourced. Builds on tests/integration/lib.sh (temporary XDG directories, holod on a private
# Xvfb, fail/pass_or_fail), skips (77) without the tools or the recording test client, and
# stops the server in the same EXIT trap: no test leaves it running.
#
#   SCRIPT          the server's script, one answer a line (fake-openai.c's header): the test
#                   writes it before fake_start and rewrites it between tasks
#   REC             the folder where the server records each request (req-N.json, req-N.auth)
#   fake_start      starts the server on a free port and waits until it listens; sets
#                     PORT      its port
#                     FAKE_URL  http://127.0.0.1:$PORT/v1 (holod's --remote)
#                   its log is $T/fake.log; a server that does not start fails the test
#   fake_stop       stops it (the EXIT trap calls it too)

. "$INTEGRATION_LIB"
require_tools
[ -n "${HOLO_TEST_CLIENT:-}" ] && [ -x "$HOLO_TEST_CLIENT" ] || test_skip "no test client"
[ -x "${FAKE_OPENAI:-}" ] || { fail "no fake server: \$FAKE_OPENAI is '${FAKE_OPENAI:-}'"; exit 1; }

# libcurl honours the proxy variables; the fake server is on this machine.
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
SCRIPT="$T/script"
REC="$T/requests"
mkdir -p "$REC"
FAKE_PID=
PORT=
FAKE_URL=

fake_stop() {
	[ -n "$FAKE_PID" ] && kill "$FAKE_PID" 2>/dev/null && wait "$FAKE_PID" 2>/dev/null
	FAKE_PID=
}
trap 'fake_stop; cleanup' EXIT

fake_start() {
	rm -f "$T/port"
	"$FAKE_OPENAI" --port-file "$T/port" --script "$SCRIPT" --record "$REC" 2>"$T/fake.log" &
	FAKE_PID=$!
	wait_until 20 test -s "$T/port" ||
		{ fail "the fake server did not start: $(cat "$T/fake.log")"; exit 1; }
	PORT=$(cat "$T/port")
	FAKE_URL="http://127.0.0.1:$PORT/v1"
}
