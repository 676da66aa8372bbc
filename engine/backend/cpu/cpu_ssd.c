/* The SSD scan of bf16 prefill as matrix products (cpu_ssd.h).
 *
 * One pool task per group runs the group's heads through the span's chunks (dm->chunk
 * positions, the last one shorter) in order, everything of a chunk in its thread's scratch:
 *   cum = the running sum of dt A per head; CB = C B^T;
 *   per head Y = (CB o exp(cum_l - cum_s) dt_s, s <= l) X;
 *   y = Y + exp(cum_l) C S + D x, with S the state entering the chunk;
 *   S <- exp(cum_end) S + B^T (X o coef), coef_s = exp(cum_end - cum_s) dt_s, for the group's
 *   heads at once.
 * The products take bf16 operands; the decays, the skip and the state S stay fp32 (S enters its
 * product rounded). S is kept transposed, [N][heads of the group x P], so that every product
 * reads its operands in the layout they were packed in: only B and the state at both ends get
 * transposed. A span's xbc is read once and y written once: the scan's time is in these passes
 * (packing, decays, rounding), not in its products. The caller's state is written after every task succeeded,
 * so a product that fails leaves it as it was.
 *
 * The row kernels (packing, decays, rounding, the combine) sit behind one table
 * (struct cpu_ssd_kernels): the portable loops here, cpu_ssd_avx512.c for AVX-512 and
 * AVX512-BF16.
 *
 * Every operand is packed dense: oneDNN 2.6's brgemm (AMX) matmul takes no row stride wider
 * than the row (it falls back to a slower GEMM), and transposes a transposed operand per call.
 *
 * DESIGN (threads): the tasks write disjoint columns of y and their own group's part of the
 * shared work; the products, prepared before the job (cpu_dnnl_small_get(): a reference keeps
 * them cached), run on the task's thread (cpu_dnnl_small_run()).
 * The parallelism is the G groups (8 in the model: enough for a few cores, not for many).
 */
#include "cpu_ssd.h"

#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_dnnl_small.h"

/* the four products of a chunk, in ssd_job.prod */
enum { SHAPE_CB, SHAPE_Y, SHAPE_STATE, SHAPE_YOFF, SHAPES_PER_L };

static size_t pad16(size_t n)
{
	return (n + 15) & ~(size_t)15;
}

size_t cpu_ssd_work_floats(const struct lm_dims *dm, int T)
{
	(void)T;
	/* the state after the span, per group transposed; room to align the pointer to 64 bytes */
	return pad16((size_t)dm->H * dm->P * dm->N) + 16;
}

/* A thread's scratch, every region 64-byte aligned. */
struct scratch {
	uint16_t *b16;	/* [L][N] */
	uint16_t *bt16; /* [N][L] */
	uint16_t *c16;	/* [L][N] */
	uint16_t *x16;	/* [H/G][L][P] */
	uint16_t *m16;	/* [L][L], one head */
	uint16_t *xc16; /* [L][H/G * P] */
	uint16_t *st16; /* [N][H/G * P]: st rounded */
	float *cb;	/* [L][L] */
	float *yd;	/* [H/G][L][P] */
	float *yo;	/* [L][H/G * P] */
	float *sl;	/* [N][H/G * P]: the chunk's own end state */
	float *st;	/* [N][H/G * P]: the state */
	float *cum;	/* [H/G][L] */
	float *dth;	/* [H/G][L] */
	float *coef;	/* [H/G][L], then [L] for the mask */
};

