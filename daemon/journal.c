/* The SQLite journal. See journal.h for the threading and error contract and docs/journal.md for
 * the schema, which this file's migration table is the source of. */
#include "journal.h"

#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* A full disk must not leave a task 'running' for ever: the write of its end would fail like
 * the rest. So the journal keeps JOURNAL_RESERVE_BYTES of the disk in a file next to the
 * database (<db>.reserve), gives them back when a task's end fails with SQLITE_FULL and retries
 * it once; the reserve is taken again when a task starts and there is space. */
#define JOURNAL_RESERVE_BYTES (256 * 1024)

struct journal {
	sqlite3 *db;
	char *path;
	char *reserve_path;
	pthread_mutex_t lock;
};

/* Forward migrations: entry i takes user_version i to i + 1. Never edit a shipped entry; append. */
static const char *const migrations[] = {
	/* 0 -> 1 */
	"CREATE TABLE tasks ("
	"  id INTEGER PRIMARY KEY AUTOINCREMENT,"
	"  kind TEXT NOT NULL CHECK (kind IN ('instruction', 'script')),"
	"  spec TEXT NOT NULL,"
	"  status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed',"
	"                                         'cancelled', 'interrupted')),"
	"  display TEXT,"
	"  created_us INTEGER NOT NULL,"
	"  started_us INTEGER,"
	"  finished_us INTEGER,"
	"  result TEXT,"
	"  error TEXT"
	");"
	"CREATE INDEX tasks_by_status ON tasks (status, id);"
	"CREATE TABLE steps ("
	"  task_id INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,"
	"  idx INTEGER NOT NULL CHECK (idx >= 0),"
	"  tool_name TEXT NOT NULL,"
	"  tool_call TEXT NOT NULL,"
	"  coords TEXT NOT NULL CHECK (coords IN ('pixels', 'model')),"
	"  model_x INTEGER, model_y INTEGER, model_x2 INTEGER, model_y2 INTEGER,"
	"  px INTEGER, py INTEGER, px2 INTEGER, py2 INTEGER,"
	"  mon_x INTEGER, mon_y INTEGER, mon_w INTEGER, mon_h INTEGER,"
	"  image_w INTEGER, image_h INTEGER,"
	"  status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'error', 'dry_run',"
	"                                         'interrupted')),"
	"  result TEXT,"
	"  error TEXT,"
	"  started_us INTEGER NOT NULL,"
	"  finished_us INTEGER,"
	"  capture_us INTEGER, map_us INTEGER, inject_us INTEGER, settle_us INTEGER,"
	"  capture_after_us INTEGER,"
	"  PRIMARY KEY (task_id, idx)"
	") WITHOUT ROWID;"
	"CREATE TABLE screenshots ("
	"  task_id INTEGER NOT NULL,"
	"  idx INTEGER NOT NULL,"
	"  which TEXT NOT NULL CHECK (which IN ('before', 'after')),"
	"  path TEXT NOT NULL,"
	"  sha256 TEXT NOT NULL CHECK (length(sha256) = 64),"
	"  bytes INTEGER NOT NULL,"
	"  width INTEGER NOT NULL,"
	"  height INTEGER NOT NULL,"
	"  encode_us INTEGER,"
	"  write_us INTEGER,"
	"  PRIMARY KEY (task_id, idx, which),"
	"  FOREIGN KEY (task_id, idx) REFERENCES steps (task_id, idx) ON DELETE CASCADE"
	") WITHOUT ROWID;",
	/* 1 -> 2: agent steps (instruction tasks). */
	"ALTER TABLE steps ADD COLUMN thought TEXT;"
	"ALTER TABLE steps ADD COLUMN note TEXT;"
	"ALTER TABLE steps ADD COLUMN raw_output TEXT;"
	"ALTER TABLE steps ADD COLUMN prompt_text TEXT;"
	"ALTER TABLE steps ADD COLUMN attempts INTEGER;"
	"ALTER TABLE steps ADD COLUMN tiles INTEGER;"
	"ALTER TABLE steps ADD COLUMN prompt TEXT"
	"  CHECK (prompt IN ('persistent', 'window', 'rebuild'));"
	"ALTER TABLE steps ADD COLUMN tokens_appended INTEGER;"
	"ALTER TABLE steps ADD COLUMN tokens_decoded INTEGER;"
	"ALTER TABLE steps ADD COLUMN session_tokens INTEGER;"
	"ALTER TABLE steps ADD COLUMN preprocess_us INTEGER;"
	"ALTER TABLE steps ADD COLUMN encode_us INTEGER;"
	"ALTER TABLE steps ADD COLUMN prefill_us INTEGER;"
	"ALTER TABLE steps ADD COLUMN decode_us INTEGER;",
	/* 2 -> 3: what produced a task (docs/journal.md, provenance). */
	"ALTER TABLE tasks ADD COLUMN provenance TEXT;",
	/* 3 -> 4: what an instruction task's session prefilled (docs/journal.md, chat export). */
	"ALTER TABLE tasks ADD COLUMN prompt TEXT;"
	"ALTER TABLE steps ADD COLUMN user_turn TEXT;"
	"ALTER TABLE steps ADD COLUMN prompt_sha256 TEXT;",
	/* 4 -> 5: which provider answered a step, and a remote server's usage (issue 17). */
	"ALTER TABLE steps ADD COLUMN provider TEXT;"
	"ALTER TABLE steps ADD COLUMN remote_model TEXT;"
	"ALTER TABLE steps ADD COLUMN prompt_tokens INTEGER;"
	"ALTER TABLE steps ADD COLUMN completion_tokens INTEGER;"
	"ALTER TABLE steps ADD COLUMN server_us INTEGER;",
	/* 5 -> 6: the rolling history's steps (issue 30). SQLite cannot alter a CHECK; widening
	 * one is the in-place schema edit its ALTER TABLE documentation describes (the rows on
	 * disk are unchanged and all still valid); RESET reloads the schema. */
	"PRAGMA writable_schema = ON;"
	"UPDATE sqlite_schema SET sql = replace(sql, '''window'', ''rebuild'')',"
	"  '''window'', ''rebuild'', ''rolling'')') WHERE type = 'table' AND name = 'steps';"
	"PRAGMA writable_schema = RESET;",
	/* 6 -> 7: the think block of a step decoded with thinking on (issue 30). */
	"ALTER TABLE steps ADD COLUMN reasoning TEXT;",
	/* 7 -> 8: stuck steps (issue 33): the status `stuck` (the CHECK widened in place, as in
	 * 5 -> 6), the evidence of a task that ended so, and the warning a step gave the model. */
	"PRAGMA writable_schema = ON;"
	"UPDATE sqlite_schema SET sql = replace(sql, '''cancelled'', ''interrupted'')',"
	"  '''cancelled'', ''interrupted'', ''stuck'')') WHERE type = 'table' AND name = 'tasks';"
	"PRAGMA writable_schema = RESET;"
	"ALTER TABLE tasks ADD COLUMN stuck TEXT;"
	"ALTER TABLE steps ADD COLUMN stuck TEXT;",
	/* 8 -> 9: a step that waited for its user (ask_user's reply, an approval): what was
	 * decided, by whom and when (issue 32). */
	"ALTER TABLE steps ADD COLUMN held TEXT;",
	/* 9 -> 10: a step that typed a secret has sensitive screenshots (issue 33). */
	"ALTER TABLE steps ADD COLUMN sensitive INTEGER;",
	/* 10 -> 11: of a local step's decoded tokens, those jump-forward appended without
	 * sampling them, and the forwards its decode ran (issue 34). */
	"ALTER TABLE steps ADD COLUMN tokens_forced INTEGER;"
	"ALTER TABLE steps ADD COLUMN decode_forwards INTEGER;",
};

