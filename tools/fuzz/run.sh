#!/bin/sh
# Runs one libFuzzer target built by tools/fuzz/build.sh for SECONDS (default 600), niced, one
# job, on a scratch copy of its committed corpus (build-fuzz/corpus-NAME, kept between runs).
# Crashes land in build-fuzz/artifacts-NAME/; the log in build-fuzz/fuzz-NAME.log.
# Usage: tools/fuzz/run.sh NAME [SECONDS [BUILD-DIR]]    (NAME from tools/fuzz/targets)
set -eu
cd "$(dirname "$0")/../.."

name=${1:?usage: tools/fuzz/run.sh NAME [SECONDS [BUILD-DIR]]}
seconds=${2:-600}
dir=${3:-build-fuzz}
line=$(grep "^$name " tools/fuzz/targets || true)
if [ -z "$line" ]; then
	echo "fuzz/run.sh: no target '$name' in tools/fuzz/targets" >&2
	exit 2
fi
folder=$(echo "$line" | cut -d' ' -f2)
max_len=$(echo "$line" | cut -d' ' -f3)
bin=$dir/$folder/libfuzzer-$name
if [ ! -x "$bin" ]; then
	echo "fuzz/run.sh: $bin is missing: run tools/fuzz/build.sh first" >&2
	exit 2
fi

mkdir -p "$dir/corpus-$name" "$dir/artifacts-$name"
cp -n "$folder"/corpus/* "$dir/corpus-$name/"
HOLOD_SOURCE_ROOT=$PWD exec nice -n 19 "$bin" -max_total_time="$seconds" -max_len="$max_len" \
	-timeout=10 -print_final_stats=1 -artifact_prefix="$dir/artifacts-$name/" \
	"$dir/corpus-$name" >"$dir/fuzz-$name.log" 2>&1
