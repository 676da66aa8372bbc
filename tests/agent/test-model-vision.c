/* Vision work and grounding in the model worker's batches (model-worker.h, issue 16), on the
 * tiny agent checkpoint ($AGENT_MODEL), no display. While two sessions decode:
 *   - a screenshot of several tiles is encoded by a sequence job (MODEL_WORK_VISION) and a
 *     script's target is grounded (ground_locate(): encode, prefill, point decode);
 *   - every decoder gets its next token in every forward, and at most one vision slice runs
 *     between two of its tokens (counted in forwards and slices, not wall clock);
 *   - the sliced encode (from the image, as the local provider runs it: the preprocessing is
 *     its first slice) gives engine_vision_encode_image_on()'s rows bit for bit, and the point
 *     grounded beside the decoders equals the point grounded alone;
 *   - /v1/status's batching shows the vision work in flight and the slices run;
 *   - a grounding is asked in holod's policy format: holo3's or holo-nano's texts. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "agent.h"
#include "common.h"
#include "ground.h"
#include "model-worker.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

#define N_DEC 2
/* a bound the vision work ends far within (a release forward of the tiny model: ~0.5 ms) */
#define MAX_SAMPLES 32768
#define SCREEN_W 320
#define SCREEN_H 200

static struct model_worker *et;
static atomic_int vision_done; /* the encode and the grounding ended: the decoders stop */
static atomic_int decoding;    /* decoders that sampled twice */

struct dec {
	struct engine_session *s;
	float *logits;
	struct engine_generator *gen;
	bool started;
	int result;
	unsigned long long *at, *slices; /* forwards and vision slices at each sample */
	size_t n_at;
	json_int_t vision_seen; /* batching.vision when the first slices had run */
};

static int job_prepare(struct worker_ctx *ctx, void *arg)
{
	struct dec *d = arg;
	static const int32_t prompt[] = {5, 17, 29, 41};
	d->s = engine_session_create_on(ctx->backend, MAX_SAMPLES + 64);
	if (!d->s)
		return -errno;
	d->logits = malloc((size_t)engine_session_vocab(d->s) * sizeof(float));
	if (!d->logits)
		return -ENOMEM;
	return engine_session_append(d->s, prompt, NULL, 4, ENGINE_LOGITS_LAST, d->logits);
}

static int job_destroy(struct worker_ctx *ctx, void *arg)
{
	struct dec *d = arg;
	(void)ctx;
	engine_generator_destroy(d->gen);
	engine_session_destroy(d->s);
	free(d->logits);
	return 0;
}

/* Runs on the worker before each sample, between two forwards: what the worker has done. */
static int hook(void *userdata, float *logits, int vocab)
{
	struct dec *d = userdata;
	(void)logits;
	(void)vocab;
	if (atomic_load(&vision_done) || d->n_at == MAX_SAMPLES)
		return 1;
	d->at[d->n_at] = model_worker_batches(et);
	d->slices[d->n_at] = model_worker_vision_slices(et);
	if (++d->n_at == 2)
		atomic_fetch_add(&decoding, 1);
	if (!d->vision_seen && d->slices[d->n_at - 1] > 0) {
		json_t *st = model_worker_status(et);
		d->vision_seen =
			json_integer_value(json_object_get(json_object_get(st, "batching"), "vision"));
		json_decref(st);
	}
	return 0;
}

static int dec_next(struct worker_ctx *ctx, void *arg, int r, struct model_work *w)
{
	struct dec *d = arg;
	(void)ctx;
	if (d->started)
		return r;
	d->started = true;
	struct engine_generate_params p = {.max_new_tokens = MAX_SAMPLES, .logits_hook = hook, .userdata = d};
	d->gen = engine_generator_create(d->s, NULL, &p, d->logits);
	if (!d->gen)
		return -errno;
	*w = (struct model_work){.kind = MODEL_WORK_DECODE, .session = d->s, .gen = d->gen};
	return 1;
}

static void *dec_run(void *arg)
{
	struct dec *d = arg;
	d->result = model_worker_run(et, &(struct model_seq_job){.next = dec_next, .arg = d});
	return NULL;
}

/* A screenshot: a gradient with a few blocks, so that tiles differ. */
static uint8_t screen[SCREEN_H][SCREEN_W][3];