static_assert(ARRAY_SIZE(migrations) == JOURNAL_SCHEMA_VERSION, "one migration per version");

static int sqlite_errno(int rc)
{
	switch (rc & 0xff) {
	case SQLITE_OK:
	case SQLITE_ROW:
	case SQLITE_DONE:
		return 0;
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_READONLY:
	case SQLITE_PERM:
	case SQLITE_AUTH:
		return -EACCES;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CORRUPT:
	case SQLITE_NOTADB:
		return -EBADMSG;
	case SQLITE_CANTOPEN:
		return -ENOENT;
	case SQLITE_CONSTRAINT:
	case SQLITE_MISMATCH:
	case SQLITE_RANGE:
		return -EINVAL;
	case SQLITE_TOOBIG:
		return -E2BIG;
	default:
		return -EIO;
	}
}

/* Translate at the edge: an SQLite failure becomes -errno plus a debug line with its message. */
#define db_fail(j, rc, what)                                                                                 \
	log_debug_errno(sqlite_errno(rc) ? sqlite_errno(rc) : -EIO, "sqlite %s: %s (%d)", (what),            \
			sqlite3_errmsg((j)->db), (rc))

static int exec_locked(struct journal *j, const char *sql)
{
	char *msg = NULL;
	int rc = sqlite3_exec(j->db, sql, NULL, NULL, &msg);
	if (rc != SQLITE_OK) {
		int r = log_debug_errno(sqlite_errno(rc), "sqlite exec: %s", msg ? msg : "?");
		sqlite3_free(msg);
		return r;
	}
	return 0;
}

static int prepare(struct journal *j, const char *sql, sqlite3_stmt **ret)
{
	int rc = sqlite3_prepare_v2(j->db, sql, -1, ret, NULL);
	return rc == SQLITE_OK ? 0 : db_fail(j, rc, "prepare");
}

static int step_done(struct journal *j, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : db_fail(j, rc, "step");
}

/* An UPDATE of one row by its key: -ENOENT when there is no such row. */
static int step_update_one(struct journal *j, sqlite3_stmt *st)
{
	int r = step_done(j, st);
	return r >= 0 && sqlite3_changes(j->db) == 0 ? -ENOENT : r;
}

/* Takes the reserve if it is missing (best effort: on a full disk it is simply not there). */
static void reserve_take(struct journal *j)
{
	struct stat stt;
	int fd, r;

	if (stat(j->reserve_path, &stt) == 0 && stt.st_size >= JOURNAL_RESERVE_BYTES)
		return;
	fd = open(j->reserve_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0) {
		log_debug_errno(-errno, "cannot create %s", j->reserve_path);
		return;
	}
	r = posix_fallocate(fd, 0, JOURNAL_RESERVE_BYTES);
	if (r == 0 && fsync(fd) < 0)
		r = errno;
	close(fd);
	if (r != 0) {
		log_debug_errno(-r, "cannot reserve %d bytes in %s", JOURNAL_RESERVE_BYTES, j->reserve_path);
		unlink(j->reserve_path);
	}
}

/* A task's end: on a full disk, gives the reserve back and tries once more. */
static int step_update_closing(struct journal *j, sqlite3_stmt *st)
{
	int r = step_update_one(j, st);

	if (r != -ENOSPC)
		return r;
	if (unlink(j->reserve_path) < 0) {
		log_debug_errno(-errno, "no reserve to give back in %s", j->reserve_path);
		return r;
	}
	log_debug("journal %s: the disk is full; recording a task's end in the reserved space", j->path);
	sqlite3_reset(st);
	return step_update_one(j, st);
}

static int read_user_version(struct journal *j, int *ret)
{
	sqlite3_stmt *st;
	int r = prepare(j, "PRAGMA user_version", &st);
	if (r < 0)
		return r;
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int(st, 0);
	else
		r = db_fail(j, rc, "user_version");
	sqlite3_finalize(st);
	return r;
}

