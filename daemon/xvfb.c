/* --virtual: a private Xvfb owned by holod. */
#include "system.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "x11.h"

#define XVFB_START_TIMEOUT_MS 15000
#define XVFB_WM_POLL_US 20000 /* how often the window manager's arrival is looked for */

int xvfb_start(struct xvfb *x, int width, int height, int number)
{
	int pipefd[2], r;
	char fdarg[16], screen[64], buf[32], name[16];
	size_t got = 0;

	memset(x, 0, sizeof(*x));
	if (pipe2(pipefd, O_CLOEXEC) < 0)
		return log_error_errno(-errno, "pipe");
	snprintf(fdarg, sizeof(fdarg), "%d", pipefd[1]);
	snprintf(screen, sizeof(screen), "%dx%dx24", width, height);
	snprintf(name, sizeof(name), ":%d", number);

	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0) {
		r = log_error_errno(-errno, "fork");
		goto close_pipe;
	}
	if (pid == 0) {
		/* Child: die with holod, keep only the write end open across exec. */
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		sigset_t all;
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		int fl = fcntl(pipefd[1], F_GETFD);
		fcntl(pipefd[1], F_SETFD, fl & ~FD_CLOEXEC);
		/* With a number, -displayfd still tells when the server is ready. */
		if (number >= 0)
			execlp("Xvfb", "Xvfb", name, "-displayfd", fdarg, "-screen", "0", screen, "-nolisten",
			       "tcp", "-noreset", (char *)NULL);
		else
			execlp("Xvfb", "Xvfb", "-displayfd", fdarg, "-screen", "0", screen, "-nolisten",
			       "tcp", "-noreset", (char *)NULL);
		fprintf(stderr, "holod: cannot run Xvfb: %s\n", strerror(errno));
		_exit(127);
	}
	close(pipefd[1]);
	pipefd[1] = -1;
	x->pid = pid;

	uint64_t deadline = time_mono_us() + XVFB_START_TIMEOUT_MS * 1000ull;
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		uint64_t now = time_mono_us();
		struct pollfd p = {.fd = pipefd[0], .events = POLLIN};
		if (now >= deadline) {
			r = log_error_errno(-ETIMEDOUT, "Xvfb did not report a display number");
			goto kill;
		}
		int pr = poll(&p, 1, (int)((deadline - now) / 1000) + 1);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0)
			continue;
		ssize_t n = read(pipefd[0], buf + got, sizeof(buf) - 1 - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (number >= 0)
				r = log_error_errno(-EPIPE,
						    "Xvfb could not start display %s (in use "
						    "by another X server? Xvfb's message is "
						    "above)",
						    name);
			else
				r = log_error_errno(-EPIPE, "Xvfb exited before reporting a display "
							    "(is Xvfb installed?)");
			goto kill;
		}
		got += (size_t)n;
	}
	buf[got] = '\0';
	int num = atoi(buf);
	x->display = xasprintf(":%d", num);
	log_info("started Xvfb %s (%dx%d, pid %d)", x->display, width, height, (int)pid);
	close(pipefd[0]);
	return 0;

kill:
	xvfb_stop(x);
close_pipe:
	close(pipefd[0]);
	if (pipefd[1] >= 0)
		close(pipefd[1]);
	return r;
}

int xvfb_start_session(struct xvfb *x, const char *command)
{
	pid_t parent = getpid();
	pid_t pid = fork();
	if (pid < 0)
		return log_error_errno(-errno, "fork");
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (getppid() != parent)
			_exit(1);
		setpgid(0, 0);
		sigset_t all;
		sigemptyset(&all);
		sigprocmask(SIG_SETMASK, &all, NULL);
		signal(SIGPIPE, SIG_DFL);
		int null = open("/dev/null", O_RDONLY | O_CLOEXEC);
		if (null >= 0 && null != STDIN_FILENO)
			dup2(null, STDIN_FILENO);
		setenv("DISPLAY", x->display, 1);
		execl("/bin/sh", "sh", "-c", command, (char *)NULL);
		fprintf(stderr, "holod: cannot run /bin/sh for --session: %s\n", strerror(errno));
		_exit(127);
	}
	/* Both sides set the group, so that a stop right after the fork finds it. */
	setpgid(pid, pid);
	x->session_pid = pid;
	log_info("started the session on %s (pid %d): %s", x->display, (int)pid, command);
	return 0;
}

bool xvfb_program_in_path(const char *program)
{
	const char *path = getenv("PATH");
	if (!path || !path[0])
		path = "/usr/local/bin:/usr/bin:/bin";
	for (;;) {
		size_t len = strcspn(path, ":");
		/* an empty entry (leading, trailing or between two colons) is the current
		 * directory, as for execvp() */
		char *file = len ? xasprintf("%.*s/%s", (int)len, path, program) : xasprintf("./%s", program);
		bool ok = access(file, X_OK) == 0;
		free(file);
		if (ok)
			return true;
		if (!path[len])
			return false;
		path += len + 1;
	}
}

int xvfb_wait_window_manager(struct xvfb *x, unsigned timeout_ms)
{
	uint64_t deadline = time_mono_us() + timeout_ms * 1000ull;
	struct x11_display *d = x11_display_open(x->display);
	int r = -ETIMEDOUT;

	if (!d)
		return -errno;
	for (;;) {
		if (x11_has_window_manager(d)) {
			r = 0;
			break;
		}
		int status;
		if (x->session_pid > 0 && waitpid(x->session_pid, &status, WNOHANG) == x->session_pid) {
			x->session_pid = 0;
			r = -ECHILD;
			break;
		}
		if (time_mono_us() >= deadline)
			break;
		time_sleep_us(XVFB_WM_POLL_US);
	}
	x11_display_close(d);
	return r;
}

/* SIGTERM to a process (group, for pgid), SIGKILL after `grace_us`; reaps `pid`. */
static void terminate(pid_t pid, bool group, uint64_t grace_us)
{
	int status;
	kill(group ? -pid : pid, SIGTERM);
	uint64_t deadline = time_mono_us() + grace_us;
	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (time_mono_us() > deadline) {
			kill(group ? -pid : pid, SIGKILL);
			waitpid(pid, &status, 0);
			return;
		}
		time_sleep_us(10000);
	}
	if (group)
		kill(-pid, SIGKILL); /* what the leader started and left behind */
}

void xvfb_stop(struct xvfb *x)
{
	if (x->session_pid > 0)
		terminate(x->session_pid, true, 2000000);
	if (x->pid > 0)
		terminate(x->pid, false, 5000000);
	free(x->display);
	memset(x, 0, sizeof(*x));
}
