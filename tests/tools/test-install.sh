#!/bin/sh
# `meson install --destdir` puts in place what the README's install step promises (issue 33):
# holod and holoctl, their man pages (when scdoc built them), holoctl's bash completion, the
# systemd user unit, whose ExecStart and Documentation name installed files, and the README.
# Usage: test-install.sh MESON BUILD_ROOT PREFIX BINDIR MANDIR DATADIR MAN_PAGES(true|false)
set -u
. "$(dirname "$0")/../harness/test-lib.sh"
meson=$1 build=$2 prefix=$3 bindir=$4 mandir=$5 datadir=$6 man=$7
T=$(mktemp -d "${TMPDIR:-/tmp}/holod-install.XXXXXX")
trap 'rm -rf "$T"' EXIT
FAILED=0
fail() {
	echo "FAIL: $*" >&2
	FAILED=$((FAILED + 1))
}
# (meson's options may be absolute paths inside the prefix or relative to it)
under() {
	case $1 in
	/*) echo "$T/root$1" ;;
	*) echo "$T/root$prefix/$1" ;;
	esac
}

"$meson" install -C "$build" --no-rebuild --quiet --destdir "$T/root" >"$T/install.log" 2>&1 ||
	{ cat "$T/install.log" >&2; fail "meson install failed"; exit 1; }

bin=$(under "$bindir")
for p in holod holoctl; do
	[ -x "$bin/$p" ] || fail "$bindir/$p is not installed (or not executable)"
done
"$bin/holoctl" --help >/dev/null 2>&1 || fail "the installed holoctl does not run"
"$bin/holod" --version | grep -q '^holod ' || fail "the installed holod does not run"
if [ "$man" = true ]; then
	for p in holod holoctl; do
		page=$(under "$mandir")/man1/$p.1
		grep -q '^\.TH' "$page" 2>/dev/null || fail "$mandir/man1/$p.1 is not an installed man page"
	done
fi
completion=$(under "$datadir")/bash-completion/completions/holoctl
grep -q 'complete ' "$completion" 2>/dev/null ||
	fail "no bash completion at $datadir/bash-completion/completions/holoctl"
unit=$T/root$prefix/lib/systemd/user/holod.service
if [ -f "$unit" ]; then
	grep -q '@[A-Z]*@' "$unit" && fail "holod.service keeps a placeholder: $(grep '@' "$unit")"
	exec_start=$(sed -n 's/^ExecStart=\([^ ]*\).*/\1/p' "$unit")
	[ -x "$T/root$exec_start" ] || fail "holod.service's ExecStart $exec_start is not installed"
	doc=$(sed -n 's|^Documentation=file://||p' "$unit")
	[ -n "$doc" ] && [ -f "$T/root$doc" ] ||
		fail "holod.service's Documentation ($doc) is not installed"
else
	fail "no systemd user unit at $prefix/lib/systemd/user/holod.service"
fi
[ "$FAILED" = 0 ] || exit 1
exit 0
