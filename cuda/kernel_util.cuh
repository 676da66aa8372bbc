// cuda module internal: small device helpers shared by the kernels (included by .cu files only).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

/* Reads an fp32 or bf16 element as fp32. */
static __device__ inline float gpu_load_f32(float v)
{
	return v;
}
static __device__ inline float gpu_load_f32(__nv_bfloat16 v)
{
	return __bfloat162float(v);
}

/* Stores v as the output's type: fp32 as is, bf16 rounded to nearest even. */
static __device__ inline void gpu_store(float *p, float v)
{
	*p = v;
}
static __device__ inline void gpu_store(__nv_bfloat16 *p, float v)
{
	*p = __float2bfloat16_rn(v);
}

/* Sum and maximum over the warp; every lane gets the result. */
static __device__ inline float gpu_warp_sum(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

static __device__ inline float gpu_warp_max(float v)
{
	for (int o = 16; o > 0; o >>= 1)
		v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

/* Sum over the block (blockDim.x a multiple of 32, at most 1024); every thread gets the total.
 * partial is shared memory of 33 floats; it may be passed again to the next call, since the
 * function waits for every thread to have read the total before returning. */
static __device__ inline float gpu_block_sum(float v, float *partial)
{
	for (int o = 16; o > 0; o >>= 1)
		v += __shfl_xor_sync(0xffffffffu, v, o);
	int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
	if (lane == 0)
		partial[warp] = v;
	__syncthreads();
	if (warp == 0) {
		v = lane < (int)(blockDim.x / 32) ? partial[lane] : 0.0f;
		for (int o = 16; o > 0; o >>= 1)
			v += __shfl_xor_sync(0xffffffffu, v, o);
		if (lane == 0)
			partial[32] = v;
	}
	__syncthreads();
	float total = partial[32];
	__syncthreads();
	return total;
}
