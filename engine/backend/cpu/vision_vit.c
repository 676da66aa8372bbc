/* engine: the RADIO ViT on the CPU (model.md 4.2-4.5): patch embedding, CPE position
 * embedding, prefix tokens, pre-LN blocks, optional final norm. fp32 math over weights in their
 * stored dtype.
 *
 * DESIGN (threads): vision_vit_forward() runs on the caller's thread and hands jobs to the CPU
 * pool (engine/backend/cpu/cpu.h): the matmuls, and row blocks of the element-wise steps and attention.
 * Every buffer belongs to the call; tasks write disjoint rows.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "vision_cpu.h"

#define ROWS_PER_TASK 16

/* ---- row-parallel element-wise steps ---------------------------------------------------------- */

enum row_op {
	ROW_LAYERNORM, /* out = LN(in) * g + b */
	ROW_BIAS,      /* out += b */
	ROW_BIAS_GELU, /* out = gelu(out + b) */
	ROW_SOFTMAX,   /* out = softmax(out * scale) */
};

struct row_job {
	enum row_op op;
	const float *in;
	float *out;
	int n_rows, n_cols;
	size_t ld_in, ld_out;
	const float *g, *b;
	float scale;
};

static void row_task(void *ctx, int task, int thread)
{
	const struct row_job *j = ctx;
	int r1 = MIN((task + 1) * ROWS_PER_TASK, j->n_rows);

	for (int r = task * ROWS_PER_TASK; r < r1; r++) {
		float *o = j->out + (size_t)r * j->ld_out;
		int n = j->n_cols;

		switch (j->op) {
		case ROW_LAYERNORM: {
			const float *x = j->in + (size_t)r * j->ld_in;
			double sum = 0, sq = 0;
			float mean, rstd;

			for (int c = 0; c < n; c++)
				sum += x[c];
			mean = (float)(sum / n);
			for (int c = 0; c < n; c++)
				sq += ((double)x[c] - mean) * ((double)x[c] - mean);
			rstd = (float)(1.0 / sqrt(sq / n + (double)VISION_LN_EPS));
			for (int c = 0; c < n; c++)
				o[c] = (x[c] - mean) * rstd * j->g[c] + j->b[c];
			break;
		}
		case ROW_BIAS:
			for (int c = 0; c < n; c++)
				o[c] += j->b[c];
			break;
		case ROW_SOFTMAX: {
			float mx = -INFINITY, sum = 0.0f;

			for (int c = 0; c < n; c++) {
				o[c] *= j->scale;
				mx = MAX(mx, o[c]);
			}
			for (int c = 0; c < n; c++) {
				o[c] = expf(o[c] - mx);
				sum += o[c];
			}
			for (int c = 0; c < n; c++)
				o[c] /= sum;
			break;
		}
		case ROW_BIAS_GELU:
			for (int c = 0; c < n; c++) {
				float v = o[c] + j->b[c];

				o[c] = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
			}
			break;
		}
	}
}

static void rows_run(enum row_op op, const float *in, size_t ld_in, float *out, size_t ld_out, int n_rows,
		     int n_cols, const float *g, const float *b)
{
	struct row_job j = {op, in, out, n_rows, n_cols, ld_in, ld_out, g, b, 1.0f};

	cpu_parallel_for((n_rows + ROWS_PER_TASK - 1) / ROWS_PER_TASK, row_task, &j);
}

void vision_layernorm_rows(const float *in, size_t ld_in, float *out, size_t ld_out, int rows, int cols,
			   const float *g, const float *b)
{
	rows_run(ROW_LAYERNORM, in, ld_in, out, ld_out, rows, cols, g, b);
}

void vision_bias_rows(float *x, size_t ld, int rows, int cols, const float *b)
{
	rows_run(ROW_BIAS, NULL, 0, x, ld, rows, cols, NULL, b);
}

void vision_bias_gelu_rows(float *x, size_t ld, int rows, int cols, const float *b)
{
	rows_run(ROW_BIAS_GELU, NULL, 0, x, ld, rows, cols, NULL, b);
}

/* ---- attention ----------------------------------------------------------------------------------- */

