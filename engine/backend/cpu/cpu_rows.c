/* The row kernels of bf16 precision (cpu_rows.h): the portable C variant, the variant table and
 * its run-time choice, and the pool jobs that split rows, channels and elements across threads.
 *
 * DESIGN: a job has a few tasks per pool thread (so a thread descheduled on a loaded machine
 * leaves its share to the others, as every pool task does), each over a contiguous range that
 * starts at a multiple of 16 elements or channels: with 64-byte aligned buffers no two tasks
 * write the same cache line. The variant is read once per job, so a job never mixes two.
 */
#include "cpu_rows.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu_isa.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "loader.h"

_Static_assert(MODEL_MAX_KERNEL <= CPU_CONV_MAX_K, "a model's conv kernel fits the row kernels");

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86 1
#endif

/* tasks per pool thread */
#define TASKS_PER_THREAD 4
#define ALIGN 16

/* ---- portable C ---------------------------------------------------------------------------- */

static void portable_rmsnorm(const float *x, float *out, const float *w, int n, float eps)
{
	float ss = 0;
	for (int i = 0; i < n; i++)
		ss += x[i] * x[i];
	float scale = 1.0f / sqrtf(ss / (float)n + eps);
	for (int i = 0; i < n; i++)
		out[i] = w[i] * (x[i] * scale);
}

static void portable_gated_rmsnorm(float *y, const float *z, const float *w, int groups, int gs, float eps)
{
	for (int g = 0; g < groups; g++) {
		float *u = y + (size_t)g * gs;
		const float *zg = z + (size_t)g * gs;
		float ss = 0;
		for (int i = 0; i < gs; i++) {
			u[i] *= zg[i] / (1.0f + expf(-zg[i]));
			ss += u[i] * u[i];
		}
		float scale = 1.0f / sqrtf(ss / (float)gs + eps);
		for (int i = 0; i < gs; i++)
			u[i] = w[(size_t)g * gs + i] * (u[i] * scale);
	}
}

static void portable_conv_silu(const struct cpu_conv_args *a, int c0, int c1)
{
	const int K = a->K, cd = a->channels;
	for (int t = 0; t < a->T; t++) {
		float *o = a->out + (size_t)t * a->ldo;
		for (int c = c0; c < c1; c++)
			o[c] = a->bias[c];
		for (int k = 0; k < K; k++) {
			int s = t - (K - 1) + k;
			const float *in =
				s < 0 ? a->state + (size_t)(K - 1 + s) * cd : a->raw + (size_t)s * a->ldr;
			const float *wk = a->wt + (size_t)k * cd;
			for (int c = c0; c < c1; c++)
				o[c] += wk[c] * in[c];
		}
		for (int c = c0; c < c1; c++)
			o[c] = o[c] / (1.0f + expf(-o[c]));
	}
	cpu_rows_conv_state(a, c0, c1);
}

static void portable_relu2(float *u, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		float r = u[i] > 0 ? u[i] : 0;
		u[i] = r * r;
	}
}

static float portable_max(const float *p, int n)
{
	float m = p[0];
	for (int i = 1; i < n; i++)
		m = fmaxf(m, p[i]);
	return m;
}

static float portable_exp_sum(float *p, int n, float mx)
{
	float s = 0;
	for (int i = 0; i < n; i++) {
		p[i] = expf(p[i] - mx);
		s += p[i];
	}
	return s;
}

static void portable_scale(float *y, float a, int n)
{
	for (int i = 0; i < n; i++)
		y[i] *= a;
}

static void portable_scores(const float *q, int R, int dh, const float *k, size_t ldk, int n, float *s,
			    size_t lds, int pf)
{
	(void)pf;
	for (int r = 0; r < R; r++)
		for (int i = 0; i < n; i++) {
			const float *qr = q + (size_t)r * dh, *ki = k + (size_t)i * ldk;
			float acc = 0;
			for (int e = 0; e < dh; e++)
				acc += qr[e] * ki[e];
			s[(size_t)r * lds + i] = acc;
		}
}

static void portable_weigh(const float *p, size_t ldp, int R, int n, const float *v, size_t ldv, int dh,
			   float *o, int pf)
{
	(void)pf;
	for (int i = 0; i < n; i++) {
		const float *vi = v + (size_t)i * ldv;
		for (int r = 0; r < R; r++) {
			const float w = p[(size_t)r * ldp + i];
			float *orow = o + (size_t)r * dh;
			for (int e = 0; e < dh; e++)
				orow[e] += w * vi[e];
		}
	}
}