static void paint(void)
{
	for (int y = 0; y < SCREEN_H; y++)
		for (int x = 0; x < SCREEN_W; x++) {
			screen[y][x][0] = (uint8_t)(x * 255 / SCREEN_W);
			screen[y][x][1] = (uint8_t)(y * 255 / SCREEN_H);
			screen[y][x][2] = ((x / 40 + y / 40) % 2) ? 200 : 30;
		}
}

/* The encode as a sequence job of its own, and the reference as a plain job. */
struct enc {
	struct engine_image *img;
	int n_tiles;
	struct engine_vision_job *vj;
	struct engine_rows *rows;
	int steps;
	bool started;
	float *want;
	size_t n_floats;
};

static int enc_next(struct worker_ctx *ctx, void *arg, int r, struct model_work *w)
{
	struct enc *e = arg;
	if (!e->started) {
		e->started = true;
		struct engine_vision_grid grid;
		if ((r = engine_vision_encode_begin_image(ctx->backend, ctx->vision, e->img, 0, &grid,
							  &e->vj)) < 0)
			return r;
		if (grid.n_tiles != e->n_tiles)
			return -EPROTO;
		engine_vision_encode_progress(e->vj, &e->steps);
		*w = (struct model_work){.kind = MODEL_WORK_VISION, .vision = e->vj};
		return 1;
	}
	if (r == 0)
		r = engine_vision_encode_finish(e->vj, &e->rows);
	engine_vision_job_destroy(e->vj);
	e->vj = NULL;
	return r;
}

static int job_reference(struct worker_ctx *ctx, void *arg)
{
	struct enc *e = arg;
	struct engine_vision_grid grid;
	struct engine_rows *rows = NULL;
	int r = engine_vision_encode_image_on(ctx->backend, ctx->vision, e->img, 0, &grid, &rows);
	if (r == 0)
		r = engine_rows_count(rows) * (size_t)engine_vision_embed_dim(ctx->vision) == e->n_floats ?
			    engine_rows_read(rows, 0, engine_rows_count(rows), e->want) :
			    -EPROTO;
	engine_rows_destroy(rows);
	return r;
}

static int job_rows_destroy(struct worker_ctx *ctx, void *arg)
{
	(void)ctx;
	engine_rows_destroy(arg);
	return 0;
}

struct ground {
	const struct agent_config *cfg;
	atomic_int stop;
	int r, x, y;
	char err[512];
};

static void ground(struct ground *g)
{
	struct ipc_task_request req = {.kind = IPC_TASK_KIND_SCRIPT}; /* holod's format */
	struct executor_task t = {.id = 1, .req = &req, .stop = &g->stop};
	struct x11_frame frame = {.width = SCREEN_W,
				  .height = SCREEN_H,
				  .stride = (size_t)SCREEN_W * 3,
				  .pixels = &screen[0][0][0]};
	g->r = ground_locate((void *)g->cfg, &t, UINT64_MAX, &frame, "the Save button", &g->x, &g->y, g->err,
			     sizeof(g->err));
}

/* Tokens of a grounding's prompt and screenshot turn in format fmt, rendered as agent_ground
 * renders them (the decode's bound left out). */
static size_t ground_prompt_tokens(const struct policy_format *fmt, int n_tiles)
{
	char date[16];
	time_t now = time(NULL);
	struct tm tmv;
	strftime(date, sizeof(date), "%Y-%m-%d", gmtime_r(&now, &tmv));
	struct policy_env penv = {.screen_width = SCREEN_W, .screen_height = SCREEN_H, .date = date};
	struct policy_renderer *r = policy_renderer_create(fmt, model_worker_tokenizer(et), &penv,
							   model_worker_tokens_per_tile(et));
	char *task = fmt->ground_text("the Save button");
	struct policy_piece prefix = {0}, piece = {0};
	REQUIRE(r && task && policy_render_prefix(r, task, &prefix) == 0 &&
		policy_render_step(r, &(struct policy_observation){.n_tiles = n_tiles}, false, &piece) == 0);
	size_t n = prefix.n_ids + piece.n_ids;
	policy_piece_finish(&prefix);
	policy_piece_finish(&piece);
	policy_renderer_destroy(r);
	free(task);
	return n;
}

/* A grounding is asked in holod's format (--policy-format, cfg->format): with a context too
 * small for its prompt, the refusal counts the tokens that format's texts render. */
