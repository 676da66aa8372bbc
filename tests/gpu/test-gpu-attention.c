/* Attention on the device (cuda/attention.cu, gpu_attention) against the CPU backend's own
 * lm_attention_heads(): decode over the KV cache (one row, lengths at and around the chunk of
 * GPU_ATTN_SPLIT positions, splits of several chunks, the length read from device memory with a
 * grid sized for longer) and prefill (rows on both sides of the WMMA tile of 32 and of 16, head
 * dims that are not multiples of 32 or of 16, GQA groups of 1, 2, 3 and 4). Runs on a device (suite `gpu`, 77
 * without one) and in the CUDA emulation (suite `gpu-emu`, three thread orders).
 *
 * The output is a convex combination of value rows, so errors are measured against vmax, the
 * largest |v|:
 * - fp32 cache (fp32 path): 1e-5 vmax (summation order, expf on the device);
 * - bf16 cache: the CPU gets the same bf16 K/V values; the fp32 split path adds only rounding
 *   order (1e-5 vmax), the WMMA path rounds q and the probabilities to bf16 (2^-9 relative
 *   each), so 8e-3 vmax (2.7e-3 measured);
 * - a bf16 output adds 2^-8 of the value. */
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "cpu.h"
#include "gpu.h"
#include "gpu_internal.h"
#include "lm.h"
#include "model.h"
#include "test.h"

TEST_DEFINE_GLOBALS;

static struct gpu_context *g;
static uint64_t rng = 0x243f6a8885a308d3ull;

