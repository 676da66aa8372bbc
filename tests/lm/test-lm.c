/* Language model on the CPU, against itself: kernels against naive references, chunked SSD
 * prefill against the per-token scan, split prefill against whole prefill, snapshot/restore/copy,
 * embedding overrides, error paths. Uses in-memory random models (no files).
 *
 * Tolerances: the kernels accumulate in fp32 in different orders, so equal math differs by
 * rounding only. Logits are O(1); 2e-4 absolute covers the fp32 reordering over a few layers
 * (observed ~1e-6) while any real bug (a wrong decay, a group off by one, a dropped conv tap)
 * moves logits by 1e-2 or more. Where the same code path runs on the same data (restore, copy)
 * the results must be bit-identical. With quantized weights ($HOLOD_WEIGHTS=q8|q4, meson.build's
 * lm-q8/lm-q4) the same bounds hold: decode (the quantized GEMV) and prefill (the rows
 * dequantized to fp32 into cpu_matmul) multiply the same exact dequantized weights, so they too
 * differ by fp32 summation order alone (observed ~1e-6 on these models); the distance to the
 * unquantized weights is test-lm-golden's. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <pthread.h>
#include <stdio.h>
#include <unistd.h>

#include "common.h"
#include "cpu.h"
#include "engine.h"
#include "lm.h"
#include "test.h"
#include "test-smaps.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

static uint64_t rng = 12345;

static float frand(void)
{
	rng = rng * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((rng >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f;
}

/* ---- matmul ------------------------------------------------------------------------------- */

static uint16_t f16_bits(float f)
{
	/* exact for the values used here: multiples of 2^-8 within (-0.5, 0.5) */
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

static void test_matmul_case(enum tensor_dtype dt, int out, int in, int T, bool acc)
{
	size_t n = (size_t)out * in;
	float *wf = malloc(n * sizeof(float));
	void *wd = malloc(n * 4);
	float *x = malloc((size_t)T * (in + 3) * sizeof(float));
	float *y = malloc((size_t)T * (out + 5) * sizeof(float));
	float *ref = malloc((size_t)T * out * sizeof(float));
	REQUIRE(wf && wd && x && y && ref);
	for (size_t i = 0; i < n; i++) {
		/* values exactly representable in every dtype */
		float v = (float)(int)(frand() * 128) / 256.0f;
		wf[i] = v;
		if (dt == TENSOR_F32)
			((float *)wd)[i] = v;
		else if (dt == TENSOR_BF16)
			((uint16_t *)wd)[i] = f32_to_bf16(v);
		else
			((uint16_t *)wd)[i] = f16_bits(v);
	}
	size_t ldx = (size_t)in + 3, ldy = (size_t)out + 5;
	for (size_t i = 0; i < (size_t)T * ldx; i++)
		x[i] = frand();
	for (size_t i = 0; i < (size_t)T * ldy; i++)
		y[i] = acc ? frand() : NAN;
	for (int t = 0; t < T; t++)
		for (int r = 0; r < out; r++) {
			double s = acc ? y[(size_t)t * ldy + r] : 0;
			for (int k = 0; k < in; k++)
				s += (double)wf[(size_t)r * in + k] * x[(size_t)t * ldx + k];
			ref[(size_t)t * out + r] = (float)s;
		}
	struct tensor w = {.data = wd, .dtype = dt, .ndim = 2, .shape = {out, in}};
	CHECK_INT_EQ(cpu_matmul(&w, x, ldx, T, y, ldy, acc), 0);
	double worst = 0;
	for (int t = 0; t < T; t++)
		for (int r = 0; r < out; r++) {
			double d = fabs((double)y[(size_t)t * ldy + r] - ref[(size_t)t * out + r]);
			worst = d > worst || isnan(d) ? d : worst;
		}
	if (!(worst < 1e-4))
		fprintf(stderr, "matmul dtype %d %dx%d T=%d acc=%d: max diff %g\n", (int)dt, out, in, T, acc,
			worst);
	CHECK(worst < 1e-4);
	/* the padding columns of y are untouched */
	if (!acc)
		for (int t = 0; t < T; t++)
			for (size_t r = (size_t)out; r < ldy; r++)
				CHECK(isnan(y[(size_t)t * ldy + r]));
	free(wf);
	free(wd);
	free(x);
	free(y);
	free(ref);
}

static void test_matmul(void)
{
	enum tensor_dtype dts[] = {TENSOR_F32, TENSOR_BF16, TENSOR_F16};
	int shapes[][3] = {{19, 37, 1}, {64, 64, 2},  {35, 70, 5}, {40, 129, 50},
			   {7, 8, 3},	{33, 17, 97}, {90, 24, 40}};
	for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++)
		for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
			test_matmul_case(dts[i], shapes[s][0], shapes[s][1], shapes[s][2], false);
			test_matmul_case(dts[i], shapes[s][0], shapes[s][1], shapes[s][2], true);
		}
}

