/* remote-reply: one answer of an OpenAI-compatible server, read as it arrives (the remote
 * provider's parser of what a server sends, apart from the network so that it is fuzzed:
 * tests/daemon/fuzz-remote-reply.c).
 *
 * A chat completion comes as server-sent events ("data: {chunk}" lines, "data: [DONE]"), or,
 * from a server that ignored "stream", as one JSON body; an error as a status other than 200
 * with a body kept for its message. Every size is checked against the limits below: bytes of
 * the whole answer, of one event line, of the answer's text and of its reasoning
 * (AGENT_MAX_RAW_BYTES each), of the model name. Not thread-safe: one reply per transfer. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Bytes of one answer at most (a whole streamed answer, or a non-streamed body). */
#define REMOTE_MAX_RESPONSE_BYTES (8 * 1024 * 1024)
/* Bytes of one server-sent-event line at most. */
#define REMOTE_MAX_SSE_LINE (1024 * 1024)
/* Bytes of an error body kept for its message. */
#define REMOTE_MAX_ERROR_BODY 2048
/* Longest model name kept. */
#define REMOTE_MAX_MODEL_NAME 256
/* Longest Retry-After honoured, seconds. */
#define REMOTE_MAX_RETRY_AFTER_S 30

/* A growable byte buffer bounded by `max`, NUL-terminated when not empty. */
struct remote_buf {
	char *data;
	size_t len, cap, max;
};

/* Appends; -E2BIG past the bound (nothing appended). */
int remote_buf_add(struct remote_buf *b, const char *p, size_t n);

struct remote_reply {
	bool stream;		     /* an event stream is expected (a POST with "stream": true) */
	long status;		     /* of the last status line; 0 before it */
	long retry_after_s;	     /* Retry-After in seconds (capped); -1: none */
	size_t total;		     /* bytes of the body so far */
	struct remote_buf line;	     /* the event line being read */
	struct remote_buf body;	     /* a non-streamed body, or an error body (cut) */
	struct remote_buf content;   /* the answer's text */
	struct remote_buf reasoning; /* its reasoning, from a server that parses it out of the
				      * text ("reasoning_content" or "reasoning"; AGENT_MAX_RAW_BYTES) */
	bool saw_event, done;	     /* a "data:" line came; "[DONE]" came */
	long long prompt_tokens, completion_tokens; /* the usage; -1: not told */
	char model[REMOTE_MAX_MODEL_NAME + 1];	    /* the model the answer names; "" */
	char err[512];				    /* why feed or end failed */
};

/* body_max bounds a non-streamed body (REMOTE_MAX_RESPONSE_BYTES for a completion). */
void remote_reply_init(struct remote_reply *rep, bool stream, size_t body_max);
void remote_reply_finish(struct remote_reply *rep);
/* One header line as received (the status line included). */
void remote_reply_header(struct remote_reply *rep, const char *p, size_t len);
/* Body bytes as they arrive. 0, or -E2BIG (a limit) / -EPROTO (an event that is not JSON, an
 * error event) with err filled: the transfer should stop. */
int remote_reply_feed(struct remote_reply *rep, const char *p, size_t len);
/* The end of a 200 answer: its last line without a newline, or a non-streamed body as one
 * chat completion. 0, or -EPROTO / -E2BIG with err filled. */
int remote_reply_end(struct remote_reply *rep);
