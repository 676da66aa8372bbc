/* The machine's limits, measured with the engine's own pool (see machine.h). */
#include "machine.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common.h"
#include "cpu.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HAVE_X86 1
#endif

/* ---- read bandwidth ------------------------------------------------------------------------ */

#define BW_TASKS 256
#define BW_WORDS_STEP 16 /* the read loop's stride, in 64-bit words */

struct bench_bw {
	uint64_t *buf;
	size_t words_per_task;
	uint64_t sums[CPU_MAX_THREADS * 8]; /* one 64-byte line per thread */
};

/* Streams the task's slice with the widest loads the machine has, as the decode kernels do. */
#ifdef HAVE_X86
__attribute__((target("avx2"))) static uint64_t read_avx2(const uint64_t *p, size_t words)
{
	__m256i a = _mm256_setzero_si256(), b = a, c = a, d = a;
	for (size_t i = 0; i + BW_WORDS_STEP <= words; i += BW_WORDS_STEP) {
		a = _mm256_add_epi64(a, _mm256_load_si256((const __m256i *)(p + i)));
		b = _mm256_add_epi64(b, _mm256_load_si256((const __m256i *)(p + i + 4)));
		c = _mm256_add_epi64(c, _mm256_load_si256((const __m256i *)(p + i + 8)));
		d = _mm256_add_epi64(d, _mm256_load_si256((const __m256i *)(p + i + 12)));
	}
	__m256i v = _mm256_add_epi64(_mm256_add_epi64(a, b), _mm256_add_epi64(c, d));
	uint64_t out[4];
	_mm256_storeu_si256((__m256i *)out, v);
	return out[0] + out[1] + out[2] + out[3];
}
#endif

static uint64_t read_plain(const uint64_t *p, size_t words)
{
	uint64_t a = 0, b = 0, c = 0, d = 0;
	for (size_t i = 0; i + 4 <= words; i += 4) {
		a += p[i];
		b += p[i + 1];
		c += p[i + 2];
		d += p[i + 3];
	}
	return a + b + c + d;
}

static void bw_task(void *ctx, int task, int thread)
{
	struct bench_bw *j = ctx;
	const uint64_t *p = j->buf + (size_t)task * j->words_per_task;
#ifdef HAVE_X86
	if (__builtin_cpu_supports("avx2")) {
		j->sums[thread * 8] += read_avx2(p, j->words_per_task);
		return;
	}
#endif
	j->sums[thread * 8] += read_plain(p, j->words_per_task);
}

struct bench_bw *bench_bw_create(size_t bytes)
{
	size_t words = bytes / 8 / (BW_TASKS * BW_WORDS_STEP) * (BW_TASKS * BW_WORDS_STEP);
	if (words == 0) {
		errno = EINVAL;
		return NULL;
	}
	struct bench_bw *j = calloc(1, sizeof(*j));
	/* in huge pages where the kernel has them, as the engine's weights (common.h alloc_huge) */
	uint64_t *buf = alloc_huge(words * 8);
	if (!j || !buf) {
		free(j);
		free(buf);
		errno = ENOMEM;
		return NULL;
	}
	for (size_t i = 0; i < words; i++)
		buf[i] = i + 1;
	j->buf = buf;
	j->words_per_task = words / BW_TASKS;
	return j;
}

void bench_bw_destroy(struct bench_bw *bw)
{
	if (!bw)
		return;
	free(bw->buf);
	free(bw);
}

size_t bench_bw_bytes(const struct bench_bw *bw)
{
	return bw->words_per_task * 8 * BW_TASKS;
}

double bench_bw_pass(struct bench_bw *bw)
{
	memset(bw->sums, 0, sizeof(bw->sums));
	uint64_t t0 = time_mono_ns();
	cpu_parallel_for(BW_TASKS, bw_task, bw);
	uint64_t t1 = time_mono_ns();
	return (double)bench_bw_bytes(bw) / ((double)(t1 - t0) / 1e9);
}

long long bench_bw_huge_bytes(const struct bench_bw *bw)
{
	return huge_bytes_in(bw->buf, bench_bw_bytes(bw));
}

const char *bench_bw_pages(const struct bench_bw *bw, char *buf, size_t len)
{
	long long h = bench_bw_huge_bytes(bw);
	if (h < 0)
		snprintf(buf, len, "pages unknown: no /proc/self/smaps");
	else if (h == 0)
		snprintf(buf, len, "in 4 KiB pages");
	else
		snprintf(buf, len, "%.0f of %.0f MB in 2 MiB pages", (double)h / 1e6,
			 (double)bench_bw_bytes(bw) / 1e6);
	return buf;
}

uint64_t bench_bw_last_sum(const struct bench_bw *bw)
{
	uint64_t s = 0;
	for (int i = 0; i < CPU_MAX_THREADS; i++)
		s += bw->sums[i * 8];
	return s;
}

/* ---- bf16 peak ----------------------------------------------------------------------------- */

#define PEAK_CHAINS 12 /* independent accumulators: more than latency x ports of any unit */

