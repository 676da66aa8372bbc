/* The decode GEMV kernels (engine/backend/cpu/cpu_gemv*.c): every variant this CPU runs against a double
 * reference and against the portable variant, on random shapes with odd sizes and column and
 * row tails, 1..5 tokens (5: two kernel groups), every weight dtype, fp32 and bf16 activations, stores and
 * accumulation, row offsets, padded strides, and 1, 2 and 3 threads (the range split).
 *
 * Tolerance: fp32 sums over `in` products in different orders differ from the double
 * reference by a few ulps of sum |w x|; 1e-5 of that bound passes any order and fails any wrong
 * row, column or token (an error of one product is >= 1/256 of one |w x| term here). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_gemv.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 777;

static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* exact for multiples of 2^-8 within (-0.5, 0.5) */
static uint16_t f16_bits(float f)
{
	union {
		float f;
		uint32_t u;
	} x = {.f = f};
	if (f == 0)
		return 0;
	uint32_t sign = (x.u >> 16) & 0x8000u;
	int exp = (int)((x.u >> 23) & 0xff) - 127 + 15;
	return (uint16_t)(sign | ((uint32_t)exp << 10) | ((x.u & 0x7fffffu) >> 13));
}

struct problem {
	enum tensor_dtype dt;
	int rows, in, row0, nrows, T;
	bool acc, bf16_act;
	float *wf; /* the weights' exact values */
	void *wd;  /* stored in dt */
	float *x;
	size_t ldx, ldy;
	float *y0; /* y before the call */
};

static void problem_init(struct problem *p)
{
	size_t n = (size_t)p->rows * (size_t)p->in;
	p->wf = malloc(n * sizeof(float));
	p->wd = malloc(n * 4);
	p->ldx = (size_t)p->in + 5;
	p->ldy = (size_t)p->nrows + 3;
	p->x = malloc((size_t)p->T * p->ldx * sizeof(float));
	p->y0 = malloc((size_t)p->T * p->ldy * sizeof(float));
	REQUIRE(p->wf && p->wd && p->x && p->y0);
	for (size_t i = 0; i < n; i++) {
		float v = (float)(int)(frand() * 128) / 256.0f;
		p->wf[i] = v;
		if (p->dt == TENSOR_F32)
			((float *)p->wd)[i] = v;
		else if (p->dt == TENSOR_BF16)
			((uint16_t *)p->wd)[i] = f32_to_bf16(v);
		else
			((uint16_t *)p->wd)[i] = f16_bits(v);
	}
	for (size_t i = 0; i < (size_t)p->T * p->ldx; i++)
		p->x[i] = frand();
	for (size_t i = 0; i < (size_t)p->T * p->ldy; i++)
		p->y0[i] = p->acc ? frand() : NAN;
}

static void problem_free(struct problem *p)
{
	free(p->wf);
	free(p->wd);
	free(p->x);
	free(p->y0);
}

/* runs the selected variant; returns y (T rows of ldy) */
static float *run(const struct problem *p)
{
	float *y = malloc((size_t)p->T * p->ldy * sizeof(float));
	REQUIRE(y);
	memcpy(y, p->y0, (size_t)p->T * p->ldy * sizeof(float));
	struct tensor w = {.data = p->wd, .dtype = p->dt, .ndim = 2, .shape = {p->rows, p->in}};
	CHECK_INT_EQ(cpu_gemv_rows(&w, p->row0, p->nrows, p->x, p->ldx, p->T, y, p->ldy, p->acc, p->bf16_act),
		     0);
	return y;
}

/* worst |y - reference| / (sum |w x| + |y0|) over the outputs; NaN if any padding was written */
static double error_vs_reference(const struct problem *p, const float *y)
{
	double worst = 0;
	for (int t = 0; t < p->T; t++) {
		for (int r = 0; r < p->nrows; r++) {
			double s = 0, mag = 0;
			const float *wr = p->wf + (size_t)(p->row0 + r) * (size_t)p->in;
			for (int k = 0; k < p->in; k++) {
				float xv = p->x[(size_t)t * p->ldx + k];
				if (p->bf16_act)
					xv = bf16_to_f32(f32_to_bf16(xv));
				s += (double)wr[k] * xv;
				mag += fabs((double)wr[k] * xv);
			}
			double y0 = p->acc ? p->y0[(size_t)t * p->ldy + r] : 0;
			double d =
				fabs((double)y[(size_t)t * p->ldy + r] - (s + y0)) / (mag + fabs(y0) + 1e-30);
			if (!(d <= worst))
				worst = d;
		}
		for (size_t r = (size_t)p->nrows; r < p->ldy; r++) {
			float v = y[(size_t)t * p->ldy + r], v0 = p->y0[(size_t)t * p->ldy + r];
			if (!(isnan(v) && isnan(v0)) && v != v0)
				return NAN;
		}
	}
	return worst;
}

static int failures_reported;

