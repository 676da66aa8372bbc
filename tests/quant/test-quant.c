/* The quantized weight formats (engine/quant/quant.h, docs/quantization.md): sizes and their
 * limits, fp16 rounding, quantize -> dequantize round trips within quant_error_bound() on
 * random rows (lengths that are not whole blocks, all-zero blocks, one huge value, tiny values
 * whose scales are fp16 subnormals, bf16 rows), NaN/Inf/out-of-range input refused with the row
 * untouched, and the accuracy against GGML's Q8_0 and Q4_0 (tools/bench/ggml_ref.c, from ggml's
 * reference quantizers quantize_row_q8_0_ref, quantize_row_q4_0_ref): RMS error over many
 * random rows, ours no larger (a statistical check with a margin for rounding ties; the
 * quantizers are built so it holds block by block, see docs/quantization.md).
 *
 * The data are sums of uniform variates (no libm transcendental, so every CPU draws the same). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ggml_ref.h"
#include "quant.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 12345;

static float frand(void) /* [-1, 1) */
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

static float grand(void) /* roughly normal, sd ~0.58 */
{
	return (frand() + frand() + frand() + frand()) * 0.5f;
}

static uint16_t to_bf16(float f) /* round to nearest even */
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

static float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static void test_sizes(void)
{
	size_t b = 0;
	enum quant_format f;
	CHECK_INT_EQ(quant_format_parse("q8", &f), 0);
	CHECK_INT_EQ(f, QUANT_Q8);
	CHECK_INT_EQ(quant_format_parse("q4", &f), 0);
	CHECK_INT_EQ(f, QUANT_Q4);
	CHECK_INT_EQ(quant_format_parse("q5", &f), -EINVAL);
	CHECK_STR_EQ(quant_format_desc(QUANT_Q8)->name, "q8");
	CHECK(quant_format_desc((enum quant_format)7) == NULL);
	/* 12B's up projection row: 5120 columns */
	CHECK_INT_EQ(quant_row_bytes(QUANT_Q8, 5120, &b), 0);
	CHECK_INT_EQ(b, 5120 + 320); /* 8.5 bits per weight */
	CHECK_INT_EQ(quant_row_bytes(QUANT_Q4, 5120, &b), 0);
	CHECK_INT_EQ(b, 2560 + 320); /* 4.5 bits per weight */
	/* the bench model's hidden size: 4.5 bits with nothing padded */
	CHECK_INT_EQ(quant_row_bytes(QUANT_Q4, 1024, &b), 0);
	CHECK_INT_EQ(b, 512 + 64);
	CHECK(quant_format_desc(QUANT_Q4)->bits_per_weight == 4.5);
	/* one column: a padded block of codes and of scales, each 64 bytes */
	CHECK_INT_EQ(quant_row_bytes(QUANT_Q8, 1, &b), 0);
	CHECK_INT_EQ(b, 128);
	CHECK_INT_EQ(quant_row_bytes(QUANT_Q4, 33, &b), 0);
	CHECK_INT_EQ(b, 128);
	CHECK_INT_EQ(quant_row_bytes(QUANT_Q8, 0, &b), -EINVAL);
	CHECK_INT_EQ(quant_row_bytes((enum quant_format)9, 32, &b), -EINVAL);
	CHECK_INT_EQ(quant_row_bytes(QUANT_Q8, QUANT_MAX_COLS + 1, &b), -E2BIG);
	CHECK_INT_EQ(quant_tensor_bytes(QUANT_Q8, 20480, 5120, &b), 0);
	CHECK_INT_EQ(b, (size_t)20480 * 5440);
	CHECK_INT_EQ(quant_tensor_bytes(QUANT_Q8, 0, 5120, &b), -EINVAL);
	CHECK_INT_EQ(quant_tensor_bytes(QUANT_Q8, QUANT_MAX_ROWS + 1, 32, &b), -E2BIG);
	/* past the byte limit (and past size_t on the way) */
	CHECK_INT_EQ(quant_tensor_bytes(QUANT_Q8, QUANT_MAX_ROWS, QUANT_MAX_COLS, &b), -E2BIG);
}

