/* gpu-emu suite: WMMA fragments (m16n16k16, bf16 and half inputs, fp32 accumulators) against a
 * scalar reference, for every operand layout and both store layouts, with element-wise work on
 * the accumulator. Runs in the order HOLOD_GPU_EMU_ORDER names.
 * Tolerance: 1e-5 relative + 1e-5 absolute (fp32 accumulation of 64 exact bf16/half products vs a
 * double reference). */
#include "klaunch.h"
#include "test.h"

#include <mma.h>

using namespace nvcuda;

TEST_DEFINE_GLOBALS;

enum { M = 32, N = 48, K = 64 };

/* C[M x N] = 0.5 * (A[M x K] B[K x N]) + 1, one warp per 16x16 tile of C; A and B row-major or
 * column-major in memory (lda/ldb follow), C stored row- or column-major. */
template <typename T, typename LA, typename LB>
static __global__ void gemm_kernel(const T *a, const T *b, float *c, bool c_col)
{
	int warp = (threadIdx.x + blockDim.x * threadIdx.y) / 32;
	int tm = warp / (N / 16), tn = warp % (N / 16);
	bool a_col = std::is_same<LA, wmma::col_major>::value, b_col = std::is_same<LB, wmma::col_major>::value;
	wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LA> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LB> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	wmma::fill_fragment(acc, 0.0f);
	for (int k = 0; k < K; k += 16) {
		const T *pa = a_col ? a + (size_t)k * M + tm * 16 : a + (size_t)tm * 16 * K + k;
		const T *pb = b_col ? b + (size_t)tn * 16 * K + k : b + (size_t)k * N + tn * 16;
		wmma::load_matrix_sync(fa, pa, a_col ? M : K);
		wmma::load_matrix_sync(fb, pb, b_col ? K : N);
		wmma::mma_sync(acc, fa, fb, acc);
	}
	for (int i = 0; i < acc.num_elements; i++)
		acc.x[i] = acc.x[i] * 0.5f + 1.0f;
	if (c_col)
		wmma::store_matrix_sync(c + (size_t)tn * 16 * M + tm * 16, acc, M, wmma::mem_col_major);
	else
		wmma::store_matrix_sync(c + (size_t)tm * 16 * N + tn * 16, acc, N, wmma::mem_row_major);
}

/* An accumulator loaded from memory (C += A B with C's prior contents), row-major. */
template <typename T> static __global__ void accumulate_kernel(const T *a, const T *b, float *c)
{
	wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
	wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> fb;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
	wmma::load_matrix_sync(acc, c, 16, wmma::mem_row_major);
	wmma::load_matrix_sync(fa, a, 16);
	wmma::load_matrix_sync(fb, b, 16);
	wmma::mma_sync(acc, fa, fb, acc);
	wmma::store_matrix_sync(c, acc, 16, wmma::mem_row_major);
}

template <typename T> static float to_f(T v);
template <> float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <> float to_f(__half v) { return __half2float(v); }
template <typename T> static T from_f(float v);
template <> __nv_bfloat16 from_f(float v) { return __float2bfloat16(v); }
template <> __half from_f(float v) { return __float2half(v); }

