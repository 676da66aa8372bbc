/* The bf16 SSD scan on oneDNN (engine/backend/cpu/cpu_ssd.c) against the fp32 chunked scan
 * (lm_ssm_chunked()) it replaces in bf16 prefill.
 *
 * Shapes: holo-bench's default model (H 32, P 64, N 128, 8 groups, chunk 128) with one short
 * span, one full chunk and a span of 200 (a full chunk and a 72-position tail); odd ones
 * (sizes off every block, 1 to 3 positions, one group, 3 groups, a chunk longer than the span).
 * A decay that would grow (a > 0 or dt < 0) is refused with the state untouched.
 * Every case starts from a random state (what a previous append leaves) and appends a second
 * span on the state each scan carried out, so a state written wrong or not at all shows in the
 * second span's y.
 *
 * Tolerance: the products round their inputs (C, B, X, the masked decays, X o coef, the state
 * entering a chunk) to bf16, 2^-9 relative each, and sum in fp32; y and the state must be within
 * 1% of the fp32 scan in relative RMS and 2% of the largest |value| at any element, 3-5x the
 * worst seen over these cases (RMS 3.0e-3, max 4.2e-3 on a Xeon with AMX). A lost term moves y
 * far more: without the skip D x by 20% RMS, without the state carried in by 14-64%.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "cpu_dnnl.h"
#include "cpu_ssd.h"
#include "lm.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

#define TOL_RMS 0.01
#define TOL_MAX 0.02

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)((double)(rng >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

struct errs {
	double rms, max; /* relative: to the reference's RMS, to its largest |value| */
};

static struct errs compare(const float *got, const float *want, size_t n)
{
	double d2 = 0, w2 = 0, dmax = 0, wmax = 0;
	for (size_t i = 0; i < n; i++) {
		double d = (double)got[i] - want[i];
		d2 += d * d;
		w2 += (double)want[i] * want[i];
		dmax = fmax(dmax, fabs(d));
		wmax = fmax(wmax, fabs(want[i]));
	}
	return (struct errs){sqrt(d2 / fmax(w2, 1e-300)), dmax / fmax(wmax, 1e-300)};
}

static struct lm_dims dims(int H, int P, int N, int G, int chunk)
{
	struct lm_dims dm = {.H = H, .P = P, .N = N, .G = G, .chunk = chunk};
	dm.d_in = H * P;
	return dm;
}

struct span {
	float *xbc, *dt, *y;
};

static void span_init(const struct lm_dims *dm, int T, size_t ldx, struct span *s)
{
	s->xbc = malloc((size_t)T * ldx * sizeof(float));
	s->dt = malloc((size_t)T * dm->H * sizeof(float));
	s->y = malloc((size_t)T * dm->d_in * sizeof(float));
	REQUIRE(s->xbc && s->dt && s->y);
	for (size_t i = 0; i < (size_t)T * ldx; i++)
		s->xbc[i] = frand();
	for (int i = 0; i < T * dm->H; i++)
		s->dt[i] = 0.3f * (frand() + 1.0f) + 0.001f;
}

static void span_free(struct span *s)
{
	free(s->xbc);
	free(s->dt);
	free(s->y);
}

static double worst_rms, worst_max;

/* Two spans of T1 then T2 positions, from one random state, through both scans. Returns false
 * when oneDNN refused the products (the state then checked unchanged). */
