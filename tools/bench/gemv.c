/* holo-bench gemv: the decode GEMV on bf16, q8, q4 and fp8 weights (engine/backend/cpu/cpu_gemv*.c,
 * engine/quant/quant.h) on one 12B-like matrix, one token, single-threaded and on every thread
 * of the pool, as GB/s of weight bytes read and as a fraction of the read bandwidth measured in
 * the same rounds (bench_bw: the pool's threads streaming a 512 MB buffer).
 *
 *   holo-bench gemv [--rows R] [--cols C] [--rounds N] [--threads N]
 *
 * Defaults: 20480 x 5120 (Holotron-12B's MLP up projection: rows = intermediate, cols = hidden),
 * 15 rounds; threads: 1 and then the pool's default (every CPU). Each round runs one bandwidth
 * pass and then each format's product once; the figures are the rounds' medians. bf16 runs the
 * product bf16 precision's decode runs (activations rounded to bf16); q8 and q4 widen the codes
 * to the exact dequantized weights and multiply fp32 activations (docs/quantization.md). The
 * weights are random (uniform, +-0.05), quantized from the bf16 matrix on the pool, and the
 * quantization's own rate is printed too (the load-time cost a 12B model would pay). q8 and q4
 * run on the layout the CPU backend holds them in: 16-row tiles where the variant has tile
 * kernels (quant.h), with `q8-rows` / `q4-rows` (the stored records on the row kernels) beside.
 * fp8 (e4m3 codes, a per-row scale: an FP8 checkpoint's layers) runs bf16 precision's decode
 * product (activations rounded to bf16, vdpbf16ps on the codes' bf16 values where the CPU has
 * AVX512-BF16 and VBMI: cpu_gemv_fp8_vbmi.c; elsewhere the exact kernel), and `fp8-exact` fp32
 * precision's (the codes widened to fp32 in registers, fp32 activations: cpu_gemv_fp8_*.c). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common.h"
#include "cpu.h"
#include "machine.h"
#include "quant.h"

#define MAX_ROUNDS 101

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct quantize_job {
	enum quant_format fmt;
	const uint16_t *w;
	int64_t rows, cols;
	size_t row_bytes;
	char *dst;
	int chunk;
	int err;
};

static void quantize_task(void *ctx, int task, int thread)
{
	struct quantize_job *j = ctx;
	(void)thread;
	for (int64_t r = (int64_t)task * j->chunk; r < j->rows && r < (int64_t)(task + 1) * j->chunk; r++) {
		int e = quant_row_from_bf16(j->fmt, j->w + (size_t)r * (size_t)j->cols, j->cols,
					    j->dst + (size_t)r * j->row_bytes);
		if (e < 0)
			__atomic_store_n(&j->err, e, __ATOMIC_RELAXED);
	}
}

/* quantizes the bf16 matrix on the pool; prints the rate */
static int quantize(enum quant_format fmt, const uint16_t *w, int64_t rows, int64_t cols,
		    struct quant_tensor *ret)
{
	size_t bytes, rb;
	int r = quant_tensor_bytes(fmt, rows, cols, &bytes);
	if (r < 0)
		return r;
	quant_row_bytes(fmt, cols, &rb);
	char *dst = alloc_huge(bytes); /* as the CPU backend holds weights */
	if (!dst)
		return -ENOMEM;
	struct quantize_job j =
		{.fmt = fmt, .w = w, .rows = rows, .cols = cols, .row_bytes = rb, .dst = dst, .chunk = 64};
	uint64_t t0 = time_mono_ns();
	cpu_parallel_for((int)((rows + j.chunk - 1) / j.chunk), quantize_task, &j);
	double s = (double)(time_mono_ns() - t0) / 1e9;
	if (j.err < 0) {
		free(dst);
		return j.err;
	}
	printf("quantize %s from bf16 (%d threads): %.1f M weights/s (%.2f s for this matrix; %.0f s "
	       "for 12e9 weights at this rate)\n",
	       quant_format_desc(fmt)->name, cpu_threads(), (double)rows * cols / s / 1e6, s,
	       12e9 / ((double)rows * cols / s));
	*ret = (struct quant_tensor){.format = fmt, .rows = rows, .cols = cols, .row_bytes = rb, .data = dst};
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: holo-bench gemv [--rows R] [--cols C] [--rounds N] [--threads N]\n"
		"The decode GEMV (1 token) on bf16, q8, q4 and fp8 weights of R x C (default 20480 x 5120),\n"
		"GB/s of weight bytes read and the fraction of the read bandwidth of the same rounds,\n"
		"on 1 thread and on N (default: the pool's, every CPU).\n");
}