static void check_case(const char *variant, struct problem *p, const float *portable_y)
{
	float *y = run(p);
	double err = error_vs_reference(p, y);
	double vs_portable = 0;
	for (int t = 0; t < p->T; t++)
		for (int r = 0; r < p->nrows; r++) {
			double a = y[(size_t)t * p->ldy + r], b = portable_y[(size_t)t * p->ldy + r];
			double d = fabs(a - b) / (fabs(b) + 1.0);
			if (!(d <= vs_portable))
				vs_portable = d;
		}
	bool ok = err < 1e-5 && vs_portable < 1e-4;
	if (!ok && failures_reported++ < 10)
		fprintf(stderr,
			"gemv %s dtype %d rows %d in %d row0 %d nrows %d T %d acc %d bf16 %d: error %g "
			"(vs portable %g)\n",
			variant, (int)p->dt, p->rows, p->in, p->row0, p->nrows, p->T, p->acc, p->bf16_act,
			err, vs_portable);
	CHECK(ok);
	free(y);
}

/* Every variant on one problem: the portable result first, then each other variant. */
static void check_problem(struct problem *p)
{
	CHECK_INT_EQ(cpu_isa_select("portable"), 0);
	float *py = run(p);
	CHECK(error_vs_reference(p, py) < 1e-5);
	for (int i = 1; cpu_gemv_variant_name(i); i++) {
		const char *name = cpu_gemv_variant_name(i);
		if (cpu_isa_select(name) < 0)
			continue;
		check_case(name, p, py);
	}
	free(py);
}

static void report_variants(void)
{
	for (int i = 0; cpu_gemv_variant_name(i); i++) {
		const char *name = cpu_gemv_variant_name(i);
		int r = cpu_isa_select(name);
		CHECK(r == 0 || r == -ENOTSUP);
		printf("gemv variant %s: %s\n", name, r == 0 ? "tested" : "skipped (this CPU lacks it)");
	}
	CHECK_INT_EQ(cpu_isa_select("portable"), 0);
	CHECK_INT_EQ(cpu_isa_select("generic"), 0);
	CHECK_STR_EQ(cpu_gemv_name(), "portable");
	CHECK_INT_EQ(cpu_isa_select("avx1024"), -EINVAL);
}

static void test_shapes(void)
{
	/* rows, in: below and around the vector widths (8, 16, 32), odd, large enough to split */
	static const int shapes[][2] = {{1, 1},	  {3, 7},    {9, 15},	{8, 16},    {17, 31},
					{16, 32}, {33, 33},  {13, 47},	{40, 64},   {31, 100},
					{7, 129}, {64, 257}, {300, 96}, {1000, 70}, {517, 200}};
	static const enum tensor_dtype dts[] = {TENSOR_BF16, TENSOR_F16, TENSOR_F32};
	int n = 0;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
			for (int T = 1; T <= 9; T++, n++) {
				struct problem p = {
					.dt = dts[d],
					.rows = shapes[s][0],
					.in = shapes[s][1],
					.T = T,
					.acc = (n & 1) != 0,
					.bf16_act = (n % 3) == 1,
				};
				/* a row offset and a partial range on every other case */
				p.row0 = (n & 2) && p.rows > 2 ? 1 : 0;
				p.nrows = p.rows - p.row0 - ((n & 2) && p.rows > 3 ? 1 : 0);
				problem_init(&p);
				check_problem(&p);
				problem_free(&p);
			}
}

/* The decode rows of several sessions in one call (T past one kernel's tokens, in groups over
 * blocks of rows): every token's results are bit-identical to a call with that token alone, for
 * every variant, dtype and activation rounding (bf16 weights with bf16 activations: rounded once
 * per call where the variant has round_x, else per block). So a batched decode gives each
 * session exactly what its own decode gives. */
