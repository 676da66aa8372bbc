/* The CUDA backend's batched decode across sessions (issue 16; engine/backend/cuda/backend_cuda.c):
 * the decode positions of several sessions run as the rows of one pass, their states found
 * through per-row descriptors, padded to a bucket of 2, 4, ..., 128 rows with one graph each.
 * Each session must get what it gets alone (engine_session_decode(): its own single-sequence
 * graph), at different positions, with prefill spans of other sessions in the same batch, past a
 * KV block's growth, with graphs and eagerly, and beyond one pass's 128 rows. Prefill spans that
 * share the decode rows' pass (spans longer than one run, spliced device and host rows, more
 * rows than one pass holds) must give what the same appends give alone.
 *
 * Tolerances (the batched pass splits attention over fewer parts than a lone row, and its GEMMs
 * have another row count, for which cuBLASLt picks another algorithm (the emulation's stand-in
 * its own split-K), so the rounding differs):
 *  - fp32: every logits row within 1e-5 of the lone session's, relative to its largest
 *    magnitude (as lm-batch-cuda);
 *  - bf16: cosine >= 0.9999 per row, every logit within 2e-2 of the largest magnitude (as
 *    test-lm-batch.c);
 *  - the same greedy token wherever the lone row's top-1 leads by more than twice the
 *    precision's bound (a nearer tie goes the way the summation order rounds);
 *  - graph replay against eager launches of the same batches: bit for bit.
 * On a device in `gpu` (77 without one); on the emulation in the forward thread order, and a
 * shorter run in the reverse and a random one. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "engine.h"
#include "gpu.h"
#include "lm.h"
#include "test.h"
#include "test-backend.h"

TEST_DEFINE_GLOBALS;

enum { VOCAB = 64, MAX_TOKENS = 256 };

static struct engine_model *model_of(const char *pattern, uint64_t seed)
{
	struct lm_random_spec sp = {
		.pattern = pattern,
		.hidden = 32,
		.vocab = VOCAB,
		.intermediate = 48,
		.n_heads = 4,
		.n_kv_heads = 2,
		.head_dim = 8,
		.m_heads = 4,
		.m_head_dim = 8,
		.m_groups = 2,
		.m_state = 8,
		.m_conv_kernel = 4,
		.m_chunk = 16,
		.dtype = TENSOR_BF16,
		.seed = seed,
	};
	struct engine_model *m = lm_random_model_create(&sp);
	REQUIRE(m);
	return m;
}

static int32_t token_at(int i, unsigned seed)
{
	return (int32_t)((i * 7919u + seed * 104729u) % (unsigned)VOCAB);
}

static int argmax(const float *x)
{
	int best = 0;
	for (int i = 1; i < VOCAB; i++)
		if (x[i] > x[best])
			best = i;
	return best;
}

/* Whether row `got` matches the lone session's `want` within the precision's tolerance. */
static bool close_row(const float *got, const float *want, bool fp32, const char *what, int i)
{
	double mag = 0, diff = 0, dot = 0, gg = 0, ww = 0;
	for (int v = 0; v < VOCAB; v++) {
		mag = fmax(mag, fabs(want[v]));
		diff = fmax(diff, fabs((double)got[v] - want[v]));
		dot += (double)got[v] * want[v], gg += (double)got[v] * got[v];
		ww += (double)want[v] * want[v];
	}
	double rel = diff / (mag + 1e-30), cos = dot / sqrt(gg * ww + 1e-300);
	double tol = fp32 ? 1e-5 : 2e-2;
	bool tie = test_top_margin(want, VOCAB) <= 2 * tol * mag;
	bool ok = (tie || argmax(got) == argmax(want)) && rel <= tol && (fp32 || cos >= 0.9999);
	if (!ok)
		fprintf(stderr,
			"%s: session %d differs from alone: relative %.3g, cosine %.9f, "
			"greedy %d against %d\n",
			what, i, rel, cos, argmax(got), argmax(want));
	return ok;
}

/* n sessions prefilled to different lengths (up to `longest`), each with a twin that runs
 * alone; `steps` decode steps batched against alone. Odd steps also prefill `extra` tokens into two more
 * sessions in the same batch (when extra > 0), against their own twins. */
