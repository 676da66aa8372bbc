#!/bin/sh
# Checks that every reference to a design text or document in the source tree resolves.
#
# Usage: check-doc-refs.sh SOURCE_ROOT
#
# A reference is a name ending in `.md` (two characters at least before it, so a C member access
# such as `e.md` is not one), optionally with a path, in a source, script, build or Markdown file
# under SOURCE_ROOT (build and hidden folders skipped, and docs/design/, whose texts cite other
# projects' files). It resolves when the file exists relative to SOURCE_ROOT, to the referring
# file's folder, to docs/ or to docs/design/. When a section number follows it (`model.md 5.2`,
# `model.md section 2`, `model.md 4.2-4.7`), the file must have a heading with that number
# (`### 5.2 ...`), the end of a range included, or, for N.M, item `M.` of the numbered list
# under the heading of section N (`model.md 6.1`: the first numerics pitfall).
#
# Fails (exit 1) with one line per unresolved reference, FILE:LINE: what is missing.
set -eu

root=${1:?usage: check-doc-refs.sh SOURCE_ROOT}
cd "$root"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

# FILE:LINE:MATCH for every reference, the section number with it when there is one.
find . \( -path '*/.*' -o -name 'build*' -o -name subprojects -o -path ./docs/design \) -prune -o -type f \
	\( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' -o -name '*.cc' \
	   -o -name '*.py' -o -name '*.sh' -o -name 'meson.build' -o -name '*.md' -o -name '*.scd' \) \
	-print | sed 's|^\./||' | sort >"$tmp/files"
[ -s "$tmp/files" ] || { echo "check-doc-refs: no source files under $root" >&2; exit 2; }
tr '\n' '\0' <"$tmp/files" |
	xargs -0 grep -HnoP '(?<![\w./-])[\w./-]*[A-Za-z0-9_-]{2,}\.md\b(\s+(section\s+)?[0-9]+(\.[0-9]+)*(-[0-9]+(\.[0-9]+)*)?\b)?' \
	>"$tmp/refs" || true

# has_section FILE N[.M...]: a heading numbered so, or item M. of section N's numbered list.
has_section() {
	awk -v want="$2" '
		function heading_number(line) {
			sub(/^#+[ \t]+/, "", line)
			match(line, /^[0-9]+(\.[0-9]+)*/)
			return substr(line, 1, RLENGTH)
		}
		BEGIN { n = split(want, part, "."); parent = part[1]; item = part[n] }
		/^#+[ \t]+[0-9]/ {
			num = heading_number($0)
			if (num == want) { found = 1; exit }
			in_parent = (n == 2 && num == parent)
			next
		}
		/^#/ { in_parent = 0; next }
		in_parent && index($0, item ". ") == 1 { found = 1; exit }
		END { exit !found }
	' "$1"
}

failures=0
while IFS= read -r line; do
	file=${line%%:*}
	rest=${line#*:}
	lineno=${rest%%:*}
	ref=${rest#*:}
	name=${ref%%.md*}.md
	dir=$(dirname "$file")
	target=
	for cand in "$name" "$dir/$name" "docs/$name" "docs/design/$name"; do
		if [ -f "$cand" ]; then
			target=$cand
			break
		fi
	done
	if [ -z "$target" ]; then
		echo "$file:$lineno: $name does not exist (looked beside the file, in docs/ and docs/design/)"
		failures=$((failures + 1))
		continue
	fi
	sections=$(printf '%s\n' "${ref#*.md}" | sed -E 's/^[[:space:]]+(section[[:space:]]+)?//; s/-/ /')
	for s in $sections; do
		if ! has_section "$target" "$s"; then
			echo "$file:$lineno: $name has no section $s"
			failures=$((failures + 1))
		fi
	done
done <"$tmp/refs"

if [ "$failures" -ne 0 ]; then
	echo "check-doc-refs: $failures unresolved reference(s)" >&2
	exit 1
fi
echo "check-doc-refs: $(wc -l <"$tmp/refs") references resolve"
