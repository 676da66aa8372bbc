// Causal GQA attention without positions (gpu.h gpu_attention): a split-sequence fp32 kernel with
// a combine (decode, fp32 precision), and a flash-style WMMA kernel for bf16 prefill.
#include "gpu.h"
#include "gpu_internal.h"
#include "kernel_util.cuh"
#include "klaunch.h"
#include "wmma_attention.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>

/* Reduction over the block (blockDim.x a multiple of 32); every thread gets the result.
 * red: 33 floats of shared memory; consecutive calls may share it. */
template <bool MAX> static __device__ float block_reduce(float v, float *red)
{
	v = MAX ? gpu_warp_max(v) : gpu_warp_sum(v);
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0)
		red[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < (int)(blockDim.x / 32) ? red[lane] : (MAX ? -INFINITY : 0.0f);
		v = MAX ? gpu_warp_max(v) : gpu_warp_sum(v);
		if (lane == 0)
			red[32] = v;
	}
	__syncthreads();
	return red[32];
}

/* ---- split-sequence fp32 path ---------------------------------------------------------------- */

static constexpr int SPLIT_THREADS = 128;

/* One block per (query head, row, split): split sp of `splits` covers an equal share of the row's
 * len = n0 + t + 1 positions and streams it through shared memory GPU_ATTN_SPLIT positions at a
 * time with an online softmax. It leaves the unnormalised acc[dh] = sum_j exp(s_j - m) v_j, then
 * m and l = sum_j exp(s_j - m), in part[row][head][split][dh + 2]; a split with no positions
 * writes m = -inf, l = 0. */
/* The body of one (head h, row, split sp) block over the row's len positions of k and v, its
 * query at qr; out is its part. */
template <typename KV>
static __device__ void attn_split_block(const float *__restrict__ qr, const KV *__restrict__ k,
					const KV *__restrict__ v, int h, int group, int hkv, int dh, int len,
					int splits, int sp, float scale, float *__restrict__ out)
{
	GPU_DYNAMIC_SHARED(float, sm);
	float *qs = sm, *acc = sm + dh, *p = acc + dh, *red = p + GPU_ATTN_SPLIT;
	const int per = (len + splits - 1) / splits;
	const int start = sp * per, end = min(start + per, len);
	if (start >= end) { /* the same for the whole block */
		if (threadIdx.x == 0) {
			out[dh] = -INFINITY;
			out[dh + 1] = 0.0f;
		}
		return;
	}
	for (int d = threadIdx.x; d < dh; d += blockDim.x) {
		qs[d] = qr[d];
		acc[d] = 0.0f; /* each thread owns acc[d] for its d */
	}
	__syncthreads();

	const size_t kvd = (size_t)hkv * dh, off = (size_t)(h / group) * dh;
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, nw = blockDim.x / 32;
	float m_run = -INFINITY, l_run = 0.0f; /* the same in every thread */
	for (int c0 = start; c0 < end; c0 += GPU_ATTN_SPLIT) {
		const int n = min(GPU_ATTN_SPLIT, end - c0);
		for (int j = warp; j < n; j += nw) {
			const KV *kr = k + (size_t)(c0 + j) * kvd + off;
			float s = 0.0f;
			for (int d = lane; d < dh; d += 32)
				s += qs[d] * gpu_load_f32(kr[d]);
			s = gpu_warp_sum(s);
			if (lane == 0)
				p[j] = s * scale;
		}
		__syncthreads();

		float mx = -INFINITY;
		for (int i = threadIdx.x; i < n; i += blockDim.x)
			mx = fmaxf(mx, p[i]);
		const float m_new = fmaxf(m_run, block_reduce<true>(mx, red));
		const float alpha = expf(m_run - m_new); /* 0 for the first chunk */
		float sum = 0.0f;
		for (int i = threadIdx.x; i < n; i += blockDim.x) {
			float e = expf(p[i] - m_new);
			p[i] = e;
			sum += e;
		}
		l_run = l_run * alpha + block_reduce<false>(sum, red); /* its barrier also publishes p[] */
		m_run = m_new;

		for (int d = threadIdx.x; d < dh; d += blockDim.x) {
			const KV *vc = v + (size_t)c0 * kvd + off + d;
			float a = 0.0f;
			for (int j = 0; j < n; j++)
				a += p[j] * gpu_load_f32(vc[(size_t)j * kvd]);
			acc[d] = acc[d] * alpha + a;
		}
		__syncthreads(); /* p[] is rewritten by the next chunk */
	}
	for (int d = threadIdx.x; d < dh; d += blockDim.x)
		out[d] = acc[d];
	if (threadIdx.x == 0) {
		out[dh] = m_run;
		out[dh + 1] = l_run;
	}
}