static void ground_formats(int n_tiles)
{
	const struct policy_format *const fmts[] = {&policy_format_holo3, &policy_format_holo_nano};
	size_t said[2];

	for (size_t i = 0; i < 2; i++) {
		struct agent_config cfg = {.worker = et, .context_tokens = 64, .format = fmts[i]};
		struct ground g = {.cfg = &cfg};
		const char *at;
		ground(&g);
		CHECK_INT_EQ(g.r, -E2BIG);
		REQUIRE((at = strstr(g.err, "its prompt and screenshot take ")) &&
			sscanf(at, "its prompt and screenshot take %zu tokens", &said[i]) == 1);
	}
	size_t want[2] = {ground_prompt_tokens(fmts[0], n_tiles), ground_prompt_tokens(fmts[1], n_tiles)};
	fprintf(stderr,
		"grounding's prompt + screenshot turn + point: holo3 %zu tokens, holo-nano "
		"%zu\n",
		said[0], said[1]);
	CHECK(want[0] != want[1]);
	CHECK(said[0] - want[0] == said[1] - want[1]); /* the same bound on the point */
}

static void *vision_run(void *arg)
{
	void **parts = arg;
	struct enc *e = parts[0];
	struct ground *g = parts[1];
	while (atomic_load(&decoding) < N_DEC)
		sched_yield();
	CHECK_INT_EQ(model_worker_run(et, &(struct model_seq_job){.next = enc_next, .arg = e}), 0);
	ground(g);
	atomic_store(&vision_done, 1);
	return NULL;
}

