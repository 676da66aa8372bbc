// Mamba-2 causal depthwise conv1d + bias + SiLU (gpu.h gpu_mamba_conv_silu), prefill and decode.
//
// One thread per channel walks the T positions in order with the last K inputs in registers,
// so it reads each raw value once, and it alone reads and then rewrites its channel's conv state:
// no other thread touches that column, so the in-place update needs no barrier. The window is
// right-aligned in GPU_MAMBA_MAX_CONV_K registers (unused leading taps have weight 0), which keeps
// every register index a compile-time constant (no local memory).
#include "gpu_internal.h"
#include "klaunch.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define KMAX GPU_MAMBA_CONV_WINDOW

static __device__ __forceinline__ float load_w(const float *w, size_t i)
{
	return w[i];
}

static __device__ __forceinline__ float load_w(const __nv_bfloat16 *w, size_t i)
{
	return __bfloat162float(w[i]);
}

template <typename W>
static __global__ void
mamba_conv_silu_kernel(const float *__restrict__ raw, size_t ld_raw, const W *__restrict__ w,
                       const float *__restrict__ bias, float *__restrict__ conv_state,
                       float *__restrict__ out, size_t ld_out, int T, int K, int conv_dim)
{
	int c = blockIdx.x * blockDim.x + threadIdx.x;
	if (c >= conv_dim)
		return;
	const int lead = KMAX - K; // window slot of tap 0
	float wk[KMAX], win[KMAX];
#pragma unroll
	for (int k = 0; k < KMAX; k++) {
		wk[k] = k >= lead ? load_w(w, (size_t)c * K + (k - lead)) : 0.0f;
		// slots lead .. KMAX-2 hold the state's K-1 rows; slot KMAX-1 receives each new row
		win[k] = k >= lead && k < KMAX - 1 ? conv_state[(size_t)(k - lead) * conv_dim + c]
		                                   : 0.0f;
	}
	const float b = bias ? bias[c] : 0.0f;
	for (int t = 0; t < T; t++) {
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
	// after the shift, slots lead .. KMAX-2 hold the last K-1 inputs, oldest first
#pragma unroll
	for (int k = 0; k < KMAX - 1; k++)
		if (k >= lead)
			conv_state[(size_t)(k - lead) * conv_dim + c] = win[k];
}

extern "C" int gpu_launch_mamba_conv_silu(void *stream, int T, int conv_dim, int K,
                                          const float *raw, size_t ld_raw, const void *w,
                                          int w_bf16, const float *bias, float *conv_state,
                                          float *out, size_t ld_out)
{
	cudaStream_t s = (cudaStream_t)stream;
	dim3 grid((unsigned)((conv_dim + 127) / 128)), block(128);
	if (w_bf16)
		klaunch(mamba_conv_silu_kernel<__nv_bfloat16>, grid, block, 0, s, raw, ld_raw,
		        (const __nv_bfloat16 *)w, bias, conv_state, out, ld_out, T, K, conv_dim);
	else
		klaunch(mamba_conv_silu_kernel<float>, grid, block, 0, s, raw, ld_raw,
		        (const float *)w, bias, conv_state, out, ld_out, T, K, conv_dim);
	return GPU_CHECK(cudaGetLastError());
}
