/* holoctl's HTTP client over a Unix socket; contracts in http.h. */
#include "http.h"

#include "common.h"
#include "holod-config.h"

#include <ctype.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/un.h>

/* Only the connection attempt is bounded: an action such as `wait 30` legitimately keeps a
 * request open for a long time, and an event stream lasts as long as its task. */
#define CONNECT_TIMEOUT_MS 10000L

struct cli_http {
	CURL *curl;
	char *socket_path;
	char errbuf[CURL_ERROR_SIZE];
};

/* What the write callback fills: either a whole body or lines handed to line_fn. */
struct sink {
	CURL *curl;
	char *sha256; /* X-Holod-SHA256, from the header callback */
	char *data;
	size_t size, alloc, limit;
	cli_http_line_fn line_fn; /* NULL: collect the body */
	void *userdata;
	bool streaming; /* decided at the first chunk from the HTTP status */
	bool decided;
	int error;			  /* why the callback stopped the transfer */
	volatile sig_atomic_t *interrupt; /* other than interrupt_seen: abort (-EINTR) */
	sig_atomic_t interrupt_seen;
};

/* curl calls it as data moves and about once a second while none does. */
static int xferinfo_cb(void *userdata, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
		       curl_off_t ulnow)
{
	struct sink *s = userdata;
	(void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
	return *s->interrupt != s->interrupt_seen ? 1 : 0;
}

int cli_http_global_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : -ENOMEM;
}

void cli_http_global_cleanup(void)
{
	curl_global_cleanup();
}

struct cli_http *cli_http_create(const char *socket_path)
{
	struct cli_http *h = xcalloc(1, sizeof(*h));
	h->socket_path = xstrdup(socket_path);
	h->curl = curl_easy_init();
	if (!h->curl) {
		cli_http_destroy(h);
		errno = ENOMEM;
		return NULL;
	}
	return h;
}

void cli_http_destroy(struct cli_http *h)
{
	if (!h)
		return;
	if (h->curl)
		curl_easy_cleanup(h->curl);
	free(h->socket_path);
	free(h);
}

const char *cli_http_socket_path(const struct cli_http *h)
{
	return h->socket_path;
}

void cli_http_response_finish(struct cli_http_response *r)
{
	if (!r)
		return;
	free(r->body);
	free(r->content_type);
	free(r->sha256);
	*r = (struct cli_http_response){0};
}

static int sink_append(struct sink *s, const char *p, size_t n)
{
	size_t need;
	if (!size_add_ok(s->size, n, &need) || !size_add_ok(need, 1, &need) || need - 1 > s->limit)
		return -EMSGSIZE;
	if (need > s->alloc) {
		size_t alloc = s->alloc ? s->alloc : 4096;
		while (alloc < need)
			alloc = alloc > s->limit ? need : alloc * 2;
		/* The size is bounded by a limit but comes from the server: handle OOM instead of
		 * aborting. */
		char *data = realloc(s->data, alloc);
		if (!data)
			return -ENOMEM;
		s->data = data;
		s->alloc = alloc;
	}
	memcpy(s->data + s->size, p, n);
	s->size += n;
	s->data[s->size] = '\0';
	return 0;
}

/* Hands every complete line in `p` (plus the pending partial line) to line_fn. */
static int sink_lines(struct sink *s, const char *p, size_t n)
{
	while (n > 0) {
		const char *nl = memchr(p, '\n', n);
		size_t take = nl ? (size_t)(nl - p) : n;
		int r = sink_append(s, p, take);
		if (r < 0)
			return r;
		if (!nl)
			return 0;
		size_t len = s->size;
		if (len > 0 && s->data[len - 1] == '\r')
			s->data[--len] = '\0';
		r = s->line_fn(s->data ? s->data : "", len, s->userdata);
		s->size = 0;
		if (r < 0)
			return r;
		p += take + 1;
		n -= take + 1;
	}
	return 0;
}

static size_t write_cb(char *p, size_t one, size_t n, void *userdata)
{
	struct sink *s = userdata;
	int r;

	if (!s->decided) {
		long status = 0;
		curl_easy_getinfo(s->curl, CURLINFO_RESPONSE_CODE, &status);
		s->streaming = s->line_fn && status >= 200 && status < 300;
		if (s->streaming)
			s->limit = CLI_HTTP_MAX_EVENT_LINE;
		s->decided = true;
	}
	r = s->streaming ? sink_lines(s, p, n) : sink_append(s, p, n);
	if (r < 0) {
		s->error = r;
		return 0; /* makes curl fail the transfer with CURLE_WRITE_ERROR */
	}
	return n;
}

