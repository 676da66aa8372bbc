/* Program launcher (see launch.h). */
#include "launch.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

extern char **environ;

/* environ with DISPLAY replaced (the pointers are environ's, the array is malloc'd). */
static char **make_env(const char *display_kv)
{
	size_t n = 0;
	while (environ[n])
		n++;
	char **env = xcalloc(n + 2, sizeof(*env));
	size_t o = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(environ[i], "DISPLAY=", 8) != 0)
			env[o++] = environ[i];
	env[o++] = (char *)display_kv;
	env[o] = NULL;
	return env;
}

static ssize_t read_full(int fd, void *buf, size_t n)
{
	size_t got = 0;
	while (got < n) {
		ssize_t r = read(fd, (char *)buf + got, n - got);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return r < 0 ? -1 : (ssize_t)got;
		got += (size_t)r;
	}
	return (ssize_t)got;
}

/*
 * What the two children report through the pipe. The middle child's pid message and the
 * grandchild's exec errno race (the grandchild may fail its exec before its parent has written),
 * so each message says what it is; both are far below PIPE_BUF, so each arrives whole.
 */
enum { LAUNCH_MSG_PID, LAUNCH_MSG_ERRNO };
struct launch_msg {
	int kind;
	int value;
};

/* The grandchild: never returns. Reports an exec failure's errno through `fd`. */
static void exec_child(char *const argv[], char **env, int log_fd, int null_fd, int fd)
{
	struct sigaction dfl = {.sa_handler = SIG_DFL};
	sigset_t none;

	setsid();
	for (int s = 1; s < NSIG; s++)
		sigaction(s, &dfl, NULL);
	sigemptyset(&none);
	sigprocmask(SIG_SETMASK, &none, NULL);
	if (dup2(null_fd, STDIN_FILENO) >= 0 && dup2(log_fd, STDOUT_FILENO) >= 0 &&
	    dup2(log_fd, STDERR_FILENO) >= 0)
		execvpe(argv[0], argv, env);
	struct launch_msg m = {LAUNCH_MSG_ERRNO, errno};
	(void)!write(fd, &m, sizeof(m));
	_exit(127);
}

int launch_spawn(char *const argv[], const char *display, const char *log_path, pid_t *ret_pid, char *err,
		 size_t errlen)
{
	char *display_kv = xasprintf("DISPLAY=%s", display ? display : "");
	char **env = make_env(display_kv);
	int pipefd[2] = {-1, -1}, log_fd = -1, null_fd = -1, r;
	pid_t child, pid = 0;

	log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOCTTY, 0600);
	if (log_fd < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot open the log file %s: %s", log_path, strerror(-r));
		goto free_env;
	}
	null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
	if (null_fd < 0 || pipe2(pipefd, O_CLOEXEC) < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot prepare to start %s: %s", argv[0], strerror(-r));
		goto close_fds;
	}
	child = fork();
	if (child < 0) {
		r = -errno;
		snprintf(err, errlen, "cannot start %s: fork: %s", argv[0], strerror(-r));
		goto close_fds;
	}
	if (child == 0) {
		close(pipefd[0]);
		pid_t g = fork();
		if (g == 0)
			exec_child(argv, env, log_fd, null_fd, pipefd[1]);
		struct launch_msg m = {LAUNCH_MSG_PID, (int)g};
		(void)!write(pipefd[1], &m, sizeof(m));
		_exit(g < 0 ? 1 : 0);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	while (waitpid(child, NULL, 0) < 0 && errno == EINTR)
		;
	/* Up to two messages, in either order; the pipe ends when the middle child has exited and
	 * the grandchild has exec'd (O_CLOEXEC) or exited. */
	int e = 0;
	struct launch_msg m;
	for (int i = 0; i < 2 && read_full(pipefd[0], &m, sizeof(m)) == (ssize_t)sizeof(m); i++) {
		if (m.kind == LAUNCH_MSG_PID)
			pid = (pid_t)m.value;
		else if (m.kind == LAUNCH_MSG_ERRNO)
			e = m.value;
	}
	if (pid <= 0) {
		r = -EAGAIN;
		snprintf(err, errlen, "cannot start %s: fork failed", argv[0]);
		goto close_fds;
	}
	if (e != 0) {
		r = -e;
		if (e == ENOENT)
			snprintf(err, errlen, "cannot start '%s': no such program (looked in PATH)", argv[0]);
		else
			snprintf(err, errlen, "cannot start '%s': %s", argv[0], strerror(e));
		goto close_fds;
	}
	*ret_pid = pid;
	r = 0;
close_fds:
	if (pipefd[0] >= 0)
		close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	if (null_fd >= 0)
		close(null_fd);
	if (log_fd >= 0)
		close(log_fd);
free_env:
	free(env);
	free(display_kv);
	return r;
}
