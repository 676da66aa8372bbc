// Mamba-2 SSD chunked scan for prefill (gpu.h gpu_mamba_ssd), as Mamba-2's Triton kernels split
// it, in fp32. With Q the chunk length, per chunk c of L <= Q positions and head h (group g):
//   1. cumsum:   dt[t] = clamp(softplus(dt_raw + dt_bias)), cum[l] = sum_{i<=l} dt[i] A (per chunk)
//   2. cb:       CB[l][s] = C[l] . B[s]                               (per chunk and group, s <= l)
//   3. states:   st_c[p][n] = sum_s exp(cum[L-1] - cum[s]) dt[s] x[s][p] B[s][n]
//   4. passing:  S_0 = state; S_{c+1} = exp(cum_c[L-1]) S_c + st_c; st_c := S_c; state := S_nc
//   5. scan:     y[l][p] = exp(cum[l]) C[l] . S_c[p] + sum_{s<=l} CB[l][s] exp(cum[l]-cum[s])
//                          dt[s] x[s][p] + D x[l][p]
// Steps 2, 3 and 5 are 32 x 32 output tiles over shared-memory operand tiles (256 threads, four
// outputs each: rows ty, ty+8, ty+16, ty+24 of column tx). Step 4 is sequential over chunks, one
// thread per state element. The workspace holds dt and cum [H][nc*Q], CB [nc][G][Q][Q] and the
// chunk states [nc][H][P][N].
#include "gpu_internal.h"
#include "kernel_util.cuh"
#include "klaunch.h"

#include <cuda_runtime.h>

#define TILE 32
#define TILE_THREADS 256

struct ssd_args {
	int T, H, P, N, G, Q, nc, Tp, ngh; // ngh = H / G heads per group
	const float *xbc;
	size_t ld; // of xbc
	float *dtw, *cum, *cb, *st;
};

static __device__ __forceinline__ float softplus_clamp(float r, float lo, float hi)
{
	float v = r > 20.0f ? r : log1pf(expf(r));
	return fminf(fmaxf(v, lo), hi);
}

// grid (nc * H), one warp: a warp-wide inclusive scan per 32 positions, carried along the chunk.
static __global__ void mamba_ssd_cumsum_kernel(struct ssd_args a, const float *__restrict__ dt_raw,
					       size_t ld_dt, const float *__restrict__ dt_bias,
					       const float *__restrict__ a_log, float dt_min, float dt_max)
{
	int c = blockIdx.x / a.H, h = blockIdx.x % a.H, lane = threadIdx.x;
	int t0 = c * a.Q, L = min(a.Q, a.T - t0);
	float A = -expf(a_log[h]), bias = dt_bias[h], carry = 0.0f;
	float *dtw = a.dtw + (size_t)h * a.Tp + t0, *cum = a.cum + (size_t)h * a.Tp + t0;
	for (int base = 0; base < L; base += 32) {
		int i = base + lane;
		float v = 0.0f;
		if (i < L) {
			float d = softplus_clamp(dt_raw[(size_t)(t0 + i) * ld_dt + h] + bias, dt_min, dt_max);
			dtw[i] = d;
			v = d * A;
		}
		for (int o = 1; o < 32; o <<= 1) {
			float u = __shfl_up_sync(0xffffffffu, v, o);
			if (lane >= o)
				v += u;
		}
		v += carry;
		if (i < L)
			cum[i] = v;
		carry = __shfl_sync(0xffffffffu, v, 31);
	}
}

