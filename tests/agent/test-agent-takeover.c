/* Takeover (issue 32): input of a person on the display pauses the running task at once, or
 * cancels it, or is ignored, as the task's "takeover" says; resumed, the model's next
 * observation says that the user took over.
 *
 * The listener that tells a person's input from XTest's is tested by the x11 suite (XTest
 * input never reaches its callback; trusted for the test, it does); Xvfb has no other device,
 * so, as test-agent-kill.c does for the kill switch, this test enters where the listener's
 * callback does: scheduler_takeover(). It waits for the task's first decode event (feed.h) so
 * that the takeover lands in step 0: its decode stops there (nothing journaled; resumed, step 0
 * is decided anew from a new screenshot, which the model sees first, so there is nothing to
 * tell it), or, should the decode have ended first, the task holds with one step journaled and
 * the model's next user turn tells it.
 *
 * usage: test-agent-takeover HOLO_TEST_CLIENT   ($AGENT_MODEL: the model directory) */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "api-json.h"
#include "common.h"
#include "feed.h"
#include "journal.h"
#include "model-worker.h"
#include "provider.h"
#include "scheduler.h"
#include "shotwriter.h"
#include "test.h"
#include "x11-test-util.h"

TEST_DEFINE_GLOBALS;

#define DEADLINE_US (120 * 1000000ull)

static int64_t submit(struct scheduler *s, const char *takeover)
{
	char *body = xasprintf("{\"instruction\": \"Click the red block.\", \"max_steps\": 2, "
			       "\"dry_run\": true, \"takeover\": \"%s\"}",
			       takeover);
	struct ipc_task_request *req;
	char err[256];
	int64_t id = 0;
	REQUIRE(ipc_task_request_parse(body, strlen(body), &req, err, sizeof(err)) == 0);
	REQUIRE(scheduler_submit(s, req, &id) == 0);
	free(body);
	return id;
}

/* Waits for the task's first decode event: step 0 is being decoded. */
static void wait_decode(struct feed_sub *sub)
{
	char *buf = NULL;
	size_t len = 0;
	uint64_t end = time_mono_us() + DEADLINE_US;
	while (time_mono_us() < end) {
		feed_take(sub, &buf, &len);
		if (buf && strstr(buf, "\"phase\":\"decode\""))
			break;
		time_sleep_us(1000);
	}
	CHECK(buf && strstr(buf, "\"step\":0,\"phase\":\"decode\""));
	free(buf);
}

static enum ipc_task_status wait_final(struct journal *j, int64_t id)
{
	enum ipc_task_status st = IPC_TASK_RUNNING;
	uint64_t end = time_mono_us() + DEADLINE_US;
	while (journal_task_status(j, id, &st) == 0 && !ipc_task_status_is_final(st) && time_mono_us() < end)
		time_sleep_us(5000);
	return st;
}

int main(int argc, char **argv)
{
	struct xt_xvfb xvfb;
	const char *model = getenv("AGENT_MODEL");
	const char *log_path;

	if (argc < 2 || !model) {
		fprintf(stderr, "usage: test-agent-takeover HOLO_TEST_CLIENT (with $AGENT_MODEL)\n");
		return 2;
	}
	if (xt_xvfb_start(&xvfb, "640x400x24", NULL) < 0)
		return 1;
	pid_t client = xt_client_start(argv[1], "takeover", "640x400+0+0", &log_path);
	REQUIRE(client > 0);
	char *db = path_join(xt_tmpdir(), "holod.db");
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
		.max_steps = 100,
		.max_seconds = 600,
		.takeover = IPC_TAKEOVER_CANCEL, /* each task below sets its own */
		.agent = {.provider = prov,
			  .worker = et,
			  .history = IPC_HISTORY_ROLLING,
			  .window = 3,
			  .context_tokens = 32768,
			  .step_tokens = 256,
			  .step_retries = 0},
	};
	struct scheduler *s = scheduler_create(&sc, j, w);
	REQUIRE(s);
	struct feed *f = scheduler_feed(s);

	/* ---- pause: held after step 0, the action not run if it had not yet */
	int64_t id = submit(s, "pause");
	struct feed_sub *sub = feed_subscribe(f, id);
	wait_decode(sub);
	scheduler_takeover(s, 0);
	uint64_t end = time_mono_us() + DEADLINE_US;
	while (scheduler_paused(s, id) != 2 && time_mono_us() < end)
		time_sleep_us(2000);
	CHECK_INT_EQ(scheduler_paused(s, id), 2);
	json_t *steps = NULL;
	REQUIRE(api_json_read_steps(j, id, 0, false, &steps) == 0);
	size_t held_after = json_array_size(steps);
	CHECK(held_after <= 1);
	const char *err0 = json_string_value(json_object_get(json_array_get(steps, 0), "error"));
	fprintf(stderr, "step 0 when taken over: %s\n",
		held_after == 0 ? "its decode was interrupted" :
		err0		? err0 :
				  "its action ran");
	if (err0)
		CHECK_STR_EQ(err0, AGENT_TAKEOVER_SKIPPED);
	json_decref(steps);
	/* more input while it holds changes nothing */
	scheduler_takeover(s, 0);
	CHECK_INT_EQ(scheduler_resume(s, id), 0);
	CHECK_INT_EQ(wait_final(j, id), IPC_TASK_FAILED); /* max_steps */
	REQUIRE(api_json_read_steps(j, id, 0, false, &steps) == 0);
	CHECK_INT_EQ((int)json_array_size(steps), 2);
	const char *turn1 = json_string_value(
		json_object_get(json_object_get(json_array_get(steps, 1), "agent"), "user_turn"));
	const char *turn0 = json_string_value(
		json_object_get(json_object_get(json_array_get(steps, 0), "agent"), "user_turn"));
	CHECK(turn1 && (held_after == 0) != (strstr(turn1, AGENT_TAKEOVER_NOTE) != NULL));
	CHECK(turn0 && !strstr(turn0, AGENT_TAKEOVER_NOTE));
	if (err0)
		CHECK(turn1 && strstr(turn1, AGENT_TAKEOVER_SKIPPED));
	json_decref(steps);
	feed_unsubscribe(sub);

	/* ---- cancel */
	id = submit(s, "cancel");
	sub = feed_subscribe(f, id);
	wait_decode(sub);
	scheduler_takeover(s, 0);
	CHECK_INT_EQ(wait_final(j, id), IPC_TASK_CANCELLED);
	feed_unsubscribe(sub);

	/* ---- ignore: the task runs on to its budget */
	id = submit(s, "ignore");
	sub = feed_subscribe(f, id);
	wait_decode(sub);
	scheduler_takeover(s, 0);
	CHECK_INT_EQ(scheduler_paused(s, id), 0);
	CHECK_INT_EQ(wait_final(j, id), IPC_TASK_FAILED);
	REQUIRE(api_json_read_steps(j, id, 0, false, &steps) == 0);
	CHECK_INT_EQ((int)json_array_size(steps), 2);
	json_decref(steps);
	feed_unsubscribe(sub);

	/* dry runs: nothing was clicked */
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
