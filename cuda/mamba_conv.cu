// Mamba-2 causal depthwise conv1d + bias + SiLU (gpu.h gpu_mamba_conv_silu), prefill and decode.
//
// One thread per channel walks a tile of CONV_TILE_T positions in order with the last K inputs
// in registers, so it reads each raw value once (plus K-1 rows before its tile); the tiles of a
// long prefill run in parallel along grid.y. The window is right-aligned in
// GPU_MAMBA_CONV_WINDOW registers (unused leading taps have weight 0), which keeps every register
// index a compile-time constant (no local memory).
// The conv state: with one tile (decode, short prefills) the thread that read its channel's state
// rewrites it at the end, no other thread touching that column; with several, tile 0 reads the
// old state while later tiles run, so mamba_conv_state_kernel replaces it afterwards, in stream
// order.
#include "gpu.h"
#include "gpu_internal.h"
#include "klaunch.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define KMAX GPU_MAMBA_CONV_WINDOW
#define CONV_TILE_T 64
#define CONV_THREADS 128

static __device__ __forceinline__ float load_w(const float *w, size_t i)
{
	return w[i];
}

static __device__ __forceinline__ float load_w(const __nv_bfloat16 *w, size_t i)
{
	return __bfloat162float(w[i]);
}

// grid (ceil(conv_dim / CONV_THREADS), ceil(T / CONV_TILE_T))
template <typename W>
static __global__ void mamba_conv_silu_kernel(const float *__restrict__ raw, size_t ld_raw,
					      const W *__restrict__ w, const float *__restrict__ bias,
					      float *__restrict__ conv_state, float *__restrict__ out,
					      size_t ld_out, int T, int K, int conv_dim)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= conv_dim)
		return;
	const int lead = KMAX - K; // window slot of tap 0
	const int t0 = blockIdx.y * CONV_TILE_T, t1 = min(T, t0 + CONV_TILE_T);
	float wk[KMAX], win[KMAX];
#pragma unroll
	for (int k = 0; k < KMAX; k++) {
		wk[k] = k >= lead ? load_w(w, (size_t)c * K + (k - lead)) : 0.0f;
		// slots lead .. KMAX-2 hold the K-1 inputs before t0 (state rows where t0 - (K-1) +
		// j is negative); slot KMAX-1 receives each new row
		win[k] = 0.0f;
		if (k >= lead && k < KMAX - 1) {
			int p = t0 - (K - 1) + (k - lead);
			win[k] = p < 0 ? conv_state[(size_t)(p + K - 1) * conv_dim + c] :
					 raw[(size_t)p * ld_raw + c];
		}
	}
	const float b = bias ? bias[c] : 0.0f;
	for (int t = t0; t < t1; t++) {
		win[KMAX - 1] = raw[(size_t)t * ld_raw + c];
		float o = b;
#pragma unroll
		for (int k = 0; k < KMAX; k++)
			o += wk[k] * win[k];
		out[(size_t)t * ld_out + c] = o / (1.0f + expf(-o));
#pragma unroll
		for (int k = 0; k < KMAX - 1; k++)
			win[k] = win[k + 1];
	}
	if (gridDim.y > 1)
		return; // mamba_conv_state_kernel follows
			// after the shift, slots lead .. KMAX-2 hold the last K-1 inputs, oldest first
#pragma unroll
	for (int k = 0; k < KMAX - 1; k++)
		if (k >= lead)
			conv_state[(size_t)(k - lead) * conv_dim + c] = win[k];
}

// grid (ceil(conv_dim / CONV_THREADS)): state row j := u[T + j] of u = [state; raw], in
// increasing j, so a row still to be read (j + T > j) is never overwritten first.
static __global__ void mamba_conv_state_kernel(const float *__restrict__ raw, size_t ld_raw,
					       float *__restrict__ conv_state, int T, int K, int conv_dim)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= conv_dim)
		return;
	for (int j = 0; j < K - 1; j++) {
		int p = T + j - (K - 1); // row of raw, or of the old state when negative
		conv_state[(size_t)j * conv_dim + c] =
			p < 0 ? conv_state[(size_t)(p + K - 1) * conv_dim + c] : raw[(size_t)p * ld_raw + c];
	}
}