// grid (nc * G, tiles^2): CB of one chunk and group, lower-triangle tiles only.
static __global__ void mamba_ssd_cb_kernel(struct ssd_args a)
{
	int c = blockIdx.x / a.G, g = blockIdx.x % a.G;
	int tiles = (a.Q + TILE - 1) / TILE, tl = blockIdx.y / tiles, ts = blockIdx.y % tiles;
	int t0 = c * a.Q, L = min(a.Q, a.T - t0), l0 = tl * TILE, s0 = ts * TILE;
	if (ts > tl || l0 >= L)
		return;
	__shared__ float As[TILE][TILE + 1], Bs[TILE][TILE + 1];
	int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
	const float *B = a.xbc + (size_t)t0 * a.ld + (size_t)a.H * a.P + (size_t)g * a.N;
	const float *C = B + (size_t)a.G * a.N;
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int n0 = 0; n0 < a.N; n0 += TILE) {
		for (int i = threadIdx.x; i < TILE * TILE; i += TILE_THREADS) {
			int r = i / TILE, k = i % TILE;
			bool nk = n0 + k < a.N;
			As[r][k] = nk && l0 + r < L ? C[(size_t)(l0 + r) * a.ld + n0 + k] : 0.0f;
			Bs[r][k] = nk && s0 + r < L ? B[(size_t)(s0 + r) * a.ld + n0 + k] : 0.0f;
		}
		__syncthreads();
		for (int k = 0; k < TILE; k++) {
			float b = Bs[tx][k];
#pragma unroll
			for (int i = 0; i < 4; i++)
				acc[i] += As[ty + 8 * i][k] * b;
		}
		__syncthreads();
	}
	float *cb = a.cb + ((size_t)c * a.G + g) * a.Q * a.Q;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		int l = l0 + ty + 8 * i, s = s0 + tx;
		if (l < L && s < L)
			cb[(size_t)l * a.Q + s] = acc[i];
	}
}

// grid (nc * H, tiles over P x N): the state each chunk adds on its own.
static __global__ void mamba_ssd_states_kernel(struct ssd_args a)
{
	int c = blockIdx.x / a.H, h = blockIdx.x % a.H, g = h / a.ngh;
	int tiles_n = (a.N + TILE - 1) / TILE;
	int p0 = blockIdx.y / tiles_n * TILE, n0 = blockIdx.y % tiles_n * TILE;
	int t0 = c * a.Q, L = min(a.Q, a.T - t0);
	__shared__ float Xs[TILE][TILE + 1], Bs[TILE][TILE + 1];
	__shared__ float coef[TILE];
	int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
	const float *X = a.xbc + (size_t)t0 * a.ld + (size_t)h * a.P;
	const float *B = a.xbc + (size_t)t0 * a.ld + (size_t)a.H * a.P + (size_t)g * a.N;
	const float *dtw = a.dtw + (size_t)h * a.Tp + t0, *cum = a.cum + (size_t)h * a.Tp + t0;
	float cum_last = cum[L - 1];
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
	for (int s0 = 0; s0 < L; s0 += TILE) {
		if (threadIdx.x < TILE) {
			int s = s0 + threadIdx.x;
			coef[threadIdx.x] = s < L ? expf(cum_last - cum[s]) * dtw[s] : 0.0f;
		}
		__syncthreads();
		for (int i = threadIdx.x; i < TILE * TILE; i += TILE_THREADS) {
			int r = i / TILE, k = i % TILE, s = s0 + r;
			Xs[r][k] = s < L && p0 + k < a.P ? coef[r] * X[(size_t)s * a.ld + p0 + k] : 0.0f;
			Bs[r][k] = s < L && n0 + k < a.N ? B[(size_t)s * a.ld + n0 + k] : 0.0f;
		}
		__syncthreads();
		for (int r = 0; r < TILE; r++) {
			float b = Bs[r][tx];
#pragma unroll
			for (int i = 0; i < 4; i++)
				acc[i] += Xs[r][ty + 8 * i] * b;
		}
		__syncthreads();
	}
	float *st = a.st + ((size_t)c * a.H + h) * a.P * a.N;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		int p = p0 + ty + 8 * i, n = n0 + tx;
		if (p < a.P && n < a.N)
			st[(size_t)p * a.N + n] = acc[i];
	}
}

