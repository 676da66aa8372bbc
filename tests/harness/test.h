/* Minimal test harness: a failed check prints file:line and the expression, then the test
 * continues so one run reports every failure; test_exit() returns 1 if anything failed.
 * Exit code 77 means "skipped" to meson (test_skip_missing: a failure on the CI machine). */
#pragma once

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TEST_SKIP 77
/* How much slower a run under valgrind, or a sanitized build, is allowed to be
 * (test_time_limit_us). */
#define TEST_VALGRIND_SLOWDOWN 20
#define TEST_SANITIZER_SLOWDOWN 4

/* Ends the test as skipped (exit 77) because `what` is missing, or as failed when $HOLOD_CI is
 * set (.ci/run sets it): the CI machine installs every tool the suites need
 * (tools/install-deps.sh), so there a missing one is a defect, never a reason to pass without
 * running. */
static inline void test_skip_missing(const char *what)
{
	const char *ci = getenv("HOLOD_CI");

	if (ci && *ci && strcmp(ci, "0") != 0) {
		fprintf(stderr,
			"FAIL: %s (HOLOD_CI is set: the CI machine must have it, see "
			"tools/install-deps.sh)\n",
			what);
		exit(1);
	}
	fprintf(stderr, "skip: %s\n", what);
	exit(TEST_SKIP);
}

/* For a test that holds a bf16 batch to the same bits or tokens as each sequence alone: on the
 * CPU that holds on the GEMV kernels (below LM_BATCH_DNNL_MIN_ROWS merged decode rows,
 * engine/backend/cpu/lm.h) but not on AMX, whose products of 2+ rows sum in another order, so a
 * near-tie's token would be the order's (lm-batch-bf16 holds the AMX rows to their tolerance).
 * Caps $HOLOD_CPU_KERNELS below amx unless the caller (CI's kernel loop) named a set already;
 * call first in main(), before any kernel is chosen. */
static inline void test_cap_cpu_kernels_below_amx(void)
{
	const char *k = getenv("HOLOD_CPU_KERNELS");

	if (!k || !*k || strcmp(k, "amx") == 0)
		setenv("HOLOD_CPU_KERNELS", "avx512bf16", 1);
}

/* A bound on elapsed wall-clock time, scaled for slow runs: x TEST_VALGRIND_SLOWDOWN when
 * $HOLOD_UNDER_VALGRIND is set (meson test --setup=valgrind sets it), x TEST_SANITIZER_SLOWDOWN
 * when $HOLOD_UNDER_SANITIZER is (tests/meson.build sets it in -Db_sanitize builds). */
static inline bool test_env_flag(const char *name)
{
	const char *v = getenv(name);

	return v && *v && strcmp(v, "0") != 0;
}

/* The CUDA device the gpu tests run on: $HOLOD_DEVICE (holod's variable), else 0. The emulated
 * build's -device1 entries set it to 1 of HOLOD_GPU_EMU_DEVICES=2, so that a call that forgets to
 * make its context's device current fails (cuda/gpu_internal.h, gpu_bind). */
static inline int test_gpu_device(void)
{
	const char *d = getenv("HOLOD_DEVICE");
	return d && *d ? atoi(d) : 0;
}

static inline unsigned long long test_time_limit_us(unsigned long long us)
{
	if (test_env_flag("HOLOD_UNDER_VALGRIND"))
		return us * TEST_VALGRIND_SLOWDOWN;
	if (test_env_flag("HOLOD_UNDER_SANITIZER"))
		return us * TEST_SANITIZER_SLOWDOWN;
	return us;
}

extern int test_failures;

#define CHECK(cond)                                                                                          \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);             \
			test_failures++;                                                                     \
		}                                                                                            \
	} while (0)

