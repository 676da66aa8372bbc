/* The HTTP API (see http.h and docs/api.md).
 *
 * Request life cycle, per libmicrohttpd's contract: the access handler is called once with the
 * headers (we check the peer's uid, the header size and Content-Length there, and may answer
 * at once), then once per body chunk (appended under IPC_MAX_BODY_BYTES), then once more with
 * no data, when the route's handler runs. `struct request` lives from the first call to the
 * completion callback.
 *
 * DESIGN (connections, threads and limits). libmicrohttpd runs one thread per connection: a
 * handler may block (POST /v1/actions waits for its action, an event stream waits for steps)
 * without holding up anyone else, and an idle connection costs a sleeping thread. What one
 * leaky or hostile client of the user's could otherwise do, and what stops it:
 *   - Open connections without end: beyond HTTP_MAX_CONNECTIONS a request is answered 503
 *     too_many_connections (JSON, then closed); the library itself accepts
 *     HTTP_OVERFLOW_CONNECTIONS more so that those answers can be given, and resets any beyond
 *     (it gives its caller no say there: docs/api.md).
 *   - Follow without end: event streams have their own limit, HTTP_MAX_STREAMS, well below the
 *     connection limit, so followers never take the slots requests need (503 beyond it).
 *   - Send slowly: the library's timeout (HTTP_IDLE_TIMEOUT_S) only notices silence, so a
 *     byte a second kept a connection forever. A reaper thread closes (shutdown()) every
 *     connection whose request, headers and body, is not complete HTTP_REQUEST_TIMEOUT_S after
 *     it opened or after its previous answer; an idle keep-alive connection goes the same way.
 *     It works on a dup() of each connection's socket taken when the connection starts and
 *     closed when it ends (MHD_OPTION_NOTIFY_CONNECTION), so it can never hit a reused fd.
 *     `struct conn` (the socket context) and the list of them are guarded by conns_lock.
 *   - Stop reading: the idle timeout closes a connection whose answer is not being read;
 *     event streams send an empty line every HTTP_STREAM_KEEPALIVE_MS so that a quiet task
 *     does not look like that. */
#include "http.h"
#include "provider.h"

#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api-json.h"
#include "common.h"
#include "feed.h"
#include "holod-config.h"
#include "ipc.h"
#include "view-page.h"
#include "x11.h"

#define HTTP_CONNECTION_MEMORY                                                                               \
	(128 * 1024)		  /* libmicrohttpd's per-connection pool; headers                            \
				     beyond it get its own 431 */
#define HTTP_IDLE_TIMEOUT_S 30	  /* no byte either way for this long: closed (libmicrohttpd) */
#define HTTP_REQUEST_TIMEOUT_S 15 /* a whole request must arrive within this (the reaper) */
#define HTTP_REAPER_PERIOD_MS 500
#define HTTP_STREAM_POLL_MS 1000
/* While a followed task waits for the model's load or for admission, which move without
 * waking the scheduler's waiters: how often its stream looks. */
#define HTTP_STREAM_FAST_POLL_MS 250
#define HTTP_STREAM_KEEPALIVE_MS 10000		/* well below the idle timeout */
#define HTTP_MAX_PNG_BYTES (512u * 1024 * 1024) /* a journaled screenshot we agree to serve */
#define HTTP_MAX_CONNECTIONS 256		/* one thread each; a request beyond gets 503 */
#define HTTP_OVERFLOW_CONNECTIONS 64		/* accepted beyond it to be told so; more are reset */
#define HTTP_MAX_STREAMS 128			/* event streams, within HTTP_MAX_CONNECTIONS */
#define HTTP_DRAIN_TIMEOUT_US (3 * 1000000ull)	/* at shutdown, for answers being sent */

/* One per connection (libmicrohttpd's socket context); fields under http_server.conns_lock. */
struct conn {
	struct http_server *s;
	struct conn *prev, *next;
	int fd;		   /* a dup of the connection's socket, for the reaper */
	uint64_t since_us; /* when the connection opened or its previous answer was sent */
	bool reading;	   /* its request is not complete yet (or not begun) */
	bool reaped;
};

struct http_server {
	struct MHD_Daemon *mhd;
	struct http_context ctx;
	atomic_int in_flight; /* requests between their headers and their last byte sent */
	atomic_int n_conns;   /* open connections */
	atomic_int n_streams; /* open event streams */
	pthread_mutex_t conns_lock;
	pthread_cond_t reaper_cond;
	pthread_t reaper;
	bool reaper_started, stopping;
	struct conn *conns;
};

/* The first call's *con_cls for a request whose URI holod refuses (see uri_seen). */
static char bad_uri_marker;

struct request {
	char *body;
	size_t len, cap;
	bool too_large;
};

struct route_args {
	int64_t id; /* first numeric segment */
	int64_t n;  /* second numeric segment */
};

typedef enum MHD_Result (*handler_fn)(struct http_server *s, struct MHD_Connection *c, struct request *req,
				      const struct route_args *a);

/* ---- connections -------------------------------------------------------------------------- */

/* reading: the connection waits for (the rest of) a request, under the reaper's deadline from
 * now; !reading: holod has the request and answers it. */
static void conn_set_reading(struct MHD_Connection *c, bool reading)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct conn *cn = ci ? ci->socket_context : NULL;

	if (!cn)
		return;
	pthread_mutex_lock(&cn->s->conns_lock);
	cn->reading = reading;
	cn->since_us = time_mono_us();
	pthread_mutex_unlock(&cn->s->conns_lock);
}

static void connection_notify(void *cls, struct MHD_Connection *c, void **socket_context,
			      enum MHD_ConnectionNotificationCode toe)
{
	struct http_server *s = cls;
	struct conn *cn = *socket_context;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		const union MHD_ConnectionInfo *ci =
			MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
		cn = xcalloc(1, sizeof(*cn));
		cn->s = s;
		/* Without the dup the reaper cannot close this one; the idle timeout still can. */
		cn->fd = ci ? fcntl(ci->connect_fd, F_DUPFD_CLOEXEC, 0) : -1;
		cn->since_us = time_mono_us();
		cn->reading = true;
		pthread_mutex_lock(&s->conns_lock);
		cn->next = s->conns;
		if (s->conns)
			s->conns->prev = cn;
		s->conns = cn;
		pthread_mutex_unlock(&s->conns_lock);
		atomic_fetch_add(&s->n_conns, 1);
		*socket_context = cn;
		return;
	}
	if (!cn)
		return;
	pthread_mutex_lock(&s->conns_lock);
	if (cn->prev)
		cn->prev->next = cn->next;
	else
		s->conns = cn->next;
	if (cn->next)
		cn->next->prev = cn->prev;
	pthread_mutex_unlock(&s->conns_lock);
	if (cn->fd >= 0)
		close(cn->fd);
	free(cn);
	*socket_context = NULL;
	atomic_fetch_sub(&s->n_conns, 1);
}

static void *reaper_main(void *arg)
{
	struct http_server *s = arg;
	const uint64_t limit = HTTP_REQUEST_TIMEOUT_S * 1000000ull;

	pthread_mutex_lock(&s->conns_lock);
	while (!s->stopping) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		ts.tv_nsec += HTTP_REAPER_PERIOD_MS * 1000000L;
		ts.tv_sec += ts.tv_nsec / 1000000000L;
		ts.tv_nsec %= 1000000000L;
		pthread_cond_timedwait(&s->reaper_cond, &s->conns_lock, &ts);

		uint64_t now = time_mono_us();
		unsigned n = 0;
		for (struct conn *cn = s->conns; cn; cn = cn->next) {
			if (!cn->reading || cn->reaped || cn->fd < 0 || now - cn->since_us < limit)
				continue;
			/* The connection's thread sees end-of-file and closes it. */
			shutdown(cn->fd, SHUT_RDWR);
			cn->reaped = true;
			n++;
		}
		if (n)
			log_info("closed %u connection(s) that sent no complete request within %d s", n,
				 HTTP_REQUEST_TIMEOUT_S);
	}
	pthread_mutex_unlock(&s->conns_lock);
	return NULL;
}

/* The raw request line's URI, before libmicrohttpd decodes it: "%00" would become the end of
 * the string, and /v1/status%00junk would be served as /v1/status. Its return value is the
 * first *con_cls of the request. */
static void *uri_seen(void *cls, const char *uri, struct MHD_Connection *c)
{
	return uri && strstr(uri, "%00") ? &bad_uri_marker : NULL;
}

/* ---- responses ----------------------------------------------------------------------------- */