// grid (ceil(P*N / 256), H): carries the state across chunks; each chunk's slot of st ends up
// holding the state entering that chunk, and `state` the state after the last one. The state is
// fp32 or bf16 (S_t): carried in fp32 across the chunks, a bf16 one is rounded once, at the end.
template <typename S_t>
static __global__ void mamba_ssd_pass_kernel(struct ssd_args a, S_t *__restrict__ state)
{
	int h = blockIdx.y;
	size_t pn = (size_t)a.P * a.N, e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
	if (e >= pn)
		return;
	float S = gpu_load_f32(state[(size_t)h * pn + e]);
	for (int c = 0; c < a.nc; c++) {
		int L = min(a.Q, a.T - c * a.Q);
		float decay = expf(a.cum[(size_t)h * a.Tp + (size_t)c * a.Q + L - 1]);
		size_t i = ((size_t)c * a.H + h) * pn + e;
		float own = a.st[i];
		a.st[i] = S;
		S = decay * S + own;
	}
	gpu_store(state + (size_t)h * pn + e, S);
}

// grid (nc * H, tiles over L x P): the outputs of one chunk and head.
static __global__ void mamba_ssd_scan_kernel(struct ssd_args a, const float *__restrict__ d_skip,
					     float *__restrict__ y, size_t ld_y)
{
	int c = blockIdx.x / a.H, h = blockIdx.x % a.H, g = h / a.ngh;
	int tiles_p = (a.P + TILE - 1) / TILE;
	int l0 = blockIdx.y / tiles_p * TILE, p0 = blockIdx.y % tiles_p * TILE;
	int t0 = c * a.Q, L = min(a.Q, a.T - t0);
	if (l0 >= L)
		return;
	__shared__ float As[TILE][TILE + 1], Bs[TILE][TILE + 1];
	int tx = threadIdx.x % TILE, ty = threadIdx.x / TILE;
	const float *X = a.xbc + (size_t)t0 * a.ld + (size_t)h * a.P;
	const float *C = a.xbc + (size_t)t0 * a.ld + (size_t)a.H * a.P + (size_t)(a.G + g) * a.N;
	const float *S = a.st + ((size_t)c * a.H + h) * a.P * a.N;
	const float *cb = a.cb + ((size_t)c * a.G + g) * a.Q * a.Q;
	const float *dtw = a.dtw + (size_t)h * a.Tp + t0, *cum = a.cum + (size_t)h * a.Tp + t0;
	float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};

	// the state carried in: exp(cum[l]) C[l] . S[p]
	for (int n0 = 0; n0 < a.N; n0 += TILE) {
		for (int i = threadIdx.x; i < TILE * TILE; i += TILE_THREADS) {
			int r = i / TILE, k = i % TILE;
			bool nk = n0 + k < a.N;
			As[r][k] = nk && l0 + r < L ? C[(size_t)(l0 + r) * a.ld + n0 + k] : 0.0f;
			Bs[r][k] = nk && p0 + r < a.P ? S[(size_t)(p0 + r) * a.N + n0 + k] : 0.0f;
		}
		__syncthreads();
		for (int k = 0; k < TILE; k++) {
			float s = Bs[tx][k];
#pragma unroll
			for (int i = 0; i < 4; i++)
				acc[i] += As[ty + 8 * i][k] * s;
		}
		__syncthreads();
	}
#pragma unroll
	for (int i = 0; i < 4; i++) {
		int l = l0 + ty + 8 * i;
		acc[i] *= l < L ? expf(cum[l]) : 0.0f;
	}

	// within the chunk: (CB o decay o dt) X over s <= l
	for (int s0 = 0; s0 <= l0 && s0 < L; s0 += TILE) {
		for (int i = threadIdx.x; i < TILE * TILE; i += TILE_THREADS) {
			int r = i / TILE, k = i % TILE;
			int l = l0 + r, s = s0 + k;
			As[r][k] = l < L && s <= l ?
					   cb[(size_t)l * a.Q + s] * expf(cum[l] - cum[s]) * dtw[s] :
					   0.0f;
			int sx = s0 + r;
			Bs[r][k] = sx < L && p0 + k < a.P ? X[(size_t)sx * a.ld + p0 + k] : 0.0f;
		}
		__syncthreads();
		for (int k = 0; k < TILE; k++) {
			float xv = Bs[k][tx];
#pragma unroll
			for (int i = 0; i < 4; i++)
				acc[i] += As[ty + 8 * i][k] * xv;
		}
		__syncthreads();
	}

	float D = d_skip[h];
