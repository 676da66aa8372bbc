#!/bin/sh
# Installs the OpenAI-compatible server the `remote` test suite runs against: llama.cpp's server
# through llama-cpp-python (python -m llama_cpp.server) and the gguf package (which writes the
# suite's tiny model), pinned in requirements.txt, into the venv tools/.venv-remote.
#
#   tools/remote-server/setup.sh
#
# Idempotent: does nothing when the venv already imports the pinned versions. llama-cpp-python
# has no binary wheel on PyPI, so pip builds llama.cpp from its source the first time (about 8
# minutes of CPU time, 14 minutes on a loaded 2-core machine); pip's wheel cache (~/.cache/pip) keeps the
# built wheel, so a new venv later installs in seconds. GGML_NATIVE=OFF builds llama.cpp's
# portable x86-64 set (AVX2, FMA, F16C) instead of the building CPU's: a cached wheel then runs on
# any CI machine of that class. $HOLOD_REMOTE_VENV names another venv (the tests read it too).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${HOLOD_REMOTE_VENV:-$root/tools/.venv-remote}
req=$root/tools/remote-server/requirements.txt
stamp=$venv/.holod-requirements

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp" &&
	"$venv/bin/python" -c 'import llama_cpp.server, gguf' 2>/dev/null; then
	exit 0
fi

python=${PYTHON:-python3}
if ! "$python" -m venv --help >/dev/null 2>&1; then
	echo "remote-server/setup: $python cannot create a venv (Debian: apt-get install python3-venv)" >&2
	exit 1
fi
rm -rf "$venv"
"$python" -m venv "$venv"
echo "remote-server/setup: installing llama-cpp-python and gguf into $venv (the first time builds llama.cpp: minutes)" >&2
start=$(date +%s)
CMAKE_ARGS="${CMAKE_ARGS:-} -DGGML_NATIVE=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
	"$venv/bin/pip" install -q --disable-pip-version-check -r "$req"
cp "$req" "$stamp"
echo "remote-server/setup: done in $(( $(date +%s) - start )) s" >&2
