#!/bin/sh
# unit suite: tools/check-doc-refs.sh, on a small tree made here (each case states what a reader
# of the comments would hit), then on the real source tree, where every reference must resolve.
set -u
checker=$1
source_root=$2
# The fixture's names are spelled with $ext so that this file holds no reference itself.
ext=md
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
failures=0

mkdir -p "$tmp/tree/docs/design" "$tmp/tree/src"
cat >"$tmp/tree/docs/design/spec.$ext" <<'MD'
# A spec
## 1. Config
### 1.2 Fields
## 6. Pitfalls

1. **clamp**: do not.
2. eps values.
## 7. After
MD
echo "See spec.$ext." >"$tmp/tree/docs/guide.$ext"

# expect NAME WANT_RC GREP_PATTERN SOURCE_TEXT
expect() {
	name=$1 want=$2 pattern=$3
	printf '%s\n' "$4" >"$tmp/tree/src/a.c"
	sh "$checker" "$tmp/tree" >"$tmp/log" 2>&1
	rc=$?
	if [ "$rc" -ne "$want" ] || ! grep -q -- "$pattern" "$tmp/log"; then
		echo "FAIL: $name (rc $rc, want $want, pattern '$pattern')"
		sed 's/^/    /' "$tmp/log"
		failures=$((failures + 1))
	else
		echo "ok: $name"
	fi
}

expect "a bare name resolves in docs/design/, with its section" 0 "references resolve" \
	"/* spec.$ext 1.2 and guide.$ext and docs/guide.$ext */"
expect "a numbered list item of a section resolves (spec.$ext 6.2)" 0 "references resolve" \
	"/* spec.$ext 6.2 */"
expect "a range resolves when both ends exist" 0 "references resolve" \
	"/* spec.$ext section 1-1.2 */"
expect "a C member access is not a reference" 0 "references resolve" \
	"free(e.md);"
expect "a missing file is named with its line" 1 "src/a.c:2: gone.$ext does not exist" \
	"/* ok */
/* see gone.$ext */"
expect "a missing section is named" 1 "src/a.c:1: spec.$ext has no section 1.3" \
	"/* spec.$ext 1.3 */"
expect "a list item past the end of its section is missing" 1 "spec.$ext has no section 6.3" \
	"/* spec.$ext 6.3 */"
expect "the end of a range must exist too" 1 "spec.$ext has no section 7.1" \
	"/* spec.$ext 6-7.1 */"
expect "an item number is not looked up under another section" 1 "spec.$ext has no section 7.1" \
	"/* spec.$ext 7.1 */"

# The real tree: every comment reference resolves for anyone who clones it.
if sh "$checker" "$source_root" >"$tmp/log" 2>&1; then
	echo "ok: $(cat "$tmp/log")"
else
	echo "FAIL: references in the source tree do not resolve:"
	sed 's/^/    /' "$tmp/log"
	failures=$((failures + 1))
fi

[ "$failures" -eq 0 ]