template <typename KV>
static __global__ void attn_split_kernel(const float *__restrict__ q, size_t ldq, const KV *__restrict__ k,
					 const KV *__restrict__ v, int group, int hkv, int dh,
					 const int32_t *__restrict__ pos, int n0_arg, int splits, float scale,
					 float *__restrict__ part)
{
	const int h = blockIdx.x, t = blockIdx.y, sp = blockIdx.z;
	const int len = (pos ? *pos : n0_arg) + t + 1;
	float *out = part + (((size_t)t * gridDim.x + h) * splits + sp) * (size_t)(dh + 2);
	attn_split_block(q + (size_t)t * ldq + (size_t)h * dh, k, v, h, group, hkv, dh, len, splits, sp,
			 scale, out);
}

/* attn_split_kernel with row t of sequence seq[t] over its own caches of attention layer
 * `layer`; an inactive row has no positions (every split empty, its output zeros). */
template <typename KV>
static __global__ void attn_rows_kernel(const float *__restrict__ q, size_t ldq, int group, int hkv, int dh,
					const struct gpu_seq_row *__restrict__ seq, int layer, int splits,
					float scale, float *__restrict__ part)
{
	const int h = blockIdx.x, t = blockIdx.y, sp = blockIdx.z;
	const struct gpu_seq_row sr = seq[t];
	const int len = sr.pos < 0 ? 0 : sr.pos + 1;
	const size_t cache = (size_t)sr.kv_cap * hkv * dh;
	const KV *k = sr.kv ? (const KV *)sr.kv + (size_t)layer * 2 * cache : NULL;
	float *out = part + (((size_t)t * gridDim.x + h) * splits + sp) * (size_t)(dh + 2);
	attn_split_block(q + (size_t)t * ldq + (size_t)h * dh, k, k ? k + cache : NULL, h, group, hkv, dh,
			 len, splits, sp, scale, out);
}

/* One block per (query head, row): o = sum_s acc_s exp(m_s - M) / sum_s l_s exp(m_s - M), 0 for a
 * row whose splits are all empty. */
template <typename OutT>
static __global__ void attn_combine_kernel(const float *__restrict__ part, int dh, int splits,
					   OutT *__restrict__ o, size_t ldo)
{
	const int h = blockIdx.x, t = blockIdx.y;
	const size_t stride = (size_t)dh + 2;
	const float *pp = part + ((size_t)t * gridDim.x + h) * splits * stride;
	float M = -INFINITY;
	for (int s = 0; s < splits; s++)
		M = fmaxf(M, pp[s * stride + dh]);
	float L = 0.0f;
	for (int s = 0; s < splits; s++) {
		float ms = pp[s * stride + dh];
		if (ms != -INFINITY)
			L += pp[s * stride + dh + 1] * expf(ms - M);
	}
	OutT *orow = o + (size_t)t * ldo + (size_t)h * dh;
	for (int d = threadIdx.x; d < dh; d += blockDim.x) {
		float acc = 0.0f;
		for (int s = 0; s < splits; s++) {
			float ms = pp[s * stride + dh];
			if (ms != -INFINITY)
				acc += pp[s * stride + d] * expf(ms - M);
		}
		gpu_store(orow + d, L > 0.0f ? acc / L : 0.0f); /* L == 0: a row with no positions */
	}
}

/* ---- flash-style WMMA path (bf16 cache) ------------------------------------------------------ */

static constexpr int WM_WARPS = 2;	    /* each warp owns 16 query rows */
static constexpr int WM_QT = 16 * WM_WARPS; /* query rows per block */
static constexpr int WM_KT = 32;	    /* keys per tile: one per lane in the softmax */

/* Shared memory of the WMMA kernel for a head dim padded to dhp (a multiple of 16); every region
 * starts 32-byte aligned, as WMMA loads and stores need. */
struct wm_layout {
	size_t q, k, v, s, p, o, ml, total;
};

