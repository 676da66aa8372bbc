/* holoctl mcp: the MCP server's I/O half (mcp.h has the design): stdin's lines, a thread per
 * request that talks to holod, the replies and notifications on stdout. */
#include "cli.h"
#include "mcp.h"

#include "common.h"
#include "http.h"
#include "ipc.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

/* Suggested to clients polling an MCP task (tasks/get). */
#define MCP_POLL_INTERVAL_MS 1000

struct server {
	const char *socket_path;
	FILE *out;
	pthread_mutex_t out_lock; /* one message per line, whole */
	pthread_mutex_t lock;	  /* calls, n_calls, version */
	pthread_cond_t idle;
	struct call *calls;
	unsigned n_calls;
	char version[16]; /* negotiated; "" before initialize */
	bool elicitation; /* the client declared elicitation: a task's question goes to it */
	bool eof;	  /* stdin ended: nothing will answer our requests */
	json_int_t last_request_id;
	struct outgoing *outgoing; /* our requests to the client, waiting for its answer */
	pthread_cond_t answered;
};

/* A request of ours (elicitation/create) waiting for the client's response. */
struct outgoing {
	json_int_t id;
	json_t *response; /* the whole response message, once it came */
	struct outgoing *next;
};

/* One request handled on a thread of its own. */
struct call {
	struct server *srv;
	struct mcp_message msg;
	json_t *progress_token; /* borrowed from msg; NULL when none */
	double progress;
	/* Set by the main thread: CANCEL_REQUEST on notifications/cancelled (no answer is sent
	 * then), CANCEL_EOF at the end of stdin. The HTTP stream looks at it as data arrives and
	 * at least once a second. */
	volatile sig_atomic_t cancelled;
	struct cli_http *http;
	char error[MCP_MAX_MESSAGE + CLI_MAX_ERROR_LEN];
	long status; /* the HTTP status of the last failed request; 0: transport */
	struct call *next;
};

enum { CANCEL_REQUEST = 1, CANCEL_EOF = 2 };

/* Report pages go through `holoctl report`, whose option parsing (getopt) is not reentrant. */
static pthread_mutex_t report_lock = PTHREAD_MUTEX_INITIALIZER;

static void send_message(struct server *srv, json_t *msg)
{
	char *s = json_dumps(msg, JSON_COMPACT);

	json_decref(msg);
	if (!s) {
		log_error("mcp: cannot serialize a message (out of memory)");
		return;
	}
	pthread_mutex_lock(&srv->out_lock);
	/* Compact JSON escapes control characters, so the message is one line. */
	if (fputs(s, srv->out) == EOF || fputc('\n', srv->out) == EOF || fflush(srv->out) != 0)
		log_error("mcp: cannot write to stdout: %s", strerror(errno));
	pthread_mutex_unlock(&srv->out_lock);
	free(s);
}

static bool version_has_tasks(struct server *srv)
{
	bool r;
	pthread_mutex_lock(&srv->lock);
	r = srv->version[0] && strcmp(srv->version, "2025-11-25") >= 0;
	pthread_mutex_unlock(&srv->lock);
	return r;
}

/* ---- holod ------------------------------------------------------------------------------------ */

/* Fails the call's request with a sentence in c->error. */
static int request_failed(struct call *c, int r, struct cli_http_response *resp)
{
	char buf[CLI_MAX_ERROR_LEN + 256];

	if (r < 0) {
		c->status = 0;
		snprintf(c->error, sizeof(c->error), "%s", cli_http_strerror(c->http, r, buf, sizeof(buf)));
		return r;
	}
	c->status = resp->status;
	cli_format_api_error(resp->status, resp->body, resp->size, buf, sizeof(buf));
	snprintf(c->error, sizeof(c->error), "%s", buf);
	cli_http_response_finish(resp);
	return -EPROTO;
}

/* A request whose 2xx answer is JSON (*ret, may be NULL). Negative with c->error set. */
static int holod_json(struct call *c, const char *method, const char *path, const char *body, json_t **ret)
{
	struct cli_http_response resp = {0};
	json_error_t jerr;
	json_t *root;
	int r = cli_http_request(c->http, method, path, body, &resp);

	if (r < 0 || resp.status >= 300)
		return request_failed(c, r, &resp);
	c->status = resp.status;
	root = json_loadb(resp.body, resp.size, 0, &jerr);
	cli_http_response_finish(&resp);
	if (!root) {
		snprintf(c->error, sizeof(c->error), "holod sent invalid JSON for %s %s: %s", method, path,
			 jerr.text);
		return -EPROTO;
	}
	if (ret)
		*ret = root;
	else
		json_decref(root);
	return 0;
}

static int holod_raw(struct call *c, const char *path, char **ret_body, size_t *ret_size)
{
	struct cli_http_response resp = {0};
	int r = cli_http_request(c->http, "GET", path, NULL, &resp);

	if (r < 0 || resp.status >= 300)
		return request_failed(c, r, &resp);
	*ret_body = resp.body;
	*ret_size = resp.size;
	resp.body = NULL;
	cli_http_response_finish(&resp);
	return 0;
}

/* ---- results ---------------------------------------------------------------------------------- */

static json_t *text_content(const char *text)
{
	return json_pack("{s:s, s:s}", "type", "text", "text", text);
}

/* A CallToolResult: content, optional structuredContent (stolen), isError. */
static json_t *tool_result(const char *text, json_t *structured, bool is_error)
{
	json_t *r = json_pack("{s:[o], s:b}", "content", text_content(text), "isError", is_error);
	if (structured)
		json_object_set_new(r, "structuredContent", structured);
	return r;
}

static const char *str_of(json_t *o, const char *name)
{
	return json_string_value(json_object_get(o, name));
}

