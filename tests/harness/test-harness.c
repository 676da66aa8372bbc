/* unit suite: the harness's own rules (test.h), which decide whether a missing tool skips or
 * fails a test and how much slower a valgrind run may be. */
#include "test.h"

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

/* The exit status of a child that calls test_skip_missing() with $HOLOD_CI set to ci (NULL:
 * unset). */
static int skip_status(const char *ci)
{
	pid_t pid = fork();
	int status = 0;

	REQUIRE(pid >= 0);
	if (pid == 0) {
		if (ci)
			setenv("HOLOD_CI", ci, 1);
		else
			unsetenv("HOLOD_CI");
		test_skip_missing("the test tool is not installed (expected by test-harness)");
		_exit(2); /* not reached: test_skip_missing exits */
	}
	REQUIRE(waitpid(pid, &status, 0) == pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

int main(void)
{
	/* A developer's machine skips; the CI machine (.ci/run sets HOLOD_CI=1) fails. */
	CHECK_INT_EQ(skip_status(NULL), TEST_SKIP);
	CHECK_INT_EQ(skip_status("0"), TEST_SKIP);
	CHECK_INT_EQ(skip_status(""), TEST_SKIP);
	CHECK_INT_EQ(skip_status("1"), 1);

	unsetenv("HOLOD_UNDER_VALGRIND");
	unsetenv("HOLOD_UNDER_SANITIZER");
	CHECK_INT_EQ(test_time_limit_us(500000), 500000);
	setenv("HOLOD_UNDER_SANITIZER", "0", 1);
	CHECK_INT_EQ(test_time_limit_us(500000), 500000);
	setenv("HOLOD_UNDER_SANITIZER", "1", 1);
	CHECK_INT_EQ(test_time_limit_us(500000), 500000ull * TEST_SANITIZER_SLOWDOWN);
	setenv("HOLOD_UNDER_VALGRIND", "1", 1);
	CHECK_INT_EQ(test_time_limit_us(500000), 500000ull * TEST_VALGRIND_SLOWDOWN);
	return test_exit();
}
