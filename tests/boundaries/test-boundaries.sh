#!/bin/sh
# Checks that no library module's internal header is reachable through a module's public
# dependency object (tests/boundaries/meson.build).
#
# Usage: test-boundaries.sh NINJA BUILD_ROOT SOURCE_ROOT MODULE:PUBLIC_HEADER:PROBE_TARGET...
#
# For each probe (a static library compiled with one module's public dependency only), the probe's
# compile command is read back from ninja, and every header of every library module that is not
# under the module's include/ folder is preprocessed with it (`cc -E -H`, which names each header
# it opens). A header the preprocessor opens is a boundary violation. As a check on the check, the
# probe's own public header must be opened through the same command.
#
# Exit 0 when every boundary holds; 1 with one line per violation.
set -eu

ninja=$1
build=$2
src=$3
shift 3

modules="common keys x11 ipc cuda engine policy"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# Every internal header of every library module (generated ones live in the build tree, which no
# module's public include folder points at).
: >"$tmp/internal"
for m in $modules; do
	[ -d "$src/$m" ] || continue
	find "$src/$m" -path "$src/$m/include" -prune -o -type f \( -name '*.h' -o -name '*.cuh' \) \
		-print >>"$tmp/internal"
done
[ -s "$tmp/internal" ] || { echo "test-boundaries: no internal headers under $src" >&2; exit 2; }

# opens CMD HEADER: the real paths of the headers that `#include "HEADER"` opens at the top level.
opens() {
	printf '#include "%s"\n' "$2" >"$tmp/probe.c"
	(cd "$build" && eval "$1") 2>&1 >/dev/null | sed -n 's/^\. //p' |
		while IFS= read -r p; do
			(cd "$build" && realpath -e -- "$p") 2>/dev/null || true
		done
}

failures=0
for spec in "$@"; do
	module=${spec%%:*}
	rest=${spec#*:}
	public=${rest%%:*}
	target=${rest#*:}

	# meson writes `... -MD -MQ OBJ -MF DEP -o OBJ -c SRC`; keep the flags, preprocess instead.
	cmd=$("$ninja" -C "$build" -t commands "$target" | grep -e ' -c [^ ]*probe-' | tail -n 1)
	[ -n "$cmd" ] || { echo "$module: no compile command for $target" >&2; exit 2; }
	cmd=$(printf '%s\n' "$cmd" | sed -e 's/ -MD / /; s/ -MQ [^ ]*/ /; s/ -MF [^ ]*/ /' \
		-e 's/ -o [^ ]* -c [^ ]*$//')
	cmd="$cmd -E -H -o /dev/null $tmp/probe.c"

	want=$(realpath -e -- "$src/$module/include/$public")
	if ! opens "$cmd" "$public" | grep -qxF -- "$want"; then
		echo "$module: its public header $public is not found through ${module}'s dependency" \
			"(or the compile command of $target could not be replayed)"
		failures=$((failures + 1))
		continue
	fi
	while IFS= read -r h; do
		real=$(realpath -e -- "$h")
		if opens "$cmd" "${h##*/}" | grep -qxF -- "$real"; then
			echo "$module: the internal header ${h#"$src"/} is reachable through ${module}'s public dependency"
			failures=$((failures + 1))
		fi
	done <"$tmp/internal"
done

[ "$failures" -eq 0 ] || exit 1
echo "test-boundaries: $# public dependencies, $(wc -l <"$tmp/internal") internal headers, no leak"
