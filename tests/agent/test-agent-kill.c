/* The kill switch stops an agent task within a fraction of a second, even in the middle of a
 * long decode.
 *
 * The kill switch itself (XInput2 raw events, double Escape, injected XTest keys ignored) is
 * tested by the x11 suite; XTest keys can never trigger it, so this test enters where the kill
 * switch's callback does: scheduler_kill_switch(), the function its thread calls. Everything
 * after that is the daemon's own path: the executor's stop flag, the model worker's decode loop
 * polling it between tokens, the task becoming 'cancelled' with the kill-switch error, held
 * keys and buttons released by the executor.
 *
 * Setup: a private Xvfb, the recording client, the scheduler with the journal, the screenshot
 * writer and the model worker on the tiny-agent model, decoding without the grammar so that the
 * model writes '"' for --step-tokens tokens (seconds): the kill lands inside that decode.
 *
 * usage: test-agent-kill HOLO_TEST_CLIENT   ($AGENT_MODEL: the model directory) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "model-worker.h"
#include "provider.h"
#include "api-json.h"
#include "journal.h"
#include "scheduler.h"
#include "shotwriter.h"
#include "test.h"
#include "x11-test-util.h"

TEST_DEFINE_GLOBALS;

#define KILL_LATENCY_MAX_US 500000 /* "a fraction of a second" */
#define DEADLINE_US (60 * 1000000ull)

static bool wait_sessions(struct model_worker *et, long long want)
{
	uint64_t end = time_mono_us() + DEADLINE_US;
	while (time_mono_us() < end) {
		json_t *st = model_worker_status(et);
		long long n = json_integer_value(json_object_get(st, "sessions"));
		long long bytes = json_integer_value(json_object_get(st, "state_bytes"));
		json_decref(st);
		if (n == want && (want == 0 || bytes > 0))
			return true;
		time_sleep_us(5000);
	}
	return false;
}

int main(int argc, char **argv)
{
	struct xt_xvfb xvfb;
	const char *model = getenv("AGENT_MODEL");
	const char *log_path;
	char *db;
	int64_t id;
	enum ipc_task_status status;

	if (argc < 2 || !model) {
		fprintf(stderr, "usage: test-agent-kill HOLO_TEST_CLIENT (with $AGENT_MODEL)\n");
		return 2;
	}
	if (xt_xvfb_start(&xvfb, "640x400x24", NULL) < 0)
		return 1;
	pid_t client = xt_client_start(argv[1], "kill", "640x400+0+0", &log_path);
	REQUIRE(client > 0);

	db = path_join(xt_tmpdir(), "holod.db");
	struct journal *j = journal_open(db);
	REQUIRE(j);
	struct shotwriter *w = shotwriter_create(xt_tmpdir(), j, NULL, NULL);
	REQUIRE(w);
	struct model_worker *et = model_worker_create(model, NULL);
	REQUIRE(et);
	REQUIRE(model_worker_wait_loaded(et) == MODEL_WORKER_READY);
	struct provider *prov = provider_local_create(et);
	REQUIRE(prov);
	struct scheduler_config sc = {
		.displays = (const char *const[]){xvfb.display},
		.n_displays = 1,
		.settle_ms = 0,
		.max_steps = 100,
		.max_seconds = 600,
		.kill_switch_ms = 0, /* the XInput2 listener is not needed: we call what it calls */
		.agent = {.provider = prov,
			  .worker = et,
			  .history = IPC_HISTORY_PERSISTENT,
			  .window = 3,
			  .context_tokens = 32768,
			  .step_tokens = 20000,
			  .step_retries = 0,
			  .unconstrained = true},
	};
	struct scheduler *s = scheduler_create(&sc, j, w);
	REQUIRE(s);

	static const char body[] = "{\"instruction\": \"Click the red block.\"}";
	struct ipc_task_request *req;
	char err[256];
	REQUIRE(ipc_task_request_parse(body, strlen(body), &req, err, sizeof(err)) == 0);
	REQUIRE(scheduler_submit(s, req, &id) == 0);

	/* The session exists once the prompt prefix is prefilled; the first step's decode (20000
	 * tokens, seconds even without sanitizers) follows its short observation prefill. */
	REQUIRE(wait_sessions(et, 1));
	time_sleep_us(200000);
	REQUIRE(journal_task_status(j, id, &status) == 0);
	CHECK_INT_EQ(status, IPC_TASK_RUNNING);

	uint64_t t0 = time_mono_us();
	scheduler_kill_switch(s, 0);
	while (journal_task_status(j, id, &status) == 0 && !ipc_task_status_is_final(status) &&
	       time_mono_us() - t0 < DEADLINE_US)
		time_sleep_us(1000);
	uint64_t latency = time_mono_us() - t0;
	fprintf(stderr, "kill switch -> task final in %.1f ms\n", latency / 1000.0);
	CHECK_INT_EQ(status, IPC_TASK_CANCELLED);
	CHECK(latency < test_time_limit_us(KILL_LATENCY_MAX_US));

	json_t *task = NULL;
	REQUIRE(api_json_read_task(j, id, &task) == 0);
	CHECK_STR_EQ(json_string_value(json_object_get(task, "error")), EXECUTOR_KILL_SWITCH_ERROR);
	CHECK_INT_EQ(json_integer_value(json_object_get(task, "steps")), 0);
	json_decref(task);
	/* The session is gone with the task. */
	CHECK(wait_sessions(et, 0));

	char *log = xt_read_file(log_path);
	REQUIRE(log);
	CHECK_INT_EQ(xt_count_lines(log, "press "), 0);
	free(log);

	scheduler_destroy(s);
	provider_destroy(prov);
	model_worker_destroy(et);
	shotwriter_destroy(w);
	journal_close(j);
	free(db);
	xt_kill(client);
	xt_xvfb_stop(&xvfb);
	return test_exit();
}
