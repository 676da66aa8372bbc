/* The oneDNN matrix products of --precision bf16 (engine/backend/cpu/cpu_dnnl.c) against the portable path.
 *
 * - bf16 rounding: round to nearest even, ties to even, NaN/inf kept, idempotent.
 * - cpu_dnnl_matmul() on the shapes of holo-bench's default model (in_proj, out_proj, q, k/v,
 *   MLP up/down; a few tokens, to keep the ASan build fast) and on odd ones (1 row or column,
 *   sizes off every block, a strided y, accumulation), with plain and reordered weights, bf16
 *   and f32 tensors (a reordered weight into a strided y may be refused, -ENOTSUP, leaving y
 *   alone: the forward never asks for one): within the fp32 summation bound of a float64 reference, as
 * cpu_matmul() is on the same rounded inputs. Both multiply the same bf16 values exactly, so the bound is (K
 * + 2) 2^-24 sum |x w| for any order of the sums: a wrong layout or a lost tail is far outside it.
 * - the ReLU^2 epilogue (cpu_dnnl_matmul_act) on the same products: bit for bit cpu_relu2() of
 *   the plain product (both compute max(y, 0)^2 in fp32 on the same y).
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

static float bits_f32(uint32_t u)
{
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static void check_rounding(void)
{
	/* 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to even (1); 1 + 3*2^-8 rounds up */
	float in[] = {1.0f,	 1.0f + 0x1p-8f, 1.0f + 3 * 0x1p-8f,	-2.5f,	 INFINITY,
		      -INFINITY, 0.0f,		 bits_f32(0x7f800001u), 3.0e38f, 1e-40f};
	uint16_t want[] = {0x3f80, 0x3f80, 0x3f82, 0xc020, 0x7f80, 0xff80, 0x0000, 0, 0x7f62, 0x0001};
	size_t n = ARRAY_SIZE(in);
	uint16_t got[ARRAY_SIZE(in)];
	/* 16 + n elements: the vector body and the scalar tail both run */
	float big[32];
	uint16_t bigout[32];
	for (size_t i = 0; i < 32; i++)
		big[i] = in[i % n];
	cpu_f32_to_bf16(in, got, n);
	cpu_f32_to_bf16(big, bigout, 32);
	for (size_t i = 0; i < n; i++) {
		if (i == 7) { /* signalling NaN: a quiet NaN */
			CHECK((got[i] & 0x7f80) == 0x7f80 && (got[i] & 0x7f) != 0);
			continue;
		}
		CHECK_INT_EQ(got[i], want[i]);
	}
	for (size_t i = 0; i < 32; i++)
		CHECK_INT_EQ(bigout[i], got[i % n]);
	float r[32];
	memcpy(r, big, sizeof(r));
	cpu_round_bf16_rows(r, 16, 2, 16);
	for (size_t i = 0; i < 32; i++) {
		uint32_t u;
		memcpy(&u, &r[i], sizeof(u));
		CHECK_INT_EQ(u >> 16, bigout[i]);
		CHECK_INT_EQ(u & 0xffffu, 0);
	}
	float again[32];
	memcpy(again, r, sizeof(r));
	cpu_round_bf16_rows(again, 16, 2, 16);
	CHECK(memcmp(again, r, sizeof(r)) == 0);
}

struct shape {
	int T, in, out;
	size_t extra_ldy; /* y's row stride is out + extra_ldy */
	bool accumulate;
	enum tensor_dtype dtype;
	enum cpu_dnnl_layout layout;
};

/* y = W x (+ y0) for one shape through oneDNN and through cpu_matmul(), both on x rounded to
 * bf16, each within the summation bound of the float64 product. */
