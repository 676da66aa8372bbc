// Mamba-2 SSM state update for one position (decode; gpu.h gpu_mamba_ssm_step), fused with the
// dt softplus + clamp: one warp per (head, channel p) row of the state, its lanes striding over
// the N state entries, the output reduced with warp shuffles. The state is fp32 or bf16 (S): a
// bf16 entry is widened, updated in fp32 and stored rounded to nearest even.
#include "gpu.h"
#include "gpu_internal.h"
#include "kernel_util.cuh"
#include "klaunch.h"

#include <cuda_runtime.h>

#define STEP_WARPS 8

// grid (H, ceil(P / STEP_WARPS)), STEP_WARPS warps
template <typename S_t>
static __global__ void
mamba_ssm_step_kernel(const float *__restrict__ xbc, const float *__restrict__ dt_raw,
		      const float *__restrict__ dt_bias, const float *__restrict__ a_log,
		      const float *__restrict__ d_skip, float dt_min, float dt_max, S_t *__restrict__ state,
		      float *__restrict__ y, int H, int P, int N, int G)
{
	int h = blockIdx.x, p = blockIdx.y * STEP_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
	if (p >= P)
		return; // whole warps only: the shuffles below see full warps
	int g = h / (H / G);
	float r = dt_raw[h] + dt_bias[h];
	float dt = fminf(fmaxf(r > 20.0f ? r : log1pf(expf(r)), dt_min), dt_max);
	float dA = expf(dt * -expf(a_log[h]));
	float x = xbc[(size_t)h * P + p], dtx = dt * x;
	const float *B = xbc + (size_t)H * P + (size_t)g * N, *C = B + (size_t)G * N;
	S_t *S = state + ((size_t)h * P + p) * N;
	float acc = 0.0f;
	for (int n = lane; n < N; n += 32) {
		float s = dA * gpu_load_f32(S[n]) + dtx * B[n];
		gpu_store(S + n, s);
		acc += s * C[n];
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if (lane == 0)
		y[(size_t)h * P + p] = acc + d_skip[h] * x;
}

extern "C" int gpu_launch_mamba_ssm_step(void *stream, int H, int P, int N, int G, const float *xbc,
					 const float *dt_raw, const float *dt_bias, const float *a_log,
					 const float *d_skip, float dt_min, float dt_max, void *state,
					 int state_bf16, float *y)
{
	dim3 grid((unsigned)H, (unsigned)((P + STEP_WARPS - 1) / STEP_WARPS));
	if (state_bf16)
		klaunch(mamba_ssm_step_kernel<__nv_bfloat16>, grid, dim3(32 * STEP_WARPS), 0,
			(cudaStream_t)stream, xbc, dt_raw, dt_bias, a_log, d_skip, dt_min, dt_max,
			(__nv_bfloat16 *)state, y, H, P, N, G);
	else
		klaunch(mamba_ssm_step_kernel<float>, grid, dim3(32 * STEP_WARPS), 0, (cudaStream_t)stream,
			xbc, dt_raw, dt_bias, a_log, d_skip, dt_min, dt_max, (float *)state, y, H, P, N, G);
	return GPU_CHECK(cudaGetLastError());
}

// grid (H, ceil(P / STEP_WARPS), rows), STEP_WARPS warps: mamba_ssm_step_kernel for row r of
// the activations and the state of sequence seq[r] (at ssm_off floats into its fixed block).
template <typename S_t>
static __global__ void
mamba_ssm_step_rows_kernel(const float *__restrict__ xbc_all, size_t ld_xbc, const float *__restrict__ dt_all,
			   size_t ld_dt, const float *__restrict__ dt_bias, const float *__restrict__ a_log,
			   const float *__restrict__ d_skip, float dt_min, float dt_max,
			   const struct gpu_seq_row *__restrict__ seq, size_t ssm_off,
			   float *__restrict__ y_all, size_t ld_y, int H, int P, int N, int G)
{
	int h = blockIdx.x, p = blockIdx.y * STEP_WARPS + threadIdx.x / 32, lane = threadIdx.x % 32;
	int row = blockIdx.z;
	if (p >= P)
		return;
	float *y = y_all + (size_t)row * ld_y;
	if (seq[row].pos < 0) {
		if (lane == 0)
			y[(size_t)h * P + p] = 0.0f;
		return;
	}
	const float *xbc = xbc_all + (size_t)row * ld_xbc, *dt_raw = dt_all + (size_t)row * ld_dt;
	int g = h / (H / G);
	float r = dt_raw[h] + dt_bias[h];
	float dt = fminf(fmaxf(r > 20.0f ? r : log1pf(expf(r)), dt_min), dt_max);
	float dA = expf(dt * -expf(a_log[h]));
	float x = xbc[(size_t)h * P + p], dtx = dt * x;
	const float *B = xbc + (size_t)H * P + (size_t)g * N, *C = B + (size_t)G * N;
	S_t *S = (S_t *)(seq[row].fixed + ssm_off) + ((size_t)h * P + p) * N;
	float acc = 0.0f;
	for (int n = lane; n < N; n += 32) {
		float s = dA * gpu_load_f32(S[n]) + dtx * B[n];
		gpu_store(S + n, s);
		acc += s * C[n];
	}
	for (int o = 16; o > 0; o >>= 1)
		acc += __shfl_xor_sync(0xffffffffu, acc, o);
	if (lane == 0)
		y[(size_t)h * P + p] = acc + d_skip[h] * x;
}

extern "C" int gpu_launch_mamba_ssm_step_rows(void *stream, int rows, int H, int P, int N, int G,
					      const float *xbc, size_t ld_xbc, const float *dt_raw,
					      size_t ld_dt, const float *dt_bias, const float *a_log,
					      const float *d_skip, float dt_min, float dt_max,
					      const struct gpu_seq_row *seq, size_t ssm_off, int state_bf16,
					      float *y, size_t ld_y)
{
	dim3 grid((unsigned)H, (unsigned)((P + STEP_WARPS - 1) / STEP_WARPS), (unsigned)rows);
	if (state_bf16)
		klaunch(mamba_ssm_step_rows_kernel<__nv_bfloat16>, grid, dim3(32 * STEP_WARPS), 0,
			(cudaStream_t)stream, xbc, ld_xbc, dt_raw, ld_dt, dt_bias, a_log, d_skip, dt_min,
			dt_max, seq, ssm_off, y, ld_y, H, P, N, G);
	else
		klaunch(mamba_ssm_step_rows_kernel<float>, grid, dim3(32 * STEP_WARPS), 0,
			(cudaStream_t)stream, xbc, ld_xbc, dt_raw, ld_dt, dt_bias, a_log, d_skip, dt_min,
			dt_max, seq, ssm_off, y, ld_y, H, P, N, G);
	return GPU_CHECK(cudaGetLastError());
}
