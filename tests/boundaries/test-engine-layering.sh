#!/bin/sh
# unit suite: the engine's folders call one another one way, in their declared order. Each
# folder is a static library (engine/meson.build); the arguments name them lowest first:
#   test-engine-layering.sh FOLDER LIB [FOLDER LIB ...]
# An edge A -> B is a symbol A's objects use and B's objects define (nm), A and B different
# folders. The test fails on an edge that goes up the order (a folder calling one declared above
# it) and on any cycle (tsort), so a folder can be read, tested and changed knowing only the
# folders below it. (Each folder is also compiled with only its own and the lower folders'
# headers, so an upward #include does not build; this catches calls through declarations
# written by hand.)
set -u
export LC_ALL=C # sort and join must agree on the order
[ $# -ge 4 ] && [ $(($# % 2)) -eq 0 ] || {
	echo "usage: test-engine-layering.sh FOLDER LIB [FOLDER LIB ...] (lowest first)"
	exit 1
}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

: >"$tmp/defs"
: >"$tmp/uses"
: >"$tmp/rank"
rank=0
while [ $# -gt 0 ]; do
	folder=$1 lib=$2
	shift 2
	rank=$((rank + 1))
	echo "$folder $rank" >>"$tmp/rank"
	nm -A --defined-only "$lib" >"$tmp/defined" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
	nm -A -u "$lib" >"$tmp/undefined" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
	# "lib.a:dir/file.c.o:0000000000000000 T symbol" -> "symbol folder"
	awk -v f="$folder" '$2 ~ /^[TDBR]$/ { print $3, f }' "$tmp/defined" >>"$tmp/defs"
	# "lib.a:dir/file.c.o:                 U symbol" -> "symbol folder"
	awk -v f="$folder" '$2 == "U" { print $3, f }' "$tmp/undefined" >>"$tmp/uses"
done
sort -u -o "$tmp/defs" "$tmp/defs"
sort -u -o "$tmp/uses" "$tmp/uses"
if [ "$(cut -d' ' -f1 "$tmp/defs" | uniq -d | head -n 1)" != "" ]; then
	echo "FAIL: a symbol is defined by two engine folders:"
	cut -d' ' -f1 "$tmp/defs" | uniq -d | head
	exit 1
fi
# "user definer symbol", one line per symbol that crosses folders
join "$tmp/uses" "$tmp/defs" | awk '$2 != $3 { print $2, $3, $1 }' | sort >"$tmp/calls"
awk '{ print $1, $2 }' "$tmp/calls" | sort -u >"$tmp/edges"

if ! grep -q '^backend/cpu backend$' "$tmp/edges"; then
	echo "FAIL: no edge backend/cpu -> backend (backend_init) found; the nm output was not read as expected:"
	cat "$tmp/edges"
	exit 1
fi
fail=0
# an edge up the declared order, with the symbols that make it
while read -r from to; do
	rf=$(awk -v f="$from" '$1 == f { print $2 }' "$tmp/rank")
	rt=$(awk -v f="$to" '$1 == f { print $2 }' "$tmp/rank")
	if [ "$rf" -lt "$rt" ]; then
		echo "FAIL: engine/$from calls engine/$to, which is declared above it:" \
			"$(awk -v f="$from" -v t="$to" '$1 == f && $2 == t { printf "%s ", $3 }' "$tmp/calls")"
		fail=1
	fi
done <"$tmp/edges"
# vision/ is device-neutral: it reaches a backend through the seam's ops table only (select/
# hands it the CPU's table for an encode without a backend)
if grep -Eq '^vision backend/(cpu|cuda)$' "$tmp/edges"; then
	echo "FAIL: engine/vision calls a backend directly, not through the seam:" \
		"$(awk '$1 == "vision" && $2 ~ /^backend\// { printf "%s ", $3 }' "$tmp/calls")"
	fail=1
fi
if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/loops" || [ -s "$tmp/loops" ]; then
	echo "FAIL: the engine's folders call one another in a cycle:"
	cat "$tmp/loops"
	fail=1
fi
[ "$fail" -eq 0 ] || exit 1
echo "ok: $(wc -l <"$tmp/edges") edges between $(wc -l <"$tmp/rank") engine folders, all down the order:"
cat "$tmp/edges"