static int migrate(struct journal *j)
{
	int version = 0, r;

	if ((r = read_user_version(j, &version)) < 0)
		return r;
	if (version > JOURNAL_SCHEMA_VERSION) {
		log_error("journal schema version %d is newer than this holod (%d)", version,
			  JOURNAL_SCHEMA_VERSION);
		return -EPROTO;
	}
	for (; version < JOURNAL_SCHEMA_VERSION; version++) {
		char *bump = xasprintf("PRAGMA user_version = %d;", version + 1);
		if ((r = exec_locked(j, "BEGIN IMMEDIATE;")) < 0) {
			free(bump);
			return r;
		}
		if ((r = exec_locked(j, migrations[version])) < 0 || (r = exec_locked(j, bump)) < 0 ||
		    (r = exec_locked(j, "COMMIT;")) < 0) {
			exec_locked(j, "ROLLBACK;");
			free(bump);
			return r;
		}
		free(bump);
	}
	return 0;
}

struct journal *journal_open(const char *path)
{
	struct journal *j = xcalloc(1, sizeof(*j));
	int r, rc;

	pthread_mutex_init(&j->lock, NULL);
	j->path = xstrdup(path);
	j->reserve_path = xasprintf("%s.reserve", path);
	rc = sqlite3_open_v2(path, &j->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX,
			     NULL);
	if (rc != SQLITE_OK) {
		r = j->db ? db_fail(j, rc, "open") : -ENOMEM;
		goto destroy;
	}
	sqlite3_busy_timeout(j->db, 5000);
	/* WAL + synchronous=NORMAL: a commit survives a crash of holod (kill -9); a power cut may
	 * lose the last commits but never corrupts the file. */
	if ((r = exec_locked(j, "PRAGMA journal_mode = WAL;"
				"PRAGMA synchronous = NORMAL;"
				"PRAGMA foreign_keys = ON;")) < 0)
		goto destroy;
	if ((r = migrate(j)) < 0)
		goto destroy;
	reserve_take(j);
	return j;

destroy:
	journal_close(j);
	errno = -r;
	return NULL;
}

void journal_close(struct journal *j)
{
	if (!j)
		return;
	if (j->db)
		sqlite3_close(j->db);
	pthread_mutex_destroy(&j->lock);
	free(j->path);
	free(j->reserve_path);
	free(j);
}

const char *journal_path(const struct journal *j)
{
	return j->path;
}

int journal_schema_version(struct journal *j)
{
	int v = 0, r;
	pthread_mutex_lock(&j->lock);
	r = read_user_version(j, &v);
	pthread_mutex_unlock(&j->lock);
	return r < 0 ? r : v;
}

int journal_integrity_check(struct journal *j)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j, "PRAGMA integrity_check", &st)) < 0)
		goto unlock;
	int rc = sqlite3_step(st);
	if (rc != SQLITE_ROW) {
		r = db_fail(j, rc, "integrity_check");
	} else if (strcmp((const char *)sqlite3_column_text(st, 0), "ok") != 0) {
		log_error("journal integrity check: %s", sqlite3_column_text(st, 0));
		r = -EBADMSG;
	}
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_recover(struct journal *j, uint64_t now_us)
{
	sqlite3_stmt *st = NULL;
	int r, changed = 0;

	pthread_mutex_lock(&j->lock);
	if ((r = exec_locked(j, "BEGIN IMMEDIATE;")) < 0)
		goto unlock;
	if ((r = prepare(j,
			 "UPDATE tasks SET status = 'interrupted', finished_us = ?1,"
			 " error = CASE status WHEN 'running'"
			 "   THEN 'holod stopped while the task was running'"
			 "   ELSE 'holod stopped before the task started' END"
			 " WHERE status IN ('running', 'queued')",
			 &st)) < 0)
		goto rollback;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)now_us);
	if ((r = step_done(j, st)) < 0)
		goto rollback;
	changed = sqlite3_changes(j->db);
	sqlite3_finalize(st);
	st = NULL;
	if ((r = exec_locked(j, "UPDATE steps SET status = 'interrupted',"
				" error = 'holod stopped during this step' WHERE status = 'running';")) < 0)
		goto rollback;
	if ((r = exec_locked(j, "COMMIT;")) < 0)
		goto rollback;
	r = changed;
	goto unlock;
rollback:
	sqlite3_finalize(st);
	exec_locked(j, "ROLLBACK;");
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_task_insert(struct journal *j, enum ipc_task_kind kind, const char *spec_json,
			const char *display, uint64_t created_us, int64_t *ret_id)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j,
			 "INSERT INTO tasks (kind, spec, status, display, created_us)"
			 " VALUES (?1, ?2, 'queued', ?3, ?4)",
			 &st)) < 0)
		goto unlock;
	sqlite3_bind_text(st, 1, ipc_task_kind_to_string(kind), -1, SQLITE_STATIC);
	sqlite3_bind_text(st, 2, spec_json, -1, SQLITE_TRANSIENT);
	if (display)
		sqlite3_bind_text(st, 3, display, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 4, (sqlite3_int64)created_us);
	if ((r = step_done(j, st)) >= 0)
		*ret_id = sqlite3_last_insert_rowid(j->db);
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_task_start(struct journal *j, int64_t id, const char *display, uint64_t started_us)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	reserve_take(j);
	if ((r = prepare(j,
			 "UPDATE tasks SET status = 'running', started_us = ?2, "
			 "display = COALESCE(?3, display) WHERE id = ?1",
			 &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)started_us);
	if (display)
		sqlite3_bind_text(st, 3, display, -1, SQLITE_TRANSIENT);
	r = step_update_one(j, st);
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_task_finish(struct journal *j, int64_t id, enum ipc_task_status status, uint64_t finished_us,
			const char *result, const char *error)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j,
			 "UPDATE tasks SET status = ?2, finished_us = ?3, result = ?4,"
			 " error = ?5 WHERE id = ?1",
			 &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, ipc_task_status_to_string(status), -1, SQLITE_STATIC);
	sqlite3_bind_int64(st, 3, (sqlite3_int64)finished_us);
	if (result)
		sqlite3_bind_text(st, 4, result, -1, SQLITE_TRANSIENT);
	if (error)
		sqlite3_bind_text(st, 5, error, -1, SQLITE_TRANSIENT);
	r = step_update_closing(j, st);
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