static __host__ __device__ inline size_t wm_align(size_t n)
{
	return (n + 31) & ~(size_t)31;
}

static __host__ __device__ inline wm_layout wm_layout_of(int dhp)
{
	wm_layout l;
	l.q = 0;
	l.k = l.q + wm_align((size_t)WM_QT * dhp * 2);
	l.v = l.k + wm_align((size_t)WM_KT * dhp * 2);
	l.s = l.v + wm_align((size_t)WM_KT * dhp * 2);
	l.p = l.s + wm_align((size_t)WM_WARPS * 16 * WM_KT * 4);
	l.o = l.p + wm_align((size_t)WM_WARPS * 16 * WM_KT * 2);
	l.ml = l.o + wm_align((size_t)WM_WARPS * 16 * dhp * 4);
	l.total = l.ml + wm_align((size_t)WM_WARPS * 16 * 2 * 4);
	return l;
}

/* One block per (query head, tile of WM_QT rows). Keys stream through shared memory in tiles of
 * WM_KT; per tile each warp computes S = Q K^T on tensor cores, updates its rows' running max m
 * and sum l (online softmax, fp32), rescales its fp32 output rows by exp(m_old - m_new) and adds
 * P V with P rounded to bf16. Rows past `rows` compute like the last row and are not stored. */
template <typename OutT>
static __global__ void
attn_wmma_kernel(const float *__restrict__ q, size_t ldq, const __nv_bfloat16 *__restrict__ k,
		 const __nv_bfloat16 *__restrict__ v, int group, int hkv, int dh, int dhp, int rows,
		 const int32_t *__restrict__ pos, int n0_arg, float scale, OutT *__restrict__ o, size_t ldo)
{
	GPU_DYNAMIC_SHARED(unsigned char, smem);
	const wm_layout L = wm_layout_of(dhp);
	__nv_bfloat16 *qs = (__nv_bfloat16 *)(smem + L.q), *ks = (__nv_bfloat16 *)(smem + L.k);
	__nv_bfloat16 *vs = (__nv_bfloat16 *)(smem + L.v);
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	float *S = (float *)(smem + L.s) + warp * 16 * WM_KT;
	__nv_bfloat16 *P = (__nv_bfloat16 *)(smem + L.p) + warp * 16 * WM_KT;
	float *O = (float *)(smem + L.o) + (size_t)warp * 16 * dhp;
	float *ml = (float *)(smem + L.ml) + warp * 16 * 2;

	const int h = blockIdx.x, t0 = blockIdx.y * WM_QT;
	const int n0 = pos ? *pos : n0_arg;
	const size_t kvd = (size_t)hkv * dh, off = (size_t)(h / group) * dh;
	const int last = min(t0 + WM_QT, rows) - 1;
	const int kend = n0 + last + 1; /* keys the tile needs */

	for (int i = threadIdx.x; i < WM_QT * dhp; i += blockDim.x) {
		int r = i / dhp, d = i % dhp, t = t0 + r;
		qs[i] = __float2bfloat16_rn(t < rows && d < dh ? q[(size_t)t * ldq + (size_t)h * dh + d] :
								 0.0f);
	}
	for (int i = lane; i < 16 * dhp; i += 32)
		O[i] = 0.0f;
	if (lane < 16) {
		ml[lane * 2] = -INFINITY;
		ml[lane * 2 + 1] = 0.0f;
	}
	__syncthreads();

	for (int kb = 0; kb < kend; kb += WM_KT) {
		for (int i = threadIdx.x; i < WM_KT * dhp; i += blockDim.x) {
			int r = i / dhp, d = i % dhp, j = kb + r;
			bool in = j < kend && d < dh;
			ks[i] = in ? k[(size_t)j * kvd + off + d] : __float2bfloat16_rn(0.0f);
			vs[i] = in ? v[(size_t)j * kvd + off + d] : __float2bfloat16_rn(0.0f);
		}
		__syncthreads();

		gpu_wmma_scores<WM_KT>(qs + (size_t)warp * 16 * dhp, ks, S, dhp);
		/* key 0 is in the first tile and every row may see it */
		gpu_wmma_softmax_tile<WM_KT>(S, P, O, ml, dhp, kb, scale, [&](int r, int j) {
			return j <= n0 + min(t0 + warp * 16 + r, rows - 1);
		});
		gpu_wmma_pv<WM_KT>(P, vs, O, dhp);
		__syncthreads(); /* the next tile overwrites ks and vs; O is re-read below */
	}

	for (int r = 0; r < 16; r++) {
		int t = t0 + warp * 16 + r;
		if (t >= rows)
			break;
		float inv = 1.0f / ml[r * 2 + 1];
		OutT *orow = o + (size_t)t * ldo + (size_t)h * dh;
		for (int d = lane; d < dh; d += 32)
			gpu_store(orow + d, O[r * dhp + d] * inv);
	}
}

