/* holoctl against a fake holod: a forked child serves canned HTTP answers on a Unix socket, so the
 * cases a real daemon rarely produces can be checked: event lines split across chunks, an
 * interrupted task, a stream that ends early, an over-long or malformed event line, a connection
 * closed without an answer, error bodies that are not JSON, a screenshot that is not a PNG. */
#include "cli.h"
#include "common.h"
#include "http.h"
#include "ipc.h"
#include "test.h"

#include <signal.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

TEST_DEFINE_GLOBALS;

enum variant {
	V_INTERRUPTED,	   /* the task event stream ends with status interrupted */
	V_SUCCEEDED_SPLIT, /* ... succeeded, every line split across chunks */
	V_NO_END,	   /* the stream stops before the task's final status */
	V_LONG_LINE,	   /* one event line longer than CLI_HTTP_MAX_EVENT_LINE */
	V_BAD_LINE,	   /* an event line that is not JSON */
	V_CLOSE,	   /* every connection is closed without an answer */
	V_HTML_500,	   /* errors come as HTML */
	V_NOT_PNG,	   /* the screenshot is a GIF */
	V_SHOT_HASH,	   /* a step's screenshot with its journaled hash */
	V_SHOT_BAD_HASH,   /* ... with a hash that does not match */
};

/* The smallest PNG prefix holoctl reads (signature and IHDR: 1280x720), and its sha256. */
static const unsigned char png[24] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1A, '\n', 0, 0, 0, 13,
				      'I',  'H', 'D', 'R', 0,	 0,    5,    0,	   0, 0, 2, 0xD0};

static void write_all(int fd, const void *p, size_t n)
{
	const char *c = p;
	while (n > 0) {
		ssize_t w = write(fd, c, n);
		if (w <= 0)
			_exit(0); /* the client went away: nothing more to serve on this connection
				   */
		c += w;
		n -= (size_t)w;
	}
}

static void write_str(int fd, const char *s)
{
	write_all(fd, s, strlen(s));
}

static void chunk(int fd, const char *data, size_t n)
{
	char head[32];
	snprintf(head, sizeof(head), "%zx\r\n", n);
	write_str(fd, head);
	write_all(fd, data, n);
	write_str(fd, "\r\n");
}

/* Writes `line` (with its newline) in two chunks, split in the middle. */
static void split_line(int fd, const char *line)
{
	size_t n = strlen(line), half = n / 2;
	chunk(fd, line, half);
	chunk(fd, line + half, n - half);
}

static const char *const ev_task =
	"{\"event\":\"task\",\"task_id\":7,\"task\":{\"id\":7,\"status\":\"running\"}}\n";
static const char *const ev_step =
	"{\"event\":\"step\",\"task_id\":7,\"step\":{\"index\":0,\"tool_call\":{\"tool_name\":"
	"\"click\","
	"\"x\":5,\"y\":6,\"button\":\"left\"},\"status\":\"ok\",\"pixels\":{\"x\":5,\"y\":6},"
	"\"result\":\"clicked\",\"timings_us\":{\"capture\":1000,\"inject\":2000}}}\n";

static void serve_events(int fd, enum variant v)
{
	write_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\n"
		      "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
	switch (v) {
	case V_INTERRUPTED:
		chunk(fd, ev_task, strlen(ev_task));
		chunk(fd, ev_step, strlen(ev_step));
		/* Two lines in one chunk, and a keep-alive empty line. */
		{
			char *two = xasprintf("\n{\"event\":\"end\",\"task_id\":7,\"task\":{\"id\":7,"
					      "\"status\":\"interrupted\",\"error\":\"holod received "
					      "SIGTERM\"}}\n");
			chunk(fd, two, strlen(two));
			free(two);
		}
		break;
	case V_SUCCEEDED_SPLIT:
		split_line(fd, ev_task);
		split_line(fd, ev_step);
		/* The last line without its newline. */
		{
			const char *end = "{\"event\":\"end\",\"task_id\":7,\"task\":{\"id\":7,"
					  "\"status\":\"succeeded\"}}";
			split_line(fd, end);
		}
		break;
	case V_NO_END:
		chunk(fd, ev_task, strlen(ev_task));
		chunk(fd, ev_step, strlen(ev_step));
		break;
	case V_LONG_LINE: {
		size_t n = CLI_HTTP_MAX_EVENT_LINE + 100;
		char *big = xmalloc(n);
		memset(big, ' ', n);
		big[0] = '{';
		chunk(fd, big, n);
		free(big);
		chunk(fd, "}\n", 2);
		break;
	}
	case V_BAD_LINE:
		chunk(fd, "this is not json\n", 17);
		break;
	default:
		break;
	}
	write_str(fd, "0\r\n\r\n");
}

