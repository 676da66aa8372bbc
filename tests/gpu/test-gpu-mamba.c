/* gpu and gpu-emu suites: the Mamba-2 kernels (cuda/mamba_*.cu) against the CPU forward's own
 * operations (engine/backend/cpu/lm.h): lm_conv_silu, lm_dt_softplus, lm_ssm_scan (the naive per-token
 * recurrence, reference of both the chunked SSD and the decode step), lm_ssm_chunked and
 * lm_gated_rmsnorm, states included. Skips (77) without a device.
 *
 * Shapes: head_dim, state and channel counts that are not multiples of 32, groups shared by
 * several heads, T = 1, chunk - 1, chunk, chunk + 1 and 3 chunk + 5, chunks shorter and longer
 * than the kernels' 32-wide tiles, conv prefills over several of its 64-position tiles, and
 * prefills split across calls at a point inside a chunk (or tile) and on a chunk boundary.
 *
 * Tolerances (|got - want| <= abs + rel * |want|):
 *  - conv + SiLU, fp32 or bf16 taps (the CPU given the same bf16-rounded taps): 1e-6 + 1e-5;
 *    same operations in the same order, FMA contraction the only difference;
 *  - SSD, decode step and split prefill vs the scan: 2e-5 + 2e-5 (values of order 1; the chunked
 *    form reassociates the sums of the recurrence, as lm_ssm_chunked does, and computes dt*A
 *    prefix sums by a warp scan);
 *  - gated RMSNorm, fp32 output: 1e-6 + 1e-5; bf16 output: 1e-5 + (2^-8 + 1e-5) (one bf16
 *    rounding on top);
 *  - the mixer chained as the forward runs it (conv, SSD or step, gated norm; a prefill then
 *    decode steps): outputs and SSM state 2e-5 + 2e-5, conv state exact;
 *  - a bf16 SSM state (gpu_mamba_dims.state_dtype) against the CPU's bf16 state
 *    (lm_ssm_chunked_s16, lm_ssm_scan_s16), prefills split across calls then decode steps: the
 *    fp32 values before each rounding agree to 2e-5 + 2e-5, so a stored entry may round one bf16
 *    ulp apart (2^-8 relative) and carry that into later outputs: state and y 2e-5 + 2^-8.
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "gpu.h"
#include "lm.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 0x9e3779b97f4a7c15ull;

/* uniform in [-1, 1) */
static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

static float *rand_floats(size_t n, float scale, float offset)
{
	float *v = xmalloc(MAX(n, 1) * sizeof(float));
	for (size_t i = 0; i < n; i++)
		v[i] = scale * frand() + offset;
	return v;
}

static uint16_t to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	u += 0x7fff + ((u >> 16) & 1);
	return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

static struct gpu_context *g;

static void *dev_from(const void *host, size_t bytes)
{
	void *d = NULL;
	REQUIRE(gpu_alloc(g, MAX(bytes, 1), &d) == 0);
	if (host)
		REQUIRE(gpu_copy_to_device(g, d, host, bytes) == 0);
	return d;
}

static void to_host(void *host, const void *dev, size_t bytes)
{
	REQUIRE(gpu_copy_to_host(g, host, dev, bytes) == 0);
}

/* Counts the elements outside abs + rel * |want| and reports the worst one. */
static void check_close(const char *what, const float *got, const float *want, size_t n, double abs,
			double rel)
{
	size_t bad = 0, worst = 0;
	double worst_excess = -1;
	for (size_t i = 0; i < n; i++) {
		double d = fabs((double)got[i] - want[i]), tol = abs + rel * fabs(want[i]);
		if (!(d <= tol))
			bad++;
		if (!(d - tol <= worst_excess))
			worst_excess = d - tol, worst = i;
	}
	if (bad)
		fprintf(stderr, "%s: %zu of %zu off, worst [%zu] got %.9g want %.9g\n", what, bad, n, worst,
			got[worst], want[worst]);
	CHECK(bad == 0);
}

struct shape {
	int H, P, N, G, K, chunk;
};

static void dims_of(const struct shape *s, struct lm_dims *dm, struct gpu_mamba_dims *gm)
{
	memset(dm, 0, sizeof(*dm));
	dm->H = s->H, dm->P = s->P, dm->N = s->N, dm->G = s->G, dm->K = s->K, dm->chunk = s->chunk;
	dm->d_in = s->H * s->P;
	dm->conv_dim = dm->d_in + 2 * s->G * s->N;
	*gm = (struct gpu_mamba_dims){.n_heads = s->H,
				      .head_dim = s->P,
				      .state = s->N,
				      .groups = s->G,
				      .conv_k = s->K,
				      .chunk = s->chunk};
}

/* ---- conv1d + SiLU ----------------------------------------------------------------------------
 */

