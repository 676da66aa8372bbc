#!/bin/sh
# Starting holod with a model, as a new user would: a --model directory that is not a
# checkpoint, or lacks its tokenizer or weights, and a display that cannot be opened stop holod
# at start, naming what is wrong (issue 33); --require-model turns a model that cannot load into a non-zero
# exit (and a good one into readiness, READY=1, only once it is loaded: a load held open by a FIFO
# never reports ready); ~ and $VAR in the config file's
# paths; the one checkpoint under $XDG_DATA_HOME/holod/models/ is found without --model;
# instruction tasks on two displays share the one loaded model. Env: TINY_MODEL (a checkpoint).
. "$(dirname "$0")/lib.sh"
require_tools timeout
mkdir -p "$T/notmodel"
echo '{}' >"$T/notmodel/README.json"

# Not a checkpoint, --require-model: holod exits non-zero, naming what a checkpoint holds.
timeout 60 "$HOLOD" --model "$T/notmodel" --require-model 2>"$T/err1"
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "--require-model with no checkpoint: exit $rc"
grep -q "$T/notmodel is not a model checkpoint: it has neither config.json nor safetensors weights; expected a Hugging Face checkpoint directory holding config.json, model.safetensors" \
	"$T/err1" || fail "not-a-checkpoint message: $(cat "$T/err1")"
[ -S "$SOCK" ] && fail "the socket outlived holod"

# What can be checked before the long work is, with or without --require-model: holod exits 1
# at once, naming what is wrong, and never answers on its socket. (timeout: a holod that serves
# instead would be killed, 124.)
# expect_start_error NAME MESSAGE ARGS...
expect_start_error() {
	_name=$1 _msg=$2
	shift 2
	timeout 30 "$HOLOD" "$@" 2>"$T/start.err"
	_rc=$?
	[ "$_rc" = 1 ] || fail "$_name: exit $_rc, expected 1: $(cat "$T/start.err")"
	grep -qF -- "$_msg" "$T/start.err" || fail "$_name: message: $(cat "$T/start.err")"
	[ -S "$SOCK" ] && fail "$_name: holod left its socket"
}
expect_start_error "not a checkpoint" \
	"--model: $T/notmodel is not a model checkpoint: it has neither config.json nor safetensors" \
	--model "$T/notmodel"
expect_start_error "no such model" "--model: $T/nothere: No such file or directory" \
	--model "$T/nothere"
# A missing tokenizer.json is told before the weights are read: this model.safetensors is a
# FIFO nobody writes to, which a load would block on.
[ -d "${TINY_MODEL:-}" ] || { fail "TINY_MODEL is not a directory"; pass_or_fail; }
mkdir -p "$T/notok"
cp -r "$TINY_MODEL"/. "$T/notok/"
rm "$T/notok/tokenizer.json" "$T/notok/model.safetensors"
mkfifo "$T/notok/model.safetensors"
expect_start_error "no tokenizer.json" "--model: $T/notok has no tokenizer.json; expected a" \
	--model "$T/notok"
rm "$T/notok/model.safetensors"
cp "$TINY_MODEL/tokenizer.json" "$T/notok/"
expect_start_error "no weights" "--model: $T/notok has config.json but no weights" \
	--model "$T/notok"
# An X display that cannot be opened (no server on this number), from $DISPLAY or --display.
n=4242
while [ -e "/tmp/.X11-unix/X$n" ] || [ -e "/tmp/.X$n-lock" ]; do n=$((n + 1)); done
DISPLAY=":$n" expect_start_error "\$DISPLAY unreachable" \
	"cannot open display :$n (\$DISPLAY or the config file): "
expect_start_error "--display unreachable" "cannot open display :$n (--display): " \
	--display ":$n"

# A checkpoint's files are there but it does not load: without --require-model holod serves
# scripts, and /v1/status says why there is no model.
mkdir -p "$T/badmodel"
echo '{}' >"$T/badmodel/config.json"
cp "$TINY_MODEL/tokenizer.json" "$TINY_MODEL/model.safetensors" "$T/badmodel/"
start_holod --model "$T/badmodel"
wait_until 20 sh -c "curl -sf --unix-socket '$SOCK' http://holod/v1/status |
	jq -e '.model.state == \"failed\"'" || fail "the model never failed"
api GET /v1/status
case "$(jq -r .model.error "$BODY")" in
*"cannot load the model $T/badmodel: "*) ;;
*) fail "status error: $(jq -r .model.error "$BODY")" ;;
esac
stop_holod || fail "holod exited non-zero"

