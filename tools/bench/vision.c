/* holo-bench vision: the CPU cost of the vision path per 512x512 tile (RADIO ViT, pixel shuffle +
 * mlp1 projector) and the prompt tokens of one agent step for common screen sizes.
 *
 *   holo-bench vision [--model DIR] [--blocks N] [--tiles N] [--threads N] [--tokenizer FILE]
 *
 * Without --model the encoder is a random C-RADIOv2-H built in memory (model.md 1.3, 3.2-3.3: width
 * 1280, 16 heads, MLP 5120, patch 16, 8 prefix tokens, a 128x128 position grid, projector
 * 5120 -> 20480 -> 5120, bf16). --blocks N (default 32) gives it N distinct blocks; below 32 the
 * ViT time of the full 32 blocks is extrapolated from runs with 1 and N blocks (the per-block
 * cost is their difference over N - 1), and the output says so. With --model DIR the checkpoint's
 * own tower is timed (ViT and projector together, through engine_vision_encode()).
 *
 * Step tokens: grid and tiles of each screen size as the reference chooses them (12-tile budget,
 * thumbnail), 256 image tokens per tile, plus the chat overhead of a typical step prompt
 * rendered with engine_chat_* when a tokenizer is available (--model's, or --tokenizer FILE).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "common.h"
#include "cpu_dnnl.h"
#include "engine.h"
#include "model.h"
#include "vision.h"
#include "vision_cpu.h"
#include "vision_rows.h"

/* C-RADIOv2-H and the Nano-VL v2 projector */
#define RADIO_H_WIDTH 1280
#define RADIO_H_DEPTH 32
#define RADIO_H_HEADS 16
#define RADIO_H_MLP 5120
#define RADIO_H_PATCH 16
#define RADIO_H_PREFIX 8
#define RADIO_H_POS_GRID 128
#define PROJ_HIDDEN 20480
#define LM_HIDDEN 5120
#define TILE 512
#define TOKENS_PER_TILE 256
#define MAX_TILES 12

static const char STEP_SYSTEM[] =
	"You are a GUI agent. You see the screen and answer with one action as JSON.";
static const char STEP_USER[] = "Task: open the settings and turn on dark mode.\n"
				"Previous action: click(640, 400).\nWhat is the next action?";

static void usage(FILE *f)
{
	fprintf(f, "usage: holo-bench vision [--model DIR] [--blocks N] [--tiles N] [--threads N]\n"
		   "                         [--tokenizer FILE] [--precision bf16|fp32]\n"
		   "  --precision P  the encoder's precision: fp32 (default) or bf16 (as the CPU backend\n"
		   "                 runs it: oneDNN products, bf16 row kernels)\n"
		   "  --blocks N     ViT blocks of the random RADIO-H (default 32; fewer: extrapolated)\n"
		   "  --tiles N      tiles timed per measurement (default 1)\n"
		   "  --tokenizer F  tokenizer.json for the step's chat overhead (default: --model's)\n");
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
/* --precision bf16: the random tower's products through oneDNN (vision_gemms) */
static bool bench_bf16;

static float frand(void) /* uniform in [-1, 1) */
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (float)((rng_state >> 40) * (1.0 / 8388608.0)) - 1.0f;
}

/* A bf16 tensor of the given shape, uniform in [-scale, scale] around `center`. Owned by *pool. */
static struct tensor rand_tensor(void ***pool, size_t *n_pool, float center, float scale, int ndim,
				 int64_t d0, int64_t d1, int64_t d2)
{
	struct tensor t = {.dtype = TENSOR_BF16, .ndim = ndim, .shape = {d0, d1, d2}};
	size_t n = (size_t)d0 * (size_t)(ndim > 1 ? d1 : 1) * (size_t)(ndim > 2 ? d2 : 1);
	uint16_t *p = xmalloc(n * sizeof(*p));

	for (size_t i = 0; i < n; i++)
		p[i] = f32_to_bf16(center + scale * frand());
	t.data = p;
	t.nbytes = n * sizeof(*p);
	*pool = xreallocarray(*pool, *n_pool + 1, sizeof(**pool));
	(*pool)[(*n_pool)++] = p;
	return t;
}

