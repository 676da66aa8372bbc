/* Decode matrix-vector products (T tokens, a few to a few dozen): the variant table, the run-time
 * choice (cpu_isa.h), the portable C variant and the split of the rows across the pool.
 *
 * DESIGN: decode reads every weight byte once per token, so these products run at the speed
 * the cores can stream memory. The weights stay in their stored (memory-mapped, row-major)
 * layout: a variant streams several consecutive rows at once, so a thread's range of rows is a
 * single contiguous region read front to back, which is the layout the kernel would otherwise
 * pack them into, without a second copy of the weights. A job has one contiguous range of rows
 * per pool thread (a range whose thread is descheduled on a loaded machine is run by the first
 * thread free, as every pool task is); ranges start at multiples of 16 rows, so with a 64-byte
 * aligned y two threads never write the same cache line of it.
 * cpu_isa_pick() chooses the variant (cpu_isa.h); a job reads it once, so a
 * call never mixes two variants.
 *
 * More tokens than a kernel holds (CPU_GEMV_KERNEL_T: the decode rows of several sessions): a
 * thread walks its range in blocks of about GROUP_BLOCK_BYTES of weights and runs every group of
 * CPU_GEMV_KERNEL_T tokens over a block before the next, so the block comes from memory for the
 * first group and from the core's cache for the others. A kernel forms each (row, token) sum on
 * its own, in an order that depends on the columns alone (each variant's file says which), so
 * splitting the tokens changes no bit of any result.
 */
#include "cpu_gemv.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu_isa.h"
#include "quant.h"

#if defined(__x86_64__) && defined(__GNUC__)
#define HAVE_X86 1
#endif

#define ROW_ALIGN 16
/* Weight bytes per block when tokens run in groups: half of a 48 KiB L1 data cache, so the block
 * stays there while x's rows of a group stream past it. */
#define GROUP_BLOCK_BYTES (24 * 1024)

/* ---- portable C ---------------------------------------------------------------------------- */

static float weight_at(const struct cpu_gemv_args *a, size_t off)
{
	switch (a->dtype) {
	case TENSOR_BF16:
		return bf16_to_f32(((const uint16_t *)a->w)[off]);
	case TENSOR_F16:
		return cpu_f16_to_f32(((const uint16_t *)a->w)[off]);
	case TENSOR_F32:
	default: /* the loader's U8/Q8/Q4 never reach the plain-weight kernels */
		break;
	}
	return ((const float *)a->w)[off];
}

/* four rows at a time, each (row, token) summed in column order */
static void portable_rows(const struct cpu_gemv_args *a, int r0, int r1, bool xbf)
{
	for (int r = r0; r < r1; r += 4) {
		int nr = MIN(4, r1 - r);
		for (int t = 0; t < a->T; t++) {
			float s[4] = {0, 0, 0, 0};
			for (int k = 0; k < a->in; k++) {
				float xv = a->x[(size_t)t * a->ldx + k];
				if (xbf)
					xv = bf16_to_f32(f32_to_bf16(xv));
				for (int q = 0; q < nr; q++)
					s[q] += weight_at(a, (size_t)(r + q) * a->ldw + (size_t)k) * xv;
			}
			for (int q = 0; q < nr; q++) {
				float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
				*p = a->accumulate ? *p + s[q] : s[q];
			}
		}
	}
}

static void portable_f32(const struct cpu_gemv_args *a, int r0, int r1)
{
	portable_rows(a, r0, r1, false);
}

static void portable_bf16(const struct cpu_gemv_args *a, int r0, int r1)
{
	portable_rows(a, r0, r1, true);
}

/* Quantized weights: each block of 32 columns of up to four rows dequantized as
 * quant_row_to_f32() does, then every (row, token) sum continued in column order. */
