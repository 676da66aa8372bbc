/* The rolling history (issue 30) on the tiny agent model at fp32, through the local provider's
 * own code (this file compiles daemon/provider-local.c into itself, so it reads the task's
 * state): a task of synthetic screenshots runs N steps with K = 2, and at every step
 *   - the logits the step decoded from (the first the grammar masks) equal, within fp32
 *     tolerance, those of a fresh session that prefilled the prefix and window mode's whole
 *     history of the same step (older observations evicted, the last K in full), while a
 *     wrong context (the observation that left the window kept in full) is far from them;
 *   - the session and the snapshot add up: session = snapshot before + appended + decoded, and
 *     the snapshot grows by what the step evicted;
 *   - what a step prefills is the same from step K + 1 on (every evicted turn then carries a
 *     tool result), far less than the window's whole history at the last step.
 * Then a shorter task with jump-forward on (issue 34): the step's lead, the ids of the
 * `{"note":` the grammar forces before the model's first choice, is appended with the prompt,
 * so the first logits the grammar masks are those after the window and the lead (a fresh
 * prefill of both), the raw output starts with it, and it counts as decoded and forced.
 * No display: the frames are patterns, the tool results written here. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent-history.h"
#include "agent.h"
#include "common.h"
#include "executor.h"
#include "journal.h"
#include "model-worker.h"
#include "policy.h"
#include "provider.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

#define N_STEPS 7
#define K 2
#define FRAME_W 96
#define FRAME_H 64
/* fp32 sessions prefilled in other chunks: the sums differ in their order only. Measured on
 * the tiny model (logits of magnitude 7.4): at most 1.5e-6 apart; a wrong context moves them
 * by 5.8e-4 or more. The tolerance is 5e-6 of the largest logit (3.7e-5), a wrong context must
 * be 10 times as far. */
#define LOGITS_TOL 5e-6f

/* The first logits the grammar masks in a step: those after its prompt. */
static float *captured;
static int captured_n;
static bool capture;

static int capture_masker_apply(struct policy_masker *mk, const struct policy_matcher *m, float *logits)
{
	if (capture) {
		memcpy(captured, logits, (size_t)captured_n * sizeof(float));
		capture = false;
	}
	return policy_masker_apply(mk, m, logits);
}

/* The task's prompt is journaled by the executor's journal, which this test has none of. */
#define policy_masker_apply capture_masker_apply
#define journal_task_prompt(j, id, text) ((void)(j), (void)(id), (void)(text), 0)
#include "../../daemon/provider-local.c"
#undef policy_masker_apply
#undef journal_task_prompt

/* A fresh session: the prefix and window mode's history of step `index` (keep: observations
 * carrying their image), the logits after it. */
struct fresh_job {
	struct local_task *a;
	const struct policy_piece *prefix, *window;
	size_t index;
	bool lead; /* the step's lead after the window (jump-forward) */
	float *logits;
	int32_t lead_ids[STEP_LEAD_MAX];
	size_t n_lead;
};

static int fresh_job(struct worker_ctx *ctx, void *arg)
{
	struct fresh_job *f = arg;
	struct local_task *a = f->a;
	struct engine_session *s = engine_session_create_on(ctx->backend, (int)a->cfg->context_tokens);
	const struct policy_piece *w = f->window;
	int r;

	if (!s)
		return -errno;
	f->n_lead = f->lead ? step_lead(ctx, a, false, f->lead_ids, STEP_LEAD_MAX) : 0;
	struct engine_row_ref *refs = xcalloc(w->n_ids + f->n_lead + 1, sizeof(*refs));
	int32_t *ids = xcalloc(w->n_ids + f->n_lead + 1, sizeof(*ids));
	memcpy(ids, w->ids, w->n_ids * sizeof(*ids));
	memcpy(ids + w->n_ids, f->lead_ids, f->n_lead * sizeof(*ids));
	for (size_t k = 0; k < w->n_images; k++) {
		const struct obs_rec *o = &a->obs[f->index + 1 - w->n_images + k];
		for (size_t i = 0; i < w->images[k].n_tokens; i++)
			refs[w->images[k].offset + i] = (struct engine_row_ref){.rows = o->rows, .row = i};
	}
	r = engine_session_append(s, f->prefix->ids, NULL, f->prefix->n_ids, ENGINE_LOGITS_NONE, NULL);
	if (r == 0)
		r = engine_session_append_rows(s, ids, refs, w->n_ids + f->n_lead, ENGINE_LOGITS_LAST,
					       f->logits);
	free(refs);
	free(ids);
	engine_session_destroy(s);
	return r;
}

