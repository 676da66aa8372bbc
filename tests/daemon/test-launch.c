/* launch_spawn (the script action `launch`): a started program's pid leads its own process
 * group and its output reaches the log; a missing or non-executable program is refused with
 * its sentence every time, also when the grandchild's exec failure reaches the pipe before its
 * parent's pid message (a race that once turned the pid into "Unknown error <pid>"). */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launch.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static char dir[] = "/tmp/test-launch-XXXXXX";

/* Polls (10 s at most) until `path` holds `want` at its start. */
static int file_starts_with(const char *path, const char *want)
{
	char buf[256];
	for (int i = 0; i < 1000; i++) {
		FILE *f = fopen(path, "r");
		if (f) {
			size_t n = fread(buf, 1, sizeof(buf) - 1, f);
			fclose(f);
			buf[n] = '\0';
			if (strncmp(buf, want, strlen(want)) == 0)
				return 1;
		}
		usleep(10000);
	}
	return 0;
}

int main(void)
{
	char log[512], err[512], exe[512];
	pid_t pid = 0;

	REQUIRE(mkdtemp(dir));
	snprintf(log, sizeof(log), "%s/task.log", dir);

	/* A program that runs: its pid, its own process group, DISPLAY, its output in the log. */
	char *ok_argv[] = {"sh", "-c", "echo \"display=$DISPLAY pgid=$(cut -d' ' -f5 /proc/$$/stat) pid=$$\"",
			   NULL};
	err[0] = '\0';
	CHECK_INT_EQ(launch_spawn(ok_argv, ":42", log, &pid, err, sizeof(err)), 0);
	CHECK(pid > 0);
	char want[128];
	snprintf(want, sizeof(want), "display=:42 pgid=%d pid=%d", (int)pid, (int)pid);
	CHECK(file_starts_with(log, want));

	/* Missing, many times over: the same sentence each time, never a pid read as an errno. */
	char *missing_argv[] = {"holod-no-such-program-xyz", NULL};
	int bad = 0;
	for (int i = 0; i < 200; i++) {
		pid = 0;
		err[0] = '\0';
		int r = launch_spawn(missing_argv, ":42", log, &pid, err, sizeof(err));
		if (r != -ENOENT || strcmp(err, "cannot start 'holod-no-such-program-xyz': no such program "
						"(looked in PATH)") != 0) {
			if (!bad++)
				fprintf(stderr, "attempt %d: r=%d err=%s\n", i, r, err);
		}
	}
	CHECK_INT_EQ(bad, 0);

	/* A file that is not executable: EACCES and its sentence. */
	snprintf(exe, sizeof(exe), "%s/not-executable", dir);
	int fd = open(exe, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	REQUIRE(fd >= 0);
	close(fd);
	char *noexec_argv[] = {exe, NULL};
	err[0] = '\0';
	CHECK_INT_EQ(launch_spawn(noexec_argv, ":42", log, &pid, err, sizeof(err)), -EACCES);
	CHECK(strstr(err, "Permission denied") != NULL);

	/* A log that cannot be opened: nothing starts. */
	char badlog[600];
	snprintf(badlog, sizeof(badlog), "%s/no-such-dir/task.log", dir);
	err[0] = '\0';
	CHECK(launch_spawn(ok_argv, ":42", badlog, &pid, err, sizeof(err)) < 0);
	CHECK(strstr(err, "cannot open the log file") != NULL);

	unlink(exe);
	unlink(log);
	rmdir(dir);
	return test_exit();
}
