/* The integer kernels on quantized weights (cpu_gemv_quant_rows_i8, engine/backend/cpu/cpu_gemv.c,
 * cpu_gemv_quant_vnni.c, and the tile kernels without VNNI: cpu_gemv_quant_tile_avx2.c and
 * cpu_gemv_quant_tile_avx512.c): the activations' quantization (cpu_gemv_quantize_x) against its
 * definition, then every variant with integer kernels against a double product of the quantized
 * weights and activations, against the portable variant, and against the exact product of the
 * dequantized weights within the activations' rounding; odd `in` (tails inside a block, groups
 * of 4 blocks cut short), 1..6 tokens, row subranges, stores and accumulation, 1..3 threads;
 * NaN in the records' padding ignored, a NaN activation giving NaN; a token's results
 * bit-identical alone and in a batch; a variant without integer kernels (none on x86-64 now:
 * AVX2 and AVX-512F have vpmaddubsw ones) gives the exact ones'.
 *
 * Tolerances, derived: a block's code products are summed exactly as integers (|sum| < 2^24,
 * so exact in fp32 too); each lane's part is scaled by one fp32 product d_w d_x (q4: plus m_w
 * times d_x c/4, also one rounding each) and the parts summed in fp32. With mag = sum over
 * blocks of |d_w d_x| sum|c_w c_x| (+ |m_w d_x| sum|c_x|) + |y0|, every rounding is within
 * u = 2^-24 of a term bounded by mag, and at most in + 64 of them chain: the result is within
 * 3 (in + 64) u mag of the double product. Against the exact product of the dequantized weights
 * add sum_k |w_k| d_x(k) / 2 (each activation within half a step of its code). A wrong code,
 * lane, scale or nibble moves a result by a whole term, far past these. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "cpu_gemv.h"
#include "cpu_isa.h"
#include "quant.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 777;

static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* the variants that quantize activations their own way */
#if defined(__x86_64__) && defined(__GNUC__)
static const struct cpu_gemv_variant *const variants[] = {&cpu_gemv_avx2, &cpu_gemv_avx512,
							  &cpu_gemv_avx512bf16};
static const enum cpu_isa variant_isa[] = {CPU_ISA_AVX2, CPU_ISA_AVX512, CPU_ISA_AVX512BF16};
#else
static const struct cpu_gemv_variant *const variants[] = {&cpu_gemv_portable};
static const enum cpu_isa variant_isa[] = {CPU_ISA_PORTABLE};
#endif

/* one block's d and codes as the definition (cpu_gemv.h) gives them */
static float ref_block(const float *x, int n, int8_t c[32])
{
	float amax = 0;
	for (int i = 0; i < n; i++)
		amax = fmaxf(amax, fabsf(x[i]));
	memset(c, 0, 32);
	if (amax == 0)
		return 0;
	for (int i = 0; i < n; i++)
		c[i] = (int8_t)nearbyintf(x[i] * (127.0f / amax));
	return amax / 127.0f;
}

/* the layout, read back: block b's d, codes (column order) */
static float xq_block(enum quant_format f, const char *xt, int64_t b, int8_t c[32])
{
	const char *g = xt + (size_t)(b / 4) * (f == QUANT_Q8 ? CPU_XQ_Q8_BYTES : CPU_XQ_Q4_BYTES);
	int j = (int)(b % 4);
	if (f == QUANT_Q8) {
		memcpy(c, g + 32 * j, 32);
		return ((const float *)(g + 256))[8 * j];
	}
	memcpy(c, g + 16 * j, 16);
	memcpy(c + 16, g + 64 + 16 * j, 16);
	return ((const float *)(g + 128))[4 * j];
}

