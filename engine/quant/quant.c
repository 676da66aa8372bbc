/* The quantized weight formats' reference code (quant.h, docs/quantization.md). */
#include "quant.h"

#include <errno.h>
#include <math.h>
#include <string.h>

static const struct quant_format_desc descs[QUANT_FORMAT_COUNT] = {
	[QUANT_Q8] = {.name = "q8",
		      .block = QUANT_BLOCK,
		      .code_bytes = 32,
		      .scale_bytes = 2,
		      .bits_per_weight = 8.5},
	[QUANT_Q4] = {.name = "q4",
		      .block = QUANT_BLOCK,
		      .code_bytes = 16,
		      .scale_bytes = 2,
		      .bits_per_weight = 4.5},
	[QUANT_FP8] = {.name = "fp8",
		       .block = QUANT_BLOCK,
		       .code_bytes = 32,
		       .scale_bytes = 0,
		       .bits_per_weight = 8.0},
};

const struct quant_format_desc *quant_format_desc(enum quant_format f)
{
	return (unsigned)f < QUANT_FORMAT_COUNT ? &descs[f] : NULL;
}

int quant_format_parse(const char *name, enum quant_format *ret_format)
{
	for (int i = 0; i < QUANT_FORMAT_COUNT; i++)
		if (name && strcmp(name, descs[i].name) == 0) {
			*ret_format = (enum quant_format)i;
			return 0;
		}
	return -EINVAL;
}

/* ---- fp16 ---------------------------------------------------------------------------------- */

static uint32_t f32_bits(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	return u;
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

float quant_f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000u) << 16, exp = (h >> 10) & 0x1fu, man = h & 0x3ffu;
	if (exp == 0) {
		/* zero or subnormal: man * 2^-24, exact in fp32 */
		float v = (float)man * 5.9604644775390625e-8f;
		return sign ? -v : v;
	}
	if (exp == 31)
		return bits_f32(sign | 0x7f800000u | (man << 13));
	return bits_f32(sign | ((exp + 112) << 23) | (man << 13));
}

uint16_t quant_f32_to_f16(float f)
{
	uint32_t x = f32_bits(f);
	uint16_t sign = (uint16_t)((x >> 16) & 0x8000u);
	x &= 0x7fffffffu;
	if (x > 0x7f800000u)
		return sign | 0x7e00u;
	if (x >= 0x477ff000u) /* 65520 and up round to infinity */
		return sign | 0x7c00u;
	uint32_t exp = x >> 23, man = x & 0x7fffffu;
	if (exp >= 113) { /* fp16 normal: exponent 2^-14 and up */
		uint32_t h = ((exp - 112) << 10) | (man >> 13), rem = man & 0x1fffu;
		if (rem > 0x1000u || (rem == 0x1000u && (h & 1u)))
			h++; /* a carry into the exponent is the right answer */
		return sign | (uint16_t)h;
	}
	/* fp16 subnormal: units of 2^-24; value = (man | 2^23) * 2^(exp - 150) */
	if (exp < 102) /* below 2^-25: rounds to zero (exactly 2^-25 is a tie to even zero too) */
		return sign;
	man |= 0x800000u;
	uint32_t shift = 126 - exp, h = man >> shift, rem = man & ((1u << shift) - 1),
		 half = 1u << (shift - 1);
	if (rem > half || (rem == half && (h & 1u)))
		h++;
	return sign | (uint16_t)h;
}

/* ---- sizes --------------------------------------------------------------------------------- */

static size_t row_bytes_of(enum quant_format f, int64_t cols)
{
	size_t nb = (size_t)quant_blocks(cols);
	if (f == QUANT_FP8) /* the codes, then the row's fp32 scale in a line of its own */
		return quant_round_align(nb * 32) + QUANT_ALIGN;
	return quant_round_align(nb * (size_t)descs[f].code_bytes) +
	       quant_round_align(nb * (size_t)descs[f].scale_bytes);
}