/* The GPU conv over T positions, split as [T1, T - T1] when 0 < T1 < T, against one CPU call. */
static void test_conv(const struct shape *s, int T, int T1, bool bf16)
{
	struct lm_dims dm;
	struct gpu_mamba_dims gm;
	dims_of(s, &dm, &gm);
	int cd = dm.conv_dim, K = dm.K;
	size_t ldr = (size_t)cd + 5, ldo = (size_t)cd + 2, nst = (size_t)(K - 1) * cd;
	float *raw = rand_floats((size_t)T * ldr, 1.5f, 0.0f), *w = rand_floats((size_t)cd * K, 0.6f, 0.0f);
	float *bias = rand_floats((size_t)cd, 0.3f, 0.0f), *st = rand_floats(nst, 1.0f, 0.0f);
	uint16_t *wb = xmalloc((size_t)cd * K * sizeof(uint16_t));
	for (size_t i = 0; i < (size_t)cd * K; i++) {
		wb[i] = to_bf16(w[i]);
		if (bf16)
			w[i] = from_bf16(wb[i]);
	}

	float *cwt = xmalloc((size_t)cd * K * sizeof(float));
	for (int c = 0; c < cd; c++)
		for (int k = 0; k < K; k++)
			cwt[(size_t)k * cd + c] = w[(size_t)c * K + k];
	float *want = xmalloc((size_t)T * cd * sizeof(float)),
	      *want_st = xmalloc(MAX(nst, 1) * sizeof(float));
	float *cbuf = xmalloc((size_t)(K - 1 + T) * cd * sizeof(float));
	memcpy(want_st, st, nst * sizeof(float));
	lm_conv_silu(&dm, T, raw, ldr, cwt, bias, want_st, cbuf, want);

	float *draw = dev_from(raw, (size_t)T * ldr * sizeof(float));
	void *dw = bf16 ? dev_from(wb, (size_t)cd * K * sizeof(uint16_t)) :
			  dev_from(w, (size_t)cd * K * sizeof(float));
	float *dbias = dev_from(bias, (size_t)cd * sizeof(float)), *dst = dev_from(st, nst * sizeof(float));
	float *dout = dev_from(NULL, (size_t)T * ldo * sizeof(float));
	enum gpu_dtype wt = bf16 ? GPU_DTYPE_BF16 : GPU_DTYPE_F32;
	if (T1 > 0 && T1 < T) {
		CHECK_INT_EQ(gpu_mamba_conv_silu(g, &gm, T1, draw, ldr, dw, wt, dbias, dst, dout, ldo), 0);
		CHECK_INT_EQ(gpu_mamba_conv_silu(g, &gm, T - T1, draw + (size_t)T1 * ldr, ldr, dw, wt, dbias,
						 dst, dout + (size_t)T1 * ldo, ldo),
			     0);
	} else {
		CHECK_INT_EQ(gpu_mamba_conv_silu(g, &gm, T, draw, ldr, dw, wt, dbias, dst, dout, ldo), 0);
	}
	float *out = xmalloc((size_t)T * ldo * sizeof(float)), *got = xmalloc((size_t)T * cd * sizeof(float));
	to_host(out, dout, (size_t)T * ldo * sizeof(float));
	for (int t = 0; t < T; t++)
		memcpy(got + (size_t)t * cd, out + (size_t)t * ldo, (size_t)cd * sizeof(float));
	char what[96];
	snprintf(what, sizeof(what), "conv K=%d T=%d split %d %s out", K, T, T1, bf16 ? "bf16" : "f32");
	check_close(what, got, want, (size_t)T * cd, 1e-6, 1e-5);
	to_host(st, dst, nst * sizeof(float));
	snprintf(what, sizeof(what), "conv K=%d T=%d split %d %s state", K, T, T1, bf16 ? "bf16" : "f32");
	/* the state is raw input moved around: exact */
	check_close(what, st, want_st, nst, 0, 0);

	gpu_free(g, draw), gpu_free(g, dw), gpu_free(g, dbias), gpu_free(g, dst), gpu_free(g, dout);
	free(raw), free(w), free(bias), free(st), free(wb), free(cwt), free(want), free(want_st);
	free(cbuf), free(out), free(got);
}

/* ---- SSM: chunked SSD and decode step against the scan -----------------------------------------
 */

struct ssm_case {
	struct lm_dims dm;
	struct gpu_mamba_dims gm;
	int T;
	size_t ldx, ldd, ldy, nstate;
	float *xbc, *dt_raw, *dt_bias, *a_log, *dskip, *state0;
	float dt_min, dt_max;
	/* the reference: the CPU's dt and A, then lm_ssm_scan from state0 */
	float *dt, *a, *want_y, *want_state;
};

