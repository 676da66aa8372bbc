/* journal: the SQLite record of every task, step and screenshot (schema: docs/journal.md).
 *
 * One struct journal is one database connection guarded by a mutex, shared by the executor
 * thread (tasks, steps), the screenshot writer (screenshot rows) and the HTTP threads (reads).
 * Every write is its own transaction, committed before the call returns, so what a reader sees
 * is what survives a crash of holod (WAL mode, synchronous=NORMAL).
 *
 * Query functions return rows (structs owning their strings, freed with their *_finish or
 * *_free); api-json.h renders them as the objects of docs/api.md. The daemon is the only user
 * of this header.
 *
 * Errors: -errno; SQLite result codes are translated here (SQLITE_BUSY -> -EBUSY, SQLITE_FULL ->
 * -ENOSPC, SQLITE_CORRUPT/NOTADB -> -EBADMSG, SQLITE_CANTOPEN -> -ENOENT/-EACCES, constraint
 * -> -EINVAL, others -> -EIO) with a debug log of the SQLite message.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ipc.h"
#include "x11.h"

#define JOURNAL_SCHEMA_VERSION 11

struct journal;

/* Opens (creating if needed) and migrates the database at `path`. NULL + errno: -EPROTO when
 * the file has a newer schema than this holod knows. */
struct journal *journal_open(const char *path);
void journal_close(struct journal *j);
/* The database file, as given to journal_open: for error messages (a full disk names it). */
const char *journal_path(const struct journal *j);

int journal_schema_version(struct journal *j);
/* "ok" -> 0, anything else -> -EBADMSG (message logged). */
int journal_integrity_check(struct journal *j);

/* Startup recovery after a crash or restart: tasks left 'running' or 'queued' become
 * 'interrupted' (with an error saying why), steps left 'running' become 'interrupted'.
 * Returns the number of tasks changed. */
int journal_recover(struct journal *j, uint64_t now_us);

int journal_task_insert(struct journal *j, enum ipc_task_kind kind, const char *spec_json,
			const char *display, uint64_t created_us, int64_t *ret_id);
/* Marks the task running on `display` (NULL: keeps the display it was inserted with). Also
 * takes the disk space reserved for recording task ends (<db>.reserve) when it is missing. */
int journal_task_start(struct journal *j, int64_t id, const char *display, uint64_t started_us);
/* Final status; result and error may be NULL. On a full disk (SQLITE_FULL) it gives back the
 * reserved space and retries once; -ENOSPC when even that was not enough. */
int journal_task_finish(struct journal *j, int64_t id, enum ipc_task_status status, uint64_t finished_us,
			const char *result, const char *error);
/* Records what produced the task (a JSON object, docs/journal.md); -ENOENT unknown id. */
int journal_task_provenance(struct journal *j, int64_t id, const char *provenance_json);
/* Records what an instruction task's session prefilled first, and how its turns are written (a
 * JSON object, docs/journal.md `prompt`); -ENOENT unknown id. */
int journal_task_prompt(struct journal *j, int64_t id, const char *prompt_json);
/* Records why an instruction task ended `stuck` (a JSON object, docs/journal.md `stuck`, from
 * stuck_evidence()); -ENOENT unknown id. */
int journal_task_stuck(struct journal *j, int64_t id, const char *evidence_json);
/* Records the stuck warning step `index` gave the model (appended to its tool output);
 * -ENOENT when the step is not journaled. */
int journal_step_stuck(struct journal *j, int64_t task_id, int index, const char *warning);
/* A value the journal does not have (SQL NULL) in the rows' integer fields, all of which are
 * otherwise >= 0. */
#define JOURNAL_NONE (-1)

/* One task as stored. Strings are NULL where the column is; times are microseconds since the
 * epoch, 0 when not reached yet. */
struct journal_task_row {
	int64_t id;
	char *kind, *status, *display;
	char *spec; /* the request, JSON text */
	uint64_t created_us, started_us, finished_us;
	char *result, *error;
	int64_t n_steps;
	char *provenance, *prompt; /* JSON text */
	char *stuck;		   /* JSON text: why it ended `stuck`, or NULL */
};
void journal_task_row_finish(struct journal_task_row *row);
void journal_task_rows_free(struct journal_task_row *rows, size_t n);

/* -ENOENT when absent. */
int journal_task_get(struct journal *j, int64_t id, struct journal_task_row *ret);
int journal_task_status(struct journal *j, int64_t id, enum ipc_task_status *ret);
/* status < 0: any. Newest first: at most `limit` rows from `offset` on, and how many match. */
int journal_task_list(struct journal *j, int status, unsigned limit, unsigned offset,
		      struct journal_task_row **ret_rows, size_t *ret_n, int64_t *ret_total);