static void test_tokens_independent(void)
{
	static const int shapes[][2] = {{37, 33}, {300, 96}, {1000, 70}, {70, 1100}};
	static const enum tensor_dtype dts[] = {TENSOR_BF16, TENSOR_F16, TENSOR_F32};
	static const int Ts[] = {6, 7, 8, 13, 17};
	int n = 0;
	for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
		for (size_t d = 0; d < sizeof(dts) / sizeof(dts[0]); d++)
			for (int k = 0; k < 2 * (int)(sizeof(Ts) / sizeof(Ts[0])); k++, n++) {
				int T = Ts[k / 2];
				struct problem p = {.dt = dts[d],
						    .rows = shapes[s][0],
						    .in = shapes[s][1],
						    .nrows = shapes[s][0],
						    .T = T,
						    .acc = (n & 1) != 0,
						    .bf16_act = (k & 1) != 0};
				problem_init(&p);
				struct tensor w = {.data = p.wd,
						   .dtype = p.dt,
						   .ndim = 2,
						   .shape = {p.rows, p.in}};
				for (int i = 0; cpu_gemv_variant_name(i); i++) {
					if (cpu_isa_select(cpu_gemv_variant_name(i)) < 0)
						continue;
					float *all = run(&p);
					CHECK(error_vs_reference(&p, all) < 1e-5);
					float *one = malloc(p.ldy * sizeof(float));
					REQUIRE(one);
					bool same = true;
					for (int t = 0; t < T; t++) {
						memcpy(one, p.y0 + (size_t)t * p.ldy, p.ldy * sizeof(float));
						CHECK_INT_EQ(cpu_gemv_rows(&w, 0, p.nrows,
									   p.x + (size_t)t * p.ldx, p.ldx, 1,
									   one, p.ldy, p.acc, p.bf16_act),
							     0);
						same &= memcmp(one, all + (size_t)t * p.ldy,
							       (size_t)p.nrows * sizeof(float)) == 0;
					}
					if (!same)
						fprintf(stderr,
							"gemv %s dtype %d rows %d in %d T %d: a token's "
							"results "
							"depend on the others\n",
							cpu_gemv_variant_name(i), (int)p.dt, p.rows, p.in, T);
					CHECK(same);
					free(one);
					free(all);
				}
				problem_free(&p);
			}
}

/* A variant whose bf16 kernels read the activations rounded once per product (round_x) also
 * rounds them in registers when there is no memory for that copy: both give the same bits, for
 * 1..CPU_GEMV_KERNEL_T tokens, whole blocks and tails, stores and accumulation. */
static void test_rounded_copy_same_bits(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	static const struct cpu_gemv_variant *const vs[] = {&cpu_gemv_avx2, &cpu_gemv_avx512,
							    &cpu_gemv_avx512bf16};
	static const char *const names[] = {"avx2", "avx512", "avx512bf16"};
#else
	static const struct cpu_gemv_variant *const vs[] = {&cpu_gemv_portable};
	static const char *const names[] = {"portable"};
#endif
	static const int shapes[][2] = {{5, 31}, {9, 32}, {17, 64}, {11, 95}, {37, 130}, {6, 1100}};
	int tested = 0;
	for (size_t v = 0; v < sizeof(vs) / sizeof(vs[0]); v++) {
		if (!vs[v]->round_x || cpu_isa_select(names[v]) < 0)
			continue;
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (int T = 1; T <= CPU_GEMV_KERNEL_T; T++)
				for (int acc = 0; acc < 2; acc++) {
					struct problem p = {.dt = TENSOR_BF16,
							    .rows = shapes[s][0],
							    .in = shapes[s][1],
							    .nrows = shapes[s][0],
							    .T = T,
							    .acc = acc,
							    .bf16_act = true};
					problem_init(&p);
					size_t ldxb = ((size_t)p.in + 31) & ~(size_t)31;
					uint16_t *xb = aligned_alloc(64, (size_t)T * ldxb * sizeof(*xb));
					float *y1 = malloc((size_t)T * p.ldy * sizeof(float));
					float *y2 = malloc((size_t)T * p.ldy * sizeof(float));
					REQUIRE(xb && y1 && y2);
					vs[v]->round_x(p.x, p.ldx, T, p.in, xb, ldxb);
					memcpy(y1, p.y0, (size_t)T * p.ldy * sizeof(float));
					memcpy(y2, p.y0, (size_t)T * p.ldy * sizeof(float));
					struct cpu_gemv_args a = {.w = p.wd,
								  .dtype = TENSOR_BF16,
								  .ldw = (size_t)p.in,
								  .in = p.in,
								  .T = T,
								  .x = p.x,
								  .ldx = p.ldx,
								  .y = y1,
								  .ldy = p.ldy,
								  .accumulate = acc};
					vs[v]->bf16(&a, 0, p.rows);
					a.y = y2;
					a.xb = xb;
					a.ldxb = ldxb;
					vs[v]->bf16(&a, 0, p.rows);
					bool same = memcmp(y1, y2, (size_t)T * p.ldy * sizeof(float)) == 0;
					if (!same)
						fprintf(stderr,
							"gemv %s rows %d in %d T %d: rounding in registers "
							"and "
							"the rounded copy differ\n",
							names[v], p.rows, p.in, T);
					CHECK(same);
					CHECK(error_vs_reference(&p, y2) < 1e-5);
					free(xb);
					free(y1);
					free(y2);
					problem_free(&p);
					tested++;
				}
	}
	printf("rounded copy vs rounding in registers: %d cases%s\n", tested,
	       tested ? "" : " (skipped: no variant this CPU runs has round_x)");
	CHECK_INT_EQ(cpu_isa_select("portable"), 0);
}

int main(void)
{
	test_rounded_copy_same_bits();
	report_variants();
	for (int threads = 1; threads <= 3; threads++) {
		REQUIRE(cpu_set_threads(threads) == 0);
		test_shapes();
		test_tokens_independent();
	}
	return test_exit();
}
