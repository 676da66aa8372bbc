/* The quantized-weight kernels (cuda/quant_gemv.cu) against the CPU's reference of the formats
 * (engine/quant/quant.h: records written by quant_row_from_f32(), weights read back by
 * quant_row_to_f32()): the decode GEMV and the prefill's dequantization, q8, q4 and fp8 (its
 * records with a row's own scale, with one scale shared by several rows as ModelOpt's per-tensor
 * recipe gives, and a row of every finite e4m3 code: both signs, subnormals, 448), on odd sizes
 * (one column, a block's tail, block edges 31/32/33, several blocks with a tail), 1 to 17 token
 * rows (one launch, a full launch of GPU_QGEMV_TOKENS, more than one), fp32 and bf16 activations
 * and outputs, with and without the residual add; and the FP8 activations of the prefill's FP8
 * GEMM (gpu_fp8_quantize) against quant_f32_to_e4m3(): scales, codes, padding, saturation; and
 * that GEMM (gpu_gemm_fp8: cuBLASLt's FP8 matmul, the stand-in in the emulation) on fp8 records. Runs on a
 * device (suite `gpu`, 77 without one) and in the CUDA emulation (suite `gpu-emu`, three thread orders, and
 * under ASan: x and the records are allocated to their exact sizes, so a read past a row's last column is
 * reported).
 *
 * Tolerances:
 * - GEMV: |got - want| <= (in + 64) 2^-24 sum_k |w_k x_k| against a double product of the
 *   dequantized weights and the (bf16-rounded, when bf16) activations: the weights the kernel
 *   forms are exactly quant_row_to_f32()'s, so only fp32 summation differs (the bound the CPU's
 *   exact kernels are held to, tests/backend-cpu/test-gemv-quant.c); plus 2^-8 |want| (one rounding)
 *   when y is bf16, where want includes the accumulated y, and 2^-23 (|y| + sum |w x|) for the
 *   fp32 rounding of the residual add.
 * - dequantization: fp32 equal to quant_row_to_f32() (d q is exact; fmaf(d, q, m) rounds once,
 *   the same IEEE operation on both), bf16 equal to its round-to-nearest-even; compared by value
 *   (the same floats), so both sides' arithmetic must agree, not merely be close. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "gpu.h"
#include "model.h"
#include "quant.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static struct gpu_context *g;
static uint64_t rng = 0x2545f4914f6cdd1dull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static void *dev_from(const void *host, size_t bytes)
{
	void *p = NULL;
	REQUIRE(gpu_alloc(g, bytes, &p) == 0);
	if (host)
		REQUIRE(gpu_copy_to_device(g, p, host, bytes) == 0);
	return p;
}

static void to_host(void *dst, const void *dev, size_t bytes)
{
	REQUIRE(gpu_copy_to_host(g, dst, dev, bytes) == 0);
}

/* quant.h's formats are gpu.h's, value for value */
static enum gpu_quant gq(enum quant_format f)
{
	return f == QUANT_Q8 ? GPU_QUANT_Q8 : f == QUANT_Q4 ? GPU_QUANT_Q4 : GPU_QUANT_FP8;
}

/* Records of out x in random weights in format f (some rows shifted off zero, so q4's minimum
 * matters, one row all zero; fp8: even rows share one per-tensor scale, row 1 holds every finite
 * code in turn); their dequantized weights in *ret_w. */