/* softmax(q k^T * scale) v per head, as three matmuls on the pool: S = Q K^T (K as the weight),
 * row softmax of S, O^T = V^T S^T (S as the weight, so the work splits over its L rows). */
int vision_attention(const float *qkv, float *out, int L, int D, int heads)
{
	const int hd = D / heads;
	const size_t ld = (size_t)3 * D;
	float *k = malloc(sizeof(float) * (size_t)L * hd);
	float *vt = malloc(sizeof(float) * (size_t)hd * L);
	float *ot = malloc(sizeof(float) * (size_t)hd * L);
	float *s = malloc(sizeof(float) * (size_t)L * L);
	struct tensor tk = {.data = k,
			    .dtype = TENSOR_F32,
			    .ndim = 2,
			    .shape = {L, hd},
			    .nbytes = sizeof(float) * (size_t)L * hd};
	struct tensor ts = {.data = s,
			    .dtype = TENSOR_F32,
			    .ndim = 2,
			    .shape = {L, L},
			    .nbytes = sizeof(float) * (size_t)L * L};
	struct row_job soft = {.op = ROW_SOFTMAX,
			       .out = s,
			       .n_rows = L,
			       .n_cols = L,
			       .ld_out = (size_t)L,
			       .scale = 1.0f / sqrtf((float)hd)};
	int r = -ENOMEM;

	if (!k || !vt || !ot || !s)
		goto out;
	for (int h = 0; h < heads; h++) {
		const float *q = qkv + (size_t)h * hd;

		for (int t = 0; t < L; t++) {
			memcpy(k + (size_t)t * hd, qkv + (size_t)t * ld + D + (size_t)h * hd,
			       sizeof(float) * (size_t)hd);
			for (int d = 0; d < hd; d++)
				vt[(size_t)d * L + t] =
					qkv[(size_t)t * ld + 2 * (size_t)D + (size_t)h * hd + d];
		}
		if ((r = cpu_matmul(&tk, q, ld, L, s, (size_t)L, false)) < 0)
			goto out;
		cpu_parallel_for((L + ROWS_PER_TASK - 1) / ROWS_PER_TASK, row_task, &soft);
		if ((r = cpu_matmul(&ts, vt, (size_t)L, hd, ot, (size_t)L, false)) < 0)
			goto out;
		for (int t = 0; t < L; t++)
			for (int d = 0; d < hd; d++)
				out[(size_t)t * D + (size_t)h * hd + d] = ot[(size_t)d * L + t];
	}
	r = 0;
out:
	free(k);
	free(vt);
	free(ot);
	free(s);
	return r;
}

/* ---- patches ----------------------------------------------------------------------------------- */

void vision_patchify(const float *pixels, int rows, int cols, int p, float *patches)
{
	const size_t pp = (size_t)p * (size_t)p;
	const size_t img_w = (size_t)cols * (size_t)p, img_h = (size_t)rows * (size_t)p;

	/* patches[py * cols + px][c * p * p + yy * p + xx] = pixels[c][py * p + yy][px * p + xx] */
	for (int py = 0; py < rows; py++)
		for (int px = 0; px < cols; px++)
			for (int c = 0; c < 3; c++)
				for (int yy = 0; yy < p; yy++)
					memcpy(patches + ((size_t)(py * cols + px) * 3 + c) * pp +
						       (size_t)yy * p,
					       pixels + ((size_t)c * img_h + (size_t)(py * p + yy)) * img_w +
						       (size_t)px * p,
					       sizeof(float) * (size_t)p);
}

/* ---- the tower ---------------------------------------------------------------------------------- */

/* A block's small vectors in fp32. */
struct block_vecs {
	float *n1w, *n1b, *qkvb, *projb, *n2w, *n2b, *fc1b, *fc2b;
};

static void vec(const struct tensor *t, float **p, float **cursor)
{
	size_t n = t->nbytes / (t->dtype == TENSOR_F32 ? 4 : 2);

	*p = *cursor;
	cpu_tensor_to_f32(t, 0, n, *p);
	*cursor += n;
}

int vision_vit_forward(const struct vision_weights *w, const float *pixels, int rows, int cols,
		       const float *pos, float *features)
{
	return vision_vit_forward_gemms(w, NULL, pixels, rows, cols, pos, features);
}