static enum MHD_Result queue(struct MHD_Connection *c, unsigned status, struct MHD_Response *resp)
{
	if (!resp)
		return MHD_NO;
	conn_set_reading(c, false);
	enum MHD_Result r = MHD_queue_response(c, status, resp);
	MHD_destroy_response(resp);
	return r;
}

/* Sends `o` (reference stolen) as JSON; with `close`, the connection ends after it. */
static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *o, bool close)
{
	if (!o)
		return MHD_NO;
	char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);
	json_decref(o);
	if (!text)
		return MHD_NO;
	size_t n = strlen(text);
	char *body = xrealloc(text, n + 2);
	body[n] = '\n';
	body[n + 1] = '\0';
	struct MHD_Response *resp = MHD_create_response_from_buffer(n + 1, body, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(body);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
	if (close)
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
	return queue(c, status, resp);
}

static enum MHD_Result send_error_v(struct MHD_Connection *c, unsigned status, const char *code, bool close,
				    const char *format, va_list ap) __attribute__((format(printf, 5, 0)));

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *code,
				  const char *format, ...) __attribute__((format(printf, 4, 5)));

static enum MHD_Result send_error(struct MHD_Connection *c, unsigned status, const char *code,
				  const char *format, ...)
{
	va_list ap;
	va_start(ap, format);
	enum MHD_Result r = send_error_v(c, status, code, false, format, ap);
	va_end(ap);
	return r;
}

/* The same, and the connection is closed after the answer. */
static enum MHD_Result send_error_close(struct MHD_Connection *c, unsigned status, const char *code,
					const char *format, ...) __attribute__((format(printf, 4, 5)));

static enum MHD_Result send_error_close(struct MHD_Connection *c, unsigned status, const char *code,
					const char *format, ...)
{
	va_list ap;
	va_start(ap, format);
	enum MHD_Result r = send_error_v(c, status, code, true, format, ap);
	va_end(ap);
	return r;
}

static enum MHD_Result send_error_v(struct MHD_Connection *c, unsigned status, const char *code, bool close,
				    const char *format, va_list ap)
{
	char msg[1024];
	vsnprintf(msg, sizeof(msg), format, ap);
	log_debug("HTTP %u %s: %s", status, code, msg);
	json_t *o = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
	if (!o) {
		/* The message quoted something that is not UTF-8 (a URL, a query value): JSON cannot
		 * carry it, so show those bytes as '?'. */
		for (char *p = msg; *p; p++)
			if ((unsigned char)*p >= 0x80 || (unsigned char)*p < 0x20)
				*p = '?';
		o = json_pack("{s:{s:s, s:s}}", "error", "code", code, "message", msg);
	}
	return send_json(c, status, o, close);
}

static enum MHD_Result send_internal(struct MHD_Connection *c, int err, const char *what)
{
	log_error_errno(err, "%s", what);
	return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, IPC_ERR_INTERNAL, "%s: %s", what,
			  strerror(err < 0 ? -err : err));
}

/* A write to the journal failed: the message names the database, so that "No space left on
 * device" says which disk is full. */
static enum MHD_Result send_journal_error(struct http_server *s, struct MHD_Connection *c, int err,
					  const char *what)
{
	const char *path = journal_path(s->ctx.journal);

	log_error_errno(err, "%s: journal %s", what, path);
	return send_error(c, MHD_HTTP_INTERNAL_SERVER_ERROR, IPC_ERR_INTERNAL, "%s: journal %s: %s", what,
			  path, strerror(err < 0 ? -err : err));
}

/* ---- query parameters ------------------------------------------------------------------------ */

struct query_check {
	const char *const *allowed;
	const char *bad;
};

static enum MHD_Result query_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct query_check *q = cls;
	for (const char *const *a = q->allowed; a && *a; a++)
		if (strcmp(*a, key) == 0)
			return MHD_YES;
	q->bad = key;
	return MHD_NO;
}

/* NULL-terminated list of accepted query parameters; sends 400 and returns false otherwise. */
static bool check_query(struct MHD_Connection *c, const char *const *allowed, enum MHD_Result *ret)
{
	struct query_check q = {.allowed = allowed};
	MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, query_iter, &q);
	if (q.bad) {
		*ret = send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
				  "unknown query parameter '%s'", q.bad);
		return false;
	}
	return true;
}

static int parse_uint_arg(const char *s, unsigned max, unsigned *ret)
{
	char *end;
	if (!s || !*s || *s == '-' || *s == '+')
		return -EINVAL;
	errno = 0;
	unsigned long v = strtoul(s, &end, 10);
	if (errno || *end || v > max)
		return -EINVAL;
	*ret = (unsigned)v;
	return 0;
}

/* ---- handlers -------------------------------------------------------------------------------- */

static enum MHD_Result h_status(struct http_server *s, struct MHD_Connection *c, struct request *req,
				const struct route_args *a)
{
	enum MHD_Result ret;
	if (!check_query(c, NULL, &ret))
		return ret;
	json_t *snap = scheduler_snapshot(s->ctx.scheduler);
	if (!snap)
		return MHD_NO;
	/* display, running and display_connected describe the first display, as they did before
	 * holod drove several; displays lists them all. */
	json_t *first = json_array_get(json_object_get(snap, "displays"), 0);
	json_t *model = model_worker_status(s->ctx.worker);
	json_t *prov = s->ctx.provider ? s->ctx.provider->ops->status(s->ctx.provider) : NULL;
	json_t *o =
		json_pack("{s:s, s:i, s:I, s:o, s:b, s:o, s:O, s:O, s:O, s:O, s:s, s:s}", "version",
			  HOLOD_VERSION, "api_version", IPC_API_VERSION, "pid", (json_int_t)getpid(),
			  "display", s->ctx.display ? json_string(s->ctx.display) : json_null(),
			  "virtual_display", s->ctx.virtual_display, "model", model ? model : json_null(),
			  "running", json_object_get(first, "running"), "queue",
			  json_object_get(snap, "queue"), "display_connected",
			  json_object_get(first, "connected"), "displays", json_object_get(snap, "displays"),
			  "socket", s->ctx.socket_path, "state_dir", s->ctx.state_dir);
	if (o)
		json_object_set_new(o, "provider", prov ? prov : json_pack("{s:s}", "name", "local"));
	else
		json_decref(prov);
	/* the default format's (--policy-format) */
	if (o && s->ctx.agent)
		json_object_set_new(o, "sampling",
				    agent_sampling_defaults(s->ctx.agent,
							    agent_format(s->ctx.agent,
									 &(struct ipc_task_options){0})));
	json_decref(snap);
	return send_json(c, MHD_HTTP_OK, o, false);
}

/* A running task that waits for its user shows it: status "waiting_for_user" (a question)
 * or "waiting_for_approval" (a held action), and "waiting" with what it waits for. The
 * journal keeps such a task 'running' (a restart interrupts it). */
static void waiting_overlay(struct http_server *s, json_t *task, int64_t id)
{
	/* holoctl pause: "paused" once it holds between two steps (the journal keeps
	 * "running": a restart interrupts it as any running task) */
	int paused = scheduler_paused(s->ctx.scheduler, id);
	json_object_set_new(task, "paused", json_boolean(paused == 2));
	if (paused == 2)
		json_object_set_new(task, "status", json_string("paused"));
	json_t *w = scheduler_waiting(s->ctx.scheduler, id);
	if (!w) {
		json_object_set_new(task, "waiting", json_null());
		return;
	}
	const char *kind = json_string_value(json_object_get(w, "for"));
	json_object_set_new(task, "status",
			    json_string(kind && strcmp(kind, "reply") == 0 ? "waiting_for_user" :
									     "waiting_for_approval"));
	json_object_set_new(task, "waiting", w);
}

static enum MHD_Result respond_task(struct http_server *s, struct MHD_Connection *c, unsigned status,
				    int64_t id)
{
	json_t *task;
	int r = api_json_read_task(s->ctx.journal, id, &task);
	if (r == -ENOENT)
		return send_error(c, MHD_HTTP_NOT_FOUND, IPC_ERR_NOT_FOUND, "no task %lld", (long long)id);
	if (r < 0)
		return send_internal(c, r, "cannot read the task");
	/* waiting for the model's admission (model-worker.h): its place in that queue */
	int pos = s->ctx.worker ? model_worker_wait_position(s->ctx.worker, (long long)id) : 0;
	if (pos > 0)
		json_object_set_new(task, "model_queue_position", json_integer(pos));
	waiting_overlay(s, task, id);
	return send_json(c, status, task, false);
}

static enum MHD_Result parse_error(struct MHD_Connection *c, int r, const char *msg)
{
	if (r == -E2BIG)
		return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, IPC_ERR_PAYLOAD_TOO_LARGE, "%s", msg);
	return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST, "%s", msg);
}