static int task_set_json(struct journal *j, const char *sql, int64_t id, const char *json)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j, sql, &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	sqlite3_bind_text(st, 2, json, -1, SQLITE_TRANSIENT);
	r = step_update_one(j, st);
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_task_provenance(struct journal *j, int64_t id, const char *provenance_json)
{
	return task_set_json(j, "UPDATE tasks SET provenance = ?2 WHERE id = ?1", id, provenance_json);
}

int journal_task_prompt(struct journal *j, int64_t id, const char *prompt_json)
{
	return task_set_json(j, "UPDATE tasks SET prompt = ?2 WHERE id = ?1", id, prompt_json);
}

int journal_task_stuck(struct journal *j, int64_t id, const char *evidence_json)
{
	return task_set_json(j, "UPDATE tasks SET stuck = ?2 WHERE id = ?1", id, evidence_json);
}

int journal_step_stuck(struct journal *j, int64_t task_id, int index, const char *warning)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j, "UPDATE steps SET stuck = ?3 WHERE task_id = ?1 AND idx = ?2", &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, task_id);
	sqlite3_bind_int(st, 2, index);
	sqlite3_bind_text(st, 3, warning, -1, SQLITE_TRANSIENT);
	r = step_update_one(j, st);
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

static char *col_str(sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return NULL;
	return xstrndup((const char *)sqlite3_column_text(st, col), (size_t)sqlite3_column_bytes(st, col));
}

static int64_t col_i64(sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return JOURNAL_NONE;
	return sqlite3_column_int64(st, col);
}

static uint64_t col_time_us(sqlite3_stmt *st, int col)
{
	if (sqlite3_column_type(st, col) == SQLITE_NULL)
		return 0;
	return (uint64_t)sqlite3_column_int64(st, col);
}

#define TASK_COLUMNS                                                                                         \
	"id, kind, spec, status, display, created_us, started_us, finished_us, result, error,"               \
	" (SELECT count(*) FROM steps s WHERE s.task_id = tasks.id), provenance, prompt, stuck"

static void task_row(sqlite3_stmt *st, struct journal_task_row *row)
{
	*row = (struct journal_task_row){
		.id = sqlite3_column_int64(st, 0),
		.kind = col_str(st, 1),
		.spec = col_str(st, 2),
		.status = col_str(st, 3),
		.display = col_str(st, 4),
		.created_us = col_time_us(st, 5),
		.started_us = col_time_us(st, 6),
		.finished_us = col_time_us(st, 7),
		.result = col_str(st, 8),
		.error = col_str(st, 9),
		.n_steps = sqlite3_column_int64(st, 10),
		.provenance = col_str(st, 11),
		.prompt = col_str(st, 12),
		.stuck = col_str(st, 13),
	};
}

void journal_task_row_finish(struct journal_task_row *row)
{
	if (!row)
		return;
	free(row->kind);
	free(row->spec);
	free(row->status);
	free(row->display);
	free(row->result);
	free(row->error);
	free(row->provenance);
	free(row->prompt);
	free(row->stuck);
	*row = (struct journal_task_row){0};
}

void journal_task_rows_free(struct journal_task_row *rows, size_t n)
{
	if (!rows)
		return;
	for (size_t i = 0; i < n; i++)
		journal_task_row_finish(&rows[i]);
	free(rows);
}

int journal_task_get(struct journal *j, int64_t id, struct journal_task_row *ret)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j, "SELECT " TASK_COLUMNS " FROM tasks WHERE id = ?1", &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		task_row(st, ret);
	else
		r = rc == SQLITE_DONE ? -ENOENT : db_fail(j, rc, "task get");
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_task_status(struct journal *j, int64_t id, enum ipc_task_status *ret)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j, "SELECT status FROM tasks WHERE id = ?1", &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, id);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		int s = ipc_task_status_from_string((const char *)sqlite3_column_text(st, 0));
		if (s < 0)
			r = -EBADMSG;
		else
			*ret = (enum ipc_task_status)s;
	} else {
		r = rc == SQLITE_DONE ? -ENOENT : db_fail(j, rc, "task status");
	}
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_task_list(struct journal *j, int status, unsigned limit, unsigned offset,
		      struct journal_task_row **ret_rows, size_t *ret_n, int64_t *ret_total)
{
	sqlite3_stmt *st = NULL, *count = NULL;
	struct journal_task_row *rows = NULL;
	size_t n = 0;
	int r, rc = SQLITE_DONE;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j,
			 "SELECT " TASK_COLUMNS " FROM tasks WHERE ?1 IS NULL OR status = ?1"
			 " ORDER BY id DESC LIMIT ?2 OFFSET ?3",
			 &st)) < 0)
		goto finish;
	if ((r = prepare(j, "SELECT count(*) FROM tasks WHERE ?1 IS NULL OR status = ?1", &count)) < 0)
		goto finish;
	if (status >= 0) {
		sqlite3_bind_text(st, 1, ipc_task_status_to_string(status), -1, SQLITE_STATIC);
		sqlite3_bind_text(count, 1, ipc_task_status_to_string(status), -1, SQLITE_STATIC);
	}
	sqlite3_bind_int64(st, 2, limit);
	sqlite3_bind_int64(st, 3, offset);
	/* limit is the API's, at most IPC_MAX_LIST_LIMIT rows. */
	rows = xcalloc(MAX(limit, 1u), sizeof(*rows));
	while (n < limit && (rc = sqlite3_step(st)) == SQLITE_ROW)
		task_row(st, &rows[n++]);
	if (n < limit && rc != SQLITE_DONE) {
		r = db_fail(j, rc, "task list");
		goto finish;
	}
	if ((rc = sqlite3_step(count)) != SQLITE_ROW) {
		r = db_fail(j, rc, "task count");
		goto finish;
	}
	*ret_total = sqlite3_column_int64(count, 0);
	*ret_rows = rows;
	*ret_n = n;
	rows = NULL;
	n = 0;