static int random_radio_h(struct vision_weights *w, int depth, void ***pool, size_t *n_pool)
{
	const int64_t D = RADIO_H_WIDTH, M = RADIO_H_MLP, in = 3 * RADIO_H_PATCH * RADIO_H_PATCH;
	const float sd = 1.0f / sqrtf((float)D), sm = 1.0f / sqrtf((float)M);
	char err[256];
	int r;

	memset(w, 0, sizeof(*w));
	w->heads = RADIO_H_HEADS;
	w->depth = depth;
	w->patch = RADIO_H_PATCH;
	w->shuffle = 2;
	w->embedder = rand_tensor(pool, n_pool, 0, 1.0f / sqrtf((float)in), 2, D, in, 0);
	w->pos_embed =
		rand_tensor(pool, n_pool, 0, 0.5f, 3, 1, (int64_t)RADIO_H_POS_GRID * RADIO_H_POS_GRID, D);
	w->cls_token = rand_tensor(pool, n_pool, 0, 0.5f, 2, RADIO_H_PREFIX, D, 0);
	w->blocks = xcalloc((size_t)depth, sizeof(*w->blocks));
	for (int i = 0; i < depth; i++) {
		struct vision_block *b = &w->blocks[i];

		b->norm1_w = rand_tensor(pool, n_pool, 1, 0.1f, 1, D, 0, 0);
		b->norm1_b = rand_tensor(pool, n_pool, 0, 0.05f, 1, D, 0, 0);
		b->qkv_w = rand_tensor(pool, n_pool, 0, sd, 2, 3 * D, D, 0);
		b->qkv_b = rand_tensor(pool, n_pool, 0, 0.05f, 1, 3 * D, 0, 0);
		b->proj_w = rand_tensor(pool, n_pool, 0, sd, 2, D, D, 0);
		b->proj_b = rand_tensor(pool, n_pool, 0, 0.05f, 1, D, 0, 0);
		b->norm2_w = rand_tensor(pool, n_pool, 1, 0.1f, 1, D, 0, 0);
		b->norm2_b = rand_tensor(pool, n_pool, 0, 0.05f, 1, D, 0, 0);
		b->fc1_w = rand_tensor(pool, n_pool, 0, sd, 2, M, D, 0);
		b->fc1_b = rand_tensor(pool, n_pool, 0, 0.05f, 1, M, 0, 0);
		b->fc2_w = rand_tensor(pool, n_pool, 0, sm, 2, D, M, 0);
		b->fc2_b = rand_tensor(pool, n_pool, 0, 0.05f, 1, D, 0, 0);
	}
	w->mlp1_norm = rand_tensor(pool, n_pool, 1, 0.1f, 1, 4 * D, 0, 0);
	w->mlp1_fc1 = rand_tensor(pool, n_pool, 0, 1.0f / sqrtf(4.0f * (float)D), 2, PROJ_HIDDEN, 4 * D, 0);
	w->mlp1_fc3 =
		rand_tensor(pool, n_pool, 0, 1.0f / sqrtf((float)PROJ_HIDDEN), 2, LM_HIDDEN, PROJ_HIDDEN, 0);
	r = vision_weights_check(w, err, sizeof(err));
	if (r < 0)
		fprintf(stderr, "holo-bench vision: random RADIO-H: %s\n", err);
	return r;
}

static float *random_tiles(int n)
{
	size_t count = (size_t)n * 3 * TILE * TILE;
	float *px = xmalloc(count * sizeof(*px));

	for (size_t i = 0; i < count; i++)
		px[i] = 1.5f * frand();
	return px;
}

/* The ViT blocks' layout the CPU backend takes in bf16 (backend_cpu.c): reordered unless
 * $HOLOD_CPU_GEMM_WEIGHTS says "plain". */
static enum cpu_dnnl_layout blocks_layout(void)
{
	const char *v = getenv("HOLOD_CPU_GEMM_WEIGHTS");
	return v && strcmp(v, "plain") == 0 ? CPU_DNNL_PLAIN : CPU_DNNL_REORDERED;
}

/* The bf16 run's oneDNN weights (*ret NULL for fp32, or where oneDNN has no bf16 products: the
 * fp32 products run then, as the CPU backend's bf16 encode runs them, cpu_vision_steps()). */