static float max_diff(const float *x, const float *y, int n, float *ret_scale)
{
	float d = 0.0f, scale = 0.0f;
	for (int i = 0; i < n; i++) {
		d = fmaxf(d, fabsf(x[i] - y[i]));
		scale = fmaxf(scale, fabsf(y[i]));
	}
	*ret_scale = scale;
	return d;
}

static struct x11_frame *pattern(int step)
{
	struct x11_frame *f = xcalloc(1, sizeof(*f));
	f->width = FRAME_W;
	f->height = FRAME_H;
	f->stride = (size_t)FRAME_W * 3;
	f->pixels = xmalloc(f->stride * FRAME_H);
	for (int y = 0; y < FRAME_H; y++)
		for (int x = 0; x < FRAME_W; x++)
			for (int c = 0; c < 3; c++)
				f->pixels[(size_t)y * f->stride + (size_t)x * 3 + (size_t)c] =
					(uint8_t)((x * (c + 1) + y * (step + 2) + step * 37) & 255);
	return f;
}

/* One task of n_steps steps with K = 2, under a context of the prefix and `room` tokens (0: a
 * context of 32768), with jump-forward on or off. Returns the rebuilds it saw. */
static int run_task(struct provider *p, struct model_worker *w, unsigned room, size_t n_steps, bool jump)
{
	char err[512] = "";
	struct ipc_task_request *req = NULL;
	static const char body[] = "{\"instruction\": \"Click the red block.\"}";
	REQUIRE(ipc_task_request_parse(body, strlen(body), &req, err, sizeof(err)) == 0);
	atomic_int stop = EXECUTOR_RUN;
	struct executor_task t = {.id = 1,
				  .req = req,
				  .max_steps = (unsigned)n_steps,
				  .max_seconds = 600,
				  .stop = &stop};
	struct executor_env env = {0};
	struct executor_run run = {.env = &env,
				   .t = &t,
				   .monitor = {.x = 0, .y = 0, .width = FRAME_W, .height = FRAME_H},
				   .root_w = FRAME_W,
				   .root_h = FRAME_H,
				   .deadline_us = UINT64_MAX};
	/* The reference renderer: the same format, tokenizer and environment as the task's. */
	struct policy_env penv = {.screen_width = FRAME_W, .screen_height = FRAME_H, .date = "2026-11-29"};
	struct policy_renderer *ref = policy_renderer_create(&policy_format_holo3, model_worker_tokenizer(w),
							     &penv, model_worker_tokens_per_tile(w));
	REQUIRE(ref);
	struct policy_piece prefix = {0};
	REQUIRE(policy_render_prefix(ref, req->instruction, &prefix) == 0);
	unsigned context_tokens = room ? (unsigned)prefix.n_ids + room : 32768;
	struct agent_config cfg = {.provider = p,
				   .worker = w,
				   .history = IPC_HISTORY_ROLLING,
				   .window = K,
				   .context_tokens = context_tokens,
				   .step_tokens = 300,
				   .step_retries = 0,
				   .temperature = 0.0f};
	struct provider_task_args args = {.cfg = &cfg,
					  .t = &t,
					  .run = &run,
					  .history = IPC_HISTORY_ROLLING,
					  .window = K,
					  .jump_forward = jump,
					  .date = "2026-11-29"};
	struct provider_task *pt = NULL;
	REQUIRE(p->ops->task_open(p, &args, &pt, err, sizeof(err)) == 0);
	struct local_task *a = (struct local_task *)pt;
	captured_n = a->vocab;
	captured = xmalloc((size_t)a->vocab * sizeof(float));
	float *fresh = xmalloc((size_t)a->vocab * sizeof(float));
	CHECK_INT_EQ((long long)prefix.n_ids, a->prefix_tokens);

	struct policy_step *steps = xcalloc(n_steps, sizeof(*steps));
	struct policy_tool_result *results = xcalloc(n_steps, sizeof(*results));
	char(*result_text)[64] = xcalloc(n_steps, sizeof(*result_text));
	struct policy_observation *obs = xcalloc(n_steps, sizeof(*obs));
	long long *appended = xcalloc(n_steps, sizeof(*appended)), window_ids = 0;
	int rebuilds = 0;

	for (size_t i = 0; i < n_steps; i++) {
		struct x11_frame *f = pattern((int)i);
		int r = p->ops->observe(pt, i, f, err, sizeof(err));
		free(f->pixels);
		free(f);
		REQUIRE(r == 0);
		if (i > 0) {
			snprintf(result_text[i], sizeof(result_text[i]), "clicked left x1 at (%zu,%zu)",
				 10 + i, 20 + 3 * i);
			results[i] =
				(struct policy_tool_result){.tool = IPC_TOOL_CLICK, .text = result_text[i]};
			obs[i].result = &results[i];
		}
		obs[i].n_tiles = a->obs[i].n_tiles;

		long long before = a->rolling_tokens;
		struct provider_history h = {.results = results, .steps = steps, .index = i};
		struct provider_step ps = {0};
		capture = true;
		r = p->ops->step(pt, &h, 1234, &ps);
		if (r < 0)
			fprintf(stderr, "step %zu: %s\n", i, ps.err);
		REQUIRE(r == 0);
		CHECK(!capture);
		bool rebuilt = strcmp(ps.prompt_mode, "rebuild") == 0;
		CHECK(rebuilt || strcmp(ps.prompt_mode, "rolling") == 0);
		rebuilds += rebuilt;
		if (rebuilt)
			before = a->prefix_tokens;
		appended[i] = ps.as.tokens_appended;
		/* session = snapshot before (the prefix after a rebuild) + appended + decoded; the
		 * snapshot took the evicted turns; the session stays within the context. */
		CHECK_INT_EQ(ps.as.session_tokens, before + ps.as.tokens_appended + ps.as.tokens_decoded);
		CHECK(ps.as.session_tokens <= (long long)cfg.context_tokens);
		size_t rf = a->roll_first;
		CHECK_INT_EQ(a->roll_held, i + 1 - rf > K ? i + 1 - rf - K : 0);
		CHECK(rebuilt || (i - rf < K ? a->rolling_tokens == before : a->rolling_tokens > before));

		/* The same context, prefilled fresh: the prefix and the window's history from the
		 * first observation the session holds. */
		struct policy_piece win = {0}, wrong = {0};
		REQUIRE(policy_render_window(ref, obs + rf, steps + rf, i - rf, K, &win) == 0);
		CHECK_INT_EQ((long long)win.n_ids,
			     ps.as.session_tokens - ps.as.tokens_decoded - a->prefix_tokens);
		struct fresh_job fj = {.a = a,
				       .prefix = &prefix,
				       .window = &win,
				       .index = i,
				       .lead = jump,
				       .logits = fresh};
		REQUIRE(model_worker_call(w, fresh_job, &fj) == 0);
		if (jump) {
			/* the lead: some of `{"note":`'s ids, decoded (and forced) at the start of
			 * the raw output */
			size_t bytes = 0;
			CHECK(fj.n_lead > 0);
			for (size_t k = 0; k < fj.n_lead; k++) {
				const uint8_t *b;
				size_t len;
				REQUIRE(engine_tokenizer_token_bytes(model_worker_tokenizer(w),
								     fj.lead_ids[k], &b, &len) == 0);
				CHECK(bytes + len <= 8 && memcmp(b, "{\"note\":" + bytes, len) == 0);
				bytes += len;
			}
			CHECK(strncmp(ps.raw, "{\"note\":", bytes) == 0);
			CHECK(ps.as.tokens_forced >= (long long)fj.n_lead);
			/* one forward per sampled id fed back; the lead and the forced runs after
			 * the samples ride along */
			CHECK_INT_EQ(ps.as.tokens_decoded, ps.as.decode_forwards + ps.as.tokens_forced);
			CHECK(ps.as.decode_forwards > 0);
		} else {
			CHECK_INT_EQ(ps.as.tokens_forced, 0);
			CHECK_INT_EQ(ps.as.decode_forwards, ps.as.tokens_decoded);
		}
		float scale, d = max_diff(captured, fresh, a->vocab, &scale);
		fprintf(stderr,
			"step %zu (%s, history from %zu): appended %lld (window %zu), "
			"snapshot %d tokens, logits max |rolling - fresh| %.2e (max |logit| %.2f)\n",
			i, ps.prompt_mode, rf, appended[i], win.n_ids, a->rolling_tokens, (double)d,
			(double)scale);
		CHECK(d <= LOGITS_TOL * fmaxf(1.0f, scale));
		if (rf == 0)
			window_ids = (long long)win.n_ids;
		/* Wrong contexts are far from it: one screenshot fewer (an observation evicted
		 * too early), and the window without the evicted turns (a snapshot that lost
		 * them); so the check above tells them apart. */
		for (int kind = 0; kind < 2; kind++) {
			size_t f0 = i + 1 - K;
			if (kind == 0 && i < rf + 1)
				continue;
			if (kind == 1 && i < rf + K)
				continue;
			REQUIRE((kind == 0 ? policy_render_window(ref, obs + rf, steps + rf, i - rf, K - 1,
								  &wrong) :
					     policy_render_window(ref, obs + f0, steps + f0, i - f0, K,
								  &wrong)) == 0);
			fj.window = &wrong;
			REQUIRE(model_worker_call(w, fresh_job, &fj) == 0);
			float dw = max_diff(captured, fresh, a->vocab, &scale);
			fprintf(stderr, "        %s: %.2e\n",
				kind == 0 ? "one screenshot fewer" : "no evicted turns", (double)dw);
			/* At least 4 times the tolerance: behind the holo3 prefix (about 5000 tokens
			 * of this tokenizer, the step schema included) the wrong contexts differ by
			 * 5e-4 to 4e-3 at |logit| ~7.4 (the tolerance there: 7.4e-5), the right one
			 * by less than 3e-6. */
			CHECK(dw > 4 * LOGITS_TOL * fmaxf(1.0f, scale));
			policy_piece_finish(&wrong);
		}
		policy_piece_finish(&win);

		steps[i] = ps.step;
		memset(&ps.step, 0, sizeof(ps.step));
		provider_step_finish(&ps);
	}
	if (rebuilds == 0 && n_steps > K + 2) {
		/* Constant from step K + 1 on, and far less than the window's history at the
		 * end. */
		for (size_t i = K + 2; i < n_steps; i++)
			CHECK_INT_EQ(appended[i], appended[K + 1]);
		CHECK(appended[n_steps - 1] < window_ids);
	}

	policy_piece_finish(&prefix);
	policy_renderer_destroy(ref);
	p->ops->task_close(pt);
	for (size_t i = 0; i < n_steps; i++)
		policy_step_finish(&steps[i]);
	free(steps);
	free(results);
	free(result_text);
	free(obs);
	free(appended);
	free(captured);
	free(fresh);
	ipc_task_request_destroy(req);
	return rebuilds;
}

