/* The journal's rows as the API's JSON (see api-json.h; the shapes are docs/api.md's). */
#include "api-json.h"

#include "common.h"

#include <errno.h>
#include <string.h>

static json_t *str_or_null(const char *s)
{
	return s ? json_string(s) : json_null();
}

static json_t *int_or_null(int64_t v)
{
	return v == JOURNAL_NONE ? json_null() : json_integer((json_int_t)v);
}

static json_t *time_or_null(uint64_t us)
{
	char buf[64];

	return us ? json_string(time_format_rfc3339(us, buf, sizeof(buf))) : json_null();
}

/* JSON text holod wrote itself (an object or an array), as a value; the string when it does
 * not parse as one (an invalid step's tool_call, "null"). */
static json_t *json_or_null(const char *text)
{
	json_t *v;

	if (!text)
		return json_null();
	v = json_loads(text, 0, NULL);
	return v ? v : json_string(text);
}

json_t *api_json_task(const struct journal_task_row *row)
{
	return json_pack("{s:I, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:I, s:o, s:o, s:o}", "id",
			 (json_int_t)row->id, "kind", str_or_null(row->kind), "spec", json_or_null(row->spec),
			 "status", str_or_null(row->status), "display", str_or_null(row->display),
			 "created_at", time_or_null(row->created_us), "started_at",
			 time_or_null(row->started_us), "finished_at", time_or_null(row->finished_us),
			 "result", str_or_null(row->result), "error", str_or_null(row->error), "steps",
			 (json_int_t)row->n_steps, "provenance", json_or_null(row->provenance), "prompt",
			 json_or_null(row->prompt), "stuck", json_or_null(row->stuck));
}

json_t *api_json_task_list(const struct journal_task_row *rows, size_t n, int64_t total, unsigned limit,
			   unsigned offset)
{
	json_t *tasks = json_array();

	if (!tasks)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *o = api_json_task(&rows[i]);
		if (!o || json_array_append_new(tasks, o) < 0) {
			json_decref(tasks);
			return NULL;
		}
	}
	return json_pack("{s:o, s:I, s:I, s:I}", "tasks", tasks, "total", (json_int_t)total, "limit",
			 (json_int_t)limit, "offset", (json_int_t)offset);
}

/* {"x", "y"} and, for a second point, {"x2", "y2"}; null without a first point. */
static json_t *point(int64_t x, int64_t y, int64_t x2, int64_t y2)
{
	json_t *o;

	if (x == JOURNAL_NONE)
		return json_null();
	o = json_pack("{s:I, s:I}", "x", (json_int_t)x, "y", (json_int_t)y);
	if (o && x2 != JOURNAL_NONE) {
		json_object_set_new(o, "x2", json_integer((json_int_t)x2));
		json_object_set_new(o, "y2", json_integer((json_int_t)y2));
	}
	return o;
}

static json_t *shot(const struct journal_shot *s)
{
	if (!s->path)
		return json_null();
	return json_pack("{s:s, s:o, s:o}", "path", s->path, "sha256", str_or_null(s->sha256), "bytes",
			 int_or_null(s->bytes));
}

/* The model's part of an instruction step (null for a script step). */
static json_t *agent_part(const struct journal_step_row *row)
{
	if (!row->is_agent)
		return json_null();
	json_t *o =
		json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o,"
			  " s:{s:o, s:o, s:o, s:o, s:o, s:o}}",
			  "thought", str_or_null(row->thought), "note", str_or_null(row->note), "raw_output",
			  str_or_null(row->raw_output), "attempts", int_or_null(row->attempts), "tiles",
			  int_or_null(row->tiles), "prompt", str_or_null(row->prompt), "prompt_text",
			  str_or_null(row->prompt_text), "user_turn", str_or_null(row->user_turn), "tokens",
			  "appended", int_or_null(row->tokens_appended), "appended_sha256",
			  str_or_null(row->prompt_sha256), "decoded", int_or_null(row->tokens_decoded),
			  "forced", int_or_null(row->tokens_forced), "forwards",
			  int_or_null(row->decode_forwards), "session", int_or_null(row->session_tokens));
	/* The think block (thinking on), then which provider answered; a remote server's model
	 * name, usage and time. */
	if (o) {
		json_object_set_new(o, "reasoning", str_or_null(row->reasoning));
		json_object_set_new(o, "provider", str_or_null(row->provider));
		if (row->provider && strcmp(row->provider, "remote") == 0)
			json_object_set_new(o, "remote",
					    json_pack("{s:o, s:o, s:o, s:o}", "model",
						      str_or_null(row->remote_model), "prompt_tokens",
						      int_or_null(row->prompt_tokens), "completion_tokens",
						      int_or_null(row->completion_tokens), "server_us",
						      int_or_null(row->server_us)));
	}
	return o;
}