/* vector helpers against libm, over the whole float range that matters (and beyond) */
static void test_vector_kernels(void)
{
	enum { N = 4099 };
	float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
	float *z = malloc(N * sizeof(float)), *w = malloc(N * sizeof(float));
	REQUIRE(x && y && z && w);
	for (int i = 0; i < N; i++) {
		x[i] = -120.0f + 240.0f * (float)i / (float)(N - 1);
		z[i] = frand();
		w[i] = frand();
	}
	cpu_silu(y, x, N);
	double worst = 0;
	for (int i = 0; i < N; i++) {
		double ref = (double)x[i] / (1.0 + exp(-(double)x[i]));
		double err = fabs(y[i] - ref) / fmax(fabs(ref), 1e-30);
		if (fabs(ref) > 1e-30)
			worst = fmax(worst, err);
		CHECK(!isnan(y[i]));
	}
	if (!(worst < 2e-6))
		fprintf(stderr, "silu: max relative error %g\n", worst);
	CHECK(worst < 2e-6);
	memcpy(y, z, N * sizeof(float));
	cpu_mul_silu(y, x, N);
	for (int i = 0; i < N; i++)
		CHECK(fabs(y[i] - z[i] * ((double)x[i] / (1.0 + exp(-(double)x[i])))) <=
		      2e-6 * fabs(x[i]) + 1e-30);
	memcpy(y, z, N * sizeof(float));
	cpu_vfma(y, w, x, N);
	for (int i = 0; i < N; i++)
		CHECK(fabs(y[i] - (z[i] + (double)w[i] * x[i])) <= 1e-5 * (1 + fabs(x[i])));
	memcpy(y, z, N * sizeof(float));
	cpu_axpby(y, 0.5f, -2.0f, w, N);
	for (int i = 0; i < N; i++)
		CHECK(fabs(y[i] - (0.5 * z[i] - 2.0 * w[i])) <= 1e-6);
	free(x);
	free(y);
	free(z);
	free(w);
}

/* ---- SSM: chunked SSD == per-token scan ---------------------------------------------------- */

static void test_ssm_chunked_vs_scan(void)
{
	struct lm_dims dm = {.H = 6, .P = 5, .N = 7, .G = 3, .chunk = 8};
	dm.d_in = dm.H * dm.P;
	int ldx = dm.d_in + 2 * dm.G * dm.N + 3;
	int Ts[] = {1, 7, 8, 9, 37};
	CHECK_INT_EQ(cpu_reserve_scratch(lm_ssm_scratch_bytes(&dm)), 0);
	for (size_t ti = 0; ti < sizeof(Ts) / sizeof(Ts[0]); ti++) {
		int T = Ts[ti];
		float *xbc = malloc((size_t)T * ldx * sizeof(float));
		float *dt = malloc((size_t)T * dm.H * sizeof(float));
		float a[6], dsk[6];
		size_t sn = (size_t)dm.H * dm.P * dm.N;
		float *s1 = malloc(sn * sizeof(float)), *s2 = malloc(sn * sizeof(float));
		float *y1 = malloc((size_t)T * dm.d_in * sizeof(float));
		float *y2 = malloc((size_t)T * dm.d_in * sizeof(float));
		float *cb = malloc(lm_ssm_cb_floats(&dm, T) * sizeof(float));
		REQUIRE(xbc && dt && s1 && s2 && y1 && y2 && cb);
		for (int i = 0; i < T * ldx; i++)
			xbc[i] = frand();
		for (int i = 0; i < T * dm.H; i++)
			dt[i] = 0.3f * (frand() + 1.0f) + 0.001f;
		for (int h = 0; h < dm.H; h++) {
			a[h] = -(float)(h + 1) * 0.7f;
			dsk[h] = frand();
		}
		for (size_t i = 0; i < sn; i++)
			s1[i] = s2[i] = frand();
		lm_ssm_chunked(&dm, T, xbc, (size_t)ldx, dt, a, dsk, s1, y1, cb);
		lm_ssm_scan(&dm, T, xbc, (size_t)ldx, dt, a, dsk, s2, y2);
		double dy = test_max_abs_diff(y1, y2, (size_t)T * dm.d_in);
		double ds = test_max_abs_diff(s1, s2, sn);
		if (!(dy < 1e-5 && ds < 1e-5))
			fprintf(stderr, "ssm T=%d: y diff %g state diff %g\n", T, dy, ds);
		CHECK(dy < 1e-5);
		CHECK(ds < 1e-5);
		/* the scan itself against a float64 recurrence on head 4 (group 4/(6/3) = 2) */
		{
			int h = 4, g = 2;
			double S[5][7];
			for (int p = 0; p < dm.P; p++)
				for (int n = 0; n < dm.N; n++)
					S[p][n] = 0;
			float *s3 = calloc(sn, sizeof(float));
			REQUIRE(s3);
			lm_ssm_scan(&dm, T, xbc, (size_t)ldx, dt, a, dsk, s3, y2);
			double worst = 0;
			for (int t = 0; t < T; t++) {
				const float *row = xbc + (size_t)t * ldx;
				double dA = exp((double)dt[t * dm.H + h] * a[h]);
				for (int p = 0; p < dm.P; p++) {
					double yv = dsk[h] * row[h * dm.P + p];
					for (int n = 0; n < dm.N; n++) {
						S[p][n] = S[p][n] * dA + (double)dt[t * dm.H + h] *
										 row[h * dm.P + p] *
										 row[dm.d_in + g * dm.N + n];
						yv += S[p][n] * row[dm.d_in + dm.G * dm.N + g * dm.N + n];
					}
					worst = fmax(worst, fabs(yv - y2[(size_t)t * dm.d_in + h * dm.P + p]));
				}
			}
			CHECK(worst < 1e-4);
			free(s3);
		}
		free(xbc);
		free(dt);
		free(s1);
		free(s2);
		free(y1);
		free(y2);
		free(cb);
	}
}