const struct cpu_rows_variant cpu_rows_portable = {
	.name = "portable",
	.rmsnorm = portable_rmsnorm,
	.gated_rmsnorm = portable_gated_rmsnorm,
	.conv_silu = portable_conv_silu,
	.relu2 = portable_relu2,
	.max = portable_max,
	.exp_sum = portable_exp_sum,
	.scale = portable_scale,
	.scores = portable_scores,
	.weigh = portable_weigh,
};

void cpu_rows_conv_state(const struct cpu_conv_args *a, int c0, int c1)
{
	const int K = a->K, cd = a->channels;
	/* state[j] becomes in[T - (K-1) + j]: for T < K-1 that is old state row T + j > j, which
	 * ascending j reads before overwriting it */
	for (int j = 0; j < K - 1; j++) {
		int s = a->T - (K - 1) + j;
		const float *src = s < 0 ? a->state + (size_t)(K - 1 + s) * cd : a->raw + (size_t)s * a->ldr;
		memmove(a->state + (size_t)j * cd + c0, src + c0, (size_t)(c1 - c0) * sizeof(float));
	}
}

/* ---- the table and the choice --------------------------------------------------------------- */

/* from the least to the most capable */
static const struct cpu_rows_variant *const variants[] = {
	&cpu_rows_portable,
#ifdef HAVE_X86
	&cpu_rows_avx2,
	&cpu_rows_avx512,
#endif
};

static const enum cpu_isa isas[] = {
	CPU_ISA_PORTABLE,
#ifdef HAVE_X86
	CPU_ISA_AVX2,
	CPU_ISA_AVX512,
#endif
};
_Static_assert(ARRAY_SIZE(isas) == ARRAY_SIZE(variants), "one instruction set per variant");