static void *records_of(enum quant_format f, int out, int in, size_t *ret_rb, float **ret_w)
{
	size_t rb = 0;
	REQUIRE(quant_row_bytes(f, in, &rb) == 0);
	CHECK_INT_EQ(gpu_quant_row_bytes(gq(f), in), rb);
	unsigned char *rec = xmalloc((size_t)out * rb);
	float *w = xmalloc((size_t)out * in * sizeof(float)), *src = xmalloc((size_t)in * sizeof(float));
	for (int o = 0; o < out; o++) {
		float shift = o % 3 == 1 ? 0.75f : 0.0f, scale = o % 4 == 3 ? 30.0f : 1.0f;
		for (int k = 0; k < in; k++)
			src[k] = o == 2 ? 0.0f : (frand() + shift) * scale;
		void *row = rec + (size_t)o * rb;
		if (f == QUANT_FP8 && o == 1) {
			uint8_t *codes = xmalloc((size_t)in);
			for (int k = 0; k < in; k++) {
				codes[k] = (uint8_t)((k * 37 + 11) % 256);
				if ((codes[k] & 0x7f) == 0x7f) /* NaN: the next one, 0x7e is 448 */
					codes[k]--;
			}
			REQUIRE(quant_fp8_row_from_codes(codes, in, 0.0123f, row, NULL) == 0);
			free(codes);
		} else if (f == QUANT_FP8 && o % 2 == 0) {
			REQUIRE(quant_fp8_row_from_f32(src, in, 60.0f / 448.0f, row) == 0);
		} else {
			REQUIRE(quant_row_from_f32(f, src, in, row) == 0);
		}
		quant_row_to_f32(f, row, in, w + (size_t)o * in);
	}
	free(src);
	*ret_rb = rb;
	*ret_w = w;
	return rec;
}

static void test_gemv(enum quant_format f, int out, int in, int rows, enum gpu_dtype xt, enum gpu_dtype yt,
		      bool acc)
{
	size_t rb;
	float *w;
	unsigned char *rec = records_of(f, out, in, &rb, &w);
	const size_t xb = xt == GPU_DTYPE_F32 ? 4 : 2, yb = yt == GPU_DTYPE_F32 ? 4 : 2;
	const size_t ldx = (size_t)in, ldy = (size_t)out + (out % 2); /* ldy > out on odd rows */
	float *x = xmalloc((size_t)rows * ldx * sizeof(float));
	uint16_t *x16 = xmalloc((size_t)rows * ldx * sizeof(uint16_t));
	for (size_t i = 0; i < (size_t)rows * ldx; i++) {
		x16[i] = f32_to_bf16(frand() * 2.0f);
		x[i] = xt == GPU_DTYPE_BF16 ? bf16_to_f32(x16[i]) : frand() * 2.0f;
	}
	float *y0 = xmalloc((size_t)rows * ldy * sizeof(float));
	uint16_t *y016 = xmalloc((size_t)rows * ldy * sizeof(uint16_t));
	for (size_t i = 0; i < (size_t)rows * ldy; i++) {
		y016[i] = f32_to_bf16(frand());
		y0[i] = yt == GPU_DTYPE_BF16 ? bf16_to_f32(y016[i]) : frand();
	}
	void *dw = dev_from(rec, (size_t)out * rb);
	void *dx =
		dev_from(xt == GPU_DTYPE_F32 ? (const void *)x : (const void *)x16, (size_t)rows * ldx * xb);
	void *dy = dev_from(yt == GPU_DTYPE_F32 ? (const void *)y0 : (const void *)y016,
			    (size_t)rows * ldy * yb);
	CHECK_INT_EQ(gpu_qgemv(g, dw, gq(f), out, in, dx, xt, ldx, rows, dy, yt, ldy, acc), 0);
	void *got = xmalloc((size_t)rows * ldy * yb);
	to_host(got, dy, (size_t)rows * ldy * yb);
	size_t bad = 0;
	for (int r = 0; r < rows; r++) {
		for (size_t o = 0; o < ldy; o++) {
			size_t i = (size_t)r * ldy + o;
			double gv =
				yt == GPU_DTYPE_F32 ? ((float *)got)[i] : bf16_to_f32(((uint16_t *)got)[i]);
			if (o >= (size_t)out) { /* the padding column is never written */
				bad += gv != y0[i];
				continue;
			}
			double want = acc ? y0[i] : 0, mag = 0;
			for (int k = 0; k < in; k++) {
				double p = (double)w[o * in + k] * x[(size_t)r * ldx + k];
				want += p;
				mag += fabs(p);
			}
			double tol = (in + 64) * 0x1p-24 * mag + (acc ? 0x1p-23 * (fabs(y0[i]) + mag) : 0) +
				     (yt == GPU_DTYPE_BF16 ? 0x1p-8 * fabs(want) : 0);
			if (!(fabs(gv - want) <= tol)) {
				if (bad < 3)
					fprintf(stderr,
						"%s out %d in %d rows %d x %d y %d acc %d: [%d][%zu] %.9g "
						"want "
						"%.9g (tol %.3g)\n",
						quant_format_desc(f)->name, out, in, rows, xt, yt, acc, r, o,
						gv, want, tol);
				bad++;
			}
		}
	}
	CHECK_INT_EQ(bad, 0);
	gpu_free(g, dw), gpu_free(g, dx), gpu_free(g, dy);
	free(rec), free(w), free(x), free(x16), free(y0), free(y016), free(got);
}

