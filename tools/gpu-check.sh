#!/bin/sh
# tools/gpu-check.sh: one command that proves a CUDA device and measures it (docs/benchmarks.md,
# "Real-GPU check"). On a machine with an NVIDIA GPU, its driver and the CUDA toolkit, with
# nothing downloaded, in one run (at most 8 minutes on a 16-core H100/H200 host: every step has
# a time cap, below, and the caps sum to 480 s: build 120, gpu-suite 60, sanitizer 60,
# bench-gpu-bf16 45, bench-gpu-q8/q4/fp8 35 each, bench-serve 45, bench-agent 45):
#   tools     the commands the run needs (awk, timeout; nvidia-smi and compute-sanitizer on a
#             device; meson, ninja and nvcc only to build, meson for the gpu suite's own runner)
#   device    nvidia-smi: the GPU, its compute capability, the driver (CUDA 13 needs R580+)
#   build     a release build with the CUDA module (or --build DIR: a build folder carried in,
#             checked for missing shared libraries and, with cuobjdump, for a cubin or PTX that
#             the device's architecture can run)
#   gpu-suite the `gpu` test suite (meson test; without meson, or in a build folder moved from
#             where it was built, each tests/gpu/test-gpu-* program run directly)
#   sanitizer compute-sanitizer memcheck, racecheck and synccheck on the kernel tests and one
#             batched forward (test-gpu-batch short), all runs at once
#   bench-gpu-FORMAT  holo-bench gpu --weights FORMAT: random weights of Holotron-12B's shapes
#             (q8, q4, fp8: its first 18 layers, tools/bench/holotron-12b-18layers-config.json)
#             (the linear layers quantized at load for q8, q4, fp8) and a random RADIO-H tower:
#             decode vs the roofline of the bytes it reads at the copy bandwidth, prefill vs the
#             cuBLASLt rate of its products (fp8: the FP8 matmul), vision per tile; one step per
#             format of FORMATS (bf16 q8 q4 fp8; the quantized ones with 64 decode tokens), fp8
#             skipped, saying why, on a device below compute capability 8.9 (no FP8 tensor cores)
#   bench-serve  holo-bench serve at 1, 8, 32 and 100 sessions of the same shapes, the 100
#             sessions' batched decode against vLLM's published 8,900 tok/s on one H100
#   bench-agent  holo-bench agent: one persistent 1920x1080 step of the same random model and
#             tower (step 2 of 2), against its roofline at the rates measured in the run
# Every figure (the benches' "figure name=... value=... unit=... [goal=...]" lines) and every
# failure go into DIR/gpu-check.json and the same as Markdown beside it (gpu-check, .md), all
# output into DIR/gpu-check.log.
# A failing step does not stop the later ones; the exit status is 1 when any step failed.
#
# --emulated runs the same steps in a -Dcuda-emulation=true build at tiny sizes (the shapes
# of tools/bench/tiny-vl-config.json, a few tokens), without the sanitizer (compute-sanitizer
# needs a GPU; build-asan's gpu suite stands in): CI runs it (tools/check.sh, stage 2) so that
# the script and the benches' options still work on the day a GPU comes. Plain sh and awk.
#
# Usage: tools/gpu-check.sh --out DIR [--build DIR] [--emulated]
set -u

root=$(cd "$(dirname "$0")/.." && pwd)
out="" build="" emulated=0
usage() {
	echo "usage: tools/gpu-check.sh --out DIR [--build DIR] [--emulated]" >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case $1 in
	--out) [ $# -ge 2 ] || usage; out=$2; shift ;;
	--build) [ $# -ge 2 ] || usage; build=$2; shift ;;
	--emulated) emulated=1 ;;
	-h | --help)
		sed -n '2,/^# Usage/p' "$0" | sed 's/^# \{0,1\}//'
		exit 0 ;;
	*) usage ;;
	esac
	shift