/* cpu_gemv_quantize_x against the definition and its own invariants */
static void test_quantize_x(void)
{
	static const int ins[] = {1, 5, 31, 32, 33, 64, 95, 127, 128, 129, 300, 1000};
	for (int f = QUANT_Q8; f <= QUANT_Q4; f++)
		for (size_t k = 0; k < sizeof(ins) / sizeof(ins[0]); k++) {
			int in = ins[k], T = 2;
			size_t ld = cpu_gemv_xq_bytes((enum quant_format)f, in);
			CHECK(ld % 64 == 0 && ld >= (size_t)(in + 31) / 32 * 32);
			float *x = malloc((size_t)T * in * sizeof(float));
			char *xq = aligned_alloc(64, (size_t)T * ld);
			REQUIRE(x && xq);
			memset(xq, 0x5a, (size_t)T * ld); /* every byte must be written */
			for (int i = 0; i < T * in; i++)
				x[i] = frand() * (i / 32 % 3 == 1 ? 1e-3f : 2.0f);
			if (in >= 64)
				memset(x + 32, 0, 32 * sizeof(float)); /* a block of zeros */
			cpu_gemv_quantize_x((enum quant_format)f, x, (size_t)in, T, in, xq, ld);
			bool ok = true;
			/* each variant's own quantization: the same bytes */
			for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
				if (!variants[v]->quant_x || !cpu_isa_supported(variant_isa[v]))
					continue;
				char *vq = aligned_alloc(64, (size_t)T * ld);
				REQUIRE(vq);
				memset(vq, 0xa5, (size_t)T * ld);
				variants[v]->quant_x((enum quant_format)f, x, (size_t)in, T, in, vq, ld);
				ok &= memcmp(vq, xq, (size_t)T * ld) == 0;
				x[0] = k % 2 ? NAN : INFINITY; /* and a non-finite block */
				cpu_gemv_quantize_x((enum quant_format)f, x, (size_t)in, 1, in, xq, ld);
				variants[v]->quant_x((enum quant_format)f, x, (size_t)in, 1, in, vq, ld);
				ok &= memcmp(vq, xq, ld) == 0;
				if (!ok)
					fprintf(stderr, "quantize_x %s in %d: variant %s's bytes differ\n",
						quant_format_desc((enum quant_format)f)->name, in,
						variants[v]->name);
				x[0] = 0.5f;
				cpu_gemv_quantize_x((enum quant_format)f, x, (size_t)in, T, in, xq, ld);
				free(vq);
			}
			for (int t = 0; t < T; t++) {
				const char *xt = xq + (size_t)t * ld;
				int64_t nb = quant_blocks(in), ng = (nb + 3) / 4;
				for (int64_t b = 0; b < ng * 4; b++) {
					int8_t c[32], rc[32];
					float d = xq_block((enum quant_format)f, xt, b, c);
					int n = b < nb ? (int)(in - 32 * b < 32 ? in - 32 * b : 32) : 0;
					float rd = ref_block(x + (size_t)t * in + 32 * b, n, rc);
					ok &= d == rd && memcmp(c, rc, 32) == 0;
					int sum = 0;
					for (int i = 0; i < 32; i++) {
						sum += c[i];
						ok &= c[i] != -128;
						/* a nearest code */
						if (i < n && d > 0)
							ok &= fabs((double)x[(size_t)t * in + 32 * b + i] / d -
								   c[i]) <= 0.5 + 1e-5;
					}
					const char *g =
						xt + (size_t)(b / 4) * (f == QUANT_Q8 ? CPU_XQ_Q8_BYTES :
											CPU_XQ_Q4_BYTES);
					int j = (int)(b % 4);
					if (f == QUANT_Q8) {
						const int32_t *corr = (const int32_t *)(g + 128);
						const float *dl = (const float *)(g + 256);
						for (int l = 0; l < 8; l++) {
							ok &= corr[8 * j + l] ==
							      -128 * (c[4 * l] + c[4 * l + 1] + c[4 * l + 2] +
								      c[4 * l + 3]);
							ok &= dl[8 * j + l] == d;
						}
						/* the block's total correction, then zeros */
						ok &= ((const int32_t *)(g + CPU_XQ_Q8_CTOT))[j] == -128 * sum;
						for (int i = CPU_XQ_Q8_CTOT + 16; i < CPU_XQ_Q8_BYTES; i++)
							ok &= g[i] == 0;
					} else {
						const float *dl = (const float *)(g + 128),
							    *sl = (const float *)(g + 192);
						for (int l = 0; l < 4; l++)
							ok &= dl[4 * j + l] == d &&
							      sl[4 * j + l] == d * (float)sum * 0.25f;
					}
				}
			}
			if (!ok)
				fprintf(stderr, "quantize_x %s in %d: layout or codes wrong\n",
					quant_format_desc((enum quant_format)f)->name, in);
			CHECK(ok);
			/* a NaN or an infinity makes its block's d NaN and codes 0 */
			x[0] = k % 2 ? NAN : INFINITY;
			cpu_gemv_quantize_x((enum quant_format)f, x, (size_t)in, 1, in, xq, ld);
			int8_t c[32], zero[32] = {0};
			CHECK(isnan(xq_block((enum quant_format)f, xq, 0, c)) && memcmp(c, zero, 32) == 0);
			free(x);
			free(xq);
		}
}

struct problem {
	enum quant_format fmt;
	int rows, in, row0, nrows, T;
	bool acc;
	bool tiled; /* q8, q4: the whole tiles laid out as quant.h's tiles */
	float *wq;  /* dequantized weights */
	void *data;
	struct quant_tensor qt;
	float *x, *y0;
	size_t ldx, ldy;
};