/* ---- sessions ----------------------------------------------------------------------------- */

static struct lm_random_spec spec_small(const char *pattern, enum tensor_dtype dt, uint64_t seed)
{
	return (struct lm_random_spec){
		.pattern = pattern,
		.hidden = 64,
		.vocab = 96,
		.intermediate = 96,
		.n_heads = 4,
		.n_kv_heads = 2,
		.head_dim = 16,
		.m_heads = 8,
		.m_head_dim = 8,
		.m_groups = 2,
		.m_state = 16,
		.m_conv_kernel = 4,
		.m_chunk = 8,
		.dtype = dt,
		.seed = seed,
	};
}

/* FNV-1a over a random model's tensors, but dt_bias and a_log (libm's logf and expf make them). */
static uint64_t fnv_bytes(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return h;
}

static uint64_t model_hash(const struct engine_model *m)
{
	uint64_t h = 0xcbf29ce484222325ull;
	h = fnv_bytes(h, m->embeddings.data, m->embeddings.nbytes);
	h = fnv_bytes(h, m->norm_f.data, m->norm_f.nbytes);
	h = fnv_bytes(h, m->lm_head.data, m->lm_head.nbytes);
	for (int l = 0; l < m->cfg.n_layers; l++) {
		const struct lm_layer *L = &m->layers[l];
		const struct tensor *t[] = {&L->norm,		&L->mamba.in_proj, &L->mamba.conv_w,
					    &L->mamba.conv_b,	&L->mamba.d,	   &L->mamba.norm,
					    &L->mamba.out_proj, &L->attn.q,	   &L->attn.k,
					    &L->attn.v,		&L->attn.o,	   &L->mlp.up,
					    &L->mlp.down};
		for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
			if (t[i]->data)
				h = fnv_bytes(h, t[i]->data, t[i]->nbytes);
	}
	return h;
}

/* lm_random_model_create() fills large tensors on the pool (the 12B model's 12e9 values): they
 * must stay the seed's one stream, as the single loop before drew them, whatever the thread
 * count. The hash is of this model built by that loop (commit 92fd644); its embedding and
 * lm_head are 4099 x 128 values each, two whole pool tasks and part of a third. */
static void test_random_stream(void)
{
	struct lm_random_spec sp = spec_small("M*-", TENSOR_BF16, 11);
	sp.hidden = 128;
	sp.vocab = 4099;
	int threads = engine_get_threads();
	for (int n = 1; n <= 3; n += 2) {
		CHECK_INT_EQ(engine_set_threads(n), 0);
		struct engine_model *m = lm_random_model_create(&sp);
		REQUIRE(m);
		CHECK(model_hash(m) == 0xb07960f408183ddfull);
		lm_random_model_destroy(m);
	}
	CHECK_INT_EQ(engine_set_threads(threads), 0);
}

static int32_t *make_tokens(int n, int vocab)
{
	int32_t *t = malloc((size_t)n * sizeof(*t));
	REQUIRE(t);
	for (int i = 0; i < n; i++)
		t[i] = (int32_t)((unsigned)((frand() + 1.0f) * 0.5f * (float)vocab) % (unsigned)vocab);
	return t;
}