static bool check_case(const struct lm_dims *dm, int T1, int T2)
{
	size_t ldx = (size_t)dm->d_in + 2 * (size_t)dm->G * dm->N + 3;
	size_t sn = (size_t)dm->H * dm->P * dm->N;
	int Tmax = MAX(T1, T2);
	float *a = malloc((size_t)dm->H * sizeof(float)), *dsk = malloc((size_t)dm->H * sizeof(float));
	float *s_bf = malloc(sn * sizeof(float)), *s_ref = malloc(sn * sizeof(float));
	float *work = malloc(cpu_ssd_work_floats(dm, Tmax) * sizeof(float));
	float *cb = malloc(lm_ssm_cb_floats(dm, Tmax) * sizeof(float));
	float *y_ref = malloc((size_t)Tmax * dm->d_in * sizeof(float));
	REQUIRE(a && dsk && s_bf && s_ref && work && cb && y_ref);
	CHECK_INT_EQ(cpu_reserve_scratch(MAX(lm_ssm_scratch_bytes(dm), cpu_ssd_scratch_bytes(dm))), 0);
	for (int h = 0; h < dm->H; h++) {
		a[h] = -(float)(h % 7 + 1) * 0.4f;
		dsk[h] = frand();
	}
	for (size_t i = 0; i < sn; i++)
		s_bf[i] = s_ref[i] = frand();
	bool ran = true;
	int Ts[2] = {T1, T2};
	for (int k = 0; k < 2 && ran; k++) {
		int T = Ts[k];
		struct span sp;
		span_init(dm, T, ldx, &sp);
		float *s_before = malloc(sn * sizeof(float));
		REQUIRE(s_before);
		memcpy(s_before, s_bf, sn * sizeof(float));
		int r = cpu_ssd_scan_bf16(dm, T, sp.xbc, ldx, sp.dt, a, dsk, s_bf, sp.y, work);
		lm_ssm_chunked(dm, T, sp.xbc, ldx, sp.dt, a, dsk, s_ref, y_ref, cb);
		if (r == -ENOTSUP) {
			CHECK(memcmp(s_before, s_bf, sn * sizeof(float)) == 0);
			ran = false;
		} else {
			CHECK_INT_EQ(r, 0);
			struct errs ey = compare(sp.y, y_ref, (size_t)T * dm->d_in);
			struct errs es = compare(s_bf, s_ref, sn);
			bool ok = ey.rms <= TOL_RMS && ey.max <= TOL_MAX && es.rms <= TOL_RMS &&
				  es.max <= TOL_MAX;
			if (!ok || getenv("LM_TEST_VERBOSE"))
				fprintf(stderr,
					"ssd H%d P%d N%d G%d chunk %d, span %d of %d (T=%d): y rms %.2e max "
					"%.2e, state rms %.2e max %.2e\n",
					dm->H, dm->P, dm->N, dm->G, dm->chunk, k + 1, 2, T, ey.rms, ey.max,
					es.rms, es.max);
			CHECK(ok);
			worst_rms = fmax(worst_rms, fmax(ey.rms, es.rms));
			worst_max = fmax(worst_max, fmax(ey.max, es.max));
		}
		free(s_before);
		span_free(&sp);
	}
	free(a);
	free(dsk);
	free(s_bf);
	free(s_ref);
	free(work);
	free(cb);
	free(y_ref);
	return ran;
}

/* A decay that grows (a > 0, or dt < 0: not what the model makes) is refused with the state
 * untouched, for the fp32 scan to run: the mask's two-factor decays assume cum never rises. */
static void check_refusal(void)
{
	struct lm_dims dm = dims(4, 8, 16, 2, 8);
	int T = 20;
	size_t ldx = (size_t)dm.d_in + 2 * (size_t)dm.G * dm.N, sn = (size_t)dm.H * dm.P * dm.N;
	struct span sp;
	span_init(&dm, T, ldx, &sp);
	float a[4] = {-0.5f, -0.5f, 0.25f, -0.5f}, dsk[4] = {1, 1, 1, 1};
	float *s = malloc(sn * sizeof(float)), *s0 = malloc(sn * sizeof(float));
	float *work = malloc(cpu_ssd_work_floats(&dm, T) * sizeof(float));
	REQUIRE(s && s0 && work);
	CHECK_INT_EQ(cpu_reserve_scratch(cpu_ssd_scratch_bytes(&dm)), 0);
	for (size_t i = 0; i < sn; i++)
		s[i] = s0[i] = frand();
	CHECK_INT_EQ(cpu_ssd_scan_bf16(&dm, T, sp.xbc, ldx, sp.dt, a, dsk, s, sp.y, work), -EINVAL);
	a[2] = -0.25f;
	sp.dt[7] = -0.01f;
	CHECK_INT_EQ(cpu_ssd_scan_bf16(&dm, T, sp.xbc, ldx, sp.dt, a, dsk, s, sp.y, work), -EINVAL);
	CHECK(memcmp(s, s0, sn * sizeof(float)) == 0);
	free(s);
	free(s0);
	free(work);
	span_free(&sp);
}

int main(void)
{
	check_refusal();
	struct lm_dims model = dims(32, 64, 128, 8, 128);
	bool ran = check_case(&model, 16, 200);
	if (!ran) {
		/* refused only where oneDNN has no bf16 products (AVX2 alone, or capped there) */
		CHECK(!cpu_dnnl_bf16_supported());
		fprintf(stderr, "oneDNN has no fast bf16 matmul on this CPU: the scan stays fp32\n");
		return test_exit();
	}
	CHECK(check_case(&model, 128, 37));

	struct lm_dims odd = dims(6, 20, 24, 3, 32);
	int odd_T[][2] = {{1, 2}, {3, 37}, {17, 32}, {69, 5}};
	for (size_t i = 0; i < ARRAY_SIZE(odd_T); i++)
		CHECK(check_case(&odd, odd_T[i][0], odd_T[i][1]));
	struct lm_dims one_group = dims(4, 8, 16, 1, 8);
	CHECK(check_case(&one_group, 37, 9));
	/* the config's chunk above the span: one partly filled chunk */
	struct lm_dims long_chunk = dims(8, 16, 32, 2, 256);
	CHECK(check_case(&long_chunk, 100, 19));
	if (getenv("LM_TEST_VERBOSE"))
		fprintf(stderr, "worst: rms %.2e, max %.2e\n", worst_rms, worst_max);
	return test_exit();
}