static void problem_init(struct problem *p)
{
	size_t n = (size_t)p->rows * p->in, bytes;
	float *w = malloc(n * sizeof(float));
	p->wq = malloc(n * sizeof(float));
	REQUIRE(quant_tensor_bytes(p->fmt, p->rows, p->in, &bytes) == 0);
	p->data = aligned_alloc(64, bytes);
	p->ldx = (size_t)p->in + 3;
	p->ldy = (size_t)p->nrows + 5;
	p->x = malloc((size_t)p->T * p->ldx * sizeof(float));
	p->y0 = malloc((size_t)p->T * p->ldy * sizeof(float));
	REQUIRE(w && p->wq && p->data && p->x && p->y0);
	for (size_t i = 0; i < n; i++)
		w[i] = frand() * 0.05f + (i % 97 == 0 ? 0.3f : 0.0f) + (p->fmt == QUANT_Q4 ? 0.02f : 0.0f);
	/* fp8: some weights far below the row's largest, so e4m3's subnormal codes (|w| / s below
	 * 2^-6, s ~ 0.35 / 448) are among the products */
	if (p->fmt == QUANT_FP8)
		for (size_t i = 0; i < n; i += 5)
			w[i] = frand() * 2e-5f;
	REQUIRE(quant_tensor_from_f32(p->fmt, w, p->rows, p->in, p->in, p->data, &p->qt) == 0);
	free(w);
	int64_t nb = quant_blocks(p->in);
	for (int r = 0; r < p->rows; r++) {
		char *row = (char *)p->data + (size_t)r * p->qt.row_bytes;
		quant_row_to_f32(p->fmt, row, p->in, p->wq + (size_t)r * p->in);
		/* the scales' padding past the last block NaN (0xffff): the kernels must not use it */
		if (p->fmt != QUANT_Q8 && p->fmt != QUANT_Q4)
			continue;
		char *s = p->fmt == QUANT_Q8 ? (char *)quant_q8_scales(row, p->in) + 2 * nb :
					       (char *)quant_q4_dz(row, p->in) + 2 * nb;
		memset(s, 0xff, (size_t)(row + p->qt.row_bytes - s));
	}
	if (p->tiled && quant_tile_supported(p->fmt) && p->rows >= QUANT_TILE_ROWS) {
		/* tiled in place; each tile's bytes past its blocks 0xff (NaN scales, codes 15): a
		 * kernel that reads them fails */
		void *tmp = malloc(QUANT_TILE_ROWS * p->qt.row_bytes);
		REQUIRE(tmp);
		REQUIRE(quant_tensor_tile_range(&p->qt, p->data, 0, p->rows / QUANT_TILE_ROWS, tmp) == 0);
		free(tmp);
		p->qt.tiled = true;
		const size_t tb = QUANT_TILE_ROWS * p->qt.row_bytes,
			     used = quant_tile_used_bytes(p->fmt, p->in);
		for (int t = 0; t < p->rows / QUANT_TILE_ROWS; t++)
			memset((char *)p->data + (size_t)t * tb + used, 0xff, tb - used);
	}
	/* past `in` NaN: a kernel that reads activations past the row fails */
	for (size_t i = 0; i < (size_t)p->T * p->ldx; i++)
		p->x[i] = i % p->ldx < (size_t)p->in ? frand() * (i % 7 == 0 ? 3.0f : 1.0f) : NAN;
	for (size_t i = 0; i < (size_t)p->T * p->ldy; i++)
		p->y0[i] = p->acc ? frand() : NAN;
}

static void problem_free(struct problem *p)
{
	free(p->wq);
	free(p->data);
	free(p->x);
	free(p->y0);
}

static float *run(const struct problem *p)
{
	float *y = malloc((size_t)p->T * p->ldy * sizeof(float));
	REQUIRE(y);
	memcpy(y, p->y0, (size_t)p->T * p->ldy * sizeof(float));
	CHECK_INT_EQ(cpu_gemv_quant_rows_i8(&p->qt, p->row0, p->nrows, p->x, p->ldx, p->T, y, p->ldy, p->acc),
		     0);
	return y;
}

/* the double product of row r's codes and token t's codes: ret[0] the value, ret[1] mag (the
 * header), ret[2] the bound against the exact dequantized product */
static void reference(const struct problem *p, int r, int t, double ret[3])
{
	char rec[8192] __attribute__((aligned(64)));
	REQUIRE(p->qt.row_bytes <= sizeof(rec));
	const char *row = quant_tensor_row(&p->qt, r, rec);
	const float *x = p->x + (size_t)t * p->ldx;
	double v = 0, mag = 0, xb = 0;
	for (int64_t b = 0; b < quant_blocks(p->in); b++) {
		int n = p->in - 32 * (int)b < 32 ? p->in - 32 * (int)b : 32;
		int8_t c[32];
		double dx = ref_block(x + 32 * b, n, c);
		long s = 0, sa = 0, cs = 0, csa = 0;
		if (p->fmt == QUANT_Q8) {
			const int8_t *cw = quant_q8_codes(row) + 32 * b;
			for (int i = 0; i < 32; i++) {
				s += cw[i] * c[i];
				sa += labs((long)cw[i] * c[i]);
			}
			double dw = quant_f16_to_f32(quant_q8_scales(row, p->in)[b]);
			v += dw * dx * (double)s;
			mag += fabs(dw * dx) * (double)sa;
		} else {
			const uint8_t *cw = quant_q4_codes(row) + 16 * b;
			for (int i = 0; i < 32; i++) {
				int q = i < 16 ? cw[i] & 15 : cw[i - 16] >> 4;
				s += q * c[i];
				sa += labs((long)q * c[i]);
				cs += c[i];
				csa += labs((long)c[i]);
			}
			const uint16_t dz = quant_q4_dz(row, p->in)[b];
			double dw = quant_q4_d(dz), mw = quant_q4_m(quant_q4_d(dz), dz);
			v += dw * dx * (double)s + mw * dx * (double)cs;
			mag += fabs(dw * dx) * (double)sa + fabs(mw * dx) * (double)csa;
		}
		for (int i = 0; i < n; i++)
			xb += fabs((double)p->wq[(size_t)r * p->in + 32 * b + i]) * dx / 2;
	}
	ret[0] = v;
	ret[1] = mag;
	ret[2] = xb;
}

static int reported;