static void ssm_case_init(struct ssm_case *c, const struct shape *s, int T)
{
	dims_of(s, &c->dm, &c->gm);
	c->T = T;
	c->ldx = (size_t)c->dm.conv_dim + 3;
	c->ldd = (size_t)c->dm.H + 2;
	c->ldy = (size_t)c->dm.d_in + 1;
	c->nstate = (size_t)c->dm.H * c->dm.P * c->dm.N;
	c->xbc = rand_floats((size_t)T * c->ldx, 1.0f, 0.0f);
	c->dt_raw = rand_floats((size_t)T * c->ldd, 2.0f, -1.0f);
	c->dt_bias = rand_floats((size_t)c->dm.H, 0.5f, 0.0f);
	c->a_log = rand_floats((size_t)c->dm.H, 1.0f, 0.0f);
	c->dskip = rand_floats((size_t)c->dm.H, 1.0f, 0.0f);
	c->state0 = rand_floats(c->nstate, 1.0f, 0.0f);
	c->dt_min = 0.001f, c->dt_max = 1.0f;
	/* one large raw value exercises softplus's linear branch and the upper clamp */
	c->dt_raw[0] = 25.0f;

	c->dt = xmalloc((size_t)T * c->dm.H * sizeof(float));
	lm_dt_softplus(&c->dm, T, c->dt_raw, c->ldd, c->dt_bias, c->dt_min, c->dt_max, c->dt);
	c->a = xmalloc((size_t)c->dm.H * sizeof(float));
	for (int h = 0; h < c->dm.H; h++)
		c->a[h] = -expf(c->a_log[h]);
	c->want_y = xmalloc((size_t)T * c->dm.d_in * sizeof(float));
	c->want_state = xmalloc(c->nstate * sizeof(float));
	memcpy(c->want_state, c->state0, c->nstate * sizeof(float));
	lm_ssm_scan(&c->dm, T, c->xbc, c->ldx, c->dt, c->a, c->dskip, c->want_state, c->want_y);
}

static void ssm_case_free(struct ssm_case *c)
{
	free(c->xbc), free(c->dt_raw), free(c->dt_bias), free(c->a_log), free(c->dskip);
	free(c->state0), free(c->dt), free(c->a), free(c->want_y), free(c->want_state);
}

struct ssm_dev {
	float *xbc, *dt_raw, *dt_bias, *a_log, *dskip, *state, *y;
};

static void ssm_dev_init(struct ssm_dev *d, const struct ssm_case *c)
{
	d->xbc = dev_from(c->xbc, (size_t)c->T * c->ldx * sizeof(float));
	d->dt_raw = dev_from(c->dt_raw, (size_t)c->T * c->ldd * sizeof(float));
	d->dt_bias = dev_from(c->dt_bias, (size_t)c->dm.H * sizeof(float));
	d->a_log = dev_from(c->a_log, (size_t)c->dm.H * sizeof(float));
	d->dskip = dev_from(c->dskip, (size_t)c->dm.H * sizeof(float));
	d->state = dev_from(c->state0, c->nstate * sizeof(float));
	d->y = dev_from(NULL, (size_t)c->T * c->ldy * sizeof(float));
}

static void ssm_dev_free(struct ssm_dev *d)
{
	gpu_free(g, d->xbc), gpu_free(g, d->dt_raw), gpu_free(g, d->dt_bias), gpu_free(g, d->a_log);
	gpu_free(g, d->dskip), gpu_free(g, d->state), gpu_free(g, d->y);
}

/* Device y and state against the scan. */
static void ssm_check(const char *what, const struct ssm_case *c, const struct ssm_dev *d)
{
	float *yy = xmalloc((size_t)c->T * c->ldy * sizeof(float)),
	      *y = xmalloc((size_t)c->T * c->dm.d_in * sizeof(float));
	float *st = xmalloc(c->nstate * sizeof(float));
	to_host(yy, d->y, (size_t)c->T * c->ldy * sizeof(float));
	to_host(st, d->state, c->nstate * sizeof(float));
	for (int t = 0; t < c->T; t++)
		memcpy(y + (size_t)t * c->dm.d_in, yy + (size_t)t * c->ldy,
		       (size_t)c->dm.d_in * sizeof(float));
	char buf[128];
	snprintf(buf, sizeof(buf), "%s T=%d y", what, c->T);
	check_close(buf, y, c->want_y, (size_t)c->T * c->dm.d_in, 2e-5, 2e-5);
	snprintf(buf, sizeof(buf), "%s T=%d state", what, c->T);
	check_close(buf, st, c->want_state, c->nstate, 2e-5, 2e-5);
	free(yy), free(y), free(st);
}

/* gpu_mamba_ssd over [t0, t0 + n) of the case, on the device state */
static void ssd_run(const struct ssm_case *c, const struct ssm_dev *d, int t0, int n)
{
	size_t ws_bytes = gpu_mamba_ssd_workspace_bytes(&c->gm, n);
	CHECK(ws_bytes > 0);
	void *ws = dev_from(NULL, ws_bytes);
	/* a workspace full of NaN: the kernels must write everything they read */
	CHECK_INT_EQ(gpu_memset(g, ws, 0xff, ws_bytes), 0);
	CHECK_INT_EQ(gpu_mamba_ssd(g, &c->gm, n, d->xbc + (size_t)t0 * c->ldx, c->ldx,
				   d->dt_raw + (size_t)t0 * c->ldd, c->ldd, d->dt_bias, d->a_log, d->dskip,
				   c->dt_min, c->dt_max, d->state, d->y + (size_t)t0 * c->ldy, c->ldy, ws),
		     0);
	gpu_free(g, ws);
}