/* ---- launcher ------------------------------------------------------------------------------- */

/* Splits of the sequence per (head, row): one per GPU_ATTN_SPLIT positions of max_len, at most
 * GPU_ATTN_MAX_SPLITS / rows (a prefill's rows already fill the device), so the scratch stays
 * bounded by max(rows, GPU_ATTN_MAX_SPLITS) * hq * (dh + 2) floats however long the sequence. */
static int splits_of(int rows, int max_len)
{
	int s = (max_len + GPU_ATTN_SPLIT - 1) / GPU_ATTN_SPLIT, cap = GPU_ATTN_MAX_SPLITS / rows;
	if (cap < 1)
		cap = 1;
	return s < cap ? s : cap;
}

extern "C" size_t gpu_attention_scratch_floats(int rows, int max_len, int hq, int dh)
{
	if (rows < 1 || rows > GPU_ATTN_MAX_ROWS || max_len < 1 || hq < 1 || dh < 1)
		return 0;
	return (size_t)rows * hq * splits_of(rows, max_len) * ((size_t)dh + 2);
}

template <typename OutT>
static void launch_split(const float *q, size_t ldq, const void *k, const void *v, enum gpu_dtype kv_dtype,
			 int hq, int hkv, int dh, int rows, const int32_t *pos, int n0, int max_len, OutT *o,
			 size_t ldo, float *scratch, cudaStream_t s)
{
	const int splits = splits_of(rows, max_len), group = hq / hkv;
	const float scale = 1.0f / sqrtf((float)dh);
	const size_t smem = (2 * (size_t)dh + GPU_ATTN_SPLIT + 33) * sizeof(float);
	const dim3 grid(hq, rows, splits);
	if (kv_dtype == GPU_DTYPE_BF16)
		klaunch(attn_split_kernel<__nv_bfloat16>, grid, dim3(SPLIT_THREADS), smem, s, q, ldq,
			(const __nv_bfloat16 *)k, (const __nv_bfloat16 *)v, group, hkv, dh, pos, n0, splits,
			scale, scratch);
	else
		klaunch(attn_split_kernel<float>, grid, dim3(SPLIT_THREADS), smem, s, q, ldq,
			(const float *)k, (const float *)v, group, hkv, dh, pos, n0, splits, scale, scratch);
	int threads = (dh + 31) / 32 * 32;
	klaunch(attn_combine_kernel<OutT>, dim3(hq, rows), dim3(threads < 256 ? threads : 256), 0, s,
		(const float *)scratch, dh, splits, o, ldo);
}

template <typename OutT>
static void launch_wmma(const float *q, size_t ldq, const void *k, const void *v, int hq, int hkv, int dh,
			int rows, const int32_t *pos, int n0, OutT *o, size_t ldo, cudaStream_t s)
{
	const int dhp = (dh + 15) / 16 * 16;
	klaunch(attn_wmma_kernel<OutT>, dim3(hq, (rows + WM_QT - 1) / WM_QT), dim3(32 * WM_WARPS),
		wm_layout_of(dhp).total, s, q, ldq, (const __nv_bfloat16 *)k, (const __nv_bfloat16 *)v,
		hq / hkv, hkv, dh, dhp, rows, pos, n0, 1.0f / sqrtf((float)dh), o, ldo);
}