static void check_problem(struct problem *p)
{
	CHECK_INT_EQ(cpu_isa_select("portable"), 0);
	float *py = run(p);
	for (int i = 0; cpu_gemv_variant_name(i); i++) {
		const char *name = cpu_gemv_variant_name(i);
		if (cpu_isa_select(name) < 0 || !cpu_gemv_quant_has_i8())
			continue;
		float *y = i == 0 ? py : run(p);
		double e[3] = {0, 0, 0};
		for (int t = 0; t < p->T; t++) {
			for (int r = 0; r < p->nrows; r++) {
				double ref[3], exact = 0, emag = 0;
				reference(p, p->row0 + r, t, ref);
				for (int k = 0; k < p->in; k++) {
					double wx = (double)p->wq[(size_t)(p->row0 + r) * p->in + k] *
						    p->x[(size_t)t * p->ldx + k];
					exact += wx;
					emag += fabs(wx);
				}
				double y0 = p->acc ? p->y0[(size_t)t * p->ldy + r] : 0,
				       v = y[(size_t)t * p->ldy + r];
				double tol = 3 * (p->in + 64) * 0x1p-24 * (ref[1] + fabs(y0)) + 1e-30;
				double etol = tol + ref[2] + (p->in + 64) * 0x1p-24 * emag;
				double d[3] = {fabs(v - (ref[0] + y0)) / tol, fabs(v - (exact + y0)) / etol,
					       fabs(v - py[(size_t)t * p->ldy + r]) / (2 * tol)};
				for (int k = 0; k < 3; k++)
					if (!(d[k] <= e[k]))
						e[k] = d[k];
			}
			for (size_t r = (size_t)p->nrows; r < p->ldy; r++) {
				float v = y[(size_t)t * p->ldy + r], v0 = p->y0[(size_t)t * p->ldy + r];
				if (!(isnan(v) && isnan(v0)) && v != v0)
					e[0] = NAN;
			}
		}
		bool ok = e[0] <= 1 && e[1] <= 1 && e[2] <= 1;
		if (!ok && reported++ < 10)
			fprintf(stderr,
				"gemv i8 %s %s%s rows %d in %d row0 %d nrows %d T %d acc %d: errors %.3g "
				"(codes' product), %.3g (dequantized weights), %.3g (portable) of the "
				"tolerances\n",
				name, quant_format_desc(p->fmt)->name, p->qt.tiled ? " tiled" : "", p->rows,
				p->in, p->row0, p->nrows, p->T, p->acc, e[0], e[1], e[2]);
		CHECK(ok);
		if (y != py)
			free(y);
	}
	free(py);
}

