/* A scripted OpenAI-compatible server for the remote provider's tests (remote-fake.sh).
 *
 *   fake-openai --port-file FILE --script FILE --record DIR
 *
 * Listens on 127.0.0.1 (a free port, written to FILE once it listens). GET /v1/models names one
 * model, "fake-model", owned by "vllm" (so holod, with --remote-server auto, sends vLLM's
 * structured_outputs and its one-text-part layout). Each POST
 * /v1/chat/completions takes the next line of the script file (the last line repeats; the count
 * starts over whenever the file's contents change) and records the request's body as
 * DIR/req-N.json and its Authorization header as DIR/req-N.auth (N counts every POST). A line:
 *   ok TEXT             TEXT streamed as server-sent events in 5-byte deltas, then the usage
 *   think FIELD R|TEXT  as ok, after R streamed in FIELD deltas ("reasoning" or
 *                       "reasoning_content"), as a server's reasoning parser sends a think block
 *   plain TEXT          TEXT in one non-streamed JSON answer
 *   status CODE [S]     HTTP CODE with an OpenAI-style error body (Retry-After: S)
 *   slow MS TEXT        as ok, after MS milliseconds
 *   stall TEXT          the first half of TEXT streamed, then nothing for 60 s
 *   schema500           HTTP 500 naming response_format unless the request asks json_object
 *                       (as llama-cpp-python's server answers), then as ok with the rest
 *   strict TEXT         HTTP 400 naming the first of chat_template_kwargs, reasoning_effort
 *                       and thinking_token_budget the request holds (as a strict
 *                       OpenAI-compatible server refuses arguments it does not know), else as ok
 * Runs until killed. */
#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MAX_BODY (64 * 1024 * 1024)

static const char *script_path, *record_dir;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static char *last_script;
static unsigned line_no, n_posts;

struct req {
	char *body;
	size_t len;
};

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	char *buf = NULL;
	size_t len = 0, cap = 0, n;
	char chunk[4096];
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
		if (len + n + 1 > cap) {
			cap = (len + n + 1) * 2;
			buf = realloc(buf, cap);
		}
		memcpy(buf + len, chunk, n);
		len += n;
	}
	fclose(f);
	if (!buf)
		buf = calloc(1, 1);
	buf[len] = '\0';
	return buf;
}

/* The script line for this request (malloc'd) and the request number. */
static char *next_line(unsigned *ret_n)
{
	char *s = read_file(script_path);
	char *line = NULL;

	pthread_mutex_lock(&lock);
	if (!s)
		s = strdup("status 500");
	if (!last_script || strcmp(last_script, s) != 0) {
		free(last_script);
		last_script = strdup(s);
		line_no = 0;
	}
	unsigned want = line_no++, k = 0;
	*ret_n = n_posts++;
	pthread_mutex_unlock(&lock);
	char *save = NULL, *last = NULL;
	for (char *l = strtok_r(s, "\n", &save); l; l = strtok_r(NULL, "\n", &save), k++) {
		last = l;
		if (k == want)
			break;
	}
	line = strdup(last ? last : "status 500");
	free(s);
	return line;
}

static void record(unsigned n, const char *ext, const char *data, size_t len)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/req-%u.%s", record_dir, n, ext);
	FILE *f = fopen(path, "wb");
	if (f) {
		fwrite(data, 1, len, f);
		fclose(f);
	}
}

/* A streamed answer: the events in one buffer, optionally stalling at `stall_at`. */
struct stream {
	char *data;
	size_t len, stall_at;
	bool stall;
};

static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
	struct stream *s = cls;
	size_t end = s->stall ? s->stall_at : s->len;

	if (pos >= end) {
		if (!s->stall)
			return MHD_CONTENT_READER_END_OF_STREAM;
		for (int i = 0; i < 600; i++)
			usleep(100000);
		return MHD_CONTENT_READER_END_WITH_ERROR;
	}
	size_t n = end - pos < max ? end - pos : max;
	memcpy(buf, s->data + pos, n);
	return (ssize_t)n;
}

static void stream_free(void *cls)
{
	struct stream *s = cls;
	free(s->data);
	free(s);
}

static void add(char **buf, size_t *len, const char *text)
{
	size_t n = strlen(text);
	*buf = realloc(*buf, *len + n + 1);
	memcpy(*buf + *len, text, n + 1);
	*len += n;
}

static void add_event(char **buf, size_t *len, json_t *o)
{
	char *t = json_dumps(o, JSON_COMPACT);
	add(buf, len, "data: ");
	add(buf, len, t);
	add(buf, len, "\n\n");
	free(t);
	json_decref(o);
}

