// Kernels of the RADIO vision encoder and the mlp1 projector (gpu.h, "vision operations"):
// patch extraction, token assembly with the position grid, LayerNorm, bias + GELU, bidirectional
// attention over each tile's tokens, pixel shuffle + RMSNorm.
#include "gpu.h"
#include "gpu_internal.h"
#include "kernel_util.cuh"
#include "klaunch.h"
#include "wmma_attention.cuh"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>

static constexpr int VIS_THREADS = 256;
static constexpr int ATT_WARPS = 4; /* query rows per attention block, one per warp */
static constexpr int ATT_KEYS = 32; /* keys staged in shared memory at a time, one per lane */
static constexpr int ATT_ACC = GPU_VISION_MAX_HEAD_DIM / 32;

/* One block per patch (blockIdx.x = tile * rows * cols + patch). */
template <typename OutT>
static __global__ void vis_patchify_kernel(const float *__restrict__ pixels, int rows, int cols, int p,
					   OutT *__restrict__ patches)
{
	int n = rows * cols, tile = blockIdx.x / n, patch = blockIdx.x % n;
	int py = patch / cols, px = patch % cols, pp = p * p;
	size_t img_w = (size_t)cols * p, img_h = (size_t)rows * p;
	const float *img = pixels + (size_t)tile * 3 * img_h * img_w;
	OutT *o = patches + (size_t)blockIdx.x * 3 * pp;
	for (int i = threadIdx.x; i < 3 * pp; i += blockDim.x) {
		int c = i / pp, yy = (i % pp) / p, xx = i % p;
		gpu_store(o + i, img[((size_t)c * img_h + (size_t)py * p + yy) * img_w + (size_t)px * p + xx]);
	}
}

/* One block per token row (blockIdx.x = tile * (n_prefix + n) + token). */
static __global__ void vis_tokens_kernel(const float *__restrict__ emb, const float *__restrict__ pos,
					 const float *__restrict__ prefix, int n, int n_prefix, int d,
					 float *__restrict__ x)
{
	int L = n_prefix + n, tile = blockIdx.x / L, t = blockIdx.x % L;
	float *o = x + (size_t)blockIdx.x * d;
	if (t < n_prefix) {
		for (int c = threadIdx.x; c < d; c += blockDim.x)
			o[c] = prefix[(size_t)t * d + c];
	} else {
		const float *e = emb + ((size_t)tile * n + (t - n_prefix)) * d,
			    *q = pos + (size_t)(t - n_prefix) * d;
		for (int c = threadIdx.x; c < d; c += blockDim.x)
			o[c] = e[c] + q[c];
	}
}

/* One block per row: two passes (mean, then the centred sum of squares) in fp32. */
template <typename OutT>
static __global__ void vis_layernorm_kernel(const float *__restrict__ x, size_t ldx,
					    const float *__restrict__ gamma, const float *__restrict__ beta,
					    int d, float eps, OutT *__restrict__ out, size_t ldo)
{
	__shared__ float partial[33];
	const float *xr = x + (size_t)blockIdx.x * ldx;
	float s = 0.0f;
	for (int c = threadIdx.x; c < d; c += blockDim.x)
		s += xr[c];
	float mean = gpu_block_sum(s, partial) / (float)d;
	float sq = 0.0f;
	for (int c = threadIdx.x; c < d; c += blockDim.x) {
		float v = xr[c] - mean;
		sq += v * v;
	}
	float rstd = 1.0f / sqrtf(gpu_block_sum(sq, partial) / (float)d + eps);
	OutT *o = out + (size_t)blockIdx.x * ldo;
	for (int c = threadIdx.x; c < d; c += blockDim.x)
		gpu_store(o + c, (xr[c] - mean) * rstd * gamma[c] + beta[c]);
}

/* One block per row. */
template <typename OutT>
static __global__ void vis_bias_act_kernel(const float *x, size_t ldx, const float *__restrict__ b, int d,
					   int gelu, OutT *out, size_t ldo)
{
	const float *xr = x + (size_t)blockIdx.x * ldx;
	OutT *o = out + (size_t)blockIdx.x * ldo;
	for (int c = threadIdx.x; c < d; c += blockDim.x) {
		float v = xr[c] + b[c];
		if (gelu)
			v = 0.5f * v * (1.0f + erff(v * (float)M_SQRT1_2));
		gpu_store(o + c, v);
	}
}

/* Attention over one tile's L tokens for one head: grid (ceil(L / ATT_WARPS), heads, tiles), one
 * warp per query row with an online softmax over chunks of ATT_KEYS keys; the block stages each
 * chunk's K (rows padded by one float against bank conflicts) and V in shared memory. Every warp
 * of the block takes part in the staging, also one past the last query row. */
