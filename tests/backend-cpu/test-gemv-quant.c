/* The decode GEMV on quantized weights (cpu_gemv_quant_rows, engine/backend/cpu/cpu_gemv.c and
 * cpu_gemv_quant_*.c): every variant this CPU runs against a double product of the dequantized
 * weights (quant_row_to_f32), against the portable variant, and against the original fp32
 * weights within the format's error bound; odd `in` (tails inside a block), 1..4 tokens and
 * past (groups of 4 over row blocks), row subranges, stores and accumulation, 1..3 threads; the
 * outputs past the range untouched; a token's results bit-identical alone and in a batch.
 *
 * Tolerances, derived: the kernels hold exactly the dequantized weights (docs/quantization.md),
 * so a result differs from the double product only by fp32 summation, which in any order of n
 * terms is within (n - 1) u sum |terms| (u = 2^-24; Higham's gamma bound for a sum tree, FMA
 * included): n = in + 1 terms with y0, bound (in + 64) 2^-24 (sum |w x| + |y0|). Two variants
 * are then within twice that of each other. Against the original weights add sum_k bound(k)
 * |x_k|, bound(k) being quant_error_bound() of k's block. A wrong row, column, scale or nibble
 * moves a result by a whole term, far past these (>= 1/in of the magnitude). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "quant.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 4242;

static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

struct problem {
	enum quant_format fmt;
	int rows, in, row0, nrows, T;
	bool acc;
	float *w;	/* original weights */
	float *wq;	/* dequantized */
	double *wbound; /* per element: its block's error bound */
	void *data;
	struct quant_tensor qt;
	float *x, *y0;
	size_t ldx, ldy;
};

static void problem_init(struct problem *p)
{
	size_t n = (size_t)p->rows * p->in, bytes;
	p->w = malloc(n * sizeof(float));
	p->wq = malloc(n * sizeof(float));
	p->wbound = malloc(n * sizeof(double));
	REQUIRE(quant_tensor_bytes(p->fmt, p->rows, p->in, &bytes) == 0);
	p->data = aligned_alloc(64, bytes);
	p->ldx = (size_t)p->in + 3;
	p->ldy = (size_t)p->nrows + 5;
	p->x = malloc((size_t)p->T * p->ldx * sizeof(float));
	p->y0 = malloc((size_t)p->T * p->ldy * sizeof(float));
	REQUIRE(p->w && p->wq && p->wbound && p->data && p->x && p->y0);
	for (size_t i = 0; i < n; i++)
		p->w[i] = frand() * 0.05f + (i % 97 == 0 ? 0.3f : 0.0f);
	REQUIRE(quant_tensor_from_f32(p->fmt, p->w, p->rows, p->in, p->in, p->data, &p->qt) == 0);
	for (int r = 0; r < p->rows; r++) {
		const char *row = (const char *)p->data + (size_t)r * p->qt.row_bytes;
		quant_row_to_f32(p->fmt, row, p->in, p->wq + (size_t)r * p->in);
		for (int b0 = 0; b0 < p->in; b0 += 32) {
			const float *wb = p->w + (size_t)r * p->in + b0;
			int m = p->in - b0 < 32 ? p->in - b0 : 32;
			float lo = wb[0], hi = wb[0];
			for (int i = 0; i < m; i++) {
				lo = fminf(lo, wb[i]);
				hi = fmaxf(hi, wb[i]);
			}
			for (int i = 0; i < m; i++)
				p->wbound[(size_t)r * p->in + b0 + i] = quant_error_bound(p->fmt, lo, hi);
		}
	}
	/* past `in` NaN: a kernel that reads activations past the row fails */
	for (size_t i = 0; i < (size_t)p->T * p->ldx; i++)
		p->x[i] = i % p->ldx < (size_t)p->in ? frand() : NAN;
	for (size_t i = 0; i < (size_t)p->T * p->ldy; i++)
		p->y0[i] = p->acc ? frand() : NAN;
}

static void problem_free(struct problem *p)
{
	free(p->w);
	free(p->wq);
	free(p->wbound);
	free(p->data);
	free(p->x);
	free(p->y0);
}

static float *run(const struct problem *p)
{
	float *y = malloc((size_t)p->T * p->ldy * sizeof(float));
	REQUIRE(y);
	memcpy(y, p->y0, (size_t)p->T * p->ldy * sizeof(float));
	CHECK_INT_EQ(cpu_gemv_quant_rows(&p->qt, p->row0, p->nrows, p->x, p->ldx, p->T, y, p->ldy, p->acc), 0);
	return y;
}

/* worst error of y in units of its tolerance: [0] vs the dequantized double product, [1] vs
 * the original weights' product; NaN when an output past the range changed */
static void errors(const struct problem *p, const float *y, double ret[2])
{
	ret[0] = ret[1] = 0;
	for (int t = 0; t < p->T; t++) {
		const float *x = p->x + (size_t)t * p->ldx;
		for (int r = 0; r < p->nrows; r++) {
			size_t o = (size_t)(p->row0 + r) * p->in;
			double sq = 0, mag = 0, s = 0, qb = 0;
			for (int k = 0; k < p->in; k++) {
				sq += (double)p->wq[o + k] * x[k];
				mag += fabs((double)p->wq[o + k] * x[k]);
				s += (double)p->w[o + k] * x[k];
				qb += p->wbound[o + k] * fabs((double)x[k]);
			}
			double y0 = p->acc ? p->y0[(size_t)t * p->ldy + r] : 0, v = y[(size_t)t * p->ldy + r];
			double sum_tol = (p->in + 64) * 0x1p-24 * (mag + fabs(y0)) + 1e-30;
			double e0 = fabs(v - (sq + y0)) / sum_tol, e1 = fabs(v - (s + y0)) / (qb + sum_tol);
			if (!(e0 <= ret[0]))
				ret[0] = e0;
			if (!(e1 <= ret[1]))
				ret[1] = e1;
		}
		for (size_t r = (size_t)p->nrows; r < p->ldy; r++) {
			float v = y[(size_t)t * p->ldy + r], v0 = p->y0[(size_t)t * p->ldy + r];
			if (!(isnan(v) && isnan(v0)) && v != v0)
				ret[0] = ret[1] = NAN;
		}
	}
}

