/* A small HTTP/1.1 client over a Unix socket for the integration tests that curl cannot drive:
 * many concurrent and idle connections, slow senders, raw bytes.
 *
 *   http-load raw SOCKET          sends stdin as is, prints the answer until the server closes
 *                                 the connection (5 s at most)
 *   http-load load SOCKET CLIENTS REQUESTS IDLE
 *                                 holds IDLE connections open without a byte sent while CLIENTS
 *                                 threads send REQUESTS keep-alive requests each (GET
 *                                 /v1/status and GET /v1/tasks in turn); meanwhile a fresh
 *                                 connection asks GET /v1/status every 20 ms. Exit 1 on any
 *                                 error or a status answer slower than $HTTP_LOAD_PROBE_MS
 *                                 (default 1000 ms).
 *   http-load slow SOCKET COUNT SECONDS
 *                                 COUNT connections each send a request one byte a second;
 *                                 exit 0 once the server closed them all, 1 after SECONDS.
 *   http-load streams SOCKET PATH COUNT
 *                                 opens COUNT event streams on PATH, each answered 200, then one
 *                                 more; prints that one's answer; exit 0 when it came.
 *   http-load idle SOCKET COUNT SECONDS
 *                                 holds COUNT connections open without a byte sent for SECONDS;
 *                                 prints a line once they are open.
 *   http-load flood SOCKET COUNT  holds COUNT idle connections, then asks GET /v1/status on
 *                                 fresh ones until one is refused (10 s at most); prints that
 *                                 answer; exit 0 when it came.
 * Every outcome is printed as one line on stdout. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MAX_ANSWER (256 * 1024)

static const char *sock_path;

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Connects as libcurl (holoctl) does: non-blocking, so a full listen backlog is an error
 * (EAGAIN on a Unix socket), not a wait. The socket is blocking afterwards. */
