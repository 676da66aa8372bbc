#!/bin/sh
# Installs what is missing, builds holod three times (four with clang) and runs every test suite:
#  1. debug build with AddressSanitizer + UndefinedBehaviorSanitizer and the CUDA module built
#     against the CPU emulation (-Dcuda-emulation=true): all suites (unit, x11, integration, and
#     gpu + gpu-emu, whose kernels then run on the CPU under the sanitizers, and remote, against
#     llama.cpp's OpenAI-compatible server installed by tools/remote-server/setup.sh);
#  2. optimized build with the CPU emulation of CUDA, without sanitizers (whose allocator hides
#     alignment faults): the gpu-emu suite, then the `numeric` suite (the LM and vision goldens,
#     batch and conformance tests) again under every CPU kernel variant this CPU runs
#     ($HOLOD_CPU_KERNELS, with oneDNN's ISA capped to match by $ONEDNN_MAX_CPU_ISA), so an AMX
#     machine also checks the path a CPU without AMX takes; the log names the variants skipped;
#     then the unit suite as on a CPU with AVX2 alone (oneDNN capped there: no bf16 products);
#     and the real-GPU check's steps at tiny sizes on the emulation (tools/gpu-check.sh
#     --emulated), its report checked by tests/tools/check-gpu-report.sh;
#  3. release build with -Werror and the real nvcc objects (with the nvcc build checks where
#     nvcc is installed): must compile warning-free; the whole test list runs again there, where
#     the gpu suite must skip (77) on a machine without a GPU, not fail;
#  4. with clang: the libFuzzer targets build and their corpora replay (docs/fuzzing.md).
# Usage: tools/check.sh [extra meson test args for the first run, e.g. --suite unit]
set -eu
cd "$(dirname "$0")/.."

./tools/install-deps.sh
# 0. the sources are formatted as .clang-format says (tools/format.sh rewrites them)
./tools/format.sh --check
# The remote suite's server (llama-cpp-python in tools/.venv-remote; the first run builds
# llama.cpp, docs/remote-server.md).
./tools/remote-server/setup.sh
# The official MCP Python SDK, the client of the agent-mcp test (tools/.venv-mcp).
./tools/mcp-client/setup.sh
[ -d /usr/local/cuda/bin ] && PATH="/usr/local/cuda/bin:$PATH" && export PATH

jobs=$(nproc 2>/dev/null || echo 2)

setup() {
	dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson setup --reconfigure "$dir" "$@" >/dev/null
	else
		meson setup "$dir" "$@" >/dev/null
	fi
	ninja -C "$dir" -j "$jobs"
}

setup build-asan -Db_sanitize=address,undefined -Db_lundef=false -Dcuda-emulation=true
meson test -C build-asan --print-errorlogs --num-processes "$jobs" "$@"

# 2. the emulated build without sanitizers, then the numeric suite per CPU kernel variant
setup build-emu --buildtype=release -Dcuda-emulation=true
meson test -C build-emu --print-errorlogs --num-processes "$jobs" --suite gpu-emu --suite numeric
# the one command for a real device, on the emulation: every step must pass (the sanitizer,
# which needs a GPU, is skipped) and the report hold every step and figure
./tools/gpu-check.sh --emulated --build build-emu --out build-emu/gpu-check
sh tests/tools/check-gpu-report.sh build-emu/gpu-check/gpu-check.json emulated pass
logs_kernels=""
variants=$(build-emu/tests/tools/cpu-variants)
best=$(echo "$variants" | head -n 1)
echo "check: CPU kernel variants: $(build-emu/tests/tools/cpu-variants --all | tr '\n' ' ')"
for v in $variants; do
	[ "$v" = "$best" ] && continue # the run above
	# oneDNN's ISA to match; Debian's oneDNN has no bf16 products below AVX512_CORE, so the
	# AVX2 and portable variants keep it there (a CPU with AVX2 alone is the run below)
	case $v in
	avx512bf16) isa=AVX512_CORE_BF16 ;;
	*) isa=AVX512_CORE ;;
	esac
	echo "check: the numeric suite with HOLOD_CPU_KERNELS=$v ONEDNN_MAX_CPU_ISA=$isa"
	HOLOD_CPU_KERNELS=$v ONEDNN_MAX_CPU_ISA=$isa \
		meson test -C build-emu --no-rebuild --print-errorlogs --num-processes "$jobs" \
		--suite numeric --logbase "kernels-$v"
	logs_kernels="$logs_kernels build-emu/meson-logs/kernels-$v.json"
done
for v in amx avx512bf16 avx512 avx2 portable; do
	echo "$variants" | grep -qx "$v" || echo "check: kernel variant $v skipped: this CPU does not run it"
done
# A CPU with AVX2 alone (most desktops): oneDNN has no bf16 products there, so bf16
# checkpoints run in bf16 (the default there too) on the engine's own kernels
if echo "$variants" | grep -qx avx2; then
	echo "check: the unit suite as on a CPU with AVX2 alone (HOLOD_CPU_KERNELS=avx2 ONEDNN_MAX_CPU_ISA=AVX2)"
	HOLOD_CPU_KERNELS=avx2 ONEDNN_MAX_CPU_ISA=AVX2 \
		meson test -C build-emu --no-rebuild --print-errorlogs --num-processes "$jobs" \
		--suite unit --logbase avx2-only
	logs_kernels="$logs_kernels build-emu/meson-logs/avx2-only.json"
fi

# 3. Where nvcc is installed the release build must compile the CUDA module (sm_90, sm_89, sm_86, sm_80 + PTX,
# spills and local memory as errors, every kernel within cuda/resource-budget.txt), not skip it.
cuda=auto
command -v nvcc >/dev/null 2>&1 && cuda=enabled
setup build-release --buildtype=release -Dwerror=true -Dcuda=$cuda
meson test -C build-release --print-errorlogs --num-processes "$jobs"

# 4. where clang is installed (it is optional): the libFuzzer targets compile, and their
#    corpora replay under clang's sanitizers, which check more than GCC's (docs/fuzzing.md).
logs="build-asan/meson-logs/testlog.json build-emu/meson-logs/testlog.json $logs_kernels
      build-release/meson-logs/testlog.json"
if command -v clang-14 >/dev/null 2>&1 || command -v clang >/dev/null 2>&1; then
	./tools/fuzz/build.sh build-fuzz
	logs="$logs build-fuzz/meson-logs/testlog.json"
else
	echo "check: clang not found: the fuzz targets were not built" >&2
fi

# One closing line over all runs (meson's summaries are printed above).
# shellcheck disable=SC2086
jq -rs '[.[].result] | "\(map(select(. == "OK" or . == "EXPECTEDFAIL")) | length) passed, \(map(select(. == "FAIL" or . == "TIMEOUT" or . == "ERROR" or . == "UNEXPECTEDPASS")) | length) failed, \(map(select(. == "SKIP")) | length) skipped"' \
	$logs