static void test_ssd(const struct shape *s, int T, int split)
{
	struct ssm_case c;
	ssm_case_init(&c, s, T);
	struct ssm_dev d;
	ssm_dev_init(&d, &c);
	if (split > 0 && split < T) {
		ssd_run(&c, &d, 0, split);
		ssd_run(&c, &d, split, T - split);
	} else {
		ssd_run(&c, &d, 0, T);
	}
	char what[96];
	snprintf(what, sizeof(what), "ssd H=%d P=%d N=%d G=%d chunk=%d split %d", s->H, s->P, s->N, s->G,
		 s->chunk, split);
	ssm_check(what, &c, &d);

	/* the CPU's chunked form agrees with the same scan (so both references hold) */
	if (split == 0) {
		float *st = xmalloc(c.nstate * sizeof(float)),
		      *y = xmalloc((size_t)T * c.dm.d_in * sizeof(float));
		float *cb = xmalloc(lm_ssm_cb_floats(&c.dm, T) * sizeof(float));
		memcpy(st, c.state0, c.nstate * sizeof(float));
		REQUIRE(cpu_reserve_scratch(lm_ssm_scratch_bytes(&c.dm)) == 0);
		lm_ssm_chunked(&c.dm, T, c.xbc, c.ldx, c.dt, c.a, c.dskip, st, y, cb);
		snprintf(what, sizeof(what), "lm_ssm_chunked T=%d y", T);
		check_close(what, y, c.want_y, (size_t)T * c.dm.d_in, 2e-5, 2e-5);
		free(st), free(y), free(cb);
	}
	ssm_dev_free(&d);
	ssm_case_free(&c);
}

/* T decode steps in a row equal the scan over the T positions. */
static void test_step(const struct shape *s, int T)
{
	struct ssm_case c;
	ssm_case_init(&c, s, T);
	struct ssm_dev d;
	ssm_dev_init(&d, &c);
	for (int t = 0; t < T; t++)
		CHECK_INT_EQ(gpu_mamba_ssm_step(g, &c.gm, d.xbc + (size_t)t * c.ldx,
						d.dt_raw + (size_t)t * c.ldd, d.dt_bias, d.a_log, d.dskip,
						c.dt_min, c.dt_max, d.state, d.y + (size_t)t * c.ldy),
			     0);
	char what[96];
	snprintf(what, sizeof(what), "step H=%d P=%d N=%d G=%d", s->H, s->P, s->N, s->G);
	ssm_check(what, &c, &d);
	ssm_dev_free(&d);
	ssm_case_free(&c);
}

/* A bf16 state: SSD over [0, split) and [split, T), then n_step decode steps, on the device and
 * on the CPU's bf16-state functions from the same rounded state. */
static void test_bf16_state(const struct shape *s, int T, int split, int n_step)
{
	struct ssm_case c;
	ssm_case_init(&c, s, T + n_step);
	c.gm.state_dtype = GPU_DTYPE_BF16;
	uint16_t *s16 = xmalloc(c.nstate * sizeof(uint16_t));
	for (size_t i = 0; i < c.nstate; i++)
		s16[i] = to_bf16(c.state0[i]);
	struct ssm_dev d;
	ssm_dev_init(&d, &c);
	gpu_free(g, d.state);
	d.state = dev_from(s16, c.nstate * sizeof(uint16_t));

	/* the CPU's bf16 state: the same cuts */
	float *want_y = xmalloc((size_t)(T + n_step) * c.dm.d_in * sizeof(float));
	float *cb = xmalloc(lm_ssm_cb_floats(&c.dm, T) * sizeof(float));
	REQUIRE(cpu_reserve_scratch(lm_ssm_scratch_bytes(&c.dm)) == 0);
	int cuts[3] = {0, split > 0 && split < T ? split : T, T};
	for (int i = 0; i < 2; i++) {
		int t0 = cuts[i], n = cuts[i + 1] - cuts[i];
		if (n == 0)
			continue;
		lm_ssm_chunked_s16(&c.dm, n, c.xbc + (size_t)t0 * c.ldx, c.ldx, c.dt + (size_t)t0 * c.dm.H,
				   c.a, c.dskip, s16, want_y + (size_t)t0 * c.dm.d_in, cb);
		ssd_run(&c, &d, t0, n);
	}
	for (int t = T; t < T + n_step; t++) {
		lm_ssm_scan_s16(&c.dm, 1, c.xbc + (size_t)t * c.ldx, c.ldx, c.dt + (size_t)t * c.dm.H, c.a,
				c.dskip, s16, want_y + (size_t)t * c.dm.d_in);
		CHECK_INT_EQ(gpu_mamba_ssm_step(g, &c.gm, d.xbc + (size_t)t * c.ldx,
						d.dt_raw + (size_t)t * c.ldd, d.dt_bias, d.a_log, d.dskip,
						c.dt_min, c.dt_max, d.state, d.y + (size_t)t * c.ldy),
			     0);
	}

	size_t rows = (size_t)(T + n_step);
	float *yy = xmalloc(rows * c.ldy * sizeof(float)), *y = xmalloc(rows * c.dm.d_in * sizeof(float));
	uint16_t *got16 = xmalloc(c.nstate * sizeof(uint16_t));
	float *got = xmalloc(c.nstate * sizeof(float)), *want = xmalloc(c.nstate * sizeof(float));
	to_host(yy, d.y, rows * c.ldy * sizeof(float));
	to_host(got16, d.state, c.nstate * sizeof(uint16_t));
	for (size_t t = 0; t < rows; t++)
		memcpy(y + t * c.dm.d_in, yy + t * c.ldy, (size_t)c.dm.d_in * sizeof(float));
	for (size_t i = 0; i < c.nstate; i++)
		got[i] = from_bf16(got16[i]), want[i] = from_bf16(s16[i]);
	char what[128];
	snprintf(what, sizeof(what), "bf16 state H=%d P=%d N=%d T=%d split %d, %d steps: y", s->H, s->P, s->N,
		 T, split, n_step);
	check_close(what, y, want_y, rows * c.dm.d_in, 2e-5, 1.0 / 256);
	snprintf(what, sizeof(what), "bf16 state H=%d P=%d N=%d T=%d split %d, %d steps: state", s->H, s->P,
		 s->N, T, split, n_step);
	check_close(what, got, want, c.nstate, 2e-5, 1.0 / 256);
	/* the fp32 reference is near: the rounding is the only difference */
	check_close("bf16 state vs the fp32 scan: y", want_y, c.want_y, rows * c.dm.d_in, 5e-2, 5e-2);

	free(yy), free(y), free(got16), free(got), free(want), free(want_y), free(cb), free(s16);
	ssm_dev_free(&d);
	ssm_case_free(&c);
}