/* A task naming a display this holod does not drive. */
static enum MHD_Result send_no_such_display(struct http_server *s, struct MHD_Connection *c,
					    const char *display)
{
	char names[IPC_MAX_DISPLAY_NAME_BYTES * 4 + 16] = "";
	json_t *snap = scheduler_snapshot(s->ctx.scheduler);
	size_t i, off = 0;
	json_t *d;

	json_array_foreach(json_object_get(snap, "displays"), i, d)
	{
		const char *name = json_string_value(json_object_get(d, "name"));
		int n = snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "",
				 name ? name : "$DISPLAY");
		if (n < 0 || (size_t)n >= sizeof(names) - off) {
			snprintf(names + off, sizeof(names) - off, "...");
			break;
		}
		off += (size_t)n;
	}
	json_decref(snap);
	return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
			  "display: holod does not drive display %.64s (it drives %s)", display, names);
}

/* A script whose action has a "target" needs a model to locate it: refused with 400 (the
 * request cannot succeed as sent) when none is loaded or its load failed; a model still
 * loading accepts it, as an instruction. Returns true when the request may go on, else
 * destroys it and answers. `prefix` names the actions' field path ("script" or "action"). */
static bool grounding_possible(struct http_server *s, struct MHD_Connection *c, struct ipc_task_request *tr,
			       const char *prefix, enum MHD_Result *ret)
{
	for (size_t i = 0; i < tr->n_actions; i++) {
		if (!ipc_action_is_grounded(&tr->actions[i]))
			continue;
		enum model_worker_state es = model_worker_state(s->ctx.worker);
		if (es != MODEL_WORKER_NONE && es != MODEL_WORKER_FAILED)
			return true;
		char path[64];
		if (strcmp(prefix, "action") == 0)
			snprintf(path, sizeof(path), "action.%s",
				 tr->actions[i].target ? "target" : "target2");
		else
			snprintf(path, sizeof(path), "script[%zu].%s", i,
				 tr->actions[i].target ? "target" : "target2");
		*ret = es == MODEL_WORKER_FAILED ?
			       send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
					  "%s: a target needs a model to locate it, and the model failed "
					  "to load (%s); give x and y instead",
					  path, model_worker_error(s->ctx.worker)) :
			       send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
					  "%s: a target needs a model to locate it, and holod was started "
					  "without one (--model); give x and y instead",
					  path);
		ipc_task_request_destroy(tr);
		return false;
	}
	return true;
}

/* Instruction tasks go to a remote server, which is never "not loaded". */
static bool remote_provider(const struct http_server *s)
{
	return s->ctx.provider && strcmp(s->ctx.provider->ops->name, "remote") == 0;
}

static enum MHD_Result h_tasks_create(struct http_server *s, struct MHD_Connection *c, struct request *req,
				      const struct route_args *a)
{
	struct ipc_task_request *tr;
	char msg[512];
	int64_t id;
	enum MHD_Result ret;
	int r;

	if (!check_query(c, NULL, &ret))
		return ret;
	r = ipc_task_request_parse(req->body ? req->body : "", req->len, &tr, msg, sizeof(msg));
	if (r < 0)
		return parse_error(c, r, msg);
	if (!grounding_possible(s, c, tr, "script", &ret))
		return ret;
	if (tr->kind == IPC_TASK_KIND_INSTRUCTION && !remote_provider(s)) {
		/* A model still loading accepts the task: it waits in the queue for the load. */
		enum model_worker_state es = model_worker_state(s->ctx.worker);
		if (es == MODEL_WORKER_NONE || es == MODEL_WORKER_FAILED) {
			ipc_task_request_destroy(tr);
			if (es == MODEL_WORKER_FAILED)
				return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_NO_MODEL,
						  "no model loaded: %s; scripted tasks work (send "
						  "{\"script\": [...]})",
						  model_worker_error(s->ctx.worker));
			return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_NO_MODEL,
					  "no model loaded: holod was started without a model; "
					  "scripted tasks work (send {\"script\": [...]})");
		}
	}
	char display[IPC_MAX_DISPLAY_NAME_BYTES + 1] = "";
	if (tr->options.display)
		snprintf(display, sizeof(display), "%s", tr->options.display);
	r = scheduler_submit(s->ctx.scheduler, tr, &id);
	if (r == -ENXIO)
		return send_no_such_display(s, c, display);
	if (r == -ESHUTDOWN)
		return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_SHUTTING_DOWN,
				  "holod is shutting down");
	if (r == -ENOMEM)
		return send_internal(c, r, "cannot queue the task");
	if (r < 0)
		return send_journal_error(s, c, r, "cannot queue the task");
	return respond_task(s, c, MHD_HTTP_CREATED, id);
}

static enum MHD_Result h_tasks_list(struct http_server *s, struct MHD_Connection *c, struct request *req,
				    const struct route_args *a)
{
	static const char *const allowed[] = {"status", "limit", "offset", NULL};
	unsigned limit = IPC_DEFAULT_LIST_LIMIT, offset = 0;
	int status = -1;
	enum MHD_Result ret;
	json_t *list;

	if (!check_query(c, allowed, &ret))
		return ret;
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "status");
	if (v && (status = ipc_task_status_from_string(v)) < 0)
		return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
				  "status: unknown value '%s' (expected queued, running, succeeded, "
				  "failed, cancelled, interrupted or stuck)",
				  v);
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "limit");
	if (v && (parse_uint_arg(v, IPC_MAX_LIST_LIMIT, &limit) < 0 || limit == 0))
		return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
				  "limit: '%s' is not an integer in 1..%d", v, IPC_MAX_LIST_LIMIT);
	v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset");
	if (v && parse_uint_arg(v, INT32_MAX, &offset) < 0)
		return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
				  "offset: '%s' is not a non-negative integer", v);
	int r = api_json_read_task_list(s->ctx.journal, status, limit, offset, &list);
	if (r < 0)
		return send_internal(c, r, "cannot list tasks");
	size_t i;
	json_t *t;
	json_array_foreach(json_object_get(list, "tasks"), i, t)
	{
		const char *st = json_string_value(json_object_get(t, "status"));
		if (st && strcmp(st, "running") == 0)
			waiting_overlay(s, t, json_integer_value(json_object_get(t, "id")));
	}
	return send_json(c, MHD_HTTP_OK, list, false);
}

/* ?dry_run=true: what would go, removing nothing (at most IPC_MAX_PRUNE_LISTED tasks listed),
 * and the cutoff it used ("before", microseconds since the epoch): a prune given it as
 * ?before= removes what was listed (or less), however long the user took to confirm. */
static enum MHD_Result prune_preview(struct http_server *s, struct MHD_Connection *c, uint64_t before_us)
{
	struct journal_prune_task *tasks = NULL;
	size_t n = 0;
	int count;
	uint64_t bytes;
	char when[64];

	int r = journal_prune_preview(s->ctx.journal, before_us, IPC_MAX_PRUNE_LISTED, &tasks, &n, &count,
				      &bytes);
	if (r < 0)
		return send_journal_error(s, c, r, "cannot read the journal");
	json_t *list = json_array();
	for (size_t i = 0; list && i < n; i++)
		json_array_append_new(list, json_pack("{s:I, s:s, s:s}", "id", (json_int_t)tasks[i].id,
						      "status", tasks[i].status, "finished_at",
						      time_format_rfc3339(tasks[i].finished_us, when,
									  sizeof(when))));
	free(tasks);
	json_t *o =
		list ? json_pack("{s:b, s:I, s:i, s:I, s:o}", "dry_run", 1, "before", (json_int_t)before_us,
				 "tasks", count, "bytes_freed", (json_int_t)bytes, "would_prune", list) :
		       NULL;
	if (!o)
		return send_internal(c, -ENOMEM, "cannot answer");
	return send_json(c, MHD_HTTP_OK, o, false);
}

