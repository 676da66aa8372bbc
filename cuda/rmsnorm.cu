// RMSNorm, one block per row: fp32 sum of squares reduced through warp shuffles and shared memory.
#include "gpu_internal.h"
#include "klaunch.h"

#include <cuda_runtime.h>

static __global__ void rmsnorm_f32_kernel(const float *__restrict__ x, const float *__restrict__ w,
					  float *__restrict__ out, int cols, float eps)
{
	const float *xr = x + (size_t)blockIdx.x * cols;
	float *yr = out + (size_t)blockIdx.x * cols;
	float ss = 0.0f;
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		ss += xr[c] * xr[c];
	for (int o = 16; o > 0; o >>= 1)
		ss += __shfl_xor_sync(0xffffffffu, ss, o);
	__shared__ float partial[32];
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0)
		partial[warp] = ss;
	__syncthreads();
	if (warp == 0) {
		ss = lane < (int)(blockDim.x / 32) ? partial[lane] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			ss += __shfl_xor_sync(0xffffffffu, ss, o);
		if (lane == 0)
			partial[0] = rsqrtf(ss / cols + eps);
	}
	__syncthreads();
	float inv = partial[0];
	for (int c = threadIdx.x; c < cols; c += blockDim.x)
		yr[c] = xr[c] * inv * w[c];
}

extern "C" int gpu_launch_rmsnorm_f32(void *stream, const float *x, const float *w, float *out, int rows,
				      int cols, float eps)
{
	klaunch(rmsnorm_f32_kernel, dim3(rows), dim3(256), 0, (cudaStream_t)stream, x, w, out, cols, eps);
	return GPU_CHECK(cudaGetLastError());
}