static struct MHD_Response *sse_think(const char *field, const char *why, size_t why_len, const char *text,
				      size_t prompt_len, bool stall)
{
	struct stream *s = calloc(1, sizeof(*s));
	size_t tlen = strlen(text), chunks = 0;

	add_event(&s->data, &s->len,
		  json_pack("{s:s, s:s, s:s, s:[{s:i, s:{s:s}}]}", "id", "c1", "object",
			    "chat.completion.chunk", "model", "fake-model", "choices", "index", 0, "delta",
			    "role", "assistant"));
	for (size_t off = 0; field && off < why_len; off += 5, chunks++)
		add_event(&s->data, &s->len,
			  json_pack("{s:s, s:s, s:s, s:[{s:i, s:{s:s%}}]}", "id", "c1", "object",
				    "chat.completion.chunk", "model", "fake-model", "choices", "index", 0,
				    "delta", field, why + off, why_len - off < 5 ? why_len - off : (size_t)5));
	for (size_t off = 0; off < tlen; off += 5, chunks++) {
		if (stall && off >= tlen / 2 && !s->stall) {
			s->stall = true;
			s->stall_at = s->len;
		}
		add_event(&s->data, &s->len,
			  json_pack("{s:s, s:s, s:s, s:[{s:i, s:{s:s%}}]}", "id", "c1", "object",
				    "chat.completion.chunk", "model", "fake-model", "choices", "index", 0,
				    "delta", "content", text + off, tlen - off < 5 ? tlen - off : (size_t)5));
	}
	add_event(&s->data, &s->len,
		  json_pack("{s:s, s:s, s:[{s:i, s:{}, s:s}]}", "id", "c1", "model", "fake-model", "choices",
			    "index", 0, "delta", "finish_reason", "stop"));
	add_event(&s->data, &s->len,
		  json_pack("{s:s, s:s, s:[], s:{s:I, s:I, s:I}}", "id", "c1", "model", "fake-model",
			    "choices", "usage", "prompt_tokens", (json_int_t)(prompt_len / 4),
			    "completion_tokens", (json_int_t)chunks, "total_tokens",
			    (json_int_t)(prompt_len / 4 + chunks)));
	add(&s->data, &s->len, "data: [DONE]\n\n");
	struct MHD_Response *r =
		MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 1024, stream_read, s, stream_free);
	MHD_add_response_header(r, "Content-Type", "text/event-stream");
	return r;
}

static struct MHD_Response *sse(const char *text, size_t prompt_len, bool stall)
{
	return sse_think(NULL, NULL, 0, text, prompt_len, stall);
}

static struct MHD_Response *text_response(const char *type, char *body)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", type);
	return r;
}

static enum MHD_Result answer(struct MHD_Connection *c, struct req *rq)
{
	unsigned n;
	char *line = next_line(&n);
	const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	unsigned status = 200;
	struct MHD_Response *resp = NULL;
	char *rest = strchr(line, ' ');
	const char *arg = rest ? rest + 1 : "";

