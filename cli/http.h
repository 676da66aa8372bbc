/* holoctl's HTTP client: HTTP/1.1 over holod's Unix socket (libcurl, CURLOPT_UNIX_SOCKET_PATH).
 *
 * One struct cli_http is one curl easy handle bound to one socket path; requests on it run one at
 * a time on the calling thread. libcurl's global state is set up by cli_http_global_init() and
 * torn down by cli_http_global_cleanup(), both called once from main() (sanitizer builds report
 * curl's global allocations as leaks otherwise).
 *
 * Errors: functions return >= 0 or a negative errno. A failure to reach the daemon returns the
 * errno of the failed connect() (-ENOENT, -ECONNREFUSED, -EACCES, ...); cli_http_strerror() turns
 * it into a sentence that names the cause and the fix. An HTTP error status from the daemon is not
 * an error of this layer: the response carries the status and the daemon's body.
 */
#pragma once

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>

/* Named limits on what the daemon may send. */
#define CLI_HTTP_MAX_BODY (64u * 1024u * 1024u) /* one response body (a full-screen PNG fits) */
#define CLI_HTTP_MAX_EVENT_LINE (1024u * 1024u) /* one NDJSON event line */

struct cli_http;

struct cli_http_response {
	long status; /* HTTP status code */
	char *body;  /* NUL-terminated (the NUL is not counted in size); owned by the response */
	size_t size;
	char *content_type; /* NULL when the daemon sent none */
	char *sha256;	    /* X-Holod-SHA256 (64 lowercase hex digits, the journaled hash of a
			       screenshot); NULL when absent or malformed */
};

int cli_http_global_init(void);
void cli_http_global_cleanup(void);

/* NULL + errno on failure. socket_path is copied. */
struct cli_http *cli_http_create(const char *socket_path);
void cli_http_destroy(struct cli_http *h);
const char *cli_http_socket_path(const struct cli_http *h);

/* Sends `method` `path` (e.g. "GET", "/v1/status") with an optional JSON body (NULL for none).
 * On success *ret holds the response (any HTTP status); release it with cli_http_response_finish().
 * -EMSGSIZE when the body exceeds CLI_HTTP_MAX_BODY, -EPROTO for a malformed response. */
int cli_http_request(struct cli_http *h, const char *method, const char *path, const char *body,
		     struct cli_http_response *ret);
void cli_http_response_finish(struct cli_http_response *r);

/* Called once per complete line of a streamed response (without the newline, NUL-terminated).
 * Return >= 0 to continue, < 0 to stop the stream with that error. */
typedef int (*cli_http_line_fn)(const char *line, size_t len, void *userdata);

/* GET `path` and deliver the body line by line as chunks arrive when the status is 2xx. For any
 * other status the body is collected instead and returned in *ret like cli_http_request() (line_fn
 * is not called). A final line without a newline is delivered too. Returns the callback's negative
 * value if it stopped the stream, -EMSGSIZE when a line exceeds CLI_HTTP_MAX_EVENT_LINE, -EINTR
 * when `*interrupt` (may be NULL; a signal handler's counter) differs from `seen`: it is looked
 * at as data arrives and at least once a second while none does. */
int cli_http_stream(struct cli_http *h, const char *path, cli_http_line_fn line_fn, void *userdata,
		    volatile sig_atomic_t *interrupt, sig_atomic_t seen, struct cli_http_response *ret);

/* A sentence for a negative errno returned by this module, naming the cause and the fix, e.g.
 * "cannot connect to /run/user/1000/holod/holod.sock: no such file (is holod running? start it
 * with `holod`)". Returns a pointer into `buf`. */
const char *cli_http_strerror(const struct cli_http *h, int err, char *buf, size_t size);