template <typename T, typename LA, typename LB> static void run_gemm(bool c_col, const char *what)
{
	bool a_col = std::is_same<LA, wmma::col_major>::value, b_col = std::is_same<LB, wmma::col_major>::value;
	T *ha = (T *)malloc(sizeof(T) * M * K), *hb = (T *)malloc(sizeof(T) * K * N);
	float *hc = (float *)malloc(sizeof(float) * M * N);
	/* logical A(i,k), B(k,j): small values that bf16 and half hold exactly */
	for (int i = 0; i < M; i++)
		for (int k = 0; k < K; k++)
			ha[a_col ? k * M + i : i * K + k] = from_f<T>((float)((i * 7 + k * 3) % 11 - 5) * 0.25f);
	for (int k = 0; k < K; k++)
		for (int j = 0; j < N; j++)
			hb[b_col ? j * K + k : k * N + j] = from_f<T>((float)((k * 5 + j * 2) % 9 - 4) * 0.5f);
	T *da, *db;
	float *dc;
	REQUIRE(cudaMalloc((void **)&da, sizeof(T) * M * K) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&db, sizeof(T) * K * N) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dc, sizeof(float) * M * N) == cudaSuccess);
	cudaMemcpy(da, ha, sizeof(T) * M * K, cudaMemcpyHostToDevice);
	cudaMemcpy(db, hb, sizeof(T) * K * N, cudaMemcpyHostToDevice);
	/* 6 warps as a 32x6 block: the warp index comes from a 2D thread index. */
	klaunch(gemm_kernel<T, LA, LB>, dim3(1), dim3(32, (M / 16) * (N / 16)), 0, 0, (const T *)da, (const T *)db, dc,
		c_col);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(hc, dc, sizeof(float) * M * N, cudaMemcpyDeviceToHost);
	int bad = 0;
	for (int i = 0; i < M; i++)
		for (int j = 0; j < N; j++) {
			double want = 0;
			for (int k = 0; k < K; k++)
				want += (double)to_f(ha[a_col ? k * M + i : i * K + k]) * to_f(hb[b_col ? j * K + k : k * N + j]);
			want = want * 0.5 + 1.0;
			float got = hc[c_col ? j * M + i : i * N + j];
			if (!(fabs(got - want) <= 1e-5 + 1e-5 * fabs(want)))
				bad++;
		}
	if (bad) {
		fprintf(stderr, "%s: %d of %d elements wrong\n", what, bad, M * N);
		test_failures++;
	}
	free(ha), free(hb), free(hc);
	cudaFree(da), cudaFree(db), cudaFree(dc);
}

template <typename T> static void run_accumulate(void)
{
	T ha[256], hb[256];
	float hc[256], want[256];
	for (int i = 0; i < 256; i++) {
		ha[i] = from_f<T>((float)(i % 5) - 2.0f);
		hb[i] = from_f<T>((float)(i % 3) * 0.5f);
		hc[i] = (float)i;
	}
	for (int i = 0; i < 16; i++)
		for (int j = 0; j < 16; j++) {
			double s = hc[i * 16 + j];
			for (int k = 0; k < 16; k++)
				s += (double)to_f(ha[i * 16 + k]) * to_f(hb[k * 16 + j]);
			want[i * 16 + j] = (float)s;
		}
	T *da, *db;
	float *dc;
	REQUIRE(cudaMalloc((void **)&da, sizeof(ha)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&db, sizeof(hb)) == cudaSuccess);
	REQUIRE(cudaMalloc((void **)&dc, sizeof(hc)) == cudaSuccess);
	cudaMemcpy(da, ha, sizeof(ha), cudaMemcpyHostToDevice);
	cudaMemcpy(db, hb, sizeof(hb), cudaMemcpyHostToDevice);
	cudaMemcpy(dc, hc, sizeof(hc), cudaMemcpyHostToDevice);
	klaunch(accumulate_kernel<T>, dim3(1), dim3(32), 0, 0, (const T *)da, (const T *)db, dc);
	CHECK_INT_EQ(cudaGetLastError(), cudaSuccess);
	cudaMemcpy(hc, dc, sizeof(hc), cudaMemcpyDeviceToHost);
	for (int i = 0; i < 256; i++)
		CHECK_NEAR(hc[i], want[i], 1e-5 + 1e-5 * fabs(want[i]));
	cudaFree(da), cudaFree(db), cudaFree(dc);
}

int main(void)
{
	typedef wmma::row_major R;
	typedef wmma::col_major C;
	run_gemm<__nv_bfloat16, R, R>(false, "bf16 A row B row C row");
	run_gemm<__nv_bfloat16, R, C>(true, "bf16 A row B col C col");
	run_gemm<__nv_bfloat16, C, R>(false, "bf16 A col B row C row");
	run_gemm<__nv_bfloat16, C, C>(true, "bf16 A col B col C col");
	run_gemm<__half, R, R>(true, "half A row B row C col");
	run_gemm<__half, C, C>(false, "half A col B col C row");
	run_accumulate<__nv_bfloat16>();
	run_accumulate<__half>();
	return test_exit();
}