const char *vision_op_name(enum vision_op op)
{
	static const char *const names[VISION_OP_COUNT] = {
		[VISION_OP_EMBED] = "patch embed",
		[VISION_OP_NORM] = "layernorm",
		[VISION_OP_GEMM] = "matrix products",
		[VISION_OP_BIAS] = "bias adds",
		[VISION_OP_ATTENTION] = "attention",
		[VISION_OP_GELU] = "bias+gelu",
		[VISION_OP_PROJ_ROWS] = "projector shuffle+norm, relu2",
		[VISION_OP_PROJ_GEMM] = "projector products",
	};
	return op >= 0 && op < VISION_OP_COUNT ? names[op] : "?";
}

int vision_vit_forward_gemms(const struct vision_weights *w, const struct vision_gemms *gm,
			     const float *pixels, int rows, int cols, const float *pos, float *features)
{
	return vision_vit_forward_profile(w, gm, pixels, rows, cols, pos, features, NULL);
}

/* floats of a block's vectors: 9 of the width, one of the MLP */
#define VECS_FLOATS(D, M) ((size_t)(D)*9 + (size_t)(M))

static void block_vecs_load(const struct vision_block *b, float *vecs, struct block_vecs *bv)
{
	float *cursor = vecs;

	vec(&b->norm1_w, &bv->n1w, &cursor);
	vec(&b->norm1_b, &bv->n1b, &cursor);
	vec(&b->qkv_b, &bv->qkvb, &cursor);
	vec(&b->proj_b, &bv->projb, &cursor);
	vec(&b->norm2_w, &bv->n2w, &cursor);
	vec(&b->norm2_b, &bv->n2b, &cursor);
	vec(&b->fc1_b, &bv->fc1b, &cursor);
	vec(&b->fc2_b, &bv->fc2b, &cursor);
}

void vision_vit_run_finish(struct vision_vit_run *run)
{
	free(run->x);
	free(run->patches);
	free(run->vecs);
	free(run->a);
	free(run->qkv);
	free(run->att);
	free(run->hid);
	free(run->a_b);
	free(run->att_b);
	free(run->hid_b);
	free(run->att_scratch);
	*run = (struct vision_vit_run){0};
}

int vision_vit_run_init(struct vision_vit_run *run, const struct vision_weights *w, bool bf16, int rows,
			int cols)
{
	const int D = w->width, M = w->mlp, pp = w->patch * w->patch;
	const int N = rows * cols, L = w->n_prefix + N;

	*run = (struct vision_vit_run){.w = w, .bf16 = bf16, .rows = rows, .cols = cols, .L = L};
	run->x = malloc(sizeof(float) * (size_t)L * D);
	run->patches = malloc(sizeof(float) * (size_t)N * 3 * pp);
	/* two blocks' vectors (the bf16 blocks alternate), which also hold the final norm's */
	run->vecs = malloc(sizeof(float) * 2 * VECS_FLOATS(D, M));
	run->qkv = malloc(sizeof(float) * (size_t)L * 3 * D);
	run->hid = malloc(sizeof(float) * (size_t)L * M);
	if (bf16) {
		run->a_b = malloc(sizeof(uint16_t) * (size_t)L * D);
		run->att_b = malloc(sizeof(uint16_t) * (size_t)L * D);
		run->hid_b = malloc(sizeof(uint16_t) * (size_t)L * M);
	} else {
		run->a = malloc(sizeof(float) * (size_t)L * D);
		run->att = malloc(sizeof(float) * (size_t)L * D);
	}
	if (!run->x || !run->patches || !run->vecs || !run->qkv || !run->hid ||
	    (bf16 ? !run->a_b || !run->att_b || !run->hid_b : !run->a || !run->att)) {
		vision_vit_run_finish(run);
		return -ENOMEM;
	}
	return 0;
}

