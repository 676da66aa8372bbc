/* The AMX products (cpu_amx_rows, engine/backend/cpu/cpu_gemm_amx.c) against a double reference of the
 * same bf16-rounded operands: 1..40 tokens (one and two B tiles, and a second pass of 32),
 * weight rows and columns around the tiles' 16 and 32 (row tails, column tails, W smaller than
 * one tile), stores and accumulation, 1..3 threads (the range split, bit-identical to one
 * thread), with W ending at an unreadable page so a tile load past its end faults. Where the
 * CPU or the OS does not allow AMX the test says so and checks the fallback: cpu_amx_rows()
 * refuses (-ENOTSUP) and leaves y as it was, so the callers run the GEMV.
 *
 * Tolerance: each output is a fp32 sum of exact bf16 products in another order than the
 * reference's; 1e-5 of sum |w x| (+ |y0| when accumulating) passes any order and fails any
 * wrong or missing term (one term is >= 1/256 of an average |w x| here, and K <= 300). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common.h"
#include "cpu.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 4711;

static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* W's bf16 elements ending exactly where an inaccessible page begins */
struct guarded {
	void *map;
	size_t map_bytes;
	uint16_t *w;
};

static void guarded_alloc(struct guarded *g, size_t elems)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), bytes = elems * sizeof(uint16_t);
	size_t data_pages = (bytes + page - 1) / page;
	g->map_bytes = (data_pages + 2) * page;
	g->map = mmap(NULL, g->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	REQUIRE(g->map != MAP_FAILED);
	char *base = g->map;
	REQUIRE(mprotect(base, page, PROT_NONE) == 0);
	REQUIRE(mprotect(base + (data_pages + 1) * page, page, PROT_NONE) == 0);
	g->w = (uint16_t *)(base + (data_pages + 1) * page - bytes);
}

static void guarded_free(struct guarded *g)
{
	munmap(g->map, g->map_bytes);
}

struct problem {
	int rows, in, T;
	bool acc;
	struct guarded g;
	float *x;
	size_t ldx, ldy;
	float *y0; /* y before the call; its padding columns must stay */
};

static void problem_init(struct problem *p)
{
	size_t n = (size_t)p->rows * (size_t)p->in;
	guarded_alloc(&p->g, n);
	for (size_t i = 0; i < n; i++)
		p->g.w[i] = f32_to_bf16((float)(int)(frand() * 128) / 256.0f);
	p->ldx = (size_t)p->in + 3;
	p->ldy = (size_t)p->rows + 5;
	p->x = malloc((size_t)p->T * p->ldx * sizeof(float));
	p->y0 = malloc((size_t)p->T * p->ldy * sizeof(float));
	REQUIRE(p->x && p->y0);
	for (size_t i = 0; i < (size_t)p->T * p->ldx; i++)
		p->x[i] = frand();
	for (size_t i = 0; i < (size_t)p->T * p->ldy; i++)
		p->y0[i] = p->acc ? frand() : NAN;
}

static void problem_free(struct problem *p)
{
	guarded_free(&p->g);
	free(p->x);
	free(p->y0);
}

static float *run(const struct problem *p, int expect)
{
	float *y = malloc((size_t)p->T * p->ldy * sizeof(float));
	REQUIRE(y);
	memcpy(y, p->y0, (size_t)p->T * p->ldy * sizeof(float));
	struct tensor w = {.data = p->g.w, .dtype = TENSOR_BF16, .ndim = 2, .shape = {p->rows, p->in}};
	CHECK_INT_EQ(cpu_amx_rows(&w, p->x, p->ldx, p->T, y, p->ldy, p->acc), expect);
	return y;
}

