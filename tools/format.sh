#!/bin/sh
# Formats the project's C, C++ and CUDA sources with clang-format (.clang-format at the root:
# the code's kernel-like style, tabs, 110 columns).
#   tools/format.sh           rewrites every tracked source in place
#   tools/format.sh --check   changes nothing; lists the files that differ and exits 1 (CI)
# Test fixtures (generated) are left out.
set -eu
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null 2>&1 || { echo "format.sh: clang-format is not installed (apt-get install clang-format)" >&2; exit 2; }
files=$(git ls-files '*.c' '*.h' '*.cu' '*.cuh' '*.cc' '*.cpp' | grep -v -e '^tests/fixtures/' || true)
[ -n "$files" ] || { echo "format.sh: no sources found (not a git checkout?)" >&2; exit 2; }
if [ "${1:-}" = --check ]; then
	bad=0
	for f in $files; do
		if ! clang-format --style=file "$f" | cmp -s - "$f"; then
			echo "not formatted: $f (run tools/format.sh)"
			bad=1
		fi
	done
	[ "$bad" = 0 ] && echo "format: $(echo "$files" | wc -l) files formatted as .clang-format says"
	exit "$bad"
fi
echo "$files" | xargs clang-format --style=file -i
