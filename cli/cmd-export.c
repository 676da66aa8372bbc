/* holoctl export: trajectories for a training pipeline (docs/export.md). One JSON line per
 * step in DIR/steps.jsonl (--format jsonl), or one per instruction task in the model's chat
 * format in DIR/chat.jsonl (--format chat), the screenshots copied beside it in DIR/images/,
 * everything read
 * through the API (GET /v1/tasks, .../steps, .../screenshot), so it works against any holod the
 * user can reach, with or without access to its state directory. */
#include "cli.h"

#include "common.h"
#include "ipc.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Tasks exported by one command at most (--all on a long journal: page with --since). */
#define EXPORT_MAX_TASKS 100000

enum { OPT_ALL = CLI_OPT_FIRST_COMMAND_OPTION, OPT_SINCE, OPT_FORMAT, OPT_INCLUDE_SENSITIVE };

static const struct option export_options[] = {
	CLI_COMMON_LONG_OPTIONS,
	{"output", required_argument, NULL, 'o'},
	{"all", no_argument, NULL, OPT_ALL},
	{"since", required_argument, NULL, OPT_SINCE},
	{"format", required_argument, NULL, OPT_FORMAT},
	{"include-sensitive", no_argument, NULL, OPT_INCLUDE_SENSITIVE},
	{0},
};

/* Task ids of every task created at or after `since` (NULL: all), oldest first. */
static int list_ids(struct cli_context *ctx, const char *since, json_t *ret_ids)
{
	for (unsigned offset = 0;; offset += IPC_MAX_LIST_LIMIT) {
		json_t *page = NULL, *t;
		size_t i;
		char *path =
			xasprintf(IPC_API_PREFIX "/tasks?limit=%d&offset=%u", IPC_MAX_LIST_LIMIT, offset);
		int r = cli_api_json(ctx, "GET", path, NULL, &page);
		free(path);
		if (r != 0)
			return r;
		json_t *tasks = json_object_get(page, "tasks");
		json_array_foreach(tasks, i, t)
		{
			const char *created = json_string_value(json_object_get(t, "created_at"));
			/* RFC 3339 in UTC compares as text, and a bare date is a prefix of it. */
			if (!since || (created && strcmp(created, since) >= 0))
				json_array_insert(ret_ids, 0, json_object_get(t, "id"));
		}
		size_t n = json_array_size(tasks);
		json_decref(page);
		if (n < IPC_MAX_LIST_LIMIT || json_array_size(ret_ids) > EXPORT_MAX_TASKS)
			return 0;
	}
}

/* Whether the step's screenshots are left out: it typed a secret and --include-sensitive was
 * not given. */
static bool withheld(json_t *step, bool include_sensitive)
{
	return !include_sensitive && json_is_true(json_object_get(step, "sensitive"));
}

/* Copies a step's screenshot into DIR/images/; the file name relative to DIR, or NULL when the
 * step has none. Checks the journal's sha256. */
static char *copy_shot(struct cli_context *ctx, const char *dir, long long task, json_t *step,
		       const char *which, int *ret)
{
	long long index = json_integer_value(json_object_get(step, "index"));
	char *png = NULL, *sha = NULL, hex[65], *rel = NULL, *file, *path;
	size_t size = 0;

	if (!json_is_object(json_object_get(json_object_get(step, "screenshots"), which)))
		return NULL;
	path = xasprintf(IPC_API_PREFIX "/tasks/%lld/steps/%lld/screenshot?which=%s", task, index, which);
	*ret = cli_api_raw(ctx, "GET", path, NULL, &png, &size, &sha);
	free(path);
	if (*ret != 0)
		return NULL;
	ipc_sha256_hex(png, size, hex);
	if (sha && strcmp(sha, hex) != 0) {
		*ret = cli_error(ctx,
				 "task %lld step %lld: the %s screenshot differs from the "
				 "journal's sha256",
				 task, index, which);
		goto done;
	}
	rel = xasprintf("images/%lld-%lld-%s.png", task, index, which);
	file = path_join(dir, rel);
	int r = cli_write_file_atomic(file, png, size);
	if (r < 0) {
		*ret = cli_error(ctx, "cannot write %s: %s", file, strerror(-r));
		free(rel);
		rel = NULL;
	}
	free(file);
done:
	free(png);
	free(sha);
	return rel;
}

static json_t *member(json_t *o, const char *name)
{
	json_t *v = json_object_get(o, name);
	return v ? json_incref(v) : json_null();
}

static json_t *str_or_null(char *s)
{
	json_t *v = s ? json_string(s) : json_null();
	free(s);
	return v;
}