static enum MHD_Result h_prune(struct http_server *s, struct MHD_Connection *c, struct request *req,
			       const struct route_args *a)
{
	static const char *const allowed[] = {"older_than", "before", "dry_run", NULL};
	enum MHD_Result ret;
	unsigned older_than = 0;
	uint64_t before_us = 0;
	int tasks;
	uint64_t bytes;

	if (!check_query(c, allowed, &ret))
		return ret;
	uint64_t now = time_real_us();
	const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "older_than");
	const char *b = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "before");
	if (v && b)
		return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
				  "give older_than or before, not both");
	if (b) {
		/* the cutoff a dry run answered: microseconds since the epoch, not in the future */
		char *end;
		errno = 0;
		unsigned long long u = *b >= '0' && *b <= '9' ? strtoull(b, &end, 10) : 0;
		if (!(*b >= '0' && *b <= '9') || errno || *end || u > now)
			return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
					  "before: '%s' is not a time in microseconds since the "
					  "epoch, at most now (%llu)",
					  b, (unsigned long long)now);
		before_us = u;
	} else if (!v || parse_uint_arg(v, IPC_MAX_PRUNE_AGE_S, &older_than) < 0) {
		return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
				  "older_than: '%s' is not a number of seconds in 0..%d", v ? v : "",
				  IPC_MAX_PRUNE_AGE_S);
	} else {
		uint64_t age = (uint64_t)older_than * 1000000u;
		before_us = now > age ? now - age : 0;
	}
	const char *dry = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "dry_run");
	if (dry && strcmp(dry, "true") != 0 && strcmp(dry, "false") != 0)
		return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
				  "dry_run: '%s' is not true or false", dry);
	if (dry && strcmp(dry, "true") == 0)
		return prune_preview(s, c, before_us);
	int r = journal_prune(s->ctx.journal, s->ctx.state_dir, before_us, &tasks, &bytes);
	if (r < 0)
		return send_journal_error(s, c, r, "cannot prune the journal");
	log_info("pruned %d task(s) finished over %llu s ago: %llu bytes of screenshots freed", tasks,
		 (unsigned long long)((now - before_us) / 1000000u), (unsigned long long)bytes);
	json_t *o = json_pack("{s:i, s:I}", "tasks", tasks, "bytes_freed", (json_int_t)bytes);
	if (!o)
		return send_internal(c, -ENOMEM, "cannot answer");
	return send_json(c, MHD_HTTP_OK, o, false);
}

static enum MHD_Result h_task_get(struct http_server *s, struct MHD_Connection *c, struct request *req,
				  const struct route_args *a)
{
	enum MHD_Result ret;
	if (!check_query(c, NULL, &ret))
		return ret;
	return respond_task(s, c, MHD_HTTP_OK, a->id);
}

/* Whether task `id` is in the journal; if not (or the journal cannot say), *ret is the error
 * response queued on c: 404 for no such task, 500 when the journal cannot be read. */
static bool task_or_error(struct http_server *s, struct MHD_Connection *c, int64_t id, enum MHD_Result *ret)
{
	enum ipc_task_status st;
	int r = journal_task_status(s->ctx.journal, id, &st);
	if (r == -ENOENT)
		*ret = send_error(c, MHD_HTTP_NOT_FOUND, IPC_ERR_NOT_FOUND, "no task %lld", (long long)id);
	else if (r < 0)
		*ret = send_internal(c, r, "cannot read the task");
	return r >= 0;
}

/* The live view (view.html): one static page for any task; its script reads the task, its
 * events and the screen through the API, so it costs nothing until a browser opens it and
 * nothing once that browser leaves. The policy lets the page load nothing from anywhere else
 * (no CDN, no inline content from the model runs as code: the page writes it as text) and
 * refuses to be framed, as its buttons act. */
static enum MHD_Result h_view(struct http_server *s, struct MHD_Connection *c, struct request *req,
			      const struct route_args *a)
{
	enum MHD_Result ret;
	if (!check_query(c, NULL, &ret) || !task_or_error(s, c, a->id, &ret))
		return ret;
	struct MHD_Response *resp =
		MHD_create_response_from_buffer(view_page_size, (void *)view_page, MHD_RESPMEM_PERSISTENT);
	if (!resp)
		return MHD_NO;
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
	MHD_add_response_header(resp, "Content-Security-Policy",
				"default-src 'none'; script-src 'unsafe-inline'; "
				"style-src 'unsafe-inline'; img-src 'self' blob: data:; "
				"connect-src 'self'; base-uri 'none'; form-action 'none'; "
				"frame-ancestors 'none'");
	MHD_add_response_header(resp, "X-Frame-Options", "DENY");
	MHD_add_response_header(resp, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	return queue(c, MHD_HTTP_OK, resp);
}

static enum MHD_Result h_steps(struct http_server *s, struct MHD_Connection *c, struct request *req,
			       const struct route_args *a)
{
	enum MHD_Result ret;
	json_t *steps;

	if (!check_query(c, NULL, &ret) || !task_or_error(s, c, a->id, &ret))
		return ret;
	int r = api_json_read_steps(s->ctx.journal, a->id, 0, false, &steps);
	if (r < 0)
		return send_internal(c, r, "cannot read the steps");
	return send_json(c, MHD_HTTP_OK,
			 json_pack("{s:I, s:o}", "task_id", (json_int_t)a->id, "steps", steps), false);
}

static enum MHD_Result h_step_screenshot(struct http_server *s, struct MHD_Connection *c, struct request *req,
					 const struct route_args *a)
{
	static const char *const allowed[] = {"which", NULL};
	enum MHD_Result ret;
	char *rel = NULL, *sha = NULL;

	if (!check_query(c, allowed, &ret))
		return ret;
	const char *which = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "which");
	if (!which)
		which = "after";
	if (strcmp(which, "before") != 0 && strcmp(which, "after") != 0)
		return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
				  "which: unknown value '%s' (expected before or after)", which);
	if (a->n > INT32_MAX)
		return send_error(c, MHD_HTTP_NOT_FOUND, IPC_ERR_NOT_FOUND, "no step %lld", (long long)a->n);
	int r = journal_screenshot_get(s->ctx.journal, a->id, (int)a->n, which, &rel, &sha);
	if (r == -ENOENT)
		return send_error(c, MHD_HTTP_NOT_FOUND, IPC_ERR_NOT_FOUND,
				  "no '%s' screenshot for task %lld step %lld (unknown step, or not "
				  "written yet)",
				  which, (long long)a->id, (long long)a->n);
	if (r < 0)
		return send_internal(c, r, "cannot read the journal");

	char *path = path_join(s->ctx.state_dir, rel);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_size > HTTP_MAX_PNG_BYTES) {
		r = fd < 0 ? -errno : -EIO;
		if (fd >= 0)
			close(fd);
		ret = send_error(c, MHD_HTTP_GONE, IPC_ERR_NOT_FOUND,
				 "screenshot file %s is missing or unreadable: %s", path, strerror(-r));
		goto free_paths;
	}
	struct MHD_Response *resp = MHD_create_response_from_fd((uint64_t)st.st_size, fd);
	if (!resp) {
		close(fd);
		ret = MHD_NO;
		goto free_paths;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "image/png");
	MHD_add_response_header(resp, "X-Holod-SHA256", sha);
	ret = queue(c, MHD_HTTP_OK, resp);
free_paths:
	free(path);
	free(rel);
	free(sha);
	return ret;
}

static enum MHD_Result h_cancel(struct http_server *s, struct MHD_Connection *c, struct request *req,
				const struct route_args *a)
{
	enum MHD_Result ret;
	if (!check_query(c, NULL, &ret))
		return ret;
	int r = scheduler_cancel(s->ctx.scheduler, a->id);
	if (r == -ENOENT)
		return send_error(c, MHD_HTTP_NOT_FOUND, IPC_ERR_NOT_FOUND, "no task %lld", (long long)a->id);
	if (r == -EALREADY) {
		enum ipc_task_status st = IPC_TASK_SUCCEEDED;
		journal_task_status(s->ctx.journal, a->id, &st);
		return send_error(c, MHD_HTTP_CONFLICT, IPC_ERR_CONFLICT, "task %lld already finished (%s)",
				  (long long)a->id, ipc_task_status_to_string(st));
	}
	if (r < 0)
		return send_internal(c, r, "cannot cancel the task");
	log_info("task %lld: cancel requested", (long long)a->id);
	/* 200: it was queued and is now cancelled; 202: it stops at its next safe point. */
	return respond_task(s, c, r == 1 ? MHD_HTTP_ACCEPTED : MHD_HTTP_OK, a->id);
}

/* holoctl pause / resume: a task that is not running (or, for resume, not paused) is a
 * conflict, each said in a sentence. */