/* Picks X-Holod-SHA256 out of the response headers; anything but 64 hex digits is ignored. */
static size_t header_cb(char *p, size_t one, size_t n, void *userdata)
{
	static const char name[] = "x-holod-sha256:";
	struct sink *s = userdata;
	size_t len = n, start = sizeof(name) - 1;

	if (n < start || strncasecmp(p, name, start) != 0)
		return n;
	while (start < len && (p[start] == ' ' || p[start] == '\t'))
		start++;
	while (len > start && (p[len - 1] == '\r' || p[len - 1] == '\n' || p[len - 1] == ' '))
		len--;
	if (len - start != 64)
		return n;
	for (size_t i = start; i < len; i++)
		if (!isxdigit((unsigned char)p[i]))
			return n;
	free(s->sha256);
	s->sha256 = xstrndup(p + start, 64);
	for (char *c = s->sha256; *c; c++)
		*c = (char)tolower((unsigned char)*c);
	return n;
}

static int translate_curl(struct cli_http *h, CURLcode code)
{
	long os_errno = 0;

	switch (code) {
	case CURLE_OK:
		return 0;
	case CURLE_COULDNT_CONNECT:
		curl_easy_getinfo(h->curl, CURLINFO_OS_ERRNO, &os_errno);
		return os_errno > 0 ? -(int)os_errno : -ECONNREFUSED;
	case CURLE_OPERATION_TIMEDOUT:
		return -ETIMEDOUT;
	case CURLE_OUT_OF_MEMORY:
		return -ENOMEM;
	case CURLE_GOT_NOTHING:
	case CURLE_SEND_ERROR:
	case CURLE_RECV_ERROR:
	/* The answer stopped before its announced end: the server went away (holod killed
	 * mid-stream), not a malformed answer. */
	case CURLE_PARTIAL_FILE:
		return -ECONNRESET;
	case CURLE_WEIRD_SERVER_REPLY:
	case CURLE_BAD_CONTENT_ENCODING:
	case CURLE_HTTP2:
	case CURLE_UNSUPPORTED_PROTOCOL:
		return -EPROTO;
	default:
		log_debug("curl: %s (%s)", curl_easy_strerror(code), h->errbuf);
		return -EIO;
	}
}

static int perform(struct cli_http *h, const char *method, const char *path, const char *body,
		   cli_http_line_fn line_fn, void *userdata, volatile sig_atomic_t *interrupt,
		   sig_atomic_t seen, struct cli_http_response *ret)
{
	struct sockaddr_un sun;
	struct curl_slist *headers = NULL;
	struct sink s = {.curl = h->curl,
			 .limit = CLI_HTTP_MAX_BODY,
			 .line_fn = line_fn,
			 .userdata = userdata,
			 .interrupt = interrupt,
			 .interrupt_seen = seen};
	struct cli_http_response resp = {0};
	char *url = NULL, *ct = NULL;
	CURLcode code;
	int r;

	if (strlen(h->socket_path) >= sizeof(sun.sun_path))
		return -ENAMETOOLONG;
	if (path[0] != '/')
		return -EINVAL;

	/* reset() keeps the connection cache, so several requests share one connection. */
	curl_easy_reset(h->curl);
	url = xasprintf("http://holod%s", path);
	h->errbuf[0] = '\0';
	curl_easy_setopt(h->curl, CURLOPT_UNIX_SOCKET_PATH, h->socket_path);
	curl_easy_setopt(h->curl, CURLOPT_URL, url);
	curl_easy_setopt(h->curl, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h->curl, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	curl_easy_setopt(h->curl, CURLOPT_ERRORBUFFER, h->errbuf);
	curl_easy_setopt(h->curl, CURLOPT_WRITEFUNCTION, write_cb);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, &s);
	curl_easy_setopt(h->curl, CURLOPT_HEADERFUNCTION, header_cb);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, &s);
	curl_easy_setopt(h->curl, CURLOPT_USERAGENT, "holoctl/" HOLOD_VERSION);
	if (interrupt) {
		curl_easy_setopt(h->curl, CURLOPT_NOPROGRESS, 0L);
		curl_easy_setopt(h->curl, CURLOPT_XFERINFOFUNCTION, xferinfo_cb);
		curl_easy_setopt(h->curl, CURLOPT_XFERINFODATA, &s);
	}
	if (strcmp(method, "GET") == 0) {
		curl_easy_setopt(h->curl, CURLOPT_HTTPGET, 1L);
	} else {
		if (strcmp(method, "POST") == 0) {
			curl_easy_setopt(h->curl, CURLOPT_POST, 1L);
		} else {
			curl_easy_setopt(h->curl, CURLOPT_CUSTOMREQUEST, method);
		}
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDS, body ? body : "");
		curl_easy_setopt(h->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(body ? strlen(body) : 0));
	}
	if (body)
		headers = curl_slist_append(headers, "Content-Type: application/json");
	/* An empty Expect: stops curl from waiting for a 100-continue on larger bodies. */
	headers = curl_slist_append(headers, "Expect:");
	if (!headers) {
		r = -ENOMEM;
		goto cleanup_url;
	}
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, headers);

	code = curl_easy_perform(h->curl);
	if (code == CURLE_ABORTED_BY_CALLBACK && interrupt && *interrupt != seen) {
		r = -EINTR;
		goto cleanup_sink;
	}
	if (code == CURLE_WRITE_ERROR && s.error < 0) {
		r = s.error;
		goto cleanup_sink;
	}
	r = translate_curl(h, code);
	if (r < 0)
		goto cleanup_sink;

	if (s.streaming && s.size > 0) {
		/* The last line of the stream had no newline. */
		r = s.line_fn(s.data, s.size, s.userdata);
		if (r < 0)
			goto cleanup_sink;
	}

	curl_easy_getinfo(h->curl, CURLINFO_RESPONSE_CODE, &resp.status);
	curl_easy_getinfo(h->curl, CURLINFO_CONTENT_TYPE, &ct);
	if (resp.status < 100 || resp.status > 599) {
		r = -EPROTO;
		goto cleanup_sink;
	}
	resp.content_type = ct ? xstrdup(ct) : NULL;
	resp.sha256 = s.sha256;
	s.sha256 = NULL;
	if (s.streaming) {
		resp.body = xstrdup("");
	} else {
		resp.body = s.data ? s.data : xstrdup("");
		resp.size = s.size;
		s.data = NULL;
	}
	*ret = resp;
	r = 0;