static void test_dequant(enum quant_format f, int out, int in, enum gpu_dtype dt)
{
	size_t rb;
	float *w;
	unsigned char *rec = records_of(f, out, in, &rb, &w);
	const size_t eb = dt == GPU_DTYPE_F32 ? 4 : 2;
	void *dw = dev_from(rec, (size_t)out * rb), *dd = dev_from(NULL, (size_t)out * in * eb);
	CHECK_INT_EQ(gpu_dequant(g, dw, gq(f), out, in, dd, dt), 0);
	void *got = xmalloc((size_t)out * in * eb);
	to_host(got, dd, (size_t)out * in * eb);
	size_t bad = 0;
	for (size_t i = 0; i < (size_t)out * in; i++) {
		float gv = dt == GPU_DTYPE_F32 ? ((float *)got)[i] : bf16_to_f32(((uint16_t *)got)[i]);
		float want = dt == GPU_DTYPE_F32 ? w[i] : bf16_to_f32(f32_to_bf16(w[i]));
		if (gv != want && bad++ < 3)
			fprintf(stderr, "dequant %s %dx%d dtype %d: [%zu] %.9g want %.9g\n",
				quant_format_desc(f)->name, out, in, dt, i, gv, want);
	}
	CHECK_INT_EQ(bad, 0);
	gpu_free(g, dw), gpu_free(g, dd);
	free(rec), free(w), free(got);
}

/* The FP8 activations (gpu_fp8_quantize) against quant.h's reference: the scale amax / 448 (per
 * tensor, per token; 1 for a zero row or tensor), read back from the device and equal to the
 * host's fp32 division, every code quant_f32_to_e4m3(x / s) and the columns past `in` zero;
 * GIVEN with a scale too small for the largest values: those saturate at +-448 (0x7e/0xfe). */
