# The shell side of the test harness (test.h), sourced by the shell tests as
# "$(dirname "$0")/../harness/test-lib.sh" (every shell test lives in tests/<area>/).

# test_skip WHY: ends the test as skipped (exit 77), or as failed when $HOLOD_CI is set (.ci/run
# sets it): the CI machine installs every tool the suites need (tools/install-deps.sh), so there
# a missing one is a defect to fix, never a reason to pass without running.
test_skip() {
	if [ -n "${HOLOD_CI:-}" ] && [ "$HOLOD_CI" != 0 ]; then
		echo "FAIL: $1 (HOLOD_CI is set: the CI machine must have it, see tools/install-deps.sh)"
		exit 1
	fi
	echo "skip: $1"
	exit 77
}

# test_time_limit MS: a bound on elapsed wall-clock time, scaled for slow runs: x20 when
# $HOLOD_UNDER_VALGRIND is set (meson test --setup=valgrind sets it; memcheck runs code tens of
# times slower), x4 when $HOLOD_UNDER_SANITIZER is set (tests/meson.build sets it in
# -Db_sanitize builds), as test.h's test_time_limit_us().
test_time_limit() {
	if [ -n "${HOLOD_UNDER_VALGRIND:-}" ] && [ "$HOLOD_UNDER_VALGRIND" != 0 ]; then
		echo $(($1 * 20))
	elif [ -n "${HOLOD_UNDER_SANITIZER:-}" ] && [ "$HOLOD_UNDER_SANITIZER" != 0 ]; then
		echo $(($1 * 4))
	else
		echo "$1"
	fi
}