static size_t scratch_at(const struct lm_dims *dm, void *base, struct scratch *s)
{
	size_t L = (size_t)dm->chunk, N = (size_t)dm->N, P = (size_t)dm->P;
	size_t hpg = (size_t)(dm->H / dm->G), hp = hpg * P;
	/* sizes in bytes */
	size_t sz[] = {L * N * 2,  N * L * 2,  L * N * 2,   hp * L * 2,	 L * L * 2,
		       L * hp * 2, N * hp * 2, L * L * 4,   hp * L * 4,	 L * hp * 4,
		       N * hp * 4, N * hp * 4, hpg * L * 4, hpg * L * 4, (hpg + 1) * L * 4};
	void **ptr[] = {(void **)&s->b16, (void **)&s->bt16, (void **)&s->c16,	(void **)&s->x16,
			(void **)&s->m16, (void **)&s->xc16, (void **)&s->st16, (void **)&s->cb,
			(void **)&s->yd,  (void **)&s->yo,   (void **)&s->sl,	(void **)&s->st,
			(void **)&s->cum, (void **)&s->dth,  (void **)&s->coef};
	size_t off = 0;
	for (size_t i = 0; i < ARRAY_SIZE(sz); i++) {
		if (base)
			*ptr[i] = (char *)base + off;
		off += (sz[i] + 63) & ~(size_t)63;
	}
	return off;
}

size_t cpu_ssd_scratch_bytes(const struct lm_dims *dm)
{
	struct scratch s;
	return scratch_at(dm, NULL, &s);
}

/* ---- the portable row kernels ------------------------------------------------------------- */

/* as cpu_f32_to_bf16() rounds: to nearest even, a NaN quiet with its sign */
static inline uint16_t bf16_of(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffffu) > 0x7f800000u)
		return (uint16_t)((u >> 16) | 0x40u);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static void decay_c(float *out, float base, const float *cum, const float *dth, int n)
{
	for (int s = 0; s < n; s++)
		out[s] = expf(base - cum[s]) * dth[s];
}

static void mask_c(uint16_t *dst, const float *cb, const float *cum, const float *dth, int L, float *tmp)
{
	(void)tmp;
	for (int l = 0; l < L; l++) {
		uint16_t *d = dst + (size_t)l * L;
		const float *c = cb + (size_t)l * L;
		for (int s = 0; s <= l; s++)
			d[s] = bf16_of(c[s] * (expf(cum[l] - cum[s]) * dth[s]));
		for (int s = l + 1; s < L; s++)
			d[s] = 0;
	}
}

static void pack_x_c(uint16_t *x16, uint16_t *xc16, const float *x, float k, int n)
{
	for (int i = 0; i < n; i++) {
		x16[i] = bf16_of(x[i]);
		xc16[i] = bf16_of(x[i] * k);
	}
}

static void round_bf16_c(uint16_t *dst, const float *src, int n)
{
	for (int i = 0; i < n; i++)
		dst[i] = bf16_of(src[i]);
}

static void combine_c(float *o, const float *yd, float e, const float *yo, float dk, const float *x, int n)
{
	for (int i = 0; i < n; i++)
		o[i] = yd[i] + e * yo[i] + dk * x[i];
}

static void decay_add_c(float *st, float e, const float *sl, int n)
{
	for (int i = 0; i < n; i++)
		st[i] = e * st[i] + sl[i];
}

/* dst[c][r] = src[r][c] for r < rows, c < cols, in 16 x 16 blocks: the rows here are 2^k
 * floats apart, and a whole column's worth of lines would thrash a few L1 sets */
#define TRANSPOSE(name, type)                                                                                \
	__attribute__((noinline)) static void name(type *dst, size_t ldd, const type *src, size_t lds,       \
						   int rows, int cols)                                       \
	{                                                                                                    \
		for (int r0 = 0; r0 < rows; r0 += 16) {                                                      \
			int r1 = MIN(r0 + 16, rows);                                                         \
			for (int c0 = 0; c0 < cols; c0 += 16) {                                              \
				int c1 = MIN(c0 + 16, cols);                                                 \
				for (int r = r0; r < r1; r++) {                                              \
					const type *sp = src + (size_t)r * lds;                              \
					type *dp = dst + r;                                                  \
					for (int c = c0; c < c1; c++)                                        \
						dp[(size_t)c * ldd] = sp[c];                                 \
				}                                                                            \
			}                                                                                    \
		}                                                                                            \
	}
TRANSPOSE(transpose_c, float)
TRANSPOSE(transpose16, uint16_t)