static void test_session_model(const struct engine_model *m, struct engine_backend *b, int n)
{
	int V = m->cfg.vocab;
	int32_t *tok = make_tokens(n, V);
	float *all = malloc((size_t)n * V * sizeof(float));
	float *step = malloc((size_t)n * V * sizeof(float));
	float *last = malloc((size_t)V * sizeof(float));
	REQUIRE(all && step && last);

	/* whole prefill (chunked SSD, several chunks and, for n > LM_MAX_BATCH, several runs) */
	struct engine_session *s = engine_session_create_on(b, n + 8);
	REQUIRE(s);
	test_check_env_weights(engine_session_backend(s));
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, (size_t)n, ENGINE_LOGITS_ALL, all), 0);
	CHECK_INT_EQ(engine_session_n_tokens(s), n);

	/* per-token recurrent decode from an empty session */
	struct engine_session *d = engine_session_create_on(b, n + 8);
	REQUIRE(d);
	for (int i = 0; i < n; i++)
		CHECK_INT_EQ(engine_session_decode(d, tok[i], step + (size_t)i * V), 0);
	double diff = test_max_abs_diff(all, step, (size_t)n * V);
	if (getenv("LM_TEST_VERBOSE") || !(diff < 2e-4))
		fprintf(stderr, "%s n=%d: prefill vs decode max diff %g\n", m->cfg.pattern, n, diff);
	CHECK(diff < 2e-4);

	/* split prefill A then B == whole; LAST logits == last row of ALL */
	int cuts[] = {1, 5, 13, n / 2, n - 1};
	for (size_t c = 0; c < sizeof(cuts) / sizeof(cuts[0]); c++) {
		int a = cuts[c];
		if (a <= 0 || a >= n)
			continue;
		engine_session_reset(d);
		CHECK_INT_EQ(engine_session_append(d, tok, NULL, (size_t)a, ENGINE_LOGITS_NONE, NULL), 0);
		CHECK_INT_EQ(engine_session_append(d, tok + a, NULL, (size_t)(n - a), ENGINE_LOGITS_ALL, step),
			     0);
		diff = test_max_abs_diff(all + (size_t)a * V, step, (size_t)(n - a) * V);
		if (!(diff < 2e-4))
			fprintf(stderr, "%s split %d+%d: max diff %g\n", m->cfg.pattern, a, n - a, diff);
		CHECK(diff < 2e-4);
	}
	engine_session_reset(d);
	CHECK_INT_EQ(engine_session_append(d, tok, NULL, (size_t)n, ENGINE_LOGITS_LAST, last), 0);
	CHECK(test_max_abs_diff(all + (size_t)(n - 1) * V, last, (size_t)V) < 1e-5);

	/* snapshot / restore / copy: continuing gives identical logits and ids */
	struct engine_snapshot *snap = engine_session_snapshot(s);
	REQUIRE(snap);
	CHECK_INT_EQ(engine_snapshot_n_tokens(snap), n);
	CHECK(engine_snapshot_bytes(snap) == engine_session_state_bytes(s));
	struct engine_session *cp = engine_session_copy(s);
	REQUIRE(cp);
	float *cont1 = malloc(8 * (size_t)V * sizeof(float)), *cont2 = malloc(8 * (size_t)V * sizeof(float));
	float *cont3 = malloc(8 * (size_t)V * sizeof(float));
	REQUIRE(cont1 && cont2 && cont3);
	int32_t next = 3;
	for (int i = 0; i < 8; i++) {
		CHECK_INT_EQ(engine_session_decode(s, next, cont1 + (size_t)i * V), 0);
		next = (next * 7 + 5) % V;
	}
	/* the copy and the original evolve independently */
	CHECK_INT_EQ(engine_session_n_tokens(cp), n);
	CHECK_INT_EQ(engine_session_restore(s, snap), 0);
	CHECK_INT_EQ(engine_session_n_tokens(s), n);
	next = 3;
	for (int i = 0; i < 8; i++) {
		CHECK_INT_EQ(engine_session_decode(s, next, cont2 + (size_t)i * V), 0);
		CHECK_INT_EQ(engine_session_decode(cp, next, cont3 + (size_t)i * V), 0);
		next = (next * 7 + 5) % V;
	}
	CHECK(memcmp(cont1, cont2, 8 * (size_t)V * sizeof(float)) == 0);
	CHECK(memcmp(cont1, cont3, 8 * (size_t)V * sizeof(float)) == 0);
	/* restoring into a fresh session of the same model works too */
	struct engine_session *fresh = engine_session_create_on(b, n + 8);
	REQUIRE(fresh);
	CHECK_INT_EQ(engine_session_restore(fresh, snap), 0);
	CHECK_INT_EQ(engine_session_decode(fresh, 3, cont2), 0);
	CHECK(memcmp(cont1, cont2, (size_t)V * sizeof(float)) == 0);
	/* a session too small for the snapshot refuses it and stays as it was */
	struct engine_session *tiny = engine_session_create_on(b, 2);
	REQUIRE(tiny);
	CHECK_INT_EQ(engine_session_restore(tiny, snap), -ENOSPC);
	CHECK_INT_EQ(engine_session_n_tokens(tiny), 0);

	engine_session_destroy(tiny);
	engine_session_destroy(fresh);
	engine_snapshot_destroy(snap);
	engine_session_destroy(cp);
	engine_session_destroy(d);
	engine_session_destroy(s);
	free(cont1);
	free(cont2);
	free(cont3);
	free(tok);
	free(all);
	free(step);
	free(last);
}

