/* The ViT's blocks and the projector on the CPU in bf16 precision (vision_cpu.h): the matrix
 * products through oneDNN with bf16 activations written by the row kernels (vision_rows.h),
 * attention as oneDNN products per head and block of query rows (cpu_dnnl_small.h).
 *
 * Against the fp32 steps of vision_vit.c and vision_project.c, the passes are fused where that
 * saves a trip through memory: each bias add is folded into the step that next reads the
 * values (the residual's biases into the next LayerNorm, qkv's into attention's bf16 copies of
 * q, k and v, fc1's into the GELU), and each step that feeds a product writes its bf16 input
 * directly, which the product reads in place. (fc1's bias and GELU in oneDNN's epilogue instead,
 * writing bf16, made the blocks 10-25% slower on two threads: docs/benchmarks.md, issue 21.)
 *
 * DESIGN (threads): the functions run on the caller's thread and hand jobs to the CPU pool; every
 * buffer belongs to the call, tasks write disjoint rows (attention: disjoint (rows, head) blocks
 * of its output) and their own thread's scratch.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "cpu_dnnl_small.h"
#include "vision_cpu.h"
#include "vision_rows.h"

#define ROWS_PER_TASK 16
/* Query rows per attention task: the scores of one head for 64 rows of a 1032-token tile are
 * 264 KB of fp32 plus their bf16 copy, which stay in the core's L2 between the two products. */
#define ATTN_ROWS 64

/* ---- row steps --------------------------------------------------------------------------------- */

struct rows_job {
	const struct vision_rows_variant *k;
	float *x;
	size_t ldx;
	const float *add, *g, *b;
	int rows, cols;
	uint16_t *out; /* dense rows of cols */
};

static void layernorm_task(void *ctx, int task, int thread)
{
	const struct rows_job *j = ctx;
	(void)thread;
	int r1 = MIN((task + 1) * ROWS_PER_TASK, j->rows);
	for (int r = task * ROWS_PER_TASK; r < r1; r++)
		j->k->layernorm_bf16(j->x + (size_t)r * j->ldx, j->add, j->g, j->b, j->cols, VISION_LN_EPS,
				     j->out + (size_t)r * j->cols);
}

static void gelu_task(void *ctx, int task, int thread)
{
	const struct rows_job *j = ctx;
	(void)thread;
	int r1 = MIN((task + 1) * ROWS_PER_TASK, j->rows);
	for (int r = task * ROWS_PER_TASK; r < r1; r++)
		j->k->bias_gelu_bf16(j->x + (size_t)r * j->ldx, j->b, j->cols, j->out + (size_t)r * j->cols);
}

static void bias_task(void *ctx, int task, int thread)
{
	const struct rows_job *j = ctx;
	(void)thread;
	int r1 = MIN((task + 1) * ROWS_PER_TASK, j->rows);
	for (int r = task * ROWS_PER_TASK; r < r1; r++)
		j->k->bias_add(j->x + (size_t)r * j->ldx, j->b, j->cols);
}

