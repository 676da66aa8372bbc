#!/bin/sh
# unit suite: holoctl runs where there is no X at all. It validates key names and text through
# the keys module, so no X library (nor libxdo or libpng, which only holod's x11 module needs)
# may be among its shared libraries.
set -u
holoctl=${HOLOCTL:?HOLOCTL names the holoctl binary}

libs=$(ldd "$holoctl" 2>&1) || { echo "FAIL: ldd $holoctl: $libs"; exit 1; }
case $libs in
*libc.so*) ;;
*) echo "FAIL: ldd listed no libc for $holoctl, so its answer cannot be trusted:"; echo "$libs"; exit 1 ;;
esac
bad=$(printf '%s\n' "$libs" | grep -E 'lib(X11|Xtst|Xrandr|Xi|Xext|xdo|png|xcb)[.-]')
if [ -n "$bad" ]; then
	echo "FAIL: holoctl links display libraries it must not need:"
	printf '%s\n' "$bad"
	exit 1
fi
echo "ok: holoctl links no X library, libxdo or libpng"