int quant_row_bytes(enum quant_format f, int64_t cols, size_t *ret_bytes)
{
	if ((unsigned)f >= QUANT_FORMAT_COUNT || cols < 1)
		return -EINVAL;
	if (cols > QUANT_MAX_COLS)
		return -E2BIG;
	*ret_bytes = row_bytes_of(f, cols);
	return 0;
}

int quant_tensor_bytes(enum quant_format f, int64_t rows, int64_t cols, size_t *ret_bytes)
{
	size_t rb, total;
	int r = quant_row_bytes(f, cols, &rb);
	if (r < 0)
		return r;
	if (rows < 1)
		return -EINVAL;
	if (rows > QUANT_MAX_ROWS || __builtin_mul_overflow((size_t)rows, rb, &total) ||
	    total > QUANT_MAX_TENSOR_BYTES)
		return -E2BIG;
	*ret_bytes = total;
	return 0;
}

/* ---- quantize ------------------------------------------------------------------------------ */

/* roundf(q) (ties away from zero) clamped to [lo, hi] (lo <= 0 <= hi, integers), for finite or
 * infinite q: the same value as fmaxf(lo, fminf(hi, roundf(q))), without libm's calls, which
 * were most of the q4 quantizer's time (it rounds each weight of a block about six times). q is
 * clamped to [lo - 1, hi + 1] first (the result cannot differ: anything past lo - 1/2 rounds to
 * lo or below), so the conversion to int cannot overflow; q - trunc(q) is exact. */
static inline float round_clamp(float q, float lo, float hi)
{
	q = q < lo - 1 ? lo - 1 : q;
	q = q > hi + 1 ? hi + 1 : q;
	int i = (int)q;
	float f = q - (float)i;
	i += (f >= 0.5f) - (f <= -0.5f);
	i = i < (int)lo ? (int)lo : i;
	i = i > (int)hi ? (int)hi : i;
	return (float)i;
}

/* 0, -EINVAL (NaN, infinity) or -ERANGE (past QUANT_MAX_ABS) for n values; their range. */
static int block_range(const float *w, int n, float *ret_lo, float *ret_hi)
{
	float lo = w[0], hi = w[0];
	for (int i = 0; i < n; i++) {
		if (!isfinite(w[i]))
			return -EINVAL;
		lo = w[i] < lo ? w[i] : lo;
		hi = w[i] > hi ? w[i] : hi;
	}
	if (fabsf(lo) > QUANT_MAX_ABS || fabsf(hi) > QUANT_MAX_ABS)
		return -ERANGE;
	*ret_lo = lo;
	*ret_hi = hi;
	return 0;
}

static void q8_block(const float *w, int n, float lo, float hi, int8_t *codes, uint16_t *ret_d)
{
	float amax = fmaxf(fabsf(lo), fabsf(hi));
	uint16_t d16 = quant_f32_to_f16(amax / 127.0f);
	float d = quant_f16_to_f32(d16);
	for (int i = 0; i < n; i++) {
		codes[i] = (int8_t)(d == 0 ? 0 : round_clamp(w[i] / d, -127.0f, 127.0f));
	}
	*ret_d = d16;
}

/* ---- q4: w = d (q - z / 4), d an fp16 of 6 significant bits, z in [0, 63] ---------------- */

struct q4_fit {
	uint16_t dz;
	uint8_t q[QUANT_BLOCK];
	double sse, maxerr;
};

/* d * q and m are exact in fp32 (6 bits times 4; 6 times 6), so this is fmaf(d, q, m) without
 * libm's fmaf */
static float q4_value(float d, uint8_t q, float m)
{
	return d * (float)q + m;
}

#define Q4_D_MAX 64512.0f /* the largest fp16 of 6 significant bits: 0x7be0 */

/* want (> 0) to an fp16 of 6 significant bits (5 mantissa bits; below fp16's normal range,
 * multiples of 2^-19), to nearest or up; its fp16 bits. 0 for want <= 0 or NaN. */