int vision_vit_run_embed(struct vision_vit_run *run, const struct vision_gemms *gm, const float *pixels,
			 const float *pos, struct vision_profile *prof)
{
	const struct vision_weights *w = run->w;
	const int D = w->width, T = w->n_prefix, p = w->patch, N = run->rows * run->cols;
	int r;

	if ((gm != NULL) != run->bf16)
		return -EINVAL;
	uint64_t t0 = vision_prof_start(prof);
	vision_patchify(pixels, run->rows, run->cols, p, run->patches);
	if ((r = vision_gemm(gm ? gm->embedder : NULL, &w->embedder, run->patches, (size_t)3 * p * p, N,
			     run->x + (size_t)T * D, (size_t)D, false)) < 0)
		return r;
	for (size_t k = 0; k < (size_t)N * D; k++)
		run->x[(size_t)T * D + k] += pos[k];
	cpu_tensor_to_f32(&w->cls_token, 0, (size_t)T * D, run->x);
	vision_prof_end(prof, VISION_OP_EMBED, t0);
	run->block = 0;
	run->pending = NULL;
	return 0;
}

/* Block i in bf16 precision on the residual stream x [L][D] (vision_bf16.c's steps): each
 * residual bias is added by the step that next reads x (proj's by the second LayerNorm, fc2's
 * by the next block's first, the last block's by vision_vit_run_final()), so x leaves the
 * last block as the fp32 blocks leave it. */
static int block_bf16(struct vision_vit_run *run, const struct vision_gemms *gm, int i,
		      struct vision_profile *prof)
{
	const struct vision_weights *w = run->w;
	const struct vision_block *b = &w->blocks[i];
	const int D = w->width, M = w->mlp, L = run->L;
	float *x = run->x;
	struct block_vecs bv;
	uint64_t t0;
	int r;

	/* the scratch follows the pool's thread count, which may change between two blocks */
	size_t scratch_bytes = MAX(vision_attention_bf16_scratch(L, D, w->heads), (size_t)64);
	if (scratch_bytes > run->scratch_bytes) {
		free(run->att_scratch);
		run->scratch_bytes = 0;
		if (posix_memalign(&run->att_scratch, 64, scratch_bytes) != 0) {
			run->att_scratch = NULL;
			return -ENOMEM;
		}
		run->scratch_bytes = scratch_bytes;
	}
	/* the previous block's fc2 bias is still needed while this block's LayerNorm adds it:
	 * the vectors alternate between the two halves of vecs */
	block_vecs_load(b, run->vecs + (i % 2) * VECS_FLOATS(D, M), &bv);

	t0 = vision_prof_start(prof);
	vision_layernorm_bf16_rows(x, D, run->pending, L, D, bv.n1w, bv.n1b, run->a_b);
	vision_prof_end(prof, VISION_OP_NORM, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm_bf16(gm->blocks[i].m[0], &b->qkv_w, run->a_b, L, run->qkv, (size_t)3 * D,
				  false)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_GEMM, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_attention_bf16(run->qkv, bv.qkvb, L, D, w->heads, run->att_scratch, run->att_b)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_ATTENTION, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm_bf16(gm->blocks[i].m[1], &b->proj_w, run->att_b, L, x, D, true)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_GEMM, t0);

	t0 = vision_prof_start(prof);
	vision_layernorm_bf16_rows(x, D, bv.projb, L, D, bv.n2w, bv.n2b, run->a_b);
	vision_prof_end(prof, VISION_OP_NORM, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm_bf16(gm->blocks[i].m[2], &b->fc1_w, run->a_b, L, run->hid, M, false)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_GEMM, t0);
	t0 = vision_prof_start(prof);
	vision_bias_gelu_bf16_rows(run->hid, M, L, M, bv.fc1b, run->hid_b);
	vision_prof_end(prof, VISION_OP_GELU, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm_bf16(gm->blocks[i].m[3], &b->fc2_w, run->hid_b, L, x, D, true)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_GEMM, t0);
	run->pending = bv.fc2b;
	return 0;
}

