/* holoctl view: a task's live page (GET /v1/tasks/{id}/view in docs/api.md) in a browser.
 *
 * DESIGN (access, threads, limits). A browser cannot open holod's Unix socket, so holoctl view
 * stands between the two for as long as it runs, and no longer: it listens on 127.0.0.1 only
 * (a port the kernel picks unless --port), prints http://127.0.0.1:PORT/TOKEN/v1/tasks/ID/view
 * once, and forwards each request under /TOKEN to the socket as it is, one request per
 * connection (holod is asked to close after its answer, so a second request on the same
 * connection never reaches it unchecked). A request is forwarded only when
 *   - the connecting socket belongs to holoctl's own uid: the kernel's table of TCP sockets
 *     (/proc/net/tcp) names the owner of the peer's end, loopback's SO_PEERCRED; the socket's
 *     owner-only rule (docs/api.md) holds here too;
 *   - its path starts with the token (VIEW_TOKEN_BYTES random bytes in hex, compared in
 *     constant time): a page of another site open in the user's browser cannot guess it;
 *   - its Host is the address printed, and its Origin, when sent, that origin (a name that
 *     resolves to 127.0.0.1 cannot be used to read the answers: DNS rebinding);
 *   - it is one of the requests the page makes, for this task only (the task, its steps and a
 *     step's screenshot, its events, the screen, pause, resume, cancel, reply, approve, deny);
 *     the screen only of the task's display (read once at start: no query, or exactly
 *     "display=" and its name percent-encoded, as the page asks), and no other query at all;
 * and holod then checks holoctl's uid as it checks any client's. Anything else is answered
 * here with the API's error body (403, 404, 413, 431, 503), and nothing is forwarded.
 *
 * The main thread accepts; each connection gets a detached thread (at most
 * VIEW_MAX_CONNECTIONS at once; beyond, 503) that reads the request head within
 * VIEW_REQUEST_TIMEOUT_S, sends holod the request line, Content-Type, Content-Length and the
 * body (IPC_MAX_BODY_BYTES at most), then copies holod's answer to the browser until either
 * side closes: an event stream lasts as long as the page is open, and ends when it closes.
 * SIGINT or SIGTERM end the command; the connections' threads end with the process. */
#include "cli.h"
#include "http.h"

#include "common.h"
#include "ipc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define VIEW_TOKEN_BYTES 24	    /* random bytes of the URL's token (48 hex digits) */
#define VIEW_MAX_CONNECTIONS 32	    /* connections served at once; beyond: 503 */
#define VIEW_REQUEST_TIMEOUT_S 15   /* a request's head and body must arrive within this */
#define VIEW_POLL_MS 500	    /* how often the accept loop looks at the signals */
#define VIEW_COPY_BYTES (64 * 1024) /* one read of holod's answer */
/* A request's line and headers: holod's header limit beside a request line. */
#define VIEW_MAX_HEAD_BYTES (IPC_MAX_HEADER_BYTES + 1024)

struct view {
	char token[2 * VIEW_TOKEN_BYTES + 1];
	char host[32];	 /* "127.0.0.1:PORT", the Host a request must name */
	char origin[40]; /* "http://127.0.0.1:PORT" */
	char *socket_path;
	long task_id;
	char *display; /* the task's display (GET /v1/tasks/ID at start), or NULL */
	atomic_int conns;
};

struct view_conn {
	struct view *v;
	int fd;
};

static volatile sig_atomic_t view_stop;

static void view_signal(int sig)
{
	(void)sig;
	view_stop = 1;
}

enum { VIEW_OPT_PORT = CLI_OPT_FIRST_COMMAND_OPTION, VIEW_OPT_OPEN };

static const struct option view_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"port", required_argument, NULL, VIEW_OPT_PORT},
	{"open", no_argument, NULL, VIEW_OPT_OPEN},
	{0},
};

/* ---- one connection ------------------------------------------------------------------------- */