int main(void)
{
	const char *model = getenv("AGENT_MODEL");

	if (!model) {
		fprintf(stderr, "skip: AGENT_MODEL is not set\n");
		return 77;
	}
	struct engine_backend_options bo = {.kind = ENGINE_BACKEND_CPU, .precision = ENGINE_PRECISION_FP32};
	struct model_worker *w = model_worker_create(model, &bo);
	REQUIRE(w);
	REQUIRE(model_worker_wait_loaded(w) == MODEL_WORKER_READY);
	struct provider *p = provider_local_create(w);
	REQUIRE(p);

	/* Rolling all along. */
	CHECK_INT_EQ(run_task(p, w, 0, N_STEPS, false), 0);
	/* With jump-forward: the step's lead appended with its prompt. */
	CHECK_INT_EQ(run_task(p, w, 0, 2, true), 0);
	/* A context of the prefix and ~1000 tokens: the snapshot soon does not fit beside the
	 * window; the rebuilt session (the recent history from the prefix) rolls on from there. */
	int rebuilds = run_task(p, w, 1000, 9, false);
	fprintf(stderr, "small context: %d rebuilds\n", rebuilds);
	CHECK(rebuilds >= 1);

	provider_destroy(p);
	model_worker_destroy(w);
	return test_exit();
}