json_t *api_json_step(const struct journal_step_row *row)
{
	json_t *timings =
		json_pack("{s:o, s:o, s:o, s:o, s:o}", "capture", int_or_null(row->capture_us), "map",
			  int_or_null(row->map_us), "inject", int_or_null(row->inject_us), "settle",
			  int_or_null(row->settle_us), "capture_after", int_or_null(row->capture_after_us));
	json_t *agent = agent_part(row);
	json_t *monitor = row->has_monitor ?
				  json_pack("{s:i, s:i, s:i, s:i}", "x", row->monitor.x, "y", row->monitor.y,
					    "width", row->monitor.width, "height", row->monitor.height) :
				  json_null();
	json_t *image = row->image_w != JOURNAL_NONE ?
				json_pack("{s:I, s:I}", "width", (json_int_t)row->image_w, "height",
					  (json_int_t)row->image_h) :
				json_null();

	/* An instruction step's timings also hold the model's phases. */
	if (timings && row->is_agent) {
		json_object_set_new(timings, "preprocess", int_or_null(row->preprocess_us));
		json_object_set_new(timings, "encode", int_or_null(row->encode_us));
		json_object_set_new(timings, "prefill", int_or_null(row->prefill_us));
		json_object_set_new(timings, "decode", int_or_null(row->decode_us));
	}
	json_t *o =
		json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:{s:o, s:o}}",
			  "index", row->index, "tool_call", json_or_null(row->tool_call), "status",
			  str_or_null(row->status), "coords", str_or_null(row->coords), "model",
			  point(row->model_x, row->model_y, row->model_x2, row->model_y2), "pixels",
			  point(row->px, row->py, row->px2, row->py2), "monitor",
			  monitor ? monitor : json_null(), "image", image ? image : json_null(), "result",
			  str_or_null(row->result), "error", str_or_null(row->error), "started_at",
			  time_or_null(row->started_us), "finished_at", time_or_null(row->finished_us),
			  "timings_us", timings ? timings : json_null(), "screenshots", "before",
			  shot(&row->before), "after", shot(&row->after));
	if (!o) {
		json_decref(agent); /* not taken by a failed json_pack */
		return NULL;
	}
	if (json_object_set_new(o, "agent", agent ? agent : json_null()) < 0 ||
	    json_object_set_new(o, "stuck", str_or_null(row->stuck)) < 0 ||
	    json_object_set_new(o, "held", json_or_null(row->held)) < 0 ||
	    json_object_set_new(o, "sensitive", json_boolean(row->sensitive)) < 0) {
		json_decref(o);
		return NULL;
	}
	return o;
}

json_t *api_json_steps(const struct journal_step_row *rows, size_t n)
{
	json_t *arr = json_array();

	if (!arr)
		return NULL;
	for (size_t i = 0; i < n; i++) {
		json_t *o = api_json_step(&rows[i]);
		if (!o || json_array_append_new(arr, o) < 0) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

int api_json_read_task(struct journal *j, int64_t id, json_t **ret)
{
	struct journal_task_row row;
	int r = journal_task_get(j, id, &row);

	if (r < 0)
		return r;
	*ret = api_json_task(&row);
	journal_task_row_finish(&row);
	return *ret ? 0 : -ENOMEM;
}

int api_json_read_task_list(struct journal *j, int status, unsigned limit, unsigned offset, json_t **ret)
{
	struct journal_task_row *rows;
	size_t n;
	int64_t total;
	int r = journal_task_list(j, status, limit, offset, &rows, &n, &total);

	if (r < 0)
		return r;
	*ret = api_json_task_list(rows, n, total, limit, offset);
	journal_task_rows_free(rows, n);
	return *ret ? 0 : -ENOMEM;
}

int api_json_read_steps(struct journal *j, int64_t task_id, int from_index, bool finished_only, json_t **ret)
{
	struct journal_step_row *rows;
	size_t n;
	int r = journal_steps_get(j, task_id, from_index, finished_only, &rows, &n);

	if (r < 0)
		return r;
	*ret = api_json_steps(rows, n);
	journal_step_rows_free(rows, n);
	return *ret ? 0 : -ENOMEM;
}
