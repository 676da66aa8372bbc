#!/bin/sh
# unit suite: tools/gpu-check.sh over a stand-in build folder (its holo-bench and gpu test
# programs are scripts), so that the report is checked where steps fail as well as where they
# pass: every step runs after a failure, each failure is listed with its cause, a figure that is
# not a number fails its step, the exit status follows, the benches get the options the check
# promises (tiny shapes, 1..100 sessions against vLLM's 8,900 tok/s, one 1920x1080 agent step),
# and the gpu suite's programs run directly where the build has no meson record. The report's
# JSON is checked by check-gpu-report.sh, which tools/check.sh also runs on the real emulated
# run; the cases at the end show that it refuses broken reports.
# usage: test-gpu-check.sh GPU-CHECK CHECK-GPU-REPORT
set -u
. "$(dirname "$0")/../harness/test-lib.sh"
script=$1 checker=$2
command -v jq >/dev/null 2>&1 || test_skip "jq is not installed"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0
fail() {
	echo "FAIL: $1"
	failures=$((failures + 1))
}

# The stand-in build: an emulated build's options, a holo-bench that prints each bench's
# figures (or fails as $STUB says) and records its arguments, and three gpu test programs.
build=$tmp/build
mkdir -p "$build/tools/bench" "$build/tests/gpu" "$build/meson-private"
printf '[options]\ncuda-emulation = true\nbuildtype = release\n' >"$build/meson-private/cmd_line.txt"
cat >"$build/tools/bench/holo-bench" <<'STUB'
#!/bin/sh
echo "$*" >>"$STUB_ARGS"
fig() { echo "figure name=$1 value=$2 unit=$3${4:+ goal=$4}"; }
case $1 in
gpu)
	f=$(echo "$*" | sed -n 's/.*--weights \([a-z0-9]*\).*/\1/p')
	case $STUB in *"gpu-$f"*) echo "holo-bench gpu: the forward failed: Input/output error" >&2; exit 1 ;; esac
	fig gpu.copy 3000 GB/s
	fig gpu.gemm 700 TFLOP/s
	[ "$f" = fp8 ] && fig gpu.gemm_fp8 1400 TFLOP/s
	fig "gpu.$f.prefill" 12.5 tok/s
	fig "gpu.$f.prefill_of_gemm" 12.5 % '>=60'
	fig "gpu.$f.decode" 12.5 tok/s
	fig "gpu.$f.decode_bytes" 12.5 MB
	fig "gpu.$f.decode_of_roofline" 12.5 % '>=85'
	fig "gpu.$f.state" 12.5 MiB
	fig "gpu.$f.vision" 12.5 ms/tile
	fig "gpu.$f.vision_of_gemm" 12.5 % ;;
serve)
	case $STUB in *serve*) echo "holo-bench serve: out of memory" >&2; exit 1 ;; esac
	for n in 1 8 32 100; do
		fig "serve.sessions$n.tok_s" $((n * 80)) tok/s "$([ $n = 100 ] && echo '>=8900')"
		fig "serve.sessions$n.step_ms" 11 ms
	done ;;
agent)
	for p in vision prefill decode sum roofline; do fig "agent.step2.$p" 40 ms; done
	case $STUB in *agent*) fig agent.step2.of_roofline nan x '<=1.2' ;;
	*) fig agent.step2.of_roofline 1.1 x '<=1.2' ;; esac ;;
esac
STUB
printf '#!/bin/sh\necho kernels fine\n' >"$build/tests/gpu/test-gpu-ok"
printf '#!/bin/sh\necho "no device"\nexit 77\n' >"$build/tests/gpu/test-gpu-skip"
printf '#!/bin/sh\ncase $STUB in *suite*) echo "bad kernel: row 3 differs"; exit 1 ;; esac\n' \
	>"$build/tests/gpu/test-gpu-maybe"
chmod +x "$build/tools/bench/holo-bench" "$build/tests/gpu/"*
STUB_ARGS=$tmp/args
export STUB_ARGS
unset HOLOD_GPU_EMU_ARCH # the emulation's default, sm_90
name=gpu-check # the report's files: DIR/gpu-check.json and the Markdown beside it

# run NAME STUB WANT_RC: the check over the stand-in build into $tmp/NAME
run() {
	: >"$STUB_ARGS"
	STUB=$2 sh "$script" --emulated --build "$build" --out "$tmp/$1" >"$tmp/$1.log" 2>&1
	rc=$?
	[ $rc = "$3" ] || { fail "$1: exit status $rc, expected $3"; cat "$tmp/$1.log"; }
	report=$tmp/$1/gpu-check.json
	[ -f "$tmp/$1/${name}.md" ] || fail "$1: no Markdown report"
	[ -s "$tmp/$1/gpu-check.log" ] || fail "$1: no gpu-check.log"
}
# q NAME JQ-EXPR: the expression must be true of NAME's report
q() {
	jq -e "$2" "$tmp/$1/gpu-check.json" >/dev/null || fail "$1: not true of the report: $2"
}