static int send_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
		if (w < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

/* Answers with the API's error body and closes (the caller closes the socket). */
static void send_error(int fd, int status, const char *reason, const char *code, const char *msg)
{
	json_t *o = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
	char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
	json_decref(o);
	if (!body)
		return;
	char *head = xasprintf("HTTP/1.1 %d %s\r\nContent-Type: application/json\r\n"
			       "Content-Length: %zu\r\nConnection: close\r\n"
			       "Cache-Control: no-store\r\n\r\n",
			       status, reason, strlen(body) + 1);
	if (send_all(fd, head, strlen(head)) == 0 && send_all(fd, body, strlen(body)) == 0)
		send_all(fd, "\n", 1);
	free(head);
	free(body);
}

/* The uid owning the other end of `fd`, a TCP connection over IPv4 loopback: the line of
 * /proc/net/tcp whose local address is our peer and whose remote address is us. -ENOENT when
 * none (the peer went away), -errno when the table cannot be read. */
static int peer_uid(int fd, uid_t *ret_uid)
{
	struct sockaddr_in peer, self;
	socklen_t pl = sizeof(peer), sl = sizeof(self);
	char want_local[32], want_rem[32], line[512];
	int r = -ENOENT;

	if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 ||
	    getsockname(fd, (struct sockaddr *)&self, &sl) < 0)
		return -errno;
	if (peer.sin_family != AF_INET || self.sin_family != AF_INET)
		return -EAFNOSUPPORT;
	/* The kernel prints the address as the 32-bit word it stores (network order) in hex. */
	snprintf(want_local, sizeof(want_local), "%08X:%04X", (unsigned)peer.sin_addr.s_addr,
		 (unsigned)ntohs(peer.sin_port));
	snprintf(want_rem, sizeof(want_rem), "%08X:%04X", (unsigned)self.sin_addr.s_addr,
		 (unsigned)ntohs(self.sin_port));
	FILE *f = fopen("/proc/net/tcp", "re");
	if (!f)
		return -errno;
	while (fgets(line, sizeof(line), f)) {
		char local[64], rem[64];
		unsigned uid;
		if (sscanf(line, " %*[0-9]: %63s %63s %*s %*s %*s %*s %u", local, rem, &uid) != 3)
			continue;
		if (strcmp(local, want_local) == 0 && strcmp(rem, want_rem) == 0) {
			*ret_uid = (uid_t)uid;
			r = 0;
			break;
		}
	}
	fclose(f);
	return r;
}