static void portable_quant(const struct cpu_gemv_args *a, int r0, int r1, enum quant_format fmt)
{
	const int64_t nb = quant_blocks(a->in);
	for (int r = r0; r < r1; r += 4) {
		int nr = MIN(4, r1 - r);
		float s[4][CPU_GEMV_KERNEL_T] = {{0}};
		for (int64_t b = 0; b < nb; b++) {
			int k0 = (int)b * QUANT_BLOCK, n = MIN(QUANT_BLOCK, a->in - k0);
			float wb[4][QUANT_BLOCK];
			for (int q = 0; q < nr; q++) {
				const char *row = (const char *)a->w + (size_t)(r + q) * a->ldw;
				const uint16_t *sc = fmt == QUANT_Q8 ? quant_q8_scales(row, a->in) :
								       quant_q4_dz(row, a->in);
				for (int i = 0; i < n; i++) {
					if (fmt == QUANT_FP8) {
						/* one fp32 product, as quant_row_to_f32() */
						wb[q][i] = quant_e4m3_to_f32(quant_fp8_codes(row)[k0 + i]) *
							   *quant_fp8_scale(row, a->in);
					} else if (fmt == QUANT_Q8) {
						wb[q][i] = quant_f16_to_f32(sc[b]) *
							   (float)quant_q8_codes(row)[k0 + i];
					} else {
						uint8_t c = quant_q4_codes(row)[b * 16 + (i & 15)];
						float d = quant_q4_d(sc[b]), m = quant_q4_m(d, sc[b]);
						/* exact product: fmaf(d, q, m) */
						wb[q][i] = d * (float)(i < 16 ? c & 15 : c >> 4) + m;
					}
				}
			}
			for (int t = 0; t < a->T; t++) {
				const float *x = a->x + (size_t)t * a->ldx + k0;
				for (int i = 0; i < n; i++)
					for (int q = 0; q < nr; q++)
						s[q][t] += wb[q][i] * x[i];
			}
		}
		for (int t = 0; t < a->T; t++)
			for (int q = 0; q < nr; q++) {
				float *p = a->y + (size_t)t * a->ldy + (size_t)(r + q);
				*p = a->accumulate ? *p + s[q][t] : s[q][t];
			}
	}
}

static void portable_q8(const struct cpu_gemv_args *a, int r0, int r1)
{
	portable_quant(a, r0, r1, QUANT_Q8);
}

static void portable_fp8(const struct cpu_gemv_args *a, int r0, int r1)
{
	portable_quant(a, r0, r1, QUANT_FP8);
}

static void portable_q4(const struct cpu_gemv_args *a, int r0, int r1)
{
	portable_quant(a, r0, r1, QUANT_Q4);
}

/* ---- activations quantized to int8, and the integer products' reference ---------------- */

size_t cpu_gemv_xq_bytes(enum quant_format fmt, int in)
{
	size_t groups = ((size_t)quant_blocks(in) + 3) / 4;
	return groups * (fmt == QUANT_Q8 ? CPU_XQ_Q8_BYTES : CPU_XQ_Q4_BYTES);
}

/* one block's d and codes (cpu_gemv.h); returns the codes' sum */
static int quantize_block(const float *x, int n, float *ret_d, int8_t c[QUANT_BLOCK])
{
	float amax = 0;
	bool finite = true;
	for (int i = 0; i < n; i++) {
		float v = fabsf(x[i]);
		finite &= v <= FLT_MAX; /* false for NaN and infinities */
		amax = v > amax ? v : amax;
	}
	memset(c, 0, QUANT_BLOCK);
	if (!finite) {
		*ret_d = NAN;
		return 0;
	}
	*ret_d = amax / 127.0f;
	if (amax == 0)
		return 0;
	float id = 127.0f / amax;
	int sum = 0;
	for (int i = 0; i < n; i++) {
		/* to nearest even by adding and taking off 1.5 x 2^23 (|x * id| <= 127 + 2^-16), the
		 * same as nearbyintf, which is a call into libm for a baseline x86-64 build */
		float q = (x[i] * id + 0x1.8p23f) - 0x1.8p23f;
		c[i] = (int8_t)(q > 127 ? 127 : q < -127 ? -127 : q);
		sum += c[i];
	}
	return sum;
}