static void test_decode(struct engine_backend *b, int n, int longest, int steps, int extra, bool fp32)
{
	char what[64];
	snprintf(what, sizeof(what), "%s n=%d", fp32 ? "fp32" : "bf16", n);
	struct engine_session **s = xcalloc((size_t)n + 2, sizeof(*s));
	struct engine_session **alone = xcalloc((size_t)n + 2, sizeof(*alone));
	struct engine_batch_entry *ent = xcalloc((size_t)n + 2, sizeof(*ent));
	float *got = xmalloc(((size_t)n + 2) * VOCAB * sizeof(float));
	float *want = xmalloc((size_t)VOCAB * sizeof(float));
	int32_t *next = xcalloc((size_t)n + 2, sizeof(*next)), *prompt = xmalloc(64 * sizeof(*prompt));
	for (int i = 0; i < n + 2; i++) {
		s[i] = engine_session_create_on(b, MAX_TOKENS);
		REQUIRE(s[i]);
		/* positions 1, 6, 11, ...: decode rows at many distances from the attention splits */
		int len = i < n ? 1 + (i * 5) % longest : 0;
		for (int t = 0; t < len; t++)
			prompt[t] = token_at(t, (unsigned)i);
		if (len) {
			CHECK_INT_EQ(engine_session_append(s[i], prompt, NULL, (size_t)len,
							   ENGINE_LOGITS_LAST, got),
				     0);
			next[i] = (int32_t)argmax(got);
		}
		alone[i] = engine_session_copy(s[i]);
		REQUIRE(alone[i]);
	}
	for (int step = 0; step < steps; step++) {
		int m = n;
		for (int i = 0; i < n; i++)
			ent[i] = (struct engine_batch_entry){.session = s[i],
							     .tokens = &next[i],
							     .n = 1,
							     .want = ENGINE_LOGITS_LAST,
							     .ret_logits = got + (size_t)i * VOCAB};
		if (extra && step % 2) {
			for (int t = 0; t < extra; t++)
				prompt[t] = token_at(t + step, 77);
			for (int j = n; j < n + 2; j++)
				ent[m++] = (struct engine_batch_entry){.session = s[j],
								       .tokens = prompt,
								       .n = (size_t)(extra - (j - n)),
								       .want = ENGINE_LOGITS_LAST,
								       .ret_logits = got + (size_t)j * VOCAB};
		}
		CHECK_INT_EQ(engine_forward_batch(b, ent, (size_t)m), 0);
		for (int i = 0; i < m; i++) {
			if (i < n)
				CHECK_INT_EQ(engine_session_decode(alone[i], next[i], want), 0);
			else
				CHECK_INT_EQ(engine_session_append(alone[i], prompt, NULL, ent[i].n,
								   ENGINE_LOGITS_LAST, want),
					     0);
			CHECK(close_row(got + (size_t)i * VOCAB, want, fp32, what, i));
			if (i < n)
				next[i] = (int32_t)argmax(want);
		}
	}
	for (int i = 0; i < n + 2; i++) {
		CHECK_INT_EQ(engine_session_n_tokens(s[i]), engine_session_n_tokens(alone[i]));
		engine_session_destroy(s[i]);
		engine_session_destroy(alone[i]);
	}
	free(s), free(alone), free(ent), free(got), free(want), free(next), free(prompt);
}

static int n_layers_of(const struct engine_backend *b, enum lm_layer_kind kind)
{
	int n = 0;
	for (int l = 0; l < b->model->cfg.n_layers; l++)
		n += b->model->layers[l].kind == kind;
	return n;
}

/* The calls of GEMM site `site` in the backend's profile so far (-1: not in the report). */
static int gemm_calls(struct engine_backend *b, const char *site)
{
	char **lines = NULL, prefix[64];
	snprintf(prefix, sizeof(prefix), "gemm %s calls=", site);
	int calls = -1;
	REQUIRE(engine_backend_profile_report(b, &lines) >= 0);
	for (size_t i = 0; lines && lines[i]; i++)
		if (strncmp(lines[i], prefix, strlen(prefix)) == 0)
			calls = atoi(lines[i] + strlen(prefix));
	engine_backend_profile_free(lines);
	return calls;
}

