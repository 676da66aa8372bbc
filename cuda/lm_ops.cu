// Row and elementwise kernels of the language model (gpu.h): embedding gather, residual add +
// RMSNorm, ReLU², KV-cache append.
#include "gpu.h"
#include "gpu_internal.h"
#include "kernel_util.cuh"
#include "klaunch.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <errno.h>
#include <math.h>

static constexpr int ROW_THREADS = 256;

template <typename T>
static __global__ void embed_kernel(const T *__restrict__ table, int vocab, int d,
				    const int32_t *__restrict__ ids, const float *__restrict__ spliced,
				    int n_spliced, float *__restrict__ h)
{
	int32_t id = ids[blockIdx.x];
	float *hr = h + (size_t)blockIdx.x * d;
	if (id >= 0 && id < vocab) {
		const T *src = table + (size_t)id * d;
		for (int c = threadIdx.x; c < d; c += blockDim.x)
			hr[c] = gpu_load_f32(src[c]);
	} else if (id < 0 && -(int64_t)id - 1 < n_spliced) {
		const float *src = spliced + (size_t)(-(int64_t)id - 1) * d;
		for (int c = threadIdx.x; c < d; c += blockDim.x)
			hr[c] = src[c];
	} else {
		for (int c = threadIdx.x; c < d; c += blockDim.x)
			hr[c] = nanf("");
	}
}

template <typename OutT>
static __global__ void add_rmsnorm_kernel(float *__restrict__ h, const float *__restrict__ delta,
					  const float *__restrict__ w, int d, float eps, OutT *out, size_t ldo)
{
	__shared__ float partial[33];
	float *hr = h + (size_t)blockIdx.x * d;
	float ss = 0.0f;
	if (delta) {
		const float *dr = delta + (size_t)blockIdx.x * d;
		for (int c = threadIdx.x; c < d; c += blockDim.x) {
			float v = hr[c] + dr[c];
			hr[c] = v;
			ss += v * v;
		}
	} else {
		for (int c = threadIdx.x; c < d; c += blockDim.x)
			ss += hr[c] * hr[c];
	}
	ss = gpu_block_sum(ss, partial);
	float scale = 1.0f / sqrtf(ss / (float)d + eps);
	OutT *o = out + (size_t)blockIdx.x * ldo;
	for (int c = threadIdx.x; c < d; c += blockDim.x)
		gpu_store(o + c, w[c] * (hr[c] * scale));
}

template <typename OutT> static __global__ void relu2_kernel(const float *u, OutT *out, size_t n)
{
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
	     i += (size_t)gridDim.x * blockDim.x) {
		float v = u[i];
		float r = v > 0.0f ? v : (v != v ? v : 0.0f);
		gpu_store(out + i, r * r);
	}
}

template <typename T>
static __global__ void kv_append_kernel(const T *__restrict__ k_new, const T *__restrict__ v_new,
					T *__restrict__ k_cache, T *__restrict__ v_cache, int kv_dim,
					const int32_t *__restrict__ pos)
{
	size_t dst = ((size_t)*pos + blockIdx.x) * kv_dim, src = (size_t)blockIdx.x * kv_dim;
	for (int c = threadIdx.x; c < kv_dim; c += blockDim.x) {
		k_cache[dst + c] = k_new[src + c];
		v_cache[dst + c] = v_new[src + c];
	}
}

/* Threads for a kernel with one block per row of n elements: a multiple of 32, up to 256. */
static int row_threads(int n)
{
	int t = (n + 31) / 32 * 32;
	return t < ROW_THREADS ? t : ROW_THREADS;
}

static bool dtype_ok(enum gpu_dtype t)
{
	return t == GPU_DTYPE_F32 || t == GPU_DTYPE_BF16;
}

extern "C" int gpu_embed(struct gpu_context *g, const void *table, enum gpu_dtype table_dtype, int vocab,
			 int d, const int32_t *ids, int rows, const float *spliced, int n_spliced, float *h)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !table || !dtype_ok(table_dtype) || vocab < 1 || d < 1 || !ids || rows < 0 ||
	    rows > GPU_MAX_ROWS || n_spliced < 0 || (n_spliced > 0 && !spliced) || !h)
		return -EINVAL;
	if (rows == 0)
		return 0;
	cudaStream_t s = (cudaStream_t)g->stream;
	if (table_dtype == GPU_DTYPE_BF16)
		klaunch(embed_kernel<__nv_bfloat16>, dim3(rows), dim3(row_threads(d)), 0, s,
			(const __nv_bfloat16 *)table, vocab, d, ids, spliced, n_spliced, h);
	else
		klaunch(embed_kernel<float>, dim3(rows), dim3(row_threads(d)), 0, s, (const float *)table,
			vocab, d, ids, spliced, n_spliced, h);
	return GPU_CHECK(cudaGetLastError());
}