template <typename OutT>
static __global__ void vis_attention_kernel(const float *__restrict__ qkv, int L, int D, int hd, float scale,
					    OutT *__restrict__ out)
{
	GPU_DYNAMIC_SHARED(float, smem);
	float *ks = smem, *vs = ks + ATT_KEYS * (hd + 1), *qs = vs + ATT_KEYS * hd;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	int row = blockIdx.x * ATT_WARPS + warp, head = blockIdx.y, tile = blockIdx.z;
	bool valid = row < L;
	size_t ld = (size_t)3 * D;
	const float *base = qkv + (size_t)tile * L * ld + (size_t)head * hd;
	float *q = qs + warp * hd;
	if (valid)
		for (int c = lane; c < hd; c += 32)
			q[c] = base[(size_t)row * ld + c];
	__syncwarp();
	float m = -INFINITY, l = 0.0f, acc[ATT_ACC];
	for (int k = 0; k < ATT_ACC; k++)
		acc[k] = 0.0f;
	for (int kc = 0; kc < L; kc += ATT_KEYS) {
		__syncthreads();
		for (int i = threadIdx.x; i < ATT_KEYS * hd; i += blockDim.x) {
			int j = i / hd, c = i % hd, key = kc + j;
			ks[j * (hd + 1) + c] = key < L ? base[(size_t)key * ld + D + c] : 0.0f;
			vs[j * hd + c] = key < L ? base[(size_t)key * ld + 2 * (size_t)D + c] : 0.0f;
		}
		__syncthreads();
		if (!valid)
			continue;
		int key = kc + lane, n_keys = L - kc < ATT_KEYS ? L - kc : ATT_KEYS;
		float s = -INFINITY;
		if (key < L) {
			s = 0.0f;
			for (int c = 0; c < hd; c++)
				s += q[c] * ks[lane * (hd + 1) + c];
			s *= scale;
		}
		float cmax = s;
		for (int o = 16; o > 0; o >>= 1)
			cmax = fmaxf(cmax, __shfl_xor_sync(0xffffffffu, cmax, o));
		float m_new = fmaxf(m, cmax); /* finite: key kc < L */
		float alpha = expf(m - m_new);
		float p = key < L ? expf(s - m_new) : 0.0f;
		float psum = p;
		for (int o = 16; o > 0; o >>= 1)
			psum += __shfl_xor_sync(0xffffffffu, psum, o);
		l = l * alpha + psum;
		for (int k = 0; k < ATT_ACC; k++)
			acc[k] *= alpha;
		for (int j = 0; j < n_keys; j++) {
			float pj = __shfl_sync(0xffffffffu, p, j);
			for (int k = 0; k < ATT_ACC; k++) {
				int c = lane + 32 * k;
				if (c < hd)
					acc[k] += pj * vs[j * hd + c];
			}
		}
		m = m_new;
	}
	if (!valid)
		return;
	OutT *o = out + ((size_t)tile * L + row) * D + (size_t)head * hd;
	for (int k = 0; k < ATT_ACC; k++) {
		int c = lane + 32 * k;
		if (c < hd)
			gpu_store(o + c, acc[k] / l);
	}
}

/* One block per output token (blockIdx.x = tile * orow * ocol + token). */
template <typename OutT>
static __global__ void vis_shuffle_norm_kernel(const float *__restrict__ feat, size_t tile_stride, int rows,
					       int cols, int d, int s, const float *__restrict__ gamma,
					       float eps, OutT *__restrict__ out)
{
	__shared__ float partial[33];
	int ocol = cols / s, n = (rows / s) * ocol, tile = blockIdx.x / n, tok = blockIdx.x % n;
	int i = tok / ocol, j = tok % ocol, P = d * s * s;
	const float *f = feat + (size_t)tile * tile_stride;
	float sq = 0.0f;
	for (int c = threadIdx.x; c < P; c += blockDim.x) {
		int part = c / d, di = part / s, dj = part % s;
		float v = f[((size_t)(s * i + di) * cols + (size_t)(s * j + dj)) * d + c % d];
		sq += v * v;
	}
	float rms = 1.0f / sqrtf(gpu_block_sum(sq, partial) / (float)P + eps);
	OutT *o = out + (size_t)blockIdx.x * P;
	for (int c = threadIdx.x; c < P; c += blockDim.x) {
		int part = c / d, di = part / s, dj = part % s;
		float v = f[((size_t)(s * i + di) * cols + (size_t)(s * j + dj)) * d + c % d];
		gpu_store(o + c, v * rms * gamma[c]);
	}
}