#ifdef HAVE_X86
#define ARCH_GET_XCOMP_PERM 0x1022
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

/* CPUID.(7,0):EDX AMX-BF16[22], AMX-TILE[24]; then the kernel's permission to use the tile
 * data (Linux >= 5.16), which some kernels and VMs refuse */
static const char *amx_refusal(void)
{
	unsigned int eax, ebx, ecx, edx;
	if (!__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) || !(edx & (1u << 22)) || !(edx & (1u << 24)))
		return "the CPU has no AMX-BF16";
	unsigned long mask = 0;
	if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0 ||
	    syscall(SYS_arch_prctl, ARCH_GET_XCOMP_PERM, &mask) != 0 || !(mask & (1ul << XFEATURE_XTILEDATA)))
		return "the kernel refused the AMX tile state";
	return NULL;
}

static bool has_avx512bf16(void)
{
	unsigned int eax, ebx, ecx, edx;
	__builtin_cpu_init();
	return __builtin_cpu_supports("avx512f") && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx) &&
	       (eax & (1u << 5));
}

struct tile_config {
	uint8_t palette;
	uint8_t start_row;
	uint8_t reserved[14];
	uint16_t colsb[16];
	uint8_t rows[16];
};

/* 4 tdpbf16ps per iteration: C0..C3 (tmm0-3) += A (tmm4, tmm5) x B (tmm6, tmm7), 16 x 16 fp32
 * each, K = 32 bf16; every C element gains 32 per instruction */
__attribute__((target("amx-tile,amx-bf16"))) static double amx_kernel(long iters, float *ret_acc)
{
	static const struct tile_config cfg = {
		.palette = 1,
		.colsb = {64, 64, 64, 64, 64, 64, 64, 64},
		.rows = {16, 16, 16, 16, 16, 16, 16, 16},
	};
	uint16_t ones[16 * 32] __attribute__((aligned(64)));
	float c[16 * 16] __attribute__((aligned(64)));
	for (size_t i = 0; i < ARRAY_SIZE(ones); i++)
		ones[i] = 0x3f80;
	_tile_loadconfig(&cfg);
	_tile_zero(0);
	_tile_zero(1);
	_tile_zero(2);
	_tile_zero(3);
	_tile_loadd(4, ones, 64);
	_tile_loadd(5, ones, 64);
	_tile_loadd(6, ones, 64);
	_tile_loadd(7, ones, 64);
	for (long i = 0; i < iters; i++) {
		_tile_dpbf16ps(0, 4, 6);
		_tile_dpbf16ps(1, 4, 7);
		_tile_dpbf16ps(2, 5, 6);
		_tile_dpbf16ps(3, 5, 7);
	}
	_tile_stored(3, c, 64);
	_tile_release();
	*ret_acc = c[255];
	return (double)iters * 4 * (16.0 * 16 * 32 * 2);
}

#define CHAINS_DECL(T, init)                                                                                 \
	T a0 = init, a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0, a7 = a0, a8 = a0, a9 = a0,        \
	  a10 = a0, a11 = a0;
#define CHAINS_STEP(OP)                                                                                      \
	a0 = OP(a0), a1 = OP(a1), a2 = OP(a2), a3 = OP(a3), a4 = OP(a4), a5 = OP(a5);                        \
	a6 = OP(a6), a7 = OP(a7), a8 = OP(a8), a9 = OP(a9), a10 = OP(a10), a11 = OP(a11);
/* keeps every chain live: the compiler may not drop a chain whose value is never used */
#define CHAINS_SUM(ADD)                                                                                      \
	ADD(ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7))),                               \
	    ADD(ADD(a8, a9), ADD(a10, a11)))

/* 12 vdpbf16ps per iteration on 32 bf16 pairs; each lane gains 2 per instruction */
__attribute__((target("avx512f,avx512bf16"))) static double avx512bf16_kernel(long iters, float *ret_acc)
{
	__m512bh one = (__m512bh)_mm512_set1_epi16(0x3f80);
	CHAINS_DECL(__m512, _mm512_setzero_ps())
#define DP(a) _mm512_dpbf16_ps(a, one, one)
	for (long i = 0; i < iters; i++) {
		CHAINS_STEP(DP)
	}
#undef DP
	__m512 s = CHAINS_SUM(_mm512_add_ps);
	*ret_acc = _mm512_cvtss_f32(s) / PEAK_CHAINS;
	return (double)iters * PEAK_CHAINS * (32 * 2);
}

/* 12 FMAs per iteration on 8 fp32 lanes; each lane gains 1 per instruction */
__attribute__((target("avx2,fma"))) static double fma_kernel(long iters, float *ret_acc)
{
	__m256 one = _mm256_set1_ps(1.0f);
	CHAINS_DECL(__m256, _mm256_setzero_ps())
#define FMA(a) _mm256_fmadd_ps(one, one, a)
	for (long i = 0; i < iters; i++) {
		CHAINS_STEP(FMA)
	}
#undef FMA
	__m256 s = CHAINS_SUM(_mm256_add_ps);
	*ret_acc = _mm256_cvtss_f32(s) / PEAK_CHAINS;
	return (double)iters * PEAK_CHAINS * (8 * 2);
}
#endif /* HAVE_X86 */

