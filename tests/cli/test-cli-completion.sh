#!/bin/sh
# The bash completion knows every command `holoctl --help` lists, and completes the values of the
# options that take a fixed set of words. env: HOLOCTL, HOLOD_SOURCE_ROOT.
set -u
. "$(dirname "$0")/../harness/test-lib.sh"
command -v bash >/dev/null 2>&1 || test_skip "bash is not installed"
completion="$HOLOD_SOURCE_ROOT/packaging/holoctl.bash-completion"
bash -n "$completion" || exit 1

# complete WORDS...: what the completion offers for the last word (may be empty).
complete_words() {
	bash -c '
		. "$0"
		COMP_WORDS=("$@")
		COMP_CWORD=$(($# - 1))
		COMP_LINE="$*"
		_holoctl
		printf "%s\n" "${COMPREPLY[@]}"
	' "$completion" "$@"
}

fail() {
	echo "FAIL: $*" >&2
	exit 1
}

commands=$("$HOLOCTL" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z]*\) .*/\1/p')
[ -n "$commands" ] || fail "no commands in holoctl --help"
offered=$(complete_words "$HOLOCTL" "")
for c in $commands; do
	echo "$offered" | grep -qx "$c" || fail "the completion does not offer the command '$c'"
done
complete_words "$HOLOCTL" do "" | grep -qx double_click || fail "do: no actions"
complete_words "$HOLOCTL" do scroll 10 20 "" | grep -qx down || fail "do scroll: no directions"
complete_words "$HOLOCTL" do "" | grep -qx wait_for || fail "do: no wait_for"
complete_words "$HOLOCTL" do wait_for "" | grep -qx screen_stable || fail "do wait_for: no conditions"
complete_words "$HOLOCTL" do --tar | grep -qx -- --target || fail "do: no --target"
complete_words "$HOLOCTL" list --status "" | grep -qx interrupted || fail "list --status: no statuses"
complete_words "$HOLOCTL" --json run --coords m | grep -qx model || fail "run --coords: no model"
complete_words "$HOLOCTL" run --f | grep -qx -- --follow || fail "run: no --follow"
complete_words "$HOLOCTL" export --format c | grep -qx chat || fail "export --format: no chat"
complete_words "$HOLOCTL" view --o | grep -qx -- --open || fail "view: no --open"
complete_words "$HOLOCTL" prune --dr | grep -qx -- --dry-run || fail "prune: no --dry-run"
complete_words "$HOLOCTL" list --wi | grep -qx -- --wide || fail "list: no --wide"
complete_words "$HOLOCTL" do --require | grep -qx -- --require-focus || fail "do: no --require-focus"
complete_words "$HOLOCTL" replay --ch | grep -qx -- --check || fail "replay: no --check"
echo "ok"