static int bench_gemms_create(const struct vision_weights *w, struct vision_gemms **ret)
{
	*ret = NULL;
	if (!bench_bf16 || !cpu_dnnl_bf16_supported())
		return 0;
	return vision_gemms_create(w, blocks_layout(), ret);
}

/* Seconds of the best of `reps` runs of depth-`depth` ViT over n tiles, and of the projector;
 * the time per operation of the fastest run, per tile. */
static int time_random(struct vision_weights *w, int depth, const float *px, int n, int reps, double *ret_vit,
		       double *ret_proj, double *ret_vit_cpu, struct vision_profile *ret_prof)
{
	const int grid = TILE / RADIO_H_PATCH;
	size_t feat_n = (size_t)grid * grid * RADIO_H_WIDTH;
	float *pos = xmalloc(feat_n * sizeof(float)), *feat = xmalloc(feat_n * sizeof(float));
	float *out = xmalloc((size_t)TOKENS_PER_TILE * LM_HIDDEN * sizeof(float));
	int full = w->depth, r;
	double best_vit = INFINITY, best_proj = INFINITY, best_cpu = INFINITY;

	struct vision_gemms *gm = NULL;
	struct vision_profile best_prof = {0};
	r = vision_pos_embed(w, grid, grid, pos);
	w->depth = depth;
	if (r == 0)
		r = bench_gemms_create(w, &gm);
	for (int k = 0; r == 0 && k < reps; k++) {
		double vit = 0, proj = 0, cpu = 0;
		struct vision_profile prof = {0};

		for (int t = 0; r == 0 && t < n; t++) {
			uint64_t t0 = time_mono_ns();
			double c0 = bench_cpu_seconds();

			r = vision_vit_forward_profile(w, gm, px + (size_t)t * 3 * TILE * TILE, grid, grid,
						       pos, feat, &prof);
			uint64_t t1 = time_mono_ns();
			cpu += bench_cpu_seconds() - c0;
			if (r == 0)
				r = vision_project_profile(w, gm, feat, grid, grid, out, &prof);
			uint64_t t2 = time_mono_ns();
			vit += (double)(t1 - t0) / 1e9;
			proj += (double)(t2 - t1) / 1e9;
		}
		if ((vit + proj) / n < best_vit + best_proj)
			best_prof = prof;
		best_vit = fmin(best_vit, vit / n);
		best_cpu = fmin(best_cpu, cpu / n / engine_get_threads());
		best_proj = fmin(best_proj, proj / n);
	}
	vision_gemms_destroy(gm);
	w->depth = full;
	if (r == 0 && !isfinite(out[0]))
		fprintf(stderr, "holo-bench vision: warning: non-finite projector output\n");
	free(pos);
	free(feat);
	free(out);
	*ret_vit = best_vit;
	*ret_proj = best_proj;
	*ret_vit_cpu = best_cpu;
	for (int op = 0; op < VISION_OP_COUNT; op++)
		ret_prof->ns[op] = best_prof.ns[op] / (uint64_t)n;
	return r;
}

/* The time per operation of one tile through `blocks` blocks and the projector (the fastest
 * timed run); the blocks' steps also per block. */
static void print_split(const struct vision_profile *prof, const struct vision_weights *w, int grid,
			int blocks)
{
	const double L = (double)grid * grid + w->n_prefix, D = w->width, M = w->mlp;
	const double n_proj = (double)(grid / w->shuffle) * (grid / w->shuffle);
	/* multiply-adds x 2 of qkv, proj, fc1, fc2; of mlp1's two products */
	const double block_flop = 2.0 * L * D * (3 * D + D + 2 * M);
	const double proj_flop = 2.0 * n_proj * w->proj_hidden * ((double)w->proj_in + w->out_dim);
	uint64_t total = 0;

	for (int op = 0; op < VISION_OP_COUNT; op++)
		total += prof->ns[op];
	printf("per operation, one tile through %d block%s and the projector (%.0f ms):\n", blocks,
	       blocks == 1 ? "" : "s", (double)total / 1e6);
	for (int op = 0; op < VISION_OP_COUNT; op++) {
		bool per_block = op == VISION_OP_GEMM || op == VISION_OP_BIAS || op == VISION_OP_ATTENTION ||
				 op == VISION_OP_GELU;

		printf("  vision cpu %-30s %8.1f ms %5.1f%%", vision_op_name((enum vision_op)op),
		       (double)prof->ns[op] / 1e6, total ? 100.0 * (double)prof->ns[op] / (double)total : 0.0);
		if (per_block)
			printf("  (%.2f ms per block)", (double)prof->ns[op] / 1e6 / blocks);
		if ((op == VISION_OP_GEMM || op == VISION_OP_PROJ_GEMM) && prof->ns[op])
			printf("  %.0f GFLOP/s", (op == VISION_OP_GEMM ? blocks * block_flop : proj_flop) /
							 (double)prof->ns[op]);
		printf("\n");
	}
}

