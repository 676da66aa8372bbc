/* Script files: a bare JSON array of actions, or {"actions": [...], options...} (the API's
 * {"script": [...], options...} is accepted as well), turned into a POST /v1/tasks body and
 * validated with the ipc module before anything is sent. */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <stdlib.h>
#include <string.h>

/* Reads at most `limit` bytes; -EFBIG when there is more. */
static int read_all(FILE *f, size_t limit, char **ret, size_t *ret_len)
{
	size_t len = 0, alloc = 0;
	char *buf = NULL;

	for (;;) {
		if (alloc - len < 4096) {
			alloc = alloc ? alloc * 2 : 16384;
			if (alloc > limit + 4096 + 1)
				alloc = limit + 4096 + 1;
			buf = xrealloc(buf, alloc);
		}
		size_t n = fread(buf + len, 1, alloc - len - 1, f);
		len += n;
		if (len > limit) {
			free(buf);
			return -EFBIG;
		}
		if (n == 0) {
			if (ferror(f)) {
				free(buf);
				return -EIO;
			}
			break;
		}
	}
	buf[len] = '\0';
	*ret = buf;
	*ret_len = len;
	return 0;
}

int cli_script_parse(const char *name, const char *text, size_t len, json_t **ret, char *err, size_t errlen)
{
	struct ipc_task_request *req = NULL;
	json_error_t jerr;
	json_t *root, *body = NULL;
	char *dumped = NULL;
	char msg[CLI_MAX_ERROR_LEN];
	bool renamed = false;
	int r;

	root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
	if (!root) {
		snprintf(err, errlen, "%s: invalid JSON at line %d column %d: %s", name, jerr.line,
			 jerr.column, jerr.text);
		return -EINVAL;
	}
	if (json_is_array(root)) {
		body = json_pack("{s:O}", "script", root);
	} else if (json_is_object(root)) {
		json_t *actions = json_object_get(root, "actions");
		if (json_object_get(root, "instruction")) {
			snprintf(err, errlen,
				 "%s: a script file holds actions; run an instruction with "
				 "`holoctl run \"INSTRUCTION\"`",
				 name);
			r = -EINVAL;
			goto cleanup;
		}
		if (actions && json_object_get(root, "script")) {
			snprintf(err, errlen, "%s: has both \"actions\" and \"script\"; keep one", name);
			r = -EINVAL;
			goto cleanup;
		}
		if (!actions && !json_object_get(root, "script")) {
			snprintf(err, errlen,
				 "%s: no \"actions\" list (a script is a JSON array of actions, or "
				 "an object {\"actions\": [...], options})",
				 name);
			r = -EINVAL;
			goto cleanup;
		}
		body = json_deep_copy(root);
		if (body && actions) {
			json_object_set(body, "script", actions);
			json_object_del(body, "actions");
			renamed = true;
		}
	} else {
		snprintf(err, errlen,
			 "%s: a script is a JSON array of actions, or an object {\"actions\": "
			 "[...], options}",
			 name);
		r = -EINVAL;
		goto cleanup;
	}
	dumped = body ? json_dumps(body, JSON_COMPACT) : NULL;
	if (!dumped) {
		snprintf(err, errlen, "%s: out of memory", name);
		r = -ENOMEM;
		goto cleanup;
	}
	r = ipc_task_request_parse(dumped, strlen(dumped), &req, msg, sizeof(msg));
	if (r < 0) {
		/* Name the field as the file spells it. */
		if (renamed && strncmp(msg, "script", 6) == 0)
			snprintf(err, errlen, "%s: actions%s", name, msg + 6);
		else
			snprintf(err, errlen, "%s: %s", name, msg);
		goto cleanup;
	}
	ipc_task_request_destroy(req);
	*ret = body;
	body = NULL;
	r = 0;

cleanup:
	free(dumped);
	json_decref(body);
	json_decref(root);
	return r;
}

int cli_script_read(const char *path, FILE *stdin_file, json_t **ret, char *err, size_t errlen)
{
	bool is_stdin = strcmp(path, "-") == 0;
	const char *name = is_stdin ? "(stdin)" : path;
	FILE *f = is_stdin ? stdin_file : fopen(path, "re");
	char *text = NULL;
	size_t len = 0;
	int r;

	if (!f) {
		r = -errno;
		snprintf(err, errlen, "cannot open the script %s: %s", path, strerror(errno));
		return r;
	}
	r = read_all(f, CLI_MAX_SCRIPT_BYTES, &text, &len);
	if (!is_stdin)
		fclose(f);
	if (r == -EFBIG) {
		snprintf(err, errlen, "%s: larger than %u bytes; split it into several scripts", name,
			 CLI_MAX_SCRIPT_BYTES);
		return r;
	}
	if (r < 0) {
		snprintf(err, errlen, "cannot read the script %s: %s", name, strerror(-r));
		return r;
	}
	r = cli_script_parse(name, text, len, ret, err, errlen);
	free(text);
	return r;
}
