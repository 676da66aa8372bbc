#!/bin/sh
# The live view (issue 32): holod serves a task's page on its socket (GET /v1/tasks/ID/view,
# self-contained: a policy that loads nothing from elsewhere); `holoctl view ID` prints its
# address on 127.0.0.1 and forwards the page's requests to the socket. In headless Chromium
# (view-cdp.py, over the DevTools pipe) the page shows the display's screen (the test client's
# red block whole) and the step held for approval with its thought, and its buttons act: pause,
# approve, resume, deny with a reason, cancel, each seen in the journal afterwards; a script's
# ask_user answered in the page's field becomes its step's result. The proxy refuses what is
# not the page's: another uid, no token, another Host or Origin, another task, another
# endpoint, another display's screen (or any query the page does not send), another HTTP
# version, a NUL byte in a header, a head too large. Bad input: an unknown task.
. "$(dirname "$0")/agent-lib.sh"
require_agent chromium python3
[ "$AGENT_BACKEND" = cpu ] || test_skip "the page is the same on every backend"
start_agent --virtual "${SCREEN_W}x${SCREEN_H}" --displays 1 --kill-switch-ms 0 \
	--context-tokens 8192 --step-tokens 256
export HOLOD_SOCKET="$SOCK"
# the recording client on holod's own Xvfb: the screen has its colour blocks to show
api GET /v1/status
DISPLAY=$(jq -r '.displays[0].name' "$BODY")
export DISPLAY
start_agent_client

submit '{"instruction": "Click the red block.", "max_steps": 6, "approve": "all"}'
A=$TASK

# ---- the page on the socket
curl -sS --unix-socket "$SOCK" -D "$T/view.head" -o "$T/view.html" \
	"http://holod/v1/tasks/$A/view" || fail "GET view"
grep -q '^HTTP/1.1 200' "$T/view.head" || fail "view: $(head -n 1 "$T/view.head")"
grep -qi '^content-type: text/html; charset=utf-8' "$T/view.head" || fail "view's type"
grep -qi "^content-security-policy: default-src 'none';" "$T/view.head" ||
	fail "view's policy: $(cat "$T/view.head")"
grep -q '<button id="approve">' "$T/view.html" || fail "view's buttons"
# no byte from elsewhere: no absolute URL the page would load
grep -Eq '(src|href)="(https?:)?//' "$T/view.html" && fail "the page loads from elsewhere"
api GET /v1/tasks/424242/view
expect_error "view of an unknown task" 404 not_found "no task 424242"