finish:
	sqlite3_finalize(st);
	sqlite3_finalize(count);
	pthread_mutex_unlock(&j->lock);
	journal_task_rows_free(rows, n);
	return r;
}

static void bind_opt_text(sqlite3_stmt *st, int idx, const char *v)
{
	if (v)
		sqlite3_bind_text(st, idx, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(st, idx);
}

static void bind_opt_int(sqlite3_stmt *st, int idx, bool present, int v)
{
	if (present)
		sqlite3_bind_int(st, idx, v);
	else
		sqlite3_bind_null(st, idx);
}

static void bind_opt_int64(sqlite3_stmt *st, int idx, bool present, long long v)
{
	if (present)
		sqlite3_bind_int64(st, idx, (sqlite3_int64)v);
	else
		sqlite3_bind_null(st, idx);
}

int journal_step_begin(struct journal *j, const struct journal_step *s)
{
	sqlite3_stmt *st;
	int r;
	bool model = s->coords == IPC_COORDS_MODEL;

	pthread_mutex_lock(&j->lock);
	/* The agent's columns are written in the same transaction as the row. */
	if (s->agent && (r = exec_locked(j, "BEGIN IMMEDIATE;")) < 0)
		goto unlock;
	if ((r = prepare(j,
			 "INSERT INTO steps (task_id, idx, tool_name, tool_call, coords,"
			 " model_x, model_y, model_x2, model_y2, mon_x, mon_y, mon_w, mon_h,"
			 " image_w, image_h, status, started_us)"
			 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15,"
			 " 'running', ?16)",
			 &st)) < 0)
		goto rollback;
	sqlite3_bind_int64(st, 1, s->task_id);
	sqlite3_bind_int(st, 2, s->index);
	sqlite3_bind_text(st, 3, s->tool_name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, s->tool_call, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, ipc_coords_to_string(s->coords), -1, SQLITE_STATIC);
	bind_opt_int(st, 6, model && s->has_point, s->model_x);
	bind_opt_int(st, 7, model && s->has_point, s->model_y);
	bind_opt_int(st, 8, model && s->has_point2, s->model_x2);
	bind_opt_int(st, 9, model && s->has_point2, s->model_y2);
	bind_opt_int(st, 10, s->has_monitor, s->monitor.x);
	bind_opt_int(st, 11, s->has_monitor, s->monitor.y);
	bind_opt_int(st, 12, s->has_monitor, s->monitor.width);
	bind_opt_int(st, 13, s->has_monitor, s->monitor.height);
	bind_opt_int(st, 14, s->image_w > 0, s->image_w);
	bind_opt_int(st, 15, s->image_h > 0, s->image_h);
	sqlite3_bind_int64(st, 16, (sqlite3_int64)s->started_us);
	if ((r = step_done(j, st)) < 0 || !s->agent)
		goto finalize;
	sqlite3_finalize(st);
	if ((r = prepare(j,
			 "UPDATE steps SET thought = ?3, note = ?4, raw_output = ?5,"
			 " attempts = ?6, tiles = ?7, prompt = ?8, tokens_appended = ?9,"
			 " tokens_decoded = ?10, session_tokens = ?11, preprocess_us = ?12,"
			 " encode_us = ?13, prefill_us = ?14, decode_us = ?15, prompt_text = ?16,"
			 " user_turn = ?17, prompt_sha256 = ?18, provider = ?19,"
			 " remote_model = ?20, prompt_tokens = ?21, completion_tokens = ?22,"
			 " server_us = ?23, reasoning = ?24, tokens_forced = ?25,"
			 " decode_forwards = ?26"
			 " WHERE task_id = ?1 AND idx = ?2",
			 &st)) < 0)
		goto rollback;
	const struct journal_agent_step *a = s->agent;
	sqlite3_bind_int64(st, 1, s->task_id);
	sqlite3_bind_int(st, 2, s->index);
	bind_opt_text(st, 3, a->thought);
	bind_opt_text(st, 4, a->note);
	bind_opt_text(st, 5, a->raw_output);
	sqlite3_bind_int(st, 6, a->attempts);
	sqlite3_bind_int(st, 7, a->tiles);
	bind_opt_text(st, 8, a->prompt);
	sqlite3_bind_int64(st, 9, a->tokens_appended);
	sqlite3_bind_int64(st, 10, a->tokens_decoded);
	sqlite3_bind_int64(st, 11, a->session_tokens);
	sqlite3_bind_int64(st, 12, (sqlite3_int64)a->preprocess_us);
	sqlite3_bind_int64(st, 13, (sqlite3_int64)a->encode_us);
	sqlite3_bind_int64(st, 14, (sqlite3_int64)a->prefill_us);
	sqlite3_bind_int64(st, 15, (sqlite3_int64)a->decode_us);
	bind_opt_text(st, 16, a->prompt_text);
	bind_opt_text(st, 17, a->user_turn);
	bind_opt_text(st, 18, a->prompt_sha256);
	bool remote = a->provider && strcmp(a->provider, "remote") == 0;
	bind_opt_text(st, 19, a->provider ? a->provider : "local");
	bind_opt_text(st, 20, a->remote_model);
	bind_opt_int64(st, 21, remote && a->prompt_tokens >= 0, a->prompt_tokens);
	bind_opt_int64(st, 22, remote && a->completion_tokens >= 0, a->completion_tokens);
	bind_opt_int64(st, 23, remote && a->server_us >= 0, a->server_us);
	bind_opt_text(st, 24, a->reasoning);
	bind_opt_int64(st, 25, !remote && a->tokens_forced >= 0, a->tokens_forced);
	bind_opt_int64(st, 26, !remote && a->decode_forwards >= 0, a->decode_forwards);
	r = step_done(j, st);
finalize:
	sqlite3_finalize(st);
	st = NULL;
	if (s->agent && r >= 0 && (r = exec_locked(j, "COMMIT;")) >= 0)
		goto unlock;
rollback:
	sqlite3_finalize(st);
	if (s->agent)
		exec_locked(j, "ROLLBACK;");
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_step_finish(struct journal *j, const struct journal_step *s, const char *status,
			const char *result, const char *error, uint64_t finished_us,
			const struct journal_step_timing *t)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j,
			 "UPDATE steps SET status = ?3, result = ?4, error = ?5,"
			 " finished_us = ?6, capture_us = ?7, map_us = ?8, inject_us = ?9,"
			 " settle_us = ?10, capture_after_us = ?11, px = ?12, py = ?13,"
			 " px2 = ?14, py2 = ?15, image_w = ?16, image_h = ?17, held = ?18,"
			 " sensitive = ?19"
			 " WHERE task_id = ?1 AND idx = ?2",
			 &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, s->task_id);
	sqlite3_bind_int(st, 2, s->index);
	sqlite3_bind_text(st, 3, status, -1, SQLITE_TRANSIENT);
	if (result)
		sqlite3_bind_text(st, 4, result, -1, SQLITE_TRANSIENT);
	if (error)
		sqlite3_bind_text(st, 5, error, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)finished_us);
	sqlite3_bind_int64(st, 7, (sqlite3_int64)t->capture_us);
	sqlite3_bind_int64(st, 8, (sqlite3_int64)t->map_us);
	sqlite3_bind_int64(st, 9, (sqlite3_int64)t->inject_us);
	sqlite3_bind_int64(st, 10, (sqlite3_int64)t->settle_us);
	sqlite3_bind_int64(st, 11, (sqlite3_int64)t->capture_after_us);
	bind_opt_int(st, 12, s->has_point, s->px);
	bind_opt_int(st, 13, s->has_point, s->py);
	bind_opt_int(st, 14, s->has_point2, s->px2);
	bind_opt_int(st, 15, s->has_point2, s->py2);
	bind_opt_int(st, 16, s->image_w > 0, s->image_w);
	bind_opt_int(st, 17, s->image_h > 0, s->image_h);
	if (s->held)
		sqlite3_bind_text(st, 18, s->held, -1, SQLITE_TRANSIENT);
	bind_opt_int(st, 19, s->sensitive, 1);
	r = step_update_one(j, st);
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