int bench_gemv_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"rows", required_argument, NULL, 'r'},	  {"cols", required_argument, NULL, 'c'},
		{"rounds", required_argument, NULL, 'n'}, {"threads", required_argument, NULL, 't'},
		{"help", no_argument, NULL, 'h'},	  {0},
	};
	long rows = 20480, cols = 5120, rounds = 15, threads = 0;
	int c;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		char *end = NULL;
		long v = 0;
		if (c != 'h') {
			v = strtol(optarg, &end, 10);
			if (*end || v < 1) {
				fprintf(stderr, "holo-bench gemv: bad --%s '%s'\n",
					opts[c == 'r' ? 0 :
					     c == 'c' ? 1 :
					     c == 'n' ? 2 :
							3]
						.name,
					optarg);
				return 2;
			}
		}
		switch (c) {
		case 'r':
			rows = v;
			break;
		case 'c':
			cols = v;
			break;
		case 'n':
			rounds = v;
			break;
		case 't':
			threads = v;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (rows > 1 << 20 || cols > 1 << 20 || rounds > MAX_ROUNDS || threads > CPU_MAX_THREADS) {
		fprintf(stderr, "holo-bench gemv: at most 1048576 rows and columns, %d rounds, %d threads\n",
			MAX_ROUNDS, CPU_MAX_THREADS);
		return 2;
	}
	int all = threads ? (int)threads : cpu_threads();
	size_t n = (size_t)rows * (size_t)cols;
	uint16_t *wb = alloc_huge((n * sizeof(uint16_t) + 63) / 64 * 64);
	float *x = malloc((size_t)cols * sizeof(float)),
	      *y = aligned_alloc(64, ((size_t)rows + 15) / 16 * 64);
	struct bench_bw *bw = bench_bw_create((size_t)512 << 20);
	struct quant_tensor q[QUANT_FORMAT_COUNT] = {0}, qt[QUANT_FORMAT_COUNT] = {0};
	int ret = 1;
	if (!wb || !x || !y || !bw) {
		fprintf(stderr, "holo-bench gemv: out of memory\n");
		goto out;
	}
	uint64_t s = 99;
	for (size_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		wb[i] = f32_to_bf16(((float)(s >> 40) / 16777216.0f * 2 - 1) * 0.05f);
	}
	for (long i = 0; i < cols; i++)
		x[i] = (float)((i * 37) % 17) / 17.0f - 0.5f;
	bench_print_load();
	if (cpu_set_threads(all) < 0)
		goto out;
	for (int f = QUANT_Q8; f <= QUANT_FP8; f++) {
		int r = quantize((enum quant_format)f, wb, rows, cols, &q[f]);
		if (r < 0) {
			fprintf(stderr, "holo-bench gemv: quantize: %s\n", strerror(-r));
			goto out;
		}
	}
	struct tensor w = {.data = wb, .dtype = TENSOR_BF16, .ndim = 2, .shape = {rows, cols}, .nbytes = n * 2};
	/* q8 and q4 as the CPU backend holds them where the kernels have tiles (quant.h;
	 * lm_prepared_tile), and their records as stored beside them (-rows: the row kernels) */
	bool tiles = false;
	for (int f = QUANT_Q8; f <= QUANT_Q4; f++) {
		qt[f] = q[f];
		if (!cpu_gemv_quant_tiles(f) || rows < QUANT_TILE_ROWS)
			continue;
		size_t tb = QUANT_TILE_ROWS * q[f].row_bytes, bytes = (size_t)rows * q[f].row_bytes;
		char *tdata = alloc_huge(bytes), *tmp = malloc(tb);
		if (!tdata || !tmp) {
			free(tdata);
			free(tmp);
			fprintf(stderr, "holo-bench gemv: out of memory\n");
			goto out;
		}
		memcpy(tdata, q[f].data, bytes);
		quant_tensor_tile_range(&qt[f], tdata, 0, rows / QUANT_TILE_ROWS, tmp);
		free(tmp);
		qt[f].data = tdata;
		qt[f].tiled = tiles = true;
	}
	/* the products measured: bf16 (bf16 activations), each format's integer kernels (int8
	 * activations: bf16 precision's decode) and its exact ones (fp32 activations: fp32
	 * precision), fp8's two alike (bf16 and fp32 activations); -rows only with tiles */
	enum { KINDS = 9 };
	static const char *const names[KINDS] = {"bf16", "q8",	      "q4",	 "q8-exact", "q4-exact",
						 "fp8",	 "fp8-exact", "q8-rows", "q4-rows"};
	static const int fmt[KINDS] = {-1,	  QUANT_Q8,  QUANT_Q4, QUANT_Q8, QUANT_Q4,
				       QUANT_FP8, QUANT_FP8, QUANT_Q8, QUANT_Q4};
	static const bool i8[KINDS] = {false, true, true, false, false, true, false, true, true};
	const int kinds = tiles ? KINDS : KINDS - 2;
	const struct quant_tensor *qk[KINDS] = {NULL,	       &qt[QUANT_Q8], &qt[QUANT_Q4],
						&qt[QUANT_Q8], &qt[QUANT_Q4], &q[QUANT_FP8],
						&q[QUANT_FP8], &q[QUANT_Q8],  &q[QUANT_Q4]};
	double bytes[KINDS];
	for (int f = 0; f < KINDS; f++)
		bytes[f] = fmt[f] < 0 ? (double)n * 2 : (double)qk[f]->rows * qk[f]->row_bytes;
	printf("matrix %ld x %ld, 1 token, gemv variant %s (integer kernels: %s; q8/q4 %s): weight bytes "
	       "bf16 "
	       "%.1f MB, q8 %.1f MB, q4 %.1f MB, fp8 %.1f MB\n",
	       rows, cols, cpu_gemv_name(), cpu_gemv_quant_has_i8() ? "yes" : "no, q8/q4 are the exact ones",
	       tiles ? "in 16-row tiles, as the CPU backend holds them (-rows: the records)" : "records",
	       bytes[0] / 1e6, bytes[1] / 1e6, bytes[2] / 1e6, bytes[5] / 1e6);
	int counts[2] = {1, all};
	for (int ci = 0; ci < (all > 1 ? 2 : 1); ci++) {
		if (cpu_set_threads(counts[ci]) < 0)
			goto out;
		double b[MAX_ROUNDS], g[KINDS][MAX_ROUNDS];
		bench_bw_pass(bw); /* warm-up: pages and the pool */
		for (int k = -1; k < (int)rounds; k++) {
			if (k >= 0)
				b[k] = bench_bw_pass(bw);
			for (int f = 0; f < kinds; f++) {
				uint64_t t0 = time_mono_ns();
				if (fmt[f] < 0)
					cpu_gemv_rows(&w, 0, (int)rows, x, (size_t)cols, 1, y, (size_t)rows,
						      false, true);
				else if (i8[f])
					cpu_gemv_quant_rows_i8(qk[f], 0, (int)rows, x, (size_t)cols, 1, y,
							       (size_t)rows, false);
				else
					cpu_gemv_quant_rows(qk[f], 0, (int)rows, x, (size_t)cols, 1, y,
							    (size_t)rows, false);
				if (k >= 0)
					g[f][k] = bytes[f] / ((double)(time_mono_ns() - t0) / 1e9);
			}
		}
		double bm = median(b, (int)rounds), gm[KINDS];
		char pages[96];
		printf("%d thread%s: read bandwidth %.2f GB/s (median of %ld passes of %.0f MB, %s)\n",
		       counts[ci], counts[ci] > 1 ? "s" : "", bm / 1e9, rounds,
		       (double)bench_bw_bytes(bw) / 1e6, bench_bw_pages(bw, pages, sizeof(pages)));
		for (int f = 0; f < kinds; f++) {
			gm[f] = median(g[f], (int)rounds);
			printf("  %-9s gemv: %6.2f GB/s of weights, %3.0f%% of the read bandwidth, %7.2f ms "
			       "per token "
			       "(%.2fx bf16's rate)\n",
			       names[f], gm[f] / 1e9, 100 * gm[f] / bm, bytes[f] / gm[f] * 1e3,
			       (bytes[0] / gm[0]) / (bytes[f] / gm[f]));
			char name[64];
			snprintf(name, sizeof(name), "gemv_%s_t%d_of_read_bw", names[f], counts[ci]);
			bench_figure(name, gm[f] / bm, "ratio", NULL, 0);
		}
	}
	ret = 0;
out:
	for (int f = 0; f < QUANT_FORMAT_COUNT; f++)
		if (qt[f].tiled)
			free((void *)qt[f].data);
	for (int f = 0; f < QUANT_FORMAT_COUNT; f++)
		free((void *)q[f].data);
	bench_bw_destroy(bw);
	free(wb);
	free(x);
	free(y);
	return ret;
}