/* What the model did in an agent step (instruction tasks); strings may be NULL. */
struct journal_agent_step {
	const char *thought, *note;
	const char *raw_output;	   /* the decoded text of the last attempt, as sampled */
	const char *reasoning;	   /* its think block's text, or NULL: thinking off */
	const char *prompt_text;   /* the tokens appended, as text (image runs collapsed) */
	const char *user_turn;	   /* the observation's user turn text, "<image>" placeholder */
	const char *prompt_sha256; /* of the ids prefilled this step (provider-local.c: prefill_sha256) */
	int attempts;		   /* decode attempts (1 + invalid-step retries) */
	int tiles;		   /* image tiles sent for this step's observation */
	const char
		*prompt; /* "persistent", "window", "rolling" or "rebuild" (persistent or rolling, rebuilt) */
	long long tokens_appended; /* prompt tokens prefilled this step (observation + result) */
	long long tokens_decoded;  /* tokens fed back for the step (all attempts): sampled + forced */
	/* Local provider (-1, or a remote one: not journaled): of tokens_decoded, those
	 * jump-forward appended without sampling them, and the forwards the decode ran. */
	long long tokens_forced, decode_forwards;
	long long session_tokens; /* session length after the step was decoded */
	uint64_t preprocess_us, encode_us, prefill_us, decode_us;
	/* Which provider answered ("local", "remote"; NULL: local) and, from a remote server,
	 * the model name it answered with, its usage (all attempts; -1: not told) and the time
	 * its requests took (-1 or 0 with provider local: not journaled). */
	const char *provider;
	const char *remote_model;
	long long prompt_tokens, completion_tokens;
	long long server_us;
};

/* One step, as the executor fills it in. */
struct journal_step {
	int64_t task_id;
	int index;
	const char *tool_call; /* JSON */
	const char *tool_name;
	enum ipc_coords coords;
	bool has_point, has_point2;
	int model_x, model_y, model_x2, model_y2; /* only when coords == MODEL */
	int px, py, px2, py2;
	bool has_monitor;
	struct x11_rect monitor;
	int image_w, image_h; /* 0 when nothing was captured */
	uint64_t started_us;
	const struct journal_agent_step *agent; /* NULL for scripts */
	/* A step that waited for its user (ask_user, an approval): a JSON object (docs/journal.md
	 * `held`), written by journal_step_finish; NULL: it did not wait. */
	const char *held;
	bool sensitive; /* it typed a secret: its screenshots are left out of reports and exports */
};

struct journal_step_timing {
	uint64_t capture_us, map_us, inject_us, settle_us, capture_after_us;
};

/* Inserts the step as 'running' (before the action, so screenshot rows can refer to it). */
int journal_step_begin(struct journal *j, const struct journal_step *s);
/* status: "ok", "error", "dry_run"; result/error may be NULL. Also records the pixel
 * coordinates, which are known only after mapping. */
int journal_step_finish(struct journal *j, const struct journal_step *s, const char *status,
			const char *result, const char *error, uint64_t finished_us,
			const struct journal_step_timing *t);
/* A screenshot of a step; path NULL when there is none (yet). */
struct journal_shot {
	char *path, *sha256;
	int64_t bytes;
};

/* One step as stored, with its screenshots. Strings are NULL and integers JOURNAL_NONE where
 * the column is NULL. */
struct journal_step_row {
	int index;
	char *tool_call; /* JSON text */
	char *status, *coords;
	int64_t model_x, model_y, model_x2, model_y2;
	int64_t px, py, px2, py2;
	bool has_monitor;
	struct x11_rect monitor;
	int64_t image_w, image_h;
	char *result, *error;
	uint64_t started_us, finished_us; /* 0: not yet */
	int64_t capture_us, map_us, inject_us, settle_us, capture_after_us;
	struct journal_shot before, after;
	/* What the model did (instruction tasks; is_agent false for script steps). */
	bool is_agent;
	char *thought, *note, *raw_output, *prompt, *prompt_text, *user_turn, *prompt_sha256;
	char *reasoning;
	int64_t attempts, tiles, tokens_appended, tokens_decoded, session_tokens;
	int64_t preprocess_us, encode_us, prefill_us, decode_us;
	char *provider, *remote_model;
	int64_t prompt_tokens, completion_tokens, server_us;
	int64_t tokens_forced, decode_forwards; /* local steps of schema 11 on; else JOURNAL_NONE */
	char *stuck;				/* the stuck warning the step gave the model, or NULL */
	char *held;				/* JSON text, NULL: the step did not wait for its user */
	bool sensitive;				/* it typed a secret */
};
void journal_step_rows_free(struct journal_step_row *rows, size_t n);

/* Steps with index >= from_index (finished ones only, or also the running one), in order. */
int journal_steps_get(struct journal *j, int64_t task_id, int from_index, bool finished_only,
		      struct journal_step_row **ret_rows, size_t *ret_n);

/* Retention: removes the tasks that finished before `before_us` (never a queued or running
 * one), their steps and screenshot rows in one transaction, then their PNG files under
 * `state_dir` (and each emptied screenshots/<task>/). *ret_bytes: the bytes of the files
 * removed. */
int journal_prune(struct journal *j, const char *state_dir, uint64_t before_us, int *ret_tasks,
		  uint64_t *ret_bytes);

/* What journal_prune(before_us) would remove, removing nothing: the count of such tasks, the
 * journaled bytes of their screenshots, and the newest `max` of them (id, status, finished
 * time) in *ret_tasks (malloc'd, *ret_n of them; NULL when none). */
struct journal_prune_task {
	int64_t id;
	char status[16];
	uint64_t finished_us;
};
int journal_prune_preview(struct journal *j, uint64_t before_us, size_t max,
			  struct journal_prune_task **ret_tasks, size_t *ret_n, int *ret_count,
			  uint64_t *ret_bytes);

int journal_screenshot_insert(struct journal *j, int64_t task_id, int index, const char *which,
			      const char *relpath, const char *sha256_hex, uint64_t bytes, int width,
			      int height, uint64_t encode_us, uint64_t write_us);
/* Relative path and sha256 of a written screenshot; -ENOENT when there is none (yet). */
int journal_screenshot_get(struct journal *j, int64_t task_id, int index, const char *which,
			   char **ret_relpath, char **ret_sha256);