/* Decode rows and prefill spans of other sessions in one forward (the mixed pass: one set of
 * GEMMs over all rows, each span's own conv, SSD and attention): n_dec sessions decoding beside
 * spans of lens[0..n_spans) positions into sessions already holding 3, 11, 19, ... positions;
 * span 0 wants every position's logits, the others their last; span `spliced` (-1: none) splices
 * rows of an engine_rows handle on the device (runs of four consecutive rows, one device copy
 * each) and of one on the host. Then every session decodes once more in one batch (what the mix
 * left in their states). Each against a twin that ran alone; the mix takes `passes` passes
 * over the weights. */
static void test_mix(struct engine_backend *b, int n_dec, const int *lens, int n_spans, int spliced,
		     int passes, bool fp32)
{
	enum { MIX_TOKENS = 512 };
	char what[96];
	const int n = n_dec + n_spans;
	int longest = 0;
	for (int j = 0; j < n_spans; j++)
		longest = MAX(longest, lens[j]);
	snprintf(what, sizeof(what), "%s mix of %d decoders and %d spans", fp32 ? "fp32" : "bf16", n_dec,
		 n_spans);
	struct engine_session **s = xcalloc((size_t)n, sizeof(*s));
	struct engine_session **alone = xcalloc((size_t)n, sizeof(*alone));
	struct engine_batch_entry *ent = xcalloc((size_t)n, sizeof(*ent));
	int32_t *next = xcalloc((size_t)n, sizeof(*next));
	/* the decoders' prefixes hold up to 45 positions, the others' 3 + 8 * (n_spans - 1) */
	int32_t *prompt = xmalloc((size_t)MAX(longest, 64 + 8 * n_spans) * sizeof(*prompt));
	struct engine_row_ref *refs = xcalloc((size_t)longest, sizeof(*refs));
	/* logits: a row per decoder and per span's last position, all of span 0's */
	size_t *at = xcalloc((size_t)n, sizeof(*at)), total = 0;
	for (int i = 0; i < n; i++) {
		at[i] = total;
		total += i == n_dec ? (size_t)lens[0] : 1;
	}
	float *got = xmalloc(total * VOCAB * sizeof(float));
	float *want = xmalloc(total * VOCAB * sizeof(float));
	const int d = b->model->cfg.hidden;
	float *host = xmalloc((size_t)longest * d * sizeof(float));
	for (size_t i = 0; i < (size_t)longest * d; i++)
		host[i] = (float)((i * 53) % 97) / 97.0f - 0.5f;
	struct engine_rows *dev = engine_rows_create(b, host, (size_t)longest, d);
	struct engine_rows *hst = engine_rows_create(NULL, host + d, (size_t)longest - 1, d);
	REQUIRE(dev && hst);
	CHECK(engine_rows_on_device(dev));
	for (int i = 0; i < n; i++) {
		s[i] = engine_session_create_on(b, MIX_TOKENS);
		REQUIRE(s[i]);
		int len = i < n_dec ? 1 + (i * 5) % 45 : 3 + 8 * (i - n_dec);
		for (int t = 0; t < len; t++)
			prompt[t] = token_at(t, (unsigned)i);
		CHECK_INT_EQ(engine_session_append(s[i], prompt, NULL, (size_t)len, ENGINE_LOGITS_LAST, got),
			     0);
		next[i] = (int32_t)argmax(got);
		alone[i] = engine_session_copy(s[i]);
		REQUIRE(alone[i]);
	}
	for (int t = 0; t < longest; t++) {
		prompt[t] = token_at(t, 91);
		if (t % 5 == 0 && t)
			refs[t] = (struct engine_row_ref){.rows = hst, .row = (size_t)t - 1};
		else if (t >= 2)
			refs[t] = (struct engine_row_ref){.rows = dev, .row = (size_t)t};
	}
	for (int i = 0; i < n; i++) {
		int j = i - n_dec;
		if (j < 0)
			ent[i] = (struct engine_batch_entry){.session = s[i],
							     .tokens = &next[i],
							     .n = 1,
							     .want = ENGINE_LOGITS_LAST,
							     .ret_logits = got + at[i] * VOCAB};
		else
			ent[i] = (struct engine_batch_entry){.session = s[i],
							     .tokens = prompt,
							     .n = (size_t)lens[j],
							     .want = j ? ENGINE_LOGITS_LAST :
									 ENGINE_LOGITS_ALL,
							     .ret_logits = got + at[i] * VOCAB,
							     .refs = j == spliced ? refs : NULL};
	}
	/* profiled (eagerly, as a mixed pass always runs): every weight is read once per pass */
	REQUIRE(engine_backend_profile(b, true) == 0);
	CHECK_INT_EQ(engine_forward_batch(b, ent, (size_t)n), 0);
	CHECK_INT_EQ(gemm_calls(b, "mamba.in_proj"), passes * n_layers_of(b, LM_LAYER_MAMBA));
	CHECK_INT_EQ(gemm_calls(b, "attn.q_proj"), passes * n_layers_of(b, LM_LAYER_ATTENTION));
	CHECK_INT_EQ(gemm_calls(b, "mlp.up"), passes * n_layers_of(b, LM_LAYER_MLP));
	REQUIRE(engine_backend_profile(b, false) == 0);
	for (int i = 0; i < n; i++) {
		int j = i - n_dec;
		float *w = want + at[i] * VOCAB;
		if (j < 0)
			CHECK_INT_EQ(engine_session_decode(alone[i], next[i], w), 0);
		else
			CHECK_INT_EQ(engine_session_append_rows(alone[i], prompt, j == spliced ? refs : NULL,
								(size_t)lens[j], ent[i].want, w),
				     0);
		size_t rows = j == 0 ? (size_t)lens[0] : 1;
		for (size_t r = 0; r < rows; r++)
			CHECK(close_row(got + (at[i] + r) * VOCAB, w + r * VOCAB, fp32, what, i));
		next[i] = (int32_t)argmax(w + (rows - 1) * VOCAB);
	}
	/* the states the mix left: one more step of everyone, decode rows only */
	for (int i = 0; i < n; i++)
		ent[i] = (struct engine_batch_entry){.session = s[i],
						     .tokens = &next[i],
						     .n = 1,
						     .want = ENGINE_LOGITS_LAST,
						     .ret_logits = got + (size_t)i * VOCAB};
	CHECK_INT_EQ(engine_forward_batch(b, ent, (size_t)n), 0);
	for (int i = 0; i < n; i++) {
		CHECK_INT_EQ(engine_session_decode(alone[i], next[i], want), 0);
		CHECK(close_row(got + (size_t)i * VOCAB, want, fp32, what, i));
		CHECK_INT_EQ(engine_session_n_tokens(s[i]), engine_session_n_tokens(alone[i]));
	}
	for (int i = 0; i < n; i++) {
		engine_session_destroy(s[i]);
		engine_session_destroy(alone[i]);
	}
	engine_rows_destroy(dev);
	engine_rows_destroy(hst);
	free(s), free(alone), free(ent), free(next), free(prompt), free(refs), free(at);
	free(got), free(want), free(host);
}