/* ---- gated grouped RMSNorm --------------------------------------------------------------------
 */

static void test_gated_norm(const struct shape *s, int T)
{
	struct lm_dims dm;
	struct gpu_mamba_dims gm;
	dims_of(s, &dm, &gm);
	size_t d_in = (size_t)dm.d_in, ldy = d_in + 3, ldz = d_in + 7, ldo = d_in + 1;
	float *y = rand_floats((size_t)T * ldy, 2.0f, 0.0f), *z = rand_floats((size_t)T * ldz, 3.0f, 0.0f);
	float *w = rand_floats(d_in, 0.5f, 1.0f);
	float eps = 1e-5f;
	float *want = xmalloc((size_t)T * d_in * sizeof(float));
	for (int t = 0; t < T; t++)
		memcpy(want + (size_t)t * d_in, y + (size_t)t * ldy, d_in * sizeof(float));
	/* lm_gated_rmsnorm works in place on rows of d_in */
	lm_gated_rmsnorm(&dm, T, want, z, ldz, w, eps);

	float *dy = dev_from(y, (size_t)T * ldy * sizeof(float)),
	      *dz = dev_from(z, (size_t)T * ldz * sizeof(float));
	float *dw = dev_from(w, d_in * sizeof(float));
	float *dof = dev_from(NULL, (size_t)T * ldo * sizeof(float));
	uint16_t *dob = dev_from(NULL, (size_t)T * ldo * sizeof(uint16_t));
	CHECK_INT_EQ(gpu_mamba_gated_rmsnorm(g, &gm, T, dy, ldy, dz, ldz, dw, eps, dof, ldo, GPU_DTYPE_F32),
		     0);
	CHECK_INT_EQ(gpu_mamba_gated_rmsnorm(g, &gm, T, dy, ldy, dz, ldz, dw, eps, dob, ldo, GPU_DTYPE_BF16),
		     0);
	/* in place last: it overwrites the input of the two calls above */
	CHECK_INT_EQ(gpu_mamba_gated_rmsnorm(g, &gm, T, dy, ldy, dz, ldz, dw, eps, dy, ldy, GPU_DTYPE_F32), 0);

	float *of = xmalloc((size_t)T * ldo * sizeof(float)), *oi = xmalloc((size_t)T * ldy * sizeof(float));
	uint16_t *ob = xmalloc((size_t)T * ldo * sizeof(uint16_t));
	float *gf = xmalloc((size_t)T * d_in * sizeof(float)),
	      *gb = xmalloc((size_t)T * d_in * sizeof(float));
	float *gi = xmalloc((size_t)T * d_in * sizeof(float));
	to_host(of, dof, (size_t)T * ldo * sizeof(float));
	to_host(ob, dob, (size_t)T * ldo * sizeof(uint16_t));
	to_host(oi, dy, (size_t)T * ldy * sizeof(float));
	for (int t = 0; t < T; t++)
		for (size_t i = 0; i < d_in; i++) {
			gf[(size_t)t * d_in + i] = of[(size_t)t * ldo + i];
			gb[(size_t)t * d_in + i] = from_bf16(ob[(size_t)t * ldo + i]);
			gi[(size_t)t * d_in + i] = oi[(size_t)t * ldy + i];
		}
	char what[96];
	snprintf(what, sizeof(what), "gated norm G=%d T=%d f32", s->G, T);
	check_close(what, gf, want, (size_t)T * d_in, 1e-6, 1e-5);
	snprintf(what, sizeof(what), "gated norm G=%d T=%d in place", s->G, T);
	check_close(what, gi, want, (size_t)T * d_in, 1e-6, 1e-5);
	snprintf(what, sizeof(what), "gated norm G=%d T=%d bf16", s->G, T);
	check_close(what, gb, want, (size_t)T * d_in, 1e-5, 1.0 / 256 + 1e-5);

	gpu_free(g, dy), gpu_free(g, dz), gpu_free(g, dw), gpu_free(g, dof), gpu_free(g, dob);
	free(y), free(z), free(w), free(want), free(of), free(oi), free(ob), free(gf), free(gb), free(gi);
}