static enum MHD_Result h_pause_resume(struct http_server *s, struct MHD_Connection *c,
				      const struct route_args *a, bool pause)
{
	enum MHD_Result ret;
	if (!check_query(c, NULL, &ret))
		return ret;
	int r = pause ? scheduler_pause(s->ctx.scheduler, a->id) : scheduler_resume(s->ctx.scheduler, a->id);
	if (r == -ENOENT)
		return send_error(c, MHD_HTTP_NOT_FOUND, IPC_ERR_NOT_FOUND, "no task %lld", (long long)a->id);
	if (r == -EALREADY) {
		enum ipc_task_status st = IPC_TASK_SUCCEEDED;
		journal_task_status(s->ctx.journal, a->id, &st);
		return send_error(c, MHD_HTTP_CONFLICT, IPC_ERR_CONFLICT,
				  "task %lld already finished (%s): there is nothing to %s", (long long)a->id,
				  ipc_task_status_to_string(st), pause ? "pause" : "resume");
	}
	if (r == -EBUSY)
		return send_error(c, MHD_HTTP_CONFLICT, IPC_ERR_CONFLICT,
				  "task %lld is queued, not running: %s", (long long)a->id,
				  pause ? "only a running task pauses (pause it once it runs, or "
					  "cancel it)" :
					  "it is not paused");
	if (r == -EINVAL)
		return send_error(c, MHD_HTTP_CONFLICT, IPC_ERR_CONFLICT,
				  "task %lld is not paused (it runs): there is nothing to resume",
				  (long long)a->id);
	if (r < 0)
		return send_internal(c, r, "cannot read the task");
	log_info("task %lld: %s", (long long)a->id,
		 pause ? (r == 1 ? "pausing before its next step" : "pause asked again") : "resume requested");
	/* pause: 202 while the step under way finishes, 200 once it holds */
	return respond_task(s, c, pause && r == 1 ? MHD_HTTP_ACCEPTED : MHD_HTTP_OK, a->id);
}

static enum MHD_Result h_pause(struct http_server *s, struct MHD_Connection *c, struct request *req,
			       const struct route_args *a)
{
	return h_pause_resume(s, c, a, true);
}

static enum MHD_Result h_resume(struct http_server *s, struct MHD_Connection *c, struct request *req,
				const struct route_args *a)
{
	return h_pause_resume(s, c, a, false);
}

/* Every queued and running task at once: what `holoctl cancel --all` sends. */
static enum MHD_Result h_cancel_all(struct http_server *s, struct MHD_Connection *c, struct request *req,
				    const struct route_args *a)
{
	json_t *cancelled, *stopping;
	enum MHD_Result ret;
	if (!check_query(c, NULL, &ret))
		return ret;
	int r = scheduler_cancel_all(s->ctx.scheduler, &cancelled, &stopping);
	if (r == -ENOMEM)
		return send_internal(c, r, "cannot cancel the tasks");
	if (r < 0) {
		/* The queue is empty now; a task whose end could not be journaled is interrupted
		 * by the next start of holod. */
		json_decref(cancelled);
		json_decref(stopping);
		return send_journal_error(s, c, r, "cannot journal the cancelled tasks");
	}
	log_info("cancel all: %zu queued task(s) cancelled, %zu running task(s) stopping",
		 json_array_size(cancelled), json_array_size(stopping));
	return send_json(c, MHD_HTTP_OK,
			 json_pack("{s:o, s:o}", "cancelled", cancelled, "stopping", stopping), false);
}

/* The uid and pid of the peer (who answered a task: the journal keeps them). */
static void peer_cred(struct MHD_Connection *c, unsigned *ret_uid, int *ret_pid)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cred = {.uid = geteuid(), .pid = 0};
	socklen_t len = sizeof(cred);
	if (ci)
		getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len);
	*ret_uid = (unsigned)cred.uid;
	*ret_pid = (int)cred.pid;
}

/* reply, approve, deny: the answer to what a running task waits for. */
static enum MHD_Result answer(struct http_server *s, struct MHD_Connection *c, struct request *req, int64_t id,
			      enum executor_wait_kind kind, bool approve, const char *member, bool required)
{
	char msg[512], *text = NULL;
	unsigned uid;
	int pid;
	enum MHD_Result ret;

	if (!check_query(c, NULL, &ret))
		return ret;
	int r = member ? ipc_answer_parse(req->body ? req->body : "", req->len, member, required, &text, msg,
					  sizeof(msg)) :
			 0;
	if (r < 0)
		return parse_error(c, r, msg);
	if (!member && req->len > 0) {
		json_t *body = json_loadb(req->body, req->len, 0, NULL);
		bool empty = json_is_object(body) && json_object_size(body) == 0;
		json_decref(body);
		if (!empty)
			return send_error(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
					  "approve takes no body (or {})");
	}
	peer_cred(c, &uid, &pid);
	r = scheduler_answer(s->ctx.scheduler, id, kind, approve, text, uid, pid, msg, sizeof(msg));
	if (r == 0)
		log_info("task %lld: %s by uid %u (pid %d)%s%.200s", (long long)id,
			 kind == EXECUTOR_WAIT_REPLY ? "answered" :
			 approve		     ? "approved" :
						       "denied",
			 uid, pid, text ? ": " : "", text ? text : "");
	free(text);
	if (r == -ENOENT)
		return send_error(c, MHD_HTTP_NOT_FOUND, IPC_ERR_NOT_FOUND, "%s", msg);
	if (r == -ESRCH || r == -EBUSY || r == -EALREADY)
		return send_error(c, MHD_HTTP_CONFLICT, IPC_ERR_CONFLICT, "%s", msg);
	if (r < 0)
		return send_internal(c, r, "cannot answer the task");
	return respond_task(s, c, MHD_HTTP_OK, id);
}

static enum MHD_Result h_reply(struct http_server *s, struct MHD_Connection *c, struct request *req,
			       const struct route_args *a)
{
	return answer(s, c, req, a->id, EXECUTOR_WAIT_REPLY, false, "text", true);
}

static enum MHD_Result h_approve(struct http_server *s, struct MHD_Connection *c, struct request *req,
				 const struct route_args *a)
{
	return answer(s, c, req, a->id, EXECUTOR_WAIT_APPROVAL, true, NULL, false);
}

static enum MHD_Result h_deny(struct http_server *s, struct MHD_Connection *c, struct request *req,
			      const struct route_args *a)
{
	return answer(s, c, req, a->id, EXECUTOR_WAIT_APPROVAL, false, "reason", false);
}

/* ---- waiting for progress ------------------------------------------------------------------------ */

static int connection_fd(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	return ci ? ci->connect_fd : -1;
}

/* True once the client has gone: a thread that waits for a task must not outlive its reader
 * by the length of the task. */
static bool client_gone(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLRDHUP};
	return fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

/* ---- event stream ----------------------------------------------------------------------------- */

struct stream {
	struct http_server *s;
	int fd; /* the client's connection, to notice it leaving */
	int64_t id;
	int next_index;
	bool started, done;
	uint64_t wait_sent_us; /* the last wait sent (its since_us) */
	struct feed_sub *sub;  /* the task's progress events (feed.h) */
	uint64_t journal_seen; /* scheduler_journal_progress() when the journal was last read */
	int ahead;	       /* queued: the tasks before it last told; -1 none */
	int position;	       /* waiting for admission: the position last told; 0 none */
	long long load_bytes;  /* waiting for the model's load: the bytes last told; -1 none */
	bool poll;	       /* one of the last two moves on its own: look again soon */
	char *buf;
	size_t len, off;
	uint64_t sent_us; /* when a line last went out */
};

/* Appends object o (taken) as one line. */
static void stream_line(struct stream *st, json_t *o)
{
	char *line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
	json_decref(o);
	if (!line)
		return;
	size_t n = strlen(line);
	st->buf = xrealloc(st->buf, st->len + n + 2);
	memcpy(st->buf + st->len, line, n);
	st->buf[st->len + n] = '\n';
	st->len += n + 1;
	free(line);
}

static void stream_append(struct stream *st, const char *event, const char *key, json_t *value)
{
	stream_line(st,
		    json_pack("{s:s, s:I, s:o}", "event", event, "task_id", (json_int_t)st->id, key, value));
}

/* What the task waits for before its first step: its turn in the queue, the model's load,
 * admission of its session; each told when it changes, as progress events (feed.h). */