static int reported;

static void check_problem(struct problem *p)
{
	CHECK_INT_EQ(cpu_isa_select("portable"), 0);
	float *py = run(p);
	for (int i = 0; cpu_gemv_variant_name(i); i++) {
		const char *name = cpu_gemv_variant_name(i);
		if (cpu_isa_select(name) < 0)
			continue;
		float *y = i == 0 ? py : run(p);
		double e[2], vs_portable = 0;
		errors(p, y, e);
		for (int t = 0; t < p->T; t++)
			for (int r = 0; r < p->nrows; r++) {
				size_t o = (size_t)(p->row0 + r) * p->in;
				double mag = 0;
				for (int k = 0; k < p->in; k++)
					mag += fabs((double)p->wq[o + k] * p->x[(size_t)t * p->ldx + k]);
				if (p->acc)
					mag += fabs(p->y0[(size_t)t * p->ldy + r]);
				double d =
					fabs((double)y[(size_t)t * p->ldy + r] - py[(size_t)t * p->ldy + r]) /
					(2 * (p->in + 64) * 0x1p-24 * mag + 1e-30);
				if (!(d <= vs_portable))
					vs_portable = d;
			}
		bool ok = e[0] <= 1 && e[1] <= 1 && vs_portable <= 1;
		if (!ok && reported++ < 10)
			fprintf(stderr,
				"gemv %s %s rows %d in %d row0 %d nrows %d T %d acc %d: errors %.3g "
				"(dequantized), %.3g (original), %.3g (portable) of the tolerances\n",
				name, quant_format_desc(p->fmt)->name, p->rows, p->in, p->row0, p->nrows,
				p->T, p->acc, e[0], e[1], vs_portable);
		CHECK(ok);
		if (y != py)
			free(y);
	}
	free(py);
}

static void test_shapes(void)
{
	static const int shapes[][2] = {{1, 1},	   {3, 7},    {9, 31},	   {8, 32},   {17, 33},
					{5, 47},   {16, 64},  {13, 95},	   {40, 100}, {7, 129},
					{64, 257}, {300, 96}, {100, 1000}, {37, 1100}};
	int n = 0;
	for (int f = 0; f < QUANT_FORMAT_COUNT; f++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (int T = 1; T <= 6; T++, n++) {
				struct problem p = {.fmt = (enum quant_format)f,
						    .rows = shapes[s][0],
						    .in = shapes[s][1],
						    .T = T,
						    .acc = (n & 1) != 0};
				p.row0 = (n & 2) && p.rows > 2 ? 1 : 0;
				p.nrows = p.rows - p.row0 - ((n & 2) && p.rows > 3 ? 1 : 0);
				problem_init(&p);
				check_problem(&p);
				problem_free(&p);
			}
}

/* a token's results are the same bits alone as among 7 */
static void test_tokens_independent(void)
{
	for (int f = 0; f < QUANT_FORMAT_COUNT; f++) {
		struct problem p = {.fmt = (enum quant_format)f, .rows = 300, .in = 333, .nrows = 300, .T = 7};
		problem_init(&p);
		for (int i = 0; cpu_gemv_variant_name(i); i++) {
			if (cpu_isa_select(cpu_gemv_variant_name(i)) < 0)
				continue;
			float *all = run(&p), *one = malloc(p.ldy * sizeof(float));
			REQUIRE(one);
			bool same = true;
			for (int t = 0; t < p.T; t++) {
				CHECK_INT_EQ(cpu_gemv_quant_rows(&p.qt, 0, p.nrows, p.x + (size_t)t * p.ldx,
								 p.ldx, 1, one, p.ldy, false),
					     0);
				same &= memcmp(one, all + (size_t)t * p.ldy,
					       (size_t)p.nrows * sizeof(float)) == 0;
			}
			CHECK(same);
			free(one);
			free(all);
		}
		problem_free(&p);
	}
	struct problem p = {.fmt = QUANT_Q8, .rows = 4, .in = 8, .nrows = 4, .T = 1};
	problem_init(&p);
	float y[8];
	CHECK_INT_EQ(cpu_gemv_quant_rows(&p.qt, 2, 3, p.x, p.ldx, 1, y, 8, false), -EINVAL);
	problem_free(&p);
}

int main(void)
{
	for (int i = 0; cpu_gemv_variant_name(i); i++) {
		const char *name = cpu_gemv_variant_name(i);
		int r = cpu_isa_select(name);
		printf("gemv variant %s: %s\n", name, r == 0 ? "tested" : "skipped (this CPU lacks it)");
	}
	for (int threads = 1; threads <= 3; threads++) {
		REQUIRE(cpu_set_threads(threads) == 0);
		test_shapes();
		test_tokens_independent();
	}
	return test_exit();
}