/* One tile step by step as a resumable encode runs it (engine_vision_encode_advance(): a step
 * is the embedding, one block, the final norm with the projector's first product, or its
 * second product): the longest step is the slice holod's model worker runs between two
 * forwards at --batch-vision-slice 1. */
static int print_steps(const struct vision_weights *w, const struct vision_gemms *gm, const float *px,
		       const float *pos, int grid)
{
	struct vision_vit_run run;
	float *feat = xmalloc((size_t)grid * grid * w->width * sizeof(float));
	const int n = (grid / w->shuffle) * (grid / w->shuffle);
	float *out = xmalloc((size_t)n * w->out_dim * sizeof(float));
	float *hid = xmalloc((size_t)n * w->proj_hidden * sizeof(float));
	double embed = 0, block_max = 0, block_sum = 0, first = 0, second = 0;
	int r = vision_vit_run_init(&run, w, gm != NULL, grid, grid);

	uint64_t t0 = time_mono_ns();
	if (r == 0)
		r = vision_vit_run_embed(&run, gm, px, pos, NULL);
	embed = (double)(time_mono_ns() - t0) / 1e6;
	for (int i = 0; r == 0 && i < w->depth; i++) {
		t0 = time_mono_ns();
		r = vision_vit_run_block(&run, gm, NULL);
		double ms = (double)(time_mono_ns() - t0) / 1e6;
		block_max = fmax(block_max, ms);
		block_sum += ms;
	}
	t0 = time_mono_ns();
	if (r == 0)
		r = vision_vit_run_final(&run, feat, NULL);
	if (r == 0)
		r = vision_project_first(w, gm, feat, grid, grid, hid, NULL);
	uint64_t t1 = time_mono_ns();
	if (r == 0)
		r = vision_project_second(w, gm, hid, n, out, NULL);
	first = (double)(t1 - t0) / 1e6;
	second = (double)(time_mono_ns() - t1) / 1e6;
	if (r == 0)
		printf("resumable encode steps (one tile, --batch-vision-slice 1): embedding %.1f ms, "
		       "%d blocks %.1f ms each on average (longest %.1f ms), final norm + projector "
		       "%.1f + %.1f ms: the longest slice %.1f ms\n",
		       embed, w->depth, block_sum / w->depth, block_max, first, second,
		       fmax(fmax(embed, block_max), fmax(first, second)));
	vision_vit_run_finish(&run);
	free(feat);
	free(hid);
	free(out);
	return r;
}