extern "C" int gpu_add_rmsnorm(struct gpu_context *g, float *h, const float *delta, const float *w, int rows,
			       int d, float eps, void *out, enum gpu_dtype out_dtype, size_t ldo)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !h || !w || rows < 0 || rows > GPU_MAX_ROWS || d < 1 || !(eps >= 0) || !out ||
	    !dtype_ok(out_dtype) || ldo < (size_t)d ||
	    (out == (void *)h && (out_dtype != GPU_DTYPE_F32 || ldo != (size_t)d)))
		return -EINVAL;
	if (rows == 0)
		return 0;
	cudaStream_t s = (cudaStream_t)g->stream;
	if (out_dtype == GPU_DTYPE_BF16)
		klaunch(add_rmsnorm_kernel<__nv_bfloat16>, dim3(rows), dim3(row_threads(d)), 0, s, h, delta,
			w, d, eps, (__nv_bfloat16 *)out, ldo);
	else
		klaunch(add_rmsnorm_kernel<float>, dim3(rows), dim3(row_threads(d)), 0, s, h, delta, w, d,
			eps, (float *)out, ldo);
	return GPU_CHECK(cudaGetLastError());
}

extern "C" int gpu_relu2(struct gpu_context *g, const float *u, void *out, enum gpu_dtype out_dtype, size_t n)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !u || !out || !dtype_ok(out_dtype) || (out == (const void *)u && out_dtype != GPU_DTYPE_F32))
		return -EINVAL;
	if (n == 0)
		return 0;
	size_t blocks = (n + ROW_THREADS - 1) / ROW_THREADS;
	if (blocks > 4096)
		blocks = 4096;
	cudaStream_t s = (cudaStream_t)g->stream;
	if (out_dtype == GPU_DTYPE_BF16)
		klaunch(relu2_kernel<__nv_bfloat16>, dim3((unsigned)blocks), dim3(ROW_THREADS), 0, s, u,
			(__nv_bfloat16 *)out, n);
	else
		klaunch(relu2_kernel<float>, dim3((unsigned)blocks), dim3(ROW_THREADS), 0, s, u, (float *)out,
			n);
	return GPU_CHECK(cudaGetLastError());
}

extern "C" int gpu_kv_append(struct gpu_context *g, const void *k_new, const void *v_new, void *k_cache,
			     void *v_cache, enum gpu_dtype dtype, int kv_dim, int rows, const int32_t *pos)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !k_new || !v_new || !k_cache || !v_cache || !dtype_ok(dtype) || kv_dim < 1 || rows < 0 ||
	    rows > GPU_MAX_ROWS || !pos)
		return -EINVAL;
	if (rows == 0)
		return 0;
	cudaStream_t s = (cudaStream_t)g->stream;
	if (dtype == GPU_DTYPE_BF16)
		klaunch(kv_append_kernel<__nv_bfloat16>, dim3(rows), dim3(row_threads(kv_dim)), 0, s,
			(const __nv_bfloat16 *)k_new, (const __nv_bfloat16 *)v_new, (__nv_bfloat16 *)k_cache,
			(__nv_bfloat16 *)v_cache, kv_dim, pos);
	else
		klaunch(kv_append_kernel<float>, dim3(rows), dim3(row_threads(kv_dim)), 0, s,
			(const float *)k_new, (const float *)v_new, (float *)k_cache, (float *)v_cache,
			kv_dim, pos);
	return GPU_CHECK(cudaGetLastError());
}

/* One block per row: row r's K and V rows to attention layer `layer` of sequence seq[r] at its
 * position (nothing for an inactive row). */
template <typename T>
static __global__ void kv_append_rows_kernel(const T *__restrict__ k_new, const T *__restrict__ v_new,
					     int kv_dim, const struct gpu_seq_row *__restrict__ seq, int layer)
{
	const struct gpu_seq_row sr = seq[blockIdx.x];
	if (sr.pos < 0)
		return;
	const size_t cache = (size_t)sr.kv_cap * kv_dim;
	T *k_cache = (T *)sr.kv + (size_t)layer * 2 * cache, *v_cache = k_cache + cache;
	size_t dst = (size_t)sr.pos * kv_dim, src = (size_t)blockIdx.x * kv_dim;
	for (int c = threadIdx.x; c < kv_dim; c += blockDim.x) {
		k_cache[dst + c] = k_new[src + c];
		v_cache[dst + c] = v_new[src + c];
	}
}

extern "C" int gpu_kv_append_rows(struct gpu_context *g, const void *k_new, const void *v_new,
				  enum gpu_dtype dtype, int kv_dim, int rows, const struct gpu_seq_row *seq,
				  int layer)
{
	GPU_BIND_OR_RETURN(g);
	if (!g || !k_new || !v_new || !seq || !dtype_ok(dtype) || kv_dim < 1 || rows < 0 ||
	    rows > GPU_MAX_ROWS || layer < 0)
		return -EINVAL;
	if (rows == 0)
		return 0;
	cudaStream_t s = (cudaStream_t)g->stream;
	if (dtype == GPU_DTYPE_BF16)
		klaunch(kv_append_rows_kernel<__nv_bfloat16>, dim3(rows), dim3(row_threads(kv_dim)), 0, s,
			(const __nv_bfloat16 *)k_new, (const __nv_bfloat16 *)v_new, kv_dim, seq, layer);
	else
		klaunch(kv_append_rows_kernel<float>, dim3(rows), dim3(row_threads(kv_dim)), 0, s,
			(const float *)k_new, (const float *)v_new, kv_dim, seq, layer);
	return GPU_CHECK(cudaGetLastError());
}