static void test_f16(void)
{
	static const struct {
		float f;
		uint16_t h;
	} cases[] = {
		{0.0f, 0x0000},
		{-0.0f, 0x8000},
		{1.0f, 0x3c00},
		{-2.0f, 0xc000},
		{65504.0f, 0x7bff},
		{65519.0f, 0x7bff},
		{65520.0f, 0x7c00},
		{1e9f, 0x7c00},
		{0x1p-14f, 0x0400},
		{0x1p-24f, 0x0001},
		{0x1p-25f, 0x0000},
		{0x1.8p-25f, 0x0001},
		{0x3p-25f, 0x0002},
		{0x5p-25f, 0x0002}, /* ties to even in the subnormals */
		{1.0f + 0x1p-11f, 0x3c00},
		{1.0f + 0x3p-11f, 0x3c02}, /* ties to even */
		{1.0f + 0x1.1p-11f, 0x3c01},
		{0x1.ffep-15f, 0x0400}, /* a carry into the exponent */
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint16_t h = quant_f32_to_f16(cases[i].f);
		if (h != cases[i].h)
			fprintf(stderr, "f16(%a) = %#x, want %#x\n", (double)cases[i].f, h, cases[i].h);
		CHECK_INT_EQ(h, cases[i].h);
	}
	/* every finite fp16 widens and rounds back to itself */
	bool ok = true;
	for (uint32_t h = 0; h < 0x10000; h++)
		if ((h & 0x7c00) != 0x7c00)
			ok &= quant_f32_to_f16(quant_f16_to_f32((uint16_t)h)) == h;
	CHECK(ok);
}

/* Quantizes w (cols values) in format f, from fp32 or through bf16, and checks every block's
 * elements against quant_error_bound(); returns the worst error / bound. */
static double round_trip(enum quant_format f, const float *w, int cols, bool bf16)
{
	size_t rb;
	REQUIRE(quant_row_bytes(f, cols, &rb) == 0);
	void *row = aligned_alloc(64, rb);
	float *src = malloc((size_t)cols * sizeof(float)), *out = malloc((size_t)cols * sizeof(float));
	uint16_t *wb = malloc((size_t)cols * sizeof(uint16_t));
	REQUIRE(row && src && out && wb);
	memset(row, 0xab, rb);
	for (int i = 0; i < cols; i++) {
		wb[i] = to_bf16(w[i]);
		src[i] = bf16 ? from_bf16(wb[i]) : w[i];
	}
	CHECK_INT_EQ(bf16 ? quant_row_from_bf16(f, wb, cols, row) : quant_row_from_f32(f, src, cols, row), 0);
	/* padding is zero: the record is deterministic, and the kernels may read it */
	const unsigned char *bytes = row;
	size_t used_codes = (size_t)cols * (f == QUANT_Q8 ? 8 : 4) / 8;
	bool pad_zero = true;
	size_t codes_end = quant_round_align((size_t)quant_blocks(cols) * (f == QUANT_Q8 ? 32 : 16));
	for (size_t i = (used_codes + 15) & ~(size_t)15; i < codes_end && f == QUANT_Q8; i++)
		pad_zero &= bytes[i] == 0;
	if (f == QUANT_Q4) {
		/* the last block's nibbles past the last column, the blocks past it, and the dz
		 * past the last block */
		const int64_t nb = quant_blocks(cols);
		for (int k = cols; k < nb * QUANT_BLOCK; k++) {
			const int64_t b = k / QUANT_BLOCK, j = k % QUANT_BLOCK;
			pad_zero &= ((bytes[b * 16 + (j & 15)] >> (j < 16 ? 0 : 4)) & 15) == 0;
		}
		for (size_t i = (size_t)nb * 16; i < codes_end; i++)
			pad_zero &= bytes[i] == 0;
		for (size_t i = codes_end + (size_t)nb * 2; i < rb; i++)
			pad_zero &= bytes[i] == 0;
	}
	CHECK(pad_zero);
	quant_row_to_f32(f, row, cols, out);
	double worst = 0;
	for (int b0 = 0; b0 < cols; b0 += QUANT_BLOCK) {
		int n = cols - b0 < QUANT_BLOCK ? cols - b0 : QUANT_BLOCK;
		float lo = src[b0], hi = src[b0];
		for (int i = 0; i < n; i++) {
			lo = fminf(lo, src[b0 + i]);
			hi = fmaxf(hi, src[b0 + i]);
		}
		/* fp8's scale is the row's: its bound takes the row's range */
		for (int i = 0; f == QUANT_FP8 && i < cols; i++) {
			lo = fminf(lo, src[i]);
			hi = fmaxf(hi, src[i]);
		}
		double bound = quant_error_bound(f, lo, hi);
		for (int i = 0; i < n; i++) {
			double e = fabs((double)out[b0 + i] - src[b0 + i]) / bound;
			if (!(e <= worst))
				worst = e;
		}
	}
	free(row);
	free(src);
	free(out);
	free(wb);
	return worst;
}