static void check_shape(const struct shape *sh)
{
	const int T = sh->T, in = sh->in, out = sh->out;
	size_t ldx = (size_t)in + 3, ldy = (size_t)out + sh->extra_ldy;
	size_t esz = sh->dtype == TENSOR_F32 ? 4 : 2;
	void *wdata = malloc((size_t)in * out * esz);
	float *wf = malloc((size_t)in * out * sizeof(float));
	float *x = malloc((size_t)T * ldx * sizeof(float));
	float *y0 = malloc((size_t)T * ldy * sizeof(float));
	float *yd = malloc((size_t)T * ldy * sizeof(float));
	float *yp = malloc((size_t)T * ldy * sizeof(float));
	REQUIRE(wdata && wf && x && y0 && yd && yp);
	for (size_t i = 0; i < (size_t)in * out; i++) {
		float v = frand();
		if (sh->dtype == TENSOR_F32) {
			((float *)wdata)[i] = v;
			uint16_t h;
			cpu_f32_to_bf16(&v, &h, 1);
			wf[i] = bf16_to_f32(h); /* what oneDNN multiplies */
		} else {
			uint16_t h;
			cpu_f32_to_bf16(&v, &h, 1);
			((uint16_t *)wdata)[i] = h;
			wf[i] = bf16_to_f32(h);
		}
	}
	for (size_t i = 0; i < (size_t)T * ldx; i++)
		x[i] = frand() * 4;
	for (size_t i = 0; i < (size_t)T * ldy; i++)
		y0[i] = frand();
	cpu_round_bf16_rows(x, ldx, T, in);
	memcpy(yd, y0, (size_t)T * ldy * sizeof(float));
	memcpy(yp, y0, (size_t)T * ldy * sizeof(float));

	struct tensor w = {.data = wdata,
			   .dtype = sh->dtype,
			   .ndim = 2,
			   .shape = {out, in},
			   .nbytes = (size_t)in * out * esz};
	struct cpu_dnnl_weight *dw = NULL;
	REQUIRE(cpu_dnnl_weight_create(&w, sh->layout, &dw) == 0);
	int r = cpu_dnnl_matmul(dw, x, ldx, T, yd, ldy, sh->accumulate);
	if (r == -ENOTSUP && sh->layout == CPU_DNNL_REORDERED && sh->extra_ldy) {
		/* no fast kernel writes a reordered weight's product into a strided y (oneDNN 2.6
		 * falls back to its reference matmul, which is refused): y is left alone */
		CHECK(memcmp(yd, y0, (size_t)T * ldy * sizeof(float)) == 0);
		cpu_dnnl_weight_destroy(dw);
		free(wdata);
		free(wf);
		free(x);
		free(y0);
		free(yd);
		free(yp);
		return;
	}
	CHECK_INT_EQ(r, 0);
	/* a second call reuses the cached primitive and gives the same bits */
	float *yd2 = malloc((size_t)T * ldy * sizeof(float));
	REQUIRE(yd2);
	memcpy(yd2, y0, (size_t)T * ldy * sizeof(float));
	CHECK_INT_EQ(cpu_dnnl_matmul(dw, x, ldx, T, yd2, ldy, sh->accumulate), 0);
	CHECK(memcmp(yd, yd2, (size_t)T * ldy * sizeof(float)) == 0);
	/* the ReLU^2 epilogue: bit for bit cpu_relu2() of the same product, the gaps untouched */
	memcpy(yd2, y0, (size_t)T * ldy * sizeof(float));
	CHECK_INT_EQ(cpu_dnnl_matmul_act(dw, x, ldx, T, yd2, ldy, sh->accumulate, CPU_DNNL_ACT_RELU2), 0);
	for (int t = 0; t < T; t++) {
		float *want = malloc((size_t)out * sizeof(float));
		REQUIRE(want);
		memcpy(want, yd + (size_t)t * ldy, (size_t)out * sizeof(float));
		cpu_relu2(want, (size_t)out);
		CHECK(memcmp(yd2 + (size_t)t * ldy, want, (size_t)out * sizeof(float)) == 0);
		CHECK(memcmp(yd2 + (size_t)t * ldy + out, y0 + (size_t)t * ldy + out,
			     (ldy - (size_t)out) * sizeof(float)) == 0);
		free(want);
	}
	free(yd2);
	/* the portable path: the same bf16 weights (an f32 tensor's rounded copy) */
	uint16_t *wb = malloc((size_t)in * out * sizeof(uint16_t));
	REQUIRE(wb);
	cpu_f32_to_bf16(wf, wb, (size_t)in * out);
	struct tensor wt = {.data = wb,
			    .dtype = TENSOR_BF16,
			    .ndim = 2,
			    .shape = {out, in},
			    .nbytes = (size_t)in * out * 2};
	CHECK_INT_EQ(cpu_matmul(&wt, x, ldx, T, yp, ldy, sh->accumulate), 0);

	double worst_d = 0, worst_p = 0;
	int bad = 0;
	for (int t = 0; t < T; t++) {
		for (int o = 0; o < out; o++) {
			double ref = sh->accumulate ? y0[(size_t)t * ldy + o] : 0, mag = fabs(ref);
			for (int k = 0; k < in; k++) {
				double p = (double)x[(size_t)t * ldx + k] * wf[(size_t)o * in + k];
				ref += p;
				mag += fabs(p);
			}
			double bound = (in + 2) * 0x1p-24 * mag + 1e-30;
			double dd = fabs(yd[(size_t)t * ldy + o] - ref) / bound;
			double dp = fabs(yp[(size_t)t * ldy + o] - ref) / bound;
			worst_d = fmax(worst_d, dd);
			worst_p = fmax(worst_p, dp);
			bad += !(dd <= 1.0) || !(dp <= 1.0);
		}
		/* the stride's gap is never written */
		for (size_t o = (size_t)out; o < ldy; o++)
			CHECK(yd[(size_t)t * ldy + o] == y0[(size_t)t * ldy + o]);
	}
	CHECK_INT_EQ(bad, 0);
	if (bad || getenv("LM_TEST_VERBOSE"))
		fprintf(stderr,
			"T %d in %d out %d ldy %zu acc %d %s %s: worst |err|/bound onednn %.3g "
			"portable %.3g (%s)\n",
			T, in, out, ldy, sh->accumulate, sh->dtype == TENSOR_F32 ? "f32" : "bf16",
			sh->layout == CPU_DNNL_REORDERED ? "reordered" : "plain", worst_d, worst_p,
			cpu_dnnl_impl_name());
	if (sh->dtype == TENSOR_BF16 && sh->layout == CPU_DNNL_PLAIN)
		CHECK_INT_EQ(cpu_dnnl_weight_bytes(dw), 0); /* read in place */
	else
		CHECK(cpu_dnnl_weight_bytes(dw) >= (size_t)in * out * 2);
	cpu_dnnl_weight_destroy(dw);
	free(wb);
	free(wdata);
	free(wf);
	free(x);
	free(y0);
	free(yd);
	free(yp);
}