static void test_fp8_act(int rows, int in, enum gpu_dtype xt, enum gpu_fp8_scaling mode, bool zero)
{
	const size_t ldx = (size_t)in + 3, ldq = ((size_t)in + 15) / 16 * 16 + 16;
	const size_t xb = xt == GPU_DTYPE_F32 ? 4 : 2;
	float *x = xmalloc((size_t)rows * ldx * sizeof(float));
	uint16_t *x16 = xmalloc((size_t)rows * ldx * sizeof(uint16_t));
	for (int r = 0; r < rows; r++) {
		/* rows of different magnitudes; row 1 all zero; subnormal-code values in row 2 */
		float mag = r == 2 ? 1e-3f : r % 3 == 0 ? 40.0f : 0.7f;
		for (size_t c = 0; c < ldx; c++) {
			size_t i = (size_t)r * ldx + c;
			float v = r == 1 || zero ? 0.0f : frand() * mag;
			x16[i] = f32_to_bf16(v);
			x[i] = xt == GPU_DTYPE_BF16 ? bf16_to_f32(x16[i]) : v;
		}
	}
	float amax_all = 0, given = 0;
	for (int r = 0; r < rows; r++)
		for (int c = 0; c < in; c++)
			amax_all = fmaxf(amax_all, fabsf(x[(size_t)r * ldx + c]));
	if (mode == GPU_FP8_GIVEN)
		given = amax_all / 600.0f; /* the largest values past 448 s */
	void *dx =
		dev_from(xt == GPU_DTYPE_F32 ? (const void *)x : (const void *)x16, (size_t)rows * ldx * xb);
	void *dq = dev_from(NULL, (size_t)rows * ldq);
	float *ds = dev_from(NULL, (size_t)rows * sizeof(float));
	if (mode == GPU_FP8_GIVEN)
		REQUIRE(gpu_copy_to_device(g, ds, &given, sizeof(given)) == 0);
	float *dws = dev_from(NULL, (size_t)rows * sizeof(float));
	CHECK_INT_EQ(gpu_fp8_quantize(g, dx, xt, ldx, rows, in, dq, ldq, ds, mode, dws), 0);
	uint8_t *q = xmalloc((size_t)rows * ldq);
	float *sc = xmalloc((size_t)rows * sizeof(float));
	to_host(q, dq, (size_t)rows * ldq);
	to_host(sc, ds, (mode == GPU_FP8_PER_TOKEN ? (size_t)rows : 1) * sizeof(float));
	size_t bad = 0, saturated = 0;
	for (int r = 0; r < rows; r++) {
		float s;
		if (mode == GPU_FP8_PER_TOKEN) {
			float m = 0;
			for (int c = 0; c < in; c++)
				m = fmaxf(m, fabsf(x[(size_t)r * ldx + c]));
			s = m > 0 ? m / 448.0f : 1.0f;
			bad += sc[r] != s;
		} else {
			s = mode == GPU_FP8_GIVEN ? given : amax_all > 0 ? amax_all / 448.0f : 1.0f;
			if (r == 0)
				bad += sc[0] != s;
		}
		for (size_t c = 0; c < ldq; c++) {
			uint8_t want = c < (size_t)in ? quant_f32_to_e4m3(x[(size_t)r * ldx + c] / s) : 0;
			uint8_t got = q[(size_t)r * ldq + c];
			saturated += c < (size_t)in && (got & 0x7f) == 0x7e;
			if (got != want && bad++ < 3)
				fprintf(stderr,
					"fp8 act rows %d in %d x %d mode %d: [%d][%zu] code 0x%02x want "
					"0x%02x (x %.9g, s %.9g)\n",
					rows, in, xt, mode, r, c, got, want,
					c < (size_t)in ? x[(size_t)r * ldx + c] : 0.0f, s);
		}
	}
	CHECK_INT_EQ(bad, 0);
	if (mode == GPU_FP8_GIVEN)
		CHECK(saturated > 0);
	gpu_free(g, dx), gpu_free(g, dq), gpu_free(g, ds), gpu_free(g, dws);
	free(x), free(x16), free(q), free(sc);
}

/* The prefill's FP8 product (gpu_gemm_fp8): fp8 records of one per-tensor scale S times the
 * activations quantized per tensor on the device, through cuBLASLt's FP8 matmul. Held to a double
 * product of the very codes (downloaded) within (in + 8) 2^-24 sum |w x| (plus 2^-8 |y| for bf16,
 * 2^-23 (|y0| + sum) for the residual add), and to the exact product of the records' weights and
 * the unquantized x within the activations' quantization error, sum_k |w_k| (|x_k| 2^-4 +
 * s 2^-10) (quant_fp8_error_bound()), plus that; the decode GEMV on the same records and x (no
 * activation rounding: what decode runs at 1-32 rows instead of cuBLASLt) within that bound of
 * the FP8 product too. */