/* The rounding of the codes: to nearest, ties away from zero (roundf), clamped. A block whose
 * largest |w| is 127 has d = 1 exactly, so w = k + 1/2 is a tie: q8 codes away from zero, where
 * rounding to even (rint) would give k or k + 1 by parity. */
static void test_ties(void)
{
	float w[32];
	for (int i = 0; i < 32; i++)
		w[i] = (i % 2 ? -1.0f : 1.0f) * ((float)(i * 4 % 126) + 0.5f);
	w[31] = -127.0f;
	size_t rb = 0;
	REQUIRE(quant_row_bytes(QUANT_Q8, 32, &rb) == 0);
	char *row = aligned_alloc(64, rb);
	REQUIRE(row);
	REQUIRE(quant_row_from_f32(QUANT_Q8, w, 32, row) == 0);
	CHECK(quant_f16_to_f32(quant_q8_scales(row, 32)[0]) == 1.0f);
	bool away = true;
	for (int i = 0; i < 31; i++) {
		int want = (i % 2 ? -1 : 1) * (i * 4 % 126 + 1);
		if (quant_q8_codes(row)[i] != want) {
			fprintf(stderr, "q8 tie %g: code %d, want %d\n", (double)w[i], quant_q8_codes(row)[i],
				want);
			away = false;
		}
	}
	CHECK(away && quant_q8_codes(row)[31] == -127);
	free(row);
}

static void test_round_trips(void)
{
	static const int lens[] = {1, 5, 31, 32, 33, 63, 100, 257, 1000, 4099};
	float *w = malloc(4099 * sizeof(float));
	REQUIRE(w);
	for (int f = 0; f < QUANT_FORMAT_COUNT; f++) {
		double worst = 0;
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
			for (int kind = 0; kind < 6; kind++)
				for (int bf16 = 0; bf16 < 2; bf16++) {
					int n = lens[l];
					for (int i = 0; i < n; i++) {
						float v = grand() * 0.05f;
						if (kind == 1)
							v = frand(); /* uniform: every code used */
						if (kind == 2)
							v = frand() * 1e-6f; /* scales are fp16 subnormals */
						if (kind == 3 && (i / 32) % 2 == 0)
							v = 0; /* all-zero blocks */
						if (kind == 4 && i % 37 == 3)
							v = 1000.0f; /* one huge value in some blocks */
						if (kind == 5)
							v = 0.5f + frand() * 0.01f; /* a lopsided block */
						w[i] = v;
					}
					double e = round_trip((enum quant_format)f, w, n, bf16);
					if (!(e <= 1.0))
						fprintf(stderr, "%s len %d kind %d bf16 %d: error %.3g of the bound\n",
							quant_format_desc((enum quant_format)f)->name, n,
							kind, bf16, e);
					CHECK(e <= 1.0);
					if (e > worst)
						worst = e;
				}
		printf("%s: worst element error %.3f of quant_error_bound()\n",
		       quant_format_desc((enum quant_format)f)->name, worst);
	}
	/* all-zero blocks come back exactly zero */
	for (int f = 0; f < QUANT_FORMAT_COUNT; f++) {
		float z[40] = {0}, out[40];
		unsigned char row[256];
		CHECK_INT_EQ(quant_row_from_f32((enum quant_format)f, z, 40, row), 0);
		quant_row_to_f32((enum quant_format)f, row, 40, out);
		bool zero = true;
		for (int i = 0; i < 40; i++)
			zero &= out[i] == 0;
		CHECK(zero);
	}
	free(w);
}