#pragma unroll
	for (int i = 0; i < 4; i++) {
		int l = l0 + ty + 8 * i, p = p0 + tx;
		if (l < L && p < a.P)
			y[(size_t)(t0 + l) * ld_y + (size_t)h * a.P + p] =
				acc[i] + D * X[(size_t)l * a.ld + p];
	}
}

static size_t align_floats(size_t n)
{
	return (n + 63) & ~(size_t)63; // 256 bytes
}

extern "C" size_t gpu_mamba_ssd_layout(int T, int H, int P, int N, int G, int Q, size_t off[4])
{
	size_t q = (size_t)Q, nc = ((size_t)T + q - 1) / q, Tp = nc * q;
	size_t sizes[4] = {(size_t)H * Tp, (size_t)H * Tp, nc * (size_t)G * q * q, nc * (size_t)H * P * N};
	size_t at = 0;
	for (int i = 0; i < 4; i++) {
		off[i] = at;
		at += align_floats(sizes[i]);
	}
	return at;
}

extern "C" int gpu_launch_mamba_ssd(void *stream, int T, int H, int P, int N, int G, int Q, const float *xbc,
				    size_t ld_xbc, const float *dt_raw, size_t ld_dt, const float *dt_bias,
				    const float *a_log, const float *d_skip, float dt_min, float dt_max,
				    void *state, int state_bf16, float *y, size_t ld_y, float *workspace)
{
	size_t off[4];
	gpu_mamba_ssd_layout(T, H, P, N, G, Q, off);
	struct ssd_args a;
	a.T = T, a.H = H, a.P = P, a.N = N, a.G = G, a.Q = Q;
	a.nc = (T + Q - 1) / Q, a.Tp = a.nc * Q, a.ngh = H / G;
	a.xbc = xbc, a.ld = ld_xbc;
	a.dtw = workspace + off[0], a.cum = workspace + off[1], a.cb = workspace + off[2];
	a.st = workspace + off[3];

	cudaStream_t s = (cudaStream_t)stream;
	unsigned nch = (unsigned)a.nc * (unsigned)H, tq = (unsigned)((Q + TILE - 1) / TILE);
	unsigned tp = (unsigned)((P + TILE - 1) / TILE), tn = (unsigned)((N + TILE - 1) / TILE);
	int r;
	klaunch(mamba_ssd_cumsum_kernel, dim3(nch), dim3(32), 0, s, a, dt_raw, ld_dt, dt_bias, a_log, dt_min,
		dt_max);
	if ((r = GPU_CHECK(cudaGetLastError())) < 0)
		return r;
	klaunch(mamba_ssd_cb_kernel, dim3((unsigned)a.nc * (unsigned)G, tq * tq), dim3(TILE_THREADS), 0, s, a);
	if ((r = GPU_CHECK(cudaGetLastError())) < 0)
		return r;
	klaunch(mamba_ssd_states_kernel, dim3(nch, tp * tn), dim3(TILE_THREADS), 0, s, a);
	if ((r = GPU_CHECK(cudaGetLastError())) < 0)
		return r;
	size_t pn = (size_t)P * N;
	dim3 pass_grid((unsigned)((pn + 255) / 256), (unsigned)H);
	if (state_bf16)
		klaunch(mamba_ssd_pass_kernel<__nv_bfloat16>, pass_grid, dim3(256), 0, s, a,
			(__nv_bfloat16 *)state);
	else
		klaunch(mamba_ssd_pass_kernel<float>, pass_grid, dim3(256), 0, s, a, (float *)state);
	if ((r = GPU_CHECK(cudaGetLastError())) < 0)
		return r;
	klaunch(mamba_ssd_scan_kernel, dim3(nch, tq * tp), dim3(TILE_THREADS), 0, s, a, d_skip, y, ld_y);
	return GPU_CHECK(cudaGetLastError());
}