static void test_shapes(void)
{
	static const int shapes[][2] = {{1, 1},	   {3, 7},	{9, 31},    {8, 32},  {17, 33}, {5, 47},
					{16, 64},  {13, 95},	{40, 100},  {7, 129}, {9, 160}, {64, 257},
					{300, 96}, {100, 1000}, {37, 1100}, {48, 20}, {35, 130}};
	int n = 0;
	/* q8, q4, then both tiled (whole tiles, tiles in part at both ends of a range, rows past
	 * the last tile) */
	for (int f = 0; f < 4; f++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
			for (int T = 1; T <= 6; T++, n++) {
				struct problem p = {.fmt = f % 2 ? QUANT_Q4 : QUANT_Q8,
						    .rows = shapes[s][0],
						    .in = shapes[s][1],
						    .T = T,
						    .acc = (n & 1) != 0,
						    .tiled = f >= 2};
				p.row0 = (n & 2) && p.rows > 2 ? (p.rows > 16 ? 1 + (n & 4) : 1) : 0;
				int tail = (n & 2) && p.rows > 3 ? 1 + (p.rows > 24 ? (n & 8) : 0) : 0;
				p.nrows = p.rows - p.row0 - tail;
				problem_init(&p);
				check_problem(&p);
				problem_free(&p);
			}
}

/* a token's results are the same bits alone as among 7; a NaN activation makes its token's
 * results NaN and leaves the others' alone */
static void test_tokens(void)
{
	for (int f = 0; f < 4; f++) {
		struct problem p = {.fmt = f % 2 ? QUANT_Q4 : QUANT_Q8,
				    .rows = 300,
				    .in = 333,
				    .nrows = 300,
				    .T = 7,
				    .tiled = f >= 2};
		problem_init(&p);
		for (int i = 0; cpu_gemv_variant_name(i); i++) {
			if (cpu_isa_select(cpu_gemv_variant_name(i)) < 0)
				continue;
			float *all = run(&p), *one = malloc(p.ldy * sizeof(float));
			REQUIRE(one);
			bool same = true;
			for (int t = 0; t < p.T; t++) {
				CHECK_INT_EQ(cpu_gemv_quant_rows_i8(&p.qt, 0, p.nrows, p.x + (size_t)t * p.ldx,
								    p.ldx, 1, one, p.ldy, false),
					     0);
				same &= memcmp(one, all + (size_t)t * p.ldy,
					       (size_t)p.nrows * sizeof(float)) == 0;
			}
			CHECK(same);
			/* without integer kernels: the exact kernels' results, bit for bit */
			if (!cpu_gemv_quant_has_i8()) {
				float *ex = malloc((size_t)p.T * p.ldy * sizeof(float));
				REQUIRE(ex);
				CHECK_INT_EQ(cpu_gemv_quant_rows(&p.qt, 0, p.nrows, p.x, p.ldx, p.T, ex,
								 p.ldy, false),
					     0);
				bool eq = true;
				for (int t = 0; t < p.T; t++)
					eq &= memcmp(ex + (size_t)t * p.ldy, all + (size_t)t * p.ldy,
						     (size_t)p.nrows * sizeof(float)) == 0;
				CHECK(eq);
				free(ex);
			}
			float keep = p.x[2 * p.ldx + 40];
			p.x[2 * p.ldx + 40] = NAN;
			float *yn = run(&p);
			bool nan_ok = true;
			for (int t = 0; t < p.T; t++)
				for (int r = 0; r < p.nrows; r++) {
					float v = yn[(size_t)t * p.ldy + r];
					nan_ok &= t == 2 ? isnan(v) : v == all[(size_t)t * p.ldy + r];
				}
			CHECK(nan_ok);
			p.x[2 * p.ldx + 40] = keep;
			free(yn);
			free(one);
			free(all);
		}
		problem_free(&p);
	}
	struct problem p = {.fmt = QUANT_Q8, .rows = 4, .in = 8, .nrows = 4, .T = 1};
	problem_init(&p);
	float y[8];
	CHECK_INT_EQ(cpu_gemv_quant_rows_i8(&p.qt, 2, 3, p.x, p.ldx, 1, y, 8, false), -EINVAL);
	problem_free(&p);
}

/* each variant's tile_records (AVX2, AVX-512F, VNNI): a tile's 16 records, the bytes of
 * quant_tile_row_record() */
static void test_tile_records(void)
{
	static const int ins[] = {1, 31, 33, 64, 100, 1000, 1056};
	for (int f = QUANT_Q8; f <= QUANT_Q4; f++)
		for (size_t k = 0; k < sizeof(ins) / sizeof(ins[0]); k++) {
			struct problem p = {.fmt = (enum quant_format)f,
					    .rows = 16,
					    .in = ins[k],
					    .nrows = 16,
					    .T = 1,
					    .tiled = true};
			problem_init(&p);
			const size_t rb = p.qt.row_bytes;
			char *want = malloc(16 * rb), *got = malloc(16 * rb + 64);
			REQUIRE(want && got);
			for (int i = 0; i < 16; i++)
				quant_tile_row_record(p.fmt, p.in, p.data, i, want + (size_t)i * rb);
			for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
				if (!variants[v]->tile_records || !cpu_isa_supported(variant_isa[v]))
					continue;
				memset(got, 0x5a, 16 * rb + 64);
				variants[v]->tile_records(p.fmt, p.in, p.data, got, rb);
				bool same = memcmp(got, want, 16 * rb) == 0;
				for (size_t e = 16 * rb; e < 16 * rb + 64; e++)
					same &= got[e] == 0x5a;
				if (!same)
					fprintf(stderr, "tile_records %s %s in %d: bytes differ\n",
						variants[v]->name, quant_format_desc(p.fmt)->name, p.in);
				CHECK(same);
			}
			free(want);
			free(got);
			problem_free(&p);
		}
}

/* cpu_quant_rows_to_bf16: every variant the same bits as quant_row_to_f32() rounded to bf16 */
static void test_rows_to_bf16(void)
{
	static const int ins[] = {1, 31, 33, 100, 1000};
	for (int f = 0; f < QUANT_FORMAT_COUNT + 2; f++)
		for (size_t k = 0; k < sizeof(ins) / sizeof(ins[0]); k++) {
			/* and q8 and q4 tiled: rows 2..5 of a tile */
			const bool tiled = f >= QUANT_FORMAT_COUNT;
			struct problem p = {.fmt = !tiled		   ? (enum quant_format)f :
						   f == QUANT_FORMAT_COUNT ? QUANT_Q4 :
									     QUANT_Q8,
					    .rows = tiled ? 20 : 7,
					    .in = ins[k],
					    .T = 1,
					    .tiled = tiled};
			p.nrows = p.rows;
			problem_init(&p);
			uint16_t *want = malloc((size_t)p.rows * p.in * sizeof(uint16_t));
			uint16_t *got = malloc((size_t)(p.rows + 1) * p.in * sizeof(uint16_t));
			REQUIRE(want && got);
			for (size_t i = 0; i < (size_t)p.rows * p.in; i++)
				want[i] = f32_to_bf16(p.wq[i]);
			for (int i = 0; cpu_gemv_variant_name(i); i++) {
				if (cpu_isa_select(cpu_gemv_variant_name(i)) < 0)
					continue;
				memset(got, 0x77, (size_t)(p.rows + 1) * p.in * sizeof(uint16_t));
				bool same = true;
				if (tiled) {
					/* a whole tile (its records gathered at once) and the rows past it */
					CHECK_INT_EQ(cpu_quant_rows_to_bf16(&p.qt, 0, p.rows, got), 0);
					same &= memcmp(got, want, (size_t)p.rows * p.in * sizeof(uint16_t)) ==
						0;
					memset(got, 0x77, (size_t)(p.rows + 1) * p.in * sizeof(uint16_t));
				}
				CHECK_INT_EQ(cpu_quant_rows_to_bf16(&p.qt, 2, 4, got), 0);
				same &= memcmp(got, want + 2 * (size_t)p.in,
					       4 * (size_t)p.in * sizeof(uint16_t)) == 0;
				/* nothing written past the rows asked */
				for (size_t e = 4 * (size_t)p.in; e < 5 * (size_t)p.in; e++)
					same &= got[e] == 0x7777;
				if (!same)
					fprintf(stderr, "rows_to_bf16 %s %s in %d: bits differ\n",
						cpu_gemv_variant_name(i), quant_format_desc(p.fmt)->name,
						p.in);
				CHECK(same);
			}
			CHECK_INT_EQ(cpu_quant_rows_to_bf16(&p.qt, p.rows - 2, 3, got), -EINVAL);
			free(want);
			free(got);
			problem_free(&p);
		}
}