/* ---- the mixer as the forward chains it --------------------------------------------------------
 */

/* A prefill of T0 positions then n_decode one-position steps, everything read from in_proj-like
 * rows zx [T][in_rows] = [z | xBC | dt] as the forward lays them out: conv -> SSD (or step) ->
 * gated norm on the device against lm_conv_silu -> lm_dt_softplus -> lm_ssm_chunked (lm_ssm_scan
 * for one position) -> lm_gated_rmsnorm on the CPU, outputs and both states compared. */
static void test_mixer(const struct shape *s, int T0, int n_decode)
{
	struct lm_dims dm;
	struct gpu_mamba_dims gm;
	dims_of(s, &dm, &gm);
	const int cd = dm.conv_dim, K = dm.K, H = dm.H, d_in = dm.d_in, T = T0 + n_decode;
	const size_t in_rows = (size_t)2 * d_in + 2 * (size_t)s->G * s->N + H;
	const size_t nconv = (size_t)(K - 1) * cd, nssm = (size_t)H * dm.P * dm.N;
	const float eps = 1e-5f, dt_min = 0.001f, dt_max = 0.5f;
	float *zx = rand_floats((size_t)T * in_rows, 1.0f, 0.0f),
	      *w = rand_floats((size_t)cd * K, 0.5f, 0.0f);
	float *bias = rand_floats((size_t)cd, 0.2f, 0.0f), *dtb = rand_floats((size_t)H, 0.5f, -1.0f);
	float *a_log = rand_floats((size_t)H, 0.5f, 0.0f), *dsk = rand_floats((size_t)H, 1.0f, 0.0f);
	float *gw = rand_floats((size_t)d_in, 0.3f, 1.0f);
	float *conv0 = rand_floats(nconv, 1.0f, 0.0f), *ssm0 = rand_floats(nssm, 0.5f, 0.0f);

	/* the CPU */
	float *cwt = xmalloc((size_t)cd * K * sizeof(float)), *a = xmalloc((size_t)H * sizeof(float));
	for (int c = 0; c < cd; c++)
		for (int k = 0; k < K; k++)
			cwt[(size_t)k * cd + c] = w[(size_t)c * K + k];
	for (int h = 0; h < H; h++)
		a[h] = -expf(a_log[h]);
	float *cst = xmalloc(MAX(nconv, 1) * sizeof(float)), *sst = xmalloc(nssm * sizeof(float));
	memcpy(cst, conv0, nconv * sizeof(float));
	memcpy(sst, ssm0, nssm * sizeof(float));
	float *cbuf = xmalloc((size_t)(K - 1 + T0) * cd * sizeof(float));
	float *xc = xmalloc((size_t)T0 * cd * sizeof(float)), *dt = xmalloc((size_t)T0 * H * sizeof(float));
	float *want = xmalloc((size_t)T * d_in * sizeof(float));
	float *cb = xmalloc(lm_ssm_cb_floats(&dm, T0) * sizeof(float));
	REQUIRE(cpu_reserve_scratch(lm_ssm_scratch_bytes(&dm)) == 0);
	for (int t = 0; t < T;) {
		int n = t == 0 ? T0 : 1;
		const float *row = zx + (size_t)t * in_rows;
		float *y = want + (size_t)t * d_in;
		lm_conv_silu(&dm, n, row + d_in, in_rows, cwt, bias, cst, cbuf, xc);
		lm_dt_softplus(&dm, n, row + d_in + cd, in_rows, dtb, dt_min, dt_max, dt);
		if (n == 1)
			lm_ssm_scan(&dm, n, xc, (size_t)cd, dt, a, dsk, sst, y);
		else
			lm_ssm_chunked(&dm, n, xc, (size_t)cd, dt, a, dsk, sst, y, cb);
		lm_gated_rmsnorm(&dm, n, y, row, in_rows, gw, eps);
		t += n;
	}

	/* the device */
	float *dzx = dev_from(zx, (size_t)T * in_rows * sizeof(float)),
	      *dw = dev_from(w, (size_t)cd * K * sizeof(float));
	float *dbias = dev_from(bias, (size_t)cd * sizeof(float)),
	      *ddtb = dev_from(dtb, (size_t)H * sizeof(float));
	float *dalog = dev_from(a_log, (size_t)H * sizeof(float)),
	      *ddsk = dev_from(dsk, (size_t)H * sizeof(float));
	float *dgw = dev_from(gw, (size_t)d_in * sizeof(float)),
	      *dconv = dev_from(conv0, nconv * sizeof(float));
	float *dssm = dev_from(ssm0, nssm * sizeof(float)),
	      *dxc = dev_from(NULL, (size_t)T0 * cd * sizeof(float));
	float *dy = dev_from(NULL, (size_t)T * d_in * sizeof(float));
	size_t ws_bytes = gpu_mamba_ssd_workspace_bytes(&gm, T0);
	void *ws = dev_from(NULL, ws_bytes);
	for (int t = 0; t < T;) {
		int n = t == 0 ? T0 : 1;
		const float *row = dzx + (size_t)t * in_rows;
		float *y = dy + (size_t)t * d_in;
		CHECK_INT_EQ(gpu_mamba_conv_silu(g, &gm, n, row + d_in, in_rows, dw, GPU_DTYPE_F32, dbias,
						 dconv, dxc, (size_t)cd),
			     0);
		if (n == 1)
			CHECK_INT_EQ(gpu_mamba_ssm_step(g, &gm, dxc, row + d_in + cd, ddtb, dalog, ddsk,
							dt_min, dt_max, dssm, y),
				     0);
		else
			CHECK_INT_EQ(gpu_mamba_ssd(g, &gm, n, dxc, (size_t)cd, row + d_in + cd, in_rows, ddtb,
						   dalog, ddsk, dt_min, dt_max, dssm, y, (size_t)d_in, ws),
				     0);
		CHECK_INT_EQ(gpu_mamba_gated_rmsnorm(g, &gm, n, y, (size_t)d_in, row, in_rows, dgw, eps, y,
						     (size_t)d_in, GPU_DTYPE_F32),
			     0);
		t += n;
	}
	float *got = xmalloc((size_t)T * d_in * sizeof(float)),
	      *gconv = xmalloc(MAX(nconv, 1) * sizeof(float));
	float *gssm = xmalloc(nssm * sizeof(float));
	to_host(got, dy, (size_t)T * d_in * sizeof(float));
	to_host(gconv, dconv, nconv * sizeof(float));
	to_host(gssm, dssm, nssm * sizeof(float));
	char what[96];
	snprintf(what, sizeof(what), "mixer P=%d N=%d T0=%d + %d out", s->P, s->N, T0, n_decode);
	check_close(what, got, want, (size_t)T * d_in, 2e-5, 2e-5);
	snprintf(what, sizeof(what), "mixer P=%d N=%d T0=%d + %d ssm state", s->P, s->N, T0, n_decode);
	check_close(what, gssm, sst, nssm, 2e-5, 2e-5);
	snprintf(what, sizeof(what), "mixer P=%d N=%d T0=%d + %d conv state", s->P, s->N, T0, n_decode);
	check_close(what, gconv, cst, nconv, 0, 0);

	gpu_free(g, dzx), gpu_free(g, dw), gpu_free(g, dbias), gpu_free(g, ddtb), gpu_free(g, dalog);
	gpu_free(g, ddsk), gpu_free(g, dgw), gpu_free(g, dconv), gpu_free(g, dssm), gpu_free(g, dxc);
	gpu_free(g, dy), gpu_free(g, ws);
	free(zx), free(w), free(bias), free(dtb), free(a_log), free(dsk), free(gw), free(conv0);
	free(ssm0), free(cwt), free(a), free(cst), free(sst), free(cbuf), free(xc), free(dt), free(want);
	free(cb), free(got), free(gconv), free(gssm);
}