static int dial(void)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return -1;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK) < 0) {
		int e = errno;
		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Reads one answer with a Content-Length body; returns its status, or -1. */
static int read_answer(int fd, char *buf, size_t size, int timeout_ms)
{
	size_t len = 0;
	uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

	for (;;) {
		buf[len] = '\0';
		char *end = strstr(buf, "\r\n\r\n");
		if (end) {
			int status = 0;
			if (sscanf(buf, "HTTP/1.%*d %d", &status) != 1)
				return -1;
			char *cl = strcasestr(buf, "\r\ncontent-length:");
			if (!cl || cl > end)
				return -1;
			size_t body = strtoul(cl + 17, NULL, 10);
			size_t want = (size_t)(end + 4 - buf) + body;
			if (want >= size)
				return -1;
			if (len >= want)
				return status;
		}
		if (len + 1 >= size)
			return -1;
		int left = (int)(deadline - now_ms());
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			return -1;
		ssize_t r = recv(fd, buf + len, size - len - 1, 0);
		if (r <= 0)
			return -1;
		len += (size_t)r;
	}
}

static int get(int fd, const char *path, char *buf, size_t size)
{
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: holod\r\n\r\n", path);
	if (send_all(fd, req, (size_t)n) < 0)
		return -1;
	return read_answer(fd, buf, size, 5000);
}

/* ---- raw ------------------------------------------------------------------------------------ */

static int cmd_raw(void)
{
	static char in[64 * 1024], out[MAX_ANSWER];
	size_t n = fread(in, 1, sizeof(in), stdin), len = 0;
	int fd = dial();
	uint64_t deadline = now_ms() + 5000;

	if (fd < 0 || send_all(fd, in, n) < 0) {
		printf("cannot send: %s\n", strerror(errno));
		return 1;
	}
	for (;;) {
		int left = (int)(deadline - now_ms());
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (left <= 0 || poll(&p, 1, left) <= 0)
			break;
		ssize_t r = recv(fd, out + len, sizeof(out) - len, 0);
		if (r <= 0)
			break;
		len += (size_t)r;
	}
	fwrite(out, 1, len, stdout);
	close(fd);
	return 0;
}

/* ---- load ----------------------------------------------------------------------------------- */

static atomic_int errors, requests;
static int n_requests;

static void *client_main(void *arg)
{
	static const char *const paths[] = {"/v1/status", "/v1/tasks?limit=5"};
	char *buf = malloc(MAX_ANSWER);
	int fd = -1;

	for (int i = 0; i < n_requests; i++) {
		if (fd < 0 && (fd = dial()) < 0) {
			fprintf(stderr, "client: cannot connect: %s\n", strerror(errno));
			atomic_fetch_add(&errors, 1);
			continue;
		}
		int status = get(fd, paths[i % 2], buf, MAX_ANSWER);
		atomic_fetch_add(&requests, 1);
		if (status != 200) {
			fprintf(stderr, "client: %s: %s %d\n", paths[i % 2],
				status < 0 ? "no answer" : "HTTP", status);
			atomic_fetch_add(&errors, 1);
			close(fd);
			fd = -1;
		}
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return NULL;
}

static int cmd_load(int clients, int reqs, int idle)
{
	static char buf[MAX_ANSWER];
	pthread_t *threads = calloc((size_t)clients, sizeof(*threads));
	int *idle_fds = calloc((size_t)idle + 1, sizeof(int));
	uint64_t worst = 0;
	int probes = 0, probe_errors = 0;

	for (int i = 0; i < idle; i++)
		if ((idle_fds[i] = dial()) < 0) {
			printf("cannot open idle connection %d: %s\n", i, strerror(errno));
			return 1;
		}
	n_requests = reqs;
	uint64_t t0 = now_ms();
	for (int i = 0; i < clients; i++)
		pthread_create(&threads[i], NULL, client_main, NULL);
	/* The status probe runs until every client is done (joined below in order). */
	for (int done = 0; done < clients;) {
		uint64_t t = now_ms();
		int fd = dial();
		int status = fd >= 0 ? get(fd, "/v1/status", buf, MAX_ANSWER) : -1;
		uint64_t took = now_ms() - t;
		if (fd >= 0)
			close(fd);
		probes++;
		if (status != 200) {
			fprintf(stderr, "status probe: %s %d\n", status < 0 ? "no answer" : "HTTP", status);
			probe_errors++;
		}
		if (took > worst)
			worst = took;
		struct timespec ts = {0, 20 * 1000000L};
		nanosleep(&ts, NULL);
		while (done < clients && pthread_tryjoin_np(threads[done], NULL) == 0)
			done++;
	}
	printf("%d requests from %d clients with %d idle connections in %llu ms: %d errors; "
	       "%d status probes, %d failed, slowest %llu ms\n",
	       atomic_load(&requests), clients, idle, (unsigned long long)(now_ms() - t0),
	       atomic_load(&errors), probes, probe_errors, (unsigned long long)worst);
	for (int i = 0; i < idle; i++)
		close(idle_fds[i]);
	free(idle_fds);
	free(threads);
	const char *limit_env = getenv("HTTP_LOAD_PROBE_MS");
	uint64_t limit = limit_env && atoi(limit_env) > 0 ? (uint64_t)atoi(limit_env) : 1000;
	if (worst > limit)
		printf("the slowest status probe took %llu ms, more than %llu ms\n",
		       (unsigned long long)worst, (unsigned long long)limit);
	return atomic_load(&errors) || probe_errors || worst > limit ? 1 : 0;
}

/* ---- slow ----------------------------------------------------------------------------------- */

static int cmd_slow(int count, int seconds)
{
	static const char req[] = "GET /v1/status HTTP/1.1\r\nHost: holod\r\nX-Padding: "
				  "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n\r\n";
	static int fds[4096];
	uint64_t t0 = now_ms();
	int open_left = count;

	if (count < 0 || count > (int)(sizeof(fds) / sizeof(fds[0])))
		return 2;
	for (int i = 0; i < count; i++)
		if ((fds[i] = dial()) < 0) {
			printf("cannot open slow connection %d: %s\n", i, strerror(errno));
			return 1;
		}
	for (size_t pos = 0; open_left > 0; pos++) {
		if (now_ms() - t0 > (uint64_t)seconds * 1000) {
			printf("%d of %d slow connections still open after %d s\n", open_left, count, seconds);
			return 1;
		}
		for (int i = 0; i < count; i++) {
			if (fds[i] < 0)
				continue;
			char c = req[pos % (sizeof(req) - 1)];
			struct pollfd p = {.fd = fds[i], .events = POLLIN};
			char junk[256];
			/* The server closing it: EOF (or an answer, then EOF). */
			if ((poll(&p, 1, 0) > 0 && recv(fds[i], junk, sizeof(junk), MSG_DONTWAIT) <= 0) ||
			    send(fds[i], &c, 1, MSG_NOSIGNAL) < 0) {
				close(fds[i]);
				fds[i] = -1;
				open_left--;
			}
		}
		sleep(1);
	}
	printf("the server closed all %d slow connections after %llu s\n", count,
	       (unsigned long long)((now_ms() - t0) / 1000));
	return 0;
}

/* ---- idle ----------------------------------------------------------------------------------- */

static int cmd_idle(int count, int seconds)
{
	static int fds[4096];

	if (count < 0 || count > (int)(sizeof(fds) / sizeof(fds[0])))
		return 2;
	for (int i = 0; i < count; i++)
		if ((fds[i] = dial()) < 0) {
			printf("cannot open connection %d: %s\n", i, strerror(errno));
			return 1;
		}
	printf("%d connections open\n", count);
	fflush(stdout);
	sleep((unsigned)seconds);
	for (int i = 0; i < count; i++)
		close(fds[i]);
	return 0;
}

/* ---- flood ---------------------------------------------------------------------------------- */

static int cmd_flood(int count)
{
	static int fds[4096];
	static char buf[MAX_ANSWER];
	uint64_t t0 = now_ms();

	if (count < 0 || count > (int)(sizeof(fds) / sizeof(fds[0])))
		return 2;
	for (int i = 0; i < count; i++)
		if ((fds[i] = dial()) < 0) {
			printf("cannot open connection %d: %s\n", i, strerror(errno));
			return 1;
		}
	/* The server accepts them in the background: ask until it has counted them all. */
	while (now_ms() - t0 < 10000) {
		int fd = dial();
		int status = fd >= 0 ? get(fd, "/v1/status", buf, MAX_ANSWER) : -1;
		if (fd >= 0)
			close(fd);
		if (status != 200) {
			char *body = strstr(buf, "\r\n\r\n");
			printf("HTTP %d %s\n", status, status > 0 && body ? body + 4 : "(no answer)");
			return status > 0 ? 0 : 1;
		}
		struct timespec ts = {0, 50 * 1000000L};
		nanosleep(&ts, NULL);
	}
	printf("every request was served with %d connections open\n", count);
	return 1;
}

/* ---- streams -------------------------------------------------------------------------------- */

/* The status of an answer whose headers arrived (the body may go on for long), or -1. */
static int read_status(int fd, char *buf, size_t size)
{
	size_t len = 0;
	uint64_t deadline = now_ms() + 5000;

	for (;;) {
		buf[len] = '\0';
		char *end = strstr(buf, "\r\n\r\n");
		int status;
		if (end)
			return sscanf(buf, "HTTP/1.%*d %d", &status) == 1 ? status : -1;
		int left = (int)(deadline - now_ms());
		struct pollfd p = {.fd = fd, .events = POLLIN};
		if (len + 1 >= size || left <= 0 || poll(&p, 1, left) <= 0)
			return -1;
		ssize_t r = recv(fd, buf + len, size - len - 1, 0);
		if (r <= 0)
			return -1;
		len += (size_t)r;
	}
}

static int cmd_streams(const char *path, int count)
{
	static char buf[MAX_ANSWER];
	char req[256];
	int n = snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: holod\r\n\r\n", path);

	for (int i = 0; i <= count; i++) {
		int fd = dial();
		if (fd < 0 || send_all(fd, req, (size_t)n) < 0) {
			printf("cannot open stream %d: %s\n", i, strerror(errno));
			return 1;
		}
		int status =
			i < count ? read_status(fd, buf, MAX_ANSWER) : read_answer(fd, buf, MAX_ANSWER, 5000);
		if (i < count && status != 200) {
			printf("stream %d: HTTP %d, expected 200\n", i, status);
			return 1;
		}
		if (i == count) {
			char *body = strstr(buf, "\r\n\r\n");
			printf("HTTP %d %s\n", status, status > 0 && body ? body + 4 : "(no answer)");
			return status > 0 ? 0 : 1;
		}
	}
	return 1;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		goto usage;
	sock_path = argv[2];
	if (strcmp(argv[1], "raw") == 0 && argc == 3)
		return cmd_raw();
	if (strcmp(argv[1], "load") == 0 && argc == 6)
		return cmd_load(atoi(argv[3]), atoi(argv[4]), atoi(argv[5]));
	if (strcmp(argv[1], "slow") == 0 && argc == 5)
		return cmd_slow(atoi(argv[3]), atoi(argv[4]));
	if (strcmp(argv[1], "streams") == 0 && argc == 5)
		return cmd_streams(argv[3], atoi(argv[4]));
	if (strcmp(argv[1], "idle") == 0 && argc == 5)
		return cmd_idle(atoi(argv[3]), atoi(argv[4]));
	if (strcmp(argv[1], "flood") == 0 && argc == 4)
		return cmd_flood(atoi(argv[3]));
usage:
	fprintf(stderr, "usage: http-load raw|load|slow|flood SOCKET ... (see the source)\n");
	return 2;
}