static void test_embeds_and_errors(const struct engine_model *m, struct engine_backend *b)
{
	int V = m->cfg.vocab, d = m->cfg.hidden;
	int32_t tok[6] = {5, 9, 17, 33, 2, 71};
	float *ref = malloc((size_t)6 * V * sizeof(float)), *got = malloc((size_t)6 * V * sizeof(float));
	float *rows = malloc((size_t)2 * d * sizeof(float));
	REQUIRE(ref && got && rows);
	struct engine_session *s = engine_session_create_on(b, 6);
	REQUIRE(s);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 6, ENGINE_LOGITS_ALL, ref), 0);

	/* positions 1 and 4 take explicit rows equal to the embeddings of their tokens, under a
	 * different placeholder id: same logits as the plain tokens */
	cpu_tensor_to_f32(&m->embeddings, (size_t)tok[1] * d, (size_t)d, rows);
	cpu_tensor_to_f32(&m->embeddings, (size_t)tok[4] * d, (size_t)d, rows + d);
	const float *embeds[6] = {NULL, rows, NULL, NULL, rows + d, NULL};
	int32_t placeholder[6] = {5, 0, 17, 33, 0, 71};
	engine_session_reset(s);
	CHECK_INT_EQ(engine_session_append(s, placeholder, embeds, 6, ENGINE_LOGITS_ALL, got), 0);
	CHECK(test_max_abs_diff(ref, got, (size_t)6 * V) == 0);
	/* and without the override the placeholder changes the result */
	engine_session_reset(s);
	CHECK_INT_EQ(engine_session_append(s, placeholder, NULL, 6, ENGINE_LOGITS_ALL, got), 0);
	CHECK(test_max_abs_diff(ref + V, got + V, (size_t)V) > 1e-3);

	/* errors leave the session unchanged */
	engine_session_reset(s);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 3, ENGINE_LOGITS_NONE, NULL), 0);
	int32_t bad[2] = {1, V};
	CHECK_INT_EQ(engine_session_append(s, bad, NULL, 2, ENGINE_LOGITS_LAST, got), -EINVAL);
	bad[1] = -1;
	CHECK_INT_EQ(engine_session_append(s, bad, NULL, 2, ENGINE_LOGITS_LAST, got), -EINVAL);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 4, ENGINE_LOGITS_LAST, got), -ENOSPC);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 0, ENGINE_LOGITS_LAST, got), -EINVAL);
	CHECK_INT_EQ(engine_session_append(s, tok, NULL, 1, ENGINE_LOGITS_LAST, NULL), -EINVAL);
	CHECK_INT_EQ(engine_session_n_tokens(s), 3);
	CHECK_INT_EQ(engine_session_append(s, tok + 3, NULL, 3, ENGINE_LOGITS_LAST, got), 0);
	CHECK(test_max_abs_diff(ref + 5 * (size_t)V, got, (size_t)V) < 2e-4);
	CHECK_INT_EQ(engine_session_decode(s, 1, got), -ENOSPC);

	CHECK(engine_session_create_on(b, 0) == NULL && errno == EINVAL);
	CHECK(engine_session_create_on(NULL, 5) == NULL && errno == EINVAL);
	engine_session_destroy(NULL);
	engine_snapshot_destroy(NULL);

	engine_session_destroy(s);
	free(ref);
	free(got);
	free(rows);
}

/* a model whose shapes disagree with its config is refused */
static void test_bad_model(void)
{
	struct lm_random_spec sp = spec_small("M*-", TENSOR_BF16, 3);
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	m->cfg.m_groups = 3; /* H = 8 is not a multiple of 3, and in_proj rows no longer match */
	errno = 0;
	CHECK(test_env_backend(m) == NULL && errno == EINVAL);
	m->cfg.m_groups = 2;
	m->layers[1].attn.k.shape[0] = 16;
	CHECK(test_env_backend(m) == NULL && errno == EINVAL);
	lm_random_model_destroy(m);

	/* Sizes that each pass their own limit but whose products do not fit an int: H = G = 4096,
	 * N = 2^20, P = 1 make 2*G*N = 2^33, so conv_dim and the in_proj rows wrap to 4096 and
	 * 12288. Tensors of those small shapes must not pass for the model (the SSM would then
	 * index B/C at g*N, gigabytes past them). */
	sp = spec_small("M", TENSOR_BF16, 4);
	m = lm_random_model_create(&sp);
	REQUIRE(m);
	struct lm_layer *L = &m->layers[0];
	int64_t d = m->cfg.hidden;
	m->cfg.m_heads = 4096;
	m->cfg.m_groups = 4096;
	m->cfg.m_state = 1 << 20;
	m->cfg.m_head_dim = 1;
	L->mamba.in_proj.shape[0] = 12288;
	L->mamba.conv_w.shape[0] = 4096;
	L->mamba.conv_b.shape[0] = 4096;
	L->mamba.dt_bias.shape[0] = L->mamba.a_log.shape[0] = L->mamba.d.shape[0] = 4096;
	L->mamba.norm.shape[0] = 4096;
	L->mamba.out_proj.shape[0] = d;
	L->mamba.out_proj.shape[1] = 4096;
	CHECK_INT_EQ(lm_model_check(m), -EINVAL);
	lm_random_model_destroy(m);
}