static long long int_of(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* "step 2 click 640,32: clicked left x1 at (640,32)" */
static void step_line(json_t *step, char *buf, size_t size)
{
	json_t *call = json_object_get(step, "tool_call");
	char point[64], args[256];
	const char *err = str_of(step, "error"), *res = str_of(step, "result");

	cli_format_point(json_object_get(step, "pixels"), point, sizeof(point));
	cli_format_tool_args(call, args, sizeof(args));
	snprintf(buf, size, "step %lld %s%s%s%s%s: %s%s", int_of(step, "index"),
		 str_of(call, "tool_name") ? str_of(call, "tool_name") : "invalid",
		 strcmp(point, "-") ? " " : "", strcmp(point, "-") ? point : "", args[0] ? " " : "", args,
		 err ? "error: " : "",
		 err ? err :
		 res ? res :
		       "");
}

static void send_progress(struct call *c, const char *message, double total)
{
	json_t *params;

	if (!c->progress_token)
		return;
	params = json_pack("{s:O, s:f, s:s}", "progressToken", c->progress_token, "progress", c->progress,
			   "message", message);
	if (total > 0)
		json_object_set_new(params, "total", json_real(total));
	c->progress += 1;
	send_message(c->srv, json_pack("{s:s, s:s, s:o}", "jsonrpc", "2.0", "method",
				       "notifications/progress", "params", params));
}

/* ---- following a task ------------------------------------------------------------------------- */

struct follow {
	struct call *c;
	bool elicit;   /* a tools/call: a question of the task's goes to the client */
	json_t *task;  /* the last task object seen ("end": the final one) */
	json_t *steps; /* the step events' steps, in order */
	bool ended;
	double total;  /* a script's action count, for progress; 0 for an instruction */
	bool progress; /* send notifications/progress */
};

/* "task 7 step 2 waits for approval to hotkey alt+f4 (the reason) in "notes.txt" ..." */
static void approval_line(long long task_id, json_t *w, char *buf, size_t size)
{
	json_t *action = json_object_get(w, "action");
	json_t *target = json_object_get(w, "target");
	char args[256], point[64];

	cli_format_tool_args(action, args, sizeof(args));
	cli_format_point(json_object_get(w, "point"), point, sizeof(point));
	snprintf(buf, size, "task %lld step %lld waits for approval to %s%s%s%s%s%s%s%s: %s", task_id,
		 int_of(w, "step"), str_of(action, "tool_name") ? str_of(action, "tool_name") : "act",
		 args[0] ? " " : "", args, strcmp(point, "-") ? " at " : "", strcmp(point, "-") ? point : "",
		 str_of(target, "title") ? " in \"" : "",
		 str_of(target, "title") ? str_of(target, "title") : "", str_of(target, "title") ? "\"" : "",
		 str_of(w, "reason") ? str_of(w, "reason") : "held by its approval mode");
}

/* The progress message for an event other than task, step and end (docs/api.md, "GET
 * /v1/tasks/{id}/events"): a change of status, a wait for the user, and of the progress
 * phases those a client can act on or wait for (the queue, the model's load, its memory, the
 * action chosen); false for the others (each decoded token, prefill chunk, tile...). */
static bool event_line(json_t *ev, const char *kind, char *buf, size_t size)
{
	long long id = int_of(ev, "task_id");
	const char *phase = str_of(ev, "phase");

	if (strcmp(kind, "status") == 0 && str_of(ev, "status")) {
		snprintf(buf, size, "task %lld %s", id, str_of(ev, "status"));
		return true;
	}
	if (strcmp(kind, "waiting") == 0) {
		json_t *w = json_object_get(ev, "waiting");
		const char *q = str_of(w, "question");
		if (str_of(w, "for") && strcmp(str_of(w, "for"), "approval") == 0) {
			approval_line(id, w, buf, size);
			size_t n = strlen(buf);
			snprintf(buf + n, size - n,
				 " (holoctl approve or deny, or the MCP client's "
				 "form where it takes elicitation)");
		} else if (str_of(w, "for") && strcmp(str_of(w, "for"), "reply") == 0 && q)
			snprintf(buf, size,
				 "task %lld waits for its user: %s (answer with the reply_task tool)", id, q);
		else
			snprintf(buf, size, "task %lld waits for its user (%s)", id,
				 str_of(w, "for") ? str_of(w, "for") : "?");
		return true;
	}
	if (!phase)
		return false;
	if (strcmp(phase, "queued") == 0) {
		snprintf(buf, size, "task %lld queued behind %lld", id, int_of(ev, "ahead"));
	} else if (strcmp(phase, "loading") == 0) {
		snprintf(buf, size, "task %lld waits for the model to load (%lld of %lld MiB)", id,
			 int_of(ev, "bytes") >> 20, int_of(ev, "total") >> 20);
	} else if (strcmp(phase, "admission") == 0) {
		snprintf(buf, size, "task %lld waits for model memory (position %lld)", id,
			 int_of(ev, "position"));
	} else if (strcmp(phase, "action") == 0) {
		json_t *call = json_object_get(ev, "tool_call");
		char args[256];
		cli_format_tool_args(call, args, sizeof(args));
		snprintf(buf, size, "step %lld: %s%s%s%s%s", int_of(ev, "step"),
			 str_of(call, "tool_name") ? str_of(call, "tool_name") : "?", args[0] ? " " : "",
			 args, str_of(ev, "thought") ? " -- " : "",
			 str_of(ev, "thought") ? str_of(ev, "thought") : "");
	} else {
		return false;
	}
	return true;
}

/* Sends a request to the client and waits for its response (NULL when stdin ends first). */
static json_t *client_request(struct server *srv, const char *method, json_t *params)
{
	struct outgoing o = {0};
	json_t *response;

	pthread_mutex_lock(&srv->lock);
	o.id = ++srv->last_request_id;
	o.next = srv->outgoing;
	srv->outgoing = &o;
	pthread_mutex_unlock(&srv->lock);
	send_message(srv, json_pack("{s:s, s:I, s:s, s:o}", "jsonrpc", "2.0", "id", o.id, "method", method,
				    "params", params));
	pthread_mutex_lock(&srv->lock);
	while (!o.response && !srv->eof)
		pthread_cond_wait(&srv->answered, &srv->lock);
	for (struct outgoing **p = &srv->outgoing; *p; p = &(*p)->next)
		if (*p == &o) {
			*p = o.next;
			break;
		}
	response = o.response;
	pthread_mutex_unlock(&srv->lock);
	return response;
}

/* The client's user's decision on a held step: accepted with approve true lets it run, with
 * approve false or a declined form denies it (with the reason given); a dismissed form
 * (cancel) or an error decides nothing, and the step waits on (holoctl approve/deny, or holod's
 * --approve-timeout, which fails it closed). */
static void decide_approval(struct call *c, long long task_id, const char *action, json_t *approve,
			    json_t *reason)
{
	bool accept = action && strcmp(action, "accept") == 0;
	bool decline = action && strcmp(action, "decline") == 0;
	char path[64], *body = NULL;

	if (!(accept && json_is_boolean(approve)) && !decline) {
		log_info("mcp: task %lld: the client's user did not decide on the held step (%s)", task_id,
			 action ? action : "an error");
		return;
	}
	if (!(c->http = cli_http_create(c->srv->socket_path)))
		return;
	bool yes = accept && json_is_true(approve);
	snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/%s", task_id, yes ? "approve" : "deny");
	if (!yes) {
		json_t *b = json_pack("{s:s}", "reason",
				      json_is_string(reason) && json_string_length(reason) > 0 &&
						      json_string_length(reason) <= IPC_MAX_REPLY_BYTES ?
					      json_string_value(reason) :
					      "denied in the MCP client");
		body = json_dumps(b, JSON_COMPACT);
		json_decref(b);
	}
	if (holod_json(c, "POST", path, body, NULL) < 0)
		log_warning("mcp: task %lld: cannot send the decision: %s", task_id, c->error);
	else
		log_info("mcp: task %lld: the client's user %s the held step", task_id,
			 yes ? "approved" : "denied");
	free(body);
	cli_http_destroy(c->http);
	c->http = NULL;
}

struct elicit {
	struct server *srv;
	long long task_id;
	bool approval;	/* a step held for approval, else a question (ask_user) */
	char *question; /* the form's message */
};

/* Asks the client's user the task's question (elicitation/create, a form with one string) and
 * sends an accepted answer as the task's reply. A declined or cancelled form leaves the task
 * waiting: reply_task, holoctl reply or the task's timeout end the wait then. */
static void *elicit_thread(void *arg)
{
	struct elicit *e = arg;
	struct server *srv = e->srv;
	struct call c = {.srv = srv};
	json_t *params, *response, *result, *answer;
	const char *action;

	if (e->approval)
		params = json_pack("{s:s, s:{s:s, s:{s:{s:s, s:s, s:s}, s:{s:s, s:s, s:i}}, s:[s]}}",
				   "message", e->question, "requestedSchema", "type", "object", "properties",
				   "approve", "type", "boolean", "title", "Let this step run", "description",
				   "true: the step acts; false: it is denied and does nothing", "reason",
				   "type", "string", "title", "Why (when denied)", "maxLength",
				   IPC_MAX_REPLY_BYTES, "required", "approve");
	else
		params = json_pack("{s:s, s:{s:s, s:{s:{s:s, s:s, s:s, s:i}}, s:[s]}}", "message",
				   e->question, "requestedSchema", "type", "object", "properties", "answer",
				   "type", "string", "title", "Answer", "description",
				   "holod's task waits for this answer", "maxLength", IPC_MAX_REPLY_BYTES,
				   "required", "answer");
	if (version_has_tasks(srv)) /* 2025-11-25 names the form mode */
		json_object_set_new(params, "mode", json_string("form"));
	response = client_request(srv, "elicitation/create", params);
	result = json_object_get(response, "result");
	action = str_of(result, "action");
	answer = json_object_get(json_object_get(result, "content"), "answer");
	if (e->approval && response) {
		decide_approval(&c, e->task_id, action,
				json_object_get(json_object_get(result, "content"), "approve"),
				json_object_get(json_object_get(result, "content"), "reason"));
	} else if (!response) {
		/* stdin ended */
	} else if (!action || strcmp(action, "accept") != 0 || !json_is_string(answer)) {
		log_info("mcp: task %lld: the client's user did not answer its question (%s)", e->task_id,
			 action ? action : "an error");
	} else if ((c.http = cli_http_create(srv->socket_path))) {
		char path[64];
		json_t *body = json_pack("{s:O}", "text", answer);
		char *text = json_dumps(body, JSON_COMPACT);

		snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/reply", e->task_id);
		if (text && holod_json(&c, "POST", path, text, NULL) < 0)
			log_warning("mcp: task %lld: cannot send the answer: %s", e->task_id, c.error);
		else
			log_info("mcp: task %lld: the client's user answered its question", e->task_id);
		free(text);
		json_decref(body);
		cli_http_destroy(c.http);
	}
	json_decref(response);
	free(e->question);
	free(e);
	pthread_mutex_lock(&srv->lock);
	srv->n_calls--;
	pthread_cond_broadcast(&srv->idle);
	pthread_mutex_unlock(&srv->lock);
	return NULL;
}

/* Starts elicit_thread for a task's question when the client takes elicitation requests. */
static void maybe_elicit(struct server *srv, long long task_id, json_t *waiting)
{
	const char *q = str_of(waiting, "question");
	struct elicit *e;
	pthread_attr_t attr;
	pthread_t thread;
	bool go;

	const char *what = str_of(waiting, "for");
	bool approval = what && strcmp(what, "approval") == 0;
	char msg[1024];

	if (!what || (!approval && (strcmp(what, "reply") != 0 || !q)))
		return;
	if (approval) {
		approval_line(task_id, waiting, msg, sizeof(msg));
		q = msg;
	}
	pthread_mutex_lock(&srv->lock);
	go = srv->elicitation && !srv->eof && srv->n_calls < 2 * MCP_MAX_INFLIGHT;
	if (go)
		srv->n_calls++; /* the end of stdin waits for it too */
	pthread_mutex_unlock(&srv->lock);
	if (!go)
		return;
	e = xmalloc(sizeof(*e));
	*e = (struct elicit){.srv = srv, .task_id = task_id, .approval = approval, .question = xstrdup(q)};
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&thread, &attr, elicit_thread, e) != 0) {
		free(e->question);
		free(e);
		pthread_mutex_lock(&srv->lock);
		srv->n_calls--;
		pthread_cond_broadcast(&srv->idle);
		pthread_mutex_unlock(&srv->lock);
	}
	pthread_attr_destroy(&attr);
}