/* Graph replay against eager launches of the same batches, bit for bit, and the captures: one
 * per bucket, none again when the sessions change or their KV blocks grow (64 -> 128). */
static void test_graphs(struct engine_model *m)
{
	struct engine_backend *g = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	struct engine_backend *e = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	backend_cuda_set_graphs(e, false);
	enum { N = 5 };
	struct engine_session *sg[N], *se[N];
	struct engine_batch_entry eg[N], ee[N];
	float lg[N][VOCAB], le[N][VOCAB];
	int32_t next[N];
	for (int i = 0; i < N; i++) {
		sg[i] = engine_session_create_on(g, MAX_TOKENS);
		se[i] = engine_session_create_on(e, MAX_TOKENS);
		REQUIRE(sg[i] && se[i]);
		int32_t t = token_at(i, 5);
		/* session 0 starts at 60 positions: its KV block grows past 64 during the steps */
		for (int k = 0; k < (i ? i : 60); k++) {
			CHECK_INT_EQ(engine_session_decode(sg[i], t, lg[i]), 0);
			CHECK_INT_EQ(engine_session_decode(se[i], t, le[i]), 0);
		}
		next[i] = t;
	}
	uint64_t caps0 = backend_cuda_graph_captures(g);
	for (int step = 0; step < 8; step++) {
		/* 5 sessions (bucket 8), then 3 (bucket 4), then 5 again */
		int n = step >= 3 && step < 6 ? 3 : N;
		for (int i = 0; i < n; i++) {
			eg[i] = (struct engine_batch_entry){.session = sg[i],
							    .tokens = &next[i],
							    .n = 1,
							    .want = ENGINE_LOGITS_LAST,
							    .ret_logits = lg[i]};
			ee[i] = eg[i];
			ee[i].session = se[i], ee[i].ret_logits = le[i];
		}
		CHECK_INT_EQ(engine_forward_batch(g, eg, (size_t)n), 0);
		CHECK_INT_EQ(engine_forward_batch(e, ee, (size_t)n), 0);
		for (int i = 0; i < n; i++) {
			CHECK(memcmp(lg[i], le[i], sizeof(lg[i])) == 0);
			next[i] = (int32_t)argmax(lg[i]);
		}
	}
	CHECK_INT_EQ(engine_session_n_tokens(sg[0]), 68);
	CHECK_INT_EQ((int)(backend_cuda_graph_captures(g) - caps0), 2);
	CHECK_INT_EQ((int)backend_cuda_graph_captures(e), 0);
	for (int i = 0; i < N; i++)
		engine_session_destroy(sg[i]), engine_session_destroy(se[i]);
	engine_backend_destroy(g);
	engine_backend_destroy(e);
}

