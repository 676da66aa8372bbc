/* journal + shotwriter: schema and migrations, task/step/screenshot rows, crash recovery,
 * refusal of a newer schema, and screenshots that are journaled only once durably written. */
#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "api-json.h"
#include "journal.h"
#include "shotwriter.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static char dir[] = "/tmp/test-journal-XXXXXX";

static char *db_path(const char *name)
{
	return path_join(dir, name);
}

static void test_fresh_schema(void)
{
	char *path = db_path("fresh.db");
	struct journal *j = journal_open(path);
	REQUIRE(j);
	CHECK_INT_EQ(journal_schema_version(j), JOURNAL_SCHEMA_VERSION);
	CHECK_INT_EQ(journal_integrity_check(j), 0);
	journal_close(j);

	/* WAL mode and the tables are visible to any SQLite client (docs/journal.md). */
	sqlite3 *db;
	sqlite3_stmt *st;
	REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
	REQUIRE(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL) == SQLITE_OK);
	REQUIRE(sqlite3_step(st) == SQLITE_ROW);
	CHECK_STR_EQ((const char *)sqlite3_column_text(st, 0), "wal");
	sqlite3_finalize(st);
	REQUIRE(sqlite3_prepare_v2(db,
				   "SELECT group_concat(name) FROM (SELECT name FROM"
				   " sqlite_master WHERE type = 'table' ORDER BY name)",
				   -1, &st, NULL) == SQLITE_OK);
	REQUIRE(sqlite3_step(st) == SQLITE_ROW);
	CHECK_STR_EQ((const char *)sqlite3_column_text(st, 0), "screenshots,sqlite_sequence,steps,tasks");
	sqlite3_finalize(st);
	sqlite3_close(db);

	/* Reopening does not migrate twice. */
	j = journal_open(path);
	REQUIRE(j);
	CHECK_INT_EQ(journal_schema_version(j), JOURNAL_SCHEMA_VERSION);
	journal_close(j);
	free(path);
}

/* A journal of version 2 (before provenance) is migrated in place; its tasks keep their rows
 * and read back with a null provenance. */
static void test_migrate_from_2(void)
{
	char *path = db_path("v2.db");
	struct journal *j = journal_open(path);
	int64_t id;
	json_t *o;
	sqlite3 *db;

	REQUIRE(j);
	REQUIRE(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{\"script\":[]}", ":9", 1, &id) == 0);
	journal_close(j);
	REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
	/* Back to version 2: without the columns of versions 3, 4, 5, 7, 8, 9, 10 and 11, and the
	 * tasks' status CHECK as version 1 wrote it. */
	REQUIRE(sqlite3_exec(db,
			     "ALTER TABLE steps DROP COLUMN tokens_forced;"
			     "ALTER TABLE steps DROP COLUMN decode_forwards;"
			     "ALTER TABLE steps DROP COLUMN held;"
			     "ALTER TABLE steps DROP COLUMN reasoning;"
			     "ALTER TABLE steps DROP COLUMN stuck;"
			     "ALTER TABLE steps DROP COLUMN sensitive;"
			     "ALTER TABLE tasks DROP COLUMN stuck;"
			     "PRAGMA writable_schema = ON;"
			     "UPDATE sqlite_schema SET sql = replace(sql, ', ''stuck'')', ')')"
			     " WHERE type = 'table' AND name = 'tasks';"
			     "PRAGMA writable_schema = RESET;"
			     "ALTER TABLE steps DROP COLUMN provider;"
			     "ALTER TABLE steps DROP COLUMN remote_model;"
			     "ALTER TABLE steps DROP COLUMN prompt_tokens;"
			     "ALTER TABLE steps DROP COLUMN completion_tokens;"
			     "ALTER TABLE steps DROP COLUMN server_us;"
			     "ALTER TABLE tasks DROP COLUMN provenance;"
			     "ALTER TABLE tasks DROP COLUMN prompt;"
			     "ALTER TABLE steps DROP COLUMN user_turn;"
			     "ALTER TABLE steps DROP COLUMN prompt_sha256; PRAGMA user_version = 2",
			     NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);

	j = journal_open(path);
	REQUIRE(j);
	CHECK_INT_EQ(journal_schema_version(j), JOURNAL_SCHEMA_VERSION);
	REQUIRE(api_json_read_task(j, id, &o) == 0);
	CHECK(json_is_null(json_object_get(o, "provenance")));
	CHECK(json_is_null(json_object_get(o, "prompt")));
	CHECK(json_is_null(json_object_get(o, "stuck")));
	CHECK_STR_EQ(json_string_value(json_object_get(o, "display")), ":9");
	json_decref(o);
	CHECK_INT_EQ(journal_task_provenance(j, id, "{\"holod_version\":\"x\"}"), 0);
	/* Version 8: the status `stuck`, with its evidence. */
	CHECK_INT_EQ(journal_task_finish(j, id, IPC_TASK_STUCK, 2, NULL, "stuck: ..."), 0);
	CHECK_INT_EQ(journal_task_stuck(j, id, "{\"reason\":\"unchanged_screen\"}"), 0);
	REQUIRE(api_json_read_task(j, id, &o) == 0);
	CHECK_STR_EQ(json_string_value(json_object_get(o, "status")), "stuck");
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(o, "stuck"), "reason")),
		     "unchanged_screen");
	json_decref(o);
	CHECK_INT_EQ(journal_integrity_check(j), 0);
	journal_close(j);
	/* Version 6 widened the steps' prompt CHECK to 'rolling', nothing else. */
	REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
	sqlite3_stmt *st;
	REQUIRE(sqlite3_prepare_v2(db, "SELECT sql FROM sqlite_schema WHERE name = 'steps'", -1, &st, NULL) ==
		SQLITE_OK);
	REQUIRE(sqlite3_step(st) == SQLITE_ROW);
	CHECK(strstr((const char *)sqlite3_column_text(st, 0),
		     "CHECK (prompt IN ('persistent', 'window', 'rebuild', 'rolling'))") != NULL);
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(path);
}

