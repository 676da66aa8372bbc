/* api-json: the journal's rows as the JSON objects of the HTTP API (docs/api.md).
 *
 * The one place that knows both shapes: journal.h returns rows, http.c sends what these
 * functions make. The renderers return a new reference, or NULL on OOM; the readers read the
 * rows and render them: 0, -ENOENT (no such task), -ENOMEM or the journal's error.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "journal.h"

/* A task: {"id", "kind", "spec", "status", "display", "created_at", "started_at",
 * "finished_at", "result", "error", "steps", "provenance", "prompt"}. */
json_t *api_json_task(const struct journal_task_row *row);
/* A page of the task list: {"tasks": [...], "total", "limit", "offset"}. */
json_t *api_json_task_list(const struct journal_task_row *rows, size_t n, int64_t total, unsigned limit,
			   unsigned offset);
/* A step: {"index", "tool_call", "status", "coords", "model", "pixels", "monitor", "image",
 * "result", "error", "started_at", "finished_at", "timings_us", "screenshots", "agent"}. */
json_t *api_json_step(const struct journal_step_row *row);
/* The steps as an array. */
json_t *api_json_steps(const struct journal_step_row *rows, size_t n);

/* Readers: the journal's rows, rendered (*ret a new reference). */
int api_json_read_task(struct journal *j, int64_t id, json_t **ret);
int api_json_read_task_list(struct journal *j, int status, unsigned limit, unsigned offset, json_t **ret);
int api_json_read_steps(struct journal *j, int64_t task_id, int from_index, bool finished_only, json_t **ret);