/* One task's lines. */
static int export_task(struct cli_context *ctx, const char *dir, long long id, FILE *out,
		       bool include_sensitive, size_t *ret_steps)
{
	json_t *task = NULL, *steps = NULL, *step;
	char *path;
	size_t i;
	int r;

	path = xasprintf(IPC_API_PREFIX "/tasks/%lld", id);
	r = cli_api_json(ctx, "GET", path, NULL, &task);
	free(path);
	if (r != 0)
		return r;
	path = xasprintf(IPC_API_PREFIX "/tasks/%lld/steps", id);
	r = cli_api_json(ctx, "GET", path, NULL, &steps);
	free(path);
	if (r != 0)
		goto cleanup;
	json_t *arr = json_object_get(steps, "steps");
	json_t *spec = json_object_get(task, "spec");
	json_array_foreach(arr, i, step)
	{
		json_t *agent = json_object_get(step, "agent");
		bool hide = withheld(step, include_sensitive);
		char *before = hide ? NULL : copy_shot(ctx, dir, id, step, "before", &r);
		if (r != 0)
			goto cleanup;
		char *after = hide ? NULL : copy_shot(ctx, dir, id, step, "after", &r);
		if (r != 0) {
			free(before);
			goto cleanup;
		}
		json_t *line =
			json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
				  " s:o, s:o, s:o, s:o, s:o}",
				  "task_id", (json_int_t)id, "step", member(step, "index"), "kind",
				  member(task, "kind"), "instruction", member(spec, "instruction"),
				  "screenshot", str_or_null(before), "screenshot_after", str_or_null(after),
				  "image", member(step, "image"), "raw_output", member(agent, "raw_output"),
				  "thought", member(agent, "thought"), "note", member(agent, "note"),
				  "action", member(step, "tool_call"), "pixels", member(step, "pixels"),
				  "model", member(step, "model"), "monitor", member(step, "monitor"),
				  "status", member(step, "status"), "result", member(step, "result"), "error",
				  member(step, "error"), "task_status", member(task, "status"), "provenance",
				  member(task, "provenance"));
		if (line)
			json_object_set_new(line, "sensitive", member(step, "sensitive"));
		/* who approved, denied or answered the step (null: it did not wait) */
		if (line)
			json_object_set_new(line, "held", member(step, "held"));
		char *text = line ? json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
		json_decref(line);
		if (!text) {
			r = cli_error(ctx, "out of memory");
			goto cleanup;
		}
		fprintf(out, "%s\n", text);
		free(text);
		(*ret_steps)++;
	}
cleanup:
	json_decref(task);
	json_decref(steps);
	return r;
}

/* The user turns of a chat line's step, appended to messages: the step's journaled turn text,
 * its screenshot beside it. When the format gave the previous action's result a user turn of
 * its own (the prompt record's result_turn), the journaled text is that turn's text, a newline
 * and the observation's (the record's observation): written as the two user messages the model
 * saw, the result's first. */
static void chat_user(json_t *messages, json_t *prompt, json_t *step, json_t *agent, const char *shot)
{
	json_t *image = json_object_get(step, "image");
	json_t *images = json_pack("[{s:s, s:o, s:o, s:o}]", "path", shot, "tiles", member(agent, "tiles"),
				   "width", member(image, "width"), "height", member(image, "height"));
	const char *turn = json_string_value(json_object_get(agent, "user_turn"));
	const char *obs = json_string_value(json_object_get(prompt, "observation"));
	size_t tlen = turn ? strlen(turn) : 0, olen = obs ? strlen(obs) : 0;
	if (json_is_true(json_object_get(prompt, "result_turn")) && obs && tlen > olen + 1 &&
	    strcmp(turn + tlen - olen, obs) == 0 && turn[tlen - olen - 1] == '\n') {
		json_array_append_new(messages, json_pack("{s:s, s:s%}", "role", "user", "content", turn,
							  tlen - olen - 1));
		json_array_append_new(messages, json_pack("{s:s, s:s, s:o}", "role", "user", "content", obs,
							  "images", images));
		return;
	}
	json_array_append_new(messages, json_pack("{s:s, s:o, s:o}", "role", "user", "content",
						  member(agent, "user_turn"), "images", images));
}

/* One instruction task as one line in the model's chat format (docs/export.md, format chat):
 * the journaled turns, and per step what the session prefilled, to check a re-rendering
 * against. *ret_exported is false for a task that has none (a script, a task whose model never
 * prefilled, or one journaled before holod recorded prompts). */
