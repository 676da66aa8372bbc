#!/bin/sh
# unit suite: the files of the x11 module call one another one way (no cycle), read from the
# module's static library with nm: an edge A -> B for each symbol A's object uses and B's object
# defines, and tsort, which reports any loop. A cycle, such as the key names calling typing
# calling input calling the key names, means a file that cannot be understood on its own.
set -u
export LC_ALL=C # sort and join must agree on the order
lib=${1:?usage: test-x11-layering.sh LIBHOLO_X11_A}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

nm -A --defined-only "$lib" >"$tmp/defined" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
nm -A -u "$lib" >"$tmp/undefined" 2>"$tmp/err" || { cat "$tmp/err"; exit 1; }
# "lib.a:[dir/]file.c.o:0000000000000000 T symbol" -> "symbol file.c.o" (meson makes thin archives)
awk '$2 ~ /^[TDBR]$/ { split($1, p, ":"); sub(/.*\//, "", p[2]); print $3, p[2] }' "$tmp/defined" | sort >"$tmp/defs"
# "lib.a:[dir/]file.c.o:                 U symbol" -> "symbol file.c.o"
awk '$2 == "U" { split($1, p, ":"); sub(/.*\//, "", p[2]); print $3, p[2] }' "$tmp/undefined" | sort >"$tmp/uses"
join "$tmp/uses" "$tmp/defs" | awk '$2 != $3 { print $2, $3 }' | sort -u >"$tmp/edges"

if ! grep -q '^display\.c\.o input\.c\.o$' "$tmp/edges"; then
	echo "FAIL: no edge display -> input found; the nm output was not read as expected:"
	cat "$tmp/edges"
	exit 1
fi
if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/loops" || [ -s "$tmp/loops" ]; then
	echo "FAIL: the x11 files call one another in a cycle:"
	cat "$tmp/loops"
	exit 1
fi
echo "ok: $(wc -l <"$tmp/edges") calls between x11 files, no cycle"
