/* The fp8 weight format (quant.h's QUANT_FP8, docs/quantization.md "fp8"): e4m3 decoding of all
 * 256 codes against the table tools/gen_fp8_model.py wrote with ml_dtypes (float8_e4m3fn, the
 * type torch and ModelOpt use) and against the format's definition; rounding to e4m3 (every
 * code round-trips, ties to even, saturation at 448, NaN); rows from a checkpoint's codes (the
 * codes kept, the scale stored, NaN codes and bad scales refused naming the column); rows from
 * values with a given scale within quant_fp8_error_bound(); and the decode GEMV of every variant
 * this CPU runs on rows holding every finite code (subnormals, both signs, 448) against a double
 * product of the exact dequantized weights: the kernels' e4m3 -> fp16-bits widening must give
 * exactly quant_row_to_f32()'s weights; and cpu_quant_rows_to_bf16() (the prompt's products in
 * bf16 precision) gives those weights rounded to bf16, bit for bit, in every variant.
 *
 * Tolerances: the kernels hold the exact weights, so a result differs from the double product by
 * fp32 summation only, within (in + 64) 2^-24 sum |w x| (tests/backend-cpu/test-gemv-quant.c derives it). */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu.h"
#include "quant.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

/* the value by the definition: sign, 4 exponent bits of bias 7, 3 mantissa bits, subnormals at
 * exponent 0, S.1111.111 NaN */
static double e4m3_def(unsigned c)
{
	unsigned e = (c >> 3) & 15, m = c & 7;
	if (e == 15 && m == 7)
		return NAN;
	double v = e ? ldexp(1.0 + m / 8.0, (int)e - 7) : ldexp(m / 8.0, -6);
	return c & 0x80 ? -v : v;
}

static void test_decode(void)
{
	const char *root = getenv("HOLOD_SOURCE_ROOT");
	char path[4096];
	snprintf(path, sizeof(path), "%s/tests/fixtures/quant/e4m3.txt", root ? root : ".");
	FILE *f = fopen(path, "r");
	if (!f)
		fprintf(stderr, "cannot open %s\n", path);
	REQUIRE(f);
	char line[256];
	int n = 0;
	while (fgets(line, sizeof(line), f)) {
		unsigned c;
		char v[64];
		if (line[0] == '#')
			continue;
		REQUIRE(sscanf(line, "%x %63s", &c, v) == 2 && c < 256);
		float want = strcmp(v, "nan") == 0 ? NAN : strtof(v, NULL),
		      got = quant_e4m3_to_f32((uint8_t)c);
		bool same = isnan(want) ? isnan(got) : memcmp(&want, &got, sizeof(float)) == 0;
		if (!same)
			fprintf(stderr, "e4m3 code %02x: %g, ml_dtypes %g\n", c, got, want);
		CHECK(same);
		double d = e4m3_def(c);
		CHECK(isnan(d) ? isnan(got) : (double)got == d && !signbit(got) == !signbit(d));
		CHECK(c == (unsigned)n);
		n++;
	}
	fclose(f);
	CHECK_INT_EQ(n, 256);
	CHECK(quant_e4m3_to_f32(0x7e) == 448.0f && quant_e4m3_to_f32(0xfe) == -448.0f);
	CHECK(quant_e4m3_to_f32(0x01) == 0x1p-9f && quant_e4m3_to_f32(0x08) == 0x1p-6f);
	CHECK(quant_e4m3_to_f32(0x38) == 1.0f && isnan(quant_e4m3_to_f32(0xff)));
}

static void test_encode(void)
{
	bool ok = true;
	for (unsigned c = 0; c < 256; c++) {
		if ((c & 0x7f) == 0x7f)
			continue;
		float v = quant_e4m3_to_f32((uint8_t)c);
		ok &= quant_f32_to_e4m3(v) == c;
		/* halfway to the next code up in magnitude rounds to the even one of the two; a hair
		 * past it rounds up */
		if ((c & 0x7f) < 0x7e) {
			float up = quant_e4m3_to_f32((uint8_t)(c + 1)), mid = (v + up) / 2;
			uint8_t even = (c & 1) ? (uint8_t)(c + 1) : (uint8_t)c;
			ok &= quant_f32_to_e4m3(mid) == even;
			ok &= quant_f32_to_e4m3(nextafterf(mid, up)) == c + 1;
			ok &= quant_f32_to_e4m3(nextafterf(mid, v)) == c;
		}
	}
	CHECK(ok);
	CHECK_INT_EQ(quant_f32_to_e4m3(460.0f), 0x7e);
	CHECK_INT_EQ(quant_f32_to_e4m3(1e30f), 0x7e);
	CHECK_INT_EQ(quant_f32_to_e4m3(-INFINITY), 0xfe);
	CHECK_INT_EQ(quant_f32_to_e4m3(NAN), 0x7f);
	CHECK_INT_EQ(quant_f32_to_e4m3(0x1p-11f), 0x00);
	CHECK_INT_EQ(quant_f32_to_e4m3(-0x1p-9f), 0x81);
}