static void test_refusals(void)
{
	float w[70];
	uint16_t wb[70];
	unsigned char row[512], before[512];
	for (int f = 0; f < QUANT_FORMAT_COUNT; f++)
		for (int bad = 0; bad < 4; bad++) {
			for (int i = 0; i < 70; i++)
				w[i] = frand();
			float v = bad == 0 ? NAN : bad == 1 ? INFINITY : bad == 2 ? -INFINITY : 70000.0f;
			w[67] = v; /* in the last, partial block: nothing is written first */
			for (int i = 0; i < 70; i++)
				wb[i] = to_bf16(w[i]);
			memset(row, 0x5a, sizeof(row));
			memcpy(before, row, sizeof(row));
			int want = bad == 3 ? -ERANGE : -EINVAL;
			CHECK_INT_EQ(quant_row_from_f32((enum quant_format)f, w, 70, row), want);
			CHECK_INT_EQ(quant_row_from_bf16((enum quant_format)f, wb, 70, row), want);
			CHECK(memcmp(row, before, sizeof(row)) == 0);
		}
	CHECK_INT_EQ(quant_row_from_f32(QUANT_Q8, w, 0, row), -EINVAL);
}

/* ---- GGML's Q8_0 and Q4_0 (tools/bench/ggml_ref.c, from ggml-quants.c's reference quantizers) */

/* GGML's dequantized block (dequantize_row_q8_0 / _q4_0) */
static void ggml_q8_0(const float *x, int n, float *out)
{
	int8_t q[QUANT_BLOCK];
	uint16_t d;
	ggml_ref_q8_0_block(x, n, q, &d);
	for (int i = 0; i < n; i++)
		out[i] = (float)q[i] * quant_f16_to_f32(d);
}

static void ggml_q4_0(const float *x, int n, float *out)
{
	uint8_t q[QUANT_BLOCK];
	uint16_t d;
	ggml_ref_q4_0_block(x, n, q, &d);
	for (int i = 0; i < n; i++)
		out[i] = (float)(q[i] - 8) * quant_f16_to_f32(d);
}

/* ggml_ref_row() writes Q8_0 and Q4_0 as q8 records that dequantize to GGML's values bit for
 * bit (holo-bench quant-error runs models on them), and refuses what the reference quantizers
 * refuse. */
static void test_ggml_records(void)
{
	static const int lens[] = {1, 17, 32, 33, 1000};
	float w[1000], want[1000], got[1000];
	unsigned char row[2048];
	for (int f = 0; f < 2; f++)
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++)
			for (int kind = 0; kind < 3; kind++) {
				int n = lens[l];
				for (int i = 0; i < n; i++)
					w[i] = kind == 0 ? grand() * 0.02f :
					       kind == 1 ? frand() * 1e-6f :
							   (i % 5 == 0 ? -0.3f : 0.01f + frand() * 0.02f);
				for (int b0 = 0; b0 < n; b0 += 32)
					(f == QUANT_Q8 ? ggml_q8_0 : ggml_q4_0)(w + b0,
										n - b0 < 32 ? n - b0 : 32,
										want + b0);
				memset(row, 0x5a, sizeof(row));
				CHECK_INT_EQ(ggml_ref_row((enum quant_format)f, w, n, row), 0);
				quant_row_to_f32(QUANT_Q8, row, n, got);
				bool same = true; /* (GGML's 0 * d is -0 where d < 0: equal values) */
				for (int i = 0; i < n; i++)
					same &= got[i] == want[i];
				if (!same)
					fprintf(stderr, "ggml_ref_row %s len %d kind %d: not GGML's values\n",
						quant_format_desc((enum quant_format)f)->name, n, kind);
				CHECK(same);
			}
	for (int f = 0; f < 2; f++) {
		for (int i = 0; i < 70; i++)
			w[i] = frand();
		w[66] = NAN;
		memset(row, 0x5a, sizeof(row));
		CHECK_INT_EQ(ggml_ref_row((enum quant_format)f, w, 70, row), -EINVAL);
		w[66] = 70000.0f;
		CHECK_INT_EQ(ggml_ref_row((enum quant_format)f, w, 70, row), -ERANGE);
		CHECK(row[0] == 0x5a && row[100] == 0x5a);
		CHECK_INT_EQ(ggml_ref_row((enum quant_format)f, w, 0, row), -EINVAL);
	}
	CHECK_INT_EQ(ggml_ref_row((enum quant_format)7, w, 32, row), -EINVAL);
}