/* ---- refusals ---------------------------------------------------------------------------------
 */

static void test_bad_shapes(void)
{
	float *d = dev_from(NULL, 4096);
	struct gpu_mamba_dims ok =
		{.n_heads = 4, .head_dim = 4, .state = 4, .groups = 2, .conv_k = 4, .chunk = 8};
	struct gpu_mamba_dims bad[] = {ok, ok, ok, ok, ok};
	bad[0].conv_k = GPU_MAMBA_MAX_CONV_K + 1;
	bad[1].chunk = 0;
	bad[2].chunk = GPU_MAMBA_MAX_CHUNK + 1;
	bad[3].groups = 3; /* 4 heads in 3 groups */
	bad[4].state = 0;
	for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
		CHECK_INT_EQ(gpu_mamba_conv_silu(g, &bad[i], 1, d, 64, d, GPU_DTYPE_F32, NULL, d, d, 64),
			     -EINVAL);
		CHECK_INT_EQ(gpu_mamba_ssd_workspace_bytes(&bad[i], 4), 0);
		CHECK_INT_EQ(gpu_mamba_ssd(g, &bad[i], 4, d, 64, d, 8, d, d, d, 0.0f, 1.0f, d, d, 16, d),
			     -EINVAL);
		CHECK_INT_EQ(gpu_mamba_ssm_step(g, &bad[i], d, d, d, d, d, 0.0f, 1.0f, d, d), -EINVAL);
		CHECK_INT_EQ(gpu_mamba_gated_rmsnorm(g, &bad[i], 1, d, 16, d, 16, d, 1e-5f, d, 16,
						     GPU_DTYPE_F32),
			     -EINVAL);
	}
	/* T = 0 and rows shorter than the shape (conv_dim 32, d_in 16) */
	CHECK_INT_EQ(gpu_mamba_conv_silu(g, &ok, 0, d, 64, d, GPU_DTYPE_F32, NULL, d, d, 64), -EINVAL);
	CHECK_INT_EQ(gpu_mamba_conv_silu(g, &ok, 1, d, 31, d, GPU_DTYPE_F32, NULL, d, d, 64), -EINVAL);
	CHECK_INT_EQ(gpu_mamba_ssd(g, &ok, 4, d, 31, d, 8, d, d, d, 0.0f, 1.0f, d, d, 16, d), -EINVAL);
	CHECK_INT_EQ(gpu_mamba_ssd(g, &ok, 4, d, 32, d, 3, d, d, d, 0.0f, 1.0f, d, d, 16, d), -EINVAL);
	CHECK_INT_EQ(gpu_mamba_ssd(g, &ok, 4, d, 32, d, 4, d, d, d, 0.0f, 1.0f, d, d, 15, d), -EINVAL);
	CHECK_INT_EQ(gpu_mamba_gated_rmsnorm(g, &ok, 1, d, 16, d, 16, d, 1e-5f, d, 16, (enum gpu_dtype)7),
		     -EINVAL);
	struct gpu_mamba_dims bad_state = ok;
	bad_state.state_dtype = (enum gpu_dtype)7;
	CHECK_INT_EQ(gpu_mamba_ssd(g, &bad_state, 4, d, 32, d, 4, d, d, d, 0.0f, 1.0f, d, d, 16, d), -EINVAL);
	CHECK_INT_EQ(gpu_mamba_ssm_step(g, &bad_state, d, d, d, d, d, 0.0f, 1.0f, d, d), -EINVAL);
	CHECK_INT_EQ(gpu_synchronize(g), 0);
	gpu_free(g, d);
}

