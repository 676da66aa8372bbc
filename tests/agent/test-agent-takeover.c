/* Takeover (issue 32): input of a person on the display pauses the running task at once, or
 * cancels it, or is ignored, as the task's "takeover" says; resumed, the model's next
 * observation says that the user took over.
 *
 * The listener that tells a person's input from XTest's is tested by the x11 suite (XTest
 * input never reaches its callback; trusted for the test, it does); Xvfb has no other device,
 * so, as test-agent-kill.c does for the kill switch, this test enters where the listener's
 * callback does: scheduler_takeover().
 *
 * When the input lands is not left to the machine's load (the tiny model decides a step in a
 * few milliseconds: on a loaded machine the task could finish its budget before the input
 * came): the local provider is wrapped, and its step 0 holds, just before or just after the
 * real step, until the test has delivered the input. Before: the decode stops at its first
 * token (nothing journaled; resumed, step 0 is decided anew from a new screenshot, which the
 * model sees first, so there is nothing to tell it). After: the decode has ended, the step's
 * action is not run, the task holds with one step journaled and the model's next user turn
 * tells it.
 *
 * usage: test-agent-takeover HOLO_TEST_CLIENT   ($AGENT_MODEL: the model directory) */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent.h"
#include "api-json.h"
#include "common.h"
#include "journal.h"
#include "model-worker.h"
#include "provider.h"
#include "scheduler.h"
#include "shotwriter.h"
#include "test.h"
#include "x11-test-util.h"

TEST_DEFINE_GLOBALS;

#define DEADLINE_US (120 * 1000000ull)

/* ---- the gate: the local provider, its step 0 held until the test says so */

enum gate_where { GATE_OFF, GATE_BEFORE, GATE_AFTER };

static struct {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	enum gate_where where; /* armed for the next step 0 (then off) */
	bool reached, released;
	struct provider *inner;
} gate = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

struct gate_task {
	struct provider_task base;
	struct provider_task *inner;
};

static struct provider gate_provider;

static void gate_hold(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.reached = true;
	pthread_cond_broadcast(&gate.cond);
	while (!gate.released)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
}

static enum provider_state gate_state(struct provider *p)
{
	(void)p;
	return gate.inner->ops->state(gate.inner);
}

static enum provider_state gate_wait_ready(struct provider *p)
{
	(void)p;
	return gate.inner->ops->wait_ready(gate.inner);
}

static const char *gate_error(struct provider *p)
{
	(void)p;
	return gate.inner->ops->error(gate.inner);
}

static json_t *gate_provenance(struct provider *p)
{
	(void)p;
	return gate.inner->ops->provenance(gate.inner);
}

static int gate_task_open(struct provider *p, const struct provider_task_args *args,
			  struct provider_task **ret, char *err, size_t errlen)
{
	struct provider_task *in = NULL;
	int r = gate.inner->ops->task_open(gate.inner, args, &in, err, errlen);
	if (r < 0)
		return r;
	struct gate_task *gt = xcalloc(1, sizeof(*gt));
	gt->base.p = p;
	gt->inner = in;
	*ret = &gt->base;
	return 0;
}

static int gate_observe(struct provider_task *pt, size_t index, const struct x11_frame *frame, char *err,
			size_t errlen)
{
	struct provider_task *in = ((struct gate_task *)pt)->inner;
	return in->p->ops->observe(in, index, frame, err, errlen);
}

static int gate_step(struct provider_task *pt, const struct provider_history *h, uint64_t seed,
		     struct provider_step *ret)
{
	struct provider_task *in = ((struct gate_task *)pt)->inner;
	pthread_mutex_lock(&gate.lock);
	enum gate_where where = h->index == 0 ? gate.where : GATE_OFF;
	if (where != GATE_OFF)
		gate.where = GATE_OFF;
	pthread_mutex_unlock(&gate.lock);
	if (where == GATE_BEFORE)
		gate_hold();
	int r = in->p->ops->step(in, h, seed, ret);
	if (where == GATE_AFTER)
		gate_hold();
	return r;
}

static void gate_task_close(struct provider_task *pt)
{
	if (!pt)
		return;
	struct provider_task *in = ((struct gate_task *)pt)->inner;
	in->p->ops->task_close(in);
	free(pt);
}

static json_t *gate_status(struct provider *p)
{
	(void)p;
	return gate.inner->ops->status(gate.inner);
}

static void gate_destroy(struct provider *p)
{
	(void)p;
}

static const struct provider_ops gate_ops = {
	.name = "local",
	.state = gate_state,
	.wait_ready = gate_wait_ready,
	.error = gate_error,
	.provenance = gate_provenance,
	.task_open = gate_task_open,
	.observe = gate_observe,
	.step = gate_step,
	.task_close = gate_task_close,
	.status = gate_status,
	.destroy = gate_destroy,
};