static void test_newer_schema_refused(void)
{
	char *path = db_path("newer.db");
	sqlite3 *db;
	REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
	REQUIRE(sqlite3_exec(db, "PRAGMA user_version = 99", NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);
	errno = 0;
	CHECK(journal_open(path) == NULL);
	CHECK_INT_EQ(errno, EPROTO);

	/* Not a database at all. */
	char *junk = db_path("junk.db");
	FILE *f = fopen(junk, "w");
	REQUIRE(f);
	fputs("this is not an SQLite database, but long enough to have a header..............\n"
	      "................................................................................\n",
	      f);
	fclose(f);
	errno = 0;
	CHECK(journal_open(junk) == NULL);
	CHECK_INT_EQ(errno, EBADMSG);
	free(junk);
	free(path);
}

static struct journal_step step(int64_t task, int index)
{
	static struct journal_step s;
	memset(&s, 0, sizeof(s));
	s.task_id = task;
	s.index = index;
	s.tool_call = "{\"tool_name\":\"click\",\"x\":500,\"y\":250}";
	s.tool_name = "click";
	s.coords = IPC_COORDS_MODEL;
	s.has_point = true;
	s.model_x = 500;
	s.model_y = 250;
	s.px = 400;
	s.py = 150;
	s.has_monitor = true;
	s.monitor = (struct x11_rect){0, 0, 800, 600};
	s.image_w = 800;
	s.image_h = 600;
	s.started_us = 1700000000000000ull;
	return s;
}

/* The rows themselves (what api-json renders): NULL columns are NULL strings, JOURNAL_NONE
 * integers and 0 times; a script step has no agent part. */
static void test_row_structs(void)
{
	char *path = db_path("structs.db");
	struct journal *j = journal_open(path);
	struct journal_task_row t;
	struct journal_step_row *rows;
	size_t n;
	int64_t id, total;

	REQUIRE(j);
	REQUIRE(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{\"script\":[]}", NULL, 5, &id) == 0);
	REQUIRE(journal_task_get(j, id, &t) == 0);
	CHECK_INT_EQ(t.id, id);
	CHECK_STR_EQ(t.kind, "script");
	CHECK_STR_EQ(t.status, "queued");
	CHECK_STR_EQ(t.spec, "{\"script\":[]}");
	CHECK(!t.display && !t.result && !t.error && !t.provenance && !t.prompt);
	CHECK(t.created_us == 5 && t.started_us == 0 && t.finished_us == 0);
	CHECK_INT_EQ(t.n_steps, 0);
	journal_task_row_finish(&t);
	CHECK_INT_EQ(journal_task_get(j, id + 1, &t), -ENOENT);

	REQUIRE(journal_task_start(j, id, ":3", 7) == 0);
	struct journal_step s0 = step(id, 0);
	s0.has_monitor = false;
	s0.image_w = 0;
	REQUIRE(journal_step_begin(j, &s0) == 0);
	REQUIRE(journal_steps_get(j, id, 0, false, &rows, &n) == 0);
	REQUIRE(n == 1);
	CHECK_STR_EQ(rows[0].status, "running");
	CHECK(rows[0].model_x == 500 && rows[0].model_y == 250);
	CHECK(rows[0].model_x2 == JOURNAL_NONE && rows[0].px == JOURNAL_NONE);
	CHECK(!rows[0].has_monitor && rows[0].image_w == JOURNAL_NONE);
	CHECK(rows[0].capture_us == JOURNAL_NONE && rows[0].finished_us == 0);
	CHECK(!rows[0].before.path && !rows[0].after.path);
	CHECK(!rows[0].is_agent && !rows[0].thought && rows[0].attempts == JOURNAL_NONE);
	journal_step_rows_free(rows, n);
	REQUIRE(journal_steps_get(j, id, 0, true, &rows, &n) == 0);
	CHECK_INT_EQ(n, 0); /* the running step is not finished */
	journal_step_rows_free(rows, n);

	REQUIRE(journal_task_get(j, id, &t) == 0);
	CHECK(t.started_us == 7 && t.n_steps == 1);
	CHECK_STR_EQ(t.display, ":3");
	journal_task_row_finish(&t);
	struct journal_task_row *list;
	REQUIRE(journal_task_list(j, IPC_TASK_RUNNING, 10, 0, &list, &n, &total) == 0);
	CHECK(n == 1 && total == 1 && list[0].id == id);
	journal_task_rows_free(list, n);
	REQUIRE(journal_task_list(j, IPC_TASK_SUCCEEDED, 10, 0, &list, &n, &total) == 0);
	CHECK(n == 0 && total == 0);
	journal_task_rows_free(list, n);
	journal_close(j);
	free(path);
}

static void test_rows_and_recovery(void)
{
	char *path = db_path("rows.db");
	struct journal *j = journal_open(path);
	int64_t a, b, c;
	json_t *o;

	REQUIRE(j);
	CHECK_INT_EQ(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{\"script\":[]}", ":9", 1, &a), 0);
	CHECK_INT_EQ(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{\"script\":[]}", ":9", 2, &b), 0);
	CHECK_INT_EQ(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{\"script\":[]}", NULL, 3, &c), 0);
	CHECK(a < b && b < c);
	CHECK_INT_EQ(journal_task_start(j, a, NULL, 10), 0);
	CHECK_INT_EQ(journal_task_start(j, 999, NULL, 10), -ENOENT);

	struct journal_step s0 = step(a, 0);
	struct journal_step_timing tm = {.capture_us = 11,
					 .map_us = 1,
					 .inject_us = 22,
					 .settle_us = 33,
					 .capture_after_us = 44};
	CHECK_INT_EQ(journal_step_begin(j, &s0), 0);
	CHECK_INT_EQ(journal_step_begin(j, &s0), -EINVAL); /* same (task, index) twice */
	/* Who approved the step, and when (held, schema 8). */
	s0.held = "{\"waited_for\":\"approval\",\"decision\":\"approved\",\"uid\":1000}";
	CHECK_INT_EQ(journal_step_finish(j, &s0, "ok", "clicked", NULL, 20, &tm), 0);
	struct journal_step s1 = step(a, 1);
	CHECK_INT_EQ(journal_step_begin(j, &s1), 0); /* left 'running' by the "crash" */

	const char *hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	CHECK_INT_EQ(journal_screenshot_insert(j, a, 0, "before", "screenshots/1/0-before.png", hex, 123, 800,
					       600, 5, 6),
		     0);
	/* A screenshot must belong to a step (foreign key). */
	CHECK_INT_EQ(journal_screenshot_insert(j, a, 7, "after", "x.png", hex, 1, 1, 1, 0, 0), -EINVAL);
	CHECK_INT_EQ(journal_screenshot_insert(j, a, 0, "middle", "x.png", hex, 1, 1, 1, 0, 0), -EINVAL);

	char *rel = NULL, *sha = NULL;
	CHECK_INT_EQ(journal_screenshot_get(j, a, 0, "before", &rel, &sha), 0);
	CHECK_STR_EQ(rel, "screenshots/1/0-before.png");
	CHECK_STR_EQ(sha, hex);
	free(rel);
	free(sha);
	CHECK_INT_EQ(journal_screenshot_get(j, a, 0, "after", &rel, &sha), -ENOENT);

	/* Finished steps only: index 1 is still running. */
	REQUIRE(api_json_read_steps(j, a, 0, true, &o) == 0);
	CHECK_INT_EQ(json_array_size(o), 1);
	json_t *s = json_array_get(o, 0);
	CHECK_STR_EQ(json_string_value(json_object_get(s, "status")), "ok");
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(s, "model"), "x")), 500);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(s, "pixels"), "y")), 150);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(s, "monitor"), "width")), 800);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(s, "timings_us"), "capture_after")),
		     44);
	CHECK_STR_EQ(json_string_value(
			     json_object_get(json_object_get(json_object_get(s, "screenshots"), "before"),
					     "sha256")),
		     hex);
	CHECK(json_is_null(json_object_get(json_object_get(s, "screenshots"), "after")));
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(s, "tool_call"), "tool_name")),
		     "click");
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(s, "held"), "decision")), "approved");
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(s, "held"), "uid")), 1000);
	json_decref(o);
	REQUIRE(api_json_read_steps(j, a, 0, false, &o) == 0);
	CHECK_INT_EQ(json_array_size(o), 2);
	CHECK(json_is_null(json_object_get(json_array_get(o, 1), "held")));
	json_decref(o);

	/* Provenance: recorded when a task starts, read back as an object; null when absent. */
	CHECK_INT_EQ(journal_task_provenance(j, a,
					     "{\"holod_version\":\"0.1.0\",\"screen\":"
					     "{\"width\":800,\"height\":600}}"),
		     0);
	CHECK_INT_EQ(journal_task_provenance(j, 999, "{}"), -ENOENT);
	REQUIRE(api_json_read_task(j, a, &o) == 0);
	CHECK_INT_EQ(json_integer_value(
			     json_object_get(json_object_get(json_object_get(o, "provenance"), "screen"),
					     "width")),
		     800);
	json_decref(o);
	REQUIRE(api_json_read_task(j, b, &o) == 0);
	CHECK(json_is_null(json_object_get(o, "provenance")));
	json_decref(o);

	CHECK_INT_EQ(journal_task_finish(j, c, IPC_TASK_CANCELLED, 30, NULL, "cancelled"), 0);
	journal_close(j);

	/* "Restart": a running and a queued task become interrupted, the finished one stays. */
	j = journal_open(path);
	REQUIRE(j);
	CHECK_INT_EQ(journal_recover(j, 100), 2);
	enum ipc_task_status st;
	CHECK_INT_EQ(journal_task_status(j, a, &st), 0);
	CHECK_INT_EQ(st, IPC_TASK_INTERRUPTED);
	CHECK_INT_EQ(journal_task_status(j, b, &st), 0);
	CHECK_INT_EQ(st, IPC_TASK_INTERRUPTED);
	CHECK_INT_EQ(journal_task_status(j, c, &st), 0);
	CHECK_INT_EQ(st, IPC_TASK_CANCELLED);
	CHECK_INT_EQ(journal_task_status(j, 999, &st), -ENOENT);
	REQUIRE(api_json_read_task(j, a, &o) == 0);
	CHECK_STR_EQ(json_string_value(json_object_get(o, "error")),
		     "holod stopped while the task was running");
	CHECK_INT_EQ(json_integer_value(json_object_get(o, "steps")), 2);
	CHECK(json_is_array(json_object_get(json_object_get(o, "spec"), "script")));
	json_decref(o);
	REQUIRE(api_json_read_task(j, b, &o) == 0);
	CHECK_STR_EQ(json_string_value(json_object_get(o, "error")), "holod stopped before the task started");
	json_decref(o);
	REQUIRE(api_json_read_steps(j, a, 1, false, &o) == 0);
	CHECK_STR_EQ(json_string_value(json_object_get(json_array_get(o, 0), "status")), "interrupted");
	json_decref(o);
	CHECK_INT_EQ(journal_recover(j, 101), 0);

	/* Listing: newest first, filter, paging. */
	REQUIRE(api_json_read_task_list(j, -1, 2, 0, &o) == 0);
	CHECK_INT_EQ(json_integer_value(json_object_get(o, "total")), 3);
	CHECK_INT_EQ(json_array_size(json_object_get(o, "tasks")), 2);
	CHECK_INT_EQ(json_integer_value(
			     json_object_get(json_array_get(json_object_get(o, "tasks"), 0), "id")),
		     c);
	json_decref(o);
	REQUIRE(api_json_read_task_list(j, -1, 2, 2, &o) == 0);
	CHECK_INT_EQ(json_array_size(json_object_get(o, "tasks")), 1);
	json_decref(o);
	REQUIRE(api_json_read_task_list(j, IPC_TASK_INTERRUPTED, 50, 0, &o) == 0);
	CHECK_INT_EQ(json_integer_value(json_object_get(o, "total")), 2);
	json_decref(o);
	CHECK_INT_EQ(journal_integrity_check(j), 0);
	journal_close(j);
	free(path);
}

