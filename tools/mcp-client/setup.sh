#!/bin/sh
# Installs the official Model Context Protocol Python SDK (`mcp` on PyPI, pinned in
# requirements.txt) into the venv tools/.venv-mcp, for the agent-mcp test: a real MCP client
# driving `holoctl mcp` (tests/agent/mcp-client.py).
#
#   tools/mcp-client/setup.sh
#
# Idempotent: does nothing when the venv already imports the pinned version. Wheels only (the
# SDK and its dependencies are pure Python or ship binary wheels): seconds with a warm pip cache.
# $HOLOD_MCP_VENV names another venv (the test reads it too).
set -eu

root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${HOLOD_MCP_VENV:-$root/tools/.venv-mcp}
req=$root/tools/mcp-client/requirements.txt
stamp=$venv/.holod-requirements

if [ -x "$venv/bin/python" ] && [ -f "$stamp" ] && cmp -s "$req" "$stamp" &&
	"$venv/bin/python" -c 'import mcp.client.stdio' 2>/dev/null; then
	exit 0
fi

python=${PYTHON:-python3}
if ! "$python" -m venv --help >/dev/null 2>&1; then
	echo "mcp-client/setup: $python cannot create a venv (Debian: apt-get install python3-venv)" >&2
	exit 1
fi
rm -rf "$venv"
"$python" -m venv "$venv"
echo "mcp-client/setup: installing the MCP Python SDK into $venv" >&2
"$venv/bin/pip" install -q --disable-pip-version-check --only-binary=:all: -r "$req"
cp "$req" "$stamp"