void cpu_gemv_quantize_x(enum quant_format fmt, const float *x, size_t ldx, int T, int in, char *xq,
			 size_t ldxq)
{
	const int64_t nb = quant_blocks(in);
	const size_t gbytes = fmt == QUANT_Q8 ? CPU_XQ_Q8_BYTES : CPU_XQ_Q4_BYTES;
	for (int t = 0; t < T; t++) {
		char *out = xq + (size_t)t * ldxq;
		memset(out, 0, cpu_gemv_xq_bytes(fmt, in));
		for (int64_t b = 0; b < nb; b++) {
			int k0 = (int)b * QUANT_BLOCK, j = (int)(b & 3);
			char *g = out + (size_t)(b >> 2) * gbytes;
			int8_t c[QUANT_BLOCK];
			float d;
			int sum = quantize_block(x + (size_t)t * ldx + k0, MIN(QUANT_BLOCK, in - k0), &d, c);
			if (fmt == QUANT_Q8) {
				int32_t *corr = (int32_t *)(g + 128);
				float *dl = (float *)(g + 256);
				memcpy(g + 32 * j, c, QUANT_BLOCK);
				for (int i = 0; i < 8; i++)
					corr[8 * j + i] = -128 * (c[4 * i] + c[4 * i + 1] + c[4 * i + 2] +
								  c[4 * i + 3]);
				for (int i = 0; i < 8; i++)
					dl[8 * j + i] = d;
				((int32_t *)(g + CPU_XQ_Q8_CTOT))[j] = -128 * sum;
			} else {
				float *dl = (float *)(g + 128), *sl = (float *)(g + 192);
				memcpy(g + 16 * j, c, 16);
				memcpy(g + 64 + 16 * j, c + 16, 16);
				for (int i = 0; i < 4; i++) {
					dl[4 * j + i] = d;
					sl[4 * j + i] = d * (float)sum * 0.25f;
				}
			}
		}
	}
}

/* The integer products in C: per block the exact integer sum of code products, then
 * d_w * d_x * sum (+ m_w * the activations' term for q4) added in block order. */
static void portable_i8(const struct cpu_gemv_args *a, int r0, int r1, enum quant_format fmt)
{
	const int64_t nb = quant_blocks(a->in);
	const size_t gbytes = fmt == QUANT_Q8 ? CPU_XQ_Q8_BYTES : CPU_XQ_Q4_BYTES;
	for (int r = r0; r < r1; r++) {
		const char *row = (const char *)a->w + (size_t)r * a->ldw;
		for (int t = 0; t < a->T; t++) {
			const char *xt = a->xq + (size_t)t * a->ldxq;
			float s = 0;
			for (int64_t b = 0; b < nb; b++) {
				const char *g = xt + (size_t)(b >> 2) * gbytes;
				int j = (int)(b & 3);
				int32_t sum = 0;
				if (fmt == QUANT_Q8) {
					const int8_t *cw = quant_q8_codes(row) + b * 32,
						     *cx = (const int8_t *)g + 32 * j;
					for (int i = 0; i < 32; i++)
						sum += cw[i] * cx[i];
					float dw = quant_f16_to_f32(quant_q8_scales(row, a->in)[b]);
					float dx = ((const float *)(g + 256))[8 * j];
					s += dw * dx * (float)sum;
				} else {
					const uint8_t *cw = quant_q4_codes(row) + b * 16;
					const int8_t *lo = (const int8_t *)g + 16 * j,
						     *hi = (const int8_t *)g + 64 + 16 * j;
					for (int i = 0; i < 16; i++)
						sum += (cw[i] & 15) * lo[i] + (cw[i] >> 4) * hi[i];
					const uint16_t dz = quant_q4_dz(row, a->in)[b];
					const float dw = quant_q4_d(dz);
					float dx = ((const float *)(g + 128))[4 * j];
					float sx = ((const float *)(g + 192))[4 * j] * 4.0f;
					s += dw * dx * (float)sum + quant_q4_m(dw, dz) * sx;
				}
			}
			float *p = a->y + (size_t)t * a->ldy + (size_t)r;
			*p = a->accumulate ? *p + s : s;
		}
	}
}