done
[ -n "$out" ] || usage
command -v awk >/dev/null 2>&1 || { echo "gpu-check: awk is missing: it writes the report" >&2; exit 2; }
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
report=$out/gpu-check
log=$out/gpu-check.log
: >"$log"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/gpu-check.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT INT TERM
: >"$tmp/steps"
: >"$tmp/figures"

# The weight formats holo-bench gpu --weights measures, one step each (tools/check.sh's report
# check, tests/tools/check-gpu-report.sh, expects these four)
FORMATS="bf16 q8 q4 fp8"
VLLM_H100_TOK_S=8900 # vLLM, Holotron-12B, 100 sessions, one H100 (issue 31)
if [ $emulated = 1 ]; then
	config=$root/tools/bench/tiny-vl-config.json
	quant_config=$config
	cap_build=600 cap_suite=240 cap_sanitizer=60 cap_gpu=120 cap_gpu_quant=120 cap_serve=120 cap_agent=120
else
	config=$root/tools/bench/holotron-12b-config.json
	# q8, q4 and fp8 are quantized at load on the host's cores (~260 M weights/s on 16 cores:
	# 45 s for the 12B's 11 B, past the cap): they run on the first 18 of its 62 layers, the
	# same shapes and the same mix of Mamba, MLP and attention layers (decode against the
	# roofline of the bytes read, and prefill against the GEMM rate, are per byte and per
	# product, so the fractions hold for the whole model)
	quant_config=$root/tools/bench/holotron-12b-18layers-config.json
	# the caps sum to 8 minutes (each bench builds its random model and uploads it)
	cap_build=120 cap_suite=60 cap_sanitizer=60 cap_gpu=45 cap_gpu_quant=35 cap_serve=45 cap_agent=45
fi
[ -d /usr/local/cuda/bin ] && PATH="$PATH:/usr/local/cuda/bin" && export PATH

now() { date +%s.%N 2>/dev/null | sed 's/N$/0/'; }
# The seconds left of CAP since T0, at least 1.
left() { awk -v c="$1" -v a="$2" -v b="$(now)" 'BEGIN { l = int(c - (b - a)); print (l > 1 ? l : 1) }'; }
t_start=$(now)

# One line of the steps table: name, status (pass|fail|skip), seconds, command, message.
record() {
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" \
		"$(printf '%s' "$4" | tr '\t\n\r' '   ' | tr -d '\000-\037')" \
		"$(printf '%s' "$5" | tr '\t\n\r' '   ' | tr -d '\000-\037' | cut -c1-400)" \
		>>"$tmp/steps"
}
step_begin() {
	step=$1
	step_t0=$(now)
	: >"$tmp/$step.out"
	printf '\n==== %s\n' "$step" >>"$log"
}
step_end() { # STATUS COMMAND MESSAGE
	secs=$(awk -v a="$step_t0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')
	printf '==== %s: %s (%s s) %s\n' "$step" "$1" "$secs" "$3" >>"$log"
	echo "gpu-check: $step: $1 ($secs s)${3:+: $3}" >&2
	record "$step" "$1" "$secs" "$2" "$3"
	# the step's figures
	awk -v step="$step" '$1 == "figure" {
		name = ""; value = ""; unit = ""; goal = ""
		for (i = 2; i <= NF; i++) {
			k = substr($i, 1, index($i, "=") - 1); v = substr($i, index($i, "=") + 1)
			if (k == "name") name = v; else if (k == "value") value = v
			else if (k == "unit") unit = v; else if (k == "goal") goal = v
		}
		if (name != "") printf "%s\t%s\t%s\t%s\t%s\n", step, name, value, unit, goal
	}' "$tmp/$step.out" >>"$tmp/figures"
}
# run CAP COMMAND...: the command under `timeout`, its output into the step's and the whole log.
run() {
	cap=$1
	shift
	printf '$ %s\n' "$*" >>"$log"
	timeout "$cap" "$@" >"$tmp/cmd.out" 2>&1
	rc=$?
	cat "$tmp/cmd.out" >>"$tmp/$step.out"
	cat "$tmp/cmd.out" >>"$log"
	return $rc
}
# What a failed command's exit status means, and its last line of output.
why() { # RC CAP
	case $1 in
	124) w="timed out after $2 s" ;;
	77) w="exit status 77 (it found no CUDA device)" ;;
	*) w="exit status $1" ;;
	esac
	last=$(grep -v '^figure ' "$tmp/$step.out" | grep . | tail -n 1 | cut -c1-300)
	echo "$w${last:+: $last}"
}

