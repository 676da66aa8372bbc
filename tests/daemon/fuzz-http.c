/* Fuzz target for holod's HTTP request handling: the bytes of one client connection, sent to a
 * real http_server (libmicrohttpd's parser, holod's access checks, limits, routing and
 * handlers, and the ipc parsers behind them) with a journal, a screenshot writer, an engine
 * thread without a model and a scheduler whose display does not exist (tasks fail at once).
 *
 * Input: what a client writes on the socket; then the client closes its sending side and reads
 * until the server closes. Invariants (a violation aborts, so the fuzzer reports it like a
 * crash): the server closes the connection within HTTP_FUZZ_TIMEOUT_MS; what it sent, if
 * anything, starts with an HTTP/1.x status line; every answer of holod's that says it is JSON
 * (docs/api.md) has a body that is a JSON object, with {"error": {"code", "message"}} when the
 * status is 400 or more.
 *
 * Built with libFuzzer by tools/fuzz/build.sh (docs/fuzzing.md). Without HOLOD_LIBFUZZER this
 * file builds a replay driver (the `unit` test fuzz-http-corpus): every file of the corpus
 * directory given as argv[1] must have the outcome its name promises (ok-*: the first answer is
 * 2xx; bad-*: it is 4xx/5xx, or there is none). The seeds do not depend on each other's tasks.
 * `--write-seeds DIR` writes the seed corpus (the table below) into DIR.
 */
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "common.h"
#include "model-worker.h"
#include "http.h"
#include "journal.h"
#include "scheduler.h"
#include "shotwriter.h"

#define HTTP_FUZZ_TIMEOUT_MS 5000
#define HTTP_FUZZ_MAX_REPLY (8u << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct {
	char *dir, *socket_path;
	int listen_fd;
	struct journal *journal;
	struct shotwriter *writer;
	struct model_worker *worker;
	struct scheduler *scheduler;
	struct http_server *http;
} srv = {.listen_fd = -1};

static int last_status;		 /* of the first answer; 0: none */
static const uint8_t *cur_reply; /* what the server sent, shown when an invariant fails */
static size_t cur_reply_len;

static void check(bool cond, const char *what)
{
	if (!cond) {
		fprintf(stderr, "invariant violated: %s\n", what);
		if (cur_reply) {
			fprintf(stderr, "the server sent %zu bytes:\n", cur_reply_len);
			fwrite(cur_reply, 1, MIN(cur_reply_len, (size_t)2048), stderr);
			fputc('\n', stderr);
		}
		abort();
	}
}

static void remove_state_dir(void)
{
	char *cmd = xasprintf("rm -rf '%s'", srv.dir);

	if (system(cmd) != 0)
		fprintf(stderr, "cannot remove %s\n", srv.dir);
	free(cmd);
}