static void respond_json(int fd, int status, const char *reason, const char *body)
{
	char head[256];
	snprintf(head, sizeof(head),
		 "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\n"
		 "Connection: close\r\n\r\n",
		 status, reason, strlen(body));
	write_str(fd, head);
	write_str(fd, body);
}

/* Reads one request (headers and a Content-Length body) and answers it. */
static void serve_connection(int fd, enum variant v)
{
	char req[65536];
	size_t len = 0;
	char *end = NULL;

	while (!end) {
		if (len == sizeof(req) - 1)
			return;
		ssize_t n = read(fd, req + len, sizeof(req) - 1 - len);
		if (n <= 0)
			return;
		len += (size_t)n;
		req[len] = '\0';
		end = strstr(req, "\r\n\r\n");
	}
	const char *cl = strcasestr(req, "Content-Length:");
	size_t body = cl && cl < end ? strtoul(cl + 15, NULL, 10) : 0;
	while (len < (size_t)(end + 4 - req) + body && len < sizeof(req) - 1) {
		ssize_t n = read(fd, req + len, sizeof(req) - 1 - len);
		if (n <= 0)
			return;
		len += (size_t)n;
	}

	if (v == V_CLOSE)
		return;
	if (strncmp(req, "POST /v1/tasks ", 15) == 0) {
		respond_json(fd, 201, "Created", "{\"id\":7,\"status\":\"queued\"}");
	} else if (strncmp(req, "GET /v1/tasks/7/events ", 23) == 0) {
		serve_events(fd, v);
	} else if (strncmp(req, "GET /v1/screenshot ", 19) == 0 && v == V_NOT_PNG) {
		write_str(fd, "HTTP/1.1 200 OK\r\nContent-Type: image/gif\r\nContent-Length: 6\r\n"
			      "Connection: close\r\n\r\nGIF89a");
	} else if (strncmp(req, "GET /v1/tasks/7/steps/0/screenshot?which=before ", 48) == 0 &&
		   (v == V_SHOT_HASH || v == V_SHOT_BAD_HASH)) {
		char sha[65], head[256];
		ipc_sha256_hex(png, sizeof(png), sha);
		if (v == V_SHOT_BAD_HASH)
			sha[0] = sha[0] == '0' ? '1' : '0';
		snprintf(head, sizeof(head),
			 "HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: %zu\r\n"
			 "X-Holod-SHA256: %s\r\nConnection: close\r\n\r\n",
			 sizeof(png), sha);
		write_str(fd, head);
		write_all(fd, png, sizeof(png));
	} else if (v == V_HTML_500) {
		write_str(fd, "HTTP/1.1 500 Oops\r\nContent-Type: text/html\r\nContent-Length: 13\r\n"
			      "Connection: close\r\n\r\n<h1>oops</h1>");
	} else {
		respond_json(fd, 404, "Not Found",
			     "{\"error\":{\"code\":\"not_found\",\"message\":\"no such route\"}}");
	}
}

struct fake {
	pid_t pid;
	char dir[64];
	char *socket_path;
};