int main(void)
{
	check_rounding();
	if (!cpu_dnnl_bf16_supported()) {
		/* a CPU with AVX2 alone (or oneDNN capped there): the engine runs bf16 precision
		 * without oneDNN (lm-backend-no-bf16), so there is nothing of it to test */
		fprintf(stderr, "skip: oneDNN has no bf16 products on this CPU\n");
		return test_exit() ? 1 : TEST_SKIP;
	}
	REQUIRE(cpu_set_threads(2) == 0);
	const struct shape shapes[] = {
		/* holo-bench's default model (hidden 1024, mamba H 32 P 64 G 8 N 128, attn 8/2 x
		 * 128, intermediate 5120): in_proj, out_proj (+=), q, k (into a wider cache row),
		 * MLP up and down (+=) */
		{16, 1024, 6176, 0, false, TENSOR_BF16, CPU_DNNL_REORDERED},
		{17, 2048, 1024, 0, true, TENSOR_BF16, CPU_DNNL_REORDERED},
		{16, 1024, 1024, 0, false, TENSOR_BF16, CPU_DNNL_PLAIN},
		{19, 1024, 256, 0, false, TENSOR_BF16, CPU_DNNL_PLAIN},
		{16, 1024, 5120, 0, false, TENSOR_BF16, CPU_DNNL_PLAIN},
		{16, 5120, 1024, 0, true, TENSOR_BF16, CPU_DNNL_REORDERED},
		/* odd ones */
		{16, 1, 1, 0, false, TENSOR_BF16, CPU_DNNL_PLAIN},
		{33, 17, 3, 5, true, TENSOR_BF16, CPU_DNNL_PLAIN},
		{40, 300, 70, 9, false, TENSOR_BF16, CPU_DNNL_REORDERED},
		{21, 1000, 77, 0, false, TENSOR_F32, CPU_DNNL_PLAIN},
		{64, 129, 65, 7, true, TENSOR_F32, CPU_DNNL_REORDERED},
		{5, 100, 1, 0, false, TENSOR_BF16, CPU_DNNL_PLAIN},
		{256, 64, 96, 0, true, TENSOR_BF16, CPU_DNNL_REORDERED},
	};
	for (size_t i = 0; i < ARRAY_SIZE(shapes); i++)
		check_shape(&shapes[i]);
	CHECK(strcmp(cpu_dnnl_impl_name(), "none") != 0);

	/* a non-matrix is refused */
	struct tensor v = {.data = (uint16_t[4]){0}, .dtype = TENSOR_BF16, .ndim = 1, .shape = {4}};
	struct cpu_dnnl_weight *dw = NULL;
	CHECK_INT_EQ(cpu_dnnl_weight_create(&v, CPU_DNNL_PLAIN, &dw), -EINVAL);
	CHECK(dw == NULL);
	return test_exit();
}