static int follow_line(const char *line, size_t len, void *userdata)
{
	struct follow *f = userdata;
	json_t *ev = json_loadb(line, len, 0, NULL);
	const char *kind = str_of(ev, "event");
	char msg[512];

	if (!ev || !kind) {
		json_decref(ev);
		return 0; /* keep-alive lines are empty; anything else unknown is skipped */
	}
	if (strcmp(kind, "status") == 0 || strcmp(kind, "waiting") == 0 || strcmp(kind, "progress") == 0) {
		if (f->progress && event_line(ev, kind, msg, sizeof(msg)))
			send_progress(f->c, msg, f->total);
		if (f->elicit && strcmp(kind, "waiting") == 0)
			maybe_elicit(f->c->srv, int_of(ev, "task_id"), json_object_get(ev, "waiting"));
	} else if (strcmp(kind, "step") == 0 && json_is_object(json_object_get(ev, "step"))) {
		json_array_append(f->steps, json_object_get(ev, "step"));
		if (f->progress) {
			step_line(json_object_get(ev, "step"), msg, sizeof(msg));
			send_progress(f->c, msg, f->total);
		}
	} else if ((strcmp(kind, "task") == 0 || strcmp(kind, "end") == 0) &&
		   json_is_object(json_object_get(ev, "task"))) {
		json_t *task = json_object_get(ev, "task");
		json_decref(f->task);
		f->task = json_incref(task);
		if (strcmp(kind, "end") == 0)
			f->ended = true;
		else if (f->progress) {
			json_t *script = json_object_get(json_object_get(task, "spec"), "script");
			if (json_is_array(script))
				f->total = (double)json_array_size(script);
			snprintf(msg, sizeof(msg), "task %lld %s", int_of(task, "id"),
				 str_of(task, "status") ? str_of(task, "status") : "?");
			send_progress(f->c, msg, f->total);
		}
	}
	json_decref(ev);
	return 0;
}

/* Follows task id to its end. 0 with f->task final; -EINTR when the call was cancelled
 * (nothing else done); other negatives with c->error set. */
static int follow_task(struct call *c, long long id, struct follow *f)
{
	struct cli_http_response resp = {0};
	char path[64];
	int r;

	f->c = c;
	f->steps = json_array();
	snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/events", id);
	r = cli_http_stream(c->http, path, follow_line, f, &c->cancelled, 0, &resp);
	if (r == -EINTR || c->cancelled)
		return -EINTR;
	if (r < 0 || resp.status >= 300)
		return request_failed(c, r, &resp);
	cli_http_response_finish(&resp);
	if (!f->ended || !f->task) {
		snprintf(c->error, sizeof(c->error),
			 "the event stream of task %lld ended without its final status (did holod "
			 "stop?)",
			 id);
		return -EPROTO;
	}
	return 0;
}

static void follow_finish(struct follow *f)
{
	json_decref(f->task);
	json_decref(f->steps);
}

static void cancel_holod_task(struct call *c, long long id, const char *why)
{
	char path[64];

	snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/cancel", id);
	if (holod_json(c, "POST", path, NULL, NULL) < 0 && c->status != 409)
		log_warning("mcp: cannot cancel task %lld (%s): %s", id, why, c->error);
	else
		log_info("mcp: task %lld cancelled: %s", id, why);
}