static void shot_row(sqlite3_stmt *st, int col, struct journal_shot *ret)
{
	*ret = (struct journal_shot){
		.path = col_str(st, col),
		.sha256 = col_str(st, col + 1),
		.bytes = col_i64(st, col + 2),
	};
}

/* The agent columns from `col` on; a script step has none (attempts is NULL). */
static void agent_row(sqlite3_stmt *st, int col, struct journal_step_row *row)
{
	row->is_agent = sqlite3_column_type(st, col + 3) != SQLITE_NULL;
	if (!row->is_agent) {
		row->attempts = row->tiles = row->tokens_appended = row->tokens_decoded =
			row->session_tokens = row->preprocess_us = row->encode_us = row->prefill_us =
				row->decode_us = row->prompt_tokens = row->completion_tokens =
					row->server_us = row->tokens_forced = row->decode_forwards =
						JOURNAL_NONE;
		return;
	}
	row->thought = col_str(st, col);
	row->note = col_str(st, col + 1);
	row->raw_output = col_str(st, col + 2);
	row->attempts = col_i64(st, col + 3);
	row->tiles = col_i64(st, col + 4);
	row->prompt = col_str(st, col + 5);
	row->tokens_appended = col_i64(st, col + 6);
	row->tokens_decoded = col_i64(st, col + 7);
	row->session_tokens = col_i64(st, col + 8);
	row->preprocess_us = col_i64(st, col + 9);
	row->encode_us = col_i64(st, col + 10);
	row->prefill_us = col_i64(st, col + 11);
	row->decode_us = col_i64(st, col + 12);
	row->prompt_text = col_str(st, col + 13);
	row->user_turn = col_str(st, col + 14);
	row->prompt_sha256 = col_str(st, col + 15);
	row->provider = col_str(st, col + 16);
	row->remote_model = col_str(st, col + 17);
	row->prompt_tokens = col_i64(st, col + 18);
	row->completion_tokens = col_i64(st, col + 19);
	row->server_us = col_i64(st, col + 20);
	row->reasoning = col_str(st, col + 21);
}

static void step_row(sqlite3_stmt *st, struct journal_step_row *row)
{
	*row = (struct journal_step_row){
		.index = sqlite3_column_int(st, 0),
		.tool_call = col_str(st, 1),
		.status = col_str(st, 2),
		.coords = col_str(st, 3),
		.model_x = col_i64(st, 4),
		.model_y = col_i64(st, 5),
		.model_x2 = col_i64(st, 6),
		.model_y2 = col_i64(st, 7),
		.px = col_i64(st, 8),
		.py = col_i64(st, 9),
		.px2 = col_i64(st, 10),
		.py2 = col_i64(st, 11),
		.has_monitor = sqlite3_column_type(st, 12) != SQLITE_NULL,
		.monitor = {sqlite3_column_int(st, 12), sqlite3_column_int(st, 13),
			    sqlite3_column_int(st, 14), sqlite3_column_int(st, 15)},
		.image_w = col_i64(st, 16),
		.image_h = col_i64(st, 17),
		.result = col_str(st, 18),
		.error = col_str(st, 19),
		.started_us = col_time_us(st, 20),
		.finished_us = col_time_us(st, 21),
		.capture_us = col_i64(st, 22),
		.map_us = col_i64(st, 23),
		.inject_us = col_i64(st, 24),
		.settle_us = col_i64(st, 25),
		.capture_after_us = col_i64(st, 26),
	};
	shot_row(st, 27, &row->before);
	shot_row(st, 30, &row->after);
	agent_row(st, 33, row);
	row->stuck = col_str(st, 55);
	row->held = col_str(st, 56);
	row->sensitive = col_i64(st, 57) > 0;
	if (row->is_agent) {
		row->tokens_forced = col_i64(st, 58);
		row->decode_forwards = col_i64(st, 59);
	}
}