static void rows_run(cpu_task_fn *fn, struct rows_job *j)
{
	j->k = vision_rows();
	cpu_parallel_for((j->rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, fn, j);
}

void vision_layernorm_bf16_rows(float *x, size_t ldx, const float *add, int rows, int cols, const float *g,
				const float *b, uint16_t *out)
{
	struct rows_job j =
		{.x = x, .ldx = ldx, .add = add, .g = g, .b = b, .rows = rows, .cols = cols, .out = out};
	rows_run(layernorm_task, &j);
}

void vision_bias_gelu_bf16_rows(const float *x, size_t ldx, int rows, int cols, const float *b, uint16_t *out)
{
	struct rows_job j = {.x = (float *)x, .ldx = ldx, .b = b, .rows = rows, .cols = cols, .out = out};
	rows_run(gelu_task, &j);
}

void vision_bias_add_rows(float *x, size_t ldx, int rows, int cols, const float *b)
{
	struct rows_job j = {.x = x, .ldx = ldx, .b = b, .rows = rows, .cols = cols};
	rows_run(bias_task, &j);
}

/* ---- the projector's rows ------------------------------------------------------------------------- */

struct shuffle_job {
	const struct vision_rows_variant *k;
	const float *features, *g;
	int cols, D, s, ocol;
	float *gather; /* per thread: one token of s * s * D floats */
	uint16_t *out;
};

static void shuffle_task(void *ctx, int task, int thread)
{
	const struct shuffle_job *j = ctx;
	const int i = task / j->ocol, jj = task % j->ocol, P = j->D * j->s * j->s;
	float *t = j->gather + (size_t)thread * P;

	/* vision_shuffle_norm()'s order: di outer, dj inner */
	for (int di = 0; di < j->s; di++)
		for (int dj = 0; dj < j->s; dj++)
			memcpy(t + (size_t)(di * j->s + dj) * j->D,
			       j->features +
				       ((size_t)(j->s * i + di) * j->cols + (size_t)(j->s * jj + dj)) * j->D,
			       sizeof(float) * (size_t)j->D);
	j->k->rmsnorm_bf16(t, j->g, P, VISION_RMS_EPS, j->out + (size_t)task * P);
}

int vision_shuffle_norm_bf16(const float *features, int rows, int cols, int D, int s, const float *g,
			     uint16_t *out)
{
	const int P = D * s * s;
	struct shuffle_job j = {.k = vision_rows(),
				.features = features,
				.g = g,
				.cols = cols,
				.D = D,
				.s = s,
				.ocol = cols / s,
				.out = out};

	j.gather = malloc(sizeof(float) * (size_t)P * (size_t)cpu_threads());
	if (!j.gather)
		return -ENOMEM;
	cpu_parallel_for((rows / s) * (cols / s), shuffle_task, &j);
	free(j.gather);
	return 0;
}

static void relu2_task(void *ctx, int task, int thread)
{
	const struct rows_job *j = ctx;
	(void)thread;
	int r1 = MIN((task + 1) * ROWS_PER_TASK, j->rows);
	for (int r = task * ROWS_PER_TASK; r < r1; r++)
		j->k->relu2_bf16(j->x + (size_t)r * j->ldx, j->cols, j->out + (size_t)r * j->cols);
}

void vision_relu2_bf16_rows(const float *x, size_t ldx, int rows, int cols, uint16_t *out)
{
	struct rows_job j = {.x = (float *)x, .ldx = ldx, .rows = rows, .cols = cols, .out = out};
	rows_run(relu2_task, &j);
}

/* ---- products ------------------------------------------------------------------------------------ */

int vision_gemm_bf16(const struct cpu_dnnl_weight *dw, const struct tensor *w, const uint16_t *x, int T,
		     float *y, size_t ldy, bool accumulate)
{
	int r = cpu_dnnl_matmul_bf16(dw, x, T, y, ldy, accumulate);
	if (r != -ENOTSUP)
		return r;
	/* no fast oneDNN kernel for this product: cpu_matmul() on the same bf16 values */
	size_t in = (size_t)w->shape[1], n = (size_t)T * in;
	float *xf = malloc(sizeof(float) * MAX(n, 1));
	if (!xf)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		xf[i] = bf16_to_f32(x[i]);
	r = cpu_matmul(w, xf, in, T, y, ldy, accumulate);
	free(xf);
	return r;
}

/* ---- attention ----------------------------------------------------------------------------------- */

struct attn_job {
	const struct vision_rows_variant *k;
	const float *qkv, *bias;
	int L, D, heads, hd, blocks;		   /* blocks: of ATTN_ROWS query rows per head */
	uint16_t *qkv_b;			   /* [3][heads][L][hd]: q, k, v of each head, dense */
	uint16_t *out;				   /* [L][D] */
	struct cpu_dnnl_small *scores[2], *sum[2]; /* full block, last block */
	float *scratch;
	size_t scratch_floats; /* per thread */
	_Atomic int err;
};

/* q, k, v of ROWS_PER_TASK tokens plus their biases, to bf16, split by head */
static void attn_pack_task(void *ctx, int task, int thread)
{
	const struct attn_job *j = ctx;
	(void)thread;
	int t1 = MIN((task + 1) * ROWS_PER_TASK, j->L);
	for (int t = task * ROWS_PER_TASK; t < t1; t++)
		for (int part = 0; part < 3; part++)
			for (int h = 0; h < j->heads; h++) {
				size_t col = (size_t)part * j->D + (size_t)h * j->hd;
				uint16_t *dst = j->qkv_b + (((size_t)part * j->heads + h) * j->L + t) * j->hd;
				j->k->bias_bf16(j->qkv + (size_t)t * 3 * j->D + col, j->bias + col, j->hd,
						dst);
			}
}

/* one head's attention for one block of query rows: S = Q K^T, P = exp((S - max) * scale)
 * in bf16 with its row sums, O = P V, out = O / sum */
static void attn_task(void *ctx, int task, int thread)
{
	struct attn_job *j = ctx;
	int h = task / j->blocks, blk = task % j->blocks;
	int r0 = blk * ATTN_ROWS, m = MIN(ATTN_ROWS, j->L - r0), last = m < ATTN_ROWS;
	size_t head = (size_t)j->L * j->hd;
	const uint16_t *q = j->qkv_b + (size_t)h * head + (size_t)r0 * j->hd;
	const uint16_t *kk = j->qkv_b + ((size_t)j->heads + h) * head;
	const uint16_t *v = j->qkv_b + ((size_t)2 * j->heads + h) * head;
	float *s = j->scratch + (size_t)thread * j->scratch_floats;
	float *o = s + (size_t)ATTN_ROWS * j->L;
	float *sums = o + (size_t)ATTN_ROWS * j->hd;
	uint16_t *p = (uint16_t *)(sums + ATTN_ROWS);
	const float scale = 1.0f / sqrtf((float)j->hd);

	int r = cpu_dnnl_small_run(j->scores[last], thread, q, kk, s);
	if (r < 0)
		goto fail;
	for (int i = 0; i < m; i++)
		sums[i] = j->k->softmax_bf16(s + (size_t)i * j->L, j->L, scale, p + (size_t)i * j->L);
	r = cpu_dnnl_small_run(j->sum[last], thread, p, v, o);
	if (r < 0)
		goto fail;
	for (int i = 0; i < m; i++)
		j->k->scale_bf16(o + (size_t)i * j->hd, 1.0f / sums[i], j->hd,
				 j->out + (size_t)(r0 + i) * j->D + (size_t)h * j->hd);
	return;
fail:
	atomic_store(&j->err, r);
}

/* Where oneDNN has no fast kernel for the products: vision_attention()'s fp32 path on q, k and v
 * with their biases, rounded to bf16 at the end. */
static int attention_fallback(const float *qkv, const float *qkv_bias, int L, int D, int heads, uint16_t *out)
{
	const size_t n = (size_t)L * 3 * D;
	float *x = malloc(sizeof(float) * n), *att = malloc(sizeof(float) * (size_t)L * D);
	int r = -ENOMEM;

	if (!x || !att)
		goto out;
	memcpy(x, qkv, sizeof(float) * n);
	vision_bias_add_rows(x, (size_t)3 * D, L, 3 * D, qkv_bias);
	if ((r = vision_attention(x, att, L, D, heads)) == 0)
		cpu_f32_to_bf16(att, out, (size_t)L * D);
out:
	free(x);
	free(att);
	return r;
}

/* per thread: S [ATTN_ROWS][L] fp32, O [ATTN_ROWS][hd] fp32, the sums, P [ATTN_ROWS][L] bf16;
 * in floats, a multiple of 16 (64 bytes) */
static size_t attn_thread_floats(int L, int hd)
{
	size_t n =
		(size_t)ATTN_ROWS * L + (size_t)ATTN_ROWS * hd + ATTN_ROWS + ((size_t)ATTN_ROWS * L + 1) / 2;
	return (n + 15) / 16 * 16;
}

/* bytes of the bf16 copies of q, k and v, rounded up to 64 */
static size_t attn_copies_bytes(int L, int D)
{
	return (sizeof(uint16_t) * 3 * (size_t)L * D + 63) / 64 * 64;
}

size_t vision_attention_bf16_scratch(int L, int D, int heads)
{
	if (L < 1 || heads < 1 || D < heads)
		return 0;
	return attn_copies_bytes(L, D) +
	       sizeof(float) * attn_thread_floats(L, D / heads) * (size_t)cpu_threads();
}

int vision_attention_bf16(const float *qkv, const float *qkv_bias, int L, int D, int heads, void *scratch,
			  uint16_t *out)
{
	if (L < 1 || heads < 1 || D % heads != 0 || !scratch)
		return -EINVAL;
	const int hd = D / heads, blocks = (L + ATTN_ROWS - 1) / ATTN_ROWS;
	const int tail = L - (blocks - 1) * ATTN_ROWS;
	struct attn_job j = {.k = vision_rows(),
			     .qkv = qkv,
			     .bias = qkv_bias,
			     .L = L,
			     .D = D,
			     .heads = heads,
			     .hd = hd,
			     .blocks = blocks,
			     .out = out,
			     .scratch_floats = attn_thread_floats(L, hd)};
	int r;

	j.qkv_b = scratch;
	j.scratch = (float *)((char *)scratch + attn_copies_bytes(L, D));
	atomic_init(&j.err, 0);
	r = cpu_dnnl_small_get(ATTN_ROWS, hd, L, (size_t)hd, (size_t)hd, true, (size_t)L, false, &j.scores[0]);
	if (r == 0)
		r = cpu_dnnl_small_get(tail, hd, L, (size_t)hd, (size_t)hd, true, (size_t)L, false,
				       &j.scores[1]);
	if (r == 0)
		r = cpu_dnnl_small_get(ATTN_ROWS, L, hd, (size_t)L, (size_t)hd, false, (size_t)hd, false,
				       &j.sum[0]);
	if (r == 0)
		r = cpu_dnnl_small_get(tail, L, hd, (size_t)L, (size_t)hd, false, (size_t)hd, false,
				       &j.sum[1]);
	if (r == -ENOTSUP) {
		r = attention_fallback(qkv, qkv_bias, L, D, heads, out);
		goto out;
	}
	if (r < 0)
		goto out;
	cpu_parallel_for((L + ROWS_PER_TASK - 1) / ROWS_PER_TASK, attn_pack_task, &j);
	cpu_parallel_for(heads * blocks, attn_task, &j);
	r = atomic_load(&j.err);
out:
	for (int i = 0; i < 2; i++) {
		cpu_dnnl_small_put(j.scores[i]);
		cpu_dnnl_small_put(j.sum[i]);
	}
	return r;
}