static const struct cpu_ssd_kernels portable = {
	.decay = decay_c,
	.mask = mask_c,
	.transpose = transpose_c,
	.pack_x = pack_x_c,
	.round_bf16 = round_bf16_c,
	.combine = combine_c,
	.decay_add = decay_add_c,
};

/* from the least to the most capable; below AVX-512 the portable loops */
static const struct cpu_ssd_kernels *const variants[] = {
	&portable,
#if defined(__x86_64__) && defined(__GNUC__)
	&cpu_ssd_avx512,
	&cpu_ssd_avx512bf16,
#endif
};

static const enum cpu_isa isas[] = {
	CPU_ISA_PORTABLE,
#if defined(__x86_64__) && defined(__GNUC__)
	CPU_ISA_AVX512,
	CPU_ISA_AVX512BF16,
#endif
};
_Static_assert(ARRAY_SIZE(isas) == ARRAY_SIZE(variants), "one instruction set per variant");

static const struct cpu_ssd_kernels *kernels(void)
{
	return variants[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

enum cpu_isa cpu_ssd_isa(void)
{
	return isas[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

/* ---- the scan ---------------------------------------------------------------------------- */

struct ssd_job {
	const struct lm_dims *dm;
	int T, hpg;
	int shape_full, shape_tail; /* first index of each chunk length's products in prod[] */
	struct cpu_dnnl_small *prod[2 * SHAPES_PER_L];
	const struct cpu_ssd_kernels *k;
	const float *xbc;
	size_t ldx;
	const float *dt, *a, *dskip;
	float *state, *y;
	uint16_t *state16; /* the caller's state when it is stored in bf16 (state NULL then) */
	float *fin;	   /* [G][N][H/G * P]: the state after the span */
	_Atomic int err;
};

/* One chunk of L positions from t0 for group g; sc.st holds the state entering it (and sc.st16
 * its rounding) and the state after it on return. Returns 0 or a product's -errno. */
static int group_chunk(struct ssd_job *j, int g, int t0, int L, int thread, struct scratch *sc)
{
	const struct lm_dims *dm = j->dm;
	const int N = dm->N, P = dm->P, H = dm->H, hpg = j->hpg, hp = hpg * P;
	const struct cpu_ssd_kernels *k = j->k;
	struct cpu_dnnl_small *const *prod = j->prod + (L == dm->chunk ? j->shape_full : j->shape_tail);
	const float *row0 = j->xbc + (size_t)t0 * j->ldx;
	int r;

	for (int l = 0; l < L; l++) {
		const float *B = row0 + (size_t)l * j->ldx + dm->d_in + (size_t)g * N;
		k->round_bf16(sc->b16 + (size_t)l * N, B, N);
		k->round_bf16(sc->c16 + (size_t)l * N, B + (size_t)dm->G * N, N);
	}
	transpose16(sc->bt16, (size_t)L, sc->b16, (size_t)N, L, N);
	if ((r = cpu_dnnl_small_run(prod[SHAPE_CB], thread, sc->c16, sc->bt16, sc->cb)) < 0)
		return r;
	/* the state entering the chunk: C S, for the group's heads side by side */
	if ((r = cpu_dnnl_small_run(prod[SHAPE_YOFF], thread, sc->c16, sc->st16, sc->yo)) < 0)
		return r;

	for (int i = 0; i < hpg; i++) {
		int h = g * hpg + i;
		float *cum = sc->cum + (size_t)i * L, *dth = sc->dth + (size_t)i * L, acc = 0;
		for (int l = 0; l < L; l++) {
			dth[l] = j->dt[(size_t)(t0 + l) * H + h];
			acc += dth[l] * j->a[h];
			cum[l] = acc;
		}
		k->decay(sc->coef + (size_t)i * L, cum[L - 1], cum, dth, L);
	}
	/* X per head, and X o coef for the group's heads side by side (the chunk's own state) */
	for (int s = 0; s < L; s++)
		for (int i = 0; i < hpg; i++)
			k->pack_x(sc->x16 + ((size_t)i * L + s) * P, sc->xc16 + (size_t)s * hp + (size_t)i * P,
				  row0 + (size_t)s * j->ldx + (size_t)(g * hpg + i) * P,
				  sc->coef[(size_t)i * L + s], P);
	for (int i = 0; i < hpg; i++) {
		const float *cum = sc->cum + (size_t)i * L, *dth = sc->dth + (size_t)i * L;
		/* intra-chunk: M[l][s] = CB[l][s] exp(cum[l] - cum[s]) dt[s] for s <= l, else 0 */
		k->mask(sc->m16, sc->cb, cum, dth, L, sc->coef + (size_t)hpg * L);
		if ((r = cpu_dnnl_small_run(prod[SHAPE_Y], thread, sc->m16, sc->x16 + (size_t)i * L * P,
					    sc->yd + (size_t)i * L * P)) < 0)
			return r;
	}
	for (int l = 0; l < L; l++) {
		size_t t = (size_t)(t0 + l);
		float *yr = j->y + t * dm->d_in + (size_t)g * hp;
		const float *xr = j->xbc + t * j->ldx + (size_t)g * hp;
		for (int i = 0; i < hpg; i++) {
			int h = g * hpg + i;
			float e = expf(sc->cum[(size_t)i * L + l]), dk = j->dskip[h];
			const float *yd = sc->yd + ((size_t)i * L + l) * P;
			const float *yo = sc->yo + (size_t)l * hp + (size_t)i * P;
			k->combine(yr + (size_t)i * P, yd, e, yo, dk, xr + (size_t)i * P, P);
		}
	}

	/* the chunk's own end state B^T (X o coef), then S <- exp(cum_end) S + it */
	if ((r = cpu_dnnl_small_run(prod[SHAPE_STATE], thread, sc->bt16, sc->xc16, sc->sl)) < 0)
		return r;
	for (int i = 0; i < hpg; i++) {
		float e = expf(sc->cum[(size_t)i * L + L - 1]);
		for (int n = 0; n < N; n++)
			k->decay_add(sc->st + (size_t)n * hp + (size_t)i * P, e,
				     sc->sl + (size_t)n * hp + (size_t)i * P, P);
	}
	k->round_bf16(sc->st16, sc->st, N * hp);
	return 0;
}

static void group_task(void *ctx, int g, int thread)
{
	struct ssd_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	const int P = dm->P, N = dm->N, hp = j->hpg * P;
	struct scratch sc;
	scratch_at(dm, cpu_scratch(thread), &sc);
	for (int i = 0; i < j->hpg; i++) {
		size_t h = (size_t)(g * j->hpg + i);
		if (!j->state16) {
			j->k->transpose(sc.st + (size_t)i * P, (size_t)hp, j->state + h * P * N, (size_t)N, P,
					N);
			continue;
		}
		const uint16_t *src = j->state16 + h * P * N;
		for (int p = 0; p < P; p++)
			for (int n = 0; n < N; n++)
				sc.st[(size_t)n * hp + (size_t)i * P + p] =
					bf16_to_f32(src[(size_t)p * N + n]);
	}
	j->k->round_bf16(sc.st16, sc.st, N * hp);
	for (int t0 = 0; t0 < j->T; t0 += dm->chunk) {
		if (atomic_load_explicit(&j->err, memory_order_relaxed))
			return;
		int r = group_chunk(j, g, t0, MIN(dm->chunk, j->T - t0), thread, &sc);
		if (r < 0) {
			atomic_store(&j->err, r);
			return;
		}
	}
	memcpy(j->fin + (size_t)g * N * hp, sc.st, (size_t)N * hp * sizeof(float));
}

/* the state after the span into the caller's [H][P][N], task group g */
static void store_task(void *ctx, int g, int thread)
{
	struct ssd_job *j = ctx;
	const struct lm_dims *dm = j->dm;
	const int P = dm->P, N = dm->N, hp = j->hpg * P;
	(void)thread;
	const float *S = j->fin + (size_t)g * N * hp;
	for (int i = 0; i < j->hpg; i++) {
		size_t h = (size_t)(g * j->hpg + i);
		if (!j->state16) {
			j->k->transpose(j->state + h * P * N, (size_t)N, S + (size_t)i * P, (size_t)hp, N, P);
			continue;
		}
		uint16_t *dst = j->state16 + h * P * N;
		for (int p = 0; p < P; p++)
			for (int n = 0; n < N; n++)
				dst[(size_t)p * N + n] = f32_to_bf16(S[(size_t)n * hp + (size_t)i * P + p]);
	}
}

/* The four products of chunks of L positions into prod[0..3]. Returns 0 or -errno with none
 * held. */
static int get_products(const struct lm_dims *dm, int hpg, int L, struct cpu_dnnl_small **prod)
{
	int hp = hpg * dm->P;
	const int shape[SHAPES_PER_L][3] = {
		[SHAPE_CB] = {L, dm->N, L},	/* C B^T */
		[SHAPE_Y] = {L, L, dm->P},	/* masked decays X */
		[SHAPE_STATE] = {dm->N, L, hp}, /* B^T (X o coef) */
		[SHAPE_YOFF] = {L, dm->N, hp},	/* C S */
	};
	for (int i = 0; i < SHAPES_PER_L; i++) {
		int M = shape[i][0], K = shape[i][1], N = shape[i][2];
		int r = cpu_dnnl_small_get(M, K, N, (size_t)K, (size_t)N, false, (size_t)N, false, &prod[i]);
		if (r < 0) {
			while (i-- > 0)
				cpu_dnnl_small_put(prod[i]);
			return r;
		}
	}
	return 0;
}

static int scan(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		const float *a, const float *dskip, float *state, uint16_t *state16, float *y, float *work)
{
	if (T < 1)
		return 0;
	/* the decay factors of the mask are <= 1 only for a non-increasing cum */
	for (int h = 0; h < dm->H; h++)
		if (!(a[h] <= 0))
			return -EINVAL;
	for (size_t i = 0; i < (size_t)T * dm->H; i++)
		if (!(dt[i] >= 0))
			return -EINVAL;
	struct ssd_job j = {
		.dm = dm,
		.T = T,
		.hpg = dm->H / dm->G,
		.k = kernels(),
		.xbc = xbc,
		.ldx = ldx,
		.dt = dt,
		.a = a,
		.dskip = dskip,
		.state = state,
		.state16 = state16,
		.y = y,
		.fin = (float *)(((uintptr_t)work + 63) & ~(uintptr_t)63),
	};
	atomic_init(&j.err, 0);
	int n_prod = 0, full = T / dm->chunk, tail = T % dm->chunk, r = 0;
	if (full > 0) {
		j.shape_full = n_prod;
		if ((r = get_products(dm, j.hpg, dm->chunk, j.prod + n_prod)) < 0)
			return r;
		n_prod += SHAPES_PER_L;
	}
	if (tail > 0) {
		j.shape_tail = n_prod;
		if ((r = get_products(dm, j.hpg, tail, j.prod + n_prod)) < 0)
			goto put;
		n_prod += SHAPES_PER_L;
	}
	/* multiply-adds: C B^T, the masked Y, C S and the chunk's own state */
	double state_n = (double)dm->H * dm->P * dm->N;
	cpu_parallel_for_work(dm->G, group_task, &j,
			      (double)T * dm->G * dm->N * dm->chunk +
				      (double)T * dm->H * dm->P * dm->chunk / 2 + 2.0 * T * state_n);
	if ((r = atomic_load(&j.err)) == 0)
		cpu_parallel_for_work(dm->G, store_task, &j, state_n);
put:
	for (int i = 0; i < n_prod; i++)
		cpu_dnnl_small_put(j.prod[i]);
	return r;
}

int cpu_ssd_scan_bf16(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
		      const float *a, const float *dskip, float *state, float *y, float *work)
{
	return scan(dm, T, xbc, ldx, dt, a, dskip, state, NULL, y, work);
}

int cpu_ssd_scan_bf16_s16(const struct lm_dims *dm, int T, const float *xbc, size_t ldx, const float *dt,
			  const float *a, const float *dskip, uint16_t *state, float *y, float *work)
{
	return scan(dm, T, xbc, ldx, dt, a, dskip, NULL, state, y, work);
}