static void run_on(const char *model, enum engine_precision precision)
{
	struct engine_backend_options bo = {.kind = ENGINE_BACKEND_CPU, .precision = precision};
	atomic_store(&vision_done, 0);
	atomic_store(&decoding, 0);
	et = model_worker_create(model, &bo);
	REQUIRE(et);
	REQUIRE(model_worker_wait_loaded(et) == MODEL_WORKER_READY);
	CHECK_INT_EQ(model_worker_set_vision_slice(et, 0), -EINVAL);
	CHECK_INT_EQ(model_worker_set_vision_slice(et, MODEL_WORKER_MAX_VISION_SLICE + 1), -EINVAL);
	REQUIRE(model_worker_set_vision_slice(et, 1) == 0);

	/* the screenshot, and its grid */
	const struct engine_vision *v = model_worker_vision(et);
	REQUIRE(v);
	struct engine_vision_preprocess pp;
	struct engine_vision_grid grid;
	struct enc e = {0};
	e.img = engine_image_from_rgb(SCREEN_W, SCREEN_H, (size_t)SCREEN_W * 3, &screen[0][0][0]);
	REQUIRE(e.img);
	engine_vision_get_preprocess(v, &pp);
	REQUIRE(engine_vision_select_grid(SCREEN_W, SCREEN_H, pp.tile_size, pp.max_tiles, pp.use_thumbnail,
					  &grid) == 0);
	e.n_tiles = grid.n_tiles;
	REQUIRE(e.n_tiles >= 3);
	e.n_floats = (size_t)e.n_tiles * (size_t)engine_vision_tokens_per_tile(v) *
		     (size_t)engine_vision_embed_dim(v);

	/* 8192: the holo3 system prompt (it holds the step schema) is about 5000 tokens of the tiny
	 * tokenizer. */
	struct agent_config cfg = {.worker = et, .context_tokens = 8192};
	struct ground g = {.cfg = &cfg}, alone = {.cfg = &cfg};

	struct dec d[N_DEC] = {0};
	pthread_t th[N_DEC], tv;
	for (size_t i = 0; i < N_DEC; i++) {
		d[i].at = calloc(MAX_SAMPLES, sizeof(*d[i].at));
		d[i].slices = calloc(MAX_SAMPLES, sizeof(*d[i].slices));
		REQUIRE(d[i].at && d[i].slices);
		REQUIRE(model_worker_call(et, job_prepare, &d[i]) == 0);
	}
	void *parts[2] = {&e, &g};
	uint64_t t0 = time_mono_us();
	for (size_t i = 0; i < N_DEC; i++)
		REQUIRE(pthread_create(&th[i], NULL, dec_run, &d[i]) == 0);
	REQUIRE(pthread_create(&tv, NULL, vision_run, parts) == 0);
	pthread_join(tv, NULL);
	for (size_t i = 0; i < N_DEC; i++)
		pthread_join(th[i], NULL);
	uint64_t wall_us = time_mono_us() - t0;

	/* the grounding found a point beside the decoders, and the same one alone */
	CHECK_INT_EQ(g.r, 0);
	if (g.r < 0)
		fprintf(stderr, "grounding: %s\n", g.err);
	ground(&alone);
	CHECK_INT_EQ(alone.r, 0);
	CHECK(g.x == alone.x && g.y == alone.y);
	CHECK(g.x >= 0 && g.x <= 1000 && g.y >= 0 && g.y <= 1000);

	/* the sliced encode's rows: engine_vision_encode_image_on()'s, bit for bit */
	e.want = malloc(e.n_floats * sizeof(float));
	float *got = malloc(e.n_floats * sizeof(float));
	REQUIRE(e.want && got && e.rows);
	CHECK_INT_EQ(model_worker_call(et, job_reference, &e), 0);
	CHECK_INT_EQ(engine_rows_read(e.rows, 0, engine_rows_count(e.rows), got), 0);
	CHECK(memcmp(got, e.want, e.n_floats * sizeof(float)) == 0);

	/* the decoders: a token in every forward, at most one vision slice between two tokens,
	 * and every slice of the encode and of the grounding ran while they decoded */
	unsigned long long slices = model_worker_vision_slices(et);
	for (size_t i = 0; i < N_DEC; i++) {
		CHECK_INT_EQ(d[i].result, 0);
		REQUIRE(d[i].n_at >= 2);
		for (size_t k = 1; k < d[i].n_at; k++) {
			if (d[i].at[k] != d[i].at[k - 1] + 1 || d[i].slices[k] > d[i].slices[k - 1] + 1)
				fprintf(stderr,
					"decoder %zu, token %zu: %llu forwards, %llu slices "
					"since the last\n",
					i, k, d[i].at[k] - d[i].at[k - 1],
					d[i].slices[k] - d[i].slices[k - 1]);
			CHECK(d[i].at[k] == d[i].at[k - 1] + 1);
			CHECK(d[i].slices[k] <= d[i].slices[k - 1] + 1);
		}
		/* the encode's steps and the grounding's (the same screenshot) */
		CHECK(d[i].slices[d[i].n_at - 1] - d[i].slices[0] >= 2 * (unsigned long long)e.steps - 2);
		CHECK(d[i].vision_seen >= 1);
	}
	fprintf(stderr,
		"%s: %d tiles in %d steps (twice), %llu slices in all, %zu tokens per "
		"decoder meanwhile, %.1f ms per forward + slice\n",
		engine_precision_name(precision), e.n_tiles, e.steps, slices, d[0].n_at,
		(double)wall_us / 1000.0 / (double)d[0].n_at);
	CHECK(slices == 3 * (unsigned long long)e.steps); /* the encode, and two groundings */

	json_t *st = model_worker_status(et);
	json_t *b = json_object_get(st, "batching");
	CHECK_INT_EQ(json_integer_value(json_object_get(b, "vision_slice")), 1);
	CHECK_INT_EQ(json_integer_value(json_object_get(b, "vision")), 0);
	CHECK(json_integer_value(json_object_get(b, "vision_slices")) == (json_int_t)slices);
	CHECK_INT_EQ(json_integer_value(json_object_get(st, "sessions")), 0);
	json_decref(st);
	ground_formats(e.n_tiles);

	model_worker_call(et, job_rows_destroy, e.rows);
	for (size_t i = 0; i < N_DEC; i++) {
		model_worker_call(et, job_destroy, &d[i]);
		free(d[i].at);
		free(d[i].slices);
	}
	free(got);
	free(e.want);
	engine_image_destroy(e.img);
	model_worker_destroy(et);
}

int main(void)
{
	const char *model = getenv("AGENT_MODEL");
	if (!model) {
		fprintf(stderr, "usage: test-model-vision (with $AGENT_MODEL)\n");
		return 2;
	}
	paint();
	/* the bf16 run's grounding beside the decoders must find the point it finds alone */
	test_cap_cpu_kernels_below_amx();
	run_on(model, ENGINE_PRECISION_FP32);
	run_on(model, ENGINE_PRECISION_BF16);
	return test_exit();
}