# ---- tools ----
step_begin tools
missing=""
need() { # COMMAND WHAT-NEEDS-IT
	command -v "$1" >/dev/null 2>&1 || missing="$missing $1 (for $2);"
}
need timeout "every step's time cap"
need sed "the build folder's checks"
if [ $emulated = 0 ]; then
	need nvidia-smi "the device step"
	need compute-sanitizer "the sanitizer step"
	need ldd "the build folder's check for missing libraries"
	if [ -z "$build" ]; then
		need meson "the build"
		need ninja "the build"
		need nvcc "the build"
	fi
fi
command -v cuobjdump >/dev/null 2>&1 || echo "cuobjdump not found: the build's architectures are not checked" >>"$tmp/tools.out"
command -v meson >/dev/null 2>&1 || echo "meson not found: the gpu suite's programs run directly" >>"$tmp/tools.out"
cat "$tmp/tools.out" >>"$log"
notes=$(tr '\n' ';' <"$tmp/tools.out")
if [ -n "$missing" ]; then
	step_end fail "command -v" "missing:$missing $notes"
else
	step_end pass "command -v" "${notes:-every command found}"
fi

# ---- device ----
step_begin device
device_name="" device_cc="" device_driver="" device_mib="" rc=0
if [ $emulated = 0 ] && command -v nvidia-smi >/dev/null 2>&1; then
	run 30 nvidia-smi --query-gpu=name,compute_cap,driver_version,memory.total \
		--format=csv,noheader,nounits -i 0
	rc=$?
fi
if [ $emulated = 1 ]; then
	device_name="CUDA emulation (CPU)"
	# the emulated device's architecture (cuda/emu/gpu_emu.h: sm_90 unless told)
	device_cc=$(printf '%s' "${HOLOD_GPU_EMU_ARCH:-sm_90}" | sed -n 's/^sm_\([0-9]\)\([0-9]\)$/\1.\2/p')
	step_end pass "" "the CPU emulation of an emulated build${device_cc:+, compute capability $device_cc}"
elif ! command -v nvidia-smi >/dev/null 2>&1; then
	step_end fail "nvidia-smi" "nvidia-smi is missing: no NVIDIA driver is installed"
elif [ $rc != 0 ]; then
	step_end fail "nvidia-smi --query-gpu=..." "$(why $rc 30)"
else
	line=$(grep . "$tmp/device.out" | head -n 1)
	device_name=$(echo "$line" | awk -F', *' '{ print $1 }')
	device_cc=$(echo "$line" | awk -F', *' '{ print $2 }')
	device_driver=$(echo "$line" | awk -F', *' '{ print $3 }')
	device_mib=$(echo "$line" | awk -F', *' '{ print $4 }')
	major=${device_driver%%.*}
	case $major in
	'' | *[!0-9]*) step_end fail "nvidia-smi" "cannot read the driver version from '$line'" ;;
	*)
		if [ "$major" -lt 580 ]; then
			step_end fail "nvidia-smi" "driver $device_driver is older than R580, which the CUDA 13 runtime needs"
		else
			step_end pass "nvidia-smi" "$device_name, compute capability $device_cc, driver $device_driver, $device_mib MiB"
		fi ;;
	esac