static void step_row_finish(struct journal_step_row *row)
{
	free(row->tool_call);
	free(row->status);
	free(row->coords);
	free(row->result);
	free(row->error);
	free(row->before.path);
	free(row->before.sha256);
	free(row->after.path);
	free(row->after.sha256);
	free(row->thought);
	free(row->note);
	free(row->raw_output);
	free(row->reasoning);
	free(row->held);
	free(row->prompt);
	free(row->prompt_text);
	free(row->user_turn);
	free(row->prompt_sha256);
	free(row->provider);
	free(row->remote_model);
	free(row->stuck);
}

void journal_step_rows_free(struct journal_step_row *rows, size_t n)
{
	if (!rows)
		return;
	for (size_t i = 0; i < n; i++)
		step_row_finish(&rows[i]);
	free(rows);
}

int journal_steps_get(struct journal *j, int64_t task_id, int from_index, bool finished_only,
		      struct journal_step_row **ret_rows, size_t *ret_n)
{
	sqlite3_stmt *st;
	struct journal_step_row *rows = NULL;
	size_t n = 0, cap = 0;
	int r, rc;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j,
			 "SELECT s.idx, s.tool_call, s.status, s.coords,"
			 " s.model_x, s.model_y, s.model_x2, s.model_y2,"
			 " s.px, s.py, s.px2, s.py2, s.mon_x, s.mon_y, s.mon_w, s.mon_h,"
			 " s.image_w, s.image_h, s.result, s.error, s.started_us, s.finished_us,"
			 " s.capture_us, s.map_us, s.inject_us, s.settle_us, s.capture_after_us,"
			 " b.path, b.sha256, b.bytes, a.path, a.sha256, a.bytes,"
			 " s.thought, s.note, s.raw_output, s.attempts, s.tiles, s.prompt,"
			 " s.tokens_appended, s.tokens_decoded, s.session_tokens,"
			 " s.preprocess_us, s.encode_us, s.prefill_us, s.decode_us, s.prompt_text,"
			 " s.user_turn, s.prompt_sha256, s.provider, s.remote_model,"
			 " s.prompt_tokens, s.completion_tokens, s.server_us, s.reasoning,"
			 " s.stuck,"
			 " s.held, s.sensitive, s.tokens_forced, s.decode_forwards"
			 " FROM steps s"
			 " LEFT JOIN screenshots b ON b.task_id = s.task_id AND b.idx = s.idx"
			 "   AND b.which = 'before'"
			 " LEFT JOIN screenshots a ON a.task_id = s.task_id AND a.idx = s.idx"
			 "   AND a.which = 'after'"
			 " WHERE s.task_id = ?1 AND s.idx >= ?2"
			 "   AND (?3 = 0 OR s.status != 'running')"
			 " ORDER BY s.idx",
			 &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, task_id);
	sqlite3_bind_int(st, 2, from_index);
	sqlite3_bind_int(st, 3, finished_only);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		if (n == cap) {
			cap = MAX(cap * 2, (size_t)16);
			rows = xreallocarray(rows, cap, sizeof(*rows));
		}
		step_row(st, &rows[n++]);
	}
	if (rc != SQLITE_DONE)
		r = db_fail(j, rc, "steps");
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	if (r < 0) {
		journal_step_rows_free(rows, n);
		return r;
	}
	*ret_rows = rows;
	*ret_n = n;
	return 0;
}

/* Files of the rows being pruned: unlinked after the commit (a file without a row is allowed, a
 * row without its file is not). */
struct prune_files {
	char **paths;
	size_t n;
};

static void prune_unlink(const char *state_dir, struct prune_files *pf, uint64_t *bytes)
{
	for (size_t i = 0; i < pf->n; i++) {
		char *file = path_join(state_dir, pf->paths[i]);
		struct stat st;
		if (stat(file, &st) == 0 && unlink(file) == 0)
			*bytes += (uint64_t)st.st_size;
		else if (errno != ENOENT)
			log_warning_errno(-errno, "prune: cannot remove %s", file);
		/* screenshots/<task>/ goes once it is empty (ENOTEMPTY otherwise: kept) */
		char *slash = strrchr(file, '/');
		if (slash) {
			*slash = '\0';
			rmdir(file);
		}
		free(file);
		free(pf->paths[i]);
	}
	free(pf->paths);
}

int journal_prune(struct journal *j, const char *state_dir, uint64_t before_us, int *ret_tasks,
		  uint64_t *ret_bytes)
{
	static const char *const where =
		" FROM tasks WHERE status NOT IN ('queued', 'running') AND finished_us < ?1";
	struct prune_files pf = {0};
	sqlite3_stmt *st = NULL;
	int r, rc, tasks = 0;
	uint64_t bytes = 0;
	char *sql;

	pthread_mutex_lock(&j->lock);
	if ((r = exec_locked(j, "BEGIN IMMEDIATE;")) < 0)
		goto unlock;
	sql = xasprintf("SELECT path FROM screenshots WHERE task_id IN (SELECT id%s)", where);
	r = prepare(j, sql, &st);
	free(sql);
	if (r < 0)
		goto rollback;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)before_us);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		pf.paths = xreallocarray(pf.paths, pf.n + 1, sizeof(*pf.paths));
		pf.paths[pf.n++] = xstrdup((const char *)sqlite3_column_text(st, 0));
	}
	if (rc != SQLITE_DONE) {
		r = db_fail(j, rc, "prune select");
		goto rollback;
	}
	sqlite3_finalize(st);
	/* Steps and screenshots go with their task (ON DELETE CASCADE). */
	sql = xasprintf("DELETE%s", where);
	r = prepare(j, sql, &st);
	free(sql);
	if (r < 0)
		goto rollback;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)before_us);
	if ((r = step_done(j, st)) < 0)
		goto rollback;
	tasks = sqlite3_changes(j->db);
	sqlite3_finalize(st);
	st = NULL;
	if ((r = exec_locked(j, "COMMIT;")) < 0)
		goto rollback;
	pthread_mutex_unlock(&j->lock);
	prune_unlink(state_dir, &pf, &bytes);
	*ret_tasks = tasks;
	*ret_bytes = bytes;
	return 0;
