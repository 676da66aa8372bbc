// cuda module internal: the tensor-core flash-attention steps that the LM's prefill attention
// (attention.cu) and the vision tower's attention (vision_ops.cu) share. One warp owns 16 query
// rows and walks the keys in tiles of KT (a multiple of 16); d, the padded head size, is a
// multiple of 16. Operands are bf16, the scores, softmax and accumulators fp32 (included by .cu
// files only).
#pragma once

#include "kernel_util.cuh"

#include <math.h>
#include <mma.h>

/* S[16][KT] = the warp's queries q[16][d] times the tile's keys k[KT][d] transposed. */
template <int KT>
static __device__ inline void gpu_wmma_scores(const __nv_bfloat16 *q, const __nv_bfloat16 *k, float *S, int d)
{
	using namespace nvcuda;
	for (int nb = 0; nb < KT / 16; nb++) {
		wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
		wmma::fill_fragment(acc, 0.0f);
		for (int kk = 0; kk < d / 16; kk++) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
			wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::col_major> b;
			wmma::load_matrix_sync(a, q + kk * 16, d);
			wmma::load_matrix_sync(b, k + (size_t)nb * 16 * d + kk * 16, d);
			wmma::mma_sync(acc, a, b, acc);
		}
		wmma::store_matrix_sync(S + nb * 16, acc, KT, wmma::mem_row_major);
	}
	__syncwarp();
}

/* The online softmax over one tile of keys kb..kb+KT-1: P[16][KT] = exp(S * scale - the rows'
 * new running max) in bf16, O[16][d] rescaled to that max, ml[16][2] = (running max, running
 * sum). valid(r, j): whether row r sees key j; every row must see some key of the first tile, so
 * that the running max is finite from then on. */
template <int KT, typename Valid>
static __device__ inline void gpu_wmma_softmax_tile(const float *S, __nv_bfloat16 *P, float *O, float *ml,
						    int d, int kb, float scale, Valid valid)
{
	int lane = threadIdx.x % 32;
	for (int r = 0; r < 16; r++) {
		int j = kb + lane;
		float sv = valid(r, j) ? S[r * KT + lane] * scale : -INFINITY;
		float m_old = ml[r * 2], m_new = fmaxf(m_old, gpu_warp_max(sv));
		__nv_bfloat16 pb = __float2bfloat16_rn(sv == -INFINITY ? 0.0f : expf(sv - m_new));
		P[r * KT + lane] = pb;
		float rs = gpu_warp_sum(__bfloat162float(pb)), alpha = expf(m_old - m_new);
		for (int i = lane; i < d; i += 32)
			O[r * d + i] *= alpha;
		float l_new = ml[r * 2 + 1] * alpha + rs;
		__syncwarp();
		if (lane == 0) {
			ml[r * 2] = m_new;
			ml[r * 2 + 1] = l_new;
		}
	}
	__syncwarp();
}

/* O[16][d] += P[16][KT] times the tile's values v[KT][d]. */
template <int KT>
static __device__ inline void gpu_wmma_pv(const __nv_bfloat16 *P, const __nv_bfloat16 *v, float *O, int d)
{
	using namespace nvcuda;
	for (int nb = 0; nb < d / 16; nb++) {
		wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
		wmma::load_matrix_sync(acc, O + nb * 16, d, wmma::mem_row_major);
		for (int kk = 0; kk < KT / 16; kk++) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> a;
			wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> b;
			wmma::load_matrix_sync(a, P + kk * 16, KT);
			wmma::load_matrix_sync(b, v + (size_t)kk * 16 * d + nb * 16, d);
			wmma::mma_sync(acc, a, b, acc);
		}
		wmma::store_matrix_sync(O + nb * 16, acc, d, wmma::mem_row_major);
	}
}