/* The CallToolResult of a finished task, for the tool that ran it. */
static json_t *task_tool_result(enum mcp_plan_kind kind, json_t *task, json_t *steps)
{
	const char *status = str_of(task, "status") ? str_of(task, "status") : "unknown";
	bool ok = strcmp(status, "succeeded") == 0;
	json_t *step = json_array_get(steps, json_array_size(steps) - 1);
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	json_t *structured;
	char line[1024];

	if (!f)
		return NULL;
	if (kind == MCP_PLAN_LOCATE && ok && json_is_object(json_object_get(step, "pixels"))) {
		json_t *px = json_object_get(step, "pixels"), *m = json_object_get(step, "model");
		const char *target = str_of(json_object_get(step, "tool_call"), "target");
		fprintf(f,
			"\"%s\" is at (%lld,%lld) in pixels, (%lld,%lld) of 1000 in model "
			"coordinates (task %lld)",
			target ? target : "", int_of(px, "x"), int_of(px, "y"), int_of(m, "x"),
			int_of(m, "y"), int_of(task, "id"));
		structured = json_pack("{s:O, s:O, s:O, s:I}", "x", json_object_get(px, "x"), "y",
				       json_object_get(px, "y"), "model", m ? m : json_null(), "task_id",
				       (json_int_t)int_of(task, "id"));
	} else if (kind == MCP_PLAN_ACTION || kind == MCP_PLAN_LOCATE) {
		if (step) {
			step_line(step, line, sizeof(line));
			fputs(line, f);
		}
		if (!ok)
			fprintf(f, "%stask %lld %s: %s", step ? "\n" : "", int_of(task, "id"), status,
				str_of(task, "error") ? str_of(task, "error") : "no reason given");
		structured = json_pack("{s:O, s:O}", "task", task, "step", step ? step : json_null());
	} else {
		const char *result = str_of(task, "result"), *error = str_of(task, "error");
		size_t i;
		json_t *s;

		fprintf(f, "task %lld %s", int_of(task, "id"), status);
		if (result)
			fprintf(f, ": %s", result);
		else if (error)
			fprintf(f, ": %s", error);
		fprintf(f, " (%zu step%s)", json_array_size(steps), json_array_size(steps) == 1 ? "" : "s");
		json_array_foreach(steps, i, s)
		{
			step_line(s, line, sizeof(line));
			fprintf(f, "\n%s", line);
		}
		structured = json_pack("{s:O}", "task", task);
	}
	if (fclose(f) != 0) {
		free(text);
		json_decref(structured);
		return NULL;
	}
	json_t *r = tool_result(text, structured, !ok);
	free(text);
	return r;
}

/* ---- MCP tasks (2025-11-25) ------------------------------------------------------------------- */

/* holod's status as an MCP task status. */
static const char *task_status(const char *s)
{
	if (!s)
		return "failed";
	if (strcmp(s, "queued") == 0 || strcmp(s, "running") == 0 || strcmp(s, "waiting_for_user") == 0 ||
	    strcmp(s, "waiting_for_approval") == 0)
		return "working";
	if (strcmp(s, "succeeded") == 0)
		return "completed";
	if (strcmp(s, "cancelled") == 0)
		return "cancelled";
	return "failed"; /* failed, interrupted */
}

static json_t *mcp_task_of(json_t *task)
{
	const char *created = str_of(task, "created_at");
	const char *updated = str_of(task, "finished_at") ? str_of(task, "finished_at") :
			      str_of(task, "started_at")  ? str_of(task, "started_at") :
							    created;
	char id[MCP_MAX_TASK_ID_BYTES + 1];
	json_t *t;

	snprintf(id, sizeof(id), "%lld", int_of(task, "id"));
	/* ttl null: holod keeps a task until it is pruned (holoctl prune). */
	t = json_pack("{s:s, s:s, s:s, s:s, s:n, s:i}", "taskId", id, "status",
		      task_status(str_of(task, "status")), "createdAt", created ? created : "",
		      "lastUpdatedAt", updated ? updated : "", "ttl", "pollInterval", MCP_POLL_INTERVAL_MS);
	if (str_of(task, "error"))
		json_object_set_new(t, "statusMessage", json_string(str_of(task, "error")));
	else if (str_of(json_object_get(task, "waiting"), "question"))
		json_object_set_new(t, "statusMessage",
				    json_sprintf("waiting for its user (reply_task): %s",
						 str_of(json_object_get(task, "waiting"), "question")));
	else if (str_of(task, "status"))
		json_object_set_new(t, "statusMessage", json_sprintf("holod task %s", str_of(task, "status")));
	return t;
}

/* params.taskId as a holod task id; 0 and an error response otherwise. */
static long long task_id_param(struct call *c, json_t **ret_error)
{
	json_t *v = json_object_get(c->msg.params, "taskId");
	struct mcp_resource res;
	char uri[64];

	if (json_is_string(v) && json_string_length(v) <= MCP_MAX_TASK_ID_BYTES) {
		snprintf(uri, sizeof(uri), "holod://tasks/%s", json_string_value(v));
		if (mcp_resource_parse(uri, &res) == 0 && res.kind == MCP_RES_TASK)
			return res.task_id;
	}
	*ret_error = mcp_error_response(c->msg.id, MCP_ERR_INVALID_PARAMS,
					"taskId: expected the id of a holod task (a decimal "
					"string)");
	return 0;
}

/* ---- the methods ------------------------------------------------------------------------------ */

static json_t *tool_error(struct call *c)
{
	return mcp_result_response(c->msg.id, tool_result(c->error, NULL, true));
}