fi

# ---- build ----
step_begin build
bench=""
if [ -n "$build" ]; then
	abs=$(cd "$build" 2>/dev/null && pwd) && build=$abs
	build_what="the build folder $build"
	build_cmd="(carried in)"
	build_rc=0
else
	build=$root/build-gpu-check
	[ $emulated = 1 ] && build=$root/build-gpu-check-emu
	build_what="a release build in $build"
	if [ $emulated = 1 ]; then
		set -- --buildtype=release -Dcuda-emulation=true
	else
		set -- --buildtype=release -Dcuda=enabled
	fi
	build_cmd="meson setup $build $*; ninja -C $build"
	if ! command -v meson >/dev/null 2>&1 || ! command -v ninja >/dev/null 2>&1; then
		echo "meson or ninja is missing: build elsewhere and carry the folder in with --build DIR" |
			tee -a "$log" >>"$tmp/build.out"
		build_rc=127
	else
		t_build=$(now)
		if [ -f "$build/build.ninja" ]; then
			run "$cap_build" meson setup --reconfigure "$build" "$@"
		else
			run "$cap_build" meson setup "$build" "$@"
		fi
		build_rc=$?
		[ $build_rc = 0 ] && { run "$(left "$cap_build" "$t_build")" ninja -C "$build"; build_rc=$?; }
	fi
fi
problems=""
if [ $build_rc != 0 ]; then
	problems="$(why $build_rc "$cap_build")"
elif [ ! -x "$build/tools/bench/holo-bench" ]; then
	problems="$build_what has no tools/bench/holo-bench"
else
	bench=$build/tools/bench/holo-bench
	# an emulated build for --emulated, a real one otherwise (meson's record of the options)
	if grep -q '^cuda-emulation = true' "$build/meson-private/cmd_line.txt" 2>/dev/null; then
		is_emu=1
	else
		is_emu=0
	fi
	if [ $is_emu != $emulated ]; then
		problems="$build is $([ $is_emu = 1 ] || echo 'not ')a -Dcuda-emulation=true build; --emulated takes one, a device the other;"
	fi
	if command -v ldd >/dev/null 2>&1; then
		libs=$(ldd "$bench" 2>&1 | awk '/not found/ { printf " %s", $1 }')
		[ -n "$libs" ] && problems="$problems holo-bench's shared libraries not found:$libs (install them or add their folder to LD_LIBRARY_PATH);"
	fi
	if [ $emulated = 0 ] && [ -n "$device_cc" ] && command -v cuobjdump >/dev/null 2>&1; then
		sm=$(echo "$device_cc" | tr -d .)
		elf=$(cuobjdump --list-elf "$bench" 2>/dev/null | sed -n 's/.*\.\(sm_[0-9]*a\{0,1\}\)\.cubin.*/\1/p' | sort -u | tr '\n' ' ')
		ptx=$(cuobjdump --list-ptx "$bench" 2>/dev/null | sed -n 's/.*\.\(sm_[0-9]*\)\.ptx.*/\1/p' | sort -u | tr '\n' ' ')
		echo "cubins: $elf; PTX: $ptx; device: sm_$sm" | tee -a "$log" >>"$tmp/build.out"
		ok=0
		case " $elf " in *" sm_$sm "*) ok=1 ;; esac
		for p in $ptx; do [ "${p#sm_}" -le "$sm" ] 2>/dev/null && ok=1; done
		# (nothing listed: cuobjdump's output not understood, so not a finding)
		[ $ok = 1 ] || [ -z "$elf$ptx" ] ||
			problems="$problems no cubin for sm_$sm and no PTX at or below it (cubins: $elf);"
	fi
fi
if [ -n "$problems" ]; then
	step_end fail "$build_cmd" "$problems"
else
	step_end pass "$build_cmd" "$build_what"
