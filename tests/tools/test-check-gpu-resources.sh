#!/bin/sh
# unit suite: tools/check-gpu-resources.sh on saved ptxas reports (no nvcc needed). The report
# below is nvcc 13.0's `-Xptxas -v` output for cuda/rmsnorm.cu (sm_90) and a template kernel,
# trimmed; each case states what a user of the build would see.
set -u
checker=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0

cat >"$tmp/report" <<'REPORT'
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z18rmsnorm_f32_kernelPKfS0_Pfif' for 'sm_90'
ptxas info    : Function properties for _Z18rmsnorm_f32_kernelPKfS0_Pfif
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 15 registers, used 1 barriers, 128 bytes smem
ptxas info    : Compile time = 13.541 ms
ptxas info    : Compiling entry function '_Z9attentionIfLi64EEvPKT_PS0_i' for 'sm_90'
ptxas info    : Function properties for _Z9attentionIfLi64EEvPKT_PS0_i
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 96 registers, used 1 barriers, 16384 bytes smem, 384 bytes cmem[0]
REPORT

# expect NAME WANT_RC GREP_PATTERN BUDGET_LINES...
expect() {
	name=$1 want=$2 pattern=$3
	shift 3
	printf '%s\n' "# a comment" "" "$@" >"$tmp/budget"
	rm -f "$tmp/out"
	sh "$checker" -b "$tmp/budget" -o "$tmp/out" -r "$tmp/report" >"$tmp/log" 2>&1
	rc=$?
	if [ "$rc" -ne "$want" ] || ! grep -q -- "$pattern" "$tmp/log" "$tmp/out" 2>/dev/null; then
		echo "FAIL $name: exit $rc (want $want), output lacks '$pattern':" >&2
		cat "$tmp/log" >&2
		failures=$((failures + 1))
	fi
	if [ "$want" -ne 0 ] && [ -e "$tmp/out" ]; then
		echo "FAIL $name: a failed check still wrote its report" >&2
		failures=$((failures + 1))
	fi
}

expect "within budget" 0 "96 registers (budget 128)" \
	"rmsnorm_* * 32 128" "attention<float,64> sm_90 128 16384"
expect "template arguments in the pattern, first match wins" 0 "attention<float,64>$" \
	"rmsnorm_f32_kernel sm_90 16 128" "attention<*> sm_90 96 16384" "* * 0 0"
expect "registers over budget" 1 "'attention<float,64>' (sm_90) uses 96 registers, its budget is 64" \
	"rmsnorm_* * 32 128" "attention<*> * 64 16384"
expect "shared memory over budget" 1 "'rmsnorm_f32_kernel' (sm_90) uses 128 bytes of static shared memory, its budget is 64" \
	"rmsnorm_* * 32 64" "attention<*> * 128 16384"
expect "a kernel without a budget line" 1 "'attention<float,64>' (sm_90) has no line" \
	"rmsnorm_* * 32 128" "attention<*> sm_80 128 16384"

sed 's/0 bytes stack frame/16 bytes stack frame/' "$tmp/report" >"$tmp/report2"
mv "$tmp/report2" "$tmp/report"
expect "a stack frame (local memory)" 1 "has a 16-byte stack frame" "* * 255 65536"

: >"$tmp/report"
expect "an empty report" 1 "no kernel in the ptxas report" "* * 255 65536"

[ "$failures" -eq 0 ] || exit 1