static void write_file(const char *path, size_t size)
{
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	for (size_t i = 0; i < size; i++)
		fputc('x', f);
	fclose(f);
}

/* Retention: old finished tasks go with their steps, screenshot rows and files, in one
 * transaction; a recent, a queued and a running task stay; the journal stays consistent. */
static void test_prune(void)
{
	char *path = db_path("prune.db");
	struct journal *j = journal_open(path);
	const char *hex = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
	int64_t old, recent, queued, running;
	int tasks = -1;
	uint64_t bytes = 0;

	REQUIRE(j);
	REQUIRE(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{}", NULL, 1, &old) == 0);
	REQUIRE(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{}", NULL, 2, &recent) == 0);
	REQUIRE(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{}", NULL, 3, &queued) == 0);
	REQUIRE(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{}", NULL, 4, &running) == 0);
	REQUIRE(journal_task_start(j, old, NULL, 10) == 0);
	struct journal_step s0 = step(old, 0);
	REQUIRE(journal_step_begin(j, &s0) == 0);
	char *state = db_path("prune-state");
	char *shots = path_join(state, "screenshots");
	char *tdir = xasprintf("%s/%lld", shots, (long long)old);
	REQUIRE(mkdir(state, 0700) == 0 && mkdir(shots, 0700) == 0 && mkdir(tdir, 0700) == 0);
	char *rel_b = xasprintf("screenshots/%lld/0-before.png", (long long)old);
	char *rel_a = xasprintf("screenshots/%lld/0-after.png", (long long)old);
	char *file_b = path_join(state, rel_b), *file_a = path_join(state, rel_a);
	write_file(file_b, 1000);
	write_file(file_a, 234);
	REQUIRE(journal_screenshot_insert(j, old, 0, "before", rel_b, hex, 1000, 8, 8, 0, 0) == 0);
	REQUIRE(journal_screenshot_insert(j, old, 0, "after", rel_a, hex, 234, 8, 8, 0, 0) == 0);
	REQUIRE(journal_task_finish(j, old, IPC_TASK_SUCCEEDED, 100, NULL, NULL) == 0);
	REQUIRE(journal_task_start(j, recent, NULL, 10) == 0);
	REQUIRE(journal_task_finish(j, recent, IPC_TASK_FAILED, 5000, NULL, "x") == 0);
	REQUIRE(journal_task_start(j, running, NULL, 10) == 0);

	/* Nothing finished before 50. */
	CHECK_INT_EQ(journal_prune(j, state, 50, &tasks, &bytes), 0);
	CHECK_INT_EQ(tasks, 0);
	CHECK_INT_EQ(bytes, 0);
	CHECK_INT_EQ(journal_prune(j, state, 1000, &tasks, &bytes), 0);
	CHECK_INT_EQ(tasks, 1);
	CHECK_INT_EQ(bytes, 1234);
	CHECK(access(file_b, F_OK) < 0 && access(file_a, F_OK) < 0);
	CHECK(access(tdir, F_OK) < 0); /* the emptied folder went too */
	json_t *o = NULL;
	CHECK_INT_EQ(api_json_read_task(j, old, &o), -ENOENT);
	CHECK_INT_EQ(api_json_read_steps(j, old, 0, false, &o), 0);
	CHECK_INT_EQ(json_array_size(o), 0);
	json_decref(o);
	char *rel = NULL;
	CHECK_INT_EQ(journal_screenshot_get(j, old, 0, "before", &rel, NULL), -ENOENT);
	enum ipc_task_status st;
	CHECK_INT_EQ(journal_task_status(j, recent, &st), 0);
	/* Everything finished: queued and running tasks are never pruned. */
	CHECK_INT_EQ(journal_prune(j, state, UINT64_MAX / 2, &tasks, &bytes), 0);
	CHECK_INT_EQ(tasks, 1);
	CHECK_INT_EQ(journal_task_status(j, queued, &st), 0);
	CHECK_INT_EQ(st, IPC_TASK_QUEUED);
	CHECK_INT_EQ(journal_task_status(j, running, &st), 0);
	CHECK_INT_EQ(st, IPC_TASK_RUNNING);
	CHECK_INT_EQ(journal_integrity_check(j), 0);
	journal_close(j);
	free(rel_a), free(rel_b), free(file_a), free(file_b), free(tdir), free(shots), free(state);
	free(path);
}

static void test_shotwriter(void)
{
	char hex[65];
	ipc_sha256_hex("abc", 3, hex);
	CHECK_STR_EQ(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");

	char *path = db_path("shots.db");
	struct journal *j = journal_open(path);
	REQUIRE(j);
	int64_t id;
	REQUIRE(journal_task_insert(j, IPC_TASK_KIND_SCRIPT, "{}", NULL, 1, &id) == 0);
	struct journal_step s = step(id, 0);
	REQUIRE(journal_step_begin(j, &s) == 0);

	struct shotwriter *w = shotwriter_create(dir, j, NULL, NULL);
	REQUIRE(w);
	for (int k = 0; k < 2; k++) {
		struct x11_frame *f = x11_frame_create(32, 16);
		REQUIRE(f);
		memset(f->pixels, k ? 0xff : 0x40, f->stride * (size_t)f->height);
		CHECK_INT_EQ(shotwriter_submit(w, id, 0, k ? "after" : "before", f), 0);
	}
	shotwriter_destroy(w); /* drains */

	for (int k = 0; k < 2; k++) {
		char *rel = NULL, *sha = NULL;
		REQUIRE(journal_screenshot_get(j, id, 0, k ? "after" : "before", &rel, &sha) == 0);
		char *file = path_join(dir, rel);
		FILE *f = fopen(file, "rb");
		REQUIRE(f);
		uint8_t buf[65536];
		size_t n = fread(buf, 1, sizeof(buf), f);
		fclose(f);
		CHECK(n > 8 && memcmp(buf, "\x89PNG\r\n\x1a\n", 8) == 0);
		ipc_sha256_hex(buf, n, hex);
		CHECK_STR_EQ(hex, sha);
		char *tmp = xasprintf("%s.tmp", file);
		CHECK(access(tmp, F_OK) < 0);
		free(tmp);
		free(file);
		free(rel);
		free(sha);
	}
	journal_close(j);
	free(path);
}

int main(void)
{
	REQUIRE(mkdtemp(dir));
	test_fresh_schema();
	test_migrate_from_2();
	test_newer_schema_refused();
	test_row_structs();
	test_rows_and_recovery();
	test_shotwriter();
	test_prune();
	char *cmd = xasprintf("rm -rf '%s'", dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", dir);
	free(cmd);
	return test_exit();
}