static void portable_q8_i8(const struct cpu_gemv_args *a, int r0, int r1)
{
	portable_i8(a, r0, r1, QUANT_Q8);
}

static void portable_q4_i8(const struct cpu_gemv_args *a, int r0, int r1)
{
	portable_i8(a, r0, r1, QUANT_Q4);
}

const struct cpu_gemv_variant cpu_gemv_portable = {
	.name = "portable",
	.f32 = portable_f32,
	.bf16 = portable_bf16,
	.fp8 = portable_fp8,
	.q8 = portable_q8,
	.q4 = portable_q4,
	.q8_i8 = portable_q8_i8,
	.q4_i8 = portable_q4_i8,
};

/* ---- the table and the choice --------------------------------------------------------------- */

/* from the least to the most capable */
static const struct cpu_gemv_variant *const variants[] = {
	&cpu_gemv_portable,
#ifdef HAVE_X86
	&cpu_gemv_avx2,
	&cpu_gemv_avx512,
	&cpu_gemv_avx512bf16,
#endif
};

static const enum cpu_isa isas[] = {
	CPU_ISA_PORTABLE,
#ifdef HAVE_X86
	CPU_ISA_AVX2,
	CPU_ISA_AVX512,
	CPU_ISA_AVX512BF16,
#endif
};
_Static_assert(ARRAY_SIZE(isas) == ARRAY_SIZE(variants), "one instruction set per variant");

