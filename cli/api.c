/* The one place where holoctl talks to holod: requests, JSON answers, and every error the user
 * sees about them (transport errors with the cause and the fix, API errors with the daemon's own
 * message). */
#include "cli.h"

#include "common.h"
#include "http.h"
#include "ipc.h"

#include <stdlib.h>
#include <string.h>

static int ensure_http(struct cli_context *ctx)
{
	int r;

	if (ctx->http)
		return 0;
	if (!ctx->socket_path) {
		r = ipc_socket_path(&ctx->socket_owned);
		if (r == -ENXIO)
			return cli_error(ctx, "no runtime directory for holod's socket: set "
					      "XDG_RUNTIME_DIR, or pass --socket PATH");
		if (r == -ENAMETOOLONG)
			return cli_error(ctx, "the socket path from $" IPC_SOCKET_ENV
					      " or $XDG_RUNTIME_DIR is too long for a Unix socket; "
					      "pass a shorter --socket PATH");
		if (r < 0)
			return cli_error(ctx, "cannot find holod's socket: %s", strerror(-r));
		ctx->socket_path = ctx->socket_owned;
	}
	ctx->http = cli_http_create(ctx->socket_path);
	if (!ctx->http)
		return cli_error(ctx, "cannot set up the HTTP client: %s", strerror(errno));
	return 0;
}

/* What the user can do about an API error, by error code. */
static const char *hint_for_code(const char *code)
{
	static const struct {
		const char *code, *hint;
	} hints[] = {
		{IPC_ERR_NO_MODEL,
		 "instruction tasks need a model; run a script with `holoctl run --script FILE`"},
		{IPC_ERR_NO_DISPLAY,
		 "start holod with --display NAME or --virtual WxH, or set DISPLAY for it"},
		{IPC_ERR_FORBIDDEN, "holod only serves the user that runs it"},
		{IPC_ERR_SHUTTING_DOWN, "holod is stopping; start it again with `holod`"},
		{IPC_ERR_TOO_MANY,
		 "something holds many connections to holod open (followers, a leaky script); "
		 "close them and retry"},
	};
	for (size_t i = 0; code && i < ARRAY_SIZE(hints); i++)
		if (strcmp(hints[i].code, code) == 0)
			return hints[i].hint;
	return NULL;
}

void cli_format_api_error(long status, const char *body, size_t size, char *buf, size_t buflen)
{
	json_t *root = json_loadb(body ? body : "", body ? size : 0, 0, NULL);
	json_t *err = root ? json_object_get(root, "error") : NULL;
	const char *code = json_string_value(json_object_get(err, "code"));
	const char *message = json_string_value(json_object_get(err, "message"));

	if (message) {
		const char *hint = hint_for_code(code);
		snprintf(buf, buflen, "%s (HTTP %ld%s%s)%s%s", message, status, code ? " " : "",
			 code ? code : "", hint ? "; " : "", hint ? hint : "");
	} else {
		snprintf(buf, buflen,
			 "holod answered HTTP %ld without an error message (is it really holod on "
			 "this socket?)",
			 status);
	}
	json_decref(root);
}

/* Runs one request, or a stream when line_fn is set (the body then goes to line_fn line by line).
 * Prints errors; returns 0 or CLI_EXIT_ERROR. *ret_transport (may be NULL) gets the transport
 * error (-errno), or 0 when the failure, if any, was not one. */
static int request(struct cli_context *ctx, const char *method, const char *path, const char *body,
		   cli_http_line_fn line_fn, void *userdata, struct cli_http_response *ret, int *ret_transport)
{
	struct cli_http_response resp = {0};
	char msg[CLI_MAX_ERROR_LEN + 256];
	int r;

	r = ensure_http(ctx);
	if (r != 0)
		return r;
	r = line_fn ? cli_http_stream(ctx->http, path, line_fn, userdata, ctx->interrupt, ctx->interrupt_seen,
				      &resp) :
		      cli_http_request(ctx->http, method, path, body, &resp);
	if (r == -ECANCELED)
		return CLI_EXIT_ERROR; /* the line callback stopped the stream and said why */
	if (r == -EINTR) {
		/* The caller's signal handler asked; the caller says what happens next. */
		if (ret_transport)
			*ret_transport = r;
		return CLI_EXIT_ERROR;
	}
	if (r < 0) {
		if (ret_transport)
			*ret_transport = r;
		return cli_error(ctx, "%s", cli_http_strerror(ctx->http, r, msg, sizeof(msg)));
	}
	if (resp.status >= 300) {
		/* With --json a stream prints its lines only, not an error answer. */
		if (ctx->json && !line_fn && resp.size > 0)
			cli_print_raw(ctx, resp.body, resp.size);
		cli_format_api_error(resp.status, resp.body, resp.size, msg, sizeof(msg));
		cli_http_response_finish(&resp);
		return cli_error(ctx, "%s", msg);
	}
	*ret = resp;
	return 0;
}

int cli_api_raw(struct cli_context *ctx, const char *method, const char *path, const char *body,
		char **ret_body, size_t *ret_size, char **ret_sha256)
{
	struct cli_http_response resp;
	int r = request(ctx, method, path, body, NULL, NULL, &resp, NULL);
	if (r != 0)
		return r;
	*ret_body = resp.body;
	*ret_size = resp.size;
	resp.body = NULL;
	if (ret_sha256) {
		*ret_sha256 = resp.sha256;
		resp.sha256 = NULL;
	}
	cli_http_response_finish(&resp);
	return 0;
}

int cli_api_json(struct cli_context *ctx, const char *method, const char *path, const char *body, json_t **ret)
{
	struct cli_http_response resp;
	json_error_t jerr;
	json_t *root;
	int r = request(ctx, method, path, body, NULL, NULL, &resp, NULL);
	if (r != 0)
		return r;
	if (ctx->json)
		cli_print_raw(ctx, resp.body, resp.size);
	root = json_loadb(resp.body, resp.size, 0, &jerr);
	cli_http_response_finish(&resp);
	if (!root)
		return cli_error(ctx, "holod sent invalid JSON for %s %s: %s (line %d)", method, path,
				 jerr.text, jerr.line);
	if (ret)
		*ret = root;
	else
		json_decref(root);
	return 0;
}

int cli_api_stream(struct cli_context *ctx, const char *path,
		   int (*fn)(const char *line, size_t len, void *userdata), void *userdata)
{
	struct cli_http_response resp;
	int transport = 0;
	int r = request(ctx, "GET", path, NULL, fn, userdata, &resp, &transport);
	if (r != 0)
		return transport == -ECONNRESET || transport == -EINTR ? transport : r;
	cli_http_response_finish(&resp);
	return 0;
}