fi
# The programs' environment, as tests/meson.build's test_env sets it.
HOLOD_SOURCE_ROOT=$root HOLOD_BUILD_ROOT=$build HOLOD_PRECISION=fp32
export HOLOD_SOURCE_ROOT HOLOD_BUILD_ROOT HOLOD_PRECISION

# ---- the gpu suite ----
step_begin gpu-suite
recorded=$(sed -n 's/.*"build": "\([^"]*\)".*/\1/p' "$build/meson-info/meson-info.json" 2>/dev/null)
passed=0 failed=0 skipped=0 failures=""
if [ -z "$bench" ]; then
	step_end fail "" "no build"
elif command -v meson >/dev/null 2>&1 && [ "$recorded" = "$build" ]; then
	rm -f "$build/meson-logs/gpu-check.json"
	run "$cap_suite" meson test -C "$build" --no-rebuild --suite gpu --print-errorlogs --logbase gpu-check
	rc=$?
	# one JSON object per test and line: its name and result
	eval "$(awk '{
		n = match($0, /"name": "[^"]*"/) ? substr($0, RSTART + 9, RLENGTH - 10) : "?"
		r = match($0, /"result": "[A-Z]*"/) ? substr($0, RSTART + 11, RLENGTH - 12) : "?"
		if (r == "OK" || r == "EXPECTEDFAIL") p++
		else if (r == "SKIP") s++
		else { f++; names = names " " n " (" r ");" }
	} END { printf "passed=%d failed=%d skipped=%d failures=\"%s\"\n", p, f, s, names }' \
		"$build/meson-logs/gpu-check.json" 2>/dev/null)"
	if [ $rc != 0 ] && [ $failed = 0 ]; then
		failures=" $(why $rc "$cap_suite")"
		failed=1
	fi
	suite_cmd="meson test -C $build --suite gpu"
else
	# each program alone, as meson would run it (77: skipped)
	suite_cmd="$build/tests/gpu/test-gpu-* (meson not found, or $build was built as ${recorded:-?})"
	echo "running the gpu suite's programs directly: $suite_cmd" >>"$tmp/gpu-suite.out"
	t_suite=$(now)
	for t in "$build"/tests/gpu/test-gpu-*; do
		if [ ! -f "$t" ] || [ ! -x "$t" ]; then
			continue
		fi
		cap=$(left "$cap_suite" "$t_suite")
		run "$cap" "$t"
		rc=$?
		case $rc in
		0) passed=$((passed + 1)) ;;
		77) skipped=$((skipped + 1)) ;;
		*) failed=$((failed + 1)); failures="$failures ${t##*/} ($(why $rc "$cap"));" ;;
		esac
	done
fi
if [ -n "$bench" ]; then
	printf 'figure name=suite.passed value=%d unit=tests\nfigure name=suite.failed value=%d unit=tests goal=<=0\nfigure name=suite.skipped value=%d unit=tests\n' \
		$passed $failed $skipped >>"$tmp/gpu-suite.out"
	if [ $failed != 0 ] || [ $passed = 0 ]; then
		step_end fail "$suite_cmd" "$passed passed, $failed failed, $skipped skipped:${failures:- none passed}"
	else
		step_end pass "$suite_cmd" "$passed passed, $skipped skipped"
	fi
fi

# ---- compute-sanitizer ----
step_begin sanitizer
# the kernel tests, and one batched forward
kernels="test-gpu-rmsnorm test-gpu-mamba test-gpu-lm-ops test-gpu-attention test-gpu-quant test-gpu-vision-ops test-gpu-batch"
if [ $emulated = 1 ]; then
	step_end skip "" "compute-sanitizer needs a GPU (the emulation's checks and build-asan stand in)"
elif ! command -v compute-sanitizer >/dev/null 2>&1; then
	step_end fail "compute-sanitizer" "compute-sanitizer is missing (it comes with the CUDA toolkit)"
elif [ -z "$bench" ]; then
	step_end fail "" "no build"