/* RMS errors over `rows` random rows of `cols`: ours (q8, q4) and GGML's (Q8_0, Q4_0). */
static void test_vs_ggml(int dist)
{
	const int rows = 400, cols = 1000; /* not a whole number of blocks */
	size_t rb;
	REQUIRE(quant_row_bytes(QUANT_Q4, cols, &rb) == 0 && rb <= 2048);
	REQUIRE(quant_row_bytes(QUANT_Q8, cols, &rb) == 0 && rb <= 2048);
	float w[1000], out[1000], g[32];
	unsigned char row[2048];
	double se[2] = {0, 0}, ge[2] = {0, 0};
	for (int r = 0; r < rows; r++) {
		for (int i = 0; i < cols; i++)
			w[i] = dist == 0 ? grand() * 0.02f :
			       dist == 1 ? frand() * 0.02f :
					   0.01f + frand() * 0.02f;
		for (int f = 0; f < 2; f++) {
			REQUIRE(quant_row_from_f32((enum quant_format)f, w, cols, row) == 0);
			quant_row_to_f32((enum quant_format)f, row, cols, out);
			for (int i = 0; i < cols; i++)
				se[f] += ((double)out[i] - w[i]) * ((double)out[i] - w[i]);
			for (int b0 = 0; b0 < cols; b0 += 32) {
				int n = cols - b0 < 32 ? cols - b0 : 32;
				(f == QUANT_Q8 ? ggml_q8_0 : ggml_q4_0)(w + b0, n, g);
				for (int i = 0; i < n; i++)
					ge[f] += ((double)g[i] - w[b0 + i]) * ((double)g[i] - w[b0 + i]);
			}
		}
	}
	static const char *const dists[] = {"normal", "uniform", "shifted uniform"};
	for (int f = 0; f < 2; f++) {
		double ours = sqrt(se[f] / (rows * cols)), ggml = sqrt(ge[f] / (rows * cols));
		printf("%s weights: RMS error %s %.4g, GGML %s %.4g (ratio %.3f)\n", dists[dist],
		       f == QUANT_Q8 ? "q8" : "q4", ours, f == QUANT_Q8 ? "Q8_0" : "Q4_0", ggml, ours / ggml);
		/* margin: a rounding tie may land on the other code; never a visible loss */
		CHECK(ours <= ggml * 1.001);
	}
	/* q4 must also be a clear gain where GGML's symmetric grid wastes half its codes */
	if (dist == 2)
		CHECK(sqrt(se[QUANT_Q4] / (rows * cols)) < 0.75 * sqrt(ge[QUANT_Q4] / (rows * cols)));
}

/* q8 and q4 tiles (quant.h): 16 records to a tile and back are the same bytes, the codes of
 * block b of row i at their documented places, rows past the last tile left as they are;
 * quant_tensor_row() gives every row's record, tiled or not */