static void stream_waiting(struct stream *st, enum ipc_task_status status)
{
	struct model_worker *w = st->s->ctx.worker;

	st->poll = false;
	if (status == IPC_TASK_QUEUED) {
		int ahead = scheduler_queue_position(st->s->ctx.scheduler, st->id);
		if (ahead >= 0 && ahead != st->ahead)
			stream_line(st, json_pack("{s:s, s:I, s:s, s:i}", "event", "progress", "task_id",
						  (json_int_t)st->id, "phase", "queued", "ahead", ahead));
		st->ahead = ahead;
		return;
	}
	if (status != IPC_TASK_RUNNING || st->next_index > 0 || !w)
		return;
	if (model_worker_state(w) == MODEL_WORKER_LOADING) {
		json_t *ms = model_worker_status(w);
		json_t *load = json_object_get(ms, "load");
		long long bytes = json_integer_value(json_object_get(load, "bytes"));
		if (json_is_object(load) && bytes != st->load_bytes) {
			st->load_bytes = bytes;
			stream_line(st, json_pack("{s:s, s:I, s:s, s:I, s:O}", "event", "progress", "task_id",
						  (json_int_t)st->id, "phase", "loading", "bytes",
						  (json_int_t)bytes, "total", json_object_get(load, "total")));
		}
		json_decref(ms);
		st->poll = true;
		return;
	}
	int position = model_worker_wait_position(w, (long long)st->id);
	if (position > 0) {
		st->poll = true;
		if (position != st->position)
			stream_line(st, json_pack("{s:s, s:I, s:s, s:i}", "event", "progress", "task_id",
						  (json_int_t)st->id, "phase", "admission", "position",
						  position));
	}
	st->position = position;
}

/* Fills st->buf with what happened since the last call; returns false on a journal error. */
static bool stream_collect(struct stream *st)
{
	struct journal *j = st->s->ctx.journal;
	enum ipc_task_status status;
	json_t *steps, *task;

	/* Progress events first: each was emitted before the journal moved past it, and under
	 * the feed's order lock (feed.h) a step read below was journaled before the events taken
	 * here, its acted event among them. */
	struct feed *feed = scheduler_feed(st->s->ctx.scheduler);
	feed_order_begin(feed);
	feed_take(st->sub, &st->buf, &st->len);
	/* The journal only when it moved (progress events wake the stream too). */
	uint64_t jp = scheduler_journal_progress(st->s->ctx.scheduler);
	if (st->started && jp == st->journal_seen && !st->poll) {
		feed_order_end(feed);
		return true;
	}
	st->journal_seen = jp;
	/* Status first, steps second: if the task had ended, its last step is already visible. */
	if (journal_task_status(j, st->id, &status) < 0)
		goto unlock_failed;
	if (!st->started) {
		if (api_json_read_task(j, st->id, &task) < 0)
			goto unlock_failed;
		waiting_overlay(st->s, task, st->id);
		stream_append(st, "task", "task", task);
		st->started = true;
	}
	if (api_json_read_steps(j, st->id, st->next_index, true, &steps) < 0)
		goto unlock_failed;
	feed_order_end(feed);
	size_t i;
	json_t *step;
	json_array_foreach(steps, i, step)
	{
		st->next_index = (int)json_integer_value(json_object_get(step, "index")) + 1;
		stream_append(st, "step", "step", json_incref(step));
	}
	json_decref(steps);
	/* A new wait for the user (a question, a held action): once each. */
	json_t *w = scheduler_waiting(st->s->ctx.scheduler, st->id);
	uint64_t since = w ? (uint64_t)json_integer_value(json_object_get(w, "since_us")) : 0;
	if (w && since != st->wait_sent_us) {
		st->wait_sent_us = since;
		stream_append(st, "waiting", "waiting", w);
	} else {
		json_decref(w);
	}
	stream_waiting(st, status);
	/* After a stop every task is final; the second test only guards against a journal that
	 * failed to record it, so that no stream outlives holod. */
	if (ipc_task_status_is_final(status) || scheduler_stopped(st->s->ctx.scheduler)) {
		if (api_json_read_task(j, st->id, &task) < 0)
			return false;
		stream_append(st, "end", "task", task);
		st->done = true;
	}
	return true;

unlock_failed:
	feed_order_end(feed);
	return false;
}

static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max)
{
	struct stream *st = cls;

	for (;;) {
		if (st->off < st->len) {
			size_t n = MIN(max, st->len - st->off);
			memcpy(out, st->buf + st->off, n);
			st->off += n;
			st->sent_us = time_mono_us();
			return (ssize_t)n;
		}
		if (st->done)
			return MHD_CONTENT_READER_END_OF_STREAM;
		free(st->buf);
		st->buf = NULL;
		st->len = st->off = 0;
		/* Thread-per-connection: blocking here holds only this connection's thread. */
		uint64_t seen = scheduler_progress(st->s->ctx.scheduler);
		if (!stream_collect(st))
			return MHD_CONTENT_READER_END_WITH_ERROR;
		if (st->len == 0) {
			if (client_gone(st->fd))
				return MHD_CONTENT_READER_END_WITH_ERROR;
			/* An empty line: the connection is alive, not idle (clients skip it). */
			if (time_mono_us() - st->sent_us >= HTTP_STREAM_KEEPALIVE_MS * 1000ull) {
				st->buf = xstrdup("\n");
				st->len = 1;
				continue;
			}
			scheduler_wait(st->s->ctx.scheduler, seen,
				       st->poll ? HTTP_STREAM_FAST_POLL_MS : HTTP_STREAM_POLL_MS);
		}
	}
}

static void stream_free(void *cls)
{
	struct stream *st = cls;
	atomic_fetch_sub(&st->s->n_streams, 1);
	feed_unsubscribe(st->sub);
	free(st->buf);
	free(st);
}

static enum MHD_Result h_events(struct http_server *s, struct MHD_Connection *c, struct request *req,
				const struct route_args *a)
{
	enum MHD_Result ret;

	if (!check_query(c, NULL, &ret) || !task_or_error(s, c, a->id, &ret))
		return ret;
	if (atomic_fetch_add(&s->n_streams, 1) >= HTTP_MAX_STREAMS) {
		atomic_fetch_sub(&s->n_streams, 1);
		return send_error_close(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_TOO_MANY,
					"holod already serves %d event streams, the most it keeps open; "
					"close some followers (or poll GET /v1/tasks/%lld)",
					HTTP_MAX_STREAMS, (long long)a->id);
	}
	struct stream *st = xcalloc(1, sizeof(*st)); /* stream_free gives the slot back */
	st->s = s;
	st->sent_us = time_mono_us();
	st->fd = connection_fd(c);
	st->id = a->id;
	st->ahead = -1;
	st->load_bytes = -1;
	/* before the first read of the journal: no event falls between the two */
	st->sub = feed_subscribe(scheduler_feed(s->ctx.scheduler), a->id);
	struct MHD_Response *resp =
		MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, stream_read, st, stream_free);
	if (!resp) {
		stream_free(st);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/x-ndjson");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
	return queue(c, MHD_HTTP_OK, resp);
}

/* ---- one action now, and the screen now --------------------------------------------------------- */

static enum MHD_Result h_actions(struct http_server *s, struct MHD_Connection *c, struct request *req,
				 const struct route_args *a)
{
	struct ipc_task_request *tr;
	enum ipc_task_status status;
	enum MHD_Result ret;
	char msg[512];
	int64_t id;
	int r;

	if (!check_query(c, NULL, &ret))
		return ret;
	r = ipc_action_request_parse(req->body ? req->body : "", req->len, &tr, msg, sizeof(msg));
	if (r < 0)
		return parse_error(c, r, msg);
	char display[IPC_MAX_DISPLAY_NAME_BYTES + 1] = "";
	if (tr->options.display)
		snprintf(display, sizeof(display), "%s", tr->options.display);
	if (!grounding_possible(s, c, tr, "action", &ret))
		return ret;
	r = scheduler_submit(s->ctx.scheduler, tr, &id);
	if (r == -ENXIO)
		return send_no_such_display(s, c, display);
	if (r == -ESHUTDOWN)
		return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_SHUTTING_DOWN,
				  "holod is shutting down");
	if (r == -ENOMEM)
		return send_internal(c, r, "cannot queue the action");
	if (r < 0)
		return send_journal_error(s, c, r, "cannot queue the action");
	/* Wait for the display queue to reach and finish it. */
	uint64_t seen = scheduler_progress(s->ctx.scheduler);
	int fd = connection_fd(c);
	while ((r = journal_task_status(s->ctx.journal, id, &status)) >= 0 &&
	       !ipc_task_status_is_final(status)) {
		if (client_gone(fd)) {
			log_info("task %lld: the client left; the action still runs", (long long)id);
			return MHD_NO;
		}
		seen = scheduler_wait(s->ctx.scheduler, seen, HTTP_STREAM_POLL_MS);
	}
	if (r < 0)
		return send_internal(c, r, "cannot read the task");

	json_t *task, *steps;
	if ((r = api_json_read_task(s->ctx.journal, id, &task)) < 0)
		return send_internal(c, r, "cannot read the task");
	if ((r = api_json_read_steps(s->ctx.journal, id, 0, false, &steps)) < 0) {
		json_decref(task);
		return send_internal(c, r, "cannot read the step");
	}
	json_t *step = json_array_get(steps, 0);
	json_t *o = json_pack("{s:o, s:O}", "task", task, "step", step ? step : json_null());
	json_decref(steps);
	return send_json(c, MHD_HTTP_OK, o, false);
}

