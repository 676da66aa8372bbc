#!/bin/sh
# Installs what is missing, builds holod and holoctl (release) and starts the daemon in the
# foreground.
# Arguments go to holod, e.g. `tools/run.sh --virtual 1920x1080` on a machine without a display.
set -eu
cd "$(dirname "$0")/.."

./tools/install-deps.sh
[ -d /usr/local/cuda/bin ] && PATH="/usr/local/cuda/bin:$PATH" && export PATH

if [ -f build/build.ninja ]; then
	meson setup --reconfigure build --buildtype=release >/dev/null
else
	meson setup build --buildtype=release >/dev/null
fi
# The two programs only (README: `ninja -C build` builds the rest, tools and tests, for `meson
# install`): the daemon starts sooner, and build/cli/holoctl is there to talk to it.
ninja -C build daemon/holod cli/holoctl
exec build/daemon/holod "$@"