/* ---- fp8 in bf16 precision (cpu_gemv_fp8_vbmi.c on AVX512-BF16 with VBMI) ----------------
 *
 * cpu_gemv_quant_rows_i8 on fp8 weights: where the variant in use has fp8_bf16 and the CPU runs
 * it, the activations rounded to bf16 (nearest even) times the codes' exact values, summed in
 * fp32, each row's sum times its scale. Against the double sum of e4m3(c) bf16(x) times s: each
 * product is exact in fp32 (4 significant bits times 8), the fp32 sums chain at most in + 64
 * roundings of terms bounded by mag = s sum |e4m3(c) bf16(x)| (+ |y0|), the scale and y0 one
 * each: within 3 (in + 64) u mag. Against the exact product of the dequantized weights and the
 * fp32 activations (every variant, whichever kernel it runs) add sum |w| |x - bf16(x)| <= 2^-8
 * sum |w x| and the dequantized weights' own rounding (u per weight). */

static float bf16_round(float v)
{
	return bf16_to_f32(f32_to_bf16(v));
}

/* whether the variant in use runs fp8_bf16, from cpuid here rather than from
 * cpu_gemv_fp8_bf16_ok() (checked against it in test_fp8_tokens), so a gate that wrongly said no
 * fails */
static bool fp8_bf16_in_use(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	return strcmp(cpu_gemv_name(), "avx512bf16") == 0 && cpu_isa_supported(CPU_ISA_AVX512BF16) &&
	       __builtin_cpu_supports("avx512vbmi");
#else
	return false;
#endif
}

static void check_fp8(struct problem *p, const char *name, const float *y, bool bf)
{
	double e[2] = {0, 0};
	for (int t = 0; t < p->T; t++) {
		const float *x = p->x + (size_t)t * p->ldx;
		for (int r = 0; r < p->nrows; r++) {
			const char *row = (const char *)p->data + (size_t)(p->row0 + r) * p->qt.row_bytes;
			const uint8_t *c = quant_fp8_codes(row);
			const double s = *quant_fp8_scale(row, p->in);
			const float *wq = p->wq + (size_t)(p->row0 + r) * p->in;
			double v = 0, mag = 0, exact = 0, emag = 0;
			for (int k = 0; k < p->in; k++) {
				double cx = (double)quant_e4m3_to_f32(c[k]) * bf16_round(x[k]);
				v += cx;
				mag += fabs(cx);
				exact += (double)wq[k] * x[k];
				emag += fabs((double)wq[k] * x[k]);
			}
			const double y0 = p->acc ? p->y0[(size_t)t * p->ldy + r] : 0,
				     got = y[(size_t)t * p->ldy + r];
			const double tol = 3 * (p->in + 64) * 0x1p-24 * (fabs(s) * mag + fabs(y0)) + 1e-30;
			const double etol = tol + (0x1p-8 + (p->in + 64) * 0x1p-24) * emag;
			const double d[2] = {bf ? fabs(got - (v * s + y0)) / tol : 0,
					     fabs(got - (exact + y0)) / etol};
			for (int k = 0; k < 2; k++)
				if (!(d[k] <= e[k]))
					e[k] = d[k];
		}
		for (size_t r = (size_t)p->nrows; r < p->ldy; r++) {
			float g = y[(size_t)t * p->ldy + r], g0 = p->y0[(size_t)t * p->ldy + r];
			if (!(isnan(g) && isnan(g0)) && g != g0)
				e[0] = NAN;
		}
	}
	bool ok = e[0] <= 1 && e[1] <= 1;
	if (!ok && reported++ < 10)
		fprintf(stderr,
			"gemv fp8 %s%s rows %d in %d row0 %d nrows %d T %d acc %d: errors %.3g (bf16 "
			"activations' product), %.3g (exact product) of the tolerances\n",
			name, bf ? " (bf16 activations)" : "", p->rows, p->in, p->row0, p->nrows, p->T,
			p->acc, e[0], e[1]);
	CHECK(ok);
}

