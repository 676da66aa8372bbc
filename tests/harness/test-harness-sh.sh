#!/bin/sh
# unit suite: the shell harness's rules (test-lib.sh), as test.h's: a missing tool skips the
# test (77) on a developer's machine and fails it (1) where HOLOD_CI is set; time limits are
# scaled under valgrind.
set -u
lib=$1
failures=0

expect() { # NAME WANT GOT
	if [ "$2" = "$3" ]; then
		echo "ok: $1"
	else
		echo "FAIL: $1: got $3, want $2"
		failures=$((failures + 1))
	fi
}

(unset HOLOD_CI; . "$lib"; test_skip "a tool is missing") >/dev/null
expect "without HOLOD_CI a missing tool skips" 77 $?
(HOLOD_CI=1; . "$lib"; test_skip "a tool is missing") >/dev/null
expect "with HOLOD_CI=1 a missing tool fails" 1 $?
(HOLOD_CI=0; . "$lib"; test_skip "a tool is missing") >/dev/null
expect "HOLOD_CI=0 skips" 77 $?
expect "a time limit as given" 2000 \
	"$(unset HOLOD_UNDER_VALGRIND HOLOD_UNDER_SANITIZER; . "$lib"; test_time_limit 2000)"
expect "a time limit under valgrind" 40000 \
	"$(unset HOLOD_UNDER_SANITIZER; HOLOD_UNDER_VALGRIND=1; . "$lib"; test_time_limit 2000)"
expect "a time limit in a sanitized build" 8000 \
	"$(unset HOLOD_UNDER_VALGRIND; HOLOD_UNDER_SANITIZER=1; . "$lib"; test_time_limit 2000)"
expect "HOLOD_UNDER_SANITIZER=0 as given" 2000 \
	"$(unset HOLOD_UNDER_VALGRIND; HOLOD_UNDER_SANITIZER=0; . "$lib"; test_time_limit 2000)"
[ "$failures" -eq 0 ]