/* Arms the gate for the next task's step 0. */
static void gate_arm(enum gate_where where)
{
	pthread_mutex_lock(&gate.lock);
	gate.where = where;
	gate.reached = gate.released = false;
	pthread_mutex_unlock(&gate.lock);
}

/* Waits until step 0 holds at the gate. */
static void gate_wait(void)
{
	pthread_mutex_lock(&gate.lock);
	while (!gate.reached)
		pthread_cond_wait(&gate.cond, &gate.lock);
	pthread_mutex_unlock(&gate.lock);
}

static void gate_release(void)
{
	pthread_mutex_lock(&gate.lock);
	gate.released = true;
	pthread_cond_broadcast(&gate.cond);
	pthread_mutex_unlock(&gate.lock);
}

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
	gate.inner = prov;
	gate_provider.ops = &gate_ops;
	struct scheduler_config sc = {
		.displays = (const char *const[]){xvfb.display},
		.n_displays = 1,
		.max_steps = 100,
		.max_seconds = 600,
		.takeover = IPC_TAKEOVER_CANCEL, /* each task below sets its own */
		.agent = {.provider = &gate_provider,
			  .worker = et,
			  .history = IPC_HISTORY_ROLLING,
			  .window = 3,
			  .context_tokens = 32768,
			  .step_tokens = 256,
			  .step_retries = 0},
	};
	struct scheduler *s = scheduler_create(&sc, j, w);
	REQUIRE(s);

	/* ---- pause, during step 0's decode (before) and once it has ended (after) */
	for (int k = 0; k < 2; k++) {
		const bool after = k == 1;
		gate_arm(after ? GATE_AFTER : GATE_BEFORE);
		int64_t id = submit(s, "pause");
		gate_wait();
		scheduler_takeover(s, 0);
		gate_release();
		uint64_t end = time_mono_us() + DEADLINE_US;
		while (scheduler_paused(s, id) != 2 && time_mono_us() < end)
			time_sleep_us(2000);
		CHECK_INT_EQ(scheduler_paused(s, id), 2);
		json_t *steps = NULL;
		REQUIRE(api_json_read_steps(j, id, 0, false, &steps) == 0);
		/* before: the decode stopped, nothing journaled; after: step 0 journaled, its action
		 * not run */
		CHECK_INT_EQ((int)json_array_size(steps), (after ? 1 : 0));
		const char *err0 = json_string_value(json_object_get(json_array_get(steps, 0), "error"));
		if (after)
			CHECK(err0 && strcmp(err0, AGENT_TAKEOVER_SKIPPED) == 0);
		json_decref(steps);
		/* more input while it holds changes nothing */
		scheduler_takeover(s, 0);
		CHECK_INT_EQ(scheduler_paused(s, id), 2);
		CHECK_INT_EQ(scheduler_resume(s, id), 0);
		CHECK_INT_EQ(wait_final(j, id), IPC_TASK_FAILED); /* max_steps */
		REQUIRE(api_json_read_steps(j, id, 0, false, &steps) == 0);
		CHECK_INT_EQ((int)json_array_size(steps), 2);
		const char *turn1 = json_string_value(
			json_object_get(json_object_get(json_array_get(steps, 1), "agent"), "user_turn"));
		const char *turn0 = json_string_value(
			json_object_get(json_object_get(json_array_get(steps, 0), "agent"), "user_turn"));
		/* the model is told when it had decided a step the person's input overtook */
		CHECK(turn1 && (strstr(turn1, AGENT_TAKEOVER_NOTE) != NULL) == after);
		CHECK(turn1 && (strstr(turn1, AGENT_TAKEOVER_SKIPPED) != NULL) == after);
		CHECK(turn0 && !strstr(turn0, AGENT_TAKEOVER_NOTE));
		json_decref(steps);
	}

	/* ---- cancel: step 0's decode stops, the task ends cancelled */
	gate_arm(GATE_BEFORE);
	int64_t id = submit(s, "cancel");
	gate_wait();
	scheduler_takeover(s, 0);
	gate_release();
	CHECK_INT_EQ(wait_final(j, id), IPC_TASK_CANCELLED);

	/* ---- ignore: the task runs on to its budget */
	gate_arm(GATE_BEFORE);
	id = submit(s, "ignore");
	gate_wait();
	scheduler_takeover(s, 0);
	CHECK_INT_EQ(scheduler_paused(s, id), 0);
	gate_release();
	CHECK_INT_EQ(wait_final(j, id), IPC_TASK_FAILED);
	CHECK_INT_EQ(scheduler_paused(s, id), 0);
	json_t *steps = NULL;
	REQUIRE(api_json_read_steps(j, id, 0, false, &steps) == 0);
	CHECK_INT_EQ((int)json_array_size(steps), 2);
	CHECK(!json_string_value(json_object_get(json_array_get(steps, 0), "error")));
	json_decref(steps);

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
