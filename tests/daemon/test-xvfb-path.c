/* xvfb_program_in_path, which decides whether --virtual starts its window manager: each of
 * $PATH's directories is looked in, and an empty entry (leading, trailing, or two colons) is
 * the current directory, as execvp() takes it, not "/" (a precision of 0 once printed the
 * entry as nothing and looked for "/PROGRAM"). */
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "system.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static bool in_path(const char *path, const char *program)
{
	setenv("PATH", path, 1);
	return xvfb_program_in_path(program);
}

int main(void)
{
	char dir[] = "/tmp/test-xvfb-path-XXXXXX", exe[64], cwd[4096], plain[80];
	const char *name = "holo-test-prog";

	REQUIRE(mkdtemp(dir));
	REQUIRE(getcwd(cwd, sizeof(cwd)));
	snprintf(exe, sizeof(exe), "%s/%s", dir, name);
	int fd = open(exe, O_WRONLY | O_CREAT | O_TRUNC, 0755);
	REQUIRE(fd >= 0);
	close(fd);
	/* a file that is not executable is not a program */
	snprintf(plain, sizeof(plain), "%s/holo-test-plain", dir);
	fd = open(plain, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	close(fd);

	/* a named directory, first, last or alone */
	CHECK(in_path(dir, name));
	char path[256];
	snprintf(path, sizeof(path), "/nonexistent-a:%s", dir);
	CHECK(in_path(path, name));
	snprintf(path, sizeof(path), "%s:/nonexistent-a", dir);
	CHECK(in_path(path, name));
	CHECK(!in_path("/nonexistent-a:/nonexistent-b", name));
	CHECK(!in_path(dir, "holo-test-plain"));

	/* empty entries are the current directory: found there only */
	REQUIRE(chdir(dir) == 0);
	CHECK(in_path(":/nonexistent-a", name));
	CHECK(in_path("/nonexistent-a:", name));
	CHECK(in_path("/nonexistent-a::/nonexistent-b", name));
	CHECK(!in_path("/nonexistent-a:/nonexistent-b", name));
	REQUIRE(chdir("/") == 0);
	CHECK(!in_path(":/nonexistent-a", name));
	CHECK(!in_path("/nonexistent-a:", name));
	/* "/" + name is not what an empty entry means: with the program in "/" an empty entry
	 * looked in from elsewhere finds nothing (it found "/PROGRAM" before) */
	REQUIRE(chdir(dir) == 0);
	CHECK(!in_path(":/nonexistent-a", "bin"));
	REQUIRE(chdir("/") == 0);

	REQUIRE(chdir(cwd) == 0);
	unlink(exe);
	unlink(plain);
	rmdir(dir);
	return test_exit();
}
