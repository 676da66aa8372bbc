#!/bin/sh
# Builds the libFuzzer targets (tools/fuzz/targets) with clang in their own build directory
# (default build-fuzz): AddressSanitizer + UndefinedBehaviorSanitizer, coverage on every module.
# Then replays each target's committed corpus with the replay drivers built there: clang's UBSan
# checks more than GCC's (NULL + 0, for one), so this catches what the normal unit suite cannot.
# Not part of the normal build, which never needs clang. See docs/fuzzing.md.
# Usage: tools/fuzz/build.sh [BUILD-DIR]; $CC overrides the compiler (default clang-14, clang).
set -eu
cd "$(dirname "$0")/../.."

dir=${1:-build-fuzz}
if [ -z "${CC:-}" ]; then
	for c in clang-14 clang; do
		if command -v "$c" >/dev/null 2>&1; then
			CC=$c
			break
		fi
	done
fi
if [ -z "${CC:-}" ]; then
	echo "fuzz/build.sh: no clang found (Debian: apt-get install clang)" >&2
	exit 1
fi
export CC

opts="-Dfuzzing=true -Db_sanitize=address,undefined -Db_lundef=false -Dcuda=disabled"
opts="$opts -Dx11-tests=disabled -Dman-pages=disabled"
if [ -f "$dir/build.ninja" ]; then
	# shellcheck disable=SC2086
	meson setup --reconfigure "$dir" $opts >/dev/null
else
	# shellcheck disable=SC2086
	meson setup "$dir" $opts >/dev/null
fi

# Only the targets, their replay drivers and what they link.
ninja_targets=""
while read -r name folder _; do
	case $name in '#'* | '') continue ;; esac
	ninja_targets="$ninja_targets $folder/libfuzzer-$name $folder/fuzz-$name"
done <tools/fuzz/targets
# shellcheck disable=SC2086
ninja -C "$dir" -j "$(nproc 2>/dev/null || echo 2)" $ninja_targets
meson test -C "$dir" --no-rebuild --print-errorlogs --suite fuzz
