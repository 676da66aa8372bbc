/* http: the API of docs/api.md, HTTP/1.1 + JSON served by libmicrohttpd on the listening socket
 * holod created. One thread per connection (libmicrohttpd's own); handlers talk to the
 * scheduler and read the journal, and never touch the executor's X connection (GET
 * /v1/screenshot opens its own, short-lived one on the handler's thread). */
#pragma once

#include <stdbool.h>

#include "model-worker.h"
#include "journal.h"
#include "scheduler.h"

struct http_server;

struct http_context {
	struct scheduler *scheduler;
	struct journal *journal;
	struct model_worker *worker;	  /* the local model: /v1/status, grounding */
	struct provider *provider;	  /* instruction tasks' steps; NULL: the local model's */
	const struct agent_config *agent; /* instruction tasks' defaults (/v1/status); or NULL */
	const char *state_dir;		  /* screenshot paths in the journal are relative to it */
	const char *display;		  /* for GET /v1/screenshot and /v1/status; NULL: $DISPLAY */
	const char *socket_path;	  /* for /v1/status */
	bool virtual_display;		  /* holod owns the display (--virtual) */
};

/* Serves on `listen_fd` (which stays owned by the caller) until http_server_destroy. The
 * context's pointers must outlive the server. NULL + errno on failure. */
struct http_server *http_server_create(int listen_fd, const struct http_context *ctx);
/* Stops accepting, waits for every connection thread, frees. Accepts NULL. */
void http_server_destroy(struct http_server *s);