static int export_chat_task(struct cli_context *ctx, const char *dir, long long id, FILE *out,
			    bool include_sensitive, bool *ret_exported)
{
	json_t *task = NULL, *steps = NULL, *line = NULL, *step;
	char *path, *text = NULL;
	size_t i;
	int r;

	*ret_exported = false;
	path = xasprintf(IPC_API_PREFIX "/tasks/%lld", id);
	r = cli_api_json(ctx, "GET", path, NULL, &task);
	free(path);
	if (r != 0)
		return r;
	json_t *prompt = json_object_get(task, "prompt");
	if (!json_is_object(prompt))
		goto cleanup;
	path = xasprintf(IPC_API_PREFIX "/tasks/%lld/steps", id);
	r = cli_api_json(ctx, "GET", path, NULL, &steps);
	free(path);
	if (r != 0)
		goto cleanup;
	/* Every user turn needs its screenshot: a task that typed a secret is left out whole. */
	json_array_foreach(json_object_get(steps, "steps"), i, step)
	{
		if (withheld(step, include_sensitive)) {
			fprintf(ctx->err,
				"holoctl export: task %lld left out: step %zu typed a secret "
				"and its screenshots are sensitive (--include-sensitive exports "
				"them)\n",
				id, i);
			goto cleanup;
		}
	}
	json_t *prov = json_object_get(task, "provenance");
	json_t *messages =
		json_pack("[{s:s, s:o}, {s:s, s:o}]", "role", "system", "content", member(prompt, "system"),
			  "role", "user", "content", member(prompt, "user"));
	json_t *prefilled = json_array();
	line = json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
			 " s:{s:{s:o, s:o}, s:o}, s:o}",
			 "task_id", (json_int_t)id, "format", member(prompt, "format"), "instruction",
			 member(json_object_get(task, "spec"), "instruction"), "task_status",
			 member(task, "status"), "history", member(prov, "history"), "window",
			 member(prov, "window"), "max_tiles", member(prov, "max_tiles"), "tokens_per_tile",
			 member(prompt, "tokens_per_tile"), "reasoning", member(prompt, "reasoning"),
			 "evicted", member(prompt, "evicted"), "messages", messages, "prefill", "prefix",
			 "tokens", member(prompt, "tokens"), "sha256", member(prompt, "sha256"), "steps",
			 prefilled, "provenance", member(task, "provenance"));
	if (!line) {
		r = cli_error(ctx, "out of memory");
		goto cleanup;
	}
	json_array_foreach(json_object_get(steps, "steps"), i, step)
	{
		json_t *agent = json_object_get(step, "agent");
		json_t *tokens = json_object_get(agent, "tokens");
		/* A remote server tokenizes itself: its steps have no digest of prefilled ids. */
		bool remote = json_is_string(json_object_get(agent, "provider")) &&
			      strcmp(json_string_value(json_object_get(agent, "provider")), "remote") == 0;
		if (!json_is_string(json_object_get(agent, "user_turn")) ||
		    (!remote && !json_is_string(json_object_get(tokens, "appended_sha256")))) {
			r = cli_error(ctx,
				      "task %lld step %zu has no recorded user turn: the journal "
				      "lost part of what the model was given",
				      id, i);
			goto cleanup;
		}
		char *before = copy_shot(ctx, dir, id, step, "before", &r);
		if (r != 0)
			goto cleanup;
		if (!before) {
			r = cli_error(ctx,
				      "task %lld step %zu has no screenshot: its image cannot be "
				      "exported",
				      id, i);
			goto cleanup;
		}
		chat_user(messages, prompt, step, agent, before);
		free(before);
		/* A step that stayed invalid was never acted on nor closed: no assistant turn. */
		bool valid = json_is_object(json_object_get(step, "tool_call"));
		if (valid)
			json_array_append_new(messages, json_pack("{s:s, s:o}", "role", "assistant",
								  "content", member(agent, "raw_output")));
		json_array_append_new(prefilled,
				      json_pack("{s:o, s:o, s:b, s:o, s:o}", "step", member(step, "index"),
						"prompt", member(agent, "prompt"), "valid", valid, "tokens",
						member(tokens, "appended"), "sha256",
						member(tokens, "appended_sha256")));
	}
	text = json_dumps(line, JSON_COMPACT | JSON_ENSURE_ASCII);
	if (!text) {
		r = cli_error(ctx, "out of memory");
		goto cleanup;
	}
	fprintf(out, "%s\n", text);
	*ret_exported = true;
cleanup:
	free(text);
	json_decref(line);
	json_decref(task);
	json_decref(steps);
	return r;
}