static int vis_threads(int n)
{
	int t = (n + 31) / 32 * 32;
	return t < VIS_THREADS ? t : VIS_THREADS;
}

static bool vis_dtype_ok(enum gpu_dtype t)
{
	return t == GPU_DTYPE_F32 || t == GPU_DTYPE_BF16;
}

extern "C" int gpu_vision_patchify(struct gpu_context *g, const float *pixels, int tiles, int rows, int cols,
				   int p, void *patches, enum gpu_dtype dtype)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !pixels || !patches || !vis_dtype_ok(dtype) || tiles < 0 || rows < 1 || cols < 1 || p < 1 ||
	    p > GPU_VISION_MAX_PATCH || (int64_t)tiles * rows * cols > GPU_MAX_ROWS)
		return -EINVAL;
	if (tiles == 0)
		return 0;
	cudaStream_t st = (cudaStream_t)g->stream;
	unsigned blocks = (unsigned)(tiles * rows * cols);
	if (dtype == GPU_DTYPE_BF16)
		klaunch(vis_patchify_kernel<__nv_bfloat16>, dim3(blocks), dim3(vis_threads(3 * p * p)), 0, st,
			pixels, rows, cols, p, (__nv_bfloat16 *)patches);
	else
		klaunch(vis_patchify_kernel<float>, dim3(blocks), dim3(vis_threads(3 * p * p)), 0, st, pixels,
			rows, cols, p, (float *)patches);
	return GPU_CHECK(cudaGetLastError());
}

extern "C" int gpu_vision_tokens(struct gpu_context *g, const float *emb, const float *pos,
				 const float *prefix, int tiles, int n, int n_prefix, int d, float *x)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !emb || !pos || (n_prefix > 0 && !prefix) || !x || tiles < 0 || n < 1 || n_prefix < 0 ||
	    d < 1 || (int64_t)tiles * (n + n_prefix) > GPU_MAX_ROWS)
		return -EINVAL;
	if (tiles == 0)
		return 0;
	klaunch(vis_tokens_kernel, dim3((unsigned)(tiles * (n + n_prefix))), dim3(vis_threads(d)), 0,
		(cudaStream_t)g->stream, emb, pos, prefix, n, n_prefix, d, x);
	return GPU_CHECK(cudaGetLastError());
}

extern "C" int gpu_layernorm(struct gpu_context *g, const float *x, size_t ldx, const float *gamma,
			     const float *beta, int rows, int d, float eps, void *out,
			     enum gpu_dtype out_dtype, size_t ldo)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !x || !gamma || !beta || !out || !vis_dtype_ok(out_dtype) || rows < 0 ||
	    rows > GPU_MAX_ROWS || d < 1 || ldx < (size_t)d || ldo < (size_t)d || !(eps >= 0) ||
	    (out == (const void *)x && (out_dtype != GPU_DTYPE_F32 || ldo != ldx)))
		return -EINVAL;
	if (rows == 0)
		return 0;
	cudaStream_t st = (cudaStream_t)g->stream;
	if (out_dtype == GPU_DTYPE_BF16)
		klaunch(vis_layernorm_kernel<__nv_bfloat16>, dim3(rows), dim3(vis_threads(d)), 0, st, x, ldx,
			gamma, beta, d, eps, (__nv_bfloat16 *)out, ldo);
	else
		klaunch(vis_layernorm_kernel<float>, dim3(rows), dim3(vis_threads(d)), 0, st, x, ldx, gamma,
			beta, d, eps, (float *)out, ldo);
	return GPU_CHECK(cudaGetLastError());
}

extern "C" int gpu_bias_act(struct gpu_context *g, const float *x, size_t ldx, const float *b, int rows,
			    int d, enum gpu_act act, void *out, enum gpu_dtype out_dtype, size_t ldo)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !x || !b || !out || !vis_dtype_ok(out_dtype) ||
	    (act != GPU_ACT_NONE && act != GPU_ACT_GELU_ERF) || rows < 0 || rows > GPU_MAX_ROWS || d < 1 ||
	    ldx < (size_t)d || ldo < (size_t)d ||
	    (out == (const void *)x && (out_dtype != GPU_DTYPE_F32 || ldo != ldx)))
		return -EINVAL;
	if (rows == 0)
		return 0;
	cudaStream_t st = (cudaStream_t)g->stream;
	int gelu = act == GPU_ACT_GELU_ERF;
	if (out_dtype == GPU_DTYPE_BF16)
		klaunch(vis_bias_act_kernel<__nv_bfloat16>, dim3(rows), dim3(vis_threads(d)), 0, st, x, ldx,
			b, d, gelu, (__nv_bfloat16 *)out, ldo);
	else
		klaunch(vis_bias_act_kernel<float>, dim3(rows), dim3(vis_threads(d)), 0, st, x, ldx, b, d,
			gelu, (float *)out, ldo);
	return GPU_CHECK(cudaGetLastError());
}