/* A chunk_size beyond what one forward call holds computes what LM_MAX_BATCH does, with the
 * same scratch (not chunk^2 floats per thread). */
static void test_long_chunk(void)
{
	struct lm_random_spec sp = spec_small("M*", TENSOR_BF16, 5);
	sp.m_chunk = 1 << 16;
	struct engine_model *big = lm_random_model_create(&sp);
	sp.m_chunk = LM_MAX_BATCH;
	struct engine_model *ref = lm_random_model_create(&sp);
	REQUIRE(big && ref);
	struct lm_dims db, dr;
	lm_dims_init(&db, &big->cfg);
	lm_dims_init(&dr, &ref->cfg);
	CHECK_INT_EQ(lm_ssm_scratch_bytes(&db), lm_ssm_scratch_bytes(&dr));

	int n = 40, V = big->cfg.vocab;
	int32_t *tok = make_tokens(n, V);
	float *a = malloc(sizeof(float) * (size_t)n * V), *b = malloc(sizeof(float) * (size_t)n * V);
	struct engine_backend *bbig = test_env_backend(big), *bref = test_env_backend(ref);
	REQUIRE(bbig && bref);
	struct engine_session *sa = engine_session_create_on(bbig, n);
	struct engine_session *sb = engine_session_create_on(bref, n);
	REQUIRE(a && b && sa && sb);
	CHECK_INT_EQ(engine_session_append(sa, tok, NULL, (size_t)n, ENGINE_LOGITS_ALL, a), 0);
	CHECK_INT_EQ(engine_session_append(sb, tok, NULL, (size_t)n, ENGINE_LOGITS_ALL, b), 0);
	CHECK(test_max_abs_diff(a, b, (size_t)n * V) == 0);
	engine_session_destroy(sa);
	engine_session_destroy(sb);
	engine_backend_destroy(bbig);
	engine_backend_destroy(bref);
	free(a);
	free(b);
	free(tok);
	lm_random_model_destroy(big);
	lm_random_model_destroy(ref);
}

/* ---- two sessions on two threads share the pool ------------------------------------------- */

struct thread_run {
	const struct engine_model *m;
	struct engine_backend *b;
	const int32_t *tok;
	int n;
	float *logits; /* [n][vocab] */
	int rc;
};

static void *thread_main(void *p)
{
	struct thread_run *r = p;
	struct engine_session *s = engine_session_create_on(r->b, r->n);
	r->rc = -ENOMEM;
	if (!s)
		return NULL;
	int V = r->m->cfg.vocab, half = r->n / 2;
	/* a prefill (large jobs) followed by decode steps (small jobs) */
	r->rc = engine_session_append(s, r->tok, NULL, (size_t)half, ENGINE_LOGITS_ALL, r->logits);
	for (int i = half; i < r->n && r->rc == 0; i++)
		r->rc = engine_session_decode(s, r->tok[i], r->logits + (size_t)i * V);
	engine_session_destroy(s);
	return NULL;
}

static void test_threads(const struct engine_model *m, struct engine_backend *b)
{
	int V = m->cfg.vocab, n = 60;
	struct thread_run runs[2];
	float *serial = malloc((size_t)n * V * sizeof(float));
	REQUIRE(serial);
	int32_t *toks[2];
	for (int i = 0; i < 2; i++) {
		toks[i] = make_tokens(n, V);
		runs[i] = (struct thread_run){.m = m, .b = b, .tok = toks[i], .n = n};
		runs[i].logits = malloc((size_t)n * V * sizeof(float));
		REQUIRE(runs[i].logits);
	}
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&th[i], NULL, thread_main, &runs[i]) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < 2; i++) {
		CHECK_INT_EQ(runs[i].rc, 0);
		struct thread_run one = {.m = m, .b = b, .tok = toks[i], .n = n, .logits = serial};
		thread_main(&one);
		CHECK_INT_EQ(one.rc, 0);
		CHECK(memcmp(serial, runs[i].logits, (size_t)n * V * sizeof(float)) == 0);
		free(runs[i].logits);
		free(toks[i]);
	}
	free(serial);
}

/* ---- sampling ------------------------------------------------------------------------------ */