static uint16_t q4_d_bits(float want, bool up)
{
	if (!(want > 0))
		return 0;
	if (want >= Q4_D_MAX)
		return quant_f32_to_f16(Q4_D_MAX);
	int e;
	frexpf(want, &e); /* want = f 2^e, f in [0.5, 1): its binade is 2^(e - 1) */
	e = e - 1 < -14 ? -14 : e - 1;
	const float step = ldexpf(1.0f, e - 5);
	/* want / step is exact (a power of two) and below 2^7: rintf and ceilf are exact */
	const float v = (up ? ceilf(want / step) : rintf(want / step)) * step;
	return quant_f32_to_f16(v > Q4_D_MAX ? Q4_D_MAX : v); /* exact */
}

static uint16_t q4_dz(uint16_t d16, int z)
{
	z = z < 0 ? 0 : z > 63 ? 63 : z;
	return (uint16_t)((d16 >> 5) << 6 | z);
}

/* The codes for a stored dz and their errors. */
static void q4_eval(const float *w, int n, uint16_t dz, struct q4_fit *c)
{
	const float d = quant_q4_d(dz), m = quant_q4_m(d, dz), id = d == 0 ? 0 : 1.0f / d;
	c->dz = dz;
	double sse = 0, maxerr = 0;
	/* branch-free: the codes are data, so the branches of a clamp or of the rounding's tie
	 * mispredicted about every other weight (the quantizer's time, ~10 evaluations a block) */
	for (int i = 0; i < n; i++) {
		uint8_t q = (uint8_t)round_clamp((w[i] - m) * id, 0.0f, 15.0f);
		c->q[i] = q;
		double e = fabs((double)w[i] - (double)q4_value(d, q, m));
		sse += e * e;
		maxerr = e > maxerr ? e : maxerr;
	}
	c->sse = sse;
	c->maxerr = maxerr;
}

/* Evaluates d16 with the offset code nearest -4 m / d and its two neighbours; keeps the best
 * within limit in *best. */
static void q4_try(const float *w, int n, uint16_t d16, double m, double limit, struct q4_fit *best)
{
	const float d = quant_f16_to_f32(d16);
	if (d == 0)
		return;
	const double zc = -4.0 * m / d;
	const int z0 = zc < 0 ? 0 : zc > 63 ? 63 : (int)lrint(zc);
	struct q4_fit c;
	for (int z = z0 - 1; z <= z0 + 1; z++) {
		if (z < 0 || z > 63 || q4_dz(d16, z) == best->dz)
			continue;
		q4_eval(w, n, q4_dz(d16, z), &c);
		if (c.maxerr <= limit && c.sse < best->sse)
			*best = c;
	}
}

/* The least-squares (d, m) of w against c's codes, tried as stored; false when the codes do not
 * determine them (all equal) or d <= 0. */
static bool q4_refit(const float *w, int n, const struct q4_fit *c, double limit, struct q4_fit *best)
{
	double sq = 0, sqq = 0, sw = 0, sqw = 0;
	for (int i = 0; i < n; i++) {
		sq += c->q[i];
		sqq += (double)c->q[i] * c->q[i];
		sw += w[i];
		sqw += (double)c->q[i] * w[i];
	}
	double det = n * sqq - sq * sq;
	if (!(det > 0))
		return false;
	double d = (n * sqw - sq * sw) / det, m = (sw - d * sq) / n;
	if (!(d > 0))
		return false;
	q4_try(w, n, q4_d_bits((float)d, false), m, limit, best);
	return true;
}

/* The weight of a block's summed error against its squared errors in the q4 quantizer's last
 * step (q4_balance). A product's error over a block is sum_i e_i x_i; with activations of mean
 * mu and variance s^2 its expectation is sse s^2 + (sum e)^2 mu^2: relu2's (the MLP's
 * down_proj) have mu^2 / s^2 = 0.2, a norm's about 0. Least squares with an intercept leaves a
 * block's errors summing to about zero (the 5-bit q4's fp16 minimum: (sum e)^2 / (32 mean e^2)
 * 0.24 on normal weights); a minimum in quarter steps leaves 0.69, and the 12B shapes' logits
 * NMSE was 0.78x Q4_0's where the weights' was 0.73x. Measured on normal weights, 5120 columns,
 * 6000 rows (the output NMSE of W x against the 5-bit q4's, normal x / relu2 x / the weights'):
 * no balancing 0.98 / 1.10 / 1.00, 0.05 1.00 / 1.03 / 1.00, 0.1 1.01 / 1.01 / 1.01, 0.2 1.03 /
 * 1.01 / 1.02; 0.1 keeps all three within 1% of the 5-bit format's. */