static void test_rows(void)
{
	enum quant_format f;
	size_t b;
	CHECK_INT_EQ(quant_format_parse("fp8", &f), 0);
	CHECK_INT_EQ(f, QUANT_FP8);
	CHECK_INT_EQ(quant_row_bytes(QUANT_FP8, 5120, &b), 0);
	CHECK_INT_EQ(b, 5120 + 64);
	CHECK_INT_EQ(quant_row_bytes(QUANT_FP8, 65, &b), 0);
	CHECK_INT_EQ(b, 128 + 64);

	/* from codes: kept as they are, padding zero, the scale behind them */
	enum { N = 70 };
	uint8_t codes[N], row[256];
	float out[N];
	for (int i = 0; i < N; i++)
		codes[i] = (uint8_t)(i * 37 % 256);
	codes[7] = 0x12; /* i = 7 would be 0xff... keep only finite codes for this part */
	for (int i = 0; i < N; i++)
		if ((codes[i] & 0x7f) == 0x7f)
			codes[i] ^= 1;
	memset(row, 0xcd, sizeof(row));
	int64_t col = -1;
	CHECK_INT_EQ(quant_fp8_row_from_codes(codes, N, 0.25f, row, &col), 0);
	CHECK(memcmp(row, codes, N) == 0);
	bool pad = true;
	for (int i = N; i < 128; i++)
		pad &= row[i] == 0;
	CHECK(pad);
	CHECK(*quant_fp8_scale(row, N) == 0.25f);
	quant_row_to_f32(QUANT_FP8, row, N, out);
	bool exact = true;
	for (int i = 0; i < N; i++)
		exact &= out[i] == quant_e4m3_to_f32(codes[i]) * 0.25f;
	CHECK(exact);
	/* a NaN code is named by its column; bad scales are refused; the row untouched */
	memset(row, 0xcd, sizeof(row));
	codes[41] = 0xff;
	CHECK_INT_EQ(quant_fp8_row_from_codes(codes, N, 0.25f, row, &col), -EINVAL);
	CHECK_INT_EQ(col, 41);
	codes[41] = 0x7f;
	CHECK_INT_EQ(quant_fp8_row_from_codes(codes, N, 0.25f, row, &col), -EINVAL);
	codes[41] = 0;
	static const float bad[] = {0.0f, -0.5f, NAN, INFINITY, 1e-35f, 200.0f};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		CHECK_INT_EQ(quant_fp8_row_from_codes(codes, N, bad[i], row, &col), -ERANGE);
	CHECK(row[0] == 0xcd && row[200] == 0xcd);
	CHECK_INT_EQ(quant_fp8_row_from_codes(codes, 0, 0.25f, row, &col), -EINVAL);

	/* from values at a given scale, within the bound (normal and subnormal codes) */
	float w[1000];
	uint64_t s = 99;
	double worst = 0;
	for (int kind = 0; kind < 3; kind++) {
		float scale = kind == 2 ? 1e-3f : 0.01f / 448.0f;
		for (int i = 0; i < 1000; i++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			float u = (float)((s >> 40) * (1.0 / 16777216.0)) * 2 - 1;
			w[i] = kind == 1 ? u * 1e-6f : u * 0.01f;
		}
		unsigned char r[1024 + 64]; /* quant_row_bytes(QUANT_FP8, 1000) */
		float back[1000];
		CHECK_INT_EQ(quant_fp8_row_from_f32(w, 1000, scale, r), 0);
		quant_row_to_f32(QUANT_FP8, r, 1000, back);
		for (int i = 0; i < 1000; i++) {
			double e = fabs((double)back[i] - w[i]) / quant_fp8_error_bound(w[i], scale);
			worst = e > worst ? e : worst;
		}
	}
	printf("fp8 at a given scale: worst element error %.3f of quant_fp8_error_bound()\n", worst);
	CHECK(worst <= 1.0);
	unsigned char r[128];
	w[3] = 1.0f; /* 1 / (0.01 / 448) is far past 448 */
	CHECK_INT_EQ(quant_fp8_row_from_f32(w, 10, 0.01f / 448.0f, r), -ERANGE);
	w[3] = NAN;
	CHECK_INT_EQ(quant_fp8_row_from_f32(w, 10, 1.0f, r), -EINVAL);
	w[3] = 0;
	CHECK_INT_EQ(quant_fp8_row_from_f32(w, 10, -1.0f, r), -ERANGE);
}