# The config file's ~ and $VAR: the path holod reports is the expanded one.
mkdir -p "$XDG_CONFIG_HOME/holod"
printf 'model = ~/models/${HOLOD_TEST_NAME}\n' >"$XDG_CONFIG_HOME/holod/holod.conf"
HOME="$T" HOLOD_TEST_NAME=missing timeout 60 "$HOLOD" --require-model 2>"$T/err2"
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "--require-model with a missing model: exit $rc"
grep -q "$T/models/missing: No such file or directory; expected a Hugging Face" "$T/err2" ||
	fail "expanded path: $(cat "$T/err2")"
HOME="$T" timeout 60 "$HOLOD" --require-model 2>"$T/err3"
grep -q 'holod.conf:1: --model: \$HOLOD_TEST_NAME is not set' "$T/err3" ||
	fail "unset variable: $(cat "$T/err3")"
rm "$XDG_CONFIG_HOME/holod/holod.conf"

# --require-model, a load held in progress: its config.json is a FIFO nobody writes to, so the load
# blocks opening it. The socket answers (scripts are served) with the model 'loading' and no
# READY=1 comes; once the FIFO is opened the load fails (not a regular file) and holod exits 1.
mkdir -p "$T/held"
cp -r "$TINY_MODEL"/. "$T/held/"
rm "$T/held/config.json"
mkfifo "$T/held/config.json"
"$NOTIFY_RECV" "$T/notify.sock" 60 >"$T/notify.out" &
NPID=$!
wait_until 10 grep -q LISTENING "$T/notify.out" || fail "notify-recv did not start"
# (--virtual: the Xvfb holod starts speaks sd_notify too; its READY=1 must not reach the socket)
NOTIFY_SOCKET="$T/notify.sock" start_holod --model "$T/held" --require-model --virtual 320x240
api GET /v1/status
expect_json "a held load" .model.state loading
wait_until 1 grep -q 'READY=1' "$T/notify.out" && fail "READY=1 while the model was loading"
: >"$T/held/config.json"
wait "$HOLOD_PID"
rc=$?
HOLOD_PID=
[ "$rc" = 1 ] || fail "--require-model, a load that failed late: exit $rc"
grep -q 'READY=1' "$T/notify.out" && fail "READY=1 from a holod whose model did not load"
grep -q "config.json: not a regular file" "$HOLOD_LOG" || fail "the late load failure is not logged"
kill "$NPID" 2>/dev/null
wait "$NPID" 2>/dev/null

# The default model directory, --require-model with a model that loads: ready once loaded;
# two instruction tasks on two displays run side by side on the one model.
mkdir -p "$XDG_DATA_HOME/holod/models"
cp -r "$TINY_MODEL" "$XDG_DATA_HOME/holod/models/tiny"
# The socket answers while the model loads; readiness (READY=1) is what waits for it.
"$NOTIFY_RECV" "$T/notify.sock" 60 >"$T/notify.out" &
NPID=$!
wait_until 10 grep -q LISTENING "$T/notify.out" || fail "notify-recv did not start"
NOTIFY_SOCKET="$T/notify.sock" start_holod --require-model --virtual 320x240 --displays 2
wait "$NPID" || fail "no READY=1 from holod: $(cat "$T/notify.out")"
api GET /v1/status
expect_json "default model" .model.path "$XDG_DATA_HOME/holod/models/tiny"
expect_json "loaded at READY=1" .model.state ready
submit '{"instruction": "Click the red block.", "max_steps": 2, "dry_run": true}'
A=$TASK
submit '{"instruction": "Click the red block.", "max_steps": 2, "dry_run": true}'
B=$TASK
wait_until 120 task_final "$A" || fail "task $A did not finish"
wait_until 120 task_final "$B" || fail "task $B did not finish"
for id in "$A" "$B"; do
	[ "$(sqlite3 "$DB" "SELECT count(*) FROM steps WHERE task_id = $id")" -ge 1 ] ||
		fail "task $id has no step: $(task_status "$id")"
done
[ "$(sqlite3 "$DB" "SELECT count(DISTINCT display) FROM tasks WHERE id IN ($A, $B)")" = 2 ] ||
	fail "the two instruction tasks did not run on two displays"
overlap=$(sqlite3 "$DB" "SELECT count(*) FROM tasks a JOIN tasks b ON a.id = $A AND b.id = $B
	WHERE a.started_us < b.finished_us AND b.started_us < a.finished_us")
[ "$overlap" = 1 ] || fail "the two instruction tasks did not run at the same time"
stop_holod || fail "holod exited non-zero"
pass_or_fail