static int export_run(struct cli_context *ctx, int argc, char **argv)
{
	const char *dir = NULL, *since = NULL, *format = "jsonl";
	bool all = false, include_sensitive = false;
	json_t *ids = json_array();
	char *images = NULL, *file = NULL, *tmp = NULL;
	FILE *out = NULL;
	size_t nsteps = 0, i;
	json_t *v;
	int c, r;

	cli_getopt_reset();
	while ((c = getopt_long(argc, argv, CLI_COMMON_SHORT_OPTIONS "o:", export_options, NULL)) != -1) {
		switch (c) {
		case 'o':
			dir = optarg;
			continue;
		case OPT_ALL:
			all = true;
			continue;
		case OPT_SINCE:
			since = optarg;
			continue;
		case OPT_FORMAT:
			format = optarg;
			continue;
		case OPT_INCLUDE_SENSITIVE:
			include_sensitive = true;
			continue;
		}
		r = cli_common_option(ctx, &cli_cmd_export, c, argv);
		if (r >= 0)
			goto cleanup;
	}
	bool chat = strcmp(format, "chat") == 0;
	if (!chat && strcmp(format, "jsonl") != 0) {
		r = cli_usage_error(ctx, &cli_cmd_export, "--format '%s' is not known (jsonl, chat)", format);
		goto cleanup;
	}
	if (!dir) {
		r = cli_usage_error(ctx, &cli_cmd_export, "where to? give -o DIR");
		goto cleanup;
	}
	if ((optind < argc) + all + (since != NULL) != 1) {
		r = cli_usage_error(ctx, &cli_cmd_export,
				    "give task IDs, --since DATE or --all (one of them)");
		goto cleanup;
	}
	for (int k = optind; k < argc; k++) {
		long id;
		if ((r = cli_parse_task_id(ctx, &cli_cmd_export, argv[k], &id)) != 0)
			goto cleanup;
		json_array_append_new(ids, json_integer(id));
	}
	if ((all || since) && (r = list_ids(ctx, since, ids)) != 0)
		goto cleanup;

	images = path_join(dir, "images");
	if ((mkdir(dir, 0755) < 0 && errno != EEXIST) || (mkdir(images, 0755) < 0 && errno != EEXIST)) {
		r = cli_error(ctx, "cannot create %s: %s", images, strerror(errno));
		goto cleanup;
	}
	file = path_join(dir, chat ? "chat.jsonl" : "steps.jsonl");
	tmp = xasprintf("%s.tmp", file);
	out = fopen(tmp, "we");
	if (!out) {
		r = cli_error(ctx, "cannot create %s: %s", tmp, strerror(errno));
		goto cleanup;
	}
	size_t nchat = 0;
	json_array_foreach(ids, i, v)
	{
		bool exported;
		if (chat)
			r = export_chat_task(ctx, dir, json_integer_value(v), out, include_sensitive,
					     &exported);
		else
			r = export_task(ctx, dir, json_integer_value(v), out, include_sensitive, &nsteps);
		if (r != 0)
			goto cleanup;
		nchat += chat && exported;
	}
	int e = fclose(out) == 0 ? 0 : errno;
	out = NULL;
	if (e || rename(tmp, file) < 0) {
		r = cli_error(ctx, "cannot write %s: %s", file, strerror(e ? e : errno));
		goto cleanup;
	}
	if (chat)
		fprintf(ctx->out,
			"%s: %zu tasks (%zu without a conversation: scripts, or tasks whose "
			"model never prefilled a prompt)\n",
			file, nchat, json_array_size(ids) - nchat);
	else
		fprintf(ctx->out, "%s: %zu tasks, %zu steps\n", file, json_array_size(ids), nsteps);
	r = CLI_EXIT_OK;
cleanup:
	if (out) {
		fclose(out);
		unlink(tmp);
	}
	free(tmp);
	free(file);
	free(images);
	json_decref(ids);
	return r;
}

const struct cli_command cli_cmd_export = {
	.name = "export",
	.args = "-o DIR [--format jsonl|chat] [--include-sensitive] (ID... | --since DATE | --all)",
	.summary = "export trajectories for training (a JSON line per step, or per task)",
	.help = "Writes DIR/steps.jsonl, one JSON object per step of the tasks, oldest task first:\n"
		"task id, step index, instruction, the before and after screenshots (copied into\n"
		"DIR/images/), the image size the model was sent, the model's raw output, thought\n"
		"and note, the parsed action, its pixel and model-space (0..1000) coordinates,\n"
		"the outcome and the task's provenance. Format: docs/export.md.\n"
		"  --format chat  DIR/chat.jsonl instead: one line per instruction task in the\n"
		"                 model's chat format (system, user turns with their screenshot,\n"
		"                 assistant steps) and the digests of what the session prefilled\n"
		"  --since DATE   tasks created at or after DATE (2026-11-01 or RFC 3339, UTC)\n"
		"  --all          every task in the journal\n"
		"  --include-sensitive  also the screenshots of steps that typed a secret\n"
		"                 (left out by default: null in steps.jsonl, the task left out\n"
		"                 of chat.jsonl)\n",
	.run = export_run,
};