/* GET /v1/NAME, with ?display= percent-encoded when the call names one. */
static void display_path(char *path, size_t size, const char *name, const char *display)
{
	int n = snprintf(path, size, IPC_API_PREFIX "/%s", name);

	if (display) {
		/* Percent-encode everything but the unreserved characters. */
		n += snprintf(path + n, size - (size_t)n, "?display=");
		for (const unsigned char *s = (const unsigned char *)display; *s; s++)
			n += snprintf(path + n, size - (size_t)n,
				      (*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
						      (*s >= '0' && *s <= '9') || strchr("-._~", *s) ?
					      "%c" :
					      "%%%02X",
				      *s);
	}
}

static json_t *handle_windows(struct call *c, struct mcp_plan *p)
{
	char path[64 + 3 * IPC_MAX_DISPLAY_NAME_BYTES], *text = NULL;
	size_t len = 0;
	json_t *answer;

	display_path(path, sizeof(path), "windows", p->display);
	if (holod_json(c, "GET", path, NULL, &answer) < 0)
		return tool_error(c);
	FILE *f = open_memstream(&text, &len);
	if (f) {
		cli_print_windows(f, answer, 0);
		fclose(f);
	}
	json_t *res = mcp_result_response(c->msg.id, tool_result(text ? text : "", answer, false));
	free(text);
	return res;
}

static json_t *handle_screenshot(struct call *c, struct mcp_plan *p)
{
	char path[64 + 3 * IPC_MAX_DISPLAY_NAME_BYTES], *png = NULL, text[160];
	uint32_t w = 0, h = 0;
	size_t size = 0;

	display_path(path, sizeof(path), "screenshot", p->display);
	if (holod_raw(c, path, &png, &size) < 0)
		return tool_error(c);
	if (cli_png_size((const uint8_t *)png, size, &w, &h) < 0) {
		free(png);
		snprintf(c->error, sizeof(c->error), "holod's screenshot is not a PNG");
		return tool_error(c);
	}
	char *b64 = mcp_base64((const unsigned char *)png, size);
	free(png);
	snprintf(text, sizeof(text), "screenshot %ux%u pixels%s%s", w, h, p->display ? " of " : "",
		 p->display ? p->display : "");
	json_t *r = json_pack("{s:[{s:s, s:s}, {s:s, s:s, s:s}], s:{s:i, s:i}, s:b}", "content", "type",
			      "text", "text", text, "type", "image", "data", b64, "mimeType", "image/png",
			      "structuredContent", "width", (int)w, "height", (int)h, "isError", 0);
	free(b64);
	return mcp_result_response(c->msg.id, r);
}

static json_t *handle_tool_call(struct call *c)
{
	struct mcp_plan p;
	char err[MCP_MAX_MESSAGE];
	json_t *res = NULL, *task = NULL;
	int r = mcp_plan_tool_call(c->msg.params, &p, err, sizeof(err));

	if (r == MCP_ERR_INVALID_PARAMS)
		return mcp_error_response(c->msg.id, r, "%s", err);
	if (r < 0) {
		snprintf(c->error, sizeof(c->error), "%s", err);
		res = tool_error(c);
		goto out;
	}
	switch (p.kind) {
	case MCP_PLAN_SCREENSHOT:
		res = handle_screenshot(c, &p);
		break;
	case MCP_PLAN_WINDOWS:
		res = handle_windows(c, &p);
		break;
	case MCP_PLAN_STATUS: {
		json_t *st;
		if (holod_json(c, "GET", IPC_API_PREFIX "/status", NULL, &st) < 0) {
			res = tool_error(c);
			break;
		}
		char *text = json_dumps(st, JSON_INDENT(1) | JSON_SORT_KEYS);
		res = mcp_result_response(c->msg.id, tool_result(text ? text : "", st, false));
		free(text);
		break;
	}
	case MCP_PLAN_REPLY: {
		char path[64], text[128];
		snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/reply", p.task_id);
		if (holod_json(c, "POST", path, p.body, &task) < 0) {
			res = tool_error(c);
			break;
		}
		snprintf(text, sizeof(text), "task %lld has its answer", p.task_id);
		res = mcp_result_response(c->msg.id, tool_result(text, json_incref(task), false));
		break;
	}
	case MCP_PLAN_CANCEL: {
		char path[64], text[128];
		snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/cancel", p.task_id);
		if (holod_json(c, "POST", path, NULL, &task) < 0) {
			res = tool_error(c);
			break;
		}
		snprintf(text, sizeof(text), "task %lld %s", p.task_id,
			 c->status == 202 ? "stops at its next safe point" : "cancelled");
		res = mcp_result_response(c->msg.id, tool_result(text, json_incref(task), false));
		break;
	}
	case MCP_PLAN_TASK:
	case MCP_PLAN_ACTION:
	case MCP_PLAN_LOCATE: {
		struct follow f = {.progress = c->progress_token != NULL, .elicit = true};
		long long id;

		if (c->cancelled)
			break;
		if (holod_json(c, "POST", IPC_API_PREFIX "/tasks", p.body, &task) < 0) {
			res = tool_error(c);
			break;
		}
		id = int_of(task, "id");
		if (id < 1) {
			snprintf(c->error, sizeof(c->error), "holod's answer to POST /v1/tasks has no id");
			res = tool_error(c);
			break;
		}
		if (p.wants_task && version_has_tasks(c->srv)) {
			/* CreateTaskResult: the client polls tasks/get and asks tasks/result. */
			res = mcp_result_response(c->msg.id, json_pack("{s:o}", "task", mcp_task_of(task)));
			log_info("mcp: %s started task %lld as an MCP task", p.tool, id);
			break;
		}
		r = follow_task(c, id, &f);
		if (r == -EINTR)
			cancel_holod_task(c, id,
					  c->cancelled == CANCEL_EOF ?
						  "the client closed stdin before the task ended" :
						  "the client cancelled the request");
		else if (r < 0)
			res = tool_error(c);
		else
			res = mcp_result_response(c->msg.id, task_tool_result(p.kind, f.task, f.steps));
		follow_finish(&f);
		break;
	}
	}
out:
	json_decref(task);
	mcp_plan_finish(&p);
	return res;
}

/* One page of holod's task list from the request's cursor (tasks/list and resources/list):
 * the list (owned), *ret_offset the page's first task; NULL with *ret_error the response. */
static json_t *task_page(struct call *c, long long *ret_offset, json_t **ret_error)
{
	json_t *cursor = json_object_get(c->msg.params, "cursor"), *list;
	long long offset = 0;
	char path[96];

	if (cursor) {
		const char *s = json_string_value(cursor);
		struct mcp_resource res0;
		char uri[64];
		if (!s || strlen(s) > MCP_MAX_CURSOR_BYTES ||
		    (snprintf(uri, sizeof(uri), "holod://tasks/%s", s), mcp_resource_parse(uri, &res0) < 0)) {
			*ret_error = mcp_error_response(c->msg.id, MCP_ERR_INVALID_PARAMS,
							"cursor: not one this server gave");
			return NULL;
		}
		offset = res0.task_id;
	}
	snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks?limit=%d&offset=%lld", MCP_RESOURCE_PAGE, offset);
	if (holod_json(c, "GET", path, NULL, &list) < 0) {
		*ret_error = mcp_error_response(c->msg.id, MCP_ERR_INTERNAL, "%s", c->error);
		return NULL;
	}
	*ret_offset = offset;
	return list;
}

static json_t *handle_tasks_method(struct call *c, const char *what)
{
	json_t *error = NULL, *task = NULL, *res = NULL;
	char path[96];
	long long id;

	if (strcmp(what, "list") == 0) {
		json_t *list, *tasks, *t;
		long long offset = 0;
		size_t i;

		if (!(list = task_page(c, &offset, &error)))
			return error;
		tasks = json_array();
		json_array_foreach(json_object_get(list, "tasks"), i, t)
			json_array_append_new(tasks, mcp_task_of(t));
		res = json_pack("{s:o}", "tasks", tasks);
		if (int_of(list, "total") > offset + (long long)json_array_size(tasks) &&
		    json_array_size(tasks) > 0)
			json_object_set_new(res, "nextCursor", json_sprintf("%lld", offset + (long long)i));
		json_decref(list);
		return mcp_result_response(c->msg.id, res);
	}
	id = task_id_param(c, &error);
	if (!id)
		return error;
	if (strcmp(what, "cancel") == 0) {
		snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/cancel", id);
		if (holod_json(c, "POST", path, NULL, &task) < 0)
			return mcp_error_response(c->msg.id,
						  c->status == 404 || c->status == 409 ?
							  MCP_ERR_INVALID_PARAMS :
							  MCP_ERR_INTERNAL,
						  "%s", c->error);
		/* 202: holod stops it at its next safe point; cancelled is where it ends. */
		res = mcp_task_of(task);
		json_object_set_new(res, "status", json_string("cancelled"));
		json_decref(task);
		return mcp_result_response(c->msg.id, res);
	}
	snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld", id);
	if (holod_json(c, "GET", path, NULL, &task) < 0)
		return mcp_error_response(c->msg.id,
					  c->status == 404 ? MCP_ERR_INVALID_PARAMS : MCP_ERR_INTERNAL, "%s",
					  c->error);
	if (strcmp(what, "get") == 0) {
		res = mcp_task_of(task);
		json_decref(task);
		return mcp_result_response(c->msg.id, res);
	}
	/* tasks/result: waits for the end (a cancelled tasks/result leaves the task running). */
	struct follow f = {0};
	int r = follow_task(c, id, &f);
	json_decref(task);
	if (r == -EINTR) {
		follow_finish(&f);
		return NULL;
	}
	if (r < 0) {
		follow_finish(&f);
		return mcp_error_response(c->msg.id, MCP_ERR_INTERNAL, "%s", c->error);
	}
	snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/steps", id);
	json_t *steps = NULL;
	if (holod_json(c, "GET", path, NULL, &steps) == 0) {
		json_decref(f.steps);
		f.steps = json_incref(json_object_get(steps, "steps"));
		json_decref(steps);
	}
	res = task_tool_result(MCP_PLAN_TASK, f.task, f.steps);
	if (res) {
		char tid[32];
		snprintf(tid, sizeof(tid), "%lld", id);
		json_object_set_new(res, "_meta",
				    json_pack("{s:{s:s}}", "io.modelcontextprotocol/related-task", "taskId",
					      tid));
	}
	follow_finish(&f);
	return mcp_result_response(c->msg.id, res);
}

/* One resources/list entry for task (its suffix: "", "/steps" or "/report"). */
static json_t *resource_entry(json_t *task, const char *suffix, const char *mime)
{
	const char *instr = str_of(json_object_get(task, "spec"), "instruction");
	const char *status = str_of(task, "status") ? str_of(task, "status") : "?";
	json_t *script = json_object_get(json_object_get(task, "spec"), "script");
	long long id = int_of(task, "id");
	char desc[192];

	if (instr)
		snprintf(desc, sizeof(desc), "%s: %.120s", status, instr);
	else
		snprintf(desc, sizeof(desc), "%s: a script of %zu action%s", status, json_array_size(script),
			 json_array_size(script) == 1 ? "" : "s");
	return json_pack("{s:o, s:o, s:s, s:s}", "uri", json_sprintf("holod://tasks/%lld%s", id, suffix),
			 "name",
			 json_sprintf("task %lld%s%s", id, suffix[0] ? " " : "", suffix[0] ? suffix + 1 : ""),
			 "description", desc, "mimeType", mime);
}

static json_t *handle_resources_list(struct call *c)
{
	json_t *list, *out, *t, *error = NULL;
	long long offset = 0;
	size_t i;

	if (!(list = task_page(c, &offset, &error)))
		return error;
	out = json_array();
	json_array_foreach(json_object_get(list, "tasks"), i, t)
	{
		json_array_append_new(out, resource_entry(t, "", "application/json"));
		json_array_append_new(out, resource_entry(t, "/steps", "application/json"));
		json_array_append_new(out, resource_entry(t, "/report", "text/html"));
	}
	json_t *res = json_pack("{s:o}", "resources", out);
	if (int_of(list, "total") > offset + (long long)i && i > 0)
		json_object_set_new(res, "nextCursor", json_sprintf("%lld", offset + (long long)i));
	json_decref(list);
	return mcp_result_response(c->msg.id, res);
}

/* `holoctl report ID -o -` into memory. */
static int report_page(struct call *c, long long id, char **ret, size_t *ret_len)
{
	char *out = NULL, *err = NULL, ids[32];
	size_t out_len = 0, err_len = 0;
	char *argv[] = {"report", "-o", "-", ids, NULL};
	struct cli_context ctx = {.socket_path = c->srv->socket_path, .http = c->http};
	int r;

	snprintf(ids, sizeof(ids), "%lld", id);
	ctx.out = open_memstream(&out, &out_len);
	ctx.err = open_memstream(&err, &err_len);
	if (!ctx.out || !ctx.err) {
		if (ctx.out)
			fclose(ctx.out);
		if (ctx.err)
			fclose(ctx.err);
		free(out);
		free(err);
		snprintf(c->error, sizeof(c->error), "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_lock(&report_lock);
	r = cli_cmd_report.run(&ctx, 4, argv);
	pthread_mutex_unlock(&report_lock);
	fclose(ctx.out);
	fclose(ctx.err);
	if (r != CLI_EXIT_OK) {
		/* "holoctl: MESSAGE\n" */
		const char *m = err && strncmp(err, "holoctl: ", 9) == 0 ? err + 9 : err ? err : "";
		snprintf(c->error, sizeof(c->error), "%.*s", (int)strcspn(m, "\n"), m);
		c->status = strstr(m, "HTTP 404") ? 404 : 500;
		free(out);
		free(err);
		return -EIO;
	}
	free(err);
	if (out_len > MCP_MAX_REPORT_BYTES) {
		free(out);
		snprintf(c->error, sizeof(c->error),
			 "the report of task %lld is %zu bytes, over the limit of %u "
			 "(MCP_MAX_REPORT_BYTES); write it with `holoctl report --external-images`",
			 id, out_len, MCP_MAX_REPORT_BYTES);
		c->status = 413;
		return -E2BIG;
	}
	*ret = out;
	*ret_len = out_len;
	return 0;
}

static json_t *handle_resources_read(struct call *c)
{
	json_t *uri = json_object_get(c->msg.params, "uri"), *content = NULL, *v = NULL;
	struct mcp_resource res;
	char path[128], *body = NULL;
	size_t size = 0;
	int r = 0;

	if (!json_is_string(uri))
		return mcp_error_response(c->msg.id, MCP_ERR_INVALID_PARAMS,
					  "resources/read needs the \"uri\" (a string)");
	if (mcp_resource_parse(json_string_value(uri), &res) < 0)
		return json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:O}}}", "jsonrpc", "2.0", "id", c->msg.id,
				 "error", "code", MCP_ERR_RESOURCE_NOT_FOUND, "message",
				 "Resource not found: holod://tasks/ID, .../steps, .../report or "
				 ".../steps/N/screenshot/before|after",
				 "data", "uri", uri);
	switch (res.kind) {
	case MCP_RES_TASK:
	case MCP_RES_STEPS:
		snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld%s", res.task_id,
			 res.kind == MCP_RES_STEPS ? "/steps" : "");
		r = holod_json(c, "GET", path, NULL, &v);
		if (r == 0) {
			char *text = json_dumps(v, JSON_INDENT(1));
			content = json_pack("{s:O, s:s, s:s}", "uri", uri, "mimeType", "application/json",
					    "text", text ? text : "null");
			free(text);
			json_decref(v);
		}
		break;
	case MCP_RES_REPORT:
		r = report_page(c, res.task_id, &body, &size);
		if (r == 0)
			content = json_pack("{s:O, s:s, s:s%}", "uri", uri, "mimeType", "text/html", "text",
					    body, size);
		break;
	case MCP_RES_SCREENSHOT:
		snprintf(path, sizeof(path), IPC_API_PREFIX "/tasks/%lld/steps/%lld/screenshot?which=%s",
			 res.task_id, res.step, res.before ? "before" : "after");
		r = holod_raw(c, path, &body, &size);
		if (r == 0) {
			char *b64 = mcp_base64((const unsigned char *)body, size);
			content = json_pack("{s:O, s:s, s:s}", "uri", uri, "mimeType", "image/png", "blob",
					    b64);
			free(b64);
		}
		break;
	}
	free(body);
	if (r < 0) {
		if (c->status == 404 || c->status == 410)
			return json_pack("{s:s, s:O, s:{s:i, s:s, s:{s:O}}}", "jsonrpc", "2.0", "id",
					 c->msg.id, "error", "code", MCP_ERR_RESOURCE_NOT_FOUND, "message",
					 c->error, "data", "uri", uri);
		return mcp_error_response(c->msg.id, MCP_ERR_INTERNAL, "%s", c->error);
	}
	if (!content)
		return mcp_error_response(c->msg.id, MCP_ERR_INTERNAL, "the resource is not valid UTF-8 text");
	return mcp_result_response(c->msg.id, json_pack("{s:[o]}", "contents", content));
}