rollback:
	sqlite3_finalize(st);
	exec_locked(j, "ROLLBACK;");
unlock:
	pthread_mutex_unlock(&j->lock);
	for (size_t i = 0; i < pf.n; i++)
		free(pf.paths[i]);
	free(pf.paths);
	return r;
}

int journal_prune_preview(struct journal *j, uint64_t before_us, size_t max,
			  struct journal_prune_task **ret_tasks, size_t *ret_n, int *ret_count,
			  uint64_t *ret_bytes)
{
	/* journal_prune's criterion, read in one transaction so the figures agree. */
	static const char *const where =
		" FROM tasks WHERE status NOT IN ('queued', 'running') AND finished_us < ?1";
	struct journal_prune_task *tasks = NULL;
	sqlite3_stmt *st = NULL;
	size_t n = 0;
	int r, rc, count = 0;
	uint64_t bytes = 0;
	char *sql;

	pthread_mutex_lock(&j->lock);
	if ((r = exec_locked(j, "BEGIN;")) < 0)
		goto unlock;
	sql = xasprintf("SELECT count(*), (SELECT coalesce(sum(bytes), 0) FROM screenshots"
			" WHERE task_id IN (SELECT id%s))%s",
			where, where);
	r = prepare(j, sql, &st);
	free(sql);
	if (r < 0)
		goto rollback;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)before_us);
	if ((rc = sqlite3_step(st)) != SQLITE_ROW) {
		r = db_fail(j, rc, "prune preview count");
		goto rollback;
	}
	count = sqlite3_column_int(st, 0);
	bytes = (uint64_t)sqlite3_column_int64(st, 1);
	sqlite3_finalize(st);
	sql = xasprintf("SELECT id, status, finished_us%s ORDER BY id DESC LIMIT ?2", where);
	r = prepare(j, sql, &st);
	free(sql);
	if (r < 0)
		goto rollback;
	sqlite3_bind_int64(st, 1, (sqlite3_int64)before_us);
	sqlite3_bind_int64(st, 2, (sqlite3_int64)max);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		tasks = xreallocarray(tasks, n + 1, sizeof(*tasks));
		tasks[n].id = sqlite3_column_int64(st, 0);
		snprintf(tasks[n].status, sizeof(tasks[n].status), "%s",
			 (const char *)sqlite3_column_text(st, 1));
		tasks[n].finished_us = (uint64_t)sqlite3_column_int64(st, 2);
		n++;
	}
	if (rc != SQLITE_DONE) {
		r = db_fail(j, rc, "prune preview list");
		goto rollback;
	}
	sqlite3_finalize(st);
	exec_locked(j, "COMMIT;");
	pthread_mutex_unlock(&j->lock);
	*ret_tasks = tasks;
	*ret_n = n;
	*ret_count = count;
	*ret_bytes = bytes;
	return 0;
rollback:
	sqlite3_finalize(st);
	exec_locked(j, "ROLLBACK;");
unlock:
	pthread_mutex_unlock(&j->lock);
	free(tasks);
	return r;
}

int journal_screenshot_insert(struct journal *j, int64_t task_id, int index, const char *which,
			      const char *relpath, const char *sha256_hex, uint64_t bytes, int width,
			      int height, uint64_t encode_us, uint64_t write_us)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j,
			 "INSERT OR REPLACE INTO screenshots (task_id, idx, which, path, sha256,"
			 " bytes, width, height, encode_us, write_us)"
			 " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
			 &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, task_id);
	sqlite3_bind_int(st, 2, index);
	sqlite3_bind_text(st, 3, which, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 4, relpath, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(st, 5, sha256_hex, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(st, 6, (sqlite3_int64)bytes);
	sqlite3_bind_int(st, 7, width);
	sqlite3_bind_int(st, 8, height);
	sqlite3_bind_int64(st, 9, (sqlite3_int64)encode_us);
	sqlite3_bind_int64(st, 10, (sqlite3_int64)write_us);
	r = step_done(j, st);
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}

int journal_screenshot_get(struct journal *j, int64_t task_id, int index, const char *which,
			   char **ret_relpath, char **ret_sha256)
{
	sqlite3_stmt *st;
	int r;

	pthread_mutex_lock(&j->lock);
	if ((r = prepare(j,
			 "SELECT path, sha256 FROM screenshots"
			 " WHERE task_id = ?1 AND idx = ?2 AND which = ?3",
			 &st)) < 0)
		goto unlock;
	sqlite3_bind_int64(st, 1, task_id);
	sqlite3_bind_int(st, 2, index);
	sqlite3_bind_text(st, 3, which, -1, SQLITE_TRANSIENT);
	int rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*ret_relpath = xstrdup((const char *)sqlite3_column_text(st, 0));
		if (ret_sha256)
			*ret_sha256 = xstrdup((const char *)sqlite3_column_text(st, 1));
	} else {
		r = rc == SQLITE_DONE ? -ENOENT : db_fail(j, rc, "screenshot get");
	}
	sqlite3_finalize(st);
unlock:
	pthread_mutex_unlock(&j->lock);
	return r;
}