extern "C" int gpu_attention(struct gpu_context *g, const float *q, size_t ldq, const void *k, const void *v,
			     enum gpu_dtype kv_dtype, int hq, int hkv, int dh, int rows, const int32_t *pos,
			     int n0, int max_len, void *o, enum gpu_dtype o_dtype, size_t ldo, float *scratch)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !q || !k || !v || !o || hq < 1 || hkv < 1 || hq % hkv || dh < 1 ||
	    dh > GPU_ATTN_MAX_HEAD_DIM || rows < 0 || rows > GPU_ATTN_MAX_ROWS || n0 < 0 || max_len < 1 ||
	    max_len > GPU_MAX_ROWS || (!pos && n0 + rows > max_len) ||
	    (kv_dtype != GPU_DTYPE_F32 && kv_dtype != GPU_DTYPE_BF16) ||
	    (o_dtype != GPU_DTYPE_F32 && o_dtype != GPU_DTYPE_BF16) || ldq < (size_t)hq * dh ||
	    ldo < (size_t)hq * dh)
		return -EINVAL;
	if (rows == 0)
		return 0;
	cudaStream_t s = (cudaStream_t)g->stream;
	const bool wmma_path =
		kv_dtype == GPU_DTYPE_BF16 && rows >= 16 && dh % 16 == 0 && dh <= GPU_ATTN_WMMA_MAX_HEAD_DIM;
	if (wmma_path) {
		if (o_dtype == GPU_DTYPE_BF16)
			launch_wmma(q, ldq, k, v, hq, hkv, dh, rows, pos, n0, (__nv_bfloat16 *)o, ldo, s);
		else
			launch_wmma(q, ldq, k, v, hq, hkv, dh, rows, pos, n0, (float *)o, ldo, s);
	} else {
		if (!scratch)
			return -EINVAL;
		if (o_dtype == GPU_DTYPE_BF16)
			launch_split(q, ldq, k, v, kv_dtype, hq, hkv, dh, rows, pos, n0, max_len,
				     (__nv_bfloat16 *)o, ldo, scratch, s);
		else
			launch_split(q, ldq, k, v, kv_dtype, hq, hkv, dh, rows, pos, n0, max_len, (float *)o,
				     ldo, scratch, s);
	}
	return GPU_CHECK(cudaGetLastError());
}

extern "C" int gpu_attention_rows(struct gpu_context *g, const float *q, size_t ldq, enum gpu_dtype kv_dtype,
				  int hq, int hkv, int dh, int rows, const struct gpu_seq_row *seq, int layer,
				  int max_len, void *o, enum gpu_dtype o_dtype, size_t ldo, float *scratch)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !q || !seq || !o || !scratch || hq < 1 || hkv < 1 || hq % hkv || dh < 1 ||
	    dh > GPU_ATTN_MAX_HEAD_DIM || rows < 0 || rows > GPU_ATTN_MAX_ROWS || layer < 0 || max_len < 1 ||
	    max_len > GPU_MAX_ROWS || (kv_dtype != GPU_DTYPE_F32 && kv_dtype != GPU_DTYPE_BF16) ||
	    (o_dtype != GPU_DTYPE_F32 && o_dtype != GPU_DTYPE_BF16) || ldq < (size_t)hq * dh ||
	    ldo < (size_t)hq * dh)
		return -EINVAL;
	if (rows == 0)
		return 0;
	cudaStream_t s = (cudaStream_t)g->stream;
	const int splits = splits_of(rows, max_len), group = hq / hkv;
	const float scale = 1.0f / sqrtf((float)dh);
	const size_t smem = (2 * (size_t)dh + GPU_ATTN_SPLIT + 33) * sizeof(float);
	const dim3 grid(hq, rows, splits);
	if (kv_dtype == GPU_DTYPE_BF16)
		klaunch(attn_rows_kernel<__nv_bfloat16>, grid, dim3(SPLIT_THREADS), smem, s, q, ldq, group,
			hkv, dh, seq, layer, splits, scale, scratch);
	else
		klaunch(attn_rows_kernel<float>, grid, dim3(SPLIT_THREADS), smem, s, q, ldq, group, hkv, dh,
			seq, layer, splits, scale, scratch);
	int threads = (dh + 31) / 32 * 32;
	if (o_dtype == GPU_DTYPE_BF16)
		klaunch(attn_combine_kernel<__nv_bfloat16>, dim3(hq, rows),
			dim3(threads < 256 ? threads : 256), 0, s, (const float *)scratch, dh, splits,
			(__nv_bfloat16 *)o, ldo);
	else
		klaunch(attn_combine_kernel<float>, dim3(hq, rows), dim3(threads < 256 ? threads : 256), 0, s,
			(const float *)scratch, dh, splits, (float *)o, ldo);
	return GPU_CHECK(cudaGetLastError());
}