/* ---- threads ---------------------------------------------------------------------------------- */

static void call_free(struct call *c)
{
	cli_http_destroy(c->http);
	mcp_message_finish(&c->msg);
	free(c);
}

static void *call_thread(void *arg)
{
	struct call *c = arg;
	struct server *srv = c->srv;
	const char *m = c->msg.method;
	json_t *answer = NULL;

	c->http = cli_http_create(srv->socket_path);
	if (!c->http)
		answer = mcp_error_response(c->msg.id, MCP_ERR_INTERNAL, "cannot set up the HTTP client: %s",
					    strerror(errno));
	else if (strcmp(m, "tools/call") == 0)
		answer = handle_tool_call(c);
	else if (strcmp(m, "resources/list") == 0)
		answer = handle_resources_list(c);
	else if (strcmp(m, "resources/read") == 0)
		answer = handle_resources_read(c);
	else if (strncmp(m, "tasks/", 6) == 0)
		answer = handle_tasks_method(c, m + 6);

	/* A cancelled request gets no answer (MCP: cancellation). */
	if (answer && c->cancelled != CANCEL_REQUEST)
		send_message(srv, answer);
	else
		json_decref(answer);

	pthread_mutex_lock(&srv->lock);
	for (struct call **p = &srv->calls; *p; p = &(*p)->next)
		if (*p == c) {
			*p = c->next;
			break;
		}
	srv->n_calls--;
	pthread_cond_broadcast(&srv->idle);
	pthread_mutex_unlock(&srv->lock);
	call_free(c);
	return NULL;
}