static int bench_random(int blocks, int n_tiles)
{
	struct vision_weights w;
	void **pool = NULL;
	size_t n_pool = 0;
	float *px = random_tiles(n_tiles);
	double vit1, vitn, proj1, projn, per_block, vit32, cpu1, cpun, cpu_block;
	struct vision_profile prof;
	uint64_t t0 = time_mono_ns();
	int r = random_radio_h(&w, blocks, &pool, &n_pool);

	if (r < 0)
		goto out;
	printf("random C-RADIOv2-H: width %d, %d heads, MLP %d, %d prefix tokens, %dx%d position grid, "
	       "projector %d -> %d -> %d, bf16; %d distinct blocks built in %.1f s\n",
	       RADIO_H_WIDTH, RADIO_H_HEADS, RADIO_H_MLP, RADIO_H_PREFIX, RADIO_H_POS_GRID, RADIO_H_POS_GRID,
	       4 * RADIO_H_WIDTH, PROJ_HIDDEN, LM_HIDDEN, blocks, (double)(time_mono_ns() - t0) / 1e9);
	if (blocks == RADIO_H_DEPTH) {
		r = time_random(&w, blocks, px, n_tiles, 1, &vit32, &projn, &cpun, &prof);
		if (r < 0)
			goto out;
		printf("ViT (32 blocks, measured): %.0f ms/tile (cpu-normalised %.0f)\n", vit32 * 1e3,
		       cpun * 1e3);
	} else {
		r = time_random(&w, 1, px, n_tiles, 3, &vit1, &proj1, &cpu1, &prof);
		if (r == 0)
			r = time_random(&w, blocks, px, n_tiles, 3, &vitn, &projn, &cpun, &prof);
		if (r < 0)
			goto out;
		projn = fmin(proj1, projn);
		per_block = blocks > 1 ? (vitn - vit1) / (blocks - 1) : vit1;
		vit32 = vit1 + (RADIO_H_DEPTH - 1) * per_block;
		cpu_block = blocks > 1 ? (cpun - cpu1) / (blocks - 1) : cpu1;
		printf("ViT measured (best of 3): 1 block %.0f ms/tile, %d blocks %.0f ms/tile -> %.0f ms "
		       "per block (cpu-normalised %.0f)\n",
		       vit1 * 1e3, blocks, vitn * 1e3, per_block * 1e3, cpu_block * 1e3);
		printf("ViT (32 blocks, EXTRAPOLATED from %d measured): %.0f ms/tile (cpu-normalised %.0f)\n",
		       blocks, vit32 * 1e3, (cpu1 + (RADIO_H_DEPTH - 1) * cpu_block) * 1e3);
	}
	printf("projector (pixel shuffle + mlp1, measured): %.0f ms/tile\n", projn * 1e3);
	printf("vision encoder + projector: %.0f ms/tile%s\n", (vit32 + projn) * 1e3,
	       blocks == RADIO_H_DEPTH ? "" : " (extrapolated)");
	print_split(&prof, &w, TILE / RADIO_H_PATCH, blocks);
	{
		const int grid = TILE / RADIO_H_PATCH;
		float *pos = xmalloc((size_t)grid * grid * RADIO_H_WIDTH * sizeof(float));
		struct vision_gemms *gm = NULL;
		r = vision_pos_embed(&w, grid, grid, pos);
		if (r == 0)
			r = bench_gemms_create(&w, &gm);
		if (r == 0)
			r = print_steps(&w, gm, px, pos, grid);
		vision_gemms_destroy(gm);
		free(pos);
		if (r < 0)
			goto out;
	}
	bench_print_load();
out:
	for (size_t i = 0; i < n_pool; i++)
		free(pool[i]);
	free(pool);
	vision_weights_finish(&w);
	free(px);
	return r < 0 ? 1 : 0;
}