	record(n, "json", rq->body ? rq->body : "", rq->len);
	record(n, "auth", auth ? auth : "", auth ? strlen(auth) : 0);
	if (strncmp(line, "schema500", 9) == 0) {
		if (!rq->body || !strstr(rq->body, "\"json_object\"")) {
			status = 500;
			resp = text_response("application/json",
					     strdup("{\"error\":{\"message\":\"1 validation error: "
						    "('body', 'response_format', 'type') Input should "
						    "be 'text' or 'json_object'\"}}"));
		} else {
			resp = sse(arg, rq->len, false);
		}
	} else if (strncmp(line, "strict ", 7) == 0) {
		static const char *const unknown[] = {"chat_template_kwargs", "reasoning_effort",
						      "thinking_token_budget"};
		json_t *o = rq->body ? json_loads(rq->body, 0, NULL) : NULL;
		const char *field = NULL;
		for (size_t i = 0; i < sizeof(unknown) / sizeof(unknown[0]) && !field; i++)
			if (json_object_get(o, unknown[i]))
				field = unknown[i];
		json_decref(o);
		char *body = NULL;
		if (field && asprintf(&body,
				      "{\"error\":{\"message\":\"Unrecognized request "
				      "argument supplied: %s\",\"type\":\"invalid_request_error\"}}",
				      field) < 0)
			body = NULL;
		if (field) {
			status = 400;
			resp = text_response("application/json", body ? body : strdup("{}"));
		} else {
			resp = sse(arg, rq->len, false);
		}
	} else if (strncmp(line, "ok ", 3) == 0) {
		resp = sse(arg, rq->len, false);
	} else if (strncmp(line, "think ", 6) == 0) {
		const char *sp = strchr(arg, ' '), *bar = sp ? strchr(sp + 1, '|') : NULL;
		if (bar) {
			char *field = strndup(arg, (size_t)(sp - arg));
			resp = sse_think(field, sp + 1, (size_t)(bar - sp - 1), bar + 1, rq->len, false);
			free(field);
		} else {
			status = 500;
			resp = text_response("text/plain", strdup("bad think line\n"));
		}
	} else if (strncmp(line, "stall ", 6) == 0) {
		resp = sse(arg, rq->len, true);
	} else if (strncmp(line, "slow ", 5) == 0) {
		char *end;
		long ms = strtol(arg, &end, 10);
		usleep((useconds_t)ms * 1000);
		resp = sse(*end ? end + 1 : "", rq->len, false);
	} else if (strncmp(line, "plain ", 6) == 0) {
		json_t *o = json_pack("{s:s, s:s, s:[{s:i, s:{s:s, s:s}, s:s}], s:{s:i, s:i}}", "id", "c1",
				      "model", "fake-model", "choices", "index", 0, "message", "role",
				      "assistant", "content", arg, "finish_reason", "stop", "usage",
				      "prompt_tokens", 7, "completion_tokens", 3);
		resp = text_response("application/json", json_dumps(o, JSON_COMPACT));
		json_decref(o);
	} else if (strncmp(line, "status ", 7) == 0) {
		char *end;
		status = (unsigned)strtoul(arg, &end, 10);
		char *body = NULL;
		if (asprintf(&body, "{\"error\":{\"message\":\"fake failure %u\",\"type\":\"server\"}}",
			     status) < 0)
			body = NULL;
		resp = text_response("application/json", body ? body : strdup("{}"));
		long after = strtol(end, NULL, 10);
		if (*end && after >= 0) {
			char v[32];
			snprintf(v, sizeof(v), "%ld", after);
			MHD_add_response_header(resp, "Retry-After", v);
		}
	} else {
		status = 500;
		resp = text_response("text/plain", strdup("bad script line\n"));
	}
	free(line);
	enum MHD_Result ret = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return ret;
}

static enum MHD_Result handle(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	(void)cls;
	(void)version;
	if (strcmp(method, "GET") == 0 && strcmp(url, "/v1/models") == 0) {
		struct MHD_Response *r = text_response(
			"application/json",
			strdup("{\"object\":\"list\",\"data\":[{\"id\":\"fake-model\",\"object\":"
			       "\"model\",\"owned_by\":\"vllm\"}]}"));
		enum MHD_Result ret = MHD_queue_response(c, 200, r);
		MHD_destroy_response(r);
		return ret;
	}
	if (strcmp(method, "POST") != 0 || strcmp(url, "/v1/chat/completions") != 0) {
		struct MHD_Response *r = text_response("text/plain", strdup("not found\n"));
		enum MHD_Result ret = MHD_queue_response(c, 404, r);
		MHD_destroy_response(r);
		return ret;
	}
	struct req *rq = *con_cls;
	if (!rq) {
		*con_cls = calloc(1, sizeof(*rq));
		return MHD_YES;
	}
	if (*upload_size) {
		if (rq->len + *upload_size > MAX_BODY)
			return MHD_NO;
		rq->body = realloc(rq->body, rq->len + *upload_size + 1);
		memcpy(rq->body + rq->len, upload, *upload_size);
		rq->len += *upload_size;
		rq->body[rq->len] = '\0';
		*upload_size = 0;
		return MHD_YES;
	}
	return answer(c, rq);
}

static void done(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	(void)cls;
	(void)c;
	(void)toe;
	struct req *rq = *con_cls;
	if (rq) {
		free(rq->body);
		free(rq);
	}
	*con_cls = NULL;
}

int main(int argc, char **argv)
{
	const char *port_file = NULL;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--port-file") == 0)
			port_file = argv[i + 1];
		else if (strcmp(argv[i], "--script") == 0)
			script_path = argv[i + 1];
		else if (strcmp(argv[i], "--record") == 0)
			record_dir = argv[i + 1];
	}
	if (!port_file || !script_path || !record_dir) {
		fprintf(stderr, "usage: fake-openai --port-file FILE --script FILE --record DIR\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct MHD_Daemon *d =
		MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
				 NULL, handle, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
				 MHD_OPTION_NOTIFY_COMPLETED, done, NULL, MHD_OPTION_END);
	if (!d) {
		fprintf(stderr, "fake-openai: cannot listen: %s\n", strerror(errno));
		return 1;
	}
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", port_file);
	FILE *f = fopen(tmp, "w");
	if (!f || fprintf(f, "%u\n", (unsigned)info->port) < 0 || fclose(f) != 0 ||
	    rename(tmp, port_file) != 0) {
		fprintf(stderr, "fake-openai: cannot write %s\n", port_file);
		return 1;
	}
	for (;;)
		pause();
}