/* Block i in fp32. */
static int block_fp32(struct vision_vit_run *run, int i, struct vision_profile *prof)
{
	const struct vision_weights *w = run->w;
	const struct vision_block *b = &w->blocks[i];
	const int D = w->width, M = w->mlp, L = run->L;
	float *x = run->x, *a = run->a, *qkv = run->qkv, *att = run->att, *hid = run->hid;
	struct block_vecs bv;
	uint64_t t0;
	int r;

	block_vecs_load(b, run->vecs, &bv);

	t0 = vision_prof_start(prof);
	vision_layernorm_rows(x, D, a, D, L, D, bv.n1w, bv.n1b);
	vision_prof_end(prof, VISION_OP_NORM, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm(NULL, &b->qkv_w, a, D, L, qkv, (size_t)3 * D, false)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_GEMM, t0);
	t0 = vision_prof_start(prof);
	vision_bias_rows(qkv, (size_t)3 * D, L, 3 * D, bv.qkvb);
	vision_prof_end(prof, VISION_OP_BIAS, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_attention(qkv, att, L, D, w->heads)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_ATTENTION, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm(NULL, &b->proj_w, att, D, L, x, D, true)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_GEMM, t0);
	t0 = vision_prof_start(prof);
	vision_bias_rows(x, D, L, D, bv.projb);
	vision_prof_end(prof, VISION_OP_BIAS, t0);

	t0 = vision_prof_start(prof);
	vision_layernorm_rows(x, D, a, D, L, D, bv.n2w, bv.n2b);
	vision_prof_end(prof, VISION_OP_NORM, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm(NULL, &b->fc1_w, a, D, L, hid, M, false)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_GEMM, t0);
	t0 = vision_prof_start(prof);
	vision_bias_gelu_rows(hid, M, L, M, bv.fc1b);
	vision_prof_end(prof, VISION_OP_GELU, t0);
	t0 = vision_prof_start(prof);
	if ((r = vision_gemm(NULL, &b->fc2_w, hid, M, L, x, D, true)) < 0)
		return r;
	vision_prof_end(prof, VISION_OP_GEMM, t0);
	t0 = vision_prof_start(prof);
	vision_bias_rows(x, D, L, D, bv.fc2b);
	vision_prof_end(prof, VISION_OP_BIAS, t0);
	return 0;
}

int vision_vit_run_block(struct vision_vit_run *run, const struct vision_gemms *gm,
			 struct vision_profile *prof)
{
	if ((gm != NULL) != run->bf16 || run->block >= run->w->depth)
		return -EINVAL;
	int r = gm ? block_bf16(run, gm, run->block, prof) : block_fp32(run, run->block, prof);
	if (r == 0)
		run->block++;
	return r;
}

int vision_vit_run_final(struct vision_vit_run *run, float *features, struct vision_profile *prof)
{
	const struct vision_weights *w = run->w;
	const int D = w->width, T = w->n_prefix, N = run->rows * run->cols;
	struct block_vecs bv;
	uint64_t t0;

	if (run->block != w->depth)
		return -EINVAL;
	if (run->pending) {
		t0 = vision_prof_start(prof);
		vision_bias_add_rows(run->x, D, run->L, D, run->pending);
		vision_prof_end(prof, VISION_OP_BIAS, t0);
		run->pending = NULL;
	}
	t0 = vision_prof_start(prof);
	if (w->norm_w.data) {
		float *cursor = run->vecs;
		vec(&w->norm_w, &bv.n1w, &cursor);
		vec(&w->norm_b, &bv.n1b, &cursor);
		vision_layernorm_rows(run->x + (size_t)T * D, D, features, D, N, D, bv.n1w, bv.n1b);
	} else {
		memcpy(features, run->x + (size_t)T * D, sizeof(float) * (size_t)N * D);
	}
	vision_prof_end(prof, VISION_OP_NORM, t0);
	return 0;
}

int vision_vit_forward_profile(const struct vision_weights *w, const struct vision_gemms *gm,
			       const float *pixels, int rows, int cols, const float *pos, float *features,
			       struct vision_profile *prof)
{
	struct vision_vit_run run;
	int r = vision_vit_run_init(&run, w, gm != NULL, rows, cols);

	if (r < 0)
		return r;
	r = vision_vit_run_embed(&run, gm, pixels, pos, prof);
	for (int i = 0; r == 0 && i < w->depth; i++)
		r = vision_vit_run_block(&run, gm, prof);
	if (r == 0)
		r = vision_vit_run_final(&run, features, prof);
	vision_vit_run_finish(&run);
	return r;
}