static int bench_model(struct engine_vision *v, int n_tiles)
{
	struct engine_vision_preprocess pre;
	int dim = engine_vision_embed_dim(v), tpt = engine_vision_tokens_per_tile(v);
	float *px, *out;
	double best = INFINITY;
	int r = 0;

	engine_vision_get_preprocess(v, &pre);
	if (pre.tile_size != TILE)
		printf("note: the checkpoint's tile is %d pixels\n", pre.tile_size);
	rng_state = 0x9e3779b97f4a7c15ull;
	px = xmalloc((size_t)n_tiles * 3 * pre.tile_size * pre.tile_size * sizeof(float));
	for (size_t i = 0; i < (size_t)n_tiles * 3 * pre.tile_size * pre.tile_size; i++)
		px[i] = 1.5f * frand();
	out = xmalloc((size_t)n_tiles * tpt * dim * sizeof(float));
	const struct vision_weights *w = engine_vision_weights(v);
	const int grid = engine_vision_grid_side(v);
	const size_t tile_px = (size_t)3 * pre.tile_size * pre.tile_size;
	float *feat = xmalloc((size_t)grid * grid * w->width * sizeof(float));
	struct vision_profile prof, best_prof = {0};
	struct vision_gemms *gm = NULL;
	r = bench_gemms_create(w, &gm);
	/* as vision_encode_gemms() runs the tiles, timed per operation */
	for (int k = 0; r == 0 && k < 2; k++) {
		uint64_t t0 = time_mono_ns();

		memset(&prof, 0, sizeof(prof));
		for (int t = 0; r == 0 && t < n_tiles; t++) {
			r = vision_vit_forward_profile(w, gm, px + (size_t)t * tile_px, grid, grid,
						       engine_vision_pos_grid(v), feat, &prof);
			if (r == 0)
				r = vision_project_profile(w, gm, feat, grid, grid,
							   out + (size_t)t * tpt * dim, &prof);
		}
		double s = (double)(time_mono_ns() - t0) / 1e9 / n_tiles;
		if (s < best) {
			best = s;
			best_prof = prof;
		}
	}
	if (r == 0) {
		printf("checkpoint vision encoder + projector (measured): %.0f ms/tile\n", best * 1e3);
		for (int op = 0; op < VISION_OP_COUNT; op++)
			best_prof.ns[op] /= (uint64_t)n_tiles;
		print_split(&best_prof, w, grid, w->depth);
		r = print_steps(w, gm, px, engine_vision_pos_grid(v), grid);
	}
	vision_gemms_destroy(gm);
	free(feat);
	free(px);
	free(out);
	return r;
}

/* Grid, tiles and prompt tokens of one step for a width x height screenshot. */
static int step_tokens(const struct engine_tokenizer *tok, const struct engine_vision *v,
		       const char *tok_name, int width, int height)
{
	struct engine_vision_grid g;
	struct engine_chat *chat;
	struct engine_chat_tokens t = {0}, first = {0};
	int tpt = v ? engine_vision_tokens_per_tile(v) : TOKENS_PER_TILE;
	char err[256];
	int r = engine_vision_select_grid(width, height, TILE, MAX_TILES, true, &g);

	if (r < 0)
		return r;
	printf("%dx%d: grid %dx%d%s = %d tiles -> %d image tokens + <img></img>", width, height, g.cols,
	       g.rows, g.thumbnail ? " + thumbnail" : "", g.n_tiles, g.n_tiles * tpt);
	if (!tok) {
		printf(" (chat overhead: needs --model or --tokenizer)\n");
		return 0;
	}
	/* without a vision tower (the random encoder) the user turn is rendered as text and the
	 * image block (<img>, the image tokens, </img>) is added by count: the "\n" after </img>
	 * may then tokenize differently, hence "about" */
	chat = engine_chat_create(tok, v, false, err, sizeof(err));
	if (!chat) {
		printf("\n");
		fprintf(stderr, "holo-bench vision: chat format: %s\n", err);
		return -errno;
	}
	struct engine_chat_message sys = {.role = ENGINE_CHAT_SYSTEM, .text = STEP_SYSTEM};
	struct engine_chat_message user = {.role = ENGINE_CHAT_USER, .text = STEP_USER};
	if (v) {
		user.image_tiles = &g.n_tiles;
		user.n_images = 1;
	}
	r = engine_chat_append(chat, &sys, &first, err, sizeof(err));
	if (r == 0)
		r = engine_chat_append(chat, &user, &t, err, sizeof(err));
	if (r == 0)
		r = engine_chat_generation_prompt(chat, &t);
	if (r == 0) {
		size_t img = (size_t)g.n_tiles * (size_t)tpt;
		size_t total = v ? t.n_ids : t.n_ids + img + 2;

		printf("\n  step prompt (user turn + generation prompt): %s%zu tokens = %zu image + %zu "
		       "chat/text; first step adds a system turn of %zu tokens [tokenizer: %s]\n",
		       v ? "" : "about ", total, img, total - img, first.n_ids, tok_name);
	} else {
		printf("\n");
		fprintf(stderr, "holo-bench vision: %s\n", err);
	}
	engine_chat_tokens_finish(&t);
	engine_chat_tokens_finish(&first);
	engine_chat_destroy(chat);
	return r;
}