/* every finite code, in rows of odd lengths, through each variant */
static void test_gemv_codes(void)
{
	static const int ins[] = {254, 255, 257, 301, 1000};
	for (size_t ii = 0; ii < sizeof(ins) / sizeof(ins[0]); ii++) {
		enum { rows = 13, T = 3 };
		const int in = ins[ii];
		size_t rb;
		REQUIRE(quant_row_bytes(QUANT_FP8, in, &rb) == 0);
		unsigned char *data = aligned_alloc(64, rb * rows);
		float *wq = malloc(sizeof(float) * (size_t)in * rows),
		      *x = malloc(sizeof(float) * (size_t)in * T);
		float y[T * 16], y0[T * 16];
		REQUIRE(data && wq && x);
		uint8_t *codes = malloc((size_t)in);
		REQUIRE(codes);
		for (int r = 0; r < rows; r++) {
			for (int k = 0; k < in; k++) {
				codes[k] = (uint8_t)((k * 7 + r * 31) % 256);
				if ((codes[k] & 0x7f) == 0x7f)
					codes[k] = (uint8_t)(codes[k] - 1); /* 448 and -448 */
			}
			/* 1 + 2^-8 and 1 + 2^-7 + 2^-8 put the products of some codes exactly
			 * halfway between two bf16 values (ties: to the even one below, and above),
			 * 1 + 2^-8 + 2^-12 just past halfway */
			static const float scales[] = {1.0f,	  0.00123f,  3.5f,
						       0x1.01p0f, 0x1.03p0f, 0x1.011p0f};
			float scale = scales[r % 6];
			REQUIRE(quant_fp8_row_from_codes(codes, in, scale, data + (size_t)r * rb, NULL) == 0);
			quant_row_to_f32(QUANT_FP8, data + (size_t)r * rb, in, wq + (size_t)r * in);
		}
		for (int i = 0; i < in * T; i++)
			x[i] = (float)((i * 2654435761u) % 1000) / 500.0f - 1.0f;
		struct quant_tensor qt = {.format = QUANT_FP8,
					  .rows = rows,
					  .cols = in,
					  .row_bytes = rb,
					  .data = data};
		for (int v = 0; cpu_gemv_variant_name(v); v++) {
			if (cpu_isa_select(cpu_gemv_variant_name(v)) < 0)
				continue;
			for (int i = 0; i < T * 16; i++)
				y[i] = y0[i] = (float)i * 0.5f;
			bool acc = v & 1;
			CHECK_INT_EQ(cpu_gemv_quant_rows(&qt, 0, rows, x, (size_t)in, T, y, 16, acc), 0);
			bool ok = true;
			for (int t = 0; t < T; t++) {
				for (int r = 0; r < rows; r++) {
					double s = 0, mag = 0;
					for (int k = 0; k < in; k++) {
						double p = (double)wq[(size_t)r * in + k] *
							   x[(size_t)t * in + k];
						s += p;
						mag += fabs(p);
					}
					double base = acc ? y0[t * 16 + r] : 0;
					double tol = (in + 64) * 0x1p-24 * (mag + fabs(base));
					ok &= fabs(y[t * 16 + r] - (s + base)) <= tol;
				}
				for (int r = rows; r < 16; r++)
					ok &= y[t * 16 + r] == y0[t * 16 + r];
			}
			if (!ok)
				fprintf(stderr, "fp8 gemv %s in %d: off the exact product\n",
					cpu_gemv_variant_name(v), in);
			CHECK(ok);
			/* the prompt's rows to bf16: the same bits as the dequantized weights rounded
			 * (no sum: one exact product, one rounding to nearest even) */
			uint16_t *b16 = malloc(sizeof(uint16_t) * (size_t)in * rows);
			REQUIRE(b16);
			CHECK_INT_EQ(cpu_quant_rows_to_bf16(&qt, 0, rows, b16), 0);
			bool same = true;
			for (int i = 0; i < in * rows; i++)
				same &= b16[i] == f32_to_bf16(wq[i]);
			if (!same)
				fprintf(stderr, "fp8 rows to bf16 %s in %d: not the rounded weights\n",
					cpu_gemv_variant_name(v), in);
			CHECK(same);
			free(b16);
		}
		free(codes);
		free(data);
		free(wq);
		free(x);
	}
}

int main(void)
{
	test_decode();
	test_encode();
	test_rows();
	for (int i = 0; cpu_gemv_variant_name(i); i++) {
		int r = cpu_isa_select(cpu_gemv_variant_name(i));
		printf("gemv variant %s: %s\n", cpu_gemv_variant_name(i),
		       r == 0 ? "tested" : "skipped (this CPU lacks it)");
	}
	test_gemv_codes();
	return test_exit();
}
