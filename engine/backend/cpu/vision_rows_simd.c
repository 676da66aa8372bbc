/* The row kernels of vision_rows.h, written once over GCC/clang vector extensions and compiled
 * once per variant: VR_NAME names it, VR_WIDTH is its vector width in floats (meson.build passes
 * both, with the instruction set's flags). Whole vectors go through the loop; the n % VR_WIDTH
 * tail goes through the same vector code on a padded copy, with padding that leaves the row's
 * sums unchanged.
 */
#include "vision_rows.h"

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "cpu_vexp.h"

#if !defined(VR_NAME) || !defined(VR_WIDTH)
#error "VR_NAME and VR_WIDTH are set by meson.build"
#endif

#define W VR_WIDTH
#define CAT2(a, b) a##b
#define CAT(a, b) CAT2(a, b)
#define VARIANT CAT(vision_rows_, VR_NAME)
#define STR2(a) #a
#define STR(a) STR2(a)

typedef float vf __attribute__((vector_size(W * 4)));
typedef int32_t vi __attribute__((vector_size(W * 4)));
typedef uint32_t vu __attribute__((vector_size(W * 4)));
typedef uint16_t vh __attribute__((vector_size(W * 2)));

static inline vf load(const float *p)
{
	vf v;
	memcpy(&v, p, sizeof(v));
	return v;
}

static inline void store(float *p, vf v)
{
	memcpy(p, &v, sizeof(v));
}

static inline vf splat(float x)
{
	return (vf){0} + x;
}

/* mask lanes (all ones / zero) choose a, the others b */
static inline vf select_f(vi mask, vf a, vf b)
{
	return (vf)(((vi)a & mask) | ((vi)b & ~mask));
}

static inline vf vmax(vf a, vf b)
{
	return select_f((vi)(a > b), a, b);
}

static inline vf vmin(vf a, vf b)
{
	return select_f((vi)(a < b), a, b);
}

static inline float hsum(vf v)
{
	float s = 0.0f;
	for (int i = 0; i < W; i++)
		s += v[i];
	return s;
}

static inline float hmax(vf v)
{
	float m = v[0];
	for (int i = 1; i < W; i++)
		m = v[i] > m ? v[i] : m;
	return m;
}

/* round to nearest even; NaN stays a quiet NaN with its sign (cpu_f32_to_bf16's rule) */
static inline vh to_bf16(vf x)
{
	vu u = (vu)x;
	vu r = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
	vi nan = (vi)((u & 0x7fffffffu) > 0x7f800000u);
	r = (vu)(((vi)r & ~nan) | ((vi)((u >> 16) | 0x40u) & nan));
	return __builtin_convertvector(r, vh);
}

static inline void store_bf16(uint16_t *p, vf x)
{
	vh h = to_bf16(x);
	memcpy(p, &h, sizeof(h));
}

/* the fp32 values of x's bf16 rounding */
static inline vf bf16_value(vh h)
{
	return (vf)(__builtin_convertvector(h, vu) << 16);
}

/* exp (cpu_vexp.h); the softmax's arguments are <= 0, and below -87 the result is exp(-87),
 * about 1.6e-38, where bf16's normal range ends anyway */
CPU_VEXP_DEFINE(vexp, vf, vi)

/* erf(x): Eigen's rational approximation, x clamped to [-4, 4] (erf(4) is 1 - 1.5e-8) */
static inline vf verf(vf x)
{
	x = vmin(vmax(x, splat(-4.0f)), splat(4.0f));
	vf x2 = x * x;
	vf p = splat(-2.72614225801306e-10f);
	p = p * x2 + 2.77068142495902e-08f;
	p = p * x2 + -2.10102402082508e-06f;
	p = p * x2 + -5.69250639462346e-05f;
	p = p * x2 + -7.34990630326855e-04f;
	p = p * x2 + -2.95459980854025e-03f;
	p = p * x2 + -1.60960333262415e-02f;
	vf q = splat(-1.45660718464996e-05f);
	q = q * x2 + -2.13374055278905e-04f;
	q = q * x2 + -1.68282697438203e-03f;
	q = q * x2 + -7.37332916720468e-03f;
	q = q * x2 + -1.42647390514189e-02f;
	return x * p / q;
}

/* the tail: n < W floats of src copied into a vector whose other lanes are `pad` */
static inline vf load_tail(const float *src, int n, float pad)
{
	float t[W];
	for (int i = 0; i < W; i++)
		t[i] = i < n ? src[i] : pad;
	return load(t);
}

static inline void store_tail(float *dst, int n, vf v)
{
	float t[W];
	store(t, v);
	memcpy(dst, t, sizeof(float) * (size_t)n);
}

static inline void store_bf16_tail(uint16_t *dst, int n, vf v)
{
	uint16_t t[W];
	store_bf16(t, v);
	memcpy(dst, t, sizeof(uint16_t) * (size_t)n);
}