int bench_vision_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"model", required_argument, NULL, 'm'},     {"blocks", required_argument, NULL, 'b'},
		{"tiles", required_argument, NULL, 'n'},     {"threads", required_argument, NULL, 't'},
		{"tokenizer", required_argument, NULL, 'k'}, {"help", no_argument, NULL, 'h'},
		{"precision", required_argument, NULL, 'P'}, {0},
	};
	const char *model_dir = NULL, *tok_path = NULL;
	int blocks = RADIO_H_DEPTH, n_tiles = 1, threads = 0, ret = 1;
	struct engine_model *m = NULL;
	struct engine_vision *v = NULL;
	struct engine_tokenizer *own_tok = NULL;
	const struct engine_tokenizer *tok = NULL;
	char err[512];

	for (int c; (c = getopt_long(argc, argv, "h", opts, NULL)) != -1;) {
		char *end = NULL;

		switch (c) {
		case 'm':
			model_dir = optarg;
			break;
		case 'b':
			blocks = (int)strtol(optarg, &end, 10);
			if (*end || blocks < 1 || blocks > RADIO_H_DEPTH) {
				fprintf(stderr, "holo-bench vision: --blocks takes 1..%d\n", RADIO_H_DEPTH);
				return 2;
			}
			break;
		case 'n':
			n_tiles = (int)strtol(optarg, &end, 10);
			if (*end || n_tiles < 1 || n_tiles > MAX_TILES + 1) {
				fprintf(stderr, "holo-bench vision: --tiles takes 1..%d\n", MAX_TILES + 1);
				return 2;
			}
			break;
		case 't':
			threads = (int)strtol(optarg, &end, 10);
			if (*end || threads < 1 || engine_set_threads(threads) < 0) {
				fprintf(stderr, "holo-bench vision: bad --threads\n");
				return 2;
			}
			break;
		case 'P':
			if (strcmp(optarg, "bf16") != 0 && strcmp(optarg, "fp32") != 0) {
				fprintf(stderr, "holo-bench vision: --precision is bf16 or fp32\n");
				return 2;
			}
			bench_bf16 = strcmp(optarg, "bf16") == 0;
			break;
		case 'k':
			tok_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc) {
		usage(stderr);
		return 2;
	}
	/* where oneDNN has no bf16 products (AVX2 alone) the backend's bf16 encode runs the fp32
	 * products (cpu_vision_steps()), and so does this */
	printf("threads %d, kernels %s, precision %s%s%s\n", engine_get_threads(), engine_cpu_kernels(),
	       !bench_bf16 ?
		       "fp32" :
	       cpu_dnnl_bf16_supported() ?
		       "bf16 (oneDNN products, vision row kernels " :
		       "bf16 (oneDNN has no bf16 products on this CPU: fp32 products, vision row kernels ",
	       bench_bf16 ? vision_rows()->name : "", bench_bf16 ? ")" : "");
	if (model_dir) {
		m = engine_model_load(model_dir, err, sizeof(err));
		if (!m) {
			fprintf(stderr, "holo-bench vision: %s: %s\n", model_dir, err);
			goto out;
		}
		v = engine_vision_create(m, err, sizeof(err));
		if (!v) {
			fprintf(stderr, "holo-bench vision: %s: %s\n", model_dir, err);
			goto out;
		}
		tok = engine_model_tokenizer(m);
		if (bench_model(v, n_tiles) < 0)
			goto out;
	} else if (bench_random(blocks, n_tiles) != 0) {
		goto out;
	}
	if (tok_path) {
		own_tok = engine_tokenizer_load(tok_path, err, sizeof(err));
		if (!own_tok) {
			fprintf(stderr, "holo-bench vision: %s\n", err);
			goto out;
		}
		tok = own_tok;
	}
	if (step_tokens(tok, v,
			tok_path  ? tok_path :
			model_dir ? model_dir :
				    "",
			1280, 800) < 0 ||
	    step_tokens(tok, v,
			tok_path  ? tok_path :
			model_dir ? model_dir :
				    "",
			1920, 1080) < 0)
		goto out;
	ret = 0;
out:
	engine_tokenizer_destroy(own_tok);
	engine_vision_destroy(v);
	engine_model_destroy(m);
	return ret;
}