cleanup_sink:
	free(s.data);
	free(s.sha256);
	curl_slist_free_all(headers);
cleanup_url:
	/* The handle must not keep pointers into this frame (sink, headers, error buffer user). */
	curl_easy_setopt(h->curl, CURLOPT_HTTPHEADER, NULL);
	curl_easy_setopt(h->curl, CURLOPT_WRITEDATA, NULL);
	curl_easy_setopt(h->curl, CURLOPT_HEADERDATA, NULL);
	free(url);
	return r;
}

int cli_http_request(struct cli_http *h, const char *method, const char *path, const char *body,
		     struct cli_http_response *ret)
{
	return perform(h, method, path, body, NULL, NULL, NULL, 0, ret);
}

int cli_http_stream(struct cli_http *h, const char *path, cli_http_line_fn line_fn, void *userdata,
		    volatile sig_atomic_t *interrupt, sig_atomic_t seen, struct cli_http_response *ret)
{
	return perform(h, "GET", path, NULL, line_fn, userdata, interrupt, seen, ret);
}

const char *cli_http_strerror(const struct cli_http *h, int err, char *buf, size_t size)
{
	const char *p = h ? h->socket_path : "(no socket)";
	struct stat st;

	switch (-err) {
	case ENOENT:
		snprintf(buf, size,
			 "cannot connect to %s: no such file (is holod running? start it with "
			 "`holod`, or pick another daemon with --socket PATH)",
			 p);
		break;
	case ECONNREFUSED:
		/* connect() refuses a regular file or a directory the same way as a socket nobody
		 * listens on: only the first is a stale socket. */
		if (stat(p, &st) == 0 && !S_ISSOCK(st.st_mode)) {
			snprintf(buf, size,
				 "cannot connect to %s: it is not a socket but a %s (check --socket "
				 "and $HOLOD_SOCKET)",
				 p,
				 S_ISDIR(st.st_mode) ? "directory" :
				 S_ISREG(st.st_mode) ? "regular file" :
						       "special file");
			break;
		}
		snprintf(buf, size,
			 "cannot connect to %s: connection refused (a stale socket: holod is not "
			 "running; start it with `holod`)",
			 p);
		break;
	case EACCES:
	case EPERM:
		snprintf(buf, size,
			 "cannot connect to %s: permission denied (holod only serves the user that "
			 "runs it; run holoctl as that user)",
			 p);
		break;
	case ENOTDIR:
		snprintf(buf, size,
			 "cannot connect to %s: a path component is not a directory (check "
			 "--socket)",
			 p);
		break;
	case ENAMETOOLONG:
		snprintf(buf, size,
			 "socket path %s is too long for a Unix socket (use a shorter --socket "
			 "path)",
			 p);
		break;
	case ETIMEDOUT:
		snprintf(buf, size,
			 "holod at %s did not accept the connection in time (is it stuck? check "
			 "its log)",
			 p);
		break;
	case ECONNRESET:
		snprintf(buf, size,
			 "holod at %s closed the connection without a complete answer (check "
			 "holod's log)",
			 p);
		break;
	case EPROTO:
		snprintf(buf, size,
			 "%s answered with a malformed HTTP response (is it really holod's socket?)", p);
		break;
	case EMSGSIZE:
		snprintf(buf, size,
			 "holod at %s sent more than holoctl accepts (%u bytes per response, %u "
			 "per event line)",
			 p, CLI_HTTP_MAX_BODY, CLI_HTTP_MAX_EVENT_LINE);
		break;
	default:
		snprintf(buf, size, "cannot talk to holod at %s: %s", p, strerror(-err));
		break;
	}
	return buf;
}
