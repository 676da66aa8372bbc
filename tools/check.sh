#!/bin/sh
# Installs what is missing, builds holod twice (three times with clang) and runs every CPU test suite:
#  1. debug build with AddressSanitizer + UndefinedBehaviorSanitizer and the CUDA module built
#     against the CPU emulation (-Dcuda-emulation=true): all suites (unit, x11, integration, and
#     gpu + gpu-emu, whose kernels then run on the CPU under the sanitizers, and remote, against
#     llama.cpp's OpenAI-compatible server installed by tools/remote-server/setup.sh);
#  2. release build with -Werror and the real nvcc objects (with the nvcc build checks where
#     nvcc is installed): must compile warning-free; the unit suite runs again there.
#  3. with clang: the libFuzzer targets build and their corpora replay (docs/fuzzing.md).
# Usage: tools/check.sh [extra meson test args, e.g. --suite unit]
set -eu
cd "$(dirname "$0")/.."

./tools/install-deps.sh
# The remote suite's server (llama-cpp-python in tools/.venv-remote; the first run builds
# llama.cpp, docs/remote-server.md).
./tools/remote-server/setup.sh
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

# Where nvcc is installed the release build must compile the CUDA module (for sm_90 and sm_80,
# spills and local memory as errors, every kernel within cuda/resource-budget.txt), not skip it.
cuda=auto
command -v nvcc >/dev/null 2>&1 && cuda=enabled
setup build-release --buildtype=release -Dwerror=true -Dcuda=$cuda
meson test -C build-release --print-errorlogs --num-processes "$jobs" --suite unit

# 3. where clang is installed (it is optional): the libFuzzer targets compile, and their
#    corpora replay under clang's sanitizers, which check more than GCC's (docs/fuzzing.md).
logs="build-asan/meson-logs/testlog.json build-release/meson-logs/testlog.json"
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