static const struct cpu_gemv_variant *variant(void)
{
	return variants[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

bool cpu_gemv_fp8_bf16_ok(const struct cpu_gemv_variant *v)
{
	if (!v->fp8_bf16 || !v->fp8_round_x)
		return false;
#ifdef HAVE_X86
	/* the AVX512-BF16 variant's is AVX512-VBMI code too (cpu_gemv_fp8_vbmi.c) */
	if (v == &cpu_gemv_avx512bf16)
		return cpu_isa_supported(CPU_ISA_AVX512BF16) && __builtin_cpu_supports("avx512vbmi");
#endif
	return true;
}

const char *cpu_gemv_name(void)
{
	return variant()->name;
}

enum cpu_isa cpu_gemv_isa(void)
{
	return isas[cpu_isa_pick(isas, ARRAY_SIZE(isas))];
}

const char *cpu_gemv_variant_name(int i)
{
	return i >= 0 && (size_t)i < ARRAY_SIZE(variants) ? variants[i]->name : NULL;
}

/* ---- the job ------------------------------------------------------------------------------- */

struct gemv_job {
	cpu_gemv_fn *fn;
	struct cpu_gemv_args a;
	int nrows, chunk;
	int group_t;	/* the most tokens per kernel call */
	int block_rows; /* rows per block when a->T > group_t */
};

static void gemv_task(void *ctx, int task, int thread)
{
	const struct gemv_job *j = ctx;
	(void)thread;
	int r0 = task * j->chunk, r1 = MIN(r0 + j->chunk, j->nrows);
	if (r0 >= r1)
		return;
	if (j->a.T <= j->group_t) {
		j->fn(&j->a, r0, r1);
		return;
	}
	for (int b = r0; b < r1; b += j->block_rows) {
		int b1 = MIN(b + j->block_rows, r1);
		for (int t = 0; t < j->a.T; t += j->group_t) {
			struct cpu_gemv_args g = j->a;
			g.x += (size_t)t * g.ldx;
			g.y += (size_t)t * g.ldy;
			if (g.xb)
				g.xb += (size_t)t * g.ldxb;
			if (g.xq)
				g.xq += (size_t)t * g.ldxq;
			g.T = MIN(j->group_t, j->a.T - t);
			j->fn(&g, b, b1);
		}
	}
}

int cpu_gemv_rows(const struct tensor *w, int row0, int nrows, const float *x, size_t ldx, int T, float *y,
		  size_t ldy, bool accumulate, bool bf16_act)
{
	if (nrows <= 0 || T <= 0)
		return 0;
	const struct cpu_gemv_variant *v = variant();
	int in = (int)w->shape[w->ndim - 1];
	size_t esz = w->dtype == TENSOR_F32 ? 4 : 2;
	struct gemv_job j = {
		.fn = bf16_act ? v->bf16 : v->f32,
		.a =
			{
				.w = (const char *)w->data + (size_t)row0 * (size_t)in * esz,
				.dtype = w->dtype,
				.ldw = (size_t)in,
				.in = in,
				.T = T,
				.x = x,
				.ldx = ldx,
				.y = y,
				.ldy = ldy,
				.accumulate = accumulate,
			},
		.nrows = nrows,
		.group_t = CPU_GEMV_KERNEL_T,
	};
	/* bf16 activations rounded once here rather than per weight block where the variant has
	 * kernels for them (without memory for them, the kernels that round in registers give the
	 * same bits) */
	uint16_t *xb = NULL;
	size_t ldxb = ((size_t)in + 31) & ~(size_t)31;
	if (bf16_act && w->dtype == TENSOR_BF16 && v->round_x)
		xb = aligned_alloc(64, (size_t)T * ldxb * sizeof(*xb));
	if (xb) {
		v->round_x(x, ldx, T, in, xb, ldxb);
		j.a.xb = xb;
		j.a.ldxb = ldxb;
		j.group_t = CPU_GEMV_KERNEL_T_BF16;
	}
	/* a multiple of 8 rows, the kernels' widest block, so no block ends in single rows */
	size_t row_bytes = (size_t)in * esz;
	j.block_rows = (int)MAX(8, MIN((size_t)GROUP_BLOCK_BYTES / row_bytes, (size_t)1 << 20) & ~(size_t)7);
	int tasks = cpu_threads();
	int per = (nrows + tasks - 1) / tasks;
	j.chunk = (per + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
	cpu_parallel_for_work((nrows + j.chunk - 1) / j.chunk, gemv_task, &j, (double)nrows * in * T);
	free(xb);
	return 0;
}

/* ---- tiled quantized weights (quant.h's tiles) ---------------------------------------------- */

struct tiled_job {
	const struct quant_tensor *q;
	cpu_gemv_fn *fn;	/* the variant's row kernel (records) */
	cpu_gemv_fn *tile_fn;	/* its tile kernel, or NULL: each tile's records gathered for fn */
	struct cpu_gemv_args a; /* x, xq and their strides; y and T as asked */
	int row0, nrows;
	int base, chunk; /* task k: rows [base + k chunk, + chunk) of the tensor, within the range */
	char *gbufs;	 /* without tile_fn: a tile's records gathered, QUANT_TILE_ROWS row_bytes
			  * per pool thread */
};

/* rows [r0, r1) of the tensor (absolute), tokens as in g (T <= CPU_GEMV_KERNEL_T), results
 * into y[(r - row0)] */
static void tiled_part(const struct tiled_job *j, struct cpu_gemv_args g, int r0, int r1, char *gbuf,
		       float *ty)
{
	const struct quant_tensor *q = j->q;
	const int64_t TR = quant_tiled_rows(q);
	const size_t tstride = QUANT_TILE_ROWS * q->row_bytes;
	g.in = (int)q->cols;
	for (int r = r0; r < r1;) {
		if (r >= TR) {
			/* records: the row kernel, rows relative to row0 */
			g.w = (const char *)q->data + (size_t)j->row0 * q->row_bytes;
			g.ldw = q->row_bytes;
			j->fn(&g, r - j->row0, r1 - j->row0);
			return;
		}
		const int t = r / QUANT_TILE_ROWS, tr0 = t * QUANT_TILE_ROWS;
		if (r == tr0 && tr0 + QUANT_TILE_ROWS <= r1 && j->tile_fn) {
			/* a run of whole tiles */
			int t1 = t + 1;
			while ((int64_t)(t1 + 1) * QUANT_TILE_ROWS <= MIN((int64_t)r1, TR))
				t1++;
			struct cpu_gemv_args tg = g;
			tg.w = q->data;
			tg.ldw = tstride;
			tg.y = g.y + (tr0 - j->row0);
			j->tile_fn(&tg, t, t1);
			r = t1 * QUANT_TILE_ROWS;
			continue;
		}
		/* a tile in part, or no tile kernel: the tile's 16 results into ty (T x 16), then the
		 * rows wanted stored or added as a kernel does */
		const int hi = MIN(r1, tr0 + QUANT_TILE_ROWS);
		struct cpu_gemv_args tg = g;
		tg.y = ty;
		tg.ldy = QUANT_TILE_ROWS;
		tg.accumulate = false;
		if (j->tile_fn) {
			tg.w = q->data;
			tg.ldw = tstride;
			j->tile_fn(&tg, t, t + 1);
		} else {
			for (int i = 0; i < QUANT_TILE_ROWS; i++)
				quant_tile_row_record(q->format, q->cols,
						      (const char *)q->data + (size_t)t * tstride, i,
						      gbuf + (size_t)i * q->row_bytes);
			tg.w = gbuf;
			tg.ldw = q->row_bytes;
			/* only the rows wanted, as the records would run them */
			j->fn(&tg, r - tr0, hi - tr0);
		}
		for (int k = 0; k < g.T; k++)
			for (int i = r; i < hi; i++) {
				float *p = g.y + (size_t)k * g.ldy + (i - j->row0);
				float s = ty[(size_t)k * QUANT_TILE_ROWS + (i - tr0)];
				*p = g.accumulate ? *p + s : s;
			}
		r = hi;
	}
}

static void tiled_task(void *ctx, int task, int thread)
{
	const struct tiled_job *j = ctx;
	int r0 = MAX(j->row0, j->base + task * j->chunk);
	int r1 = MIN(j->row0 + j->nrows, j->base + (task + 1) * j->chunk);
	if (r0 >= r1)
		return;
	char *gbuf = j->gbufs ? j->gbufs + (size_t)thread * QUANT_TILE_ROWS * j->q->row_bytes : NULL;
	float ty[CPU_GEMV_KERNEL_T * QUANT_TILE_ROWS] __attribute__((aligned(64)));
	/* a block of rows (whole tiles, about GROUP_BLOCK_BYTES) for every group of tokens before
	 * the next block, as gemv_task does */
	int block = (int)MAX((size_t)QUANT_TILE_ROWS,
			     MIN((size_t)GROUP_BLOCK_BYTES / j->q->row_bytes, (size_t)1 << 20) &
				     ~(size_t)(QUANT_TILE_ROWS - 1));
	if (j->a.T <= CPU_GEMV_KERNEL_T)
		block = r1 - r0;
	for (int b = r0; b < r1; b = (b / block + 1) * block) {
		int b1 = MIN((b / block + 1) * block, r1);
		for (int t = 0; t < j->a.T; t += CPU_GEMV_KERNEL_T) {
			struct cpu_gemv_args g = j->a;
			g.x += (size_t)t * g.ldx;
			g.y += (size_t)t * g.ldy;
			if (g.xq)
				g.xq += (size_t)t * g.ldxq;
			g.T = MIN(CPU_GEMV_KERNEL_T, j->a.T - t);
			tiled_part(j, g, b, b1, gbuf, ty);
		}
	}
}

static int tiled_rows(const struct quant_tensor *w, int row0, int nrows, int T, float *y, size_t ldy,
		      bool accumulate, cpu_gemv_fn *fn, cpu_gemv_fn *tile_fn, const struct cpu_gemv_args *xa)
{
	struct tiled_job j = {
		.q = w,
		.fn = fn,
		.tile_fn = tile_fn,
		.a = *xa,
		.row0 = row0,
		.nrows = nrows,
		.base = row0 & ~(QUANT_TILE_ROWS - 1),
	};
	j.a.T = T;
	j.a.y = y;
	j.a.ldy = ldy;
	j.a.accumulate = accumulate;
	int span = row0 + nrows - j.base, tasks = cpu_threads();
	int per = (span + tasks - 1) / tasks;
	j.chunk = (per + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
	if (!tile_fn && !(j.gbufs = aligned_alloc(64, (size_t)tasks * QUANT_TILE_ROWS * w->row_bytes)))
		return -ENOMEM;
	cpu_parallel_for_work((span + j.chunk - 1) / j.chunk, tiled_task, &j, (double)nrows * w->cols * T);
	free(j.gbufs);
	return 0;
}

static int quant_rows(const struct quant_tensor *w, int row0, int nrows, const float *x, size_t ldx, int T,
		      float *y, size_t ldy, bool accumulate, bool i8)
{
	if (nrows <= 0 || T <= 0)
		return 0;
	if (row0 < 0 || (int64_t)row0 + nrows > w->rows || w->cols > INT32_MAX)
		return -EINVAL;
	const struct cpu_gemv_variant *v = variant();
	cpu_gemv_fn *ifn = w->format == QUANT_Q8 ? v->q8_i8 : w->format == QUANT_Q4 ? v->q4_i8 : NULL;
	char *xq = NULL;
	size_t ldxq = 0;
	if (i8 && ifn) {
		ldxq = cpu_gemv_xq_bytes(w->format, (int)w->cols);
		xq = aligned_alloc(64, (size_t)T * ldxq);
		if (!xq)
			return -ENOMEM;
		(v->quant_x ? v->quant_x : cpu_gemv_quantize_x)(w->format, x, ldx, T, (int)w->cols, xq, ldxq);
	}
	if (quant_tiled_rows(w) > 0) {
		int r = tiled_rows(w, row0, nrows, T, y, ldy, accumulate,
				   xq			 ? ifn :
				   w->format == QUANT_Q8 ? v->q8 :
							   v->q4,
				   !xq			 ? NULL :
				   w->format == QUANT_Q4 ? v->q4_tile_i8 :
							   v->q8_tile_i8,
				   &(struct cpu_gemv_args){.x = x, .ldx = ldx, .xq = xq, .ldxq = ldxq});
		free(xq);
		return r;
	}
	/* fp8 (records only: quant_tile_supported()) in bf16 precision: the activations rounded to
	 * bf16 once, in the kernel's order */
	uint16_t *xb = NULL;
	size_t ldxb = 0;
	if (i8 && w->format == QUANT_FP8 && cpu_gemv_fp8_bf16_ok(v)) {
		ldxb = cpu_gemv_fp8_ldxb((int)w->cols);
		if (!(xb = aligned_alloc(64, (size_t)T * ldxb * sizeof(*xb)))) {
			free(xq);
			return -ENOMEM;
		}
		v->fp8_round_x(x, ldx, T, (int)w->cols, xb, ldxb);
	}
	struct gemv_job j = {
		.fn = xq		    ? ifn :
		      xb		    ? v->fp8_bf16 :
		      w->format == QUANT_Q8 ? v->q8 :
		      w->format == QUANT_Q4 ? v->q4 :
					      v->fp8,
		.a =
			{
				.w = (const char *)w->data + (size_t)row0 * w->row_bytes,
				.ldw = w->row_bytes,
				.in = (int)w->cols,
				.T = T,
				.x = x,
				.ldx = ldx,
				.y = y,
				.ldy = ldy,
				.accumulate = accumulate,
				.xq = xq,
				.ldxq = ldxq,
				.xb = xb,
				.ldxb = ldxb,
			},
		.nrows = nrows,
		.group_t = CPU_GEMV_KERNEL_T,
	};
	j.block_rows =
		(int)MAX(8, MIN((size_t)GROUP_BLOCK_BYTES / w->row_bytes, (size_t)1 << 20) & ~(size_t)7);
	int tasks = cpu_threads();
	int per = (nrows + tasks - 1) / tasks;
	j.chunk = (per + ROW_ALIGN - 1) / ROW_ALIGN * ROW_ALIGN;
	cpu_parallel_for_work((nrows + j.chunk - 1) / j.chunk, gemv_task, &j, (double)nrows * w->cols * T);
	free(xq);
	free(xb);
	return 0;
}

int cpu_gemv_quant_rows(const struct quant_tensor *w, int row0, int nrows, const float *x, size_t ldx, int T,
			float *y, size_t ldy, bool accumulate)
{
	return quant_rows(w, row0, nrows, x, ldx, T, y, ldy, accumulate, false);
}

int cpu_gemv_quant_rows_i8(const struct quant_tensor *w, int row0, int nrows, const float *x, size_t ldx,
			   int T, float *y, size_t ldy, bool accumulate)
{
	return quant_rows(w, row0, nrows, x, ldx, T, y, ldy, accumulate, true);
}

bool cpu_gemv_quant_tiles(int f)
{
	return f == QUANT_Q4 ? variant()->q4_tile_i8 != NULL : f == QUANT_Q8 && variant()->q8_tile_i8 != NULL;
}

bool cpu_gemv_quant_has_i8(void)
{
	return variant()->q8_i8 != NULL;
}

int cpu_quant_rows_to_bf16(const struct quant_tensor *q, int64_t r0, int64_t n, uint16_t *out)
{
	if (r0 < 0 || n < 0 || r0 + n > q->rows)
		return -EINVAL;
	const struct cpu_gemv_variant *v = variant();
	cpu_row_bf16_fn *fn = q->format == QUANT_Q8 ? v->q8_to_bf16 :
			      q->format == QUANT_Q4 ? v->q4_to_bf16 :
						      v->fp8_to_bf16;
	float *row = NULL;
	/* tiled rows: a whole tile's 16 records gathered at once (the variant's transposes, else
	 * quant.h's loop), a tile in part row by row */
	char *gathered = NULL;
	const int64_t TR = quant_tiled_rows(q);
	if (TR > r0 && !(gathered = aligned_alloc(64, QUANT_TILE_ROWS * q->row_bytes)))
		return -ENOMEM;
	int64_t in_tile = -1; /* the tile whose records are in gathered */
	for (int64_t r = 0; r < n; r++) {
		const int64_t a = r0 + r, t = a / QUANT_TILE_ROWS;
		const void *rec;
		if (a >= TR) {
			rec = quant_tensor_row(q, a, NULL);
		} else if (t == in_tile || (a % QUANT_TILE_ROWS == 0 && a + QUANT_TILE_ROWS <= r0 + n)) {
			if (t != in_tile) {
				const char *tile =
					(const char *)q->data + (size_t)t * QUANT_TILE_ROWS * q->row_bytes;
				if (v->tile_records)
					v->tile_records(q->format, q->cols, tile, gathered, q->row_bytes);
				else
					for (int i = 0; i < QUANT_TILE_ROWS; i++)
						quant_tile_row_record(q->format, q->cols, tile, i,
								      gathered + (size_t)i * q->row_bytes);
				in_tile = t;
			}
			rec = gathered + (size_t)(a % QUANT_TILE_ROWS) * q->row_bytes;
		} else {
			rec = quant_tensor_row(q, a, gathered);
			in_tile = -1;
		}
		uint16_t *o = out + (size_t)r * (size_t)q->cols;
		if (fn) {
			fn(rec, q->cols, o);
			continue;
		}
		if (!row && !(row = malloc((size_t)q->cols * sizeof(float)))) {
			free(gathered);
			return -ENOMEM;
		}
		quant_row_to_f32(q->format, rec, q->cols, row);
		for (int64_t k = 0; k < q->cols; k++)
			o[k] = f32_to_bf16(row[k]);
	}
	free(gathered);
	free(row);
	return 0;
}
