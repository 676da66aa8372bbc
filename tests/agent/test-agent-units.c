/* Unit tests of the agent's daemon pieces (no display):
 *   - the model worker: no model (jobs refused -ENODEV), a failed load (the error sentence, jobs
 *     refused), a loaded model (status figures), jobs from many threads at once run one at a time
 *     on the model worker, in a queue that never holds more than MODEL_WORKER_QUEUE_MAX;
 *   - the journal: a database of schema 1 (a holod before the agent) is migrated to 2, keeps its
 *     rows, and agent steps round-trip through journal_steps_get (rendered by api-json).
 * $AGENT_MODEL: the tiny-agent model directory. */
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "model-worker.h"
#include "api-json.h"
#include "journal.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static int job_count(struct worker_ctx *ctx, void *arg)
{
	return ctx->model && ctx->masker ? 7 : -EINVAL;
}

static void test_no_model(void)
{
	struct model_worker *et = model_worker_create(NULL, NULL);
	REQUIRE(et);
	CHECK_INT_EQ(model_worker_state(et), MODEL_WORKER_NONE);
	CHECK_INT_EQ(model_worker_call(et, job_count, NULL), -ENODEV);
	CHECK(model_worker_tokenizer(et) == NULL);
	json_t *st = model_worker_status(et);
	CHECK(json_is_null(st));
	json_decref(st);
	model_worker_destroy(et);
}

static void test_failed_load(void)
{
	char dir[] = "/tmp/test-agent-units-XXXXXX";
	REQUIRE(mkdtemp(dir));
	struct model_worker *et = model_worker_create(dir, NULL);
	REQUIRE(et);
	CHECK_INT_EQ(model_worker_wait_loaded(et), MODEL_WORKER_FAILED);
	const char *err = model_worker_error(et);
	REQUIRE(err);
	CHECK(strstr(err, "cannot load the model") && strstr(err, dir));
	CHECK_INT_EQ(model_worker_call(et, job_count, NULL), -ENODEV);
	json_t *st = model_worker_status(et);
	CHECK_STR_EQ(json_string_value(json_object_get(st, "state")), "failed");
	CHECK_STR_EQ(json_string_value(json_object_get(st, "error")), err);
	CHECK(json_object_get(st, "parameters") == NULL);
	json_decref(st);
	model_worker_destroy(et);
	rmdir(dir);
}

/* Jobs submitted from many threads: each checks that it runs alone and on the model worker. */
#define N_SUBMITTERS 12
#define JOBS_EACH 20

static atomic_int inside, overlaps, done_jobs;
static pthread_t engine_tid;
static atomic_bool tid_set, wrong_thread;

static int job_alone(struct worker_ctx *ctx, void *arg)
{
	if (!atomic_exchange(&tid_set, true))
		engine_tid = pthread_self();
	else if (!pthread_equal(engine_tid, pthread_self()))
		atomic_store(&wrong_thread, true);
	if (atomic_fetch_add(&inside, 1) != 0)
		atomic_fetch_add(&overlaps, 1);
	time_sleep_us(200);
	atomic_fetch_sub(&inside, 1);
	atomic_fetch_add(&done_jobs, 1);
	return *(int *)arg;
}

static void *submitter(void *arg)
{
	struct model_worker *et = arg;
	for (int i = 0; i < JOBS_EACH; i++) {
		int v = i;
		if (model_worker_call(et, job_alone, &v) != i)
			return (void *)1;
	}
	return NULL;
}