else
	for tool in memcheck racecheck synccheck; do
		for k in $kernels; do
			args=""
			[ "$k" = test-gpu-batch ] && args=short
			(
				HOLOD_UNDER_SANITIZER=1 timeout "$cap_sanitizer" compute-sanitizer --tool $tool \
					--error-exitcode 86 --print-limit 20 "$build/tests/gpu/$k" $args \
					>"$tmp/san-$tool-$k.log" 2>&1
				echo $? >"$tmp/san-$tool-$k.rc"
			) &
		done
	done
	wait
	bad="" n=0
	for tool in memcheck racecheck synccheck; do
		for k in $kernels; do
			rc=$(cat "$tmp/san-$tool-$k.rc" 2>/dev/null || echo 1)
			{ echo "---- compute-sanitizer --tool $tool $k: exit status $rc"; cat "$tmp/san-$tool-$k.log"; } >>"$tmp/sanitizer.out"
			n=$((n + 1))
			case $rc in
			0) ;;
			86) bad="$bad $tool $k: errors found;" ;;
			124) bad="$bad $tool $k: timed out after $cap_sanitizer s;" ;;
			77) bad="$bad $tool $k: skipped (no device under the sanitizer);" ;;
			*) bad="$bad $tool $k: exit status $rc;" ;;
			esac
		done
	done
	cat "$tmp/sanitizer.out" >>"$log"
	if [ -n "$bad" ]; then
		step_end fail "compute-sanitizer --tool memcheck|racecheck|synccheck" "$bad"
	else
		step_end pass "compute-sanitizer --tool memcheck|racecheck|synccheck" "$n runs clean: $kernels (short)"
	fi
fi

# ---- the benches ----
bench_step() { # NAME CAP ARGS...
	name=$1 cap=$2
	shift 2
	step_begin "$name"
	if [ -z "$bench" ]; then
		step_end fail "holo-bench $*" "no build"
		return
	fi
	# the benches take their precision from their options
	if run "$cap" env -u HOLOD_PRECISION "$bench" "$@"; then
		step_end pass "holo-bench $*" ""
	else
		step_end fail "holo-bench $*" "$(why $? "$cap")"
	fi
}
# compute capability as a number (8.9 -> 89; empty when unknown: the bench decides)
cc_num=$(echo "$device_cc" | awk -F. '/^[0-9]+\.[0-9]+$/ { print $1 * 10 + $2 }')
for f in $FORMATS; do
	if [ "$f" = fp8 ] && [ -n "$cc_num" ] && [ "$cc_num" -lt 89 ]; then
		step_begin "bench-gpu-$f"
		step_end skip "holo-bench gpu --weights fp8" \
			"fp8 needs FP8 tensor cores, compute capability 8.9 or newer; the device is $device_cc"
		continue
	fi
	cap=$cap_gpu
	[ "$f" = bf16 ] || cap=$cap_gpu_quant
	if [ $emulated = 1 ]; then
		bench_step "bench-gpu-$f" "$cap" gpu --emulated --config "$config" --precision bf16 --weights "$f"
	elif [ "$f" = bf16 ]; then
		bench_step "bench-gpu-$f" "$cap" gpu --config "$config" --precision bf16 --weights "$f"
	else
		bench_step "bench-gpu-$f" "$cap" gpu --config "$quant_config" --precision bf16 --weights "$f" \
			--decode 64
	fi
done
if [ $emulated = 1 ]; then
	bench_step bench-serve "$cap_serve" serve --backend cuda --random-config "$config" \
		--config "$config" --sessions 1,8,32,100 --prompt 4 --decode 2 --rounds 1 --context 64 \
		--reference $VLLM_H100_TOK_S
	bench_step bench-agent "$cap_agent" agent --backend cuda --random-config "$config" \
		--screen 1920x1080 --steps 2 --prefix 16 --text 6 --decode 4