#define Q4_SUM_WEIGHT 0.1

/* Moves single codes one step while that lowers sse + Q4_SUM_WEIGHT x (the errors' sum)^2,
 * the best move first, never past `limit`. */
static void q4_balance(const float *w, int n, double limit, struct q4_fit *f)
{
	const float d = quant_q4_d(f->dz), m = quant_q4_m(d, f->dz);
	if (d == 0)
		return;
	double r[QUANT_BLOCK], s = 0;
	for (int i = 0; i < n; i++) {
		r[i] = (double)w[i] - (double)q4_value(d, f->q[i], m);
		s += r[i];
	}
	bool moved = false;
	for (int it = 0; it < n; it++) {
		int best = -1, bstep = 0;
		double bgain = 0, bnew = 0;
		for (int i = 0; i < n; i++)
			for (int st = -1; st <= 1; st += 2) {
				if ((st > 0 && f->q[i] >= 15) || (st < 0 && f->q[i] == 0))
					continue;
				const double nr =
					(double)w[i] - (double)q4_value(d, (uint8_t)(f->q[i] + st), m);
				if (fabs(nr) > limit)
					continue;
				const double ns = s + nr - r[i];
				const double gain =
					(r[i] * r[i] - nr * nr) + Q4_SUM_WEIGHT * (s * s - ns * ns);
				if (gain > bgain) {
					best = i;
					bstep = st;
					bgain = gain;
					bnew = nr;
				}
			}
		if (best < 0)
			break;
		f->q[best] = (uint8_t)(f->q[best] + bstep);
		s += bnew - r[best];
		r[best] = bnew;
		moved = true;
	}
	if (!moved)
		return;
	double sse = 0, maxerr = 0;
	for (int i = 0; i < n; i++) {
		sse += r[i] * r[i];
		maxerr = fabs(r[i]) > maxerr ? fabs(r[i]) : maxerr;
	}
	f->sse = sse;
	f->maxerr = maxerr;
}

static void q4_block(const float *w, int n, float lo, float hi, uint8_t *codes, uint16_t *ret_dz)
{
	struct q4_fit best;
	/* the min/max grid of the range with 0 in it (the offset is at most 0): d rounded up, so
	 * [-z d / 4, (15 - z / 4) d] reaches both ends within d / 8 */
	const float lo0 = fminf(lo, 0), hi0 = fmaxf(hi, 0);
	const uint16_t d16 = q4_d_bits((hi0 - lo0) / 15.0f, true);
	const float d = quant_f16_to_f32(d16);
	q4_eval(w, n, q4_dz(d16, d == 0 ? 0 : (int)lrintf(-4.0f * lo0 / d)), &best);
	const double limit = fmax(best.maxerr, ((double)hi0 - lo0) / 15.0);
	q4_try(w, n, d16, lo0, limit, &best);
	/* GGML Q4_0's grid: the value of largest magnitude at an end, d = |vmax| / 8 */
	const float vmax = fabsf(lo) > fabsf(hi) ? lo : hi;
	q4_try(w, n, q4_d_bits(fabsf(vmax) / 8.0f, false), vmax < 0 ? vmax : -7.0 / 8.0 * vmax, limit, &best);
	/* two least-squares refits of (d, m) from the best codes */
	for (int it = 0; it < 2; it++) {
		const uint16_t before = best.dz;
		struct q4_fit c = best;
		if (!q4_refit(w, n, &c, limit, &best) || best.dz == before)
			break;
	}
	q4_balance(w, n, limit, &best);
	memset(codes, 0, QUANT_BLOCK / 2);
	for (int i = 0; i < n; i++)
		codes[i & 15] |= (uint8_t)(best.q[i] << (i < 16 ? 0 : 4));
	*ret_dz = best.dz;
}