static void fake_start(struct fake *f, enum variant v)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int lfd;

	snprintf(f->dir, sizeof(f->dir), "/tmp/holoctl-fake-XXXXXX");
	REQUIRE(mkdtemp(f->dir));
	f->socket_path = path_join(f->dir, "holod.sock");
	REQUIRE(strlen(f->socket_path) < sizeof(sa.sun_path));
	strcpy(sa.sun_path, f->socket_path);
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	REQUIRE(lfd >= 0);
	REQUIRE(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	REQUIRE(listen(lfd, 16) == 0);
	fflush(NULL);
	f->pid = fork();
	REQUIRE(f->pid >= 0);
	if (f->pid == 0) {
		signal(SIGPIPE, SIG_IGN);
		for (;;) {
			int fd = accept(lfd, NULL, NULL);
			if (fd < 0)
				_exit(0);
			serve_connection(fd, v);
			close(fd);
		}
	}
	close(lfd);
}

static void fake_stop(struct fake *f)
{
	kill(f->pid, SIGTERM);
	waitpid(f->pid, NULL, 0);
	unlink(f->socket_path);
	rmdir(f->dir);
	free(f->socket_path);
}

/* Runs holoctl --socket FAKE ARGS... and returns its exit status with stdout and stderr. */
static int holoctl(struct fake *f, FILE *in, char **out, char **err, ...)
{
	char *argv[32];
	int argc = 0;
	size_t ol, el;
	va_list ap;
	FILE *fo = open_memstream(out, &ol), *fe = open_memstream(err, &el);

	REQUIRE(fo && fe);
	argv[argc++] = "holoctl";
	argv[argc++] = "--socket";
	argv[argc++] = f->socket_path;
	va_start(ap, err);
	for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
		argv[argc++] = a;
	va_end(ap);
	argv[argc] = NULL;
	int r = holoctl_main(argc, argv, in, fo, fe);
	fclose(fo);
	fclose(fe);
	return r;
}

/* `holoctl run --follow` on a script read from stdin, against variant v. */
static int follow(enum variant v, char **out, char **err)
{
	static const char script[] = "[{\"tool_name\":\"click\",\"x\":5,\"y\":6}]";
	struct fake f;
	FILE *in;
	int r;

	fake_start(&f, v);
	in = fmemopen((void *)script, strlen(script), "r");
	REQUIRE(in);
	r = holoctl(&f, in, out, err, "run", "--script", "-", "--follow", NULL);
	fclose(in);
	fake_stop(&f);
	return r;
}

static void test_follow(void)
{
	char *out, *err;

	CHECK_INT_EQ(follow(V_INTERRUPTED, &out, &err), CLI_EXIT_TASK_INTERRUPTED);
	/* the task event says it runs: "queued" is not left standing (issue 32) */
	CHECK_STR_EQ(out, "task 7 queued\n"
			  "task 7 running\n"
			  "step 0  click @ 5,6  ok  3 ms: clicked\n"
			  "task 7 interrupted after 1 step: holod received SIGTERM\n");
	free(out), free(err);

	/* Lines split across chunks and a last line without a newline read the same. */
	CHECK_INT_EQ(follow(V_SUCCEEDED_SPLIT, &out, &err), CLI_EXIT_OK);
	CHECK_STR_EQ(out, "task 7 queued\n"
			  "task 7 running\n"
			  "step 0  click @ 5,6  ok  3 ms: clicked\n"
			  "task 7 succeeded after 1 step\n");
	free(out), free(err);

	CHECK_INT_EQ(follow(V_NO_END, &out, &err), CLI_EXIT_TASK_UNKNOWN);
	CHECK(strstr(err, "ended without its final status (see `holoctl show 7`)") != NULL);
	free(out), free(err);

	CHECK_INT_EQ(follow(V_LONG_LINE, &out, &err), CLI_EXIT_ERROR);
	CHECK(strstr(err, "sent more than holoctl accepts") != NULL);
	free(out), free(err);

	CHECK_INT_EQ(follow(V_BAD_LINE, &out, &err), CLI_EXIT_ERROR);
	CHECK(strstr(err, "sent an event that is not a JSON object") != NULL);
	free(out), free(err);
}

