#!/bin/sh
# tools/run.sh (README's first command) on a copy of the tree with stand-ins for dpkg-query,
# meson and ninja: it builds the two programs, holod and holoctl, before starting holod with its
# own arguments (issue 33). Usage: test-run-sh.sh SOURCE_ROOT
set -u
root=$1
T=$(mktemp -d "${TMPDIR:-/tmp}/holod-run-sh.XXXXXX")
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/tree/tools" "$T/tree/build/daemon" "$T/bin"
cp "$root/tools/run.sh" "$root/tools/install-deps.sh" "$T/tree/tools/"
# every package installed; meson and ninja record their arguments; "holod" records its own
printf '#!/bin/sh\nprintf "install ok installed"\n' >"$T/bin/dpkg-query"
printf '#!/bin/sh\necho "meson $*" >>"%s/calls"\n' "$T" >"$T/bin/meson"
printf '#!/bin/sh\necho "ninja $*" >>"%s/calls"\n' "$T" >"$T/bin/ninja"
printf '#!/bin/sh\necho "holod $*" >>"%s/calls"\n' "$T" >"$T/tree/build/daemon/holod"
chmod +x "$T/bin/"* "$T/tree/build/daemon/holod"
PATH="$T/bin:$PATH" sh "$T/tree/tools/run.sh" --virtual 640x480 >"$T/out" 2>&1 ||
	{ echo "FAIL: tools/run.sh failed: $(cat "$T/out")"; exit 1; }
grep -qx 'ninja -C build daemon/holod cli/holoctl' "$T/calls" ||
	{ echo "FAIL: run.sh does not build holod and holoctl alone: $(cat "$T/calls")"; exit 1; }
[ "$(tail -n 1 "$T/calls")" = "holod --virtual 640x480" ] ||
	{ echo "FAIL: run.sh did not start holod with its arguments last: $(cat "$T/calls")"; exit 1; }
echo "ok: $(tr '\n' ';' <"$T/calls")"