static void test_gemm_fp8(struct gpu_blas *gm, int out, int in, int rows, enum gpu_dtype xt,
			  enum gpu_dtype yt, bool acc)
{
	const float S = 3.0f / 448.0f;
	size_t rb = 0;
	REQUIRE(quant_row_bytes(QUANT_FP8, in, &rb) == 0);
	unsigned char *rec = xmalloc((size_t)out * rb);
	float *w = xmalloc((size_t)out * in * sizeof(float)), *src = xmalloc((size_t)in * sizeof(float));
	for (int o = 0; o < out; o++) {
		for (int k = 0; k < in; k++)
			src[k] = frand() * (o % 5 == 4 ? 3.0f : 1.0f);
		REQUIRE(quant_fp8_row_from_f32(src, in, S, rec + (size_t)o * rb) == 0);
		quant_row_to_f32(QUANT_FP8, rec + (size_t)o * rb, in, w + (size_t)o * in);
	}
	const size_t ldx = (size_t)in, ldq = ((size_t)in + 15) / 16 * 16, ldy = (size_t)out;
	const size_t xb = xt == GPU_DTYPE_F32 ? 4 : 2, yb = yt == GPU_DTYPE_F32 ? 4 : 2;
	float *x = xmalloc((size_t)rows * ldx * sizeof(float)),
	      *y0 = xmalloc((size_t)rows * ldy * sizeof(float));
	uint16_t *x16 = xmalloc((size_t)rows * ldx * 2), *y016 = xmalloc((size_t)rows * ldy * 2);
	for (size_t i = 0; i < (size_t)rows * ldx; i++) {
		x16[i] = f32_to_bf16(frand() * 2.0f);
		x[i] = xt == GPU_DTYPE_BF16 ? bf16_to_f32(x16[i]) : frand() * 2.0f;
	}
	for (size_t i = 0; i < (size_t)rows * ldy; i++) {
		y016[i] = f32_to_bf16(frand());
		y0[i] = yt == GPU_DTYPE_BF16 ? bf16_to_f32(y016[i]) : frand();
	}
	void *dw = dev_from(rec, (size_t)out * rb);
	void *dx =
		dev_from(xt == GPU_DTYPE_F32 ? (const void *)x : (const void *)x16, (size_t)rows * ldx * xb);
	void *dy = dev_from(yt == GPU_DTYPE_F32 ? (const void *)y0 : (const void *)y016,
			    (size_t)rows * ldy * yb);
	void *dq = dev_from(NULL, (size_t)rows * ldq);
	const float scales[2] = {S, 0.0f};
	float *dsc = dev_from(scales, sizeof(scales)), *dws = dev_from(NULL, (size_t)rows * sizeof(float));
	CHECK(gpu_gemm_fp8_ok(in, rb, dw, dq, ldq, dy, yt, ldy));
	CHECK_INT_EQ(gpu_fp8_quantize(g, dx, xt, ldx, rows, in, dq, ldq, dsc + 1, GPU_FP8_PER_TENSOR, dws), 0);
	CHECK_INT_EQ(gpu_gemm_fp8(gm, dw, rb, dsc, out, in, dq, ldq, dsc + 1, rows, dy, yt, ldy, acc), 0);
	uint8_t *q = xmalloc((size_t)rows * ldq);
	float sx;
	void *got = xmalloc((size_t)rows * ldy * yb);
	to_host(q, dq, (size_t)rows * ldq);
	to_host(&sx, dsc + 1, sizeof(sx));
	to_host(got, dy, (size_t)rows * ldy * yb);
	float *gv_gemv = xmalloc((size_t)rows * ldy * sizeof(float));
	void *dyg = dev_from(NULL, (size_t)rows * ldy * sizeof(float));
	CHECK_INT_EQ(gpu_qgemv(g, dw, GPU_QUANT_FP8, out, in, dx, xt, ldx, rows, dyg, GPU_DTYPE_F32, ldy,
			       false),
		     0);
	to_host(gv_gemv, dyg, (size_t)rows * ldy * sizeof(float));
	size_t bad = 0;
	for (int r = 0; r < rows; r++) {
		for (int o = 0; o < out; o++) {
			size_t i = (size_t)r * ldy + o;
			double gv =
				yt == GPU_DTYPE_F32 ? ((float *)got)[i] : bf16_to_f32(((uint16_t *)got)[i]);
			double codes = acc ? y0[i] : 0, exact = codes, mag = 0, qerr = 0;
			for (int k = 0; k < in; k++) {
				double wk = w[(size_t)o * in + k], xk = x[(size_t)r * ldx + k];
				double p = wk * quant_e4m3_to_f32(q[(size_t)r * ldq + k]) * sx;
				codes += p, exact += wk * xk, mag += fabs(p);
				qerr += fabs(wk) * (fabs(xk) * 0x1p-4 + sx * 0x1p-10);
			}
			double tol = (in + 8) * 0x1p-24 * mag + (acc ? 0x1p-23 * (fabs(y0[i]) + mag) : 0) +
				     (yt == GPU_DTYPE_BF16 ? 0x1p-8 * fabs(codes) : 0);
			double gemv = gv_gemv[i] + (acc ? y0[i] : 0);
			if ((!(fabs(gv - codes) <= tol) || !(fabs(gv - exact) <= tol + qerr * 1.001) ||
			     !(fabs(gv - gemv) <= 2 * tol + (in + 64) * 0x1p-24 * mag + qerr * 1.001)) &&
			    bad++ < 3)
				fprintf(stderr,
					"gemm fp8 out %d in %d rows %d x %d y %d acc %d: [%d][%d] %.9g want "
					"%.9g (codes) %.9g (exact) %.9g (GEMV), tol %.3g + %.3g\n",
					out, in, rows, xt, yt, acc, r, o, gv, codes, exact, gemv, tol, qerr);
		}
	}
	CHECK_INT_EQ(bad, 0);
	gpu_free(g, dw), gpu_free(g, dx), gpu_free(g, dy), gpu_free(g, dq), gpu_free(g, dsc),
		gpu_free(g, dws);
	gpu_free(g, dyg);
	free(rec), free(w), free(src), free(x), free(y0), free(x16), free(y016), free(q), free(got),
		free(gv_gemv);
}