#define CHECK_INT_EQ(a, b)                                                                                   \
	do {                                                                                                 \
		long long _a = (long long)(a), _b = (long long)(b);                                          \
		if (_a != _b) {                                                                              \
			fprintf(stderr, "%s:%d: %s == %s failed: %lld != %lld\n", __FILE__, __LINE__, #a,    \
				#b, _a, _b);                                                                 \
			test_failures++;                                                                     \
		}                                                                                            \
	} while (0)

#define CHECK_STR_EQ(a, b)                                                                                   \
	do {                                                                                                 \
		const char *_a = (a), *_b = (b);                                                             \
		if (!_a || !_b || strcmp(_a, _b) != 0) {                                                     \
			fprintf(stderr, "%s:%d: %s == %s failed: \"%s\" != \"%s\"\n", __FILE__, __LINE__,    \
				#a, #b, _a ? _a : "(null)", _b ? _b : "(null)");                             \
			test_failures++;                                                                     \
		}                                                                                            \
	} while (0)

#define CHECK_NEAR(a, b, tol)                                                                                \
	do {                                                                                                 \
		double _a = (double)(a), _b = (double)(b);                                                   \
		if (!(fabs(_a - _b) <= (tol))) {                                                             \
			fprintf(stderr, "%s:%d: |%s - %s| <= %g failed: %.9g vs %.9g\n", __FILE__, __LINE__, \
				#a, #b, (double)(tol), _a, _b);                                              \
			test_failures++;                                                                     \
		}                                                                                            \
	} while (0)

/* Fatal: stop the test now. */
#define REQUIRE(cond)                                                                                        \
	do {                                                                                                 \
		if (!(cond)) {                                                                               \
			fprintf(stderr, "%s:%d: required: %s\n", __FILE__, __LINE__, #cond);                 \
			exit(1);                                                                             \
		}                                                                                            \
	} while (0)

/* Largest |a[i] - b[i]| over n elements; INFINITY as soon as one difference is NaN (fmax()
 * would skip it, so a NaN output would pass any tolerance). */
static inline double test_max_abs_diff(const float *a, const float *b, size_t n)
{
	double m = 0;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)a[i] - (double)b[i]);
		if (!(d <= m))
			m = isnan(d) ? INFINITY : d;
	}
	return m;
}

/* The index of the largest of v[0..n) (the first of equals). */
static inline int test_argmax(const float *v, int n)
{
	int b = 0;
	for (int i = 1; i < n; i++)
		if (v[i] > v[b])
			b = i;
	return b;
}

/* v's top-1 less its top-2: a greedy token is a sound check against a reference only where the
 * reference leads by more than twice the error bound both are held to. */
static inline double test_top_margin(const float *v, int n)
{
	int b = test_argmax(v, n);
	double second = -INFINITY;
	for (int i = 0; i < n; i++)
		if (i != b && v[i] > second)
			second = v[i];
	return (double)v[b] - second;
}

/* Rows of logits held to a reference: every logit within `bound` (absolute) of the reference's,
 * and the greedy token the reference's wherever the reference leads by more than 2 x bound
 * (nearer ties go the way a summation order rounds). Fill in bound; the rest counts. */
struct test_logits_check {
	double bound;
	double worst; /* the largest |got - want| seen */
	int rows;     /* rows checked */
	int compared; /* of them, rows whose greedy token was compared */
};

static inline void test_check_logits_row(struct test_logits_check *c, const float *got, const float *want,
					 int n)
{
	double d = test_max_abs_diff(got, want, (size_t)n);
	if (!(d <= c->worst))
		c->worst = d;
	CHECK(d <= c->bound);
	c->rows++;
	if (test_top_margin(want, n) > 2 * c->bound) {
		CHECK_INT_EQ(test_argmax(got, n), test_argmax(want, n));
		c->compared++;
	}
}

static inline int test_exit(void)
{
	if (test_failures)
		fprintf(stderr, "%d check(s) failed\n", test_failures);
	return test_failures ? 1 : 0;
}

#define TEST_DEFINE_GLOBALS int test_failures
