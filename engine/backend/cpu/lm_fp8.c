/* The linear layers held as fp8 (quant.h's QUANT_FP8), or an fp8 checkpoint's layers held as q8
 * or q4: lm_fp8_matrix(), called by lm_prepare() (lm_forward.c quantize_gemms). lm.h.
 *
 * DESIGN: an NVIDIA ModelOpt FP8 checkpoint (modelopt.h) stores a matrix as e4m3 codes [out, in]
 * in the map and its weight_scale apart (one value or one per row). Its rows are copied once
 * into quant.h's fp8 records, the codes as they are and the row's scale behind them (the record
 * keeps a row one stream for the GEMV, whatever the scale's shape), on the pool's threads; a NaN
 * code fails the load naming the row. Asked for q8 or q4, each row is dequantized exactly
 * (e4m3(c) * s in fp32) and quantized by the reference quantizers. A bf16/f16/f32 matrix asked
 * for fp8 gets ModelOpt's per-tensor recipe: s = max|w| / 448 over the matrix (a first pass on
 * the pool), then c = e4m3(w / s) row by row. Asked for bf16 (--weights bf16), the backend runs
 * on a copy of the model whose fp8 matrices are widened once to bf16 (lm_fp8_bf16_model():
 * e4m3(c) * s rounded to nearest even, a rounding of at most 2^-9 relative on top of fp8's).
 */
#include <errno.h>
#include <stdio.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "lm.h"
#include "modelopt.h"
#include "quant.h"

#define FP8_TASK_ROWS 64

struct fp8_job {
	const struct tensor *w, *scale; /* scale: the F8_E4M3 matrix's weight_scale */
	struct quant_tensor *q;
	float tensor_scale;	     /* bf16/f16/f32 -> fp8: the matrix's scale */
	float amax[CPU_MAX_THREADS]; /* pass 1 of bf16/f16/f32 -> fp8, per thread */
	_Atomic int err;
	_Atomic int64_t bad_row;
};

static void fail_row(struct fp8_job *j, int e, int64_t r)
{
	int zero = 0;
	if (atomic_compare_exchange_strong(&j->err, &zero, e))
		atomic_store(&j->bad_row, r);
}

/* pass 1 (bf16/f16/f32 -> fp8): the largest |w| of the task's rows, NaN or infinity refused */
static void amax_task(void *ctx, int task, int thread)
{
	struct fp8_job *j = ctx;
	const int64_t in = j->w->shape[1], r0 = (int64_t)task * FP8_TASK_ROWS;
	const int64_t r1 = MIN(r0 + FP8_TASK_ROWS, j->w->shape[0]);
	float *row = malloc((size_t)in * sizeof(float)), m = j->amax[thread];
	if (!row) {
		fail_row(j, -ENOMEM, r0);
		return;
	}
	for (int64_t r = r0; r < r1; r++) {
		cpu_tensor_to_f32(j->w, (size_t)(r * in), (size_t)in, row);
		for (int64_t k = 0; k < in; k++) {
			if (!isfinite(row[k])) {
				fail_row(j, -EINVAL, r);
				free(row);
				return;
			}
			m = fmaxf(m, fabsf(row[k]));
		}
	}
	j->amax[thread] = m;
	free(row);
}