static void test_fp8_shapes(void)
{
	static const int shapes[][2] = {{1, 1},	  {3, 7},   {9, 31},   {8, 32},	    {17, 33},
					{5, 47},  {16, 64}, {13, 95},  {40, 100},   {7, 128},
					{7, 129}, {9, 160}, {64, 257}, {100, 1000}, {37, 1100}};
	int n = 0;
	for (size_t sh = 0; sh < sizeof(shapes) / sizeof(shapes[0]); sh++)
		for (int T = 1; T <= 6; T++, n++) {
			struct problem p = {.fmt = QUANT_FP8,
					    .rows = shapes[sh][0],
					    .in = shapes[sh][1],
					    .T = T,
					    .acc = (n & 1) != 0};
			p.row0 = (n & 2) && p.rows > 2 ? 1 : 0;
			p.nrows = p.rows - p.row0 - ((n & 2) && p.rows > 3 ? 1 : 0);
			problem_init(&p);
			for (int i = 0; cpu_gemv_variant_name(i); i++) {
				if (cpu_isa_select(cpu_gemv_variant_name(i)) < 0)
					continue;
				float *y = run(&p);
				check_fp8(&p, cpu_gemv_variant_name(i), y, fp8_bf16_in_use());
				free(y);
			}
			problem_free(&p);
		}
}

/* fp8_round_x's bytes: each 64-column group's bf16 (nearest even) in the kernel's order, zeros
 * past `in` to the group's end, nothing past the rows; then a token's results the same bits
 * alone as among 7 (and the kernel called directly, so the product above ran on it), a NaN
 * activation NaN for its token only */
static void test_fp8_tokens(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
	const struct cpu_gemv_variant *v = &cpu_gemv_avx512bf16;
	const bool has = cpu_isa_supported(CPU_ISA_AVX512BF16) && __builtin_cpu_supports("avx512vbmi");
	CHECK(cpu_gemv_fp8_bf16_ok(v) == has);
	CHECK(v->fp8_bf16 && v->fp8_round_x);
	if (!has) {
		printf("fp8 with bf16 activations: skipped (this CPU lacks AVX512-BF16 or VBMI)\n");
		return;
	}
	static const int ins[] = {1, 63, 64, 65, 200, 333};
	for (size_t k = 0; k < sizeof(ins) / sizeof(ins[0]); k++) {
		const int in = ins[k], T = 3;
		const size_t ldx = (size_t)in + 5, ldxb = cpu_gemv_fp8_ldxb(in);
		CHECK(ldxb % 64 == 0 && ldxb >= (size_t)in && ldxb < (size_t)in + 64);
		float *x = malloc((size_t)T * ldx * sizeof(float));
		uint16_t *xb = malloc(((size_t)T * ldxb + 64) * sizeof(uint16_t));
		REQUIRE(x && xb);
		for (size_t i = 0; i < (size_t)T * ldx; i++)
			x[i] = frand() * 4.0f;
		memset(xb, 0x5a, ((size_t)T * ldxb + 64) * sizeof(uint16_t));
		v->fp8_round_x(x, ldx, T, in, xb, ldxb);
		bool same = true;
		for (int t = 0; t < T; t++)
			for (size_t i = 0; i < ldxb; i++) {
				const size_t g = i / 64 * 64, j = i % 64;
				const size_t col = g + 16 * (j % 32 / 8) + j % 8 + (j >= 32 ? 8 : 0);
				const uint16_t want =
					col < (size_t)in ? f32_to_bf16(x[(size_t)t * ldx + col]) : 0;
				same &= xb[(size_t)t * ldxb + i] == want;
			}
		for (size_t i = (size_t)T * ldxb; i < (size_t)T * ldxb + 64; i++)
			same &= xb[i] == 0x5a5a;
		if (!same)
			fprintf(stderr, "fp8_round_x in %d: bits differ\n", in);
		CHECK(same);
		free(x);
		free(xb);
	}
	CHECK_INT_EQ(cpu_isa_select("avx512bf16"), 0);
	/* every code's value at every column, exactly: row c < 256 holds code(c + k) at column k
	 * (scale 1; code(i) = i & 0xff, or 0 where that is a NaN code: a NaN anywhere in a row
	 * makes the row NaN), token t is 1 at column shift + 32 t, so y = e4m3(code(c + column)):
	 * over the shifts every column of both 64-column steps, every code at each; rows 256 and
	 * 257 hold the NaN codes 0x7f and 0xff in every column, and give NaN */
	{
		enum { IN = 128, TT = 4, ROWS = 258 };
		size_t rb;
		REQUIRE(quant_row_bytes(QUANT_FP8, IN, &rb) == 0);
		char *w = aligned_alloc(64, ROWS * rb);
		float *x = calloc(TT * IN, sizeof(float)), *y = malloc(TT * ROWS * sizeof(float));
		REQUIRE(w && x && y);
		memset(w, 0, ROWS * rb);
		for (int c = 0; c < ROWS; c++) {
			char *row = w + (size_t)c * rb;
			for (int k = 0; k < IN; k++) {
				const uint8_t code = (uint8_t)((c + k) & 0xff);
				row[k] = (char)(c >= 256	      ? (c == 256 ? 0x7f : 0xff) :
						(code & 0x7f) == 0x7f ? 0 :
									code);
			}
			const float one = 1.0f;
			memcpy((char *)quant_fp8_scale(row, IN), &one, sizeof(one));
		}
		struct quant_tensor q = {.format = QUANT_FP8,
					 .rows = ROWS,
					 .cols = IN,
					 .row_bytes = rb,
					 .data = w};
		bool exact = true;
		for (int shift = 0; shift < 32; shift++) {
			memset(x, 0, TT * IN * sizeof(float));
			for (int t = 0; t < TT; t++)
				x[t * IN + shift + 32 * t] = 1.0f;
			CHECK_INT_EQ(cpu_gemv_quant_rows_i8(&q, 0, ROWS, x, IN, TT, y, ROWS, false), 0);
			for (int t = 0; t < TT; t++)
				for (int c = 0; c < ROWS; c++) {
					uint8_t code = (uint8_t)((c + shift + 32 * t) & 0xff);
					if ((code & 0x7f) == 0x7f)
						code = 0;
					const float got = y[t * ROWS + c];
					exact &= c >= 256 ? isnan(got) : got == quant_e4m3_to_f32(code);
				}
		}
		if (!exact)
			fprintf(stderr, "fp8 with bf16 activations: a code's value is not exact\n");
		CHECK(exact);
		free(w);
		free(x);
		free(y);
	}
	struct problem p = {.fmt = QUANT_FP8, .rows = 300, .in = 333, .nrows = 300, .T = 7};
	problem_init(&p);
	float *all = run(&p), *one = malloc(p.ldy * sizeof(float)), *direct = malloc(p.ldy * sizeof(float));
	uint16_t *xb = aligned_alloc(64, cpu_gemv_fp8_ldxb(p.in) * sizeof(uint16_t));
	REQUIRE(one && direct && xb);
	bool same = true;
	for (int t = 0; t < p.T; t++) {
		CHECK_INT_EQ(cpu_gemv_quant_rows_i8(&p.qt, 0, p.nrows, p.x + (size_t)t * p.ldx, p.ldx, 1, one,
						    p.ldy, false),
			     0);
		same &= memcmp(one, all + (size_t)t * p.ldy, (size_t)p.nrows * sizeof(float)) == 0;
		v->fp8_round_x(p.x + (size_t)t * p.ldx, p.ldx, 1, p.in, xb, cpu_gemv_fp8_ldxb(p.in));
		struct cpu_gemv_args a = {.w = p.qt.data,
					  .ldw = p.qt.row_bytes,
					  .in = p.in,
					  .T = 1,
					  .x = p.x + (size_t)t * p.ldx,
					  .ldx = p.ldx,
					  .y = direct,
					  .ldy = p.ldy,
					  .xb = xb,
					  .ldxb = cpu_gemv_fp8_ldxb(p.in)};
		v->fp8_bf16(&a, 0, p.nrows);
		same &= memcmp(direct, one, (size_t)p.nrows * sizeof(float)) == 0;
	}
	CHECK(same);
	p.x[2 * p.ldx + 40] = NAN;
	float *yn = run(&p);
	bool nan_ok = true;
	for (int t = 0; t < p.T; t++)
		for (int r = 0; r < p.nrows; r++) {
			float g = yn[(size_t)t * p.ldy + r];
			nan_ok &= t == 2 ? isnan(g) : g == all[(size_t)t * p.ldy + r];
		}
	CHECK(nan_ok);
	free(yn);
	free(xb);
	free(direct);
	free(one);
	free(all);
	problem_free(&p);
	CHECK_INT_EQ(cpu_isa_select(NULL), 0);
#endif
}