static float frand(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (float)(rng >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static void *dev_from(const void *host, size_t bytes)
{
	void *p = NULL;
	REQUIRE(gpu_alloc(g, bytes, &p) == 0);
	if (host)
		REQUIRE(gpu_copy_to_device(g, p, host, bytes) == 0);
	return p;
}

struct attn_case {
	int hq, hkv, dh, n0, rows;
	enum gpu_dtype kv, out;
	bool device_pos;
	int extra_len; /* max_len = n0 + rows + extra_len */
};

static void check_attention(const struct attn_case *c)
{
	const int len = c->n0 + c->rows, q_dim = c->hq * c->dh, kv_dim = c->hkv * c->dh;
	const int max_len = len + c->extra_len;
	const size_t ldq = (size_t)q_dim + 3, ldo = (size_t)q_dim + 5;
	const bool bf = c->kv == GPU_DTYPE_BF16;
	float *q = xmalloc((size_t)c->rows * ldq * 4), *k = xmalloc((size_t)max_len * kv_dim * 4);
	float *v = xmalloc((size_t)max_len * kv_dim * 4), *want = xmalloc((size_t)c->rows * q_dim * 4);
	float *qc = xmalloc((size_t)c->rows * q_dim * 4);
	uint16_t *k16 = xmalloc((size_t)max_len * kv_dim * 2), *v16 = xmalloc((size_t)max_len * kv_dim * 2);
	for (size_t i = 0; i < (size_t)c->rows * ldq; i++)
		q[i] = frand() * 4; /* peaked softmax rows, not near-uniform ones */
	float vmax = 0;
	for (size_t i = 0; i < (size_t)max_len * kv_dim; i++) {
		k[i] = frand();
		v[i] = frand() * 2;
		if (bf) {
			k16[i] = f32_to_bf16(k[i]), v16[i] = f32_to_bf16(v[i]);
			k[i] = bf16_to_f32(k16[i]), v[i] = bf16_to_f32(v16[i]);
		}
		vmax = fmaxf(vmax, fabsf(v[i]));
	}
	for (int t = 0; t < c->rows; t++)
		memcpy(qc + (size_t)t * q_dim, q + (size_t)t * ldq, (size_t)q_dim * 4);
	struct lm_dims dm = {.hq = c->hq, .hkv = c->hkv, .dh = c->dh, .q_dim = q_dim, .kv_dim = kv_dim};
	REQUIRE(cpu_reserve_scratch((size_t)len * sizeof(float)) == 0);
	lm_attention_heads(&dm, c->rows, c->n0, qc, k, v, want);

	size_t esz = bf ? 2 : 4, osz = c->out == GPU_DTYPE_BF16 ? 2 : 4;
	void *dq = dev_from(q, (size_t)c->rows * ldq * 4);
	void *dk = dev_from(bf ? (void *)k16 : (void *)k, (size_t)max_len * kv_dim * esz);
	void *dv = dev_from(bf ? (void *)v16 : (void *)v, (size_t)max_len * kv_dim * esz);
	void *dout = dev_from(NULL, (size_t)c->rows * ldo * osz);
	size_t scratch_floats = gpu_attention_scratch_floats(c->rows, max_len, c->hq, c->dh);
	CHECK(scratch_floats > 0);
	void *scratch = dev_from(NULL, scratch_floats * 4);
	int32_t n0 = c->n0;
	void *dpos = c->device_pos ? dev_from(&n0, sizeof(n0)) : NULL;
	CHECK_INT_EQ(gpu_attention(g, dq, ldq, dk, dv, c->kv, c->hq, c->hkv, c->dh, c->rows, dpos,
				   c->device_pos ? 0 : c->n0, max_len, dout, c->out, ldo, scratch),
		     0);
	void *got = xmalloc((size_t)c->rows * ldo * osz);
	REQUIRE(gpu_copy_to_host(g, got, dout, (size_t)c->rows * ldo * osz) == 0);

	bool wmma = bf && c->rows >= 16 && c->dh % 16 == 0 && c->dh <= GPU_ATTN_WMMA_MAX_HEAD_DIM;
	double tol_abs = (wmma ? 8e-3 : 1e-5) * vmax, worst = 0;
	int bad = 0;
	for (int t = 0; t < c->rows; t++)
		for (int i = 0; i < q_dim; i++) {
			size_t gi = (size_t)t * ldo + i;
			float gv = osz == 2 ? bf16_to_f32(((uint16_t *)got)[gi]) : ((float *)got)[gi];
			float wv = want[(size_t)t * q_dim + i];
			double err = fabs(gv - wv), tol = tol_abs + (osz == 2 ? fabs(wv) / 256 : 0);
			worst = fmax(worst, err / vmax);
			if (!(err <= tol) && bad++ < 5)
				fprintf(stderr, "attention hq=%d hkv=%d dh=%d n0=%d rows=%d: o[%d][%d] = %.7g, cpu %.7g\n",
					c->hq, c->hkv, c->dh, c->n0, c->rows, t, i, gv, wv);
		}
	CHECK_INT_EQ(bad, 0);
	fprintf(stderr, "hq=%d hkv=%d dh=%d n0=%d rows=%d kv=%s out=%s%s: worst error %.3g vmax\n", c->hq,
		c->hkv, c->dh, c->n0, c->rows, bf ? "bf16" : "f32", osz == 2 ? "bf16" : "f32",
		wmma ? " (wmma)" : "", worst);
	gpu_free(g, dq), gpu_free(g, dk), gpu_free(g, dv), gpu_free(g, dout), gpu_free(g, scratch);
	gpu_free(g, dpos);
	free(q), free(k), free(v), free(want), free(qc), free(k16), free(v16), free(got);
}

/* Decode as a replayed graph sees it: one call shape (grid sized by max_len), the length moving
 * on in device memory between calls, each result equal to the CPU's at that length. */
static void check_growing_decode(void)
{
	const int hq = 4, hkv = 2, dh = 24, max_len = 2 * GPU_ATTN_SPLIT + 8;
	const int kv_dim = hkv * dh, q_dim = hq * dh;
	float *q = xmalloc((size_t)q_dim * 4), *k = xmalloc((size_t)max_len * kv_dim * 4);
	float *v = xmalloc((size_t)max_len * kv_dim * 4), *want = xmalloc((size_t)q_dim * 4);
	float *got = xmalloc((size_t)q_dim * 4);
	for (int i = 0; i < q_dim; i++)
		q[i] = frand() * 4;
	for (size_t i = 0; i < (size_t)max_len * kv_dim; i++)
		k[i] = frand(), v[i] = frand();
	void *dq = dev_from(q, (size_t)q_dim * 4), *dk = dev_from(k, (size_t)max_len * kv_dim * 4);
	void *dv = dev_from(v, (size_t)max_len * kv_dim * 4), *dout = dev_from(NULL, (size_t)q_dim * 4);
	void *scratch = dev_from(NULL, gpu_attention_scratch_floats(1, max_len, hq, dh) * 4);
	int32_t zero = 0;
	void *dpos = dev_from(&zero, sizeof(zero));
	struct lm_dims dm = {.hq = hq, .hkv = hkv, .dh = dh, .q_dim = q_dim, .kv_dim = kv_dim};
	REQUIRE(cpu_reserve_scratch((size_t)max_len * sizeof(float)) == 0);
	static const int32_t lens[] = {0, 1, GPU_ATTN_SPLIT - 1, GPU_ATTN_SPLIT, 2 * GPU_ATTN_SPLIT + 7};
	for (size_t i = 0; i < ARRAY_SIZE(lens); i++) {
		int32_t n0 = lens[i];
		REQUIRE(gpu_copy_to_device(g, dpos, &n0, sizeof(n0)) == 0);
		CHECK_INT_EQ(gpu_attention(g, dq, q_dim, dk, dv, GPU_DTYPE_F32, hq, hkv, dh, 1, dpos, 0,
					   max_len, dout, GPU_DTYPE_F32, q_dim, scratch),
			     0);
		REQUIRE(gpu_copy_to_host(g, got, dout, (size_t)q_dim * 4) == 0);
		lm_attention_heads(&dm, 1, n0, q, k, v, want);
		int bad = 0;
		for (int j = 0; j < q_dim; j++)
			bad += !(fabsf(got[j] - want[j]) <= 1e-5f);
		if (bad)
			fprintf(stderr, "decode at n0=%d: %d of %d outputs differ\n", n0, bad, q_dim);
		CHECK_INT_EQ(bad, 0);
	}
	/* refusals: a group that does not divide, a length beyond max_len, no scratch for fp32 */
	CHECK_INT_EQ(gpu_attention(g, dq, q_dim, dk, dv, GPU_DTYPE_F32, hq, 3, dh, 1, NULL, 0, max_len, dout,
				   GPU_DTYPE_F32, q_dim, scratch),
		     -EINVAL);
	CHECK_INT_EQ(gpu_attention(g, dq, q_dim, dk, dv, GPU_DTYPE_F32, hq, hkv, dh, 1, NULL, max_len,
				   max_len, dout, GPU_DTYPE_F32, q_dim, scratch),
		     -EINVAL);
	CHECK_INT_EQ(gpu_attention(g, dq, q_dim, dk, dv, GPU_DTYPE_F32, hq, hkv, dh, 1, NULL, 0, max_len,
				   dout, GPU_DTYPE_F32, q_dim, NULL),
		     -EINVAL);
	/* more rows than one grid's y holds: refused at the call (the launch failed with -EIO) */
	CHECK_INT_EQ(gpu_attention(g, dq, q_dim, dk, dv, GPU_DTYPE_F32, hq, hkv, dh, GPU_ATTN_MAX_ROWS + 1,
				   NULL, 0, GPU_ATTN_MAX_ROWS + 1, dout, GPU_DTYPE_F32, q_dim, scratch),
		     -EINVAL);
	CHECK_INT_EQ(gpu_attention_scratch_floats(GPU_ATTN_MAX_ROWS + 1, 1, hq, dh), 0);
	gpu_free(g, dq), gpu_free(g, dk), gpu_free(g, dv), gpu_free(g, dout), gpu_free(g, scratch);
	gpu_free(g, dpos);
	free(q), free(k), free(v), free(want), free(got);
}

/* One decode step captured once as a CUDA graph and replayed while the sequence grows, as the
 * CUDA backend replays it per token: append the new K/V rows at the device-side position,
 * attend, then the output projection accumulated into the residual (gpu_gemm). Each replay must
 * equal the same calls launched eagerly, bit for bit, and the CPU's attention_layer ops within
 * the fp32 tolerances. */
struct step_bufs {
	void *q, *kn, *vn, *kc, *vc, *o, *w, *h, *scratch, *pos;
};

static int queue_step(struct gpu_blas *gb, const struct step_bufs *b, int hq, int hkv, int dh, int d,
		      int max_len)
{
	int r = gpu_kv_append(g, b->kn, b->vn, b->kc, b->vc, GPU_DTYPE_F32, hkv * dh, 1, b->pos);
	if (r >= 0)
		r = gpu_attention(g, b->q, (size_t)hq * dh, b->kc, b->vc, GPU_DTYPE_F32, hq, hkv, dh, 1,
				  b->pos, 0, max_len, b->o, GPU_DTYPE_F32, (size_t)hq * dh, b->scratch);
	if (r >= 0)
		r = gpu_gemm(gb, b->w, GPU_DTYPE_F32, d, hq * dh, b->o, (size_t)hq * dh, 1, b->h,
			     GPU_DTYPE_F32, d, true);
	return r;
}

static void check_decode_graph(void)
{
	enum {
		hq = 6,
		hkv = 2,
		dh = 16,
		d = 40,
		max_len = GPU_ATTN_SPLIT + 40,
		q_dim = hq * dh,
		kv_dim = hkv * dh
	};
	float *k = xmalloc((size_t)max_len * kv_dim * 4), *v = xmalloc((size_t)max_len * kv_dim * 4);
	float *w = xmalloc((size_t)d * q_dim * 4), *q = xmalloc((size_t)q_dim * 4),
	      *o = xmalloc((size_t)q_dim * 4);
	float kn[kv_dim], vn[kv_dim], h0[d], want[d], eager[d], replay[d];
	for (size_t i = 0; i < (size_t)max_len * kv_dim; i++)
		k[i] = frand(), v[i] = frand();
	for (int i = 0; i < d * q_dim; i++)
		w[i] = frand();
	struct step_bufs b;
	b.q = dev_from(NULL, (size_t)q_dim * 4);
	b.kn = dev_from(NULL, sizeof(kn)), b.vn = dev_from(NULL, sizeof(vn));
	b.kc = dev_from(k, (size_t)max_len * kv_dim * 4), b.vc = dev_from(v, (size_t)max_len * kv_dim * 4);
	b.o = dev_from(NULL, (size_t)q_dim * 4), b.w = dev_from(w, (size_t)d * q_dim * 4);
	b.h = dev_from(NULL, sizeof(h0));
	b.scratch = dev_from(NULL, gpu_attention_scratch_floats(1, max_len, hq, dh) * 4);
	b.pos = dev_from(NULL, sizeof(int32_t));
	struct gpu_blas *gb = gpu_blas_create(g);
	REQUIRE(gb);
	struct tensor wt = {.data = w,
			    .dtype = TENSOR_F32,
			    .ndim = 2,
			    .shape = {d, q_dim},
			    .nbytes = (size_t)d * q_dim * 4};
	struct lm_dims dm = {.hq = hq, .hkv = hkv, .dh = dh, .q_dim = q_dim, .kv_dim = kv_dim};
	REQUIRE(cpu_reserve_scratch(MAX((size_t)max_len * sizeof(float), cpu_matmul_scratch_bytes(q_dim))) ==
		0);

	cudaStream_t s = (cudaStream_t)g->stream;
	cudaGraph_t graph = NULL;
	cudaGraphExec_t exec = NULL;

	static const int32_t positions[] = {0, 1, 2, GPU_ATTN_SPLIT - 1, GPU_ATTN_SPLIT, max_len - 1};
	for (size_t step = 0; step < ARRAY_SIZE(positions); step++) {
		int32_t pos = positions[step];
		for (int i = 0; i < kv_dim; i++)
			kn[i] = frand(), vn[i] = frand();
		for (int i = 0; i < q_dim; i++)
			q[i] = frand() * 4;
		for (int i = 0; i < d; i++)
			h0[i] = frand();
		REQUIRE(gpu_copy_to_device(g, b.q, q, (size_t)q_dim * 4) == 0);
		REQUIRE(gpu_copy_to_device(g, b.kn, kn, sizeof(kn)) == 0);
		REQUIRE(gpu_copy_to_device(g, b.vn, vn, sizeof(vn)) == 0);
		REQUIRE(gpu_copy_to_device(g, b.pos, &pos, sizeof(pos)) == 0);
		/* eager */
		REQUIRE(gpu_copy_to_device(g, b.h, h0, sizeof(h0)) == 0);
		CHECK_INT_EQ(queue_step(gb, &b, hq, hkv, dh, d, max_len), 0);
		REQUIRE(gpu_copy_to_host(g, eager, b.h, sizeof(eager)) == 0);
		/* captured after the first eager step, as the backend does (its kernels are then
		 * loaded: backend_cuda.c, decode_graph's warm-up) */
		if (!exec) {
			REQUIRE(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal) == cudaSuccess);
			CHECK_INT_EQ(queue_step(gb, &b, hq, hkv, dh, d, max_len), 0);
			REQUIRE(cudaStreamEndCapture(s, &graph) == cudaSuccess);
			REQUIRE(cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess);
		}
		/* replay (the append writes the same rows again) */
		REQUIRE(gpu_copy_to_device(g, b.h, h0, sizeof(h0)) == 0);
		CHECK_INT_EQ(cudaGraphLaunch(exec, s), cudaSuccess);
		REQUIRE(gpu_copy_to_host(g, replay, b.h, sizeof(replay)) == 0);
		CHECK(memcmp(eager, replay, sizeof(eager)) == 0);
		/* the CPU forward's ops */
		memcpy(k + (size_t)pos * kv_dim, kn, sizeof(kn));
		memcpy(v + (size_t)pos * kv_dim, vn, sizeof(vn));
		lm_attention_heads(&dm, 1, pos, q, k, v, o);
		memcpy(want, h0, sizeof(h0));
		REQUIRE(cpu_matmul(&wt, o, q_dim, 1, want, d, true) == 0);
		int bad = 0;
		for (int i = 0; i < d; i++) {
			double scale = fabs(h0[i]);
			for (int j = 0; j < q_dim; j++)
				scale += fabs((double)w[(size_t)i * q_dim + j] * o[j]);
			bad += !(fabs(replay[i] - want[i]) <= 1e-5 * scale);
		}
		if (bad)
			fprintf(stderr, "decode graph at position %d: %d of %d outputs differ\n", pos, bad, d);
		CHECK_INT_EQ(bad, 0);
	}
	cudaGraphExecDestroy(exec);
	cudaGraphDestroy(graph);
	gpu_blas_destroy(gb);
	void *bufs[] = {b.q, b.kn, b.vn, b.kc, b.vc, b.o, b.w, b.h, b.scratch, b.pos};
	for (size_t i = 0; i < ARRAY_SIZE(bufs); i++)
		gpu_free(g, bufs[i]);
	free(k), free(v), free(w), free(q), free(o);
}

int main(void)
{
	if (gpu_device_count() == 0) {
		fprintf(stderr, "no CUDA device: skipping\n");
		return TEST_SKIP;
	}
	g = gpu_context_create(test_gpu_device());
	REQUIRE(g);
	static const struct attn_case cases[] = {
		/* decode, fp32 and bf16 caches, around the split boundary */
		{4, 2, 20, 0, 1, GPU_DTYPE_F32, GPU_DTYPE_F32, false, 0},
		{3, 1, 33, GPU_ATTN_SPLIT - 1, 1, GPU_DTYPE_F32, GPU_DTYPE_F32, true, 0},
		{6, 2, 16, GPU_ATTN_SPLIT, 1, GPU_DTYPE_BF16, GPU_DTYPE_BF16, true, 300},
		{2, 2, 40, GPU_ATTN_SPLIT + 45, 1, GPU_DTYPE_BF16, GPU_DTYPE_F32, false, 0},
		/* more than GPU_ATTN_MAX_SPLITS chunks: splits of several chunks each */
		{1, 1, 8, GPU_ATTN_MAX_SPLITS * GPU_ATTN_SPLIT + 300, 1, GPU_DTYPE_F32, GPU_DTYPE_F32, true,
		 0},
		/* prefill on the fp32 path */
		{6, 2, 20, 3, 5, GPU_DTYPE_F32, GPU_DTYPE_F32, false, 0},
		{4, 4, 8, 0, 17, GPU_DTYPE_F32, GPU_DTYPE_BF16, false, 0},
		{4, 4, 8, 300, 65, GPU_DTYPE_F32, GPU_DTYPE_F32, false, 0}, /* one split, two chunks */
		{4, 1, 20, 2, 17, GPU_DTYPE_BF16, GPU_DTYPE_F32, false, 0}, /* dh % 16: no WMMA */
		/* prefill on tensor cores: tile boundaries of 16 and 32 rows and of 32 keys */
		{4, 1, 32, 7, 33, GPU_DTYPE_BF16, GPU_DTYPE_F32, false, 0},
		{2, 2, 48, 0, 16, GPU_DTYPE_BF16, GPU_DTYPE_BF16, false, 0},
		{6, 2, 16, 50, 40, GPU_DTYPE_BF16, GPU_DTYPE_F32, true, 10},
		{2, 1, 128, 1, 20, GPU_DTYPE_BF16, GPU_DTYPE_F32, false, 0},
	};
	for (size_t i = 0; i < ARRAY_SIZE(cases); i++)
		check_attention(&cases[i]);
	check_growing_decode();
	check_decode_graph();
	gpu_context_destroy(g);
	return test_exit();
}