# Every step passes (the sanitizer is skipped in the emulation).
run pass "" 0
sh "$checker" "$report" emulated pass || fail "pass: check-gpu-report refused a passing report"
q pass '.result == "pass" and .failures == [] and .mode == "emulated"'
q pass '(.steps[] | select(.name == "gpu-suite")) | .status == "pass" and .message == "2 passed, 1 skipped" and (.command | test("test-gpu-"))'
q pass '[.steps[] | select(.name == "gpu-suite") | .figures[] | {(.name): .value}] | add == {"suite.passed": 2, "suite.failed": 0, "suite.skipped": 1}'
q pass '(.steps[] | select(.name == "bench-agent") | .figures[] | select(.name == "agent.step2.of_roofline")) | .met == true and .value == 1.1'
q pass '(.steps[] | select(.name == "bench-serve") | .figures[] | select(.name == "serve.sessions100.tok_s")) | .met == false and .goal == {"op": ">=", "value": 8900}'
grep -q '^# GPU check: PASS$' "$tmp/pass/${name}.md" || fail "pass: the report's title"
grep -q '^| bench-serve | serve.sessions100.tok_s | 8000 | tok/s | >=8900 | \*\*no\*\* |$' "$tmp/pass/${name}.md" ||
	fail "pass: the figure's line in the report"
# what each bench was asked for: one run per weight format
for f in bf16 q8 q4 fp8; do
	grep -qx "gpu --emulated --config $HOLOD_SOURCE_ROOT/tools/bench/tiny-vl-config.json --precision bf16 --weights $f" "$STUB_ARGS" ||
		fail "gpu's arguments for $f: $(cat "$STUB_ARGS")"
	q pass "(.steps[] | select(.name == \"bench-gpu-$f\")) | .status == \"pass\" and (.figures | map(.name) | index([\"gpu.$f.decode_bytes\"]) != null)"
done
q pass '(.steps[] | select(.name == "bench-gpu-fp8") | .figures[] | select(.name == "gpu.fp8.prefill_of_gemm")) | .goal == {"op": ">=", "value": 60}'
q pass '(.steps[] | select(.name == "bench-gpu-q4") | .figures[] | select(.name == "gpu.q4.decode_of_roofline")) | .goal == {"op": ">=", "value": 85}'

# An emulated sm_80 (no FP8 tensor cores): fp8's step is skipped saying why, not run, and the
# run still passes; a quantized format's bench failing fails its step alone.
HOLOD_GPU_EMU_ARCH=sm_80
export HOLOD_GPU_EMU_ARCH
run sm80 "gpu-q4" 1
sh "$checker" "$report" emulated || fail "sm80: check-gpu-report refused a well-formed report"
q sm80 '[.steps[] | {(.name): .status}] | add | .["bench-gpu-fp8"] == "skip" and .["bench-gpu-q4"] == "fail" and .["bench-gpu-q8"] == "pass"'
q sm80 '(.steps[] | select(.name == "bench-gpu-fp8")).message | test("compute capability 8.9 or newer; the device is 8.0")'
q sm80 '.failures == ["bench-gpu-q4: exit status 1: holo-bench gpu: the forward failed: Input/output error"]'
grep -q -- "--weights fp8" "$STUB_ARGS" && fail "sm80: fp8 was run on an sm_80 device"
run sm80pass "" 0
sh "$checker" "$report" emulated pass || fail "sm80pass: check-gpu-report refused fp8's skip on sm_80"
unset HOLOD_GPU_EMU_ARCH
grep -q "^serve --backend cuda --random-config [^ ]*/tiny-vl-config.json .*--sessions 1,8,32,100 .*--reference 8900$" "$STUB_ARGS" ||
	fail "serve's arguments: $(cat "$STUB_ARGS")"
grep -q "^agent --backend cuda --random-config [^ ]*/tiny-vl-config.json --screen 1920x1080 --steps 2 " "$STUB_ARGS" ||
	fail "agent's arguments: $(cat "$STUB_ARGS")"