static bool token_equal(const char *a, const char *b, size_t n)
{
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* Parses a decimal task id at *p up to the next '/' or the end; advances *p. */
static bool take_id(const char **p, long *ret)
{
	char *end;
	if (**p < '0' || **p > '9')
		return false;
	errno = 0;
	long v = strtol(*p, &end, 10);
	if (errno || (*end && *end != '/'))
		return false;
	*ret = v;
	*p = end;
	return true;
}

/* True when `query` is "display=" and `display` percent-encoded (the page's
 * encodeURIComponent; any byte may be encoded, none of "&=+%" left bare). */
static bool display_query(const char *query, const char *display)
{
	static const char key[] = "display=";

	if (!display || strncmp(query, key, strlen(key)) != 0)
		return false;
	const char *q = query + strlen(key), *d = display;
	while (*q) {
		char c = *q++;
		if (c == '%') {
			int hi = hex_digit(q[0]), lo = hi < 0 ? -1 : hex_digit(q[1]);
			if (lo < 0)
				return false;
			c = (char)(hi << 4 | lo);
			q += 2;
		} else if (c == '&' || c == '=' || c == '+') {
			return false;
		}
		if (c == '\0' || c != *d++)
			return false;
	}
	return *d == '\0';
}

/* True for the requests the page makes for task `id` on `display` (path without the query). */
static bool allowed(const char *method, const char *path, const char *query, long id, const char *display)
{
	static const char *const posts[] = {"pause", "resume", "cancel", "reply", "approve", "deny"};
	const char *tasks = IPC_API_PREFIX "/tasks/";
	long got, n;

	/* the screen of the task's display only: another display holod drives is not its */
	if (strcmp(path, IPC_API_PREFIX "/screenshot") == 0)
		return strcmp(method, "GET") == 0 && (!query || display_query(query, display));
	if (strncmp(path, tasks, strlen(tasks)) != 0)
		return false;
	const char *p = path + strlen(tasks);
	if (!take_id(&p, &got) || got != id)
		return false;
	if (strcmp(method, "POST") == 0) {
		if (*p++ != '/' || query)
			return false;
		for (size_t i = 0; i < ARRAY_SIZE(posts); i++)
			if (strcmp(p, posts[i]) == 0)
				return true;
		return false;
	}
	if (strcmp(method, "GET") != 0)
		return false;
	if (!*p || strcmp(p, "/view") == 0 || strcmp(p, "/events") == 0 || strcmp(p, "/steps") == 0)
		return !query;
	if (strncmp(p, "/steps/", 7) != 0)
		return false;
	p += 7;
	return take_id(&p, &n) && strcmp(p, "/screenshot") == 0 && !query;
}

/* The value of header `name` in the head's header lines (NUL-terminated lines), or NULL;
 * *ret_count counts its occurrences. */
static const char *header(char *const *lines, size_t n, const char *name, int *ret_count)
{
	const char *value = NULL;
	size_t len = strlen(name);
	*ret_count = 0;
	for (size_t i = 0; i < n; i++) {
		if (strncasecmp(lines[i], name, len) != 0 || lines[i][len] != ':')
			continue;
		const char *v = lines[i] + len + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		value = v;
		(*ret_count)++;
	}
	return value;
}

/* Copies holod's answer to the browser until either side closes. */
static void pump(int client, int daemon)
{
	char *buf = xmalloc(VIEW_COPY_BYTES);
	struct pollfd p[2] = {{.fd = daemon, .events = POLLIN}, {.fd = client, .events = POLLRDHUP}};

	for (;;) {
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (p[1].revents & (POLLRDHUP | POLLHUP | POLLERR))
			break; /* the page closed: holod notices the closed socket in turn */
		if (!(p[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		ssize_t n = read(daemon, buf, VIEW_COPY_BYTES);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0 || send_all(client, buf, (size_t)n) < 0)
			break;
	}
	free(buf);
}

/* recv() that gives up at `deadline_us` (time_mono_us()): 0 at the deadline or the end, the
 * bytes read, or -errno. A client sending a byte at a time cannot stretch its request past it. */
static ssize_t recv_by(int fd, char *buf, size_t n, uint64_t deadline_us)
{
	for (;;) {
		uint64_t now = time_mono_us();
		if (now >= deadline_us)
			return 0;
		struct pollfd p = {.fd = fd, .events = POLLIN};
		int r = poll(&p, 1, (int)((deadline_us - now + 999) / 1000));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r <= 0)
			continue;
		ssize_t got = recv(fd, buf, n, 0);
		if (got < 0 && errno == EINTR)
			continue;
		return got < 0 ? -errno : got;
	}
}

/* Reads, checks and forwards one request; the caller closes fd. */
static void serve(struct view *v, int fd)
{
	const size_t max_head = VIEW_MAX_HEAD_BYTES;
	char *buf = xmalloc(max_head + 1), *lines[128], *body = NULL;
	size_t len = 0, n_lines = 0;
	char *end = NULL;
	uid_t uid = (uid_t)-1;
	int daemon = -1, count;

	const uint64_t deadline = time_mono_us() + VIEW_REQUEST_TIMEOUT_S * 1000000ull;

	int r = peer_uid(fd, &uid);
	if (r < 0 || uid != geteuid()) {
		send_error(fd, 403, "Forbidden", IPC_ERR_FORBIDDEN,
			   "only the user running holoctl view may connect");
		goto out;
	}
	while (!(end = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL)) {
		if (len == max_head) {
			send_error(fd, 431, "Request Header Fields Too Large", IPC_ERR_HEADERS_TOO_LARGE,
				   "request line and headers over 9 KiB");
			goto out;
		}
		ssize_t got = recv_by(fd, buf + len, max_head - len, deadline);
		if (got <= 0)
			goto out; /* closed, or not complete by the deadline */
		len += (size_t)got;
	}
	if (memchr(buf, '\0', (size_t)(end - buf))) {
		send_error(fd, 400, "Bad Request", IPC_ERR_BAD_REQUEST, "a NUL byte in the request head");
		goto out;
	}
	*end = '\0';
	/* Split the head into lines; a bare CR or LF inside one is refused below. */
	for (char *s = buf, *e; s && n_lines < ARRAY_SIZE(lines); s = e ? e + 2 : NULL) {
		e = strstr(s, "\r\n");
		if (e)
			*e = '\0';
		if (strpbrk(s, "\r\n")) {
			send_error(fd, 400, "Bad Request", IPC_ERR_BAD_REQUEST, "malformed request head");
			goto out;
		}
		lines[n_lines++] = s;
	}
	char method[8], target[2048], version[16];
	if (n_lines == ARRAY_SIZE(lines)) {
		send_error(fd, 431, "Request Header Fields Too Large", IPC_ERR_HEADERS_TOO_LARGE,
			   "more than 127 request header lines");
		goto out;
	}
	if (sscanf(lines[0], "%7[A-Z] %2047[^ ] %15s", method, target, version) != 3 ||
	    strncmp(version, "HTTP/", 5) != 0) {
		send_error(fd, 400, "Bad Request", IPC_ERR_BAD_REQUEST, "malformed request line");
		goto out;
	}
	/* holod's answers (an event stream's chunks) go through as they are: HTTP/1.1's */
	if (strcmp(version, "HTTP/1.1") != 0) {
		send_error(fd, 505, "HTTP Version Not Supported", IPC_ERR_BAD_REQUEST,
			   "holoctl view speaks HTTP/1.1 only");
		goto out;
	}
	/* "/TOKEN/v1/...": anything else is not here, whatever it is. */
	size_t tl = strlen(v->token);
	if (target[0] != '/' || strlen(target) < tl + 2 || !token_equal(target + 1, v->token, tl) ||
	    target[tl + 1] != '/') {
		send_error(fd, 404, "Not Found", IPC_ERR_NOT_FOUND,
			   "no such page: use the address holoctl view printed");
		goto out;
	}
	char *path = target + tl + 1, *query = strchr(path, '?');
	if (query)
		*query++ = '\0';
	if (!allowed(method, path, query, v->task_id, v->display)) {
		char *msg = xasprintf("holoctl view serves task %ld's page and what it asks for, "
				      "not %s %s%s",
				      v->task_id, method, path, query ? " with that query" : "");
		send_error(fd, 404, "Not Found", IPC_ERR_NOT_FOUND, msg);
		free(msg);
		goto out;
	}
	const char *host = header(lines + 1, n_lines - 1, "Host", &count);
	if (count != 1 || strcmp(host, v->host) != 0) {
		send_error(fd, 403, "Forbidden", IPC_ERR_FORBIDDEN,
			   "the Host header must be the address holoctl view printed");
		goto out;
	}
	const char *origin = header(lines + 1, n_lines - 1, "Origin", &count);
	if (count > 1 || (origin && strcmp(origin, v->origin) != 0)) {
		send_error(fd, 403, "Forbidden", IPC_ERR_FORBIDDEN,
			   "a request from another origin than holoctl view's page");
		goto out;
	}
	header(lines + 1, n_lines - 1, "Transfer-Encoding", &count);
	if (count) {
		send_error(fd, 400, "Bad Request", IPC_ERR_BAD_REQUEST,
			   "Transfer-Encoding in a request is not supported: send Content-Length");
		goto out;
	}
	const char *cl = header(lines + 1, n_lines - 1, "Content-Length", &count);
	long body_len = 0;
	if (count > 1 || (cl && cli_parse_int(cl, 0, LONG_MAX, &body_len) < 0)) {
		send_error(fd, 400, "Bad Request", IPC_ERR_BAD_REQUEST, "invalid Content-Length");
		goto out;
	}
	if (body_len > IPC_MAX_BODY_BYTES) {
		send_error(fd, 413, "Payload Too Large", IPC_ERR_PAYLOAD_TOO_LARGE,
			   "body over 1 MiB (IPC_MAX_BODY_BYTES)");
		goto out;
	}
	/* The body: what came with the head, then the rest. */
	size_t have = len - (size_t)(end + 4 - buf);
	body = xmalloc((size_t)body_len + 1);
	if (have > (size_t)body_len)
		have = (size_t)body_len; /* a second request after it is not served */
	memcpy(body, end + 4, have);
	while (have < (size_t)body_len) {
		ssize_t got = recv_by(fd, body + have, (size_t)body_len - have, deadline);
		if (got <= 0)
			goto out;
		have += (size_t)got;
	}

	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	strncpy(sa.sun_path, v->socket_path, sizeof(sa.sun_path) - 1);
	daemon = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (daemon < 0 || connect(daemon, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		char *msg = xasprintf("cannot connect to holod at %s: %s", v->socket_path, strerror(errno));
		send_error(fd, 502, "Bad Gateway", "unreachable", msg);
		free(msg);
		goto out;
	}
	char *req = xasprintf("%s %s%s%s HTTP/1.1\r\nHost: holod\r\nConnection: close\r\n"
			      "Content-Type: application/json\r\nContent-Length: %ld\r\n\r\n",
			      method, path, query ? "?" : "", query ? query : "", body_len);
	r = send_all(daemon, req, strlen(req));
	free(req);
	if (r == 0 && body_len > 0)
		r = send_all(daemon, body, (size_t)body_len);
	if (r == 0)
		pump(fd, daemon);
out:
	if (daemon >= 0)
		close(daemon);
	free(body);
	free(buf);
}

static void *conn_main(void *arg)
{
	struct view_conn *vc = arg;
	serve(vc->v, vc->fd);
	close(vc->fd);
	atomic_fetch_sub(&vc->v->conns, 1);
	free(vc);
	return NULL;
}

/* ---- the command ---------------------------------------------------------------------------- */

/* Runs `xdg-open URL` (or $BROWSER URL) without waiting for it. */
static void open_browser(struct cli_context *ctx, const char *url)
{
	const char *browser = getenv("BROWSER");
	if (!browser || !*browser)
		browser = "xdg-open";
	pid_t pid = fork();
	if (pid == 0) {
		execlp(browser, browser, url, (char *)NULL);
		fprintf(stderr, "holoctl view: cannot start %s: %s (open the address yourself)\n", browser,
			strerror(errno));
		_exit(127);
	}
	if (pid < 0)
		fprintf(ctx->err, "holoctl view: cannot start %s: %s\n", browser, strerror(errno));
}

static int view_run(struct cli_context *ctx, int argc, char **argv)
{
	const struct cli_command *cmd = &cli_cmd_view;
	struct view *v = NULL;
	long id, port = 0;
	bool open = false;
	int c, r, lfd = -1;
	json_t *task = NULL;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, view_options, NULL)) != -1) {
		switch (c) {
		case VIEW_OPT_PORT:
			if (cli_parse_int(optarg, 0, 65535, &port) < 0)
				return cli_usage_error(ctx, cmd, "--port: expected 0..65535, not '%s'",
						       optarg);
			break;
		case VIEW_OPT_OPEN:
			open = true;
			break;
		default:
			r = cli_common_option(ctx, cmd, c, argv);
			if (r >= 0)
				return r;
		}
	}
	if (argc - optind != 1)
		return cli_usage_error(ctx, cmd, "needs exactly one task ID");
	r = cli_parse_task_id(ctx, cmd, argv[optind], &id);
	if (r != 0)
		return r;
	/* The task must exist (and holod answer) before a page is promised. */
	char *path = xasprintf(IPC_API_PREFIX "/tasks/%ld", id);
	bool json = ctx->json;
	ctx->json = false;
	r = cli_api_json(ctx, "GET", path, NULL, &task);
	ctx->json = json;
	free(path);
	if (r != 0) {
		json_decref(task);
		return r;
	}

	/* Heap, taken only once the arguments are read (--help and usage errors return
	 * above): the connections' threads may outlive this function (they end with the
	 * process). */
	v = xcalloc(1, sizeof(*v));
	/* the task's display: the one screen the page may ask for */
	const char *display = json_string_value(json_object_get(task, "display"));
	v->display = display ? xstrdup(display) : NULL;
	json_decref(task);
	uint8_t raw[VIEW_TOKEN_BYTES];
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
		r = cli_error(ctx, "cannot draw the page's token: %s", strerror(errno));
		goto out;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(v->token + 2 * i, 3, "%02x", raw[i]);

	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons((uint16_t)port),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t sl = sizeof(sa);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
		r = cli_error(ctx, "cannot listen on 127.0.0.1:%ld: %s", port, strerror(errno));
		goto out;
	}
	snprintf(v->host, sizeof(v->host), "127.0.0.1:%u", (unsigned)ntohs(sa.sin_port));
	snprintf(v->origin, sizeof(v->origin), "http://%s", v->host);
	v->socket_path = xstrdup(cli_http_socket_path(ctx->http));
	v->task_id = id;

	char *url = xasprintf("%s/%s" IPC_API_PREFIX "/tasks/%ld/view", v->origin, v->token, id);
	if (ctx->json) {
		json_t *o = json_pack("{s:s, s:I}", "url", url, "task_id", (json_int_t)id);
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		fprintf(ctx->out, "%s\n", text ? text : "{}");
		free(text);
	} else {
		fprintf(ctx->out, "%s\n", url);
		fprintf(ctx->err,
			"holoctl view: task %ld's live page, served on 127.0.0.1 until Ctrl-C; the "
			"address is its key: do not share it\n",
			id);
	}
	fflush(ctx->out);
	if (open)
		open_browser(ctx, url);
	free(url);

	struct sigaction act = {.sa_handler = view_signal}, old_int, old_term;
	sigemptyset(&act.sa_mask);
	view_stop = 0;
	sigaction(SIGINT, &act, &old_int);
	sigaction(SIGTERM, &act, &old_term);
	signal(SIGCHLD, SIG_IGN); /* the browser started by --open is not waited for */
	while (!view_stop) {
		struct pollfd p = {.fd = lfd, .events = POLLIN};
		if (poll(&p, 1, VIEW_POLL_MS) <= 0)
			continue;
		int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
		if (fd < 0)
			continue;
		if (atomic_fetch_add(&v->conns, 1) >= VIEW_MAX_CONNECTIONS) {
			send_error(fd, 503, "Service Unavailable", IPC_ERR_TOO_MANY,
				   "holoctl view serves 32 connections at once");
			close(fd);
			atomic_fetch_sub(&v->conns, 1);
			continue;
		}
		struct view_conn *vc = xmalloc(sizeof(*vc));
		*vc = (struct view_conn){.v = v, .fd = fd};
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		if (pthread_create(&t, &attr, conn_main, vc) != 0) {
			close(fd);
			free(vc);
			atomic_fetch_sub(&v->conns, 1);
		}
		pthread_attr_destroy(&attr);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	r = CLI_EXIT_OK;
out:
	if (lfd >= 0)
		close(lfd);
	/* The connections' threads still use v: the process ends with them (holoctl exits). */
	if (atomic_load(&v->conns) == 0) {
		free(v->socket_path);
		free(v->display);
		free(v);
	}
	return r;
}

const struct cli_command cli_cmd_view = {
	.name = "view",
	.args = "[--port N] [--open] ID",
	.summary = "watch a task live in a browser: its screen, steps and controls",
	.help = "Prints the address of task ID's live page and serves it until Ctrl-C: the\n"
		"screen of its display refreshed at a rate the page sets, the model's thought\n"
		"as it is decoded, each step's action and result, and buttons to pause,\n"
		"take over, resume, cancel, answer its question, approve or deny a held step.\n"
		"The page comes from holod through holoctl, which listens on 127.0.0.1 only,\n"
		"for connections of its own user whose address holds the printed token.\n"
		"  --port N   listen on port N (default 0: one the kernel picks)\n"
		"  --open     open the address in a browser ($BROWSER, else xdg-open)\n"
		"With --json, prints {\"url\": ..., \"task_id\": ...} instead.\n",
	.run = view_run,
};