int quant_row_from_f32(enum quant_format f, const float *w, int64_t cols, void *row)
{
	size_t rb;
	int r = quant_row_bytes(f, cols, &rb);
	if (r < 0)
		return r == -E2BIG ? -EINVAL : r;
	int64_t nb = quant_blocks(cols);
	float lo, hi, amax = 0;
	for (int64_t b = 0; b < nb; b++) {
		r = block_range(w + b * QUANT_BLOCK,
				(int)(cols - b * QUANT_BLOCK < QUANT_BLOCK ? cols - b * QUANT_BLOCK :
									     QUANT_BLOCK),
				&lo, &hi);
		if (r < 0)
			return r;
		amax = fmaxf(amax, fmaxf(fabsf(lo), fabsf(hi)));
	}
	if (f == QUANT_FP8) {
		float s;
		if ((r = quant_fp8_scale_for(amax, &s)) < 0)
			return r;
		return quant_fp8_row_from_f32(w, cols, s, row);
	}
	memset(row, 0, rb);
	for (int64_t b = 0; b < nb; b++) {
		const float *wb = w + b * QUANT_BLOCK;
		int n = (int)(cols - b * QUANT_BLOCK < QUANT_BLOCK ? cols - b * QUANT_BLOCK : QUANT_BLOCK);
		block_range(wb, n, &lo, &hi);
		if (f == QUANT_Q8) {
			uint16_t d;
			q8_block(wb, n, lo, hi, (int8_t *)row + b * 32, &d);
			uint16_t *scales = (uint16_t *)quant_q8_scales(row, cols);
			scales[b] = d;
		} else {
			uint16_t *dz = (uint16_t *)quant_q4_dz(row, cols);
			q4_block(wb, n, lo, hi, (uint8_t *)row + b * 16, dz + b);
		}
	}
	return 0;
}

int quant_row_from_bf16(enum quant_format f, const uint16_t *w, int64_t cols, void *row)
{
	size_t rb;
	int r = quant_row_bytes(f, cols, &rb);
	if (r < 0)
		return r == -E2BIG ? -EINVAL : r;
	/* one block at a time through fp32 would need the row's range checked first: widen the
	 * row in pieces and check the whole row before writing it */
	float buf[QUANT_BLOCK];
	float lo, hi, amax = 0, s = 1;
	int64_t nb = quant_blocks(cols);
	for (int64_t b = 0; b < nb; b++) {
		int n = (int)(cols - b * QUANT_BLOCK < QUANT_BLOCK ? cols - b * QUANT_BLOCK : QUANT_BLOCK);
		for (int i = 0; i < n; i++)
			buf[i] = bits_f32((uint32_t)w[b * QUANT_BLOCK + i] << 16);
		r = block_range(buf, n, &lo, &hi);
		if (r < 0)
			return r;
		amax = fmaxf(amax, fmaxf(fabsf(lo), fabsf(hi)));
	}
	if (f == QUANT_FP8 && (r = quant_fp8_scale_for(amax, &s)) < 0)
		return r;
	memset(row, 0, rb);
	for (int64_t b = 0; b < nb; b++) {
		int n = (int)(cols - b * QUANT_BLOCK < QUANT_BLOCK ? cols - b * QUANT_BLOCK : QUANT_BLOCK);
		for (int i = 0; i < n; i++)
			buf[i] = bits_f32((uint32_t)w[b * QUANT_BLOCK + i] << 16);
		block_range(buf, n, &lo, &hi);
		if (f == QUANT_FP8) {
			for (int i = 0; i < n; i++)
				((uint8_t *)row)[b * QUANT_BLOCK + i] = quant_f32_to_e4m3(buf[i] / s);
		} else if (f == QUANT_Q8) {
			uint16_t d;
			q8_block(buf, n, lo, hi, (int8_t *)row + b * 32, &d);
			((uint16_t *)quant_q8_scales(row, cols))[b] = d;
		} else {
			q4_block(buf, n, lo, hi, (uint8_t *)row + b * 16,
				 (uint16_t *)quant_q4_dz(row, cols) + b);
		}
	}
	if (f == QUANT_FP8)
		memcpy((char *)row + quant_round_align((size_t)nb * 32), &s, sizeof(s));
	return 0;
}