# ---- holoctl view: the address, and what its proxy refuses
"$HOLOCTL" view "$A" >"$T/url" 2>"$T/view.err" &
VIEW_PID=$!
wait_until 20 grep -q '^http://127.0.0.1:' "$T/url" || fail "holoctl view printed no address: $(cat "$T/view.err")"
URL=$(head -n 1 "$T/url")
case "$URL" in
http://127.0.0.1:*/*/v1/tasks/$A/view) ;;
*) fail "holoctl view's address: $URL" ;;
esac
ORIGIN=${URL%%/v1/*}      # http://127.0.0.1:PORT/TOKEN
BASE=${ORIGIN%/*}         # http://127.0.0.1:PORT
code() { curl -sS -o "$BODY" -w '%{http_code}' "$@"; }
[ "$(code "$URL")" = 200 ] && grep -q '<button id="approve">' "$BODY" ||
	fail "the page through holoctl view"
[ "$(code "$BASE/v1/tasks/$A/view")" = 404 ] || fail "no token: not 404"
[ "$(code "$BASE/0123456789abcdef/v1/tasks/$A/view")" = 404 ] || fail "a wrong token: not 404"
[ "$(code -H 'Host: evil.example:80' "$URL")" = 403 ] || fail "another Host: not 403"
[ "$(code -X POST -H "Origin: http://evil.example" "$ORIGIN/v1/tasks/$A/pause")" = 403 ] ||
	fail "another Origin: not 403"
[ "$(code "$ORIGIN/v1/tasks/1$A/view")" = 404 ] || fail "another task: not 404"
[ "$(code -X POST -d '{"script": [{"tool_name": "wait", "duration": 1}]}' "$ORIGIN/v1/tasks")" = 404 ] ||
	fail "POST /v1/tasks through the view: not 404"
expect_json "refused" .error.message \
	"holoctl view serves task $A's page and what it asks for, not POST /v1/tasks"
[ "$(code "$ORIGIN/v1/status")" = 404 ] || fail "status through the view: not 404"
# the screen of the task's display only: no query, or display= its name as the page encodes it
api GET "/v1/tasks/$A"
TDISP=$(jq -r '.display // empty' "$BODY")
[ "$(code "$ORIGIN/v1/screenshot")" = 200 ] || fail "the screen through the view: $(head -c 300 "$BODY")"
if [ -n "$TDISP" ]; then
	ENC=$(jq -rn --arg d "$TDISP" '$d | @uri')
	[ "$(code "$ORIGIN/v1/screenshot?display=$ENC")" = 200 ] ||
		fail "the task's display ($TDISP) through the view: $(head -c 300 "$BODY")"
	[ "$(code "$ORIGIN/v1/screenshot?display=$ENC&display=%3A4242")" = 404 ] ||
		fail "a second display= through the view: not 404"
fi
for q in "display=%3A4242" "display=:4242" "display=$DISPLAY%00" "which=before"; do
	[ "$(code "$ORIGIN/v1/screenshot?$q")" = 404 ] || fail "screenshot?$q through the view: not 404"
	expect_json "screenshot?$q" .error.message \
		"holoctl view serves task $A's page and what it asks for, not GET /v1/screenshot with that query"
done
[ "$(code "$ORIGIN/v1/tasks/$A/steps/0/screenshot?display=%3A4242")" = 404 ] &&
	grep -q 'not GET /v1/tasks/[0-9]*/steps/0/screenshot with that query' "$BODY" ||
	fail "a step's screenshot with a query through the view: $(head -c 300 "$BODY")"
[ "$(code --http1.0 "$URL")" = 505 ] || fail "HTTP/1.0: not 505"
# a NUL byte in a header (curl cannot send one)
PORT=${BASE##*:}
python3 -c '
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
s.sendall(b"GET " + sys.argv[2].encode() + b" HTTP/1.1\r\nHost: 127.0.0.1:" + sys.argv[1].encode() +
          b"\r\nX-A: a\0b\r\n\r\n")
print(s.makefile("rb").readline().decode().strip())' "$PORT" "${URL#"$BASE"}" >"$T/nul.out" 2>&1
grep -q '^HTTP/1.1 400 ' "$T/nul.out" || fail "a NUL byte in a header: $(cat "$T/nul.out")"
# another uid, even with the address: refused before anything is forwarded
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
	OUT=$(setpriv --reuid=65534 --regid=65534 --clear-groups curl -sS -w '\n%{http_code}' "$URL")
	[ "$(echo "$OUT" | tail -n 1)" = 403 ] &&
		[ "$(echo "$OUT" | head -n 1 | jq -r .error.message)" = \
			"only the user running holoctl view may connect" ] ||
		fail "another uid through holoctl view: $OUT"
else
	echo "not root: the other uid's refusal is not tried"
fi
BIG=$(head -c 9300 /dev/zero | tr '\0' x)
[ "$(code -H "X-Big: $BIG" "$URL")" = 431 ] || fail "a 9300-byte header: not 431"
"$HOLOCTL" view 424242 >"$T/bad.out" 2>&1
[ $? = 1 ] && grep -q "no task 424242" "$T/bad.out" || fail "holoctl view 424242: $(cat "$T/bad.out")"

# ---- the page in Chromium: the screen, the held step, the buttons
CDP="$(dirname "$0")/view-cdp.py"
python3 "$CDP" approve "$(command -v chromium)" "$URL" "$T" "$SCREEN_W" "$SCREEN_H" \
	>"$T/cdp.out" 2>&1 || fail "the page in chromium: $(cat "$T/cdp.out")"
cat "$T/cdp.out"
# the page as Chromium drew it, held for approval, kept beside the test logs
[ -n "${HOLOD_BUILD_ROOT:-}" ] && [ -f "$T/view.png" ] &&
	cp "$T/view.png" "$HOLOD_BUILD_ROOT/meson-logs/agent-view.png"
wait_task "$A" cancelled 30
HELD=$(sqlite3 "$DB" "SELECT idx, status, json_extract(held, '$.decision') FROM steps
	WHERE task_id = $A ORDER BY idx" | tr '\n' ' ')
case "$HELD" in
"0|ok|approved 1|error|denied "*) ;;
*) fail "the journal after the page's buttons: $HELD" ;;
esac
sqlite3 "$DB" "SELECT error FROM steps WHERE task_id = $A AND idx = 1" |
	grep -q "denied by the user: not now" || fail "step 1's error"
kill "$VIEW_PID"
wait "$VIEW_PID" || fail "holoctl view exited with status $? on SIGTERM"

# ---- a script's question answered on the page
submit '{"script": [{"tool_name": "ask_user", "question": "Which invoice?"}]}'
Q=$TASK
"$HOLOCTL" view --json "$Q" >"$T/url2" 2>"$T/view2.err" &
VIEW_PID=$!
wait_until 20 grep -q url "$T/url2" || fail "holoctl view --json printed nothing: $(cat "$T/view2.err")"
URL=$(jq -r .url "$T/url2")
python3 "$CDP" reply "$(command -v chromium)" "$URL" "$T" >"$T/cdp2.out" 2>&1 ||
	fail "the question in chromium: $(cat "$T/cdp2.out")"
cat "$T/cdp2.out"
wait_task "$Q" succeeded 30
api GET "/v1/tasks/$Q/steps"
expect_json "the reply" '.steps[0].result' "the one from March"
kill "$VIEW_PID"
wait "$VIEW_PID" || fail "holoctl view exited with status $? on SIGTERM"
pass_or_fail