static void rows_task(void *ctx, int task, int thread)
{
	(void)thread;
	struct fp8_job *j = ctx;
	const int64_t in = j->w->shape[1], r0 = (int64_t)task * FP8_TASK_ROWS;
	const int64_t r1 = MIN(r0 + FP8_TASK_ROWS, j->w->shape[0]);
	const enum quant_format f = j->q->format;
	float *row = malloc((size_t)in * sizeof(float));
	if (!row) {
		fail_row(j, -ENOMEM, r0);
		return;
	}
	for (int64_t r = r0; r < r1; r++) {
		void *dst = (char *)j->q->data + (size_t)r * j->q->row_bytes;
		int e = 0;
		if (j->w->dtype == TENSOR_F8_E4M3) {
			const uint8_t *codes = (const uint8_t *)j->w->data + (size_t)(r * in);
			float s = modelopt_row_scale(j->scale, r);
			if (f == QUANT_FP8) {
				e = quant_fp8_row_from_codes(codes, in, s, dst, NULL);
			} else {
				for (int64_t k = 0; k < in && e == 0; k++) {
					row[k] = quant_e4m3_to_f32(codes[k]) * s;
					if (isnan(row[k]))
						e = -EINVAL;
				}
				if (e == 0)
					e = quant_row_from_f32(f, row, in, dst);
			}
		} else {
			cpu_tensor_to_f32(j->w, (size_t)(r * in), (size_t)in, row);
			e = quant_fp8_row_from_f32(row, in, j->tensor_scale, dst);
		}
		if (e < 0) {
			fail_row(j, e, r);
			break;
		}
	}
	free(row);
}

int lm_fp8_matrix(const struct tensor *w, const struct tensor *scale, enum quant_format f,
		  struct quant_tensor *q, int64_t *bad_row)
{
	const bool from_fp8 = w->dtype == TENSOR_F8_E4M3;
	if (w->ndim != 2 || (from_fp8 && (!scale || !scale->data)) || (!from_fp8 && f != QUANT_FP8) ||
	    (unsigned)f >= QUANT_FORMAT_COUNT)
		return -EINVAL;
	size_t bytes, row_bytes;
	int r = quant_tensor_bytes(f, w->shape[0], w->shape[1], &bytes);
	if (r < 0)
		return r;
	quant_row_bytes(f, w->shape[1], &row_bytes);
	void *data = alloc_huge(bytes); /* read every token: huge pages (common.h) */
	if (!data)
		return -ENOMEM;
	*q = (struct quant_tensor){.format = f,
				   .rows = w->shape[0],
				   .cols = w->shape[1],
				   .row_bytes = row_bytes,
				   .data = data};
	struct fp8_job *j = calloc(1, sizeof(*j));
	if (!j) {
		free(data);
		q->data = NULL;
		return -ENOMEM;
	}
	j->w = w;
	j->scale = scale;
	j->q = q;
	atomic_init(&j->err, 0);
	atomic_init(&j->bad_row, -1);
	int tasks = (int)((w->shape[0] + FP8_TASK_ROWS - 1) / FP8_TASK_ROWS);
	if (!from_fp8) {
		cpu_parallel_for(tasks, amax_task, j);
		float amax = 0;
		for (int t = 0; t < CPU_MAX_THREADS; t++)
			amax = fmaxf(amax, j->amax[t]);
		if (atomic_load(&j->err) == 0 && quant_fp8_scale_for(amax, &j->tensor_scale) < 0)
			fail_row(j, -ERANGE, 0);
	}
	if (atomic_load(&j->err) == 0)
		cpu_parallel_for(tasks, rows_task, j);
	r = atomic_load(&j->err);
	*bad_row = atomic_load(&j->bad_row);
	free(j);
	if (r < 0) {
		free(data);
		q->data = NULL;
	}
	return r;
}

/* ---- an FP8 checkpoint's layers widened to bf16 (--weights bf16) -------------------------- */

struct bf16_model {
	struct engine_model m; /* first: the copy handed out */
	const struct engine_model *src;
};

struct widen_job {
	const struct tensor *w, *scale;
	uint16_t *out;
	_Atomic int64_t bad_row;
};