int main(void)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	g = gpu_context_create(test_gpu_device());
	REQUIRE(g);
	static const int ins[] = {1, 31, 32, 33, 100, 529};
	static const int rows_of[] = {1, 3, 8, 9, 17};
	for (int fi = 0; fi < 3; fi++) {
		enum quant_format f = fi == 0 ? QUANT_Q8 : fi == 1 ? QUANT_Q4 : QUANT_FP8;
		for (size_t i = 0; i < ARRAY_SIZE(ins); i++) {
			const int in = ins[i], out = 5 + (int)i * 2;
			test_dequant(f, out, in, GPU_DTYPE_F32);
			test_dequant(f, out, in, GPU_DTYPE_BF16);
			for (size_t r = 0; r < ARRAY_SIZE(rows_of); r++) {
				/* every dtype pairing and both modes, spread over the sizes */
				int c = (int)(i + r);
				enum gpu_dtype xt = c % 2 ? GPU_DTYPE_BF16 : GPU_DTYPE_F32;
				enum gpu_dtype yt = (c / 2) % 2 ? GPU_DTYPE_BF16 : GPU_DTYPE_F32;
				test_gemv(f, out, in, rows_of[r], xt, yt, c % 3 == 1);
			}
		}
		/* a wider row: several 512-byte warp steps, the last one partial */
		test_gemv(f, 9, 1000, 2, GPU_DTYPE_F32, GPU_DTYPE_F32, false);
		test_gemv(f, 9, 1000, 4, GPU_DTYPE_BF16, GPU_DTYPE_F32, true);
	}
	/* FP8 activations: a row of one column, tails, per tensor / per token / given, both dtypes */
	static const int act_in[] = {1, 17, 64, 300};
	for (size_t i = 0; i < ARRAY_SIZE(act_in); i++)
		for (int mode = 0; mode < 3; mode++)
			test_fp8_act(1 + (int)i * 3 + mode, act_in[i],
				     (i + mode) % 2 ? GPU_DTYPE_BF16 : GPU_DTYPE_F32,
				     (enum gpu_fp8_scaling)mode, false);
	/* every row zero: scale 1, codes 0 */
	test_fp8_act(3, 40, GPU_DTYPE_F32, GPU_FP8_PER_TENSOR, true);
	/* the FP8 GEMM on fp8 records: cuBLASLt's 16-byte rules met (in a multiple of 16; bf16 y
	 * needs out even, fp32 out a multiple of 4), one row to more than a tile */
	struct gpu_blas *gm = gpu_blas_create(g);
	REQUIRE(gm);
	struct gpu_device_info di;
	REQUIRE(gpu_device_info(test_gpu_device(), &di) == 0);
	if (di.compute_major * 10 + di.compute_minor >= 89) { /* FP8 tensor cores */
		test_gemm_fp8(gm, 40, 64, 33, GPU_DTYPE_BF16, GPU_DTYPE_BF16, false);
		test_gemm_fp8(gm, 24, 160, 7, GPU_DTYPE_F32, GPU_DTYPE_F32, true);
		test_gemm_fp8(gm, 8, 32, 1, GPU_DTYPE_BF16, GPU_DTYPE_F32, false);
		test_gemm_fp8(gm, 16, 528, 40, GPU_DTYPE_F32, GPU_DTYPE_BF16, true);
	}
	/* what cuBLASLt's FP8 matmul cannot run is said before anything is queued */
	void *d8 = dev_from(NULL, 8192);
	CHECK(!gpu_gemm_fp8_ok(40, 128, d8, d8, 48, d8, GPU_DTYPE_F32, 8));		/* in */
	CHECK(!gpu_gemm_fp8_ok(48, 128, d8, (char *)d8 + 8, 48, d8, GPU_DTYPE_F32, 8)); /* x */
	CHECK(!gpu_gemm_fp8_ok(48, 128, d8, d8, 48, d8, GPU_DTYPE_BF16, 9));		/* ldy */
	CHECK_INT_EQ(gpu_gemm_fp8(gm, d8, 128, (float *)d8, 8, 40, d8, 48, (float *)d8, 2, d8, GPU_DTYPE_F32,
				  8, false),
		     -EINVAL);
	gpu_free(g, d8);
	gpu_blas_destroy(gm);
	/* bad arguments: a misaligned record, ldx < in, an unknown format */
	void *d = dev_from(NULL, 4096);
	CHECK_INT_EQ(gpu_qgemv(g, (char *)d + 8, GPU_QUANT_Q8, 1, 32, d, GPU_DTYPE_F32, 32, 1,
			       (char *)d + 2048, GPU_DTYPE_F32, 1, false),
		     -EINVAL);
	CHECK_INT_EQ(gpu_qgemv(g, d, GPU_QUANT_Q8, 1, 32, d, GPU_DTYPE_F32, 31, 1, (char *)d + 2048,
			       GPU_DTYPE_F32, 1, false),
		     -EINVAL);
	CHECK_INT_EQ(gpu_dequant(g, d, (enum gpu_quant)7, 1, 32, (char *)d + 2048, GPU_DTYPE_F32), -EINVAL);
	CHECK_INT_EQ((int)gpu_quant_row_bytes(GPU_QUANT_Q4, 0), 0);
	gpu_free(g, d);
	gpu_context_destroy(g);
	return test_exit();
}