const struct cpu_rows_variant *cpu_rows(void)
{
	return variants[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

enum cpu_isa cpu_rows_isa(void)
{
	return isas[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

const char *cpu_rows_variant_name(int i)
{
	return i >= 0 && (size_t)i < ARRAY_SIZE(variants) ? variants[i]->name : NULL;
}

/* ---- the jobs ------------------------------------------------------------------------------- */

/* Splits n items into at most TASKS_PER_THREAD tasks per thread of `align`-multiple sizes;
 * returns the task count and the size in *ret_chunk. */
static int split(size_t n, size_t align, size_t *ret_chunk)
{
	size_t tasks = (size_t)cpu_threads() * TASKS_PER_THREAD;
	size_t chunk = (n + tasks - 1) / tasks;
	chunk = MAX((chunk + align - 1) / align * align, align);
	*ret_chunk = chunk;
	return (int)((n + chunk - 1) / chunk);
}

struct norm_job {
	const struct cpu_rows_variant *v;
	const float *x, *z, *w;
	float *out;
	uint16_t *outb;
	size_t ldx, ldz, ldo;
	int T, d, groups, gs, chunk;
	float eps;
};

static void rmsnorm_task(void *ctx, int task, int thread)
{
	const struct norm_job *j = ctx;
	(void)thread;
	int t1 = MIN(j->T, (task + 1) * j->chunk);
	for (int t = task * j->chunk; t < t1; t++) {
		float *o = j->out + (size_t)t * j->ldo;
		j->v->rmsnorm(j->x + (size_t)t * j->ldx, o, j->w, j->d, j->eps);
		if (j->outb)
			cpu_f32_to_bf16(o, j->outb + (size_t)t * j->d, (size_t)j->d);
	}
}

void cpu_rows_rmsnorm(const float *x, float *out, const float *w, int T, int d, float eps, uint16_t *out_bf16)
{
	if (T <= 0)
		return;
	size_t chunk;
	int tasks = split((size_t)T, 1, &chunk);
	struct norm_job j = {.v = cpu_rows(),
			     .x = x,
			     .w = w,
			     .out = out,
			     .outb = out_bf16,
			     .ldx = (size_t)d,
			     .ldo = (size_t)d,
			     .T = T,
			     .d = d,
			     .chunk = (int)chunk,
			     .eps = eps};
	cpu_parallel_for_work(tasks, rmsnorm_task, &j, 2.0 * T * d);
}

static void gated_task(void *ctx, int task, int thread)
{
	const struct norm_job *j = ctx;
	(void)thread;
	int t1 = MIN(j->T, (task + 1) * j->chunk);
	size_t n = (size_t)j->groups * (size_t)j->gs;
	for (int t = task * j->chunk; t < t1; t++) {
		float *y = j->out + (size_t)t * j->ldo;
		j->v->gated_rmsnorm(y, j->z + (size_t)t * j->ldz, j->w, j->groups, j->gs, j->eps);
		if (j->outb)
			cpu_f32_to_bf16(y, j->outb + (size_t)t * n, n);
	}
}

void cpu_rows_gated_rmsnorm(float *y, size_t ldy, const float *z, size_t ldz, const float *w, int T,
			    int groups, int gs, float eps, uint16_t *out_bf16)
{
	if (T <= 0)
		return;
	size_t chunk;
	int tasks = split((size_t)T, 1, &chunk);
	struct norm_job j = {.v = cpu_rows(),
			     .z = z,
			     .w = w,
			     .out = y,
			     .outb = out_bf16,
			     .ldz = ldz,
			     .ldo = ldy,
			     .T = T,
			     .groups = groups,
			     .gs = gs,
			     .chunk = (int)chunk,
			     .eps = eps};
	/* the SiLU's exp counts as ~8 multiply-adds */
	cpu_parallel_for_work(tasks, gated_task, &j, 10.0 * T * groups * gs);
}

struct conv_job {
	const struct cpu_rows_variant *v;
	const struct cpu_conv_args *conv;
	const struct cpu_dt_args *dt;
	int conv_chunk, dt_chunk;
};

static inline float softplus(float x)
{
	return x > 20.0f ? x : log1pf(expf(x));
}

void cpu_rows_dt(const struct cpu_dt_args *d, int t, int h0, int h1)
{
	const float *r = d->raw + (size_t)t * d->ldr;
	float *o = d->dt + (size_t)t * d->H;
	for (int h = h0; h < h1; h++)
		o[h] = fminf(fmaxf(softplus(r[h] + d->bias[h]), d->lo), d->hi);
}

static void conv_task(void *ctx, int task, int thread)
{
	const struct conv_job *j = ctx;
	(void)thread;
	int c0 = task * j->conv_chunk, c1 = MIN(j->conv->channels, c0 + j->conv_chunk);
	if (c0 < c1)
		j->v->conv_silu(j->conv, c0, c1);
	const struct cpu_dt_args *d = j->dt;
	int t1 = MIN(d->T, (task + 1) * j->dt_chunk);
	for (int t = task * j->dt_chunk; t < t1; t++)
		cpu_rows_dt(d, t, 0, d->H);
}

void cpu_rows_conv_dt(const struct cpu_conv_args *conv, const struct cpu_dt_args *dt)
{
	if (conv->T <= 0)
		return;
	size_t chunk;
	int tasks = split((size_t)conv->channels, ALIGN, &chunk);
	struct conv_job j = {.v = cpu_rows(),
			     .conv = conv,
			     .dt = dt,
			     .conv_chunk = (int)chunk,
			     .dt_chunk = (dt->T + tasks - 1) / tasks};
	/* the work: the multiply-adds, and the conv state and taps, read from memory each step
	 * (2K - 1 rows of channels; a decode step's conv is bound by them, not by its arithmetic:
	 * split over 2 threads it took 1.7-2.0 -> 1.2-1.4 ms per 8 steps of the ~0.7B model,
	 * docs/benchmarks.md, "the conv in parallel") at ~4 multiply-adds a float */
	cpu_parallel_for_work(tasks, conv_task, &j,
			      (double)conv->T * conv->channels * (conv->K + 8) + 30.0 * dt->T * dt->H +
				      4.0 * (2 * conv->K - 1) * conv->channels);
}

struct relu2_job {
	const struct cpu_rows_variant *v;
	float *u;
	size_t n, chunk;
};

static void relu2_task(void *ctx, int task, int thread)
{
	const struct relu2_job *j = ctx;
	(void)thread;
	size_t i0 = (size_t)task * j->chunk;
	j->v->relu2(j->u + i0, MIN(j->chunk, j->n - i0));
}

void cpu_rows_relu2(float *u, size_t n)
{
	if (n == 0)
		return;
	struct relu2_job j = {.v = cpu_rows(), .u = u, .n = n};
	int tasks = split(n, ALIGN, &j.chunk);
	cpu_parallel_for_work(tasks, relu2_task, &j, (double)n);
}