/* The display a ?display= names, one of those holod drives (the first when absent): true with
 * *ret_display set, or false with *ret the 400 answer sent. */
static bool query_display(struct http_server *s, struct MHD_Connection *c, const char **ret_display,
			  enum MHD_Result *ret)
{
	const char *want = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "display");

	*ret_display = s->ctx.display;
	if (!want)
		return true;
	json_t *snap = scheduler_snapshot(s->ctx.scheduler);
	json_t *dj;
	size_t i;
	bool found = false;
	json_array_foreach(json_object_get(snap, "displays"), i, dj)
	{
		const char *name = json_string_value(json_object_get(dj, "name"));
		if (name && strcmp(name, want) == 0)
			found = true;
	}
	json_decref(snap);
	if (!found) {
		*ret = send_no_such_display(s, c, want);
		return false;
	}
	*ret_display = want;
	return true;
}

static enum MHD_Result h_screenshot(struct http_server *s, struct MHD_Connection *c, struct request *req,
				    const struct route_args *a)
{
	enum MHD_Result ret;
	struct x11_frame *frame = NULL;
	uint8_t *png = NULL;
	size_t size;
	int r;

	static const char *const allowed[] = {"display", NULL};
	if (!check_query(c, allowed, &ret))
		return ret;
	/* ?display= picks one of the displays holod drives; the first by default. */
	const char *display;
	if (!query_display(s, c, &display, &ret))
		return ret;
	/* Its own connection on this thread: the executor's belongs to the executor. */
	struct x11_display *d = x11_display_open(display);
	if (!d)
		return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_NO_DISPLAY,
				  "cannot open display %s: %s", display ? display : "$DISPLAY",
				  x11_strerror(-errno));
	r = x11_capture(d, NULL, &frame);
	x11_display_close(d);
	if (r < 0)
		return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_NO_DISPLAY,
				  "screenshot failed: %s", x11_strerror(r));
	r = x11_frame_encode_png(frame, &png, &size);
	x11_frame_destroy(frame);
	if (r < 0)
		return send_internal(c, r, "cannot encode the screenshot");
	struct MHD_Response *resp = MHD_create_response_from_buffer(size, png, MHD_RESPMEM_MUST_FREE);
	if (!resp) {
		free(png);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "image/png");
	return queue(c, MHD_HTTP_OK, resp);
}

/* The client windows, topmost first, the focused one marked, and the pointer (docs/api.md). */
static json_t *windows_json(struct x11_display *d, const char *display, int *ret_err)
{
	struct x11_window *w = NULL;
	size_t n = 0;
	uint64_t focus = 0;
	int x, y, r;

	if ((r = x11_windows_list(d, &w, &n)) < 0 || (r = x11_focus_window(d, &focus)) < 0) {
		x11_windows_free(w, n);
		*ret_err = r;
		return NULL;
	}
	int pr = x11_pointer_position(d, &x, &y);
	json_t *list = json_array();
	for (size_t i = n; list && i-- > 0;) {
		json_t *o =
			json_pack("{s:I, s:o, s:o, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:b}", "id",
				  (json_int_t)w[i].id, "desktop",
				  w[i].desktop == X11_DESKTOP_NONE ? json_null() : json_integer(w[i].desktop),
				  "pid", w[i].pid ? json_integer(w[i].pid) : json_null(), "class",
				  w[i].class_name, "instance", w[i].instance, "title", w[i].title, "x",
				  w[i].rect.x, "y", w[i].rect.y, "width", w[i].rect.width, "height",
				  w[i].rect.height, "focused", focus != 0 && w[i].id == focus);
		/* A title that is not UTF-8 fails the pack: list it without. */
		if (!o)
			o = json_pack("{s:I, s:n, s:n, s:s, s:s, s:s, s:i, s:i, s:i, s:i, s:b}", "id",
				      (json_int_t)w[i].id, "desktop", "pid", "class", "?", "instance", "?",
				      "title", "?", "x", w[i].rect.x, "y", w[i].rect.y, "width",
				      w[i].rect.width, "height", w[i].rect.height, "focused",
				      focus != 0 && w[i].id == focus);
		if (!o || json_array_append_new(list, o) < 0) {
			json_decref(list);
			list = NULL;
		}
	}
	x11_windows_free(w, n);
	json_t *o = list ? json_pack("{s:o, s:o, s:o, s:o}", "display",
				     display ? json_string(display) : json_null(), "windows", list, "focus",
				     focus ? json_integer((json_int_t)focus) : json_null(), "pointer",
				     pr == 0 ? json_pack("{s:i, s:i}", "x", x, "y", y) : json_null()) :
			   NULL;
	if (!o)
		*ret_err = -ENOMEM;
	return o;
}

static enum MHD_Result h_windows(struct http_server *s, struct MHD_Connection *c, struct request *req,
				 const struct route_args *a)
{
	static const char *const allowed[] = {"display", NULL};
	enum MHD_Result ret;
	const char *display;
	int r = 0;

	if (!check_query(c, allowed, &ret) || !query_display(s, c, &display, &ret))
		return ret;
	/* Its own connection on this thread, as the screenshot's: the executor's is its own. */
	struct x11_display *d = x11_display_open(display);
	if (!d)
		return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_NO_DISPLAY,
				  "cannot open display %s: %s", display ? display : "$DISPLAY",
				  x11_strerror(-errno));
	json_t *o = windows_json(d, display, &r);
	x11_display_close(d);
	if (!o && r == -ENOMEM)
		return send_internal(c, r, "cannot answer");
	if (!o)
		return send_error(c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_NO_DISPLAY,
				  "cannot list the windows of %s: %s", display ? display : "$DISPLAY",
				  x11_strerror(r));
	return send_json(c, MHD_HTTP_OK, o, false);
}

/* ---- routing ----------------------------------------------------------------------------------- */

/* Pattern segments: a literal, or "#" for a decimal integer. */
static const struct route {
	const char *method;
	const char *pattern;
	handler_fn fn;
} routes[] = {
	{"GET", "status", h_status},
	{"GET", "tasks", h_tasks_list},
	{"POST", "tasks", h_tasks_create},
	{"GET", "tasks/#", h_task_get},
	{"GET", "tasks/#/steps", h_steps},
	{"GET", "tasks/#/steps/#/screenshot", h_step_screenshot},
	{"POST", "tasks/#/cancel", h_cancel},
	{"POST", "tasks/#/pause", h_pause},
	{"POST", "tasks/#/resume", h_resume},
	{"POST", "tasks/#/reply", h_reply},
	{"POST", "tasks/#/approve", h_approve},
	{"POST", "tasks/#/deny", h_deny},
	{"POST", "tasks/cancel", h_cancel_all},
	{"GET", "tasks/#/events", h_events},
	{"GET", "tasks/#/view", h_view},
	{"POST", "actions", h_actions},
	{"GET", "screenshot", h_screenshot},
	{"GET", "windows", h_windows},
	{"POST", "prune", h_prune},
};

static bool match(const char *pattern, const char *path, struct route_args *a)
{
	int nums = 0;
	for (;;) {
		const char *pe = strchrnul(pattern, '/'), *se = strchrnul(path, '/');
		size_t pl = (size_t)(pe - pattern), sl = (size_t)(se - path);
		if (pl == 1 && pattern[0] == '#') {
			if (sl == 0 || sl > 18)
				return false;
			int64_t v = 0;
			for (size_t i = 0; i < sl; i++) {
				if (path[i] < '0' || path[i] > '9')
					return false;
				v = v * 10 + (path[i] - '0');
			}
			if (nums++ == 0)
				a->id = v;
			else
				a->n = v;
		} else if (pl != sl || strncmp(pattern, path, pl) != 0) {
			return false;
		}
		if (!*pe || !*se)
			return !*pe && !*se;
		pattern = pe + 1;
		path = se + 1;
	}
}