static void test_errors(void)
{
	struct fake f;
	char *out, *err;

	fake_start(&f, V_CLOSE);
	CHECK_INT_EQ(holoctl(&f, stdin, &out, &err, "status", NULL), CLI_EXIT_ERROR);
	CHECK(strstr(err, "closed the connection without a complete answer") != NULL);
	free(out), free(err);
	fake_stop(&f);

	fake_start(&f, V_HTML_500);
	CHECK_INT_EQ(holoctl(&f, stdin, &out, &err, "list", NULL), CLI_EXIT_ERROR);
	CHECK(strstr(err, "HTTP 500 without an error message") != NULL);
	free(out), free(err);
	fake_stop(&f);

	/* API errors: the daemon's message; with --json also its body on stdout. */
	fake_start(&f, V_NOT_PNG);
	CHECK_INT_EQ(holoctl(&f, stdin, &out, &err, "show", "3", NULL), CLI_EXIT_ERROR);
	CHECK_STR_EQ(err, "holoctl: no such route (HTTP 404 not_found)\n");
	CHECK_STR_EQ(out, "");
	free(out), free(err);
	CHECK_INT_EQ(holoctl(&f, stdin, &out, &err, "--json", "show", "3", NULL), CLI_EXIT_ERROR);
	CHECK_STR_EQ(out, "{\"error\":{\"code\":\"not_found\",\"message\":\"no such route\"}}\n");
	free(out), free(err);

	char path[] = "/tmp/holoctl-png-XXXXXX";
	int fd = mkstemp(path);
	REQUIRE(fd >= 0);
	close(fd);
	unlink(path);
	CHECK_INT_EQ(holoctl(&f, stdin, &out, &err, "screenshot", "-o", path, NULL), CLI_EXIT_ERROR);
	CHECK(strstr(err, "not a PNG image (6 bytes)") != NULL);
	CHECK(access(path, F_OK) != 0); /* nothing written */
	free(out), free(err);
	fake_stop(&f);
}

static void test_step_screenshot(void)
{
	struct fake f;
	char *out, *err, *expected, sha[65];
	char path[] = "/tmp/holoctl-png-XXXXXX";
	int fd = mkstemp(path);

	REQUIRE(fd >= 0);
	close(fd);
	unlink(path);
	ipc_sha256_hex(png, sizeof(png), sha);

	fake_start(&f, V_SHOT_HASH);
	CHECK_INT_EQ(holoctl(&f, stdin, &out, &err, "screenshot", "--task", "7", "--step", "0", "--which",
			     "before", "-o", path, NULL),
		     0);
	expected = xasprintf("wrote %s (1280x720, 24 bytes, sha256 matches the journal)\n", path);
	CHECK_STR_EQ(out, expected);
	free(expected);
	free(out), free(err);
	CHECK_INT_EQ(holoctl(&f, stdin, &out, &err, "--json", "screenshot", "--task", "7", "--step", "0",
			     "--which", "before", "-o", path, NULL),
		     0);
	expected = xasprintf("{\"path\":\"%s\",\"bytes\":24,\"width\":1280,\"height\":720,"
			     "\"sha256\":\"%s\",\"verified\":true}\n",
			     path, sha);
	CHECK_STR_EQ(out, expected);
	free(expected);
	free(out), free(err);
	CHECK(unlink(path) == 0);
	fake_stop(&f);

	/* A hash that does not match: an error, and no file. */
	fake_start(&f, V_SHOT_BAD_HASH);
	CHECK_INT_EQ(holoctl(&f, stdin, &out, &err, "screenshot", "--task", "7", "--step", "0", "--which",
			     "before", "-o", path, NULL),
		     CLI_EXIT_ERROR);
	CHECK(strstr(err, "does not match the journal's") != NULL);
	CHECK(access(path, F_OK) != 0);
	free(out), free(err);
	fake_stop(&f);
}

int main(void)
{
	log_set_program_name("test-cli-http");
	REQUIRE(cli_http_global_init() == 0);
	test_follow();
	test_errors();
	test_step_screenshot();
	cli_http_global_cleanup();
	return test_exit();
}