static int tensor_from(enum quant_format f, const void *w, bool bf16, int64_t rows, int64_t cols, size_t ld,
		       void *dst, struct quant_tensor *ret)
{
	size_t total, rb;
	int r = quant_tensor_bytes(f, rows, cols, &total);
	if (r < 0)
		return r;
	if (ld < (size_t)cols)
		return -EINVAL;
	rb = total / (size_t)rows;
	for (int64_t i = 0; i < rows; i++) {
		char *row = (char *)dst + (size_t)i * rb;
		r = bf16 ? quant_row_from_bf16(f, (const uint16_t *)w + (size_t)i * ld, cols, row) :
			   quant_row_from_f32(f, (const float *)w + (size_t)i * ld, cols, row);
		if (r < 0)
			return r;
	}
	*ret = (struct quant_tensor){.format = f, .rows = rows, .cols = cols, .row_bytes = rb, .data = dst};
	return 0;
}

int quant_tensor_from_f32(enum quant_format f, const float *w, int64_t rows, int64_t cols, size_t ld,
			  void *dst, struct quant_tensor *ret)
{
	return tensor_from(f, w, false, rows, cols, ld, dst, ret);
}

int quant_tensor_from_bf16(enum quant_format f, const uint16_t *w, int64_t rows, int64_t cols, size_t ld,
			   void *dst, struct quant_tensor *ret)
{
	return tensor_from(f, w, true, rows, cols, ld, dst, ret);
}

/* ---- dequantize and bounds ----------------------------------------------------------------- */

void quant_row_to_f32(enum quant_format f, const void *row, int64_t cols, float *out)
{
	if (f == QUANT_FP8) {
		float s = *quant_fp8_scale(row, cols);
		for (int64_t k = 0; k < cols; k++)
			out[k] = quant_e4m3_to_f32(quant_fp8_codes(row)[k]) * s;
		return;
	}
	for (int64_t k = 0; k < cols; k++) {
		int64_t b = k / QUANT_BLOCK;
		int i = (int)(k % QUANT_BLOCK);
		if (f == QUANT_Q8) {
			float d = quant_f16_to_f32(quant_q8_scales(row, cols)[b]);
			out[k] = d * (float)quant_q8_codes(row)[k];
		} else {
			const uint16_t dz = quant_q4_dz(row, cols)[b];
			uint8_t byte = quant_q4_codes(row)[b * 16 + (i & 15)];
			uint8_t q = i < 16 ? byte & 15 : byte >> 4;
			const float d = quant_q4_d(dz);
			out[k] = q4_value(d, q, quant_q4_m(d, dz));
		}
	}
}

double quant_error_bound(enum quant_format f, float lo, float hi)
{
	double l = lo, h = hi;
	if (f == QUANT_FP8) {
		float amax = fmaxf(fabsf(lo), fabsf(hi)), s;
		return quant_fp8_error_bound(amax, quant_fp8_scale_for(amax, &s) == 0 ? s : amax / 448.0f);
	}
	if (f == QUANT_Q8)
		return fmax(fabs(l), fabs(h)) / 254.0 * (1 + 0x1p-8) + 0x1p-17;
	return (fmax(h, 0) - fmin(l, 0)) / 15.0 * (1 + 0x1p-8) + (fabs(l) + fabs(h)) * 0x1p-22 + 0x1p-20;
}

/* ---- fp8 (e4m3) ---------------------------------------------------------------------------- */

float quant_e4m3_to_f32(uint8_t c)
{
	uint32_t e = (c >> 3) & 15, m = c & 7, sign = (uint32_t)(c & 0x80) << 24;
	if ((c & 0x7f) == 0x7f)
		return NAN;
	if (e == 0) /* subnormal: m 2^-3 2^-6, exact */
		return bits_f32(sign | f32_bits((float)m * 0x1p-9f));
	/* (1 + m / 8) 2^(e - 7): the exponent rebiased, the 3 mantissa bits on top of fp32's 23 */
	return bits_f32(sign | ((e + 120) << 23) | (m << 20));
}

