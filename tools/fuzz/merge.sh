#!/bin/sh
# Adds what a fuzzing run found to a target's committed corpus, kept small: libFuzzer's
# -merge=1 picks the inputs of build-fuzz/corpus-NAME (at most MAX_BYTES, default 4096) that
# reach coverage the committed corpus does not; they are named fz-<sha1 prefix>, sorted into
# ok-* and bad-* by the replay driver (the unit suite then replays them with the outcome they
# have today), and the smallest MAX (default 20, at most half of them ok-*) are kept.
# Usage: tools/fuzz/merge.sh NAME [MAX [MAX_BYTES [BUILD-DIR]]]
# The corpus names are ok-/bad- names and libFuzzer's SHA-1s, which ls lists safely.
# shellcheck disable=SC2012
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
mkdir "$work/merged"
cp "$folder"/corpus/* "$work/merged/"
ls "$work/merged" | sort >"$work/before"
HOLOD_SOURCE_ROOT=$PWD "$dir/$folder/libfuzzer-$name" -merge=1 \
	"$work/merged" "$dir/corpus-$name" >"$work/merge.log" 2>&1 || {
	tail -5 "$work/merge.log" >&2
	exit 1
}
(cd "$work/merged" && find . -type f -size -"$((max_bytes + 1))"c | sed 's|^\./||') | sort |
	comm -13 "$work/before" - >"$work/added"
echo "fuzz/merge.sh: $(wc -l <"$work/added") inputs add coverage" >&2
[ -s "$work/added" ] || exit 0

# Sort them into ok-* and bad-*: every ok-* the replay driver rejects, replayed after the
# committed corpus, is a bad-*. Replayed again alone (another history: the http target's
# server has other tasks then), an input that changes its outcome is dropped.
mkdir "$work/all" "$work/alone"
cp "$folder"/corpus/* "$work/all/"
while read -r f; do
	cp "$work/merged/$f" "$work/all/ok-new-$(echo "$f" | cut -c1-12)"
done <"$work/added"
replay() {
	HOLOD_SOURCE_ROOT=$PWD "$dir/$folder/fuzz-$name" "$1" 2>&1 |
		sed -n 's/^\(\(ok\|bad\)-new-[0-9a-f]*\): expected .*/\1/p' || true
}
for f in $(replay "$work/all"); do
	mv "$work/all/$f" "$work/all/bad-${f#ok-}"
done
cp "$work"/all/*-new-* "$work/alone/"
for f in $(replay "$work/alone"); do
	echo "fuzz/merge.sh: $f: its outcome depends on what ran before; dropped" >&2
	rm "$work/alone/$f"
done

# Keep the smallest: at most half accepted inputs, the rest rejected ones.
n_ok=$(cd "$work/alone" && ls -Sr ok-new-* 2>/dev/null | head -n $((max / 2)) | tee "$work/keep" | wc -l)
(cd "$work/alone" && ls -Sr bad-new-* 2>/dev/null | head -n $((max - n_ok)) >>"$work/keep")
while read -r f; do
	cp "$work/alone/$f" "$folder/corpus/$(echo "$f" | sed 's/-new-/-fz-/')"
done <"$work/keep"
echo "fuzz/merge.sh: kept $(wc -l <"$work/keep") ($n_ok accepted) in $folder/corpus" >&2
HOLOD_SOURCE_ROOT=$PWD "$dir/$folder/fuzz-$name" "$folder/corpus"