static void widen_task(void *ctx, int task, int thread)
{
	(void)thread;
	struct widen_job *j = ctx;
	const int64_t in = j->w->shape[1], r0 = (int64_t)task * FP8_TASK_ROWS;
	const int64_t r1 = MIN(r0 + FP8_TASK_ROWS, j->w->shape[0]);
	for (int64_t r = r0; r < r1; r++) {
		const uint8_t *c = (const uint8_t *)j->w->data + (size_t)(r * in);
		float s = modelopt_row_scale(j->scale, r);
		for (int64_t k = 0; k < in; k++) {
			if ((c[k] & 0x7f) == 0x7f) {
				int64_t none = -1;
				atomic_compare_exchange_strong(&j->bad_row, &none, r);
				return;
			}
			j->out[r * in + k] = f32_to_bf16(quant_e4m3_to_f32(c[k]) * s);
		}
	}
}

void lm_fp8_bf16_model_free(struct engine_model *d)
{
	struct bf16_model *b = (struct bf16_model *)d;
	if (!b)
		return;
	for (int l = 0; b->m.layers && l < b->m.cfg.n_layers; l++) {
		const struct tensor *mine[4], *theirs[4];
		int n = lm_layer_matrices(&b->m.layers[l], mine);
		lm_layer_matrices(&b->src->layers[l], theirs);
		for (int i = 0; i < n; i++)
			if (mine[i]->data != theirs[i]->data)
				free((void *)mine[i]->data);
	}
	free(b->m.layers);
	free(b);
}

struct engine_model *lm_fp8_bf16_model(const struct engine_model *m, char *err, size_t errlen)
{
	static const char *const names[3][4] = {
		{"mixer.in_proj", "mixer.out_proj"},
		{"mixer.q_proj", "mixer.k_proj", "mixer.v_proj", "mixer.o_proj"},
		{"mixer.up_proj", "mixer.down_proj"},
	};
	struct bf16_model *b = calloc(1, sizeof(*b));
	if (!b || !(b->m.layers = calloc((size_t)m->cfg.n_layers, sizeof(*b->m.layers)))) {
		free(b);
		errno = ENOMEM;
		return NULL;
	}
	struct lm_layer *layers = b->m.layers;
	b->m = *m;
	b->m.layers = layers;
	b->src = m;
	memcpy(layers, m->layers, sizeof(*layers) * (size_t)m->cfg.n_layers);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		struct lm_layer *L = &layers[l];
		const struct tensor *mats[4];
		int n = lm_layer_matrices(L, mats);
		for (int i = 0; i < n; i++) {
			struct tensor *t = (struct tensor *)mats[i];
			if (t->dtype != TENSOR_F8_E4M3)
				continue;
			size_t count = (size_t)t->shape[0] * (size_t)t->shape[1];
			struct widen_job j = {.w = t,
					      .scale = &L->fp8_scale[i],
					      /* read every token: huge pages (common.h) */
					      .out = alloc_huge(count * sizeof(uint16_t))};
			atomic_init(&j.bad_row, -1);
			if (!j.out) {
				lm_fp8_bf16_model_free(&b->m);
				errno = ENOMEM;
				return NULL;
			}
			cpu_parallel_for((int)((t->shape[0] + FP8_TASK_ROWS - 1) / FP8_TASK_ROWS), widen_task,
					 &j);
			/* the copy's matrix is the bf16 one from here on (freed with the copy) */
			*t = (struct tensor){.data = j.out,
					     .dtype = TENSOR_BF16,
					     .ndim = 2,
					     .shape = {t->shape[0], t->shape[1]},
					     .nbytes = count * sizeof(uint16_t)};
			memset(&L->fp8_scale[i], 0, sizeof(L->fp8_scale[i]));
			if (atomic_load(&j.bad_row) >= 0) {
				if (err && errlen)
					snprintf(err, errlen,
						 "cannot widen layer %d's %s to bf16: row %lld has a "
						 "NaN code",
						 l,
						 names[L->kind == LM_LAYER_MAMBA     ? 0 :
						       L->kind == LM_LAYER_ATTENTION ? 1 :
										       2][i],
						 (long long)atomic_load(&j.bad_row));
				lm_fp8_bf16_model_free(&b->m);
				errno = EINVAL;
				return NULL;
			}
		}
	}
	return &b->m;
}