uint8_t quant_f32_to_e4m3(float v)
{
	if (isnan(v))
		return 0x7f;
	uint8_t sign = signbit(v) ? 0x80 : 0;
	float a = fabsf(v);
	if (a >= QUANT_FP8_MAX)
		return sign | 0x7e;
	/* the spacing of a's binade: 2^(e - 3) for a in [2^e, 2^(e + 1)), e >= -6; 2^-9 below */
	int e;
	frexpf(a, &e); /* a = f 2^e, f in [0.5, 1): a's binade is 2^(e - 1) */
	e = e - 1 < -6 ? -6 : e - 1;
	float step = ldexpf(1.0f, e - 3);
	/* a / step is exact (a power of two); rint rounds to nearest even in the default mode */
	float q = rintf(a / step) * step;
	/* q is a representable e4m3 value (a carry into the next binade is too): find its code */
	if (q >= QUANT_FP8_MAX)
		return sign | 0x7e;
	if (q < 0x1p-6f)
		return sign | (uint8_t)(q * 512.0f); /* subnormal codes 0..7 (8 is 2^-6's normal code) */
	int qe;
	float f = frexpf(q, &qe); /* q = f 2^qe, f in [0.5, 1): e4m3 exponent qe - 1 + 7 */
	int m = (int)(f * 16.0f) - 8;
	return sign | (uint8_t)(((qe + 6) << 3) | m);
}

bool quant_fp8_scale_ok(float s)
{
	return isfinite(s) && s >= QUANT_FP8_MIN_SCALE && s <= QUANT_FP8_MAX_SCALE;
}

int quant_fp8_scale_for(float amax, float *ret_scale)
{
	float s = amax > 0 ? amax / QUANT_FP8_MAX : 1.0f;
	if (!quant_fp8_scale_ok(s))
		return -ERANGE;
	*ret_scale = s;
	return 0;
}

double quant_fp8_error_bound(float w, float scale)
{
	return fabs((double)w) * (0x1p-4 + 0x1p-22) + (double)scale * 0x1p-10;
}

static void fp8_store_scale(void *row, int64_t cols, float s)
{
	size_t off = quant_round_align((size_t)quant_blocks(cols) * 32);
	memset((char *)row + off, 0, QUANT_ALIGN);
	memcpy((char *)row + off, &s, sizeof(s));
}

int quant_fp8_row_from_f32(const float *w, int64_t cols, float scale, void *row)
{
	size_t rb;
	int r = quant_row_bytes(QUANT_FP8, cols, &rb);
	if (r < 0)
		return r == -E2BIG ? -EINVAL : r;
	if (!quant_fp8_scale_ok(scale))
		return -ERANGE;
	/* 448 + half a step (16) is where rounding would leave the largest code */
	for (int64_t k = 0; k < cols; k++) {
		if (!isfinite(w[k]))
			return -EINVAL;
		if (fabsf(w[k]) / scale > QUANT_FP8_MAX + 16.0f)
			return -ERANGE;
	}
	memset(row, 0, rb);
	for (int64_t k = 0; k < cols; k++)
		((uint8_t *)row)[k] = quant_f32_to_e4m3(w[k] / scale);
	fp8_store_scale(row, cols, scale);
	return 0;
}

int quant_fp8_row_from_codes(const uint8_t *codes, int64_t cols, float scale, void *row, int64_t *ret_col)
{
	size_t rb;
	int r = quant_row_bytes(QUANT_FP8, cols, &rb);
	if (r < 0)
		return r == -E2BIG ? -EINVAL : r;
	if (!quant_fp8_scale_ok(scale))
		return -ERANGE;
	for (int64_t k = 0; k < cols; k++)
		if ((codes[k] & 0x7f) == 0x7f) {
			if (ret_col)
				*ret_col = k;
			return -EINVAL;
		}
	memcpy(row, codes, (size_t)cols);
	memset((char *)row + cols, 0, quant_round_align((size_t)quant_blocks(cols) * 32) - (size_t)cols);
	fp8_store_scale(row, cols, scale);
	return 0;
}

