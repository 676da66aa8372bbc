#!/bin/sh
# Adds what a fuzzing run found to a target's committed corpus, kept small: libFuzzer's
# -merge=1 picks the inputs of build-fuzz/corpus-NAME that reach coverage the committed corpus
# does not, the MAX smallest of them (default 20, each at most MAX_BYTES, default 4096) are
# named fz-<sha1 prefix>, and the replay driver sorts them into ok-* and bad-*, so that the
# unit suite replays them with the outcome they have today.
# Usage: tools/fuzz/merge.sh NAME [MAX [MAX_BYTES [BUILD-DIR]]]
set -eu
cd "$(dirname "$0")/../.."

name=${1:?usage: tools/fuzz/merge.sh NAME [MAX [MAX_BYTES [BUILD-DIR]]]}
max=${2:-20}
max_bytes=${3:-4096}
dir=${4:-build-fuzz}
folder=$(grep "^$name " tools/fuzz/targets | cut -d' ' -f2)
if [ -z "$folder" ] || [ ! -d "$dir/corpus-$name" ]; then
	echo "fuzz/merge.sh: no target '$name' or no $dir/corpus-$name (run tools/fuzz/run.sh)" >&2
	exit 2
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/merged" "$work/new"
cp "$folder"/corpus/* "$work/merged/"
ls "$work/merged" | sort >"$work/before"
HOLOD_SOURCE_ROOT=$PWD "$dir/$folder/libfuzzer-$name" -merge=1 -max_len="$max_bytes" \
	"$work/merged" "$dir/corpus-$name" >"$work/merge.log" 2>&1 || {
	tail -5 "$work/merge.log" >&2
	exit 1
}
ls "$work/merged" | sort | comm -13 "$work/before" - >"$work/added"
# The smallest first: each is a regression input a reader can look at.
n=0
for f in $(cd "$work/merged" && xargs -r ls -S -r <"$work/added"); do
	[ "$n" -ge "$max" ] && break
	cp "$work/merged/$f" "$work/new/ok-fz-$(echo "$f" | cut -c1-12)"
	n=$((n + 1))
done
echo "fuzz/merge.sh: $(wc -l <"$work/added") inputs add coverage; keeping $n" >&2
[ "$n" -eq 0 ] && exit 0

# Every ok-* the replay driver rejects is a bad-*.
cp "$folder"/corpus/* "$work/new/" 2>/dev/null || true
HOLOD_SOURCE_ROOT=$PWD "$dir/$folder/fuzz-$name" "$work/new" 2>"$work/replay.log" || true
for f in $(sed -n 's/^\(ok-fz-[0-9a-f]*\): expected success$/\1/p' "$work/replay.log"); do
	mv "$work/new/$f" "$work/new/bad-${f#ok-}"
done
for f in "$work"/new/ok-fz-* "$work"/new/bad-fz-*; do
	[ -e "$f" ] && cp "$f" "$folder/corpus/"
done
HOLOD_SOURCE_ROOT=$PWD "$dir/$folder/fuzz-$name" "$folder/corpus"