extern "C" int gpu_launch_mamba_conv_silu(void *stream, int T, int conv_dim, int K, const float *raw,
					  size_t ld_raw, const void *w, int w_bf16, const float *bias,
					  float *conv_state, float *out, size_t ld_out)
{
	cudaStream_t s = (cudaStream_t)stream;
	unsigned tiles = (unsigned)((T + CONV_TILE_T - 1) / CONV_TILE_T);
	dim3 grid((unsigned)((conv_dim + CONV_THREADS - 1) / CONV_THREADS), tiles), block(CONV_THREADS);
	if (w_bf16)
		klaunch(mamba_conv_silu_kernel<__nv_bfloat16>, grid, block, 0, s, raw, ld_raw,
			(const __nv_bfloat16 *)w, bias, conv_state, out, ld_out, T, K, conv_dim);
	else
		klaunch(mamba_conv_silu_kernel<float>, grid, block, 0, s, raw, ld_raw, (const float *)w, bias,
			conv_state, out, ld_out, T, K, conv_dim);
	if (tiles == 1 || K == 1)
		return GPU_CHECK(cudaGetLastError());
	int r = GPU_CHECK(cudaGetLastError());
	if (r < 0)
		return r;
	klaunch(mamba_conv_state_kernel, dim3(grid.x), block, 0, s, raw, ld_raw, conv_state, T, K, conv_dim);
	return GPU_CHECK(cudaGetLastError());
}

// grid (ceil(conv_dim / CONV_THREADS), rows): one decode position of sequence seq[r] per row r,
// the same sums in the same order as mamba_conv_silu_kernel with T = 1.
template <typename W>
static __global__ void mamba_conv_rows_kernel(const float *__restrict__ raw, size_t ld_raw,
					      const W *__restrict__ w, const float *__restrict__ bias,
					      const struct gpu_seq_row *__restrict__ seq, size_t conv_off,
					      float *__restrict__ out, size_t ld_out, int K, int conv_dim)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x, r = blockIdx.y;
	if (c >= conv_dim)
		return;
	float *orow = out + (size_t)r * ld_out;
	if (seq[r].pos < 0) {
		orow[c] = 0.0f;
		return;
	}
	float *conv_state = seq[r].fixed + conv_off;
	const int lead = KMAX - K;
	float wk[KMAX], win[KMAX];
#pragma unroll
	for (int k = 0; k < KMAX; k++) {
		wk[k] = k >= lead ? load_w(w, (size_t)c * K + (k - lead)) : 0.0f;
		win[k] = 0.0f;
		if (k >= lead && k < KMAX - 1)
			win[k] = conv_state[(size_t)(k - lead) * conv_dim + c];
	}
	win[KMAX - 1] = raw[(size_t)r * ld_raw + c];
	float o = bias ? bias[c] : 0.0f;
#pragma unroll
	for (int k = 0; k < KMAX; k++)
		o += wk[k] * win[k];
	orow[c] = o / (1.0f + expf(-o));
#pragma unroll
	for (int k = 0; k < KMAX - 1; k++)
		if (k >= lead)
			conv_state[(size_t)(k - lead) * conv_dim + c] = win[k + 1];
}

extern "C" int gpu_launch_mamba_conv_rows(void *stream, int rows, int conv_dim, int K, const float *raw,
					  size_t ld_raw, const void *w, int w_bf16, const float *bias,
					  const struct gpu_seq_row *seq, size_t conv_off, float *out,
					  size_t ld_out)
{
	cudaStream_t s = (cudaStream_t)stream;
	dim3 grid((unsigned)((conv_dim + CONV_THREADS - 1) / CONV_THREADS), (unsigned)rows),
		block(CONV_THREADS);
	if (w_bf16)
		klaunch(mamba_conv_rows_kernel<__nv_bfloat16>, grid, block, 0, s, raw, ld_raw,
			(const __nv_bfloat16 *)w, bias, seq, conv_off, out, ld_out, K, conv_dim);
	else
		klaunch(mamba_conv_rows_kernel<float>, grid, block, 0, s, raw, ld_raw, (const float *)w, bias,
			seq, conv_off, out, ld_out, K, conv_dim);
	return GPU_CHECK(cudaGetLastError());
}