static void test_loaded(const char *model)
{
	/* the CPU's figures below: on the CPU whatever device the machine has (AUTO would take a
	 * GPU where one is present) */
	struct model_worker *et =
		model_worker_create(model, &(struct engine_backend_options){.kind = ENGINE_BACKEND_CPU});
	REQUIRE(et);
	REQUIRE(model_worker_wait_loaded(et) == MODEL_WORKER_READY);
	CHECK(model_worker_error(et) == NULL);
	CHECK(model_worker_tokenizer(et) != NULL);
	CHECK(model_worker_grammar(et) != NULL);
	CHECK_INT_EQ(model_worker_tokens_per_tile(et), 4);
	CHECK_INT_EQ(model_worker_call(et, job_count, NULL), 7);

	json_t *st = model_worker_status(et);
	CHECK_STR_EQ(json_string_value(json_object_get(st, "state")), "ready");
	CHECK_STR_EQ(json_string_value(json_object_get(st, "name")), "tiny-agent");
	CHECK_STR_EQ(json_string_value(json_object_get(st, "backend")), "cpu");
	/* the backend's own figures: the CPU holds the map as it is, and runs this bf16
	 * checkpoint in bf16 by default (fp32 on the portable kernels: what
	 * engine_model_cpu_precision() says) */
	char err[256];
	struct engine_model *m = engine_model_load(model, err, sizeof(err));
	REQUIRE(m);
	CHECK_STR_EQ(json_string_value(json_object_get(st, "precision")),
		     engine_precision_name(engine_model_cpu_precision(m)));
	engine_model_destroy(m);
	CHECK_STR_EQ(json_string_value(json_object_get(st, "ssm_state")), "fp32");
	CHECK(strstr(json_string_value(json_object_get(st, "device")), "kernels") != NULL);
	CHECK_INT_EQ(json_integer_value(json_object_get(st, "device_weight_bytes")),
		     json_integer_value(json_object_get(st, "weight_bytes")));
	CHECK_INT_EQ(json_integer_value(json_object_get(st, "device_state_bytes")), 0);
	CHECK(json_integer_value(json_object_get(st, "device_memory_total")) > 0);
	CHECK(json_integer_value(json_object_get(st, "parameters")) > 100000);
	CHECK_INT_EQ(json_integer_value(json_object_get(st, "vocab")), 1280);
	CHECK(json_is_true(json_object_get(st, "vision")));
	json_decref(st);

	pthread_t th[N_SUBMITTERS];
	for (int i = 0; i < N_SUBMITTERS; i++)
		REQUIRE(pthread_create(&th[i], NULL, submitter, et) == 0);
	for (int i = 0; i < N_SUBMITTERS; i++) {
		void *ret;
		pthread_join(th[i], &ret);
		CHECK(ret == NULL);
	}
	CHECK_INT_EQ(atomic_load(&done_jobs), N_SUBMITTERS * JOBS_EACH);
	CHECK_INT_EQ(atomic_load(&overlaps), 0);
	CHECK(!atomic_load(&wrong_thread));
	CHECK(!pthread_equal(engine_tid, pthread_self()));

	model_worker_account(et, 1, 1000);
	st = model_worker_status(et);
	CHECK_INT_EQ(json_integer_value(json_object_get(st, "sessions")), 1);
	CHECK_INT_EQ(json_integer_value(json_object_get(st, "state_bytes")), 1000);
	json_decref(st);
	model_worker_account(et, -1, -1000);
	model_worker_destroy(et);
}

/* The schema of a holod from before the agent (migration 0 -> 1 as shipped). */
static const char schema_v1[] =
	"CREATE TABLE tasks (id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" kind TEXT NOT NULL CHECK (kind IN ('instruction', 'script')), spec TEXT NOT NULL,"
	" status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'succeeded', 'failed',"
	" 'cancelled', 'interrupted')), display TEXT, created_us INTEGER NOT NULL,"
	" started_us INTEGER, finished_us INTEGER, result TEXT, error TEXT);"
	"CREATE INDEX tasks_by_status ON tasks (status, id);"
	"CREATE TABLE steps (task_id INTEGER NOT NULL REFERENCES tasks (id) ON DELETE CASCADE,"
	" idx INTEGER NOT NULL CHECK (idx >= 0), tool_name TEXT NOT NULL, tool_call TEXT NOT NULL,"
	" coords TEXT NOT NULL CHECK (coords IN ('pixels', 'model')),"
	" model_x INTEGER, model_y INTEGER, model_x2 INTEGER, model_y2 INTEGER,"
	" px INTEGER, py INTEGER, px2 INTEGER, py2 INTEGER,"
	" mon_x INTEGER, mon_y INTEGER, mon_w INTEGER, mon_h INTEGER,"
	" image_w INTEGER, image_h INTEGER,"
	" status TEXT NOT NULL CHECK (status IN ('running', 'ok', 'error', 'dry_run',"
	" 'interrupted')), result TEXT, error TEXT, started_us INTEGER NOT NULL,"
	" finished_us INTEGER, capture_us INTEGER, map_us INTEGER, inject_us INTEGER,"
	" settle_us INTEGER, capture_after_us INTEGER, PRIMARY KEY (task_id, idx)) WITHOUT ROWID;"
	"CREATE TABLE screenshots (task_id INTEGER NOT NULL, idx INTEGER NOT NULL,"
	" which TEXT NOT NULL CHECK (which IN ('before', 'after')), path TEXT NOT NULL,"
	" sha256 TEXT NOT NULL CHECK (length(sha256) = 64), bytes INTEGER NOT NULL,"
	" width INTEGER NOT NULL, height INTEGER NOT NULL, encode_us INTEGER, write_us INTEGER,"
	" PRIMARY KEY (task_id, idx, which), FOREIGN KEY (task_id, idx) REFERENCES steps"
	" (task_id, idx) ON DELETE CASCADE) WITHOUT ROWID;"
	"INSERT INTO tasks (kind, spec, status, created_us) VALUES ('script', '{}', 'succeeded', 1);"
	"INSERT INTO steps (task_id, idx, tool_name, tool_call, coords, status, started_us, result)"
	" VALUES (1, 0, 'move', '{\"tool_name\":\"move\",\"x\":1,\"y\":2}', 'pixels', 'ok', 1,"
	" 'moved to (1,2)');"
	"PRAGMA user_version = 1;";