int main(void)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	g = gpu_context_create(test_gpu_device());
	REQUIRE(g);

	/* small: state, head dim and channels below one tile; 3 heads per group */
	const struct shape small = {.H = 6, .P = 5, .N = 7, .G = 2, .K = 4, .chunk = 8};
	/* wider: head_dim and state past one 32-wide tile, a chunk of two tiles plus one row */
	const struct shape wide = {.H = 4, .P = 37, .N = 33, .G = 2, .K = 3, .chunk = 33};
	/* one group, a 2-tap conv, chunk 1 (every position its own chunk) */
	const struct shape thin = {.H = 3, .P = 2, .N = 3, .G = 1, .K = 2, .chunk = 1};

	const struct shape *convs[] = {&small, &wide, &thin};
	for (size_t i = 0; i < ARRAY_SIZE(convs); i++) {
		test_conv(convs[i], 1, 0, false);
		test_conv(convs[i], 2, 0, false); /* fewer rows than the state holds (K = 4) */
		test_conv(convs[i], 11, 0, true);
		test_conv(convs[i], 11, 2, false); /* split inside the state's reach */
		test_conv(convs[i], 11, 7, true);
		/* several 64-position tiles of the kernel, whole and split off a tile boundary */
		test_conv(convs[i], 150, 0, false);
		test_conv(convs[i], 150, 70, true);
	}
	const struct shape k1 = {.H = 2, .P = 3, .N = 2, .G = 1, .K = 1, .chunk = 4};
	test_conv(&k1, 5, 2, false);

	int ts[] = {1, 7, 8, 9, 29};
	for (size_t i = 0; i < ARRAY_SIZE(ts); i++)
		test_ssd(&small, ts[i], 0);
	test_ssd(&small, 29, 12); /* a split inside the second chunk */
	test_ssd(&small, 29, 8);  /* a split on a chunk boundary */
	int tw[] = {1, 32, 33, 34, 104};
	for (size_t i = 0; i < ARRAY_SIZE(tw); i++)
		test_ssd(&wide, tw[i], 0);
	test_ssd(&wide, 104, 50);
	test_ssd(&thin, 6, 0);
	test_ssd(&thin, 6, 1);

	test_step(&small, 9);
	test_step(&wide, 3);
	test_step(&thin, 4);

	test_bf16_state(&small, 29, 12, 5);
	test_bf16_state(&wide, 70, 33, 3);
	test_bf16_state(&thin, 6, 0, 4);

	test_gated_norm(&small, 3);
	test_gated_norm(&wide, 2);
	const struct shape big_group = {.H = 8, .P = 40, .N = 4, .G = 1, .K = 4, .chunk = 8};
	test_gated_norm(&big_group, 2); /* one group of 320 channels: more than one per thread */

	test_mixer(&small, 19, 4);
	test_mixer(&wide, 70, 3);

	test_bad_shapes();
	gpu_context_destroy(g);
	return test_exit();
}