static void server_start(void)
{
	/* tmpfs when there is one: the journal is written at every task */
	const char *tmp = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : getenv("TMPDIR");
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char *db, *shots;

	log_set_max_level(LOG_LEVEL_ERROR);
	srv.dir = xasprintf("%s/holod-fuzz-http-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	check(mkdtemp(srv.dir) != NULL, "mkdtemp");
#ifdef HOLOD_LIBFUZZER
	/* libFuzzer ends with exit() while the server runs: only the directory is cleaned up */
	atexit(remove_state_dir);
#endif
	shots = path_join(srv.dir, "screenshots");
	check(path_mkdir_p(shots, 0700) == 0, "mkdir screenshots");
	free(shots);
	db = path_join(srv.dir, "holod.db");
	srv.journal = journal_open(db);
	free(db);
	check(srv.journal != NULL, "journal_open");
	srv.writer = shotwriter_create(srv.dir, srv.journal, NULL, NULL);
	srv.worker = model_worker_create(NULL, NULL);
	check(srv.writer && srv.worker, "writer and model worker");
	struct scheduler_config sc = {
		/* no such server: every task fails at once */
		.displays = (const char *const[]){":65533"},
		.n_displays = 1,
		.settle_ms = 0,
		.max_steps = 100,
		.max_seconds = 5,
		.agent = {.worker = srv.worker, .window = 1, .context_tokens = 1024, .step_tokens = 64},
	};
	srv.scheduler = scheduler_create(&sc, srv.journal, srv.writer);
	check(srv.scheduler != NULL, "scheduler_create");

	srv.socket_path = path_join(srv.dir, "h.sock");
	check(strlen(srv.socket_path) < sizeof(sa.sun_path), "socket path length");
	strcpy(sa.sun_path, srv.socket_path);
	srv.listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	check(srv.listen_fd >= 0 && bind(srv.listen_fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		      listen(srv.listen_fd, 64) == 0,
	      "listen");
	struct http_context hc = {
		.scheduler = srv.scheduler,
		.journal = srv.journal,
		.worker = srv.worker,
		.state_dir = srv.dir,
		.display = ":65533",
		.socket_path = srv.socket_path,
	};
	srv.http = http_server_create(srv.listen_fd, &hc);
	check(srv.http != NULL, "http_server_create");
}

#ifndef HOLOD_LIBFUZZER
static void server_stop(void)
{
	if (!srv.http)
		return;
	scheduler_stop(srv.scheduler, "fuzz replay done");
	http_server_destroy(srv.http);
	scheduler_destroy(srv.scheduler);
	model_worker_destroy(srv.worker);
	shotwriter_destroy(srv.writer);
	journal_close(srv.journal);
	close(srv.listen_fd);
	remove_state_dir();
	free(srv.socket_path);
	free(srv.dir);
}
#endif

/* Sends `data`, closes the sending side and reads until the server closes. */
static uint8_t *exchange(const uint8_t *data, size_t size, size_t *ret_len)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	size_t off = 0, len = 0, cap = 4096;
	uint8_t *reply = xmalloc(cap + 1);
	bool sending = true;
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	strcpy(sa.sun_path, srv.socket_path);
	check(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect");
	if (size == 0) {
		shutdown(fd, SHUT_WR);
		sending = false;
	}
	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN | (sending ? POLLOUT : 0)};
		int n = poll(&p, 1, HTTP_FUZZ_TIMEOUT_MS);

		if (n < 0 && errno == EINTR)
			continue; /* libFuzzer's timer signal */
		check(n >= 0, "poll");
		if (n == 0) {
			json_t *snap = scheduler_snapshot(srv.scheduler);
			char *text = snap ? json_dumps(snap, JSON_COMPACT) : NULL;

			fprintf(stderr, "no answer after %d ms (%zu bytes received); scheduler: %s\n",
				HTTP_FUZZ_TIMEOUT_MS, len, text ? text : "?");
			free(text);
			json_decref(snap);
		}
		check(n > 0, "the server answers and closes the connection in time");
		if (sending && (p.revents & (POLLOUT | POLLERR | POLLHUP))) {
			ssize_t w = send(fd, data + off, size - off, MSG_NOSIGNAL);

			if (w < 0 && errno != EAGAIN) {
				sending = false; /* the server stopped reading: its answer follows */
			} else if (w > 0 && (off += (size_t)w) == size) {
				shutdown(fd, SHUT_WR);
				sending = false;
			}
		}
		if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t r = recv(fd, reply + len, cap - len, 0);

			if (r == 0 || (r < 0 && errno != EAGAIN))
				break;
			if (r > 0) {
				len += (size_t)r;
				check(len <= HTTP_FUZZ_MAX_REPLY, "an answer of bounded size");
				if (len == cap) {
					cap *= 2;
					reply = xrealloc(reply, cap + 1);
				}
			}
		}
	}
	close(fd);
	reply[len] = '\0';
	*ret_len = len;
	return reply;
}

/* Checks the answers in `reply`; returns the status of the first, 0 when there is none. */
static int check_reply(const uint8_t *reply, size_t len)
{
	const char *p = (const char *)reply, *end = p + len;
	int first = 0;

	if (!reply || len == 0)
		return 0;
	while (p < end) {
		const char *head_end = memmem(p, (size_t)(end - p), "\r\n\r\n", 4);
		bool json = false, typed = false;
		long long clen = -1;
		int status;

		check(end - p >= 12 && (memcmp(p, "HTTP/1.1 ", 9) == 0 || memcmp(p, "HTTP/1.0 ", 9) == 0),
		      "an answer starts with an HTTP/1.x status line");
		status = (p[9] - '0') * 100 + (p[10] - '0') * 10 + (p[11] - '0');
		check(status >= 100 && status <= 599, "a 3-digit status");
		if (!first)
			first = status;
		check(head_end != NULL, "an answer's header ends with an empty line");
		for (const char *h = memchr(p, '\n', (size_t)(head_end - p)); h && h < head_end;
		     h = memchr(h + 1, '\n', (size_t)(head_end - h))) {
			if (strncasecmp(h + 1, "Content-Type: ", 14) == 0)
				typed = true;
			if (strncasecmp(h + 1, "Content-Type: application/json", 30) == 0)
				json = true;
			else if (strncasecmp(h + 1, "Content-Length: ", 16) == 0)
				clen = strtoll(h + 17, NULL, 10);
		}
		p = head_end + 4;
		/* holod types every answer it makes; an untyped one is libmicrohttpd's own error
		 * page, which for some malformed requests repeats its header block (see
		 * docs/fuzzing.md): nothing after it is holod's. */
		if (!typed)
			break;
		if (clen < 0)
			break; /* chunked or until close: an event stream, or the last answer */
		check(clen <= end - p, "the body is as long as Content-Length says");
		if (json) {
			json_t *o = json_loadb(p, (size_t)clen, 0, NULL);

			check(json_is_object(o), "a JSON answer is an object");
			if (status >= 400) {
				json_t *e = json_object_get(o, "error");

				check(json_is_string(json_object_get(e, "code")) &&
					      json_is_string(json_object_get(e, "message")),
				      "a JSON error has a code and a message");
			}
			json_decref(o);
		}
		p += clen;
	}
	return first;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t len;
	uint8_t *reply;

	if (!srv.http)
		server_start();
	reply = exchange(data, size, &len);
	cur_reply = reply;
	cur_reply_len = len;
	last_status = check_reply(reply, len);
	cur_reply = NULL;
	free(reply);
	return 0;
}