/* worst |y - reference| / (sum |w x| + |y0|); NaN if a padding column was written */
static double error_vs_reference(const struct problem *p, const float *y)
{
	double worst = 0;
	for (int t = 0; t < p->T; t++) {
		for (int r = 0; r < p->rows; r++) {
			double s = 0, mag = 0;
			for (int k = 0; k < p->in; k++) {
				double wv = bf16_to_f32(p->g.w[(size_t)r * p->in + k]);
				double xv = bf16_to_f32(f32_to_bf16(p->x[(size_t)t * p->ldx + k]));
				s += wv * xv;
				mag += fabs(wv * xv);
			}
			double y0 = p->acc ? p->y0[(size_t)t * p->ldy + r] : 0;
			double d =
				fabs((double)y[(size_t)t * p->ldy + r] - (s + y0)) / (mag + fabs(y0) + 1e-30);
			if (!(d <= worst))
				worst = d;
		}
		for (size_t r = (size_t)p->rows; r < p->ldy; r++) {
			float v = y[(size_t)t * p->ldy + r], v0 = p->y0[(size_t)t * p->ldy + r];
			if (!(isnan(v) && isnan(v0)) && v != v0)
				return NAN;
		}
	}
	return worst;
}

static int failures_reported;

static void check_problem(struct problem *p)
{
	float *first = NULL;
	for (int threads = 1; threads <= 3; threads++) {
		REQUIRE(cpu_set_threads(threads) == 0);
		float *y = run(p, 0);
		double err = error_vs_reference(p, y);
		bool same = !first || memcmp(first, y, (size_t)p->T * p->ldy * sizeof(float)) == 0;
		bool ok = err < 1e-5 && same;
		if (!ok && failures_reported++ < 10)
			fprintf(stderr, "amx rows %d in %d T %d acc %d threads %d: error %g%s\n", p->rows,
				p->in, p->T, p->acc, threads, err, same ? "" : ", differs from one thread");
		CHECK(ok);
		if (first)
			free(y);
		else
			first = y;
	}
	free(first);
}

static void test_shapes(void)
{
	/* rows, in: one tile and less, row tails after 16- and 32-row blocks, column tails,
	 * ranges split across threads */
	static const int shapes[][2] = {{1, 1},	   {5, 31},   {15, 33}, {16, 32}, {17, 64},
					{31, 7},   {32, 100}, {33, 65}, {48, 32}, {70, 129},
					{97, 300}, {130, 96}, {257, 40}};
	static const int Ts[] = {1, 2, 3, 5, 8, 9, 15, 16, 17, 24, 31, 32, 33, 40};
	int n = 0;
	for (size_t s = 0; s < ARRAY_SIZE(shapes); s++)
		for (size_t t = 0; t < ARRAY_SIZE(Ts); t++, n++) {
			struct problem p = {.rows = shapes[s][0],
					    .in = shapes[s][1],
					    .T = Ts[t],
					    .acc = (n & 1) != 0};
			problem_init(&p);
			check_problem(&p);
			problem_free(&p);
		}
	printf("amx: %d problems on 1..3 threads\n", n);
}

/* Forced off (as $HOLOD_CPU_KERNELS=avx512bf16 does), and where the CPU lacks AMX: refused, y
 * untouched. */
static void test_refused(void)
{
	struct problem p = {.rows = 40, .in = 64, .T = 4, .acc = true};
	problem_init(&p);
	float *y = run(&p, -ENOTSUP);
	CHECK(memcmp(y, p.y0, (size_t)p.T * p.ldy * sizeof(float)) == 0);
	free(y);
	/* f16 weights are the GEMV's */
	struct tensor w = {.data = p.g.w, .dtype = TENSOR_F16, .ndim = 2, .shape = {p.rows, p.in}};
	y = malloc((size_t)p.T * p.ldy * sizeof(float));
	REQUIRE(y);
	CHECK_INT_EQ(cpu_amx_rows(&w, p.x, p.ldx, p.T, y, p.ldy, false), -ENOTSUP);
	free(y);
	problem_free(&p);
}

int main(void)
{
	CHECK_INT_EQ(cpu_isa_select("amx512"), -EINVAL);
	int r = cpu_isa_select("amx");
	CHECK(r == 0 || r == -ENOTSUP);
	if (r == -ENOTSUP) {
		printf("amx: this CPU or its OS does not allow AMX: checking the fallback only\n");
		CHECK(!cpu_amx_enabled());
		test_refused();
		return test_exit();
	}
	CHECK(cpu_amx_enabled());
	test_shapes();
	CHECK_INT_EQ(cpu_isa_select("avx512bf16"), 0);
	CHECK(!cpu_amx_enabled());
	test_refused();
	CHECK_INT_EQ(cpu_isa_select("amx"), 0);
	CHECK(cpu_amx_enabled());
	return test_exit();
}