static enum MHD_Result dispatch(struct http_server *s, struct MHD_Connection *c, const char *url,
				const char *method, struct request *req)
{
	struct route_args a = {0};
	char allow[64] = "";
	const char *prefix = IPC_API_PREFIX "/";

	if (strncmp(url, prefix, strlen(prefix)) == 0) {
		const char *path = url + strlen(prefix);
		for (size_t i = 0; i < ARRAY_SIZE(routes); i++) {
			if (!match(routes[i].pattern, path, &a))
				continue;
			if (strcmp(routes[i].method, method) == 0)
				return routes[i].fn(s, c, req, &a);
			snprintf(allow + strlen(allow), sizeof(allow) - strlen(allow), "%s%s",
				 allow[0] ? ", " : "", routes[i].method);
		}
	}
	if (allow[0]) {
		json_t *o = json_pack("{s:{s:s, s:s++}}", "error", "code", IPC_ERR_METHOD_NOT_ALLOWED,
				      "message", method, " is not allowed here; allowed: ", allow);
		char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
		json_decref(o);
		if (!text)
			return MHD_NO;
		struct MHD_Response *resp =
			MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
		if (!resp) {
			free(text);
			return MHD_NO;
		}
		MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
		MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, allow);
		return queue(c, MHD_HTTP_METHOD_NOT_ALLOWED, resp);
	}
	return send_error(c, MHD_HTTP_NOT_FOUND, IPC_ERR_NOT_FOUND,
			  "no such endpoint: %s %s (see docs/api.md; the API lives under %s/)", method, url,
			  IPC_API_PREFIX);
}

/* ---- the access handler -------------------------------------------------------------------------- */

struct header_scan {
	size_t total;	     /* bytes of names and values, as a client sent them */
	int content_lengths; /* Content-Length headers */
};

static enum MHD_Result header_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
	struct header_scan *h = cls;
	h->total += strlen(key) + (value ? strlen(value) : 0) + 4;
	if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0)
		h->content_lengths++;
	return MHD_YES;
}

/* Only holod's own user may talk to it (the socket's directory and mode say the same). */
static bool peer_allowed(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	struct ucred cred;
	socklen_t len = sizeof(cred);

	if (!ci || getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
		log_warning_errno(-errno, "cannot read the peer credentials of a connection");
		return false;
	}
	if (cred.uid != geteuid()) {
		log_warning("refused a request from uid %u (pid %d): only uid %u may use holod",
			    (unsigned)cred.uid, (int)cred.pid, (unsigned)geteuid());
		return false;
	}
	return true;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url,
				      const char *method, const char *version, const char *upload_data,
				      size_t *upload_data_size, void **con_cls)
{
	struct http_server *s = cls;
	struct request *req = *con_cls;

	if (req == (void *)&bad_uri_marker)
		return send_error_close(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
					"the URL contains an encoded NUL byte (%%00), which no holod "
					"path or parameter has");
	if (!req) {
		if (atomic_load(&s->n_conns) > HTTP_MAX_CONNECTIONS)
			return send_error_close(
				c, MHD_HTTP_SERVICE_UNAVAILABLE, IPC_ERR_TOO_MANY,
				"holod has %d connections open, more than the %d it serves; close "
				"idle ones and retry",
				atomic_load(&s->n_conns), HTTP_MAX_CONNECTIONS);
		if (!peer_allowed(c))
			return send_error(c, MHD_HTTP_FORBIDDEN, IPC_ERR_FORBIDDEN,
					  "only the user running holod may use its socket");
		struct header_scan h = {0};
		MHD_get_connection_values(c, MHD_HEADER_KIND, header_iter, &h);
		if (h.total > IPC_MAX_HEADER_BYTES)
			return send_error(c, MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE,
					  IPC_ERR_HEADERS_TOO_LARGE,
					  "request headers of %zu bytes exceed the limit of %d", h.total,
					  IPC_MAX_HEADER_BYTES);
		/* libmicrohttpd reads the body by the first one; which one the client meant is
		 * anyone's guess, so neither is used. */
		if (h.content_lengths > 1)
			return send_error_close(c, MHD_HTTP_BAD_REQUEST, IPC_ERR_BAD_REQUEST,
						"the request has %d Content-Length headers; send one",
						h.content_lengths);
		const char *cl =
			MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
		if (cl && strtoull(cl, NULL, 10) > IPC_MAX_BODY_BYTES)
			return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, IPC_ERR_PAYLOAD_TOO_LARGE,
					  "request body of %s bytes exceeds the limit of %d", cl,
					  IPC_MAX_BODY_BYTES);
		*con_cls = xcalloc(1, sizeof(struct request));
		atomic_fetch_add(&s->in_flight, 1);
		return MHD_YES;
	}

	if (*upload_data_size) {
		size_t n = *upload_data_size, need;
		*upload_data_size = 0;
		if (req->too_large || !size_add_ok(req->len, n, &need) || need > IPC_MAX_BODY_BYTES) {
			req->too_large = true;
			return MHD_YES;
		}
		if (need + 1 > req->cap) {
			req->cap = MAX(need + 1, req->cap * 2);
			req->body = xrealloc(req->body, req->cap);
		}
		memcpy(req->body + req->len, upload_data, n);
		req->len = need;
		req->body[req->len] = '\0';
		return MHD_YES;
	}
	if (req->too_large)
		return send_error(c, MHD_HTTP_CONTENT_TOO_LARGE, IPC_ERR_PAYLOAD_TOO_LARGE,
				  "request body exceeds the limit of %d bytes", IPC_MAX_BODY_BYTES);
	/* The request is complete: the handler may take as long as its task (no reaper). */
	conn_set_reading(c, false);
	return dispatch(s, c, url, method, req);
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
			      enum MHD_RequestTerminationCode toe)
{
	struct http_server *s = cls;
	struct request *req = *con_cls;

	/* Waiting for the next request on a kept-alive connection: the deadline starts again. */
	conn_set_reading(c, true);
	if (!req || req == (void *)&bad_uri_marker)
		return;
	free(req->body);
	free(req);
	*con_cls = NULL;
	atomic_fetch_sub(&s->in_flight, 1);
}

static void mhd_log(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	vsnprintf(msg, sizeof(msg), fmt, ap);
	size_t n = strlen(msg);
	while (n && msg[n - 1] == '\n')
		msg[--n] = '\0';
	log_debug("libmicrohttpd: %s", msg);
}

struct http_server *http_server_create(int listen_fd, const struct http_context *ctx)
{
	struct http_server *s = xcalloc(1, sizeof(*s));
	pthread_condattr_t ca;
	int r;

	s->ctx = *ctx;
	pthread_mutex_init(&s->conns_lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&s->reaper_cond, &ca);
	pthread_condattr_destroy(&ca);
	if ((r = pthread_create(&s->reaper, NULL, reaper_main, s)) != 0) {
		http_server_destroy(s);
		errno = r;
		return NULL;
	}
	s->reaper_started = true;
	s->mhd =
		MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION |
					 MHD_USE_POLL | MHD_USE_ITC | MHD_USE_ERROR_LOG,
				 0, NULL, NULL, access_handler, s, MHD_OPTION_LISTEN_SOCKET, listen_fd,
				 MHD_OPTION_NOTIFY_COMPLETED, request_completed, s,
				 MHD_OPTION_NOTIFY_CONNECTION, connection_notify, s,
				 MHD_OPTION_URI_LOG_CALLBACK, uri_seen, s, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
				 (size_t)HTTP_CONNECTION_MEMORY, MHD_OPTION_CONNECTION_TIMEOUT,
				 (unsigned)HTTP_IDLE_TIMEOUT_S, MHD_OPTION_CONNECTION_LIMIT,
				 (unsigned)(HTTP_MAX_CONNECTIONS + HTTP_OVERFLOW_CONNECTIONS),
				 MHD_OPTION_EXTERNAL_LOGGER, mhd_log, NULL, MHD_OPTION_END);
	if (!s->mhd) {
		http_server_destroy(s);
		errno = EIO;
		return NULL;
	}
	return s;
}

void http_server_destroy(struct http_server *s)
{
	if (!s)
		return;
	if (s->mhd) {
		/* Take the listening socket back first so MHD does not close it (the caller owns
		 * it and unlinks the path). */
		MHD_quiesce_daemon(s->mhd);
		/* Let answers in progress finish (an event stream sending its "end" line after the
		 * scheduler stopped) before the connections are cut. */
		uint64_t deadline = time_mono_us() + HTTP_DRAIN_TIMEOUT_US;
		while (atomic_load(&s->in_flight) > 0 && time_mono_us() < deadline)
			time_sleep_us(10000);
	}
	if (s->reaper_started) {
		pthread_mutex_lock(&s->conns_lock);
		s->stopping = true;
		pthread_cond_signal(&s->reaper_cond);
		pthread_mutex_unlock(&s->conns_lock);
		pthread_join(s->reaper, NULL);
	}
	/* Closes every connection, and with it (connection_notify) every struct conn. */
	if (s->mhd)
		MHD_stop_daemon(s->mhd);
	pthread_cond_destroy(&s->reaper_cond);
	pthread_mutex_destroy(&s->conns_lock);
	free(s);
}
