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
 * - cpu_dnnl_matmul_bf16_fill (the prompt's products on quantized weights): bf16 rows, q8 and q4
 *   records and tiles made a block at a time, odd token counts (over one call's 256 tokens too),
 *   short last blocks and blocks ending inside a tile, a strided y, accumulation, on 1, 2 and 3
 *   threads: within the same bound of a float64 product of the same bf16 weights; every row
 *   made exactly once, and a block whose fill fails finished by the caller's `rest`.
 */
#include <errno.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "quant.h"
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

/* ---- cpu_dnnl_matmul_bf16_fill: weights made a block of rows at a time -------------------- */

struct fill_case {
	int T, in, out, block_rows;
	size_t extra_ldy;
	bool accumulate;
	int fail_block; /* the block whose fill fails (-ENOMEM), or -1 */
	int quant;	/* -1: bf16 rows; else the enum quant_format made by cpu_quant_rows_to_bf16 */
	bool tiled;
};

struct fill_ctx {
	const struct fill_case *c;
	const uint16_t *wb; /* the weights in bf16, [out][in] */
	const struct quant_tensor *q;
	const float *x; /* rounded to bf16, ldx apart */
	size_t ldx;
	float *y;
	size_t ldy;
	_Atomic int *made; /* per row: times its weights were made */
	_Atomic int rests;
	_Atomic int bad_call;
};

static int test_fill(void *arg, int r0, int n, uint16_t *w)
{
	struct fill_ctx *f = arg;
	const struct fill_case *c = f->c;
	if (r0 % c->block_rows != 0 || n < 1 || n > c->block_rows || r0 + n > c->out)
		atomic_store(&f->bad_call, 1);
	if (r0 / c->block_rows == c->fail_block)
		return -ENOMEM;
	for (int r = r0; r < r0 + n; r++)
		atomic_fetch_add(&f->made[r], 1);
	if (f->q)
		return cpu_quant_rows_to_bf16(f->q, r0, n, w);
	memcpy(w, f->wb + (size_t)r0 * c->in, (size_t)n * c->in * sizeof(uint16_t));
	return 0;
}

/* the rest of a failed block on the portable path: cpu_matmul() on its rows */
static void test_rest(void *arg, int r0, int n, int t0)
{
	struct fill_ctx *f = arg;
	const struct fill_case *c = f->c;
	atomic_fetch_add(&f->rests, 1);
	if (r0 != c->fail_block * c->block_rows || t0 != 0)
		atomic_store(&f->bad_call, 1);
	struct tensor t = {.data = (void *)(f->wb + (size_t)r0 * c->in),
			   .dtype = TENSOR_BF16,
			   .ndim = 2,
			   .shape = {n, c->in},
			   .nbytes = (size_t)n * c->in * 2};
	CHECK_INT_EQ(cpu_matmul(&t, f->x + (size_t)t0 * f->ldx, f->ldx, c->T - t0,
				f->y + (size_t)t0 * f->ldy + r0, f->ldy, c->accumulate),
		     0);
}

/* y (+)= W x through cpu_dnnl_matmul_bf16_fill() against a float64 product of the same bf16
 * weights and activations, within the summation bound; every row made once, the stride's gap
 * untouched, a failing block finished by `rest`. */
static void check_fill(const struct fill_case *c)
{
	const int T = c->T, in = c->in, out = c->out;
	const size_t ldx = (size_t)in + 3, ldy = (size_t)out + c->extra_ldy;
	uint16_t *wb = malloc((size_t)in * out * sizeof(uint16_t));
	float *wf = malloc((size_t)in * out * sizeof(float));
	float *x = malloc((size_t)T * ldx * sizeof(float));
	uint16_t *xb = malloc((size_t)T * in * sizeof(uint16_t));
	float *y0 = malloc((size_t)T * ldy * sizeof(float));
	float *y = malloc((size_t)T * ldy * sizeof(float));
	_Atomic int *made = calloc((size_t)out, sizeof(*made));
	REQUIRE(wb && wf && x && xb && y0 && y && made);
	for (size_t i = 0; i < (size_t)in * out; i++)
		wf[i] = frand();
	struct quant_tensor q = {0};
	void *qdata = NULL;
	if (c->quant >= 0) {
		/* the quantized rows' weights, rounded to bf16 as cpu_quant_rows_to_bf16() does */
		size_t bytes;
		REQUIRE(quant_tensor_bytes((enum quant_format)c->quant, out, in, &bytes) == 0);
		REQUIRE(posix_memalign(&qdata, 64, bytes) == 0);
		REQUIRE(quant_tensor_from_f32((enum quant_format)c->quant, wf, out, in, (size_t)in, qdata,
					      &q) == 0);
		for (int r = 0; r < out; r++)
			quant_row_to_f32(q.format, quant_tensor_row(&q, r, NULL), in, wf + (size_t)r * in);
		if (c->tiled) {
			void *tmp = malloc(QUANT_TILE_ROWS * q.row_bytes);
			REQUIRE(tmp);
			REQUIRE(quant_tensor_tile_range(&q, qdata, 0, out / QUANT_TILE_ROWS, tmp) == 0);
			q.tiled = true;
			free(tmp);
		}
	}
	cpu_f32_to_bf16(wf, wb, (size_t)in * out);
	for (size_t i = 0; i < (size_t)in * out; i++)
		wf[i] = bf16_to_f32(wb[i]);
	for (size_t i = 0; i < (size_t)T * ldx; i++)
		x[i] = frand() * 4;
	cpu_round_bf16_rows(x, ldx, T, in);
	for (int t = 0; t < T; t++)
		cpu_f32_to_bf16(x + (size_t)t * ldx, xb + (size_t)t * in, (size_t)in);
	for (size_t i = 0; i < (size_t)T * ldy; i++)
		y0[i] = frand();
	memcpy(y, y0, (size_t)T * ldy * sizeof(float));

	struct fill_ctx f = {.c = c,
			     .wb = wb,
			     .q = c->quant >= 0 ? &q : NULL,
			     .x = x,
			     .ldx = ldx,
			     .y = y,
			     .ldy = ldy,
			     .made = made};
	CHECK_INT_EQ(cpu_dnnl_matmul_bf16_fill(out, in, xb, T, y, ldy, c->accumulate, c->block_rows,
					       test_fill, test_rest, &f),
		     0);
	CHECK_INT_EQ(atomic_load(&f.bad_call), 0);
	CHECK_INT_EQ(atomic_load(&f.rests), c->fail_block >= 0 ? 1 : 0);
	int made_bad = 0;
	for (int r = 0; r < out; r++)
		made_bad += atomic_load(&made[r]) != (r / c->block_rows == c->fail_block ? 0 : 1);
	CHECK_INT_EQ(made_bad, 0);

	double worst = 0;
	int bad = 0;
	for (int t = 0; t < T; t++) {
		for (int o = 0; o < out; o++) {
			double ref = c->accumulate ? y0[(size_t)t * ldy + o] : 0, mag = fabs(ref);
			for (int k = 0; k < in; k++) {
				double p = (double)x[(size_t)t * ldx + k] * wf[(size_t)o * in + k];
				ref += p;
				mag += fabs(p);
			}
			double e = fabs(y[(size_t)t * ldy + o] - ref) / ((in + 2) * 0x1p-24 * mag + 1e-30);
			worst = fmax(worst, e);
			bad += !(e <= 1.0);
		}
		for (size_t o = (size_t)out; o < ldy; o++)
			CHECK(y[(size_t)t * ldy + o] == y0[(size_t)t * ldy + o]);
	}
	CHECK_INT_EQ(bad, 0);
	if (bad || getenv("LM_TEST_VERBOSE"))
		fprintf(stderr,
			"fill: T %d in %d out %d block %d ldy %zu acc %d fail %d quant %d%s, %d threads: "
			"worst |err|/bound %.3g\n",
			T, in, out, c->block_rows, ldy, c->accumulate, c->fail_block, c->quant,
			c->tiled ? " tiled" : "", cpu_threads(), worst);
	free(qdata);
	free(made);
	free(wb);
	free(wf);
	free(x);
	free(xb);
	free(y0);
	free(y);
}

static void check_fills(void)
{
	const struct fill_case cases[] = {
		/* the bench model's MLP up and down at an odd token count: whole blocks and a short
		 * last one (5120 = 40 x 128; 1024 rows of 32 with 5120 columns) */
		{17, 1024, 5120, 128, 0, false, -1, -1, false},
		{19, 5120, 1024, 32, 0, true, -1, -1, false},
		/* more tokens than one oneDNN call takes (256): a short last run of them */
		{257, 64, 96, 32, 0, true, -1, -1, false},
		{300, 129, 65, 64, 7, false, -1, -1, false},
		/* odd ones: one block larger than the matrix, one row, one column, a strided y */
		{16, 40, 7, 1000, 2, true, -1, -1, false},
		{1, 1, 1, 32, 0, false, -1, -1, false},
		{33, 17, 45, 8, 5, true, -1, -1, false},
		/* a block whose fill fails: its rows on `rest`, the others unchanged */
		{23, 100, 130, 32, 3, true, 2, -1, false},
		{20, 64, 40, 16, 0, false, 0, -1, false},
		/* quantized rows, as the prompt's products make them: records and tiles, blocks
		 * ending inside a tile, a short last tile left as records */
		{21, 100, 70, 32, 0, true, -1, QUANT_Q8, false},
		{18, 1000, 77, 24, 1, false, -1, QUANT_Q8, true},
		{17, 33, 83, 40, 0, true, -1, QUANT_Q4, true},
		{40, 64, 64, 32, 0, false, -1, QUANT_Q4, false},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		check_fill(&cases[i]);
	/* y narrower than the matrix: refused, nothing made */
	float y[4] = {0};
	uint16_t xb[4] = {0};
	struct fill_case c = {1, 4, 4, 32, 0, false, -1, -1, false};
	struct fill_ctx f = {.c = &c};
	CHECK_INT_EQ(cpu_dnnl_matmul_bf16_fill(4, 4, xb, 1, y, 3, false, 32, test_fill, test_rest, &f),
		     -EINVAL);
	CHECK_INT_EQ(cpu_dnnl_matmul_bf16_fill(4, 4, xb, 1, y, 4, false, 0, test_fill, test_rest, &f),
		     -EINVAL);
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
	/* the blocks on one, two and three threads: their order differs, each block's sums not */
	for (int threads = 1; threads <= 3; threads++) {
		REQUIRE(cpu_set_threads(threads) == 0);
		check_fills();
	}

	/* a non-matrix is refused */
	struct tensor v = {.data = (uint16_t[4]){0}, .dtype = TENSOR_BF16, .ndim = 1, .shape = {4}};
	struct cpu_dnnl_weight *dw = NULL;
	CHECK_INT_EQ(cpu_dnnl_weight_create(&v, CPU_DNNL_PLAIN, &dw), -EINVAL);
	CHECK(dw == NULL);
	return test_exit();
}