# A test program, a bench and a figure fail: the steps after them still run, and each failure
# is listed with its cause.
run fails "suite serve agent" 1
sh "$checker" "$report" emulated || fail "fails: check-gpu-report refused a well-formed report"
q fails '.result == "fail" and (.failures | length) == 3'
q fails '[.steps[] | {(.name): .status}] | add == {"tools": "pass", "device": "pass", "build": "pass", "gpu-suite": "fail", "sanitizer": "skip", "bench-gpu-bf16": "pass", "bench-gpu-q8": "pass", "bench-gpu-q4": "pass", "bench-gpu-fp8": "pass", "bench-serve": "fail", "bench-agent": "fail"}'
q fails '.failures[0] | test("^gpu-suite: 1 passed, 1 failed, 1 skipped: test-gpu-maybe \\(exit status 1: bad kernel: row 3 differs\\);")'
q fails '.failures | index(["bench-serve: exit status 1: holo-bench serve: out of memory"]) != null'
q fails '.failures | index(["bench-agent: figure agent.step2.of_roofline is not a number (nan)"]) != null'
q fails '(.steps[] | select(.name == "bench-agent") | .figures[] | select(.name == "agent.step2.of_roofline")) | .value == null and .met == null'
grep -q '^# GPU check: FAIL$' "$tmp/fails/${name}.md" || fail "fails: the report's title"
grep -q '^bad kernel: row 3 differs$' "$tmp/fails/${name}.md" || fail "fails: the failed step's output in the report"
grep -q 'holo-bench serve: out of memory' "$tmp/fails/gpu-check.log" || fail "fails: the bench's output in the log"

# A build folder of the wrong kind fails the build step; the rest still runs.
printf '[options]\nbuildtype = release\n' >"$build/meson-private/cmd_line.txt"
run kind "" 1
q kind '(.steps[] | select(.name == "build")) | .status == "fail" and (.message | test("is not a -Dcuda-emulation=true build"))'
q kind '[.steps[] | select(.name != "build" and .status == "fail")] == []'
q kind '.failures | length == 1'
# No build folder: every step that needs it says so.
rm -rf "$build/tools"
run none "" 1
q none '[.steps[] | select(.status == "fail") | .name] == ["build", "gpu-suite", "bench-gpu-bf16", "bench-gpu-q8", "bench-gpu-q4", "bench-gpu-fp8", "bench-serve", "bench-agent"]'
q none '(.steps[] | select(.name == "bench-serve")).message == "no build"'

# check-gpu-report refuses what the script must never write.
bad() { # WHAT JQ-EDIT [pass]
	jq "$2" "$tmp/pass/gpu-check.json" >"$tmp/bad.json"
	if sh "$checker" "$tmp/bad.json" emulated ${3:-} >"$tmp/bad.log" 2>&1; then
		fail "check-gpu-report accepted a report with $1"
	fi
}
bad "a step missing" '.steps |= map(select(.name != "bench-agent"))'
bad "a figure missing" '(.steps[] | select(.name == "bench-gpu-bf16") | .figures) |= .[1:]'
bad "a format missing" '.steps |= map(select(.name != "bench-gpu-q4"))'
bad "fp8 without its FP8 GEMM rate" '(.steps[] | select(.name == "bench-gpu-fp8") | .figures) |= map(select(.name != "gpu.gemm_fp8"))'
bad "q8 without its decode bytes" '(.steps[] | select(.name == "bench-gpu-q8") | .figures) |= map(select(.name != "gpu.q8.decode_bytes"))'
bad "fp8's goal wrong" '(.steps[] | select(.name == "bench-gpu-fp8") | .figures[] | select(.name == "gpu.fp8.prefill_of_gemm") | .goal.value) = 50'
bad "a format skipped for no reason, asked to pass" '(.steps[] | select(.name == "bench-gpu-q8")) |= (.status = "skip" | .message = "")' pass
bad "fp8 skipped for no reason, asked to pass" '(.steps[] | select(.name == "bench-gpu-fp8")) |= (.status = "skip" | .message = "")' pass
bad "a figure not a number" '(.steps[] | select(.name == "bench-serve") | .figures[0].value) = "9"'
bad "a failed step not listed" '(.steps[] | select(.name == "bench-serve")).status = "fail"'
bad "the wrong goal" '(.steps[] | select(.name == "bench-gpu-bf16") | .figures[] | select(.name == "gpu.bf16.decode_of_roofline") | .goal.value) = 80'
bad "a failure, asked to pass" '.result = "fail" | (.steps[] | select(.name == "bench-serve")).status = "fail" | .failures = ["bench-serve: x"]' pass
sh "$checker" "$tmp/pass/gpu-check.json" device >/dev/null 2>&1 && fail "check-gpu-report accepted the wrong mode"

[ $failures = 0 ] || exit 1
echo "ok"