static void test_tiles(void)
{
	static const int ins[] = {1, 32, 33, 64, 100, 1000, 1024};
	CHECK(quant_tile_supported(QUANT_Q4) && quant_tile_supported(QUANT_Q8) &&
	      !quant_tile_supported(QUANT_FP8));
	for (int fi = 0; fi < 2; fi++)
		for (size_t k = 0; k < sizeof(ins) / sizeof(ins[0]); k++) {
			const enum quant_format f = fi ? QUANT_Q8 : QUANT_Q4;
			const int in = ins[k], rows = 37;
			size_t rb = 0, bytes = 0;
			REQUIRE(quant_row_bytes(f, in, &rb) == 0 &&
				quant_tensor_bytes(f, rows, in, &bytes) == 0);
			CHECK(quant_tile_used_bytes(f, in) <= QUANT_TILE_ROWS * rb);
			float *w = malloc((size_t)rows * in * sizeof(float));
			char *recs = aligned_alloc(64, bytes), *tiled = aligned_alloc(64, bytes);
			char *tmp = malloc(QUANT_TILE_ROWS * rb), *rec = malloc(rb);
			REQUIRE(w && recs && tiled && tmp && rec);
			for (size_t i = 0; i < (size_t)rows * in; i++)
				w[i] = frand() * 0.1f + (float)(i % 5) * 0.01f;
			struct quant_tensor q;
			REQUIRE(quant_tensor_from_f32(f, w, rows, in, in, recs, &q) == 0);
			memcpy(tiled, recs, bytes);
			struct quant_tensor t = q;
			t.data = tiled;
			CHECK_INT_EQ(quant_tensor_tile_range(&t, tiled, 0, rows / QUANT_TILE_ROWS, tmp), 0);
			t.tiled = true;
			CHECK(quant_tiled_rows(&t) == 32 && quant_tiled_rows(&q) == 0);
			/* the tiles are not the records; the rows past them are */
			CHECK(memcmp(tiled, recs, 32 * rb) != 0);
			CHECK(memcmp(tiled + 32 * rb, recs + 32 * rb, 5 * rb) == 0);
			/* q4, block b of row i: code bytes 4v..4v+3 at 576 (b / 2) + 256 (b % 2) + 64 v + 4
			 * i, its dz at 576 (b / 2) + 512 + 32 (b % 2) + 2 i; q8 below */
			bool placed = true;
			const int64_t nb = quant_blocks(in);
			for (int r = 0; r < 32; r++)
				for (int64_t b = 0; b < nb; b++) {
					const char *row = recs + (size_t)r * rb;
					if (f == QUANT_Q8) {
						/* pairs: the d of 2p and of 2p + 1, then the codes of 2p
						 * and of 2p + 1; an odd last block alone (its d, 32 bytes
						 * of zero, its codes) */
						const char *tt = tiled + (size_t)(r / 16) * 16 * rb;
						const size_t co =
							(size_t)(b / 2) * 1088 + 64 + (size_t)(b % 2) * 512;
						const size_t dof =
							(size_t)(b / 2) * 1088 + (size_t)(b % 2) * 32;
						for (int v = 0; v < 8; v++)
							placed &= memcmp(tt + co + 64 * v + 4 * (r % 16),
									 quant_q8_codes(row) + 32 * b + 4 * v,
									 4) == 0;
						placed &= memcmp(tt + dof + 2 * (r % 16),
								 quant_q8_scales(row, in) + b, 2) == 0;
						continue;
					}
					/* pairs: the codes of 2p and of 2p + 1, then the dz of 2p
					 * and of 2p + 1 (an odd last block: the same places) */
					const char *tt = tiled + (size_t)(r / 16) * 16 * rb;
					const size_t co = (size_t)(b / 2) * 576 + (size_t)(b % 2) * 256;
					const size_t dof = (size_t)(b / 2) * 576 + 512 + (size_t)(b % 2) * 32;
					for (int v = 0; v < 4; v++)
						placed &=
							memcmp(tt + co + 64 * v + 4 * (r % 16),
							       quant_q4_codes(row) + 16 * b + 4 * v, 4) == 0;
					placed &= memcmp(tt + dof + 2 * (r % 16), quant_q4_dz(row, in) + b,
							 2) == 0;
				}
			CHECK(placed);
			bool same = true;
			for (int r = 0; r < rows; r++)
				same &= memcmp(quant_tensor_row(&t, r, rec), recs + (size_t)r * rb, rb) == 0;
			CHECK(same);
			CHECK(quant_tensor_row(&t, 33, rec) == tiled + 33 * rb);
			struct quant_tensor f8 = q;
			f8.format = QUANT_FP8;
			CHECK_INT_EQ(quant_tensor_tile_range(&f8, tiled, 0, 1, tmp), -EINVAL);
			free(w);
			free(recs);
			free(tiled);
			free(tmp);
			free(rec);
		}
}

int main(void)
{
	test_sizes();
	test_f16();
	test_ties();
	test_round_trips();
	test_refusals();
	test_ggml_records();
	test_tiles();
	for (int dist = 0; dist < 3; dist++)
		test_vs_ggml(dist);
	return test_exit();
}