else
	bench_step bench-serve "$cap_serve" serve --backend cuda --precision bf16 \
		--random-config "$config" --config "$config" --sessions 1,8,32,100 --prompt 32 \
		--decode 16 --rounds 3 --reference $VLLM_H100_TOK_S
	bench_step bench-agent "$cap_agent" agent --backend cuda --precision bf16 \
		--random-config "$config" --screen 1920x1080 --steps 2
fi

# ---- the report ----
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
[ "$commit" != unknown ] && [ -n "$(git -C "$root" status --porcelain --untracked-files=no 2>/dev/null | head -n 1)" ] && commit="$commit+dirty"
cuda=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
if [ $emulated = 1 ]; then mode=emulated; else mode=device; fi
t_end=$(now)
awk -F '\t' -v mode="$mode" -v date="$(date -u +%Y-%m-%dT%H:%M:%SZ)" -v commit="$commit" \
	-v device="$device_name" -v cc="$device_cc" -v driver="$device_driver" -v mib="$device_mib" \
	-v cuda="${cuda:-}" -v cpus="$(nproc 2>/dev/null || echo 0)" -v build="$build" \
	-v command="tools/gpu-check.sh --out $out${build:+ --build $build}$([ $emulated = 1 ] && echo ' --emulated')" \
	-v t0="$t_start" -v t1="$t_end" -v md="${report}.md" -v json="${report}.json" \
	-v logfile="$log" -v tmp="$tmp" '