static void test_journal_migration(void)
{
	char dir[] = "/tmp/test-agent-units-XXXXXX";
	REQUIRE(mkdtemp(dir));
	char *path = path_join(dir, "v1.db");
	sqlite3 *db;
	REQUIRE(sqlite3_open(path, &db) == SQLITE_OK);
	REQUIRE(sqlite3_exec(db, schema_v1, NULL, NULL, NULL) == SQLITE_OK);
	sqlite3_close(db);

	struct journal *j = journal_open(path);
	REQUIRE(j);
	CHECK_INT_EQ(journal_schema_version(j), JOURNAL_SCHEMA_VERSION);
	CHECK_INT_EQ(journal_integrity_check(j), 0);
	json_t *steps = NULL;
	REQUIRE(api_json_read_steps(j, 1, 0, false, &steps) == 0);
	json_t *s0 = json_array_get(steps, 0);
	CHECK_STR_EQ(json_string_value(json_object_get(s0, "result")), "moved to (1,2)");
	CHECK(json_is_null(json_object_get(s0, "agent")));
	json_decref(steps);

	/* An agent step, written and read back. */
	int64_t id;
	REQUIRE(journal_task_insert(j, IPC_TASK_KIND_INSTRUCTION, "{\"instruction\":\"x\"}", NULL, 2, &id) ==
		0);
	struct journal_agent_step as =
		{.thought = "press OK",
		 .note = NULL,
		 .raw_output = "{...}",
		 .prompt_text = "<p>",
		 .reasoning = "The dialog asks; OK closes it.",
		 .user_turn = "<observation><image></observation>",
		 .prompt_sha256 = "0c2d7bc39e6ad4f8c4c1a8c7a4b7dbbb7e84b4a25c8bbf8dfa4a4a1f2b0e3c11",
		 .attempts = 2,
		 .tiles = 3,
		 .prompt = "window",
		 .tokens_appended = 99,
		 .tokens_decoded = 84,
		 .session_tokens = 2320,
		 .preprocess_us = 10,
		 .encode_us = 11,
		 .prefill_us = 12,
		 .decode_us = 13,
		 .tokens_forced = 40,
		 .decode_forwards = 44};
	struct journal_step s = {.task_id = id,
				 .index = 0,
				 .tool_call = "{\"tool_name\":\"wait\"}",
				 .tool_name = "wait",
				 .coords = IPC_COORDS_MODEL,
				 .started_us = 3,
				 .agent = &as};
	struct journal_step_timing tm = {.inject_us = 5};
	REQUIRE(journal_step_begin(j, &s) == 0);
	REQUIRE(journal_step_finish(j, &s, "ok", "waited 1 s", NULL, 4, &tm) == 0);
	REQUIRE(api_json_read_steps(j, id, 0, true, &steps) == 0);
	json_t *a = json_object_get(json_array_get(steps, 0), "agent");
	CHECK_STR_EQ(json_string_value(json_object_get(a, "thought")), "press OK");
	CHECK(json_is_null(json_object_get(a, "note")));
	CHECK_STR_EQ(json_string_value(json_object_get(a, "raw_output")), "{...}");
	CHECK_STR_EQ(json_string_value(json_object_get(a, "reasoning")),
		     "The dialog asks; OK closes it."); /* version 7 */
	CHECK_STR_EQ(json_string_value(json_object_get(a, "prompt_text")), "<p>");
	CHECK_STR_EQ(json_string_value(json_object_get(a, "prompt")), "window");
	CHECK_STR_EQ(json_string_value(json_object_get(a, "user_turn")),
		     "<observation><image></observation>");
	CHECK_STR_EQ(json_string_value(json_object_get(json_object_get(a, "tokens"), "appended_sha256")),
		     as.prompt_sha256);
	CHECK_INT_EQ(json_integer_value(json_object_get(a, "attempts")), 2);
	CHECK_INT_EQ(json_integer_value(json_object_get(a, "tiles")), 3);
	json_t *tok = json_object_get(a, "tokens");
	CHECK_INT_EQ(json_integer_value(json_object_get(tok, "appended")), 99);
	CHECK_INT_EQ(json_integer_value(json_object_get(tok, "decoded")), 84);
	CHECK_INT_EQ(json_integer_value(json_object_get(tok, "session")), 2320);
	/* jump-forward's counts (version 11) */
	CHECK_INT_EQ(json_integer_value(json_object_get(tok, "forced")), 40);
	CHECK_INT_EQ(json_integer_value(json_object_get(tok, "forwards")), 44);
	json_t *t = json_object_get(json_array_get(steps, 0), "timings_us");
	CHECK_INT_EQ(json_integer_value(json_object_get(t, "prefill")), 12);
	CHECK_INT_EQ(json_integer_value(json_object_get(t, "decode")), 13);
	CHECK_INT_EQ(json_integer_value(json_object_get(t, "inject")), 5);
	json_decref(steps);
	/* The task's prompt (version 4), as the chat export reads it. */
	json_t *task = NULL;
	REQUIRE(api_json_read_task(j, id, &task) == 0);
	CHECK(json_is_null(json_object_get(task, "prompt")));
	json_decref(task);
	REQUIRE(journal_task_prompt(j, id, "{\"tokens\":7}") == 0);
	REQUIRE(api_json_read_task(j, id, &task) == 0);
	CHECK_INT_EQ(json_integer_value(json_object_get(json_object_get(task, "prompt"), "tokens")), 7);
	json_decref(task);
	CHECK_INT_EQ(journal_task_prompt(j, id + 100, "{}"), -ENOENT);

	/* A rolling step (version 6) is written like the others... */
	as.prompt = "rolling";
	as.reasoning = NULL; /* thinking off */
	s.index = 1;
	REQUIRE(journal_step_begin(j, &s) == 0);
	REQUIRE(journal_step_finish(j, &s, "ok", "waited 1 s", NULL, 4, &tm) == 0);
	REQUIRE(api_json_read_steps(j, id, 0, true, &steps) == 0);
	CHECK_STR_EQ(json_string_value(
			     json_object_get(json_object_get(json_array_get(steps, 1), "agent"), "prompt")),
		     "rolling");
	CHECK(json_is_null(json_object_get(json_object_get(json_array_get(steps, 1), "agent"), "reasoning")));
	json_decref(steps);
	/* A remote server's step journals no forced tokens or forwards: null, not 0. */
	as.provider = "remote";
	s.index = 2;
	REQUIRE(journal_step_begin(j, &s) == 0);
	REQUIRE(journal_step_finish(j, &s, "ok", "waited 1 s", NULL, 4, &tm) == 0);
	REQUIRE(api_json_read_steps(j, id, 2, true, &steps) == 0);
	tok = json_object_get(json_object_get(json_array_get(steps, 0), "agent"), "tokens");
	CHECK(json_is_null(json_object_get(tok, "forced")));
	CHECK(json_is_null(json_object_get(tok, "forwards")));
	CHECK_INT_EQ(json_integer_value(json_object_get(tok, "decoded")), 84);
	json_decref(steps);
	as.provider = NULL;
	CHECK_INT_EQ(journal_integrity_check(j), 0);
	/* ... a prompt mode outside the schema is refused by the database itself... */
	as.prompt = "sliding";
	s.index = 3;
	CHECK(journal_step_begin(j, &s) < 0);
	/* ... and leaves no half-written row behind. */
	REQUIRE(api_json_read_steps(j, id, 0, false, &steps) == 0);
	CHECK_INT_EQ(json_array_size(steps), 3);
	json_decref(steps);
	journal_close(j);

	unlink(path);
	char *wal = xasprintf("%s-wal", path), *shm = xasprintf("%s-shm", path);
	unlink(wal);
	unlink(shm);
	free(wal);
	free(shm);
	free(path);
	rmdir(dir);
}

int main(void)
{
	const char *model = getenv("AGENT_MODEL");
	if (!model)
		return TEST_SKIP;
	test_no_model();
	test_failed_load();
	test_loaded(model);
	test_journal_migration();
	return test_exit();
}