static void layernorm_bf16(float *x, const float *add, const float *g, const float *b, int n, float eps,
			   uint16_t *out)
{
	const int nv = n / W * W, tail = n - nv;
	vf s = splat(0.0f);
	int i;

	for (i = 0; i < nv; i += W) {
		vf v = load(x + i);
		if (add) {
			v += load(add + i);
			store(x + i, v);
		}
		s += v;
	}
	if (tail) {
		vf v = load_tail(x + i, tail, 0.0f);
		if (add) {
			v += load_tail(add + i, tail, 0.0f);
			store_tail(x + i, tail, v);
		}
		s += v;
	}
	const float mean = hsum(s) / (float)n;
	vf q = splat(0.0f);
	for (i = 0; i < nv; i += W) {
		vf d = load(x + i) - mean;
		q += d * d;
	}
	if (tail) {
		vf d = load_tail(x + i, tail, mean) - mean;
		q += d * d;
	}
	const float rstd = 1.0f / sqrtf(hsum(q) / (float)n + eps);
	for (i = 0; i < nv; i += W)
		store_bf16(out + i, (load(x + i) - mean) * rstd * load(g + i) + load(b + i));
	if (tail)
		store_bf16_tail(out + i, tail,
				(load_tail(x + i, tail, 0.0f) - mean) * rstd * load_tail(g + i, tail, 0.0f) +
					load_tail(b + i, tail, 0.0f));
}

static void rmsnorm_bf16(const float *x, const float *g, int n, float eps, uint16_t *out)
{
	const int nv = n / W * W, tail = n - nv;
	vf q = splat(0.0f);
	int i;

	for (i = 0; i < nv; i += W) {
		vf v = load(x + i);
		q += v * v;
	}
	if (tail) {
		vf v = load_tail(x + i, tail, 0.0f);
		q += v * v;
	}
	const float rms = 1.0f / sqrtf(hsum(q) / (float)n + eps);
	for (i = 0; i < nv; i += W)
		store_bf16(out + i, load(x + i) * rms * load(g + i));
	if (tail)
		store_bf16_tail(out + i, tail,
				load_tail(x + i, tail, 0.0f) * rms * load_tail(g + i, tail, 0.0f));
}

static inline vf gelu(vf v)
{
	return 0.5f * v * (1.0f + verf(v * 0.70710678118654752f));
}

static void bias_gelu_bf16(const float *x, const float *b, int n, uint16_t *out)
{
	const int nv = n / W * W, tail = n - nv;
	int i;

	for (i = 0; i < nv; i += W)
		store_bf16(out + i, gelu(load(x + i) + load(b + i)));
	if (tail)
		store_bf16_tail(out + i, tail,
				gelu(load_tail(x + i, tail, 0.0f) + load_tail(b + i, tail, 0.0f)));
}

static void bias_bf16(const float *x, const float *b, int n, uint16_t *out)
{
	const int nv = n / W * W, tail = n - nv;
	int i;

	for (i = 0; i < nv; i += W)
		store_bf16(out + i, b ? load(x + i) + load(b + i) : load(x + i));
	if (tail)
		store_bf16_tail(out + i, tail,
				load_tail(x + i, tail, 0.0f) +
					(b ? load_tail(b + i, tail, 0.0f) : splat(0.0f)));
}

static float softmax_bf16(const float *s, int n, float scale, uint16_t *out)
{
	const int nv = n / W * W, tail = n - nv;
	vf m = splat(-INFINITY), sum = splat(0.0f);
	int i;

	for (i = 0; i < nv; i += W)
		m = vmax(m, load(s + i));
	if (tail)
		m = vmax(m, load_tail(s + i, tail, -INFINITY));
	const float mx = hmax(m);
	for (i = 0; i < nv; i += W) {
		vh h = to_bf16(vexp((load(s + i) - mx) * scale));
		memcpy(out + i, &h, sizeof(h));
		sum += bf16_value(h);
	}
	float total = hsum(sum);
	if (tail) {
		uint16_t t[W];
		vh h = to_bf16(vexp((load_tail(s + i, tail, mx) - mx) * scale));
		memcpy(t, &h, sizeof(h));
		memcpy(out + i, t, sizeof(uint16_t) * (size_t)tail);
		vf v = bf16_value(h);
		for (int k = 0; k < tail; k++)
			total += v[k];
	}
	return total;
}

static void scale_bf16(const float *x, float a, int n, uint16_t *out)
{
	const int nv = n / W * W, tail = n - nv;
	int i;

	for (i = 0; i < nv; i += W)
		store_bf16(out + i, load(x + i) * a);
	if (tail)
		store_bf16_tail(out + i, tail, load_tail(x + i, tail, 0.0f) * a);
}

static inline vf relu2(vf v)
{
	/* v > 0 is false for NaN, which becomes 0 */
	v = select_f((vi)(v > 0.0f), v, splat(0.0f));
	return v * v;
}

static void relu2_bf16(const float *x, int n, uint16_t *out)
{
	const int nv = n / W * W, tail = n - nv;
	int i;

	for (i = 0; i < nv; i += W)
		store_bf16(out + i, relu2(load(x + i)));
	if (tail)
		store_bf16_tail(out + i, tail, relu2(load_tail(x + i, tail, 0.0f)));
}

static void bias_add(float *x, const float *b, int n)
{
	const int nv = n / W * W, tail = n - nv;
	int i;

	for (i = 0; i < nv; i += W)
		store(x + i, load(x + i) + load(b + i));
	if (tail)
		store_tail(x + i, tail, load_tail(x + i, tail, 0.0f) + load_tail(b + i, tail, 0.0f));
}

const struct vision_rows_variant VARIANT = {
	.name = STR(VR_NAME),
	.layernorm_bf16 = layernorm_bf16,
	.rmsnorm_bf16 = rmsnorm_bf16,
	.bias_gelu_bf16 = bias_gelu_bf16,
	.bias_bf16 = bias_bf16,
	.softmax_bf16 = softmax_bf16,
	.scale_bf16 = scale_bf16,
	.relu2_bf16 = relu2_bf16,
	.bias_add = bias_add,
};