int main(void)
{
	for (int i = 0; cpu_gemv_variant_name(i); i++) {
		const char *name = cpu_gemv_variant_name(i);
		int r = cpu_isa_select(name);
		printf("gemv variant %s: %s%s\n", name,
		       r < 0		       ? "skipped (this CPU lacks it)" :
		       cpu_gemv_quant_has_i8() ? "integer kernels tested" :
						 "no integer kernels: checked to give the exact ones'",
		       r < 0 ? "" :
		       cpu_gemv_quant_tiles(QUANT_Q8) && cpu_gemv_quant_tiles(QUANT_Q4) ?
			       ", on records and on q8/q4 tiles" :
			       ", on records (tiles gathered to records)");
	}
#if defined(__x86_64__) && defined(__GNUC__)
	/* every x86-64 variant runs q8 and q4 tiles on its own tile kernels (so the CPU backend
	 * tiles the matrices at load there), with its own tile_records and activations'
	 * quantization (test_quantize_x compares its bytes) */
	for (size_t v = 0; v < sizeof(variants) / sizeof(variants[0]); v++) {
		bool has = variants[v]->q8_tile_i8 && variants[v]->q4_tile_i8 && variants[v]->tile_records &&
			   variants[v]->quant_x;
		if (!has)
			fprintf(stderr, "variant %s lacks tile kernels or quant_x\n", variants[v]->name);
		CHECK(has);
		if (cpu_isa_select(variants[v]->name) == 0)
			CHECK(cpu_gemv_quant_tiles(QUANT_Q8) && cpu_gemv_quant_tiles(QUANT_Q4));
	}
	CHECK_INT_EQ(cpu_isa_select(NULL), 0);
#endif
	test_quantize_x();
	test_tile_records();
	test_rows_to_bf16();
	for (int threads = 1; threads <= 3; threads++) {
		REQUIRE(cpu_set_threads(threads) == 0);
		test_shapes();
		test_tokens();
		test_fp8_shapes();
		test_fp8_tokens();
	}
	return test_exit();
}