/* _meta.progressToken: 0 (absent, or *ret set), or -EINVAL. */
static int progress_token(json_t *params, json_t **ret)
{
	json_t *t = json_object_get(json_object_get(params, "_meta"), "progressToken");

	*ret = NULL;
	if (!t)
		return 0;
	if (json_is_integer(t) || (json_is_string(t) && json_string_length(t) <= MCP_MAX_TOKEN_BYTES)) {
		*ret = t;
		return 0;
	}
	return -EINVAL;
}

static bool threaded_method(const char *m)
{
	static const char *const names[] = {"tools/call",   "resources/list", "resources/read", "tasks/get",
					    "tasks/result", "tasks/cancel",   "tasks/list"};
	for (size_t i = 0; i < ARRAY_SIZE(names); i++)
		if (strcmp(names[i], m) == 0)
			return true;
	return false;
}

/* Takes msg (on success or not). */
static void start_call(struct server *srv, struct mcp_message *msg)
{
	struct call *c;
	pthread_attr_t attr;
	pthread_t thread;
	json_t *token;
	int r;

	if (progress_token(msg->params, &token) < 0) {
		send_message(srv, mcp_error_response(msg->id, MCP_ERR_INVALID_PARAMS,
						     "_meta.progressToken must be an integer or a "
						     "string of at most %d bytes",
						     MCP_MAX_TOKEN_BYTES));
		mcp_message_finish(msg);
		return;
	}
	pthread_mutex_lock(&srv->lock);
	for (c = srv->calls; c; c = c->next)
		if (json_equal(c->msg.id, msg->id))
			break;
	if (c || srv->n_calls >= MCP_MAX_INFLIGHT) {
		pthread_mutex_unlock(&srv->lock);
		send_message(srv, c ? mcp_error_response(msg->id, MCP_ERR_INVALID_REQUEST,
							 "a request with this id is still running") :
				      mcp_error_response(msg->id, MCP_ERR_INTERNAL,
							 "%d requests are running already "
							 "(MCP_MAX_INFLIGHT); retry when one ends",
							 MCP_MAX_INFLIGHT));
		mcp_message_finish(msg);
		return;
	}
	c = xmalloc(sizeof(*c));
	*c = (struct call){.srv = srv, .msg = *msg, .progress_token = token};
	*msg = (struct mcp_message){0};
	c->next = srv->calls;
	srv->calls = c;
	srv->n_calls++;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	r = pthread_create(&thread, &attr, call_thread, c);
	pthread_attr_destroy(&attr);
	if (r != 0) {
		srv->calls = c->next;
		srv->n_calls--;
		pthread_mutex_unlock(&srv->lock);
		send_message(srv, mcp_error_response(c->msg.id, MCP_ERR_INTERNAL, "cannot start a thread: %s",
						     strerror(r)));
		call_free(c);
		return;
	}
	pthread_mutex_unlock(&srv->lock);
}

static void cancel_call(struct server *srv, json_t *params)
{
	json_t *id = json_object_get(params, "requestId");
	struct call *c;

	pthread_mutex_lock(&srv->lock);
	for (c = srv->calls; c; c = c->next)
		if (id && json_equal(c->msg.id, id)) {
			c->cancelled = CANCEL_REQUEST;
			break;
		}
	pthread_mutex_unlock(&srv->lock);
	if (c) {
		const char *reason = str_of(params, "reason");
		char clean[MCP_MAX_REASON_BYTES + 1];
		size_t n = 0;

		/* The client's words, without the control characters that could fake log lines. */
		for (const char *p = reason; p && *p && n < sizeof(clean) - 1; p++)
			clean[n++] = (unsigned char)*p < 0x20 || *p == 0x7f ? ' ' : *p;
		clean[n] = '\0';
		log_info("mcp: the client cancelled a request%s%s", n ? ": " : "", clean);
	}
}