static void test_sampling(void)
{
	enum { V = 16 };
	float logits[V];
	for (int i = 0; i < V; i++)
		logits[i] = 0.1f * (float)((i * 7) % V); /* a permutation of 0.0 .. 1.5 */
	int32_t best = 0;
	for (int i = 1; i < V; i++)
		if (logits[i] > logits[best])
			best = i;

	/* greedy: argmax, lowest id on ties, independent of the seed */
	struct engine_sampling g = {.temperature = 0, .seed = 1};
	struct engine_sampler *sm = engine_sampler_create(&g);
	REQUIRE(sm);
	CHECK_INT_EQ(engine_sampler_sample(sm, logits, V), best);
	float ties[4] = {1, 3, 3, 2};
	CHECK_INT_EQ(engine_sampler_sample(sm, ties, 4), 1);
	engine_sampler_destroy(sm);

	/* a temperature so small that logit / t overflows (1 / 1e-39 is +inf in float): still the
	 * argmax, not one of the tokens with a positive logit; NaN logits are refused, not read
	 * past */
	struct engine_sampling tiny = {.temperature = 1e-39f, .seed = 1};
	sm = engine_sampler_create(&tiny);
	REQUIRE(sm);
	float pos[5] = {1, 3, 2, 0, -1};
	for (int i = 0; i < 8; i++)
		CHECK_INT_EQ(engine_sampler_sample(sm, pos, 5), 1);
	float nans[3] = {NAN, NAN, NAN};
	CHECK_INT_EQ(engine_sampler_sample(sm, nans, 3), -EINVAL);
	engine_sampler_destroy(sm);

	/* same seed, same draws; another seed, other draws */
	struct engine_sampling p = {.temperature = 1.0f, .seed = 42};
	struct engine_sampler *a = engine_sampler_create(&p), *b = engine_sampler_create(&p);
	p.seed = 43;
	struct engine_sampler *c = engine_sampler_create(&p);
	REQUIRE(a && b && c);
	int differ = 0;
	for (int i = 0; i < 200; i++) {
		int32_t x = engine_sampler_sample(a, logits, V), y = engine_sampler_sample(b, logits, V);
		int32_t z = engine_sampler_sample(c, logits, V);
		CHECK_INT_EQ(x, y);
		CHECK(x >= 0 && x < V);
		differ += x != z;
	}
	CHECK(differ > 50);
	engine_sampler_destroy(a);
	engine_sampler_destroy(b);
	engine_sampler_destroy(c);

	/* frequencies follow softmax(logits / T): 40000 draws, each bucket within 5 sigma */
	p = (struct engine_sampling){.temperature = 0.5f, .seed = 7};
	sm = engine_sampler_create(&p);
	REQUIRE(sm);
	int counts[V] = {0};
	const int draws = 40000;
	for (int i = 0; i < draws; i++)
		counts[engine_sampler_sample(sm, logits, V)]++;
	double z = 0;
	for (int i = 0; i < V; i++)
		z += exp(logits[i] / 0.5);
	for (int i = 0; i < V; i++) {
		double pr = exp(logits[i] / 0.5) / z, mean = pr * draws;
		double sigma = sqrt(draws * pr * (1 - pr));
		CHECK(fabs(counts[i] - mean) <= 5 * sigma + 1);
	}
	engine_sampler_destroy(sm);

	/* top-k keeps only the k best ids; top-k = 1 is greedy */
	p = (struct engine_sampling){.temperature = 2.0f, .top_k = 3, .seed = 9};
	sm = engine_sampler_create(&p);
	REQUIRE(sm);
	int seen[V] = {0};
	for (int i = 0; i < 3000; i++)
		seen[engine_sampler_sample(sm, logits, V)]++;
	int kept = 0;
	for (int i = 0; i < V; i++) {
		int rank = 0;
		for (int j = 0; j < V; j++)
			rank += logits[j] > logits[i];
		if (seen[i])
			kept++;
		CHECK(seen[i] == 0 || rank < 3);
	}
	CHECK_INT_EQ(kept, 3);
	engine_sampler_destroy(sm);
	p.top_k = 1;
	sm = engine_sampler_create(&p);
	REQUIRE(sm);
	for (int i = 0; i < 100; i++)
		CHECK_INT_EQ(engine_sampler_sample(sm, logits, V), best);
	engine_sampler_destroy(sm);

	/* top-p: with probabilities 0.5, 0.3, 0.15, 0.05, top_p = 0.75 keeps the first two
	 * (0.5 < 0.75 <= 0.8); top_p = 0.85 keeps three */
	float lp[4] = {logf(0.15f), logf(0.5f), logf(0.05f), logf(0.3f)};
	p = (struct engine_sampling){.temperature = 1.0f, .top_p = 0.75f, .seed = 11};
	sm = engine_sampler_create(&p);
	REQUIRE(sm);
	int cnt[4] = {0};
	for (int i = 0; i < 4000; i++)
		cnt[engine_sampler_sample(sm, lp, 4)]++;
	CHECK(cnt[0] == 0 && cnt[2] == 0 && cnt[1] > 0 && cnt[3] > 0);
	/* renormalised: 0.5/0.8 = 62.5% for id 1 */
	CHECK(fabs(cnt[1] / 4000.0 - 0.625) < 0.04);
	engine_sampler_destroy(sm);
	p.top_p = 0.85f;
	sm = engine_sampler_create(&p);
	REQUIRE(sm);
	memset(cnt, 0, sizeof(cnt));
	for (int i = 0; i < 4000; i++)
		cnt[engine_sampler_sample(sm, lp, 4)]++;
	CHECK(cnt[2] == 0 && cnt[0] > 0 && cnt[1] > 0 && cnt[3] > 0);
	engine_sampler_destroy(sm);

	p.top_p = NAN;
	CHECK(engine_sampler_create(&p) == NULL && errno == EINVAL);
	CHECK(engine_sampler_create(NULL) == NULL);
	engine_sampler_destroy(NULL);
}