/* ---- the same on tensor cores (bf16 output: the bf16 precision) ---------------------------------
 * Flash-style, as attention.cu's prefill kernel without its causal mask: one block per (query
 * tile of VW_QT rows, head, tile); keys stream through shared memory VW_KT at a time; each warp
 * computes S = Q K^T for its 16 rows with WMMA (Q, K in bf16, fp32 accumulation), keeps its
 * rows' running max and sum (online softmax, fp32), rescales its fp32 output rows and adds P V
 * with P and V in bf16. Rows past L compute like row L - 1 and are not stored. hd % 16 == 0. */
static constexpr int VW_WARPS = 2;	    /* each warp owns 16 query rows */
static constexpr int VW_QT = 16 * VW_WARPS; /* query rows per block */
static constexpr int VW_KT = 32;	    /* keys per tile: one per lane in the softmax */

struct vw_layout {
	size_t q, k, v, s, p, o, ml, total;
};

static __host__ __device__ inline size_t vw_align(size_t n)
{
	return (n + 31) & ~(size_t)31;
}

/* Dynamic shared memory for head dim hd; every region starts 32-byte aligned for WMMA. */
static __host__ __device__ inline vw_layout vw_layout_of(int hd)
{
	vw_layout l;
	l.q = 0;
	l.k = l.q + vw_align((size_t)VW_QT * hd * 2);
	l.v = l.k + vw_align((size_t)VW_KT * hd * 2);
	l.s = l.v + vw_align((size_t)VW_KT * hd * 2);
	l.p = l.s + vw_align((size_t)VW_WARPS * 16 * VW_KT * 4);
	l.o = l.p + vw_align((size_t)VW_WARPS * 16 * VW_KT * 2);
	l.ml = l.o + vw_align((size_t)VW_WARPS * 16 * hd * 4);
	l.total = l.ml + vw_align((size_t)VW_WARPS * 16 * 2 * 4);
	return l;
}

static __global__ void vis_attention_wmma_kernel(const float *__restrict__ qkv, int L, int D, int hd,
						 float scale, __nv_bfloat16 *__restrict__ out)
{
	GPU_DYNAMIC_SHARED(unsigned char, smem);
	const vw_layout ly = vw_layout_of(hd);
	__nv_bfloat16 *qs = (__nv_bfloat16 *)(smem + ly.q), *ks = (__nv_bfloat16 *)(smem + ly.k);
	__nv_bfloat16 *vs = (__nv_bfloat16 *)(smem + ly.v);
	const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	float *S = (float *)(smem + ly.s) + warp * 16 * VW_KT;
	__nv_bfloat16 *P = (__nv_bfloat16 *)(smem + ly.p) + warp * 16 * VW_KT;
	float *O = (float *)(smem + ly.o) + (size_t)warp * 16 * hd;
	float *ml = (float *)(smem + ly.ml) + warp * 16 * 2;

	const int t0 = blockIdx.x * VW_QT, head = blockIdx.y, tile = blockIdx.z;
	const size_t ld = (size_t)3 * D;
	const float *base = qkv + (size_t)tile * L * ld + (size_t)head * hd;

	for (int i = threadIdx.x; i < VW_QT * hd; i += blockDim.x) {
		int r = i / hd, d = i % hd, t = min(t0 + r, L - 1);
		qs[i] = __float2bfloat16_rn(base[(size_t)t * ld + d]);
	}
	for (int i = lane; i < 16 * hd; i += 32)
		O[i] = 0.0f;
	if (lane < 16) {
		ml[lane * 2] = -INFINITY;
		ml[lane * 2 + 1] = 0.0f;
	}
	__syncthreads();

	for (int kb = 0; kb < L; kb += VW_KT) {
		for (int i = threadIdx.x; i < VW_KT * hd; i += blockDim.x) {
			int r = i / hd, d = i % hd, j = kb + r;
			bool in = j < L;
			ks[i] = __float2bfloat16_rn(in ? base[(size_t)j * ld + D + d] : 0.0f);
			vs[i] = __float2bfloat16_rn(in ? base[(size_t)j * ld + 2 * (size_t)D + d] : 0.0f);
		}
		__syncthreads();

		gpu_wmma_scores<VW_KT>(qs + (size_t)warp * 16 * hd, ks, S, hd);
		/* key kb < L for every tile, so the running max is finite */
		gpu_wmma_softmax_tile<VW_KT>(S, P, O, ml, hd, kb, scale, [&](int, int j) { return j < L; });
		gpu_wmma_pv<VW_KT>(P, vs, O, hd);
		__syncthreads(); /* the next tile overwrites ks and vs */
	}

	for (int r = 0; r < 16; r++) {
		int t = t0 + warp * 16 + r;
		if (t >= L)
			break;
		float inv = 1.0f / ml[r * 2 + 1];
		__nv_bfloat16 *orow = out + ((size_t)tile * L + t) * D + (size_t)head * hd;
		for (int d = lane; d < hd; d += 32)
			orow[d] = __float2bfloat16_rn(O[r * hd + d] * inv);
	}
}