/* ---- tiles (quant.h) ---------------------------------------------------------------------- */

void quant_tile_from_records(enum quant_format f, int64_t cols, const void *recs, size_t row_bytes, void *tile)
{
	const int64_t nb = quant_blocks(cols);
	char *o = tile;
	memset(o, 0, QUANT_TILE_ROWS * row_bytes);
	for (int64_t b = 0; b < nb; b++)
		for (int i = 0; i < QUANT_TILE_ROWS; i++) {
			const char *row = (const char *)recs + (size_t)i * row_bytes;
			if (f == QUANT_Q8) {
				char *c = o + quant_q8_tile_codes(b);
				for (int v = 0; v < 8; v++)
					memcpy(c + 64 * v + 4 * i, quant_q8_codes(row) + 32 * b + 4 * v, 4);
				memcpy(o + quant_q8_tile_d(b, nb) + 2 * i, quant_q8_scales(row, cols) + b, 2);
				continue;
			}
			char *ob = o + quant_q4_tile_codes(b);
			for (int v = 0; v < 4; v++)
				memcpy(ob + 64 * v + 4 * i, quant_q4_codes(row) + 16 * b + 4 * v, 4);
			memcpy(o + quant_q4_tile_dz(b) + 2 * i, quant_q4_dz(row, cols) + b, 2);
		}
}

void quant_tile_row_record(enum quant_format f, int64_t cols, const void *tile, int i, void *rec)
{
	const int64_t nb = quant_blocks(cols);
	size_t row_bytes = 0;
	quant_row_bytes(f, cols, &row_bytes);
	memset(rec, 0, row_bytes);
	const char *t = tile;
	if (f == QUANT_Q8) {
		int8_t *codes = rec;
		uint16_t *d = (uint16_t *)((char *)rec + quant_round_align((size_t)nb * 32));
		for (int64_t b = 0; b < nb; b++) {
			for (int v = 0; v < 8; v++)
				memcpy(codes + 32 * b + 4 * v, t + quant_q8_tile_codes(b) + 64 * v + 4 * i, 4);
			memcpy(&d[b], t + quant_q8_tile_d(b, nb) + 2 * i, 2);
		}
		return;
	}
	uint8_t *codes = rec;
	uint16_t *dz = (uint16_t *)((char *)rec + quant_round_align((size_t)nb * 16));
	for (int64_t b = 0; b < nb; b++) {
		for (int v = 0; v < 4; v++)
			memcpy(codes + 16 * b + 4 * v, t + quant_q4_tile_codes(b) + 64 * v + 4 * i, 4);
		memcpy(&dz[b], t + quant_q4_tile_dz(b) + 2 * i, 2);
	}
}

int quant_tensor_tile_range(const struct quant_tensor *q, void *data, int64_t t0, int64_t t1, void *tmp)
{
	if (!quant_tile_supported(q->format))
		return -EINVAL;
	const size_t tb = QUANT_TILE_ROWS * q->row_bytes;
	for (int64_t t = t0; t < t1; t++) {
		char *p = (char *)data + (size_t)t * tb;
		memcpy(tmp, p, tb);
		quant_tile_from_records(q->format, q->cols, tmp, q->row_bytes, p);
	}
	return 0;
}

const void *quant_tensor_row(const struct quant_tensor *q, int64_t r, void *buf)
{
	if (r >= quant_tiled_rows(q))
		return (const char *)q->data + (size_t)r * q->row_bytes;
	const char *tile =
		(const char *)q->data + (size_t)(r / QUANT_TILE_ROWS) * QUANT_TILE_ROWS * q->row_bytes;
	quant_tile_row_record(q->format, q->cols, tile, (int)(r % QUANT_TILE_ROWS), buf);
	return buf;
}
