/* Reading one answer of an OpenAI-compatible server (remote-reply.h). */
#include "remote-reply.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agent.h"
#include "common.h"

int remote_buf_add(struct remote_buf *b, const char *p, size_t n)
{
	if (n > b->max - b->len)
		return -E2BIG;
	if (b->len + n + 1 > b->cap) {
		size_t cap = MAX(b->cap * 2, b->len + n + 1);
		b->data = xrealloc(b->data, MIN(cap, b->max + 1));
		b->cap = MIN(cap, b->max + 1);
	}
	memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

void remote_reply_init(struct remote_reply *rep, bool stream, size_t body_max)
{
	*rep = (struct remote_reply){.stream = stream,
				     .retry_after_s = -1,
				     .prompt_tokens = -1,
				     .completion_tokens = -1};
	rep->line.max = REMOTE_MAX_SSE_LINE;
	rep->body.max = body_max;
	rep->content.max = AGENT_MAX_RAW_BYTES;
	rep->reasoning.max = AGENT_MAX_RAW_BYTES;
}

void remote_reply_finish(struct remote_reply *rep)
{
	free(rep->line.data);
	free(rep->body.data);
	free(rep->content.data);
	free(rep->reasoning.data);
}

/* Takes what a chat completion (a whole one, or one streamed chunk) says. -errno with
 * rep->err filled when it is an error or over a limit. */
static int take_completion(struct remote_reply *rep, json_t *o, bool chunk)
{
	json_t *e = json_object_get(o, "error");
	if (e) {
		const char *msg = json_string_value(json_object_get(e, "message"));
		if (!msg)
			msg = json_string_value(e);
		snprintf(rep->err, sizeof(rep->err), "the model server reported an error: %.300s",
			 msg ? msg : "(no message)");
		return -EPROTO;
	}
	const char *model = json_string_value(json_object_get(o, "model"));
	if (model)
		snprintf(rep->model, sizeof(rep->model), "%s", model);
	json_t *usage = json_object_get(o, "usage");
	if (json_is_object(usage)) {
		json_t *p = json_object_get(usage, "prompt_tokens");
		json_t *c = json_object_get(usage, "completion_tokens");
		/* A negative count is no count. */
		if (json_is_integer(p) && json_integer_value(p) >= 0)
			rep->prompt_tokens = json_integer_value(p);
		if (json_is_integer(c) && json_integer_value(c) >= 0)
			rep->completion_tokens = json_integer_value(c);
	}
	json_t *choice = json_array_get(json_object_get(o, "choices"), 0);
	json_t *msg = json_object_get(choice, chunk ? "delta" : "message");
	const char *text = json_string_value(json_object_get(msg, "content"));
	if (text && remote_buf_add(&rep->content, text, strlen(text)) < 0) {
		snprintf(rep->err, sizeof(rep->err), "the answer is longer than %d bytes",
			 AGENT_MAX_RAW_BYTES);
		return -E2BIG;
	}
	/* A server's reasoning parser (vLLM's --reasoning-parser) sends the think block apart:
	 * "reasoning_content" (vLLM before 0.10, SGLang, llama.cpp's server), "reasoning" (vLLM
	 * since, H's API), as the references read it (docs/policy.md, Thinking). */
	const char *why = json_string_value(json_object_get(msg, "reasoning_content"));
	if (!why)
		why = json_string_value(json_object_get(msg, "reasoning"));
	if (why && remote_buf_add(&rep->reasoning, why, strlen(why)) < 0) {
		snprintf(rep->err, sizeof(rep->err), "the answer's reasoning is longer than %d bytes",
			 AGENT_MAX_RAW_BYTES);
		return -E2BIG;
	}
	return 0;
}

/* One line of the event stream ("data: {...}", "data: [DONE]", comments, other fields). */
static int take_line(struct remote_reply *rep, char *line, size_t len)
{
	if (len && line[len - 1] == '\r')
		line[--len] = '\0';
	if (strncmp(line, "data:", 5) != 0) {
		/* Not an event: a server that ignored "stream" sends its JSON body as is. */
		if (!rep->saw_event &&
		    (remote_buf_add(&rep->body, line, len) < 0 || remote_buf_add(&rep->body, "\n", 1) < 0)) {
			snprintf(rep->err, sizeof(rep->err), "the answer is over %d bytes",
				 REMOTE_MAX_RESPONSE_BYTES);
			return -E2BIG;
		}
		return 0;
	}
	rep->saw_event = true;
	const char *data = line + 5;
	while (*data == ' ')
		data++;
	if (strcmp(data, "[DONE]") == 0) {
		rep->done = true;
		return 0;
	}
	json_error_t je;
	json_t *o = json_loads(data, 0, &je);
	if (!o) {
		snprintf(rep->err, sizeof(rep->err),
			 "the model server sent an event that is not "
			 "JSON: %s",
			 je.text);
		return -EPROTO;
	}
	int r = take_completion(rep, o, true);
	json_decref(o);
	return r;
}

int remote_reply_feed(struct remote_reply *rep, const char *p, size_t len)
{
	if (len > REMOTE_MAX_RESPONSE_BYTES - rep->total) {
		snprintf(rep->err, sizeof(rep->err), "the answer is over %d bytes", REMOTE_MAX_RESPONSE_BYTES);
		return -E2BIG;
	}
	rep->total += len;
	if (!rep->stream || rep->status != 200) {
		/* An error body is cut, not refused: it only feeds a message. */
		size_t cap = rep->status != 200 ? MIN(rep->body.max, (size_t)REMOTE_MAX_ERROR_BODY) :
						  rep->body.max;
		if (rep->status != 200)
			len = rep->body.len >= cap ? 0 : MIN(len, cap - rep->body.len);
		if (remote_buf_add(&rep->body, p, len) < 0) {
			snprintf(rep->err, sizeof(rep->err), "the answer is over %zu bytes", rep->body.max);
			return -E2BIG;
		}
		return 0;
	}
	for (size_t i = 0; i < len; i++) {
		if (p[i] != '\n') {
			if (remote_buf_add(&rep->line, p + i, 1) < 0) {
				snprintf(rep->err, sizeof(rep->err),
					 "an event line of the answer is over %d bytes", REMOTE_MAX_SSE_LINE);
				return -E2BIG;
			}
			continue;
		}
		int r = rep->line.len ? take_line(rep, rep->line.data, rep->line.len) : 0;
		rep->line.len = 0;
		if (r < 0)
			return r;
	}
	return 0;
}

/* The first bytes of a header's value, NUL-terminated (header lines are not). */
static void header_value(const char *p, size_t len, size_t skip, char *ret, size_t size)
{
	size_t k = len > skip ? MIN(len - skip, size - 1) : 0;
	memcpy(ret, p + skip, k);
	ret[k] = '\0';
}

void remote_reply_header(struct remote_reply *rep, const char *p, size_t len)
{
	char v[32];
	char *end;

	if (len >= 5 && strncasecmp(p, "HTTP/", 5) == 0) {
		/* A new response (after a 100-continue): its own status and headers follow. */
		const char *sp = memchr(p, ' ', len);
		header_value(p, len, sp ? (size_t)(sp - p) + 1 : len, v, 4);
		long status = strtol(v, &end, 10);
		rep->retry_after_s = -1;
		rep->status = end != v && status >= 100 && status <= 999 ? status : 0;
	} else if (len > 12 && strncasecmp(p, "Retry-After:", 12) == 0) {
		header_value(p, len, 12, v, sizeof(v));
		long s = strtol(v, &end, 10);
		/* Seconds only; an HTTP date falls back to the backoff. */
		if (end != v && s >= 0)
			rep->retry_after_s = MIN(s, (long)REMOTE_MAX_RETRY_AFTER_S);
	}
}

int remote_reply_end(struct remote_reply *rep)
{
	int r;

	/* A trailing line without its newline. */
	if (rep->line.len) {
		r = take_line(rep, rep->line.data, rep->line.len);
		rep->line.len = 0;
		if (r < 0)
			return r;
	}
	if (!rep->saw_event && rep->body.data) {
		json_error_t je;
		json_t *o = json_loads(rep->body.data, 0, &je);
		if (!o) {
			snprintf(rep->err, sizeof(rep->err),
				 "the model server's answer is neither an "
				 "event stream nor JSON: %s",
				 je.text);
			return -EPROTO;
		}
		r = take_completion(rep, o, false);
		json_decref(o);
		if (r < 0)
			return r;
	}
	return 0;
}
