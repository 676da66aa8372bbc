// Mamba-2 gated grouped RMSNorm (gpu.h gpu_mamba_gated_rmsnorm): one block per (group, row);
// the gated values are recomputed in the second pass rather than stored, and each thread
// rewrites only the elements it read, so out may be y itself.
#include "gpu_internal.h"
#include "klaunch.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#define NORM_THREADS 256

static __device__ __forceinline__ void store_out(float *o, size_t i, float v)
{
	o[i] = v;
}

static __device__ __forceinline__ void store_out(__nv_bfloat16 *o, size_t i, float v)
{
	o[i] = __float2bfloat16_rn(v);
}

static __device__ __forceinline__ float gated(const float *y, const float *z, int i)
{
	float zv = z[i];
	return y[i] * (zv / (1.0f + expf(-zv)));
}

// grid (T, G)
template <typename O>
static __global__ void mamba_gated_rmsnorm_kernel(const float *y, size_t ld_y, const float *__restrict__ z,
						  size_t ld_z, const float *__restrict__ w, float eps, O *out,
						  size_t ld_out, int gs)
{
	size_t t = blockIdx.x, c0 = (size_t)blockIdx.y * gs;
	const float *yr = y + t * ld_y + c0, *zr = z + t * ld_z + c0;
	float ss = 0.0f;
	for (int i = threadIdx.x; i < gs; i += NORM_THREADS) {
		float u = gated(yr, zr, i);
		ss += u * u;
	}
	for (int o = 16; o > 0; o >>= 1)
		ss += __shfl_xor_sync(0xffffffffu, ss, o);
	__shared__ float partial[NORM_THREADS / 32];
	__shared__ float scale;
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0)
		partial[warp] = ss;
	__syncthreads();
	if (warp == 0) {
		ss = lane < NORM_THREADS / 32 ? partial[lane] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			ss += __shfl_xor_sync(0xffffffffu, ss, o);
		if (lane == 0)
			scale = 1.0f / sqrtf(ss / (float)gs + eps);
	}
	__syncthreads();
	float sc = scale;
	for (int i = threadIdx.x; i < gs; i += NORM_THREADS) {
		float u = gated(yr, zr, i);
		store_out(out, t * ld_out + c0 + (size_t)i, w[c0 + (size_t)i] * (u * sc));
	}
}

extern "C" int gpu_launch_mamba_gated_rmsnorm(void *stream, int T, int d_in, int G, const float *y,
					      size_t ld_y, const float *z, size_t ld_z, const float *w,
					      float eps, void *out, size_t ld_out, int out_bf16)
{
	int gs = d_in / G;
	dim3 grid((unsigned)T, (unsigned)G), block(NORM_THREADS);
	cudaStream_t s = (cudaStream_t)stream;
	if (out_bf16)
		klaunch(mamba_gated_rmsnorm_kernel<__nv_bfloat16>, grid, block, 0, s, y, ld_y, z, ld_z, w,
			eps, (__nv_bfloat16 *)out, ld_out, gs);
	else
		klaunch(mamba_gated_rmsnorm_kernel<float>, grid, block, 0, s, y, ld_y, z, ld_z, w, eps,
			(float *)out, ld_out, gs);
	return GPU_CHECK(cudaGetLastError());
}