/* why `unit` cannot run here, or NULL */
static const char *refusal(const char *unit)
{
#ifdef HAVE_X86
	__builtin_cpu_init();
	if (strcmp(unit, "amx") == 0)
		return amx_refusal();
	if (strcmp(unit, "avx512bf16") == 0)
		return has_avx512bf16() ? NULL : "the CPU has no AVX512-BF16";
	if (strcmp(unit, "fma") == 0)
		return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ?
			       NULL :
			       "the CPU has no AVX2 FMA";
#endif
	return "not an x86-64 CPU this build knows";
}

float bench_peak_gain(const char *unit)
{
	if (strcmp(unit, "amx") == 0)
		return 32.0f;
	if (strcmp(unit, "avx512bf16") == 0)
		return 2.0f;
	return 1.0f;
}

int bench_peak_kernel(const char *unit, long iters, float *ret_acc, double *ret_flops)
{
	if (refusal(unit))
		return -ENOTSUP;
#ifdef HAVE_X86
	float acc = 0;
	double flops;
	if (strcmp(unit, "amx") == 0)
		flops = amx_kernel(iters, &acc);
	else if (strcmp(unit, "avx512bf16") == 0)
		flops = avx512bf16_kernel(iters, &acc);
	else
		flops = fma_kernel(iters, &acc);
	*ret_acc = acc;
	*ret_flops = flops;
	return 0;
#else
	(void)iters;
	(void)ret_acc;
	(void)ret_flops;
	return -ENOTSUP;
#endif
}

struct peak_job {
	const char *unit;
	long iters;
	double flops[CPU_MAX_THREADS * 8];
};

static void peak_task(void *ctx, int task, int thread)
{
	struct peak_job *j = ctx;
	float acc;
	double flops = 0;
	(void)task;
	if (bench_peak_kernel(j->unit, j->iters, &acc, &flops) == 0)
		j->flops[thread * 8] += flops;
}

int bench_bf16_peak(const char *unit, double seconds, struct bench_peak *ret_peak)
{
	static const char *const units[] = {"amx", "avx512bf16", "fma"};
	const char *note = "";
	if (unit) {
		if (refusal(unit))
			return -ENOTSUP;
	} else {
		for (size_t i = 0; i < ARRAY_SIZE(units) && !unit; i++) {
			const char *why = refusal(units[i]);
			if (!why)
				unit = units[i];
			else if (!*note)
				note = why;
		}
		if (!unit)
			return -ENOTSUP;
	}
	/* a pass is a few milliseconds of one thread; accumulators stay below 2^24 (exact) */
	struct peak_job *j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->unit = unit;
	j->iters = strcmp(unit, "amx") == 0 ? 1L << 16 : 1L << 18;
	int n = cpu_threads();
	uint64_t t0 = time_mono_ns(), t1;
	do {
		cpu_parallel_for(n, peak_task, j);
		t1 = time_mono_ns();
	} while ((double)(t1 - t0) / 1e9 < seconds);
	double flops = 0;
	for (int i = 0; i < CPU_MAX_THREADS; i++)
		flops += j->flops[i * 8];
	free(j);
	*ret_peak = (struct bench_peak){
		.unit = unit,
		.flops_per_s = flops / ((double)(t1 - t0) / 1e9),
		.note = note,
	};
	return 0;
}

/* ---- the pool's job cost ------------------------------------------------------------------- */

#define WAKE_TASK_NS 50000

/* one task per thread, each busy for WAKE_TASK_NS: a job with every thread present takes that
 * long, and what it takes beyond is the pool's cost (or a thread that came late) */
static void busy_task(void *ctx, int task, int thread)
{
	(void)ctx;
	(void)task;
	(void)thread;
	uint64_t t0 = time_mono_ns();
	while (time_mono_ns() - t0 < WAKE_TASK_NS)
		;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void bench_pool_wake(int n, double *ret_hot, double *ret_cold)
{
	double *t = malloc((size_t)n * sizeof(*t));
	if (!t) {
		*ret_hot = *ret_cold = 0;
		return;
	}
	int threads = cpu_threads();
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n; i++) {
			/* the workers spin for the next job for a few hundred microseconds, then
			 * sleep: 5 ms apart they are asleep */
			if (pass == 1)
				nanosleep(&(struct timespec){.tv_nsec = 5000000}, NULL);
			uint64_t t0 = time_mono_ns();
			cpu_parallel_for(threads, busy_task, NULL);
			t[i] = (double)(time_mono_ns() - t0 - WAKE_TASK_NS) / 1e9;
		}
		qsort(t, (size_t)n, sizeof(*t), cmp_double);
		*(pass == 0 ? ret_hot : ret_cold) = t[n / 2];
	}
	free(t);
}