extern "C" int gpu_vision_attention(struct gpu_context *g, const float *qkv, int tiles, int L, int D,
				    int heads, void *out, enum gpu_dtype out_dtype)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !qkv || !out || !vis_dtype_ok(out_dtype) || tiles < 0 || L < 1 || D < 1 || heads < 1 ||
	    D % heads != 0 || D / heads > GPU_VISION_MAX_HEAD_DIM || heads > 65535 || tiles > 65535 ||
	    (int64_t)tiles * L > GPU_MAX_ROWS)
		return -EINVAL;
	if (tiles == 0)
		return 0;
	int hd = D / heads;
	size_t smem = sizeof(float) *
		      ((size_t)ATT_KEYS * (hd + 1) + (size_t)ATT_KEYS * hd + (size_t)ATT_WARPS * hd);
	dim3 grid((unsigned)((L + ATT_WARPS - 1) / ATT_WARPS), (unsigned)heads, (unsigned)tiles);
	float scale = 1.0f / sqrtf((float)hd);
	cudaStream_t st = (cudaStream_t)g->stream;
	if (out_dtype == GPU_DTYPE_BF16 && hd % 16 == 0)
		klaunch(vis_attention_wmma_kernel,
			dim3((unsigned)((L + VW_QT - 1) / VW_QT), (unsigned)heads, (unsigned)tiles),
			dim3(32 * VW_WARPS), vw_layout_of(hd).total, st, qkv, L, D, hd, scale,
			(__nv_bfloat16 *)out);
	else if (out_dtype == GPU_DTYPE_BF16)
		klaunch(vis_attention_kernel<__nv_bfloat16>, grid, dim3(32 * ATT_WARPS), smem, st, qkv, L, D,
			hd, scale, (__nv_bfloat16 *)out);
	else
		klaunch(vis_attention_kernel<float>, grid, dim3(32 * ATT_WARPS), smem, st, qkv, L, D, hd,
			scale, (float *)out);
	return GPU_CHECK(cudaGetLastError());
}

extern "C" int gpu_vision_shuffle_norm(struct gpu_context *g, const float *features, size_t tile_stride,
				       int tiles, int rows, int cols, int d, int s, const float *gamma,
				       float eps, void *out, enum gpu_dtype out_dtype)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !features || !gamma || !out || !vis_dtype_ok(out_dtype) || tiles < 0 || rows < 1 ||
	    cols < 1 || d < 1 || s < 1 || rows % s != 0 || cols % s != 0 ||
	    tile_stride < (size_t)rows * cols * d || (int64_t)d * s * s > GPU_VISION_MAX_DIM ||
	    (int64_t)tiles * rows * cols > GPU_MAX_ROWS || !(eps >= 0))
		return -EINVAL;
	if (tiles == 0)
		return 0;
	unsigned blocks = (unsigned)(tiles * (rows / s) * (cols / s));
	cudaStream_t st = (cudaStream_t)g->stream;
	if (out_dtype == GPU_DTYPE_BF16)
		klaunch(vis_shuffle_norm_kernel<__nv_bfloat16>, dim3(blocks), dim3(vis_threads(d * s * s)), 0,
			st, features, tile_stride, rows, cols, d, s, gamma, eps, (__nv_bfloat16 *)out);
	else
		klaunch(vis_shuffle_norm_kernel<float>, dim3(blocks), dim3(vis_threads(d * s * s)), 0, st,
			features, tile_stride, rows, cols, d, s, gamma, eps, (float *)out);
	return GPU_CHECK(cudaGetLastError());
}