static void handle_message(struct server *srv, struct mcp_message *m)
{
	json_t *res = NULL;

	if (m->kind == MCP_MSG_RESPONSE) {
		/* The answer to one of our elicitation requests; any other is ignored. */
		pthread_mutex_lock(&srv->lock);
		for (struct outgoing *o = srv->outgoing; o; o = o->next)
			if (json_is_integer(m->id) && json_integer_value(m->id) == o->id && !o->response) {
				o->response = json_incref(m->root);
				pthread_cond_broadcast(&srv->answered);
				break;
			}
		pthread_mutex_unlock(&srv->lock);
		mcp_message_finish(m);
		return;
	}
	if (m->kind == MCP_MSG_NOTIFICATION) {
		if (strcmp(m->method, "notifications/cancelled") == 0)
			cancel_call(srv, m->params);
		mcp_message_finish(m); /* initialized, roots/list_changed... need nothing */
		return;
	}
	if (strcmp(m->method, "initialize") == 0) {
		const char *v = mcp_negotiate_version(
			json_string_value(json_object_get(m->params, "protocolVersion")));
		pthread_mutex_lock(&srv->lock);
		snprintf(srv->version, sizeof(srv->version), "%s", v);
		srv->elicitation = json_is_object(
			json_object_get(json_object_get(m->params, "capabilities"), "elicitation"));
		pthread_mutex_unlock(&srv->lock);
		res = mcp_initialize_result(v);
	} else if (strcmp(m->method, "ping") == 0) {
		res = json_object();
	} else if (strcmp(m->method, "tools/list") == 0) {
		pthread_mutex_lock(&srv->lock);
		res = mcp_tools_list(srv->version[0] ? srv->version : NULL);
		pthread_mutex_unlock(&srv->lock);
	} else if (strcmp(m->method, "resources/templates/list") == 0) {
		res = mcp_resource_templates();
	} else if (strcmp(m->method, "prompts/list") == 0) {
		res = json_pack("{s:[]}", "prompts");
	} else if (threaded_method(m->method)) {
		if (!m->params && strcmp(m->method, "resources/list") != 0 &&
		    strcmp(m->method, "tasks/list") != 0) {
			send_message(srv, mcp_error_response(m->id, MCP_ERR_INVALID_PARAMS, "%s needs params",
							     m->method));
			mcp_message_finish(m);
			return;
		}
		start_call(srv, m);
		return;
	} else {
		send_message(srv, mcp_error_response(m->id, MCP_ERR_METHOD_NOT_FOUND,
						     "unknown method '%.128s'", m->method));
		mcp_message_finish(m);
		return;
	}
	send_message(srv, mcp_result_response(m->id, res));
	mcp_message_finish(m);
}

/* Reads one line of at most MCP_MAX_LINE_BYTES into *buf (without the newline). Returns its
 * length, -E2BIG after skipping a longer line to its end, or -1 at the end of the input. */
static ssize_t read_line(FILE *in, char **buf, size_t *cap)
{
	size_t len = 0;
	bool over = false;
	int ch;

	while ((ch = getc_unlocked(in)) != EOF && ch != '\n') {
		if (over)
			continue;
		if (len == MCP_MAX_LINE_BYTES) {
			over = true;
			continue;
		}
		if (len + 1 >= *cap) {
			*cap = *cap ? *cap * 2 : 4096;
			*buf = xrealloc(*buf, *cap);
		}
		(*buf)[len++] = (char)ch;
	}
	if (ch == EOF && len == 0 && !over)
		return -1;
	if (over)
		return -E2BIG;
	if (len > 0 && (*buf)[len - 1] == '\r')
		len--;
	if (*cap == 0) {
		*cap = 4096;
		*buf = xrealloc(*buf, *cap);
	}
	(*buf)[len] = '\0';
	return (ssize_t)len;
}

static int mcp_run(struct cli_context *ctx, int argc, char **argv)
{
	static const struct option options[] = {CLI_COMMON_LONG_OPTIONS, {0}};
	struct server srv = {.out = ctx->out};
	char *line = NULL;
	size_t cap = 0;
	ssize_t n;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS, options, NULL)) != -1) {
		r = cli_common_option(ctx, &cli_cmd_mcp, c, argv);
		if (r >= 0)
			return r;
	}
	if (optind < argc)
		return cli_usage_error(ctx, &cli_cmd_mcp, "takes no arguments, not '%s'", argv[optind]);
	if (ctx->json)
		return cli_usage_error(ctx, &cli_cmd_mcp, "--json does not apply: MCP is JSON");
	if (!ctx->socket_path) {
		r = ipc_socket_path(&ctx->socket_owned);
		if (r < 0)
			return cli_error(ctx,
					 "cannot find holod's socket (%s): set XDG_RUNTIME_DIR "
					 "or pass --socket PATH",
					 strerror(-r));
		ctx->socket_path = ctx->socket_owned;
	}
	srv.socket_path = ctx->socket_path;
	pthread_mutex_init(&srv.out_lock, NULL);
	pthread_mutex_init(&srv.lock, NULL);
	pthread_cond_init(&srv.idle, NULL);
	pthread_cond_init(&srv.answered, NULL);
	/* A client that goes away must not kill us in the middle of cancelling its tasks. */
	signal(SIGPIPE, SIG_IGN);
	log_info("mcp: serving MCP on stdin/stdout for holod at %s", srv.socket_path);

	while ((n = read_line(ctx->in, &line, &cap)) != -1) {
		struct mcp_message m;
		json_t *error;

		if (n == -E2BIG) {
			send_message(&srv, mcp_error_response(NULL, MCP_ERR_INVALID_REQUEST,
							      "message over the limit of %u bytes "
							      "(MCP_MAX_LINE_BYTES)",
							      MCP_MAX_LINE_BYTES));
			continue;
		}
		if (n == 0)
			continue;
		if (mcp_message_parse(line, (size_t)n, &m, &error) < 0) {
			if (error)
				send_message(&srv, error);
			continue;
		}
		handle_message(&srv, &m);
	}
	free(line);

	/* The client closed stdin: what it started and still waits for is cancelled. */
	pthread_mutex_lock(&srv.lock);
	if (srv.n_calls)
		log_info("mcp: end of input: cancelling %u running request(s)", srv.n_calls);
	for (struct call *p = srv.calls; p; p = p->next)
		p->cancelled = CANCEL_EOF;
	srv.eof = true; /* nothing will answer our requests now */
	pthread_cond_broadcast(&srv.answered);
	while (srv.n_calls)
		pthread_cond_wait(&srv.idle, &srv.lock);
	pthread_mutex_unlock(&srv.lock);
	pthread_cond_destroy(&srv.idle);
	pthread_cond_destroy(&srv.answered);
	pthread_mutex_destroy(&srv.lock);
	pthread_mutex_destroy(&srv.out_lock);
	return CLI_EXIT_OK;
}

const struct cli_command cli_cmd_mcp = {
	.name = "mcp",
	.args = "[--socket PATH]",
	.summary = "serve holod to MCP clients (Model Context Protocol over stdio)",
	.help = "Speaks MCP (JSON-RPC 2.0, one message per line) on stdin and stdout, logs on\n"
		"stderr, and drives holod through its socket: no network port is opened and\n"
		"holod's same-user check applies. An MCP client starts it as a subprocess:\n"
		"  {\"mcpServers\": {\"holod\": {\"command\": \"holoctl\", \"args\": [\"mcp\"]}}}\n"
		"Tools: run_task (an instruction or a script; progress notifications per step;\n"
		"cancelling the request cancels the task; an MCP task from protocol 2025-11-25),\n"
		"screenshot, locate, the actions (click, double_click, triple_click, move, drag,\n"
		"scroll, write, hotkey, key_down, key_up, hold_and_tap_key, wait, launch,\n"
		"wait_for, activate), status, cancel_task and reply_task. Resources:\n"
		"holod://tasks/ID,\n"
		"holod://tasks/ID/steps, holod://tasks/ID/report and\n"
		"holod://tasks/ID/steps/N/screenshot/before|after. At the end of stdin the\n"
		"requests still running are cancelled, their tasks with them.\n",
	.run = mcp_run,
};