/* With argument "short" (the emulation's other thread orders): one mixed batch per precision. */
int main(int argc, char **argv)
{
	const bool full = !(argc > 1 && strcmp(argv[1], "short") == 0);
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipped\n");
		return TEST_SKIP;
	}
	/* Mamba, attention and MLP blocks: every per-row kernel of the batched pass */
	struct engine_model *m = model_of("M*-M*", 31);
	struct engine_backend *b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
	static const int counts[] = {2, 3, 5, 8};
	for (size_t i = 0; full && i < ARRAY_SIZE(counts); i++)
		test_decode(b, counts[i], 45, 3, 0, true);
	test_decode(b, 4, 45, full ? 4 : 2, 9, true); /* prefill spans of 9 and 8 tokens join in */
	/* 128 rows alone, then the 129th beside prefill spans of 3 and 2 tokens */
	if (full)
		test_decode(b, 129, 4, 2, 3, true);
	static const int lens[] = {9, 20};
	test_mix(b, 2, lens, 2, 1, 1, true);
	engine_backend_destroy(b);
	if (full) {
		/* runs of 16 positions in passes of 40 rows, as 256 and 384 would cut spans of
		 * hundreds (which the emulation takes minutes over): 9 decode rows + 16 of 37
		 * (spliced) + 12 in one pass, 5 + 16 of 20 in a second (42 rows would not fit), then
		 * 16 of 37 + 4 of 20, then the last 5 of 37 */
		b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_FP32);
		CHECK_INT_EQ(backend_cuda_set_pass_shape(b, 16, 40), 0);
		CHECK_INT_EQ(backend_cuda_set_pass_shape(b, 16, 15), -EINVAL);
		CHECK_INT_EQ(backend_cuda_set_pass_shape(b, 257, 300), -EINVAL);
		static const int shaped[] = {37, 12, 5, 20};
		test_mix(b, 9, shaped, 4, 0, 4, true);
		engine_backend_destroy(b);
	}
	b = test_backend_create(m, ENGINE_BACKEND_CUDA, ENGINE_PRECISION_BF16);
	test_decode(b, 6, 45, full ? 3 : 2, 5, false);
	static const int lens_bf16[] = {12, 7};
	test_mix(b, 4, lens_bf16, 2, 0, 1, false);
	engine_backend_destroy(b);
	if (full)
		test_graphs(m);
	lm_random_model_destroy(m);
	return test_exit();
}
