#include "x11-test-util.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test.h"

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int xt_xvfb_start(struct xt_xvfb *x, const char *screen, const char *const *extra)
{
	int fds[2];
	char fdarg[16], buf[32] = {0};
	size_t got = 0;
	long long deadline = now_ms() + 20000;

	if (pipe(fds) < 0)
		return -1;
	x->pid = fork();
	if (x->pid < 0)
		return -1;
	if (x->pid == 0) {
		const char *argv[32];
		int n = 0;
		close(fds[0]);
		int devnull = open("/dev/null", O_RDWR);
		dup2(devnull, 0);
		if (!getenv("XT_XVFB_VERBOSE")) {
			dup2(devnull, 1);
			dup2(devnull, 2);
		}
		snprintf(fdarg, sizeof(fdarg), "%d", fds[1]);
		argv[n++] = "Xvfb";
		argv[n++] = "-displayfd";
		argv[n++] = fdarg;
		argv[n++] = "-screen";
		argv[n++] = "0";
		argv[n++] = screen;
		argv[n++] = "-nolisten";
		argv[n++] = "tcp";
		argv[n++] = "-noreset";
		for (int i = 0; extra && extra[i] && n < 31; i++)
			argv[n++] = extra[i];
		argv[n] = NULL;
		execvp("Xvfb", (char *const *)argv);
		_exit(127);
	}
	close(fds[1]);
	while (got < sizeof(buf) - 1 && !memchr(buf, '\n', got)) {
		struct pollfd p = {fds[0], POLLIN, 0};
		int left = (int)(deadline - now_ms());
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		ssize_t r = read(fds[0], buf + got, sizeof(buf) - 1 - got);
		if (r <= 0)
			break;
		got += (size_t)r;
	}
	close(fds[0]);
	if (!memchr(buf, '\n', got)) {
		int status = 0;
		kill(x->pid, SIGTERM);
		waitpid(x->pid, &status, 0);
		if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
			test_skip_missing("Xvfb is not installed");
		fprintf(stderr, "Xvfb did not start\n");
		return -1;
	}
	snprintf(x->display, sizeof(x->display), ":%d", atoi(buf));
	setenv("DISPLAY", x->display, 1);
	return 0;
}

void xt_xvfb_stop(struct xt_xvfb *x)
{
	if (x->pid > 0)
		xt_kill(x->pid);
	x->pid = 0;
}

static char tmpdir[256];

static void remove_tmpdir(void)
{
	char cmd[300];

	if (!tmpdir[0] || getenv("XT_KEEP_TMP"))
		return;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", tmpdir);
}

const char *xt_tmpdir(void)
{
	if (!tmpdir[0]) {
		const char *base = getenv("TMPDIR");
		snprintf(tmpdir, sizeof(tmpdir), "%s/holo-x11-test-XXXXXX", base ? base : "/tmp");
		REQUIRE(mkdtemp(tmpdir));
		atexit(remove_tmpdir);
	}
	return tmpdir;
}

pid_t xt_spawn(const char *const *argv)
{
	pid_t pid = fork();

	if (pid == 0) {
		int devnull = open("/dev/null", O_RDONLY);
		dup2(devnull, 0);
		execvp(argv[0], (char *const *)argv);
		fprintf(stderr, "exec %s: %s\n", argv[0], strerror(errno));
		_exit(127);
	}
	return pid;
}

void xt_kill(pid_t pid)
{
	int status;

	if (pid <= 0)
		return;
	kill(pid, SIGTERM);
	for (int i = 0; i < 200; i++) {
		if (waitpid(pid, &status, WNOHANG) == pid)
			return;
		sleep_ms(10);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
}

char *xt_read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t len = 0, cap = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (cap - len < 4096) {
			cap = cap ? cap * 2 : 8192;
			buf = realloc(buf, cap);
			REQUIRE(buf);
		}
		size_t r = fread(buf + len, 1, cap - len - 1, f);
		len += r;
		if (r == 0)
			break;
	}
	fclose(f);
	buf[len] = '\0';
	return buf;
}

bool xt_wait_until(const char *path, bool (*pred)(const char *contents, void *arg), void *arg, int timeout_ms)
{
	long long deadline = now_ms() + timeout_ms;

	for (;;) {
		char *s = xt_read_file(path);
		bool ok = s && pred(s, arg);
		free(s);
		if (ok)
			return true;
		if (now_ms() > deadline)
			return false;
		sleep_ms(20);
	}
}

static bool contains(const char *contents, void *needle)
{
	return strstr(contents, needle) != NULL;
}

bool xt_wait_for(const char *path, const char *needle, int timeout_ms)
{
	return xt_wait_until(path, contains, (void *)needle, timeout_ms);
}

int xt_count_lines(const char *contents, const char *prefix)
{
	int n = 0;
	size_t plen = strlen(prefix);

	for (const char *p = contents; p && *p;) {
		if (strncmp(p, prefix, plen) == 0)
			n++;
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	return n;
}

char *xt_client_text(const char *contents)
{
	size_t cap = strlen(contents) + 1, len = 0;
	char *out = malloc(cap);

	REQUIRE(out);
	for (const char *p = contents; p && *p;) {
		if (strncmp(p, "key ", 4) == 0) {
			const char *t = strstr(p, " text=");
			const char *eol = strchr(p, '\n');
			if (t && (!eol || t < eol)) {
				for (t += 6; t[0] && t[1] && t[0] != '\n' && t[0] != '-'; t += 2) {
					unsigned v;
					char hx[3] = {t[0], t[1], 0};
					if (sscanf(hx, "%2x", &v) != 1)
						break;
					out[len++] = v == '\r' ? '\n' : (char)v;
				}
			}
		}
		p = strchr(p, '\n');
		if (p)
			p++;
	}
	out[len] = '\0';
	return out;
}

pid_t xt_client_start(const char *client_path, const char *name, const char *geometry, const char **ret_log)
{
	static char logs[8][300];
	static int n_logs;
	char *log = logs[n_logs++ % 8];

	snprintf(log, sizeof(logs[0]), "%s/%s.log", xt_tmpdir(), name);
	const char *argv[] = {client_path, "--log", log, "--geometry", geometry, NULL};
	pid_t pid = xt_spawn(argv);
	if (pid < 0)
		return -1;
	if (!xt_wait_for(log, "ready ", XT_WAIT_MS)) {
		fprintf(stderr, "holo-test-client did not become ready\n");
		xt_kill(pid);
		return -1;
	}
	*ret_log = log;
	return pid;
}