/* The weights decode streams every token are in huge pages where the kernel has them
 * (common.h alloc_huge): a random model's tensors and the matrices lm_prepare() quantizes at
 * load, each of HUGE_PAGE_MIN_BYTES or more 2 MiB-aligned and marked MADV_HUGEPAGE, tiled or not. */
static void check_huge(const void *p, size_t bytes, int *n)
{
	if (bytes < HUGE_PAGE_MIN_BYTES)
		return;
	(*n)++;
	CHECK((uintptr_t)p % HUGE_PAGE_BYTES == 0);
	if (access("/sys/kernel/mm/transparent_hugepage/enabled", F_OK) == 0)
		CHECK_INT_EQ(test_vm_hugepage(p), 1);
}

static void test_weights_huge(void)
{
	struct lm_random_spec sp = spec_small("-", TENSOR_BF16, 9);
	sp.hidden = 256;
	sp.intermediate = 16384; /* up 16384 x 256: 8 MiB in bf16, 5.2 MB in q8, 3.1 MB in q4 */
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	int n = 0;
	check_huge(m->layers[0].mlp.up.data, m->layers[0].mlp.up.nbytes, &n);
	check_huge(m->layers[0].mlp.down.data, m->layers[0].mlp.down.nbytes, &n);
	CHECK_INT_EQ(n, 2);
	for (int f = QUANT_Q8; f <= QUANT_Q4; f++) {
		char err[256] = "";
		struct lm_prepare_opts po = {.quant = f};
		struct lm_prepared p;
		int r = lm_prepare(m, &po, &p, err, sizeof(err));
		if (r < 0)
			fprintf(stderr, "lm_prepare: %s\n", err);
		REQUIRE(r == 0);
		REQUIRE(lm_prepared_tile(m, &p) == 0);
		n = 0;
		for (int i = 0; i < 4; i++) {
			const struct quant_tensor *q = &p.layers[0].q[i];
			if (q->data)
				check_huge(q->data, (size_t)q->rows * q->row_bytes, &n);
		}
		CHECK(n >= 1);
		lm_prepared_finish(&p);
	}
	lm_random_model_destroy(m);
}

int main(void)
{
	test_skip_without_env_backend();
	test_random_stream();
	test_sampling();
	test_matmul();
	test_vector_kernels();
	test_ssm_chunked_vs_scan();
	test_weights_huge();

	/* every block type in different orders, mixed dtypes */
	struct {
		const char *pattern;
		enum tensor_dtype dt;
		int n;
	} cases[] = {
		{"M-M*-M", TENSOR_BF16, 45},
		{"*M-", TENSOR_F32, 29},
		{"-*MM", TENSOR_F16, 21},
		{"M", TENSOR_BF16, LM_MAX_BATCH + 40},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct lm_random_spec sp = spec_small(cases[i].pattern, cases[i].dt, 100 + i);
		struct engine_model *m = lm_random_model_create(&sp);
		REQUIRE(m);
		struct engine_backend *b = test_env_backend(m);
		REQUIRE(b);
		test_session_model(m, b, cases[i].n);
		if (i == 0)
			test_embeds_and_errors(m, b);
		engine_backend_destroy(b);
		lm_random_model_destroy(m);
	}
	test_bad_model();
	test_long_chunk();

	/* more threads than cores: same results through the pool's wake/finish paths */
	CHECK_INT_EQ(engine_set_threads(0), -EINVAL);
	CHECK_INT_EQ(engine_set_threads(3), 0);
	CHECK_INT_EQ(engine_get_threads(), 3);
	struct lm_random_spec sp = spec_small("M*-", TENSOR_BF16, 77);
	sp.hidden = 128;
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	struct engine_backend *b = test_env_backend(m);
	REQUIRE(b);
	test_session_model(m, b, 40);
	test_threads(m, b);
	engine_backend_destroy(b);
	lm_random_model_destroy(m);
	/* fewer SSM heads than threads: the decode step's heads in min(heads, threads) groups
	 * (lm_forward.c scan_runs_task), each head once */
	sp = spec_small("M*-", TENSOR_BF16, 78);
	sp.m_heads = 2;
	sp.m_groups = 1;
	m = lm_random_model_create(&sp);
	REQUIRE(m);
	b = test_env_backend(m);
	REQUIRE(b);
	test_session_model(m, b, 40);
	engine_backend_destroy(b);
	lm_random_model_destroy(m);
	test_matmul_case(TENSOR_BF16, 100, 130, 9, true);
	CHECK_INT_EQ(engine_set_threads(1), 0);
	test_matmul_case(TENSOR_F16, 100, 130, 9, false);
	return test_exit();
}