#ifndef HOLOD_LIBFUZZER
#include "fuzz-replay.h"

static const struct {
	const char *name, *text;
} seeds[] = {
	{"ok-status", "GET /v1/status HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"ok-status-http10", "GET /v1/status HTTP/1.0\r\n\r\n"},
	{"ok-tasks-list", "GET /v1/tasks?limit=5&status=failed HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"ok-keepalive-two", "GET /v1/status HTTP/1.1\r\nHost: h\r\n\r\n"
			     "GET /v1/tasks HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"ok-task-script", "POST /v1/tasks HTTP/1.1\r\nHost: h\r\nContent-Length: 63\r\n\r\n"
			   "{\"script\":[{\"tool_name\":\"wait\",\"duration\":0.1}],\"dry_run\":true}"},
	{"bad-task-instruction-no-model", "POST /v1/tasks HTTP/1.1\r\nHost: h\r\nContent-Length: 25\r\n\r\n"
					  "{\"instruction\":\"open it\"}"},
	{"ok-task-chunked", "POST /v1/tasks HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
			    "3f\r\n{\"script\":[{\"tool_name\":\"wait\",\"duration\":0.1}],"
			    "\"dry_run\":true}\r\n0\r\n\r\n"},
	{"bad-not-found", "GET /v1/nothing HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-outside-api", "GET / HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-method", "DELETE /v1/status HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-task-unknown", "GET /v1/tasks/999999999 HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-steps-unknown", "GET /v1/tasks/999999999/steps HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-cancel-unknown", "POST /v1/tasks/999999999/cancel HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-events-unknown", "GET /v1/tasks/999999999/events HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-shot-unknown", "GET /v1/tasks/999999999/steps/1/screenshot HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-id-too-long", "GET /v1/tasks/1234567890123456789 HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-list-limit", "GET /v1/tasks?limit=501 HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-query-unknown", "GET /v1/status?x=1 HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-task-json", "POST /v1/tasks HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n{\"in\""},
	{"bad-task-empty", "POST /v1/tasks HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n"},
	{"bad-task-too-large", "POST /v1/tasks HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999\r\n\r\n"},
	{"bad-action-key", "POST /v1/actions HTTP/1.1\r\nHost: h\r\nContent-Length: 48\r\n\r\n"
			   "{\"action\":{\"tool_name\":\"hotkey\",\"keys\":[\"ctr\"]}}"},
	{"bad-screenshot-no-display", "GET /v1/screenshot HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-screenshot-other-display", "GET /v1/screenshot?display=:9 HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-task-other-display",
	 "POST /v1/tasks HTTP/1.1\r\nHost: h\r\nContent-Length: 63\r\n\r\n"
	 "{\"script\":[{\"tool_name\":\"wait\",\"duration\":0.1}],\"display\":\":9\"}"},
	{"ok-cancel-all", "POST /v1/tasks/cancel HTTP/1.1\r\nHost: h\r\n\r\n"},
	{"bad-garbage", "\x01\x02 nothing like HTTP\r\n\r\n"},
	{"bad-no-version", "GET /v1/status\r\n\r\n"},
	{"bad-empty", ""},
};

static int write_seeds(const char *dir)
{
	for (size_t i = 0; i < ARRAY_SIZE(seeds); i++) {
		char path[4096];
		FILE *f;

		snprintf(path, sizeof(path), "%s/%s", dir, seeds[i].name);
		f = fopen(path, "wb");
		if (!f || fwrite(seeds[i].text, 1, strlen(seeds[i].text), f) != strlen(seeds[i].text) ||
		    fclose(f) != 0) {
			perror(path);
			return 1;
		}
	}
	return 0;
}

static bool replay_one(const uint8_t *data, size_t size)
{
	LLVMFuzzerTestOneInput(data, size);
	return last_status >= 200 && last_status < 300;
}

int main(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0)
		return write_seeds(argv[2]);
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS-DIR | --write-seeds DIR\n", argv[0]);
		return 2;
	}
	int r = fuzz_replay(argv[1], replay_one, 20);
	server_stop();
	return r;
}
#endif