function esc(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return s }
function cell(s) { gsub(/\|/, "\\|", s); return s }
function str(s) { return "\"" esc(s) "\"" }
function num(v) { return v ~ /^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$/ }
FNR == 1 { file++ }
file == 1 { ns++; sname[ns] = $1; sstat[ns] = $2; ssec[ns] = $3; scmd[ns] = $4; smsg[ns] = $5; next }
file == 2 {
	nf++; fstep[nf] = $1; fname[nf] = $2; fval[nf] = $3; funit[nf] = $4; fgoal[nf] = $5
	fop[nf] = substr($5, 1, 2); fgv[nf] = substr($5, 3)
	if (!num($3)) { nbad[$1]++; bad[$1, nbad[$1]] = $1 ": figure " $2 " is not a number (" $3 ")" }
	next
}
END {
	for (i = 1; i <= ns; i++) {
		if (sstat[i] == "fail") { nfail++; failure[nfail] = sname[i] ": " smsg[i] }
		for (k = 1; k <= nbad[sname[i]]; k++) { nfail++; failure[nfail] = bad[sname[i], k] }
		if (nbad[sname[i]]) sstat[i] = "fail"
		nfig[sname[i]] = 0
	}
	for (i = 1; i <= nf; i++) nfig[fstep[i]]++
	result = nfail ? "fail" : "pass"
	secs = sprintf("%.1f", t1 - t0)
	devline = device (cc != "" ? ", compute capability " cc : "") (driver != "" ? ", driver " driver : "") (mib != "" ? ", " mib " MiB" : "")

	printf "{\n  \"tool\": \"tools/gpu-check.sh\",\n  \"version\": 1,\n" > json
	printf "  \"result\": %s,\n  \"mode\": %s,\n  \"date\": %s,\n  \"commit\": %s,\n", str(result), str(mode), str(date), str(commit) > json
	printf "  \"command\": %s,\n  \"build\": %s,\n  \"seconds\": %s,\n", str(command), str(build), secs > json
	printf "  \"device\": {\"name\": %s, \"compute_capability\": %s, \"driver\": %s, \"memory_MiB\": %s},\n", str(device), str(cc), str(driver), num(mib) ? mib : "null" > json
	printf "  \"host\": {\"cpus\": %d, \"cuda\": %s},\n", cpus, str(cuda) > json
	printf "  \"failures\": [" > json
	for (i = 1; i <= nfail; i++) printf "%s\n    %s", (i > 1 ? "," : ""), str(failure[i]) > json
	printf "%s],\n  \"steps\": [", nfail ? "\n  " : "" > json
	for (i = 1; i <= ns; i++) {
		printf "%s\n    {\"name\": %s, \"status\": %s, \"seconds\": %s, \"command\": %s, \"message\": %s, \"figures\": [", (i > 1 ? "," : ""), str(sname[i]), str(sstat[i]), num(ssec[i]) ? ssec[i] : "null", str(scmd[i]), str(smsg[i]) > json
		k = 0
		for (j = 1; j <= nf; j++) {
			if (fstep[j] != sname[i]) continue
			met = "null"; goal = "null"
			if (fgoal[j] != "" && num(fgv[j]) && num(fval[j])) {
				goal = "{\"op\": " str(fop[j]) ", \"value\": " fgv[j] "}"
				met = (fop[j] == ">=" ? fval[j] + 0 >= fgv[j] + 0 : fval[j] + 0 <= fgv[j] + 0) ? "true" : "false"
			}
			printf "%s\n      {\"name\": %s, \"value\": %s, \"unit\": %s, \"goal\": %s, \"met\": %s}", k++ ? "," : "", str(fname[j]), num(fval[j]) ? fval[j] : "null", str(funit[j]), goal, met > json
		}
		printf "%s]}", k ? "\n    " : "" > json
	}
	printf "\n  ]\n}\n" > json

	printf "# GPU check: %s\n\n", toupper(result) > md
	printf "- date: %s\n- commit: %s\n- mode: %s\n- device: %s\n- CUDA toolkit: %s; host CPUs: %d\n- command: `%s`\n- build: %s\n- time: %s s\n\n", date, commit, mode, devline, cuda != "" ? cuda : "unknown", cpus, command, build, secs > md
	printf "## Steps\n\n| step | status | seconds | figures | what |\n|---|---|---|---|---|\n" > md
	for (i = 1; i <= ns; i++) printf "| %s | %s | %s | %d | %s |\n", sname[i], sstat[i], ssec[i], nfig[sname[i]], cell(smsg[i] != "" ? smsg[i] : scmd[i]) > md
	printf "\n## Figures\n\n| step | figure | value | unit | goal | met |\n|---|---|---|---|---|---|\n" > md
	for (j = 1; j <= nf; j++) {
		met = ""
		if (fgoal[j] != "" && num(fgv[j]) && num(fval[j]))
			met = (fop[j] == ">=" ? fval[j] + 0 >= fgv[j] + 0 : fval[j] + 0 <= fgv[j] + 0) ? "yes" : "**no**"
		printf "| %s | %s | %s | %s | %s | %s |\n", fstep[j], fname[j], fval[j], funit[j], fgoal[j], met > md
	}
	printf "\n## Failures\n\n" > md
	if (!nfail) printf "None.\n" > md
	for (i = 1; i <= nfail; i++) printf "- %s\n", failure[i] > md
	for (i = 1; i <= ns; i++) {
		if (sstat[i] != "fail") continue
		n = 0
		f = tmp "/" sname[i] ".out"
		while ((getline line < f) > 0) buf[++n % 30] = line
		close(f)
		if (!n) continue
		printf "\n### %s: the end of its output\n\n```\n", sname[i] > md
		for (k = (n > 30 ? n - 29 : 1); k <= n; k++) print buf[k % 30] > md
		printf "```\n" > md
	}
	printf "\nThe whole output: %s. Figures from a real device go into docs/benchmarks.md (\"Real-GPU check\") with the date, commit, device and command above.\n", logfile > md
	exit nfail ? 1 : 0
}' "$tmp/steps" "$tmp/figures"
rc=$?
echo "gpu-check: $([ $rc = 0 ] && echo PASS || echo FAIL): ${report}.md, ${report}.json" >&2
exit $rc
